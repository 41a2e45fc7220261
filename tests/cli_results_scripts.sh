#!/usr/bin/env bash
# cli_results_scripts.sh - the results pipeline after a sweep (scripts/plot.py,
# results_tables.py, results_block.py, results_extension.py and the sweep's own
# results.csv / results.md), the findings of probe 23:
#   F1 eval reports of one run with other protocols (mode, split) are not averaged: one
#      line each, labelled by what differs; reports of two seeds still are (one line);
#   F2 two sweeps with the same relative "out", run from different directories, are two
#      experiments for both scripts (identity: the results.json file's directory);
#   F3 a diverged point (finite loss past exp's range) is "inf", never a traceback, and
#      results.md says inf in both of its tables (not nan);
#   F4 failed and pending runs are named (a note under the table, a warning of plot.py),
#      their rows kept with n/a and "1 of 2" seeds;
#   F5 --per-position refuses runs of one line with other bucket layouts;
#   F6 bad inputs and flags: "<script>: error: ..." (exit 2), no traceback; -o into a
#      missing directory creates it;
#   F7 a sweep plotted with a report of one of its runs: labels name only what is known
#      on both sides ("[out s]", "[eval report]"), never "None";
#   F8 results.csv: a failed run has one line per planned length with pos, train_seq_len,
#      seed, split and mode filled in;
#   attention statistics (--metric far|distance|..., --layer): the line is the mean over
#      heads and layers, then seeds; bad --layer and inputs without statistics refused;
#   minor: --length without --per-position is refused; a plot of both protocols says so in
#      its title; --spread without a group of two seeds says so.
# STRETCH_RESULTS_SCRIPTS=DIR runs the scripts of DIR instead of the tree's (to check that
# the test fails on older scripts).
. "$(dirname "$0")/lib_cli.sh" cli_results_scripts
SC=${STRETCH_RESULTS_SCRIPTS:-$SRC/scripts}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
if ! "$PY" -c "import matplotlib" 2>/dev/null; then
    echo "cli_results_scripts: no matplotlib for $PY: skipped"; exit 77
fi

# plot.py under Agg; prints each line (label, x, y), the title and the legend
cat > dump.py <<'EOF'
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
script = sys.argv[1]
sys.argv = [script] + sys.argv[2:]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    if e.code:
        raise
for n in plt.get_fignums():
    for ax in plt.figure(n).axes:
        print("TITLE", ax.get_title())
        for ln in ax.get_lines():
            if not ln.get_label().startswith("_"):
                print("LINE", ln.get_label(), "|", [float(x) for x in ln.get_xdata()], "|", [float(y) for y in ln.get_ydata()])
        if ax.get_legend():
            print("LEGEND", [t.get_text() for t in ax.get_legend().get_texts()])
EOF
plot() { "$PY" dump.py "$SC/plot.py" "$@"; }
tables() { "$PY" "$SC/results_tables.py" "$@"; }
# no traceback, and the script's own one-line error
clean_error() { # WHAT SCRIPT
    if grep -q Traceback err.txt || ! grep -q "^$2: error: " err.txt; then bad "$1: $(tail -2 err.txt)"; else ok; fi
}

mkdir -p cfg
cat > cfg/base.json <<JSON
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
 "train": {"seed": 1, "batch_size": 4, "seq_len": 16, "steps": 3, "eval_batches": 1, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
JSON

# ---- sweep s: alibi (2 seeds), bad (both seeds fail), rope (seed 2 fails) ----
cat > cfg/s.json <<'JSON'
{"base": "base.json", "variants": [{"name": "alibi", "model.pos": "alibi"},
 {"name": "bad", "model.pos": "alibi", "train.init_from": "/nonexistent/x.safetensors"},
 {"name": "rope", "model.pos": "rope"}],
 "grid": {"train.seed": [1, 2]}, "eval": {"lengths": [16, 32], "max_tokens": 500, "buckets": 4}, "out": "s"}
JSON
"$BIN" train cfg/base.json --set model.pos=rope --out s/rope__seed-2 --quiet >/dev/null 2>&1
"$BIN" sweep cfg/s.json --quiet >/dev/null 2>&1   # exits non-zero: points failed
[ -s s/results.csv ] && [ -s s/alibi__seed-2/sweep_done.json ] && ok || bad "sweep s: no tables"

# F8: the failed runs' CSV lines
"$PY" - <<'EOF' && ok || bad "F8: results.csv lines of failed runs"
import csv, sys
rows = [r for r in csv.DictReader(open("s/results.csv")) if r["run"] == "bad__seed-2"]
got = [(r["state"], r["pos"], r["train_seq_len"], r["seed"], r["split"], r["mode"], r["length"], r["status"]) for r in rows]
want = [("failed", "alibi", "16", "2", "valid", "nonoverlapping", L, "failed") for L in ("16", "32")]
if got != want or "nonexistent" not in rows[0]["error"]:
    print(got); sys.exit(1)
EOF

# F4: failed runs in results_tables.py and plot.py
expect_rc 0 "tables with failed runs" tables s/results.json
grep -q '^| bad | 0 of 2 | n/a | n/a |$' out.txt && grep -q '^| rope | 1 of 2 | ' out.txt && grep -q '^| alibi | 2 | ' out.txt \
    && grep -q 's/bad__seed-1 (failed), s/bad__seed-2 (failed), s/rope__seed-2 (failed)' out.txt && ok \
    || bad "F4: results_tables hides failed runs: $(cat out.txt)"
expect_rc 0 "plot with failed runs" plot s/results.json -o f4.png
grep -q "LEGEND \['alibi (2 seeds)', 'rope (1 of 2 seeds)'" out.txt && grep -q "warning: .*s/bad__seed-1 (failed)" err.txt && ok \
    || bad "F4: plot.py hides failed runs: $(grep LEGEND out.txt) / $(cat err.txt)"
# a pending run (a sweep interrupted before it): the table says the sweep is not finished
"$PY" - <<'EOF'
import json
d = json.load(open("s/results.json"))
for r in d["runs"]:
    if r["name"] == "alibi__seed-2":
        r["state"] = "pending"
        for k in ("results", "train", "mode", "split", "unit"):
            r.pop(k, None)
json.dump(d, open("s/results_pending.json", "w"))
EOF
expect_rc 0 "tables with a pending run" tables s/results_pending.json
grep -q '^| alibi | 1 of 2 | ' out.txt && grep -q 'not finished.*s/alibi__seed-2 (pending)' out.txt && ok \
    || bad "F4: a pending run is not named: $(cat out.txt)"

# F3: diverged points (loss 1203.7 nats, ppl null in the report) in the sweep's markers
"$PY" - <<'EOF'
import json
for seed in (1, 2):
    p = "s/alibi__seed-%d/sweep_done.json" % seed
    d = json.load(open(p))
    for x in d["report"]["results"]:
        x["loss"], x["ppl"] = 1203.7, None
        for b in x["buckets"]:
            b["nll"], b["loss"] = 1203.7 * b["tokens"], 1203.7
    json.dump(d, open(p, "w"), indent=1)
EOF
"$BIN" sweep cfg/s.json --quiet >/dev/null 2>&1   # the tables again, from the markers
grep -q '^| alibi__seed-1 | alibi | 16 | 3 | *[0-9.]* *| inf | inf |$' s/results.md && grep -q '^| alibi | 2 | inf | inf |$' s/results.md \
    && ! grep -q 'nan' s/results.md && ok || bad "F3: results.md: $(grep -e 'alibi' -e 'nan' s/results.md)"
grep '^alibi__seed-1,' s/results.csv | grep -q ',1203.700000,inf,' && ok || bad "F3: results.csv ppl: $(grep '^alibi__seed-1,' s/results.csv)"
expect_rc 0 "tables of a diverged point" tables s/results.json
grep -q '^| alibi | 2 | inf | inf |$' out.txt && ok || bad "F3: results_tables: $(cat out.txt)"
expect_rc 0 "tables --spread of a diverged point" tables s/results.json --spread
clean=$(grep -c Traceback err.txt); [ "$clean" = 0 ] && ok || bad "F3: --spread traceback"
expect_rc 0 "plot of a diverged point" plot s/results.json -o f3.png
grep -q "warning: alibi.*perplexity inf" err.txt && ok || bad "F3: plot.py says nothing of the inf points: $(cat err.txt)"
expect_rc 0 "plot --per-position ppl of a diverged point" plot s/results.json --per-position --metric ppl -o f3b.png
expect_rc 0 "plot --metric loss of a diverged point" plot s/results.json --metric loss -o f3c.png
grep -q "LINE alibi (2 seeds) | \[16.0, 32.0\] | \[1203.7" out.txt && ok || bad "F3: loss line: $(grep LINE out.txt)"

# F7: the sweep and a report of one of its runs
expect_rc 0 "plot sweep + report" plot s/results.json s/rope__seed-1/eval_valid_nonoverlapping.json -o f7.png
grep -q "LEGEND \['alibi (2 seeds)', 'rope \[out s\] (1 of 2 seeds)', 'rope \[eval report\]'" out.txt \
    && ! grep -q None out.txt && ok || bad "F7: labels: $(grep LEGEND out.txt)"

# ---- F1: reports of one run with other protocols; F5: other bucket layouts ----
"$BIN" train cfg/base.json --out r1 --quiet >/dev/null 2>&1 && "$BIN" train cfg/base.json --set train.seed=2 --out r2 --quiet >/dev/null 2>&1 \
    && ok || bad "two runs"
ev() { "$BIN" eval "$1" --lengths 16,32 --max-tokens 500 --threads 1 --quiet --json "$2" "${@:3}" >/dev/null 2>&1 || bad "eval $*"; }
ev r1 nono1.json --buckets 4; ev r2 nono2.json --buckets 4; ev r1 slide1.json --mode sliding --stride 8
ev r1 test1.json --split test; ev r2 nono2b.json --buckets 2
expect_rc 0 "plot nonoverlapping + sliding" plot nono1.json slide1.json -o f1.png
[ "$(grep -c '^LINE alibi' out.txt)" = 2 ] && grep -q "^LINE alibi \[mode nonoverlapping\] |" out.txt \
    && grep -q "^LINE alibi \[mode sliding\] |" out.txt && grep -q "^TITLE .*nonoverlapping / sliding" out.txt && ok \
    || bad "F1: protocols averaged: $(cat out.txt)"
"$PY" - <<'EOF' && ok || bad "F1: the lines are not the reports' own ppl"
import json, sys
lines = {l.split(" | ")[0][5:]: eval(l.split(" | ")[2]) for l in open("out.txt") if l.startswith("LINE")}
for f, label in (("nono1.json", "alibi [mode nonoverlapping]"), ("slide1.json", "alibi [mode sliding]")):
    want = [x["ppl"] for x in json.load(open(f))["results"]]
    if any(abs(a - b) > 1e-9 * b for a, b in zip(lines[label], want)):
        print(label, lines[label], want); sys.exit(1)
EOF
expect_rc 0 "plot valid + test" plot nono1.json test1.json -o f1b.png
grep -q "^LINE alibi \[split test\] |" out.txt && grep -q "^LINE alibi \[split valid\] |" out.txt && ok \
    || bad "F1: splits averaged: $(grep LINE out.txt)"
expect_rc 0 "plot two seeds' reports" plot nono1.json nono2.json -o seeds.png
[ "$(grep -c '^LINE alibi' out.txt)" = 1 ] && grep -q "^LINE alibi (2 seeds) |" out.txt && ok || bad "F1: seeds not averaged: $(grep LINE out.txt)"
expect_rc 2 "F5: per-position with other buckets" plot nono1.json nono2b.json --per-position -o f5.png
expect_err "nono1.json: 4 linear buckets"
expect_err "nono2b.json: 2 linear buckets"
clean_error "F5" plot.py
expect_rc 0 "per-position with the same buckets" plot nono1.json nono2.json --per-position -o f5b.png

# ---- attention statistics (eval --attn-stats): the mean over heads and layers, then seeds ----
ev r1 attn1.json --attn-stats; ev r2 attn2.json --attn-stats
expect_rc 0 "plot --metric far" plot attn1.json attn2.json --metric far -o far.png
"$PY" - <<'EOF' && ok || bad "attention metric line: $(grep LINE out.txt)"
import json
line = [l for l in open("out.txt") if l.startswith("LINE")]
assert len(line) == 1 and line[0].startswith("LINE alibi (2 seeds) |"), line
ys = eval(line[0].split(" | ")[2])
def mean(r):
    v = [x for heads in r["attention"]["far"] for x in heads]
    return sum(v) / len(v)
a, b = (json.load(open(f))["results"] for f in ("attn1.json", "attn2.json"))
want = [(mean(x) + mean(y)) / 2 for x, y in zip(a, b)]
assert all(abs(p - q) <= 1e-12 + 1e-9 * abs(q) for p, q in zip(ys, want)), (ys, want)
EOF
expect_rc 0 "plot --metric distance --layer 0" plot attn1.json --metric distance --layer 0 -o dist.png
expect_rc 2 "--layer past the model" plot attn1.json --metric entropy --layer 3 -o x.png
expect_err "--layer 3: the runs have"
clean_error "attention --layer" plot.py
expect_rc 2 "an attention metric without statistics" plot nono1.json --metric first -o x.png
expect_err "no attention statistics in the input (evaluate with --attn-stats)"
expect_rc 2 "--layer without an attention metric" plot attn1.json --layer 0 -o x.png

# ---- F2: two sweeps, same relative out, run from two directories; minor: both protocols ----
mkdir X Y
cat > cfg/x.json <<'JSON'
{"base": "base.json", "variants": [{"name": "alibi", "model.pos": "alibi"},
 {"name": "alibi-sliding", "model.pos": "alibi", "eval.mode": "sliding", "eval.stride": 8}],
 "grid": {"train.seed": [1]}, "eval": {"lengths": [16, 32], "max_tokens": 500}, "out": "s"}
JSON
cat > cfg/y.json <<'JSON'
{"base": "base.json", "set": {"train.steps": 6}, "variants": [{"name": "alibi", "model.pos": "alibi"}],
 "grid": {"train.seed": [1]}, "eval": {"lengths": [16, 32], "max_tokens": 500}, "out": "s"}
JSON
(cd X && "$BIN" sweep ../cfg/x.json --quiet >/dev/null 2>&1) && (cd Y && "$BIN" sweep ../cfg/y.json --quiet >/dev/null 2>&1) \
    && ok || bad "sweeps X and Y"
expect_rc 0 "tables of X and Y" tables X/s/results.json Y/s/results.json
grep -q '^| alibi \[out X/s\] | 1 | ' out.txt && grep -q '^| alibi \[out Y/s\] | 1 | ' out.txt && ok || bad "F2: results_tables: $(cat out.txt)"
expect_rc 0 "plot of X and Y" plot X/s/results.json Y/s/results.json --mode nonoverlapping -o f2.png
grep -q "LEGEND \['alibi \[out X/s\]', 'alibi \[out Y/s\]'" out.txt && ok || bad "F2: plot.py: $(grep LEGEND out.txt)"
expect_rc 0 "one sweep read twice" tables X/s/results.json X/s/results.json
grep -q '^| alibi | 1 | ' out.txt && ok || bad "one sweep read twice: $(cat out.txt)"
expect_rc 0 "plot of both protocols" plot X/s/results.json -o both.png
grep -q "^TITLE .*nonoverlapping / sliding" out.txt && ok || bad "title of both protocols: $(grep TITLE out.txt)"
expect_rc 2 "--spread without two seeds" tables X/s/results.json --spread
expect_err "no group has two or more evaluated seeds"

# ---- F6 and minor: errors, never tracebacks ----
expect_rc 0 "-o into a missing directory" plot X/s/results.json -o new/dir/fig.png
[ -s new/dir/fig.png ] && ok || bad "F6: new/dir/fig.png not written"
expect_rc 2 "-o with an unknown format" plot X/s/results.json -o fig.xyz
clean_error "-o fig.xyz" plot.py
expect_err "fig.xyz: unsupported image format"
echo null > null.json; echo 5 > five.json
for s in plot results_tables results_block results_extension plot_tasks results_tasks; do
    for f in null.json five.json; do
        expect_rc 2 "$s.py $f" "$PY" "$SC/$s.py" $f
        clean_error "$s.py $f" $s.py
    done
done
expect_rc 2 "results_block.py on an eval report" "$PY" "$SC/results_block.py" nono1.json
clean_error "results_block.py on a report" results_block.py
expect_rc 2 "results_extension.py --plot without a value" "$PY" "$SC/results_extension.py" X/s/results.json Y/s/results.json --plot
clean_error "results_extension.py --plot" results_extension.py
# probe 28: excluding every line, and -o under a file
expect_rc 2 "--exclude every line" plot nono1.json --exclude alibi -o none.png
expect_err "--exclude leaves nothing to plot"
[ ! -e none.png ] && ok || bad "an empty plot was written"
touch afile
expect_rc 2 "-o under a file" plot nono1.json -o afile/x.png
expect_err "afile is a file, not a directory"
expect_rc 2 "--length without --per-position" plot X/s/results.json --length 16 -o x.png
expect_err "applies to --per-position only"

finish cli_results_scripts
