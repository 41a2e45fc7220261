#!/usr/bin/python3
"""Tables of docs/results-extension.md from the context-extension sweeps.

    /usr/bin/python3 scripts/results_extension.py [BASE_RESULTS] [FT_RESULTS] [PASSKEY_DIR] [--plot OUT.png]

BASE_RESULTS: results.json of configs/results/extend_base.json (default
runs/extend_ts/results.json); FT_RESULTS: of configs/results/extend_ts.json (default
runs/extend_ts_ft/results.json); PASSKEY_DIR: the JSON files of scripts/extend_passkey.sh
(default runs/extend_passkey; its tables are left out when it is missing).
Prints Markdown: perplexity per evaluation length for both protocols, the budget table
(perplexity at the new length against the fine-tuning budget), the loss by position inside
a window of the new length (does the model gain from the context it was extended to?),
and passkey accuracy per prompt size. --plot also draws perplexity at 4L and 8L against
the budget per transform, and (when the passkey files exist) passkey accuracy against size.
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import check_figure_path, die, exp, read_json, save_figure, sweep_doc  # noqa: E402

args = sys.argv[1:]
if args and args[0] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)
plot_out = None
if "--plot" in args:
    i = args.index("--plot")
    if i + 1 >= len(args) or args[i + 1].startswith("-"):
        die("--plot needs the output image, e.g. --plot extension.png")
    plot_out = args[i + 1]
    del args[i:i + 2]
    import matplotlib
    matplotlib.use("Agg")
    check_figure_path(plot_out)
bad = [a for a in args if a.startswith("-")]
if bad or len(args) > 3:
    die("unknown option %s" % bad[0] if bad else "at most 3 inputs (BASE_RESULTS FT_RESULTS PASSKEY_DIR), got %d" % len(args))
base_p = args[0] if len(args) > 0 else "runs/extend_ts/results.json"
ft_p = args[1] if len(args) > 1 else "runs/extend_ts_ft/results.json"
pk_dir = args[2] if len(args) > 2 else "runs/extend_passkey"

runs = []
for p in (base_p, ft_p):
    runs += [r for r in sweep_doc(p)["runs"] if r.get("results")]
by_name = {r["name"].replace("__seed-1", ""): r for r in runs}
LENGTHS = [64, 128, 256, 512, 1024, 2048]


def ppl(r, n):
    for x in r.get("results", []):
        if x["length"] == n and x.get("status") == "ok":
            return exp(x["loss"])   # not x["ppl"]: null where the loss overflows exp (inf)
    return None


def row_name(name):
    """rope-yarn-256-b10 -> ('rope', 'yarn', 256, 10); base/scratch names pass through"""
    parts = name.split("-")
    if len(parts) >= 4 and parts[-1].startswith("b") and parts[-2].isdigit():
        return parts[0], "-".join(parts[1:-2]), int(parts[-2]), int(parts[-1][1:])
    return None


def table(title, names, note=""):
    print(f"### {title}\n")
    if note:
        print(note + "\n")
    print("| run | " + " | ".join(f"{n} ({n // 64}x)" for n in LENGTHS) + " |")
    print("|---|" + "---:|" * len(LENGTHS))
    cols = {n: [ppl(by_name[k], n) for k in names if k in by_name] for n in LENGTHS}
    best = {n: min([v for v in cols[n] if v is not None], default=None) for n in LENGTHS}
    for k in names:
        if k not in by_name:
            continue
        cells = []
        for n in LENGTHS:
            v = ppl(by_name[k], n)
            s = "n/a" if v is None else f"{v:.3f}"
            cells.append(f"**{s}**" if v is not None and v == best[n] else s)
        print(f"| {k} | " + " | ".join(cells) + " |")
    print()


def order(method, sliding):
    suf = "-sliding" if sliding else ""
    names = [method + suf, f"{method}-scratch256{suf}"]
    xfs = {"rope": ["plain", "pi", "ntk", "yarn"], "alibi": ["plain", "alibi_interp"], "fire": ["plain"]}[method]
    for to in (256, 512):
        for xf in xfs:
            for b in ((10,) if sliding else (0, 2, 5, 10, 50)):
                names.append(f"{method}-{xf}-{to}-b{b}{suf}")
    if not sliding:   # the learning-rate check (rope at 4L, 10%, peak lr 1e-3)
        names += [f"{method}-{xf}-256-b10-lr1e-3" for xf in xfs]
    return names


print("## Perplexity, nonoverlapping windows\n")
for m in ("rope", "alibi", "fire"):
    table(m, order(m, False))
print("## Perplexity, sliding windows (stride 32), 10% budget\n")
for m in ("rope", "alibi"):
    table(m + " (sliding)", order(m, True))

print("## Perplexity at the new length against the fine-tuning budget (nonoverlapping)\n")
budget_curves = []   # (label, length, [ppl at 0, 2, 5, 10%])
print("| method | transform | length | 0% | 2% | 5% | 10% | 50% | 10%, lr 1e-3 | scratch at 256 (110%) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for m, xfs in (("rope", ["plain", "pi", "ntk", "yarn"]), ("alibi", ["plain", "alibi_interp"]), ("fire", ["plain"])):
    for to in (256, 512):
        for xf in xfs:
            cells = []
            for b in (0, 2, 5, 10, 50, "10-lr1e-3"):
                k = f"{m}-{xf}-{to}-b{b}"
                if b == 0 and xf == "plain":
                    k = m   # the base run itself
                v = ppl(by_name[k], to) if k in by_name else None
                cells.append("" if v is None else f"{v:.3f}")
            if not any(cells[1:4]):
                continue
            budget_curves.append((f"{m} {xf}", to, [ppl(by_name[k], to) if k in by_name else None for k in
                                  ([m if xf == "plain" else f"{m}-{xf}-{to}-b0"] +
                                   [f"{m}-{xf}-{to}-b{b}" for b in (2, 5, 10)])]))
            s = ppl(by_name.get(f"{m}-scratch256", {}), to)
            print(f"| {m} | {xf} | {to} | " + " | ".join(cells) + f" | {'' if s is None else f'{s:.3f}'} |")
print()


def bucket_loss(r, n, lo, hi):
    for x in r.get("results", []):
        if x["length"] == n and x.get("status") == "ok":
            bs = [b for b in x.get("buckets", []) if b["lo"] >= lo and b["hi"] <= hi]
            tok = sum(b["tokens"] for b in bs)
            return sum(b["nll"] for b in bs) / tok if tok else None
    return None


print("## Does the extended model use the context it was extended to?\n")
print("Mean loss (nats per byte) of the tokens at window positions [0, 64), [64, 128), [128, 256)"
      " and [256, 512) of nonoverlapping windows of the new length (4L = 256 or 8L = 512): a model that"
      " gains from context has lower loss further into the window.\n")
print("| run | window | [0, 64) | [64, 128) | [128, 256) | [256, 512) |")
print("|---|---:|---:|---:|---:|---:|")
for k in ["rope", "rope-scratch256", "alibi", "alibi-scratch256", "fire", "fire-scratch256"] + \
        [f"rope-{x}-{to}-b10" for to in (256, 512) for x in ("plain", "pi", "ntk", "yarn")] + \
        ["alibi-plain-256-b10", "alibi-alibi_interp-256-b10", "fire-plain-256-b10"]:
    if k not in by_name:
        continue
    pr = row_name(k)
    n = pr[2] if pr else 256
    vals = [bucket_loss(by_name[k], n, lo, hi) for lo, hi in ((0, 64), (64, 128), (128, 256), (256, 512))]
    print(f"| {k} | {n} | " + " | ".join("" if v is None else f"{v:.4f}" for v in vals) + " |")
print()

pk_rows, pk_sizes = [], None
if os.path.isdir(pk_dir):
    files = sorted(f for f in os.listdir(pk_dir) if f.endswith(".json"))
    sizes = None
    rows = []
    for f in files:
        r = read_json(os.path.join(pk_dir, f))
        cells = r.get("cells") or r.get("results") or []
        acc = {}
        for c in cells:
            if "accuracy" in c:
                acc.setdefault(c["size"], []).append((c["correct"], c["trials"]))
        sz = sorted(acc)
        sizes = sizes or sz
        rows.append((f[:-5], {s: sum(a for a, _ in acc[s]) / sum(t for _, t in acc[s]) for s in sz}))
    if rows:
        print("## Passkey accuracy after extension (mean over depths 0, 0.25, 0.5, 0.75, 1; 50 trials each)\n")
        print("| run | " + " | ".join(f"{s} ({s // 32}x)" for s in sizes) + " |")
        print("|---|" + "---:|" * len(sizes))
        order_pk = sorted(rows, key=lambda x: (x[0].split("-")[0], "base" not in x[0], x[0]))
        pk_rows, pk_sizes = order_pk, sizes
        for name, a in order_pk:
            print(f"| {name} | " + " | ".join(f"{a[s]:.2f}" if s in a else "" for s in sizes) + " |")
        print()

if plot_out:
    import matplotlib.pyplot as plt
    n_ax = 3 if pk_rows else 2
    fig, axes = plt.subplots(1, n_ax, figsize=(5.2 * n_ax, 4.2))
    budgets = [0, 2, 5, 10]
    for ax, to in zip(axes, (256, 512)):
        for label, L, ys in budget_curves:
            if L != to:
                continue
            pts = [(b, y) for b, y in zip(budgets, ys) if y is not None]
            ax.plot([b for b, _ in pts], [y for _, y in pts], marker="o", label=label)
        sc = ppl(by_name.get("rope-scratch256", {}), to)
        if sc:
            ax.axhline(sc, color="gray", ls="--", lw=1, label="rope from scratch at 256")
        ax.set_yscale("log")
        ax.set_xlabel("fine-tuning budget (% of the base run's tokens)")
        ax.set_ylabel(f"perplexity per byte at n = {to}")
        ax.set_title(f"extension to {to} ({to // 64}L), nonoverlapping")
        ax.legend(fontsize=7)
    if pk_rows:
        ax = axes[2]
        for name, a in pk_rows:
            if "b0.02" in name:
                continue
            ax.plot(pk_sizes, [a.get(s) for s in pk_sizes], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("prompt size (tokens; base trained to 32, extensions to 128)")
        ax.set_ylabel("passkey accuracy")
        ax.set_title("passkey after extension to 4x (10% budget)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, plot_out, dpi=110)
    print(f"wrote {plot_out}", file=sys.stderr)
