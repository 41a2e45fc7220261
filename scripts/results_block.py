#!/usr/bin/python3
"""Tables of docs/results-block.md: the position methods with the GPT-2 and the LLaMA-style
block (configs/results/block_ts.json, block_wt2.json).

    /usr/bin/python3 scripts/results_block.py RESULTS.json [RESULTS.json ...]

For each results.json (one sweep: points named <method>-<gpt2|llama>[-sliding]), prints per
protocol a table of perplexity at every evaluated length for both blocks, and the ranking of
the methods at each length with each block (1 = lowest perplexity), so a change of ranking
with the block is visible at a glance.
"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_json import exp, sweep_doc, warn  # noqa: E402

METHODS = ["alibi", "rope", "none", "fire", "kerple"]


def load(doc):
    runs = {}
    for r in doc["runs"]:
        if not r.get("results"):
            continue
        runs[r["name"].split("__")[0]] = r
    return runs


def ppl(r, n):
    for x in r["results"]:
        if x["length"] == n and x.get("status") == "ok":
            return exp(x["loss"])   # not x["ppl"]: null where the loss overflows exp (inf)
    return None


if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) > 1 else 2)

for path, doc in [(p, sweep_doc(p)) for p in sys.argv[1:]]:   # every input read before a line is printed
    runs = load(doc)
    lengths = sorted({x["length"] for r in runs.values() for x in r["results"]})
    print(f"### `{doc.get('sweep', path)}`\n")
    if not any(f"{m}-{b}{suf}" in runs for m in METHODS for b in ("gpt2", "llama") for suf in ("", "-sliding")):
        warn("%s: no evaluated point named <%s>-<gpt2|llama>[-sliding] (have: %s)"
             % (path, "|".join(METHODS), ", ".join(sorted(runs)) or "none"))
    for proto, suf in (("nonoverlapping", ""), ("sliding", "-sliding")):
        rows = [(m, b) for m in METHODS for b in ("gpt2", "llama") if f"{m}-{b}{suf}" in runs]
        if not rows:
            continue
        print(f"#### {proto}\n")
        print("| method | block | " + " | ".join(f"{n} ({n // lengths[0]}x)" for n in lengths) + " |")
        print("|---|---|" + "---:|" * len(lengths))
        for m, b in rows:
            r = runs[f"{m}-{b}{suf}"]
            cells = [ppl(r, n) for n in lengths]
            print(f"| {m} | {b} | " + " | ".join("n/a" if c is None else f"{c:.3f}" for c in cells) + " |")
        print()
        print("Rank of each method at each length (1 = best), GPT-2 block / LLaMA-style block:\n")
        print("| method | " + " | ".join(str(n) for n in lengths) + " |")
        print("|---|" + "---:|" * len(lengths))
        ranks = {}
        for b in ("gpt2", "llama"):
            for n in lengths:
                vals = sorted((ppl(runs[f"{m}-{b}{suf}"], n), m) for m in METHODS
                              if f"{m}-{b}{suf}" in runs and ppl(runs[f"{m}-{b}{suf}"], n) is not None)
                for i, (_, m) in enumerate(vals):
                    ranks[(m, b, n)] = i + 1
        for m in METHODS:
            if (m, "gpt2", lengths[0]) not in ranks and (m, "llama", lengths[0]) not in ranks:
                continue
            print(f"| {m} | " + " | ".join(f"{ranks.get((m, 'gpt2', n), '-')} / {ranks.get((m, 'llama', n), '-')}"
                                          for n in lengths) + " |")
        print()
