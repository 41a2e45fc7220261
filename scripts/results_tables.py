#!/usr/bin/python3
"""results_tables.py - markdown tables for docs/results.md from sweeps' results.json.

  scripts/results_tables.py runs/results_ts/results.json --mode sliding
  scripts/results_tables.py runs/results_ts/results.json --mode nonoverlapping --spread

One row per group of runs (a sweep's run name without its seed; a "-MODE" suffix is
dropped, as in plot.py --mode), one column per evaluation length, cells the perplexity:
the geometric mean over seeds (exp of the mean loss), "n/a" where a run could not be
evaluated. The best cell of each column is bold; --relative adds each cell's change
against the group's own first length. Several inputs are merged (a run that appears in
more than one, e.g. a sweep and its seed sweep sharing an out dir, counts once); runs of
sweeps with other out dirs are never averaged together: a group name found in several
gets its out dir appended ("alibi [out runs/b]").
--spread prints, for the groups with two or more seeds, each seed's row and the spread
|max - min| / mean of the perplexities per length instead.
"""
import argparse
import math
import os
import sys
from collections import OrderedDict
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import die, read_json, run_dir, split_labels, sweep_out  # noqa: E402


def load(paths, mode):
    runs = OrderedDict()
    for path in paths:
        doc = read_json(path)
        if "runs" not in doc:
            die("%s: not a sweep's results.json" % path)
        for r in doc["runs"]:
            if "results" not in r or r.get("mode") != mode:
                continue
            g = r.get("group", r["name"])
            if g.endswith("-" + mode):
                g = g[:-len(mode) - 1]
            runs[run_dir(r)] = dict(r, label=g, key={"out": sweep_out(doc, path)})
    if not runs:
        die("no finished run evaluated with mode %s in %s" % (mode, ", ".join(paths)))
    split_labels(list(runs.values()))
    groups = OrderedDict()
    for r in runs.values():
        groups.setdefault(r["label"], []).append(r)
    return groups


def cell(members, length):
    """(geometric-mean ppl, per-seed ppls) at length, or (None, []) when none is ok."""
    losses = []
    for r in members:
        for x in r["results"]:
            if x["length"] == length and x.get("status") == "ok":
                losses.append(x["loss"])
    if not losses:
        return None, []
    return math.exp(sum(losses) / len(losses)), [math.exp(v) for v in losses]


def fmt(v):
    return "n/a" if v is None else ("%.1f" % v if v >= 100 else "%.3f" % v if v < 10 else "%.2f" % v)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+")
    p.add_argument("--mode", choices=["nonoverlapping", "sliding"], default="nonoverlapping")
    p.add_argument("--only", default="", metavar="GROUP,...", help="these groups, in this order")
    p.add_argument("--spread", action="store_true", help="seed-to-seed table of the groups with >= 2 seeds")
    p.add_argument("--relative", action="store_true", help="add the change against the first length")
    args = p.parse_args()
    groups = load(args.inputs, args.mode)
    if args.only:
        want = [g for g in args.only.split(",") if g]
        missing = [g for g in want if g not in groups]
        if missing:
            die("--only: no group %s (have: %s)" % (", ".join(missing), ", ".join(groups)))
        groups = OrderedDict((g, groups[g]) for g in want)
    lengths = sorted({x["length"] for m in groups.values() for r in m for x in r["results"]})
    L = sorted({r.get("seq_len") for m in groups.values() for r in m if r.get("seq_len")})
    head = ["%d (%s)" % (n, "%gx" % (n / L[0])) if len(L) == 1 else str(n) for n in lengths]
    if args.spread:
        print("| method | seed | " + " | ".join(head) + " |")
        print("|---|---|" + "---:|" * len(lengths))
        for g, members in groups.items():
            seeds = sorted(members, key=lambda r: r.get("seed") or 0)
            if len(seeds) < 2:
                continue
            for i, r in enumerate(seeds):
                cells = [fmt(cell([r], n)[0]) for n in lengths]
                print("| %s | %s | %s |" % (g if i == 0 else "", r.get("seed"), " | ".join(cells)))
            spread = []
            for n in lengths:
                _, per = cell(seeds, n)
                spread.append("%.1f%%" % (100 * (max(per) - min(per)) / (sum(per) / len(per))) if len(per) > 1 else "n/a")
            print("| | spread | %s |" % " | ".join(spread))
        return
    table = OrderedDict((g, [cell(m, n)[0] for n in lengths]) for g, m in groups.items())
    best = [min((v[i] for v in table.values() if v[i] is not None), default=None) for i in range(len(lengths))]
    print("| method | seeds | " + " | ".join(head) + " |")
    print("|---|---:|" + "---:|" * len(lengths))
    for g, vals in table.items():
        cells = []
        for i, v in enumerate(vals):
            c = fmt(v)
            if v is not None and v == best[i]:
                c = "**%s**" % c
            if args.relative and i > 0 and v is not None and vals[0] is not None:
                c += " (%+.0f%%)" % (100 * (v / vals[0] - 1))
            cells.append(c)
        seeds = len({r.get("seed") for r in groups[g]})
        print("| %s | %d | %s |" % (g, seeds, " | ".join(cells)))


if __name__ == "__main__":
    main()
