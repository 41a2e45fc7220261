#!/usr/bin/python3
"""plot.py - extrapolation plots from `stretch sweep` / `stretch eval` output.

  scripts/plot.py runs/sweep_x/results.json -o fig1.png
  scripts/plot.py runs/a/eval_valid_nonoverlapping.json runs/b/eval_valid_nonoverlapping.json -o fig.png
  scripts/plot.py runs/sweep_x/results.json --per-position --length 1024 -o pos.png

Default plot (as Figure 1 of Press et al., "Train Short, Test Long"): perplexity (log y) vs
evaluation length (log2 x), one line per group of runs (a sweep's run name without the
train.seed part, e.g. "alibi_rf-exp" or "rope, seq_len-64"; for eval reports the
position method), a vertical dashed line at each training length. Runs that differ only
in train.seed are averaged (runs of one sweep out dir; reports of the same model and
training length: a label shared by other runs gets what tells them apart, e.g.
"alibi [out runs/b]" or "alibi [seq_len 32]"): the mean loss over seeds, shown as exp(mean loss), i.e. the
geometric mean of perplexity (bits per byte: the arithmetic mean). Lengths a run could not
be evaluated at (e.g. beyond a learned-position table) are left out of its line.

--mode M keeps the runs evaluated with protocol M (nonoverlapping or sliding) and drops a
"-M" suffix from their group names (a sweep that evaluates both protocols names the second
variant e.g. "alibi-sliding"); --only GROUP,... keeps those lines (after that renaming).

--per-position: the mean loss by position within the window at one evaluation length
(the report's buckets; token-weighted over seeds), showing where in the window the loss
rises once positions pass the training length.

Run with /usr/bin/python3 (Debian's python3-matplotlib). Writes a PNG (or any format
matplotlib knows from the extension).
"""
import argparse
import math
import os
import sys
from collections import OrderedDict

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import die, read_json, run_dir, split_labels, sweep_out  # noqa: E402

PLAIN = FuncFormatter(lambda v, _: "%g" % v)


def plain_axes(ax, logy):
    """Tick labels as plain numbers (16, 1024; 20, 30) instead of 2^4 / 2x10^1."""
    ax.xaxis.set_major_formatter(PLAIN)
    if logy:
        ax.yaxis.set_major_formatter(PLAIN)
        ax.yaxis.set_minor_formatter(PLAIN if ax.get_ylim()[1] / ax.get_ylim()[0] < 10 else NullFormatter())


def pos_label(model):
    rf = model.get("rf_kind")
    return model.get("pos", "?") + ("-" + rf if rf else "")


def load_runs(paths):
    """Every input as a list of runs: {label, seq_len, seed, unit, results}."""
    runs, seen = [], set()
    for path in paths:
        doc = read_json(path)
        if "runs" in doc:            # a sweep's results.json
            for r in doc["runs"]:
                if "results" not in r or run_dir(r) in seen:
                    continue         # not finished, or already read from another input
                seen.add(run_dir(r))   # (a seed sweep sharing the out dir)
                # the sweep's group: the run name without its seed ("alibi_rf-exp",
                # "pos-rope__seq_len-64"); a "pos-X" part is shown as X
                parts = r.get("group", r.get("name", "?")).split("__")
                label = ", ".join(p[4:] if p.startswith("pos-") else p for p in parts)
                runs.append(dict(label=label, key={"out": sweep_out(doc, path)},
                                 seq_len=r.get("seq_len"), seed=r.get("seed"),
                                 unit=r.get("unit", "token"), split=r.get("split"), mode=r.get("mode"),
                                 bucket_scale=r.get("bucket_scale"), entropy_rate=r.get("entropy_rate"),
                                 results=r["results"]))
        elif "results" in doc and "model" in doc:   # one `stretch eval` report
            xf = doc.get("transform", {}).get("label")   # inference-time transform, if any
            # averaged with other reports only when the model and its training length agree
            key = dict(doc["model"], seq_len=doc.get("train", {}).get("seq_len"))
            runs.append(dict(label=pos_label(doc["model"]) + (" + " + xf if xf else ""), key=key,
                             seq_len=doc.get("train", {}).get("seq_len"),
                             seed=doc.get("train", {}).get("seed"), unit=doc.get("data", {}).get("unit", "token"),
                             split=doc.get("split"), mode=doc.get("mode"), bucket_scale=doc.get("bucket_scale"),
                             entropy_rate=doc.get("data", {}).get("entropy_rate"), results=doc["results"]))
        else:
            die("%s: neither a sweep's results.json nor a `stretch eval` report" % path)
    if not runs:
        die("no evaluated runs in " + ", ".join(paths))
    return runs


def group(runs):
    groups = OrderedDict()
    for r in runs:
        groups.setdefault(r["label"], []).append(r)
    return groups


def curve(members, metric):
    """(lengths, values) of a group: mean over its runs at each length they all could do."""
    by_len = OrderedDict()
    for r in members:
        for x in r["results"]:
            if x.get("status") != "ok":
                continue
            by_len.setdefault(x["length"], []).append(x)
    xs, ys = [], []
    for L in sorted(by_len):
        rows = by_len[L]
        if metric == "ppl":
            y = math.exp(sum(x["loss"] for x in rows) / len(rows))
        elif metric == "loss":
            y = sum(x["loss"] for x in rows) / len(rows)
        else:
            vals = [x.get("bpb") for x in rows]
            if any(v is None for v in vals):
                continue
            y = sum(vals) / len(vals)
        xs.append(L)
        ys.append(y)
    return xs, ys


def train_lengths(runs):
    return sorted({r["seq_len"] for r in runs if r.get("seq_len")})


def describe(runs):
    r = runs[0]
    unit = {"word": "word-level", "byte": "byte-level", "token": "token-level"}.get(r["unit"], r["unit"])
    return "%s, %s split, %s" % (unit, r.get("split") or "?", r.get("mode") or "?")


def style(i):
    """Line i's look: matplotlib's 10 colours, then the same colours dashed with other
    markers, so an 11th method never shares the look of the 1st."""
    return {"color": "C%d" % (i % 10), "ls": ("-", "--", ":")[(i // 10) % 3], "marker": "os^"[(i // 10) % 3]}


def plot_lengths(runs, args):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, members) in enumerate(group(runs).items()):
        if label in args.exclude:
            continue
        xs, ys = curve(members, args.metric)
        if not xs:
            continue
        seeds = len({m["seed"] for m in members})
        ax.plot(xs, ys, ms=4, label=label + (" (%d seeds)" % seeds if seeds > 1 else ""), **style(i))
    ideal = {r.get("entropy_rate") for r in runs}
    if len(ideal) == 1 and None not in ideal and args.metric in ("ppl", "loss"):
        h = ideal.pop()   # synthetic source: the best achievable loss
        ax.axhline(math.exp(h) if args.metric == "ppl" else h, color="black", ls=":", lw=1,
                   label="source entropy rate (ideal)")
    for L in train_lengths(runs):
        ax.axvline(L, color="gray", ls="--", lw=1)
        ax.text(L, 0.98, " L=%d" % L, transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="gray")
    ax.set_xscale("log", base=2)
    if args.metric == "ppl":
        ax.set_yscale("log")
    plain_axes(ax, args.metric == "ppl")
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel({"ppl": "perplexity", "loss": "loss (nats/token)", "bpb": "bits per byte"}[args.metric])
    ax.set_title(args.title or "Extrapolation: " + describe(runs), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_positions(runs, args):
    lengths = sorted({x["length"] for r in runs for x in r["results"] if x.get("status") == "ok" and x.get("buckets")})
    if not lengths:
        die("no per-position buckets in the input (evaluate with --buckets N)")
    L = args.length or lengths[-1]
    if L not in lengths:
        die("no per-position buckets at length %d (have: %s)" % (L, ", ".join(map(str, lengths))))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    log2 = False
    for i, (label, members) in enumerate(group(runs).items()):   # i: same look as plot_lengths
        if label in args.exclude:
            continue
        acc = OrderedDict()   # (lo, hi) -> [nll, tokens]
        for r in members:
            for x in r["results"]:
                if x["length"] != L or x.get("status") != "ok":
                    continue
                for b in x.get("buckets", []):
                    a = acc.setdefault((b["lo"], b["hi"]), [0.0, 0])
                    a[0] += b["nll"]
                    a[1] += b["tokens"]
        pts = [((lo + hi - 1) / 2.0, nll / n) for (lo, hi), (nll, n) in acc.items() if n > 0]
        if not pts:
            continue
        log2 = log2 or any(m.get("bucket_scale") == "log2" for m in members)
        xs = [p for p, _ in pts]
        ys = [math.exp(v) if args.metric == "ppl" else v for _, v in pts]
        ax.plot(xs, ys, label=label, ms=3, **style(i))
    for Lt in train_lengths(runs):
        if Lt < L:
            ax.axvline(Lt, color="gray", ls="--", lw=1)
            ax.text(Lt, 0.98, " L=%d" % Lt, transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="gray")
    if log2:
        ax.set_xscale("symlog", base=2, linthresh=1)
    ax.set_xlabel("position in the window (tokens of context - 1)")
    ax.set_ylabel("perplexity" if args.metric == "ppl" else "loss (nats/token)")
    if args.metric == "ppl":
        ax.set_yscale("log")
    plain_axes(ax, args.metric == "ppl")
    ax.set_title(args.title or "Loss by position at evaluation length %d: %s" % (L, describe(runs)), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="a sweep's results.json and/or `stretch eval` JSON reports")
    p.add_argument("-o", "--out", default="extrapolation.png", help="output image (default %(default)s)")
    p.add_argument("--metric", choices=["ppl", "bpb", "loss"], default=None,
                   help="y axis (default: ppl; loss for --per-position)")
    p.add_argument("--per-position", action="store_true", help="loss by position within the window")
    p.add_argument("--length", type=int, default=0, help="--per-position: the evaluation length (default: longest)")
    p.add_argument("--title", default="")
    p.add_argument("--exclude", default="", metavar="GROUP,...",
                   help="leave these lines out (e.g. one that dwarfs the rest); the others keep their colours")
    p.add_argument("--mode", choices=["nonoverlapping", "sliding"], default=None,
                   help="only runs evaluated with this protocol (a '-MODE' suffix of their names is dropped)")
    p.add_argument("--only", default="", metavar="GROUP,...", help="only these lines")
    args = p.parse_args()
    args.exclude = [x for x in args.exclude.split(",") if x]
    args.only = [x for x in args.only.split(",") if x]
    if args.metric is None:
        args.metric = "loss" if args.per_position else "ppl"
    if args.per_position and args.metric == "bpb":
        die("--per-position shows loss or ppl")
    runs = load_runs(args.inputs)
    if args.mode:
        runs = [r for r in runs if r.get("mode") == args.mode]
        if not runs:
            die("--mode %s: no run was evaluated with that protocol" % args.mode)
        for r in runs:
            if r["label"].endswith("-" + args.mode):
                r["label"] = r["label"][:-len(args.mode) - 1]
    split_labels(runs)
    lines = group(runs)
    unknown = [x for x in args.only if x not in lines]
    if unknown:
        die("--only: no line named %s (have: %s)" % (", ".join(unknown), ", ".join(lines)))
    if args.only:
        runs = [r for r in runs if r["label"] in args.only]
        lines = group(runs)
    unknown = [x for x in args.exclude if x not in lines]
    if unknown:
        die("--exclude: no line named %s (have: %s)" % (", ".join(unknown), ", ".join(lines)))
    if args.metric == "bpb" and any(r["unit"] != "byte" for r in runs):
        die("bits per byte needs byte-level data (unit 'byte')")
    fig = plot_positions(runs, args) if args.per_position else plot_lengths(runs, args)
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    print("wrote " + args.out)


if __name__ == "__main__":
    main()
