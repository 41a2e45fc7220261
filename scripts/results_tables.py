#!/usr/bin/python3
"""results_tables.py - markdown tables for docs/results.md from sweeps' results.json.

  scripts/results_tables.py runs/results_ts/results.json --mode sliding
  scripts/results_tables.py runs/results_ts/results.json --mode nonoverlapping --spread

One row per group of runs (a sweep's run name without its seed; a "-MODE" suffix is
dropped, as in plot.py --mode), one column per evaluation length, cells the perplexity:
the geometric mean over seeds (exp of the mean loss; "inf" where it overflows), "n/a"
where no run of the group could be evaluated. Runs a sweep did not evaluate (failed,
pending, incomplete) keep their group's row: the seeds column says "1 of 2" ("0 of 2":
every cell n/a) and a line under the table names them. The best cell of each column is
bold; --relative adds each cell's change against the group's own first length. Several
inputs are merged (a run that appears in more than one, e.g. a sweep and its seed sweep
sharing an out dir, counts once); runs of other sweeps (another directory of the
results.json, even with the same relative "out") are never averaged together: a group
name found in several gets its out dir appended ("alibi [out runs/b]").
--spread prints, for the groups with two or more evaluated seeds, each seed's row and
the spread |max - min| / mean of the perplexities per length instead (an error when no
group has two).
"""
import argparse
import math
import os
import sys
from collections import OrderedDict
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import (attach_unevaluated, die, exp, planned_mode, split_labels, sweep_key,  # noqa: E402
                        sweep_runs, unevaluated_note)


def load(paths, mode):
    """(groups: label -> evaluated runs, in the sweeps' order; runs not evaluated)"""
    every = sweep_runs(paths)
    runs, missing, order = [], [], []
    for r in every:
        if r["evaluated"]:
            if r.get("mode") != mode:
                continue
        elif planned_mode(r, every) not in (mode, None):
            continue
        g = r.get("group", r.get("name", "?"))
        if g.endswith("-" + mode):
            g = g[:-len(mode) - 1]
        x = dict(r, label=g, key=sweep_key(r))
        (runs if r["evaluated"] else missing).append(x)
        order.append(x)
    if not runs:
        die("no finished run evaluated with mode %s in %s%s" % (mode, ", ".join(paths),
                                                                "; " + unevaluated_note(missing) if missing else ""))
    split_labels(runs)
    attach_unevaluated(missing, runs)
    groups = OrderedDict()
    for r in order:   # a group none of whose runs was evaluated keeps its row (n/a)
        groups.setdefault(r["label"], [])
        if r["evaluated"]:
            groups[r["label"]].append(r)
    return groups, missing


def cell(members, length):
    """(geometric-mean ppl, per-seed ppls) at length, or (None, []) when none is ok."""
    losses = []
    for r in members:
        for x in r["results"]:
            if x["length"] == length and x.get("status") == "ok":
                losses.append(x["loss"])
    if not losses:
        return None, []
    return exp(sum(losses) / len(losses)), [exp(v) for v in losses]


def fmt(v):
    """"n/a", "inf" (exp overflows), or 3-4 significant digits"""
    if v is None:
        return "n/a"
    return "%.3g" % v if 1e6 <= v < math.inf else "%.1f" % v if v >= 100 else "%.3f" % v if v < 10 else "%.2f" % v


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+")
    p.add_argument("--mode", choices=["nonoverlapping", "sliding"], default="nonoverlapping")
    p.add_argument("--only", default="", metavar="GROUP,...", help="these groups, in this order")
    p.add_argument("--spread", action="store_true", help="seed-to-seed table of the groups with >= 2 seeds")
    p.add_argument("--relative", action="store_true", help="add the change against the first length")
    args = p.parse_args()
    groups, missing = load(args.inputs, args.mode)
    if args.only:
        want = [g for g in args.only.split(",") if g]
        unknown = [g for g in want if g not in groups]
        if unknown:
            die("--only: no group %s (have: %s)" % (", ".join(unknown), ", ".join(groups)))
        groups = OrderedDict((g, groups[g]) for g in want)
        missing = [m for m in missing if m["label"] in want]
    lengths = sorted({x["length"] for m in groups.values() for r in m for x in r["results"]})
    L = sorted({r.get("seq_len") for m in groups.values() for r in m if r.get("seq_len")})
    head = ["%d (%s)" % (n, "%gx" % (n / L[0])) if len(L) == 1 else str(n) for n in lengths]
    if args.spread:
        if not any(len(m) >= 2 for m in groups.values()):
            die("--spread: no group has two or more evaluated seeds (have: %s)"
                % ", ".join("%s %d" % (g, len(m)) for g, m in groups.items()))
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
                ok = len(per) > 1 and all(math.isfinite(v) for v in per)
                spread.append("%.1f%%" % (100 * (max(per) - min(per)) / (sum(per) / len(per))) if ok else "n/a")
            print("| | spread | %s |" % " | ".join(spread))
        note(missing)
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
        print("| %s | %s | %s |" % (g, seeds_cell(g, groups[g], missing), " | ".join(cells)))
    note(missing)


def seeds_cell(g, members, missing):
    """The seeds a row's cells average: "2", or "1 of 2" when runs of it were not evaluated"""
    n = len({r.get("seed") for r in members})
    lost = len([m for m in missing if m["label"] == g])
    return "%d of %d" % (n, n + lost) if lost else "%d" % n


def note(missing):
    """Runs without results are named under the table: never left out silently"""
    if missing:
        print("\nLeft out of the cells: %s." % unevaluated_note(missing))


if __name__ == "__main__":
    main()
