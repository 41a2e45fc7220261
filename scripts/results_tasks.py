#!/usr/bin/python3
"""results_tasks.py - markdown tables for docs/results-tasks.md from task sweeps' results.json.

  scripts/results_tasks.py runs/sweep_task_copy/results.json
  scripts/results_tasks.py runs/sweep_task_passkey/results.json --depths

One row per group of runs (a sweep run's name without its seed; the transform variants
of a run are their own rows), one column per evaluation scale (multiples of the largest
training size), cells the exact-match accuracy (seed mean; needle tasks: the mean over
depths) and, after a slash, the answer-token accuracy. A row whose accuracy at 1x is
below 0.95 is marked, with its value: it did not learn the task in distribution, so its
extrapolation columns say little. Inputs of several tasks name each row's task. The last column is the training time (one thread; seconds, seed mean).
--depths prints, for needle tasks, each group's depth x scale grid instead; --spread each
seed's exact-match row for the groups with two or more seeds. Several inputs are merged
(a sweep and its seed sweep sharing an out dir).
"""
import argparse
import os
import sys
from collections import OrderedDict
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import die, sweep_runs  # noqa: E402


def load(paths):
    """Task runs of every input by group; a run in several inputs (same dir) counts once,
    runs of sweeps in other out dirs never share a row (their out dir is appended)."""
    runs = [r for r in sweep_runs(paths) if "task" in r]
    outs = {}
    for r in runs:
        outs.setdefault(r.get("group", r["name"]), set()).add(r["where"])
    # inputs of several tasks (a multikey sweep beside a counting one): each row names its task
    many = len({r["task"].get("name") for r in runs}) > 1
    groups = OrderedDict()
    for r in runs:
        g = r.get("group", r["name"])
        g = g if len(outs[g]) < 2 else "%s [out %s]" % (g, r["sweep"])
        groups.setdefault("%s: %s" % (r["task"].get("name", "?"), g) if many else g, []).append(r)
    if not groups:
        die("%s: no task runs" % ", ".join(paths))
    return groups


def pooled(runs, keep):
    """{scale: (accuracy, token accuracy)} pooled over runs and over the cells keep() admits."""
    acc = OrderedDict()
    for r in runs:
        for c in r["task"]["results"]:
            if "trials" not in c or not keep(c):
                continue
            a = acc.setdefault(c["scale"], [0, 0, 0.0, 0])
            a[0] += c["correct"]
            a[1] += c["trials"]
            a[2] += c["token_accuracy"] * c["trials"]
            a[3] += c["trials"]
    return OrderedDict((s, (a[0] / a[1], a[2] / a[3])) for s, a in acc.items() if a[1])


def table(groups):
    scales = sorted({c["scale"] for runs in groups.values() for r in runs for c in r["task"]["results"]})
    print("| run | " + " | ".join("%gx" % s for s in scales) + " | train s |")
    print("|---|" + "---:|" * (len(scales) + 1))
    for g, runs in groups.items():
        acc = pooled(runs, lambda c: True)
        first = acc.get(scales[0])
        # the exact value beside the mark: 0.948 prints as 0.95 in the cell
        mark = "" if first and first[0] >= 0.95 else " (below 0.95 at 1x%s)" % (": %.3f" % first[0] if first else "")
        cells = ["%.2f / %.2f" % acc[s] if s in acc else "n/a" for s in scales]
        secs = [r["train"]["seconds"] for r in runs if r.get("train") and r["train"].get("seconds")]
        # transform variants evaluate another run's checkpoint: no training of their own
        t = "%.0f" % (sum(secs) / len(secs)) if secs and "trained_in" not in runs[0] else "(same run)"
        seeds = " (%d seeds)" % len(runs) if len(runs) > 1 else ""
        print("| %s%s%s | %s | %s |" % (g, seeds, mark, " | ".join(cells), t))


def spread(groups):
    """Each seed's exact-match accuracy, for the groups with two or more seeds."""
    scales = sorted({c["scale"] for runs in groups.values() for r in runs for c in r["task"]["results"]})
    print("| run | seed | " + " | ".join("%gx" % s for s in scales) + " |")
    print("|---|---:|" + "---:|" * len(scales))
    for g, runs in groups.items():
        if len(runs) < 2:
            continue
        for r in sorted(runs, key=lambda r: r.get("seed", 0)):
            acc = pooled([r], lambda c: True)
            print("| %s | %d | %s |" % (g, r.get("seed", 0), " | ".join("%.2f" % acc[s][0] if s in acc else "n/a"
                                                                       for s in scales)))


def depth_grids(groups):
    if not any("depth" in c for runs in groups.values() for r in runs for c in r["task"]["results"]):
        die("--depths: no run has a depth grid (a needle task: docs/tasks.md lists them)")
    for g, runs in groups.items():
        depths = sorted({c["depth"] for r in runs for c in r["task"]["results"] if "depth" in c})
        if not depths:
            continue
        scales = sorted({c["scale"] for r in runs for c in r["task"]["results"]})
        print("\n%s:\n\n| depth | %s |" % (g, " | ".join("%gx" % s for s in scales)))
        print("|---:|" + "---:|" * len(scales))
        for d in depths:
            acc = pooled(runs, lambda c, d=d: c.get("depth") == d)
            print("| %g | %s |" % (d, " | ".join("%.2f" % acc[s][0] if s in acc else "n/a" for s in scales)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="task sweeps' results.json (merged: e.g. a sweep and its seed sweep)")
    view = p.add_mutually_exclusive_group()   # one table at a time (probe 29: --depths --spread dropped one)
    view.add_argument("--depths", action="store_true", help="needle tasks: depth x scale grids")
    view.add_argument("--spread", action="store_true", help="each seed's row, for groups with two or more seeds")
    a = p.parse_args()
    groups = load(a.results)
    if a.spread:
        spread(groups)
    elif a.depths:
        depth_grids(groups)
    else:
        table(groups)


if __name__ == "__main__":
    main()
