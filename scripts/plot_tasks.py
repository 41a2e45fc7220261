#!/usr/bin/python3
"""plot_tasks.py - task accuracy plots from `stretch sweep` / `stretch eval --task` output.

  scripts/plot_tasks.py runs/sweep_tasks/results.json -o tasks.png
  scripts/plot_tasks.py runs/a/eval_task_copy.json runs/b/eval_task_copy.json -o copy.png
  scripts/plot_tasks.py runs/sweep_tasks/results.json --heatmap passkey -o needle.png

Default: exact-match accuracy against the evaluation size as a multiple of the largest
training size (log2 x), one panel per task, one line per group of runs (a sweep run's name
without its train.seed part; for eval reports the position method and transform, and
"[bf16-trained]" / "[bf16 eval]" when a report's precision is not fp32 throughout). Runs
that differ only in train.seed are averaged; the band spans their min and max, since
length generalization varies between seeds. Needle tasks: the mean over depths.

--metric token_accuracy: the fraction of answer tokens right instead (partial credit:
how far into an answer a model stays right).

--heatmap GROUP,...: the depth x size grid of a needle task (docs/tasks.md) for each group (seed
mean), side by side, accuracy as colour, the way needle-in-a-haystack results are shown.

Run with /usr/bin/python3 (Debian's python3-matplotlib).
"""
import argparse
import os
import sys
from collections import OrderedDict

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import check_figure_path, die, read_json, save_figure, sweep_runs  # noqa: E402


def load(paths):
    """Every input as a list of {group, task, results}."""
    runs = []
    for path in paths:
        doc = read_json(path)
        if "runs" in doc:   # a sweep's results.json (a run listed by several inputs counts once)
            for r in sweep_runs([path]):
                if "task" in r and not any(r["id"] == o.get("id") for o in runs):
                    runs.append({"group": r.get("group", r["name"]), "task": r["task"]["name"], "id": r["id"],
                                 "results": r["task"]["results"]})
        elif "task" in doc and "results" in doc and "pos" in doc:   # eval --task report
            xf = doc.get("transform", "none")
            label = doc["pos"] + ("" if xf in ("", "none") else " + " + xf)
            # reports of runs trained, or evaluated, in another precision are other lines
            tp = doc.get("train_precision", "fp32")
            ep = doc.get("precision", tp)
            tags = (["bf16-trained"] if tp == "bf16" else []) + ([ep + " eval"] if ep != tp else [])
            label += " [%s]" % ", ".join(tags) if tags else ""
            runs.append({"group": label, "task": doc["task"], "results": doc["results"]})
        else:
            die("%s: neither a sweep's results.json nor an `eval --task` report" % path)
    if not runs:
        die("no task results in the inputs")
    return runs


def accuracy_by_scale(results, metric):
    """{scale: accuracy} over the cells that ran (needle tasks: pooled over depths, weighted
    by trials); metric "accuracy" (exact match) or "token_accuracy"."""
    acc = OrderedDict()
    for r in results:
        if "trials" not in r:
            continue
        c, t = acc.get(r["scale"], (0, 0))
        acc[r["scale"]] = (c + r[metric] * r["trials"], t + r["trials"])
    return OrderedDict((s, c / t) for s, (c, t) in acc.items() if t)


def plot_curves(runs, out, title, metric):
    tasks = list(OrderedDict.fromkeys(r["task"] for r in runs))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        groups = OrderedDict()
        for r in runs:
            if r["task"] == task:
                groups.setdefault(r["group"], []).append(accuracy_by_scale(r["results"], metric))
        for i, (g, members) in enumerate(groups.items()):
            scales = sorted(set().union(*[m.keys() for m in members]))
            mean = [sum(m[s] for m in members if s in m) / sum(1 for m in members if s in m) for s in scales]
            lo = [min(m[s] for m in members if s in m) for s in scales]
            hi = [max(m[s] for m in members if s in m) for s in scales]
            style = "-" if i < 10 else "--"
            line, = ax.plot(scales, mean, style, marker="o", ms=3, label=g)
            if len(members) > 1:
                ax.fill_between(scales, lo, hi, color=line.get_color(), alpha=0.15)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%gx" % v))
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("size / largest training size")
        ax.set_ylabel("exact-match accuracy" if metric == "accuracy" else "answer-token accuracy")
        ax.set_title(task)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, out, dpi=120)


def depth_grid(runs, group):
    """(depths, sizes, grid of accuracy) of one group's needle cells (seed-pooled)."""
    cells = {}
    for r in runs:
        if r["group"] != group:
            continue
        for c in r["results"]:
            if "depth" not in c or "trials" not in c:
                continue
            k = (c["depth"], c["size"])
            a, t = cells.get(k, (0, 0))
            cells[k] = (a + c["correct"], t + c["trials"])
    if not cells:
        die("--heatmap %s: no run of that group has a depth grid (a needle task: docs/tasks.md lists them)" % group)
    depths = sorted({d for d, _ in cells})
    sizes = sorted({s for _, s in cells})
    return depths, sizes, [[cells[(d, s)][0] / cells[(d, s)][1] if (d, s) in cells else float("nan")
                            for s in sizes] for d in depths]


def plot_heatmap(runs, groups, out, title):
    grids = [(g,) + depth_grid(runs, g) for g in groups]
    w = max(len(sizes) for _, _, sizes, _ in grids)
    fig, axes = plt.subplots(1, len(grids), figsize=((1.0 + 0.8 * w) * len(grids), 1.4 + 0.5 * len(grids[0][1])),
                             squeeze=False)
    for ax, (g, depths, sizes, grid) in zip(axes[0], grids):
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels(["%d" % s for s in sizes])
        ax.set_yticks(range(len(depths)))
        ax.set_yticklabels(["%g" % d for d in depths])
        for i in range(len(depths)):
            for j in range(len(sizes)):
                if grid[i][j] == grid[i][j]:
                    ax.text(j, i, "%.2f" % grid[i][j], ha="center", va="center", fontsize=7)
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel("needle depth")
        ax.set_title(g)
    fig.colorbar(im, ax=list(axes[0]))
    if title:
        fig.suptitle(title)
    save_figure(fig, out, dpi=120, bbox_inches="tight")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="a sweep's results.json and/or `stretch eval --task` reports")
    p.add_argument("-o", "--out", default="tasks.png", help="output image (default %(default)s)")
    p.add_argument("--heatmap", default="", metavar="GROUP,...", help="the depth x size grid of these groups, side by side")
    p.add_argument("--only", default="", metavar="GROUP,...", help="only these groups")
    p.add_argument("--metric", choices=["accuracy", "token_accuracy"], default="accuracy",
                   help="exact match (default) or the fraction of answer tokens right")
    p.add_argument("--title", default="")
    a = p.parse_args()
    check_figure_path(a.out)
    runs = load(a.inputs)
    if a.only:
        keep = set(a.only.split(","))
        runs = [r for r in runs if r["group"] in keep]
        if not runs:
            die("--only %s: no such group" % a.only)
    if a.heatmap:
        plot_heatmap(runs, a.heatmap.split(","), a.out, a.title)
    else:
        plot_curves(runs, a.out, a.title, a.metric)
    print("wrote " + a.out)


if __name__ == "__main__":
    main()
