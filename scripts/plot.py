#!/usr/bin/python3
"""plot.py - extrapolation plots from `stretch sweep` / `stretch eval` output.

  scripts/plot.py runs/sweep_x/results.json -o fig1.png
  scripts/plot.py runs/a/eval_valid_nonoverlapping.json runs/b/eval_valid_nonoverlapping.json -o fig.png
  scripts/plot.py runs/sweep_x/results.json --per-position --length 1024 -o pos.png

Default plot (as Figure 1 of Press et al., "Train Short, Test Long"): perplexity (log y) vs
evaluation length (log2 x), one line per group of runs (a sweep's run name without the
train.seed part, e.g. "alibi_rf-exp" or "rope, seq_len-64"; for eval reports the
position method), a vertical dashed line at each training length. Runs that differ only
in train.seed are averaged: runs of one sweep (the directory of its results.json) evaluated
with one protocol; eval reports that agree in model, training length and precision, checkpoint step,
data, split, mode, stride, tokens, precision and transform. A label shared by runs that
differ otherwise gets what tells them apart, naming only what is known for both and
differs, and of that the fewest fields that tell them apart (what was chosen before what
follows from it: the data before its vocabulary and parameter count), e.g. "alibi [out
runs/b]", "alibi [seq_len 32]", "alibi [mode sliding]", "alibi [data source=wikitext]",
"alibi [eval report]". The average is the mean loss over seeds, shown as exp(mean loss),
i.e. the geometric mean of perplexity (bits per byte: the arithmetic mean); a perplexity
that overflows (a diverged run) is inf, not drawn, with a warning. Lengths a run could
not be evaluated at (e.g. beyond a learned-position table) are left out of its line; runs
a sweep did not evaluate (failed, pending) are named in a warning and the legend counts
them ("rope (1 of 2 seeds)").

--mode M keeps the runs evaluated with protocol M (nonoverlapping or sliding) and drops a
"-M" suffix from their group names (a sweep that evaluates both protocols names the second
variant e.g. "alibi-sliding"); --only GROUP,... keeps those lines (after that renaming).

--metric distance|entropy|first|far: the attention statistics of `stretch eval --attn-stats`
(mean key distance, entropy, mass on the first key, mass beyond the training length),
averaged over heads and layers (--layer N: that layer's heads), then over the line's runs.

--per-position: the mean loss by position within the window at one evaluation length
(the report's buckets; token-weighted over seeds), showing where in the window the loss
rises once positions pass the training length. The runs of a line must have the same
buckets at that length (other --buckets / --bucket-scale layouts are refused).

Run with /usr/bin/python3 (Debian's python3-matplotlib). Writes a PNG (or any format
matplotlib knows from the extension; a missing directory is made). Errors: one line,
"plot.py: error: ...", exit 2 (1 when the image cannot be written).
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
from sweep_json import (attach_unevaluated, check_figure_path, die, exp, planned_mode, read_json,  # noqa: E402
                        report_key, save_figure, split_labels, sweep_doc, sweep_key, sweep_runs,
                        unevaluated_note, warn)

PLAIN = FuncFormatter(lambda v, _: "%g" % v)


def plain_axes(ax, logy):
    """Tick labels as plain numbers (16, 1024; 20, 30) instead of 2^4 / 2x10^1."""
    ax.xaxis.set_major_formatter(PLAIN)
    if logy:
        ax.yaxis.set_major_formatter(PLAIN)
        ax.yaxis.set_minor_formatter(PLAIN if ax.get_ylim()[1] / ax.get_ylim()[0] < 10 else NullFormatter())


# the report keys of the methods' variants (the registry's variant_key of each method:
# src/model/pos/alibi_rf.c, kerple.c, alibi.c), "alibi_rf-exp", "kerple-power", "alibi-heads4"
VARIANT_KEYS = ("rf_kind", "kerple_kind", "alibi_heads")


def pos_label(model):
    v = next((model[k] for k in VARIANT_KEYS if model.get(k)), None)
    return model.get("pos", "?") + ("-" + v if v else "")


def load_runs(paths):
    """Every input as a list of runs: {label, key, seq_len, seed, unit, results, ...}, and
    the sweep runs that have no results (failed, pending, incomplete)."""
    runs, docs = [], {}
    for path in paths:
        doc = read_json(path)
        if "runs" in doc:            # a sweep's results.json
            docs[path] = sweep_doc(path)
        elif "results" in doc and "model" in doc:   # one `stretch eval` report
            docs[path] = doc
        else:
            die("%s: neither a sweep's results.json nor a `stretch eval` report" % path)
    sweeps = [p for p in paths if "runs" in docs[p]]
    swept = sweep_runs(sweeps, docs)
    missing = []
    for r in swept:   # each run once (a seed sweep sharing the out dir lists it again)
        # the sweep's group: the run name without its seed ("alibi_rf-exp",
        # "pos-rope__seq_len-64"); a "pos-X" part is shown as X
        parts = r.get("group", r.get("name", "?")).split("__")
        label = ", ".join(p[4:] if p.startswith("pos-") else p for p in parts)
        if not r["evaluated"]:
            missing.append(dict(r, label=label))
            continue
        runs.append(dict(label=label, key=sweep_key(r), path=r["path"], where=r["where"], group=r.get("group"),
                         name=r.get("name"), seq_len=r.get("seq_len"), seed=r.get("seed"),
                         unit=r.get("unit", "token"), split=r.get("split"), mode=r.get("mode"),
                         bucket_scale=r.get("bucket_scale"), entropy_rate=r.get("entropy_rate"),
                         results=r["results"]))
    seen = set()
    for path in paths:
        doc = docs[path]
        if "runs" in doc or os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        xf = (doc.get("transform") or {}).get("label")   # inference-time transform, if any
        train = doc.get("train") or {}
        # averaged with other reports only when what report_key holds agrees
        runs.append(dict(label=pos_label(doc["model"]) + (" + " + xf if xf else ""), key=report_key(doc),
                         path=path, report=True, seq_len=train.get("seq_len"), seed=train.get("seed"),
                         unit=(doc.get("data") or {}).get("unit", "token"), split=doc.get("split"),
                         mode=doc.get("mode"), bucket_scale=doc.get("bucket_scale"),
                         entropy_rate=(doc.get("data") or {}).get("entropy_rate"), results=doc["results"]))
    if not runs:
        die("no evaluated runs in %s%s" % (", ".join(paths), "; " + unevaluated_note(missing) if missing else ""))
    for m in missing:
        m["mode"] = planned_mode(m, swept)
    return runs, missing


def group(runs):
    groups = OrderedDict()
    for r in runs:
        groups.setdefault(r["label"], []).append(r)
    return groups


ATTN = {"distance": "mean key distance (tokens)", "entropy": "attention entropy (nats)",
        "first": "attention mass on the first key", "far": "attention mass beyond the training length"}


def attn_mean(row, metric, layer):
    """A report row's attention statistic over heads (and layers, layer None); None without"""
    a = row.get("attention")
    if not a:
        return None
    layers = a[metric] if layer is None else a[metric][layer:layer + 1]
    vals = [v for heads in layers for v in heads if v is not None]
    return sum(vals) / len(vals) if vals else None


def curve(members, metric, layer=None):
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
            y = exp(sum(x["loss"] for x in rows) / len(rows))
        elif metric == "loss":
            y = sum(x["loss"] for x in rows) / len(rows)
        elif metric in ATTN:
            vals = [attn_mean(x, metric, layer) for x in rows]
            if any(v is None for v in vals):
                continue
            y = sum(vals) / len(vals)
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
    """"token-level, valid split, nonoverlapping"; what the runs do not share is listed
    ("nonoverlapping / sliding": the lines' labels tell which is which)"""
    def all_of(k):
        return " / ".join(sorted({str(r.get(k) or "?") for r in runs}))
    unit = " / ".join(sorted({{"word": "word-level", "byte": "byte-level", "token": "token-level"}.get(r["unit"], str(r["unit"]))
                              for r in runs}))
    return "%s, %s split, %s" % (unit, all_of("split"), all_of("mode"))


def seeds_text(members, missing):
    """" (3 seeds)", or " (1 of 2 seeds)" when runs of the line were not evaluated"""
    seeds = len({m["seed"] for m in members})
    total = seeds + len([m for m in missing if m["label"] == members[0]["label"]])
    if total > seeds:
        return " (%d of %d seeds)" % (seeds, total)
    return " (%d seeds)" % seeds if seeds > 1 else ""


def warn_infinite(label, xs, ys, metric, where="lengths"):
    """Points a plot cannot show (a diverged run's perplexity overflows to inf), named"""
    bad = [x for x, y in zip(xs, ys) if not math.isfinite(y)]
    if bad:
        warn("%s: %s at %s %s: not drawn%s" % (
            label, "perplexity inf (its loss overflows exp)" if metric == "ppl" else "non-finite " + metric, where,
            ", ".join("%g" % x for x in bad), " (--metric loss shows it)" if metric == "ppl" else ""))


def style(i):
    """Line i's look: matplotlib's 10 colours, then the same colours dashed with other
    markers, so an 11th method never shares the look of the 1st."""
    return {"color": "C%d" % (i % 10), "ls": ("-", "--", ":")[(i // 10) % 3], "marker": "os^"[(i // 10) % 3]}


def plot_lengths(runs, missing, args):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, members) in enumerate(group(runs).items()):
        if label in args.exclude:
            continue
        xs, ys = curve(members, args.metric, args.layer)
        if not xs:
            continue
        warn_infinite(label, xs, ys, args.metric)
        ax.plot(xs, ys, ms=4, label=label + seeds_text(members, missing), **style(i))
    ideal = {r.get("entropy_rate") for r in runs}
    if len(ideal) == 1 and None not in ideal and args.metric in ("ppl", "loss"):
        h = ideal.pop()   # synthetic source: the best achievable loss
        ax.axhline(math.exp(h) if args.metric == "ppl" else h, color="black", ls=":", lw=1,
                   label="source entropy rate (ideal)")
    for L in train_lengths(runs):
        ax.axvline(L, color="gray", ls="--", lw=1)
        ax.text(L, 0.98, " L=%d" % L, transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="gray")
    ax.set_xscale("log", base=2)
    logy = args.metric in ("ppl", "distance")
    if logy:
        ax.set_yscale("log")
    plain_axes(ax, logy)
    ax.set_xlabel("evaluation length (tokens)")
    names = dict(ATTN, ppl="perplexity", loss="loss (nats/token)", bpb="bits per byte")
    ax.set_ylabel(names[args.metric] + ("" if args.metric not in ATTN else
                                        ", layer %d" % args.layer if args.layer is not None else ", all layers"))
    ax.set_title(args.title or "Extrapolation: " + describe(runs), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def bucket_layout(x):
    """A report row's buckets as [(lo, hi), ...]"""
    return [(b["lo"], b["hi"]) for b in x.get("buckets", [])]


def layout_text(r, lay):
    n = len(lay)
    bounds = ", ".join("[%d, %d)" % b for b in lay[:3]) + (", ..." if n > 3 else "")
    return "%s: %d %s buckets %s" % (r["path"] if r.get("report") else "%s (%s)" % (r["path"], r["name"]),
                                     n, r.get("bucket_scale") or "?", bounds)


def plot_positions(runs, missing, args):
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
        first = None
        for r in members:
            for x in r["results"]:
                if x["length"] != L or x.get("status") != "ok":
                    continue
                # a token-weighted mean over seeds needs the same buckets in every run
                lay = bucket_layout(x)
                if first is None:
                    first = (r, lay)
                elif lay != first[1]:
                    die("--per-position: the runs of line '%s' have other buckets at length %d, which cannot be "
                        "averaged: %s; %s (evaluate them with the same --buckets and --bucket-scale)"
                        % (label, L, layout_text(first[0], first[1]), layout_text(r, lay)))
                for b in x.get("buckets", []):
                    a = acc.setdefault((b["lo"], b["hi"]), [0.0, 0])
                    a[0] += b["nll"]
                    a[1] += b["tokens"]
        pts = [((lo + hi - 1) / 2.0, nll / n) for (lo, hi), (nll, n) in acc.items() if n > 0]
        if not pts:
            continue
        log2 = log2 or any(m.get("bucket_scale") == "log2" for m in members)
        xs = [p for p, _ in pts]
        ys = [exp(v) if args.metric == "ppl" else v for _, v in pts]
        warn_infinite(label, xs, ys, args.metric, "window positions")
        ax.plot(xs, ys, label=label + seeds_text(members, missing), ms=3, **style(i))
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
    p.add_argument("--metric", choices=["ppl", "bpb", "loss"] + list(ATTN), default=None,
                   help="y axis (default: ppl; loss for --per-position); distance, entropy, first, far: the "
                        "attention statistics of `stretch eval --attn-stats`")
    p.add_argument("--layer", type=int, default=None,
                   help="with an attention metric: that layer's heads (default: every layer)")
    p.add_argument("--per-position", action="store_true", help="loss by position within the window")
    p.add_argument("--length", type=int, default=0, help="with --per-position: the evaluation length (default: longest)")
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
    if args.per_position and args.metric in ATTN:
        die("--per-position shows loss or ppl (the attention statistics are per length)")
    if args.layer is not None and args.metric not in ATTN:
        die("--layer %d: applies to the attention metrics (distance, entropy, first, far)" % args.layer)
    if args.length and not args.per_position:
        die("--length %d: applies to --per-position only (the default plot shows every length)" % args.length)
    check_figure_path(args.out)
    runs, missing = load_runs(args.inputs)
    if args.mode:
        runs = [r for r in runs if r.get("mode") == args.mode]
        if not runs:
            die("--mode %s: no run was evaluated with that protocol" % args.mode)
        missing = [m for m in missing if m.get("mode") in (args.mode, None)]
        for r in runs + missing:
            if r["label"].endswith("-" + args.mode):
                r["label"] = r["label"][:-len(args.mode) - 1]
    split_labels(runs)
    attach_unevaluated(missing, runs)
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
    missing = [m for m in missing if m["label"] not in args.exclude and (not args.only or m["label"] in args.only)]
    if all(label in args.exclude for label in lines):
        die("--exclude leaves nothing to plot (the lines are %s)" % ", ".join(lines))
    if args.metric == "bpb" and any(r["unit"] != "byte" for r in runs):
        die("bits per byte needs byte-level data (unit 'byte')")
    if args.metric in ATTN:
        depth = {len(x["attention"][args.metric]) for r in runs for x in r["results"] if x.get("attention")}
        if not depth:
            die("--metric %s: no attention statistics in the input (evaluate with --attn-stats)" % args.metric)
        if args.layer is not None and not all(0 <= args.layer < d for d in depth):
            die("--layer %d: the runs have %s layers" % (args.layer, "/".join(map(str, sorted(depth)))))
    if missing:   # never silently: the legend says "1 of 2 seeds", this names the runs
        warn("not plotted: " + unevaluated_note(missing))
    fig = plot_positions(runs, missing, args) if args.per_position else plot_lengths(runs, missing, args)
    fig.tight_layout()
    save_figure(fig, args.out, dpi=150)
    print("wrote " + args.out)


if __name__ == "__main__":
    main()
