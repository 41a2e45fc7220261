#!/usr/bin/env bash
# cli_sweep.sh - `stretch sweep` end to end with two tiny runs on the synthetic corpus:
# results.csv/json/md are written; one run interrupted beforehand is resumed, not
# restarted; a second invocation skips both runs (log line, and no file of the run dirs is
# rewritten); a changed eval section re-evaluates without retraining; the sweep file is
# validated strictly with key paths (exit 2).
. "$(dirname "$0")/lib_cli.sh" cli_sweep

mkdir -p cfg
cat > cfg/base.json <<'EOF'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "synthetic", "tokenizer": "synthetic", "synthetic": {"tokens": [20000, 2001, 1001]}},
 "train": {"seed": 1, "batch_size": 4, "seq_len": 16, "steps": 40, "eval_every": 6, "eval_batches": 2,
           "log_every": 6, "schedule": {"warmup": 2}}}
EOF
cat > cfg/sweep.json <<'EOF'
{"description": "two tiny runs",
 "base": "base.json",
 "set": {"train.steps": 12},
 "grid": {"model.pos": ["alibi", "sinusoidal"]},
 "eval": {"lengths": [8, 16, 64], "buckets": 4},
 "out": "out"}
EOF

# one run interrupted before the sweep: same config (base + set + point), stopped after step 5
expect_rc 0 "partial run" "$BIN" train cfg/base.json --set train.steps=12 --set model.pos=sinusoidal --out out/pos-sinusoidal --stop-after 5 --quiet

expect_rc 0 "sweep" "$BIN" sweep cfg/sweep.json --quiet
grep -q "pos-sinusoidal: resuming training at step 5" err.txt && ok || bad "the interrupted run was not resumed"
grep -q "pos-alibi: training 12 steps" err.txt && ok || bad "the fresh run was not trained"
for f in results.csv results.json results.md pos-alibi/sweep_done.json pos-sinusoidal/eval_valid_nonoverlapping.json; do
    [ -s "out/$f" ] && ok || bad "out/$f missing"
done
$PY - <<'EOF' && ok || bad "results content"
import csv, json, sys
res = json.load(open("out/results.json"))
err = []
if [r["name"] for r in res["runs"]] != ["pos-alibi", "pos-sinusoidal"]: err.append("run names")
if res["lengths"] != [8, 16, 64]: err.append("lengths %s" % res["lengths"])
for r in res["runs"]:
    if r["state"] != "done" or r["train"]["step"] != 12: err.append("%s: state %s step %s" % (r["name"], r["state"], r["train"]["step"]))
    if [x["length"] for x in r["results"]] != [8, 16, 64]: err.append("%s results" % r["name"])
    for x in r["results"]:
        if x["tokens"] != 2000 or len(x["buckets"]) != 4: err.append("%s L=%d tokens/buckets" % (r["name"], x["length"]))
if res["runs"][1]["overrides"] != {"model.pos": "sinusoidal"} or res["runs"][1]["pos"] != "sinusoidal": err.append("overrides")
rows = list(csv.DictReader(open("out/results.csv")))
if len(rows) != 6 or rows[0]["model.pos"] != "alibi" or rows[0]["length"] != "8": err.append("csv")
if abs(float(rows[0]["ppl"]) - res["runs"][0]["results"][0]["ppl"]) > 1e-3: err.append("csv ppl")
md = open("out/results.md").read()
if "| pos-alibi | alibi | 16 | 12 |" not in md or "| 64 |" not in md: err.append("md table")
for e in err: print(e)
sys.exit(1 if err else 0)
EOF

# scripts/plot.py on the results (when matplotlib is installed)
if $PY -c "import matplotlib" 2>/dev/null; then
    expect_rc 0 "plot lengths" $PY "$SRC/scripts/plot.py" out/results.json -o fig.png
    [ -s fig.png ] && ok || bad "plot.py wrote no image"
    expect_rc 0 "plot per-position" $PY "$SRC/scripts/plot.py" out/results.json out/pos-alibi/eval_valid_nonoverlapping.json --per-position --length 16 -o pos.png
    [ -s pos.png ] && ok || bad "plot.py --per-position wrote no image"
    expect_rc 2 "plot bad length" $PY "$SRC/scripts/plot.py" out/results.json --per-position --length 5 -o x.png
    expect_rc 0 "plot --exclude" $PY "$SRC/scripts/plot.py" out/results.json --exclude sinusoidal -o ex.png
    [ -s ex.png ] && ok || bad "plot.py --exclude wrote no image"
    expect_rc 2 "plot --exclude unknown" $PY "$SRC/scripts/plot.py" out/results.json --exclude rope -o x2.png
    expect_rc 0 "plot --mode --only" $PY "$SRC/scripts/plot.py" out/results.json --mode nonoverlapping --only alibi -o only.png
    [ -s only.png ] && ok || bad "plot.py --mode --only wrote no image"
    expect_rc 2 "plot --mode without such runs" $PY "$SRC/scripts/plot.py" out/results.json --mode sliding -o x3.png
    expect_rc 2 "plot --only unknown" $PY "$SRC/scripts/plot.py" out/results.json --only rope -o x4.png
    expect_msg "no line named rope"
else
    echo "skip: plot.py (no matplotlib)"
fi

# second invocation: both skipped, nothing in the run dirs rewritten. pos-alibi's run is
# made to look like one from an older stretch whose schema lacked model.rf.param: its
# config.json without the key and a marker hash of that older canonical JSON. Same values,
# so it still counts as finished.
$PY - <<'EOF'
import json
c = json.load(open("out/pos-alibi/config.json")); del c["model"]["rf"]["param"]
json.dump(c, open("out/pos-alibi/config.json", "w"), indent=2)
m = json.load(open("out/pos-alibi/sweep_done.json")); m["config_hash"] = "0123456789abcdef"
json.dump(m, open("out/pos-alibi/sweep_done.json", "w"))
EOF
find out -type f -exec touch -d '2000-01-01' {} +
expect_rc 0 "sweep again" "$BIN" sweep cfg/sweep.json --quiet
[ "$(grep -c 'finished earlier, skipped' err.txt)" = 2 ] && ok || bad "runs not skipped"
newer=$(find out/pos-alibi out/pos-sinusoidal -type f -newermt '2001-01-01' | wc -l)
[ "$newer" = 0 ] && ok || { bad "$newer run-dir files rewritten on a skipped run"; find out -newermt '2001-01-01'; }
[ -n "$(find out/results.md -newermt '2001-01-01')" ] && ok || bad "results.md not rewritten"

# a changed eval section: evaluated again, not retrained
sed 's/"lengths": \[8, 16, 64\]/"lengths": [16, 32]/' cfg/sweep.json > cfg/sweep2.json
expect_rc 0 "sweep new lengths" "$BIN" sweep cfg/sweep2.json --quiet
[ "$(grep -c 'eval plan changed' err.txt)" = 2 ] && ok || bad "eval plan change not noticed"
[ -z "$(find out -name '*.ckpt' -newermt '2001-01-01')" ] && ok || bad "checkpoints rewritten (retrained)"
$PY -c 'import json,sys; r=json.load(open("out/results.json")); sys.exit(0 if r["lengths"]==[16,32] else 1)' && ok || bad "new lengths in results"

# --out overrides the file; a dry run lists the points without training
expect_rc 0 "dry run" "$BIN" sweep cfg/sweep.json --out elsewhere --dry-run
grep -q "elsewhere/pos-alibi train.steps=12 model.pos=\"alibi\"" out.txt && ok || bad "dry run listing"
[ ! -e elsewhere/pos-alibi ] && ok || bad "dry run trained"

# the run dir of a point holding a different config is refused
$PY -c '
import json; s = json.load(open("cfg/sweep.json")); s["base"] = {"model": {"n_layers": 1, "d_model": 8, "n_heads": 2},
  "data": {"source": "synthetic", "tokenizer": "synthetic", "synthetic": {"tokens": [20000, 2001, 1001]}},
  "train": {"steps": 12, "seq_len": 16, "batch_size": 4, "schedule": {"warmup": 2}}}
json.dump(s, open("cfg/inline.json", "w"))'
rm -f out/pos-alibi/sweep_done.json
expect_rc 2 "different config in run dir" "$BIN" sweep cfg/inline.json --quiet
expect_msg "holds a run of a different config"

# a run no length applies to (learned positions, all lengths beyond max_len) is recorded
# with n/a cells instead of failing the sweep
cat > cfg/learned.json <<'EOF2'
{"base": "base.json", "set": {"model.pos": "learned", "model.max_len": 16, "train.steps": 4},
 "eval": {"lengths": [32, 64]}, "out": "out_learned"}
EOF2
expect_rc 0 "learned beyond max_len" "$BIN" sweep cfg/learned.json --quiet
expect_msg "no length could be evaluated"
grep -q "| base | learned | 16 | 4 | .* | n/a | n/a |" out_learned/results.md && ok || { bad "n/a row"; cat out_learned/results.md; }

# strict validation, exit 2 with key paths (3 for a missing base file)
v() { # description message json
    echo "$3" > cfg/bad.json
    expect_rc "${4:-2}" "$1" "$BIN" sweep cfg/bad.json
    expect_msg "$2"
}
v "unknown top key"  "frobnicate: unknown key" '{"base": "base.json", "out": "o", "frobnicate": 1}'
v "bad set value"    "set.train.steps: " '{"base": "base.json", "out": "o", "set": {"train.steps": "many"}}'
v "unknown eval key" "eval.lenghts: unknown key" '{"base": "base.json", "out": "o", "eval": {"lenghts": [8]}}'
v "bad length"       "eval.lengths\[1\]: expected an integer, got \"x\"" '{"base": "base.json", "out": "o", "eval": {"lengths": [8, "x"]}}'
# an array of the wrong size names it: [] or its entries (it said "got an array")
v "no lengths"       "eval.lengths: expected an array of 1 to 32 lengths, got \[\]" '{"base": "base.json", "out": "o", "eval": {"lengths": []}}'
v "33 lengths"       "eval.lengths: expected an array of 1 to 32 lengths, got \[1,2,3,.*\.\.\. (33 entries)" "{\"base\": \"base.json\", \"out\": \"o\", \"eval\": {\"lengths\": [$(seq -s, 1 33)]}}"
v "no task scales"   "eval.task_scales: expected an array of 1 to 32 numbers, got \[\]" '{"base": "base.json", "out": "o", "eval": {"task_scales": []}}'
v "object length"    "eval.lengths\[0\]: expected an integer, got {\"a\":1}" '{"base": "base.json", "out": "o", "eval": {"lengths": [{"a": 1}]}}'
# a variant's list entry is named by its key path in the file, not as a --set
v "variant length"   "variants\[0\].eval.lengths\[1\]: expected an integer, got \"x\"" '{"base": "base.json", "out": "o", "variants": [{"name": "a", "eval.lengths": [8, "x"]}]}'
grep -q -- "--set" err.txt && bad "a sweep variant blamed on --set: $(cat err.txt)" || ok
v "max_tokens 1"     "eval.max_tokens: 1 token has no target to score" '{"base": "base.json", "out": "o", "eval": {"max_tokens": 1}}'
v "bad mode"         "eval.mode: expected \"nonoverlapping\" or \"sliding\", got \"overlap\"" '{"base": "base.json", "out": "o", "eval": {"mode": "overlap"}}'
v "unknown grid key" "grid.model.posx\[0\]" '{"base": "base.json", "out": "o", "grid": {"model.posx": ["alibi"]}}'
v "bad grid value"   "grid.model.pos\[1\]" '{"base": "base.json", "out": "o", "grid": {"model.pos": ["alibi", "nope"]}}'
v "grid not a list"  "grid.train.seed: expected a non-empty array of values, got 1" '{"base": "base.json", "out": "o", "grid": {"train.seed": 1}}'
v "object value"     "grid.train.seed\[0\]: expected a string" '{"base": "base.json", "out": "o", "grid": {"train.seed": [{"a": 1}]}}'
v "bad variant"      "variants\[0\].model.n_heads" '{"base": "base.json", "out": "o", "variants": [{"model.n_heads": "x"}]}'
v "cross-key"        "point n_heads-3" '{"base": "base.json", "out": "o", "grid": {"model.n_heads": [3]}}'
v "duplicate names"  "both named" '{"base": "base.json", "out": "o", "variants": [{"name": "a", "model.pos": "alibi"}, {"name": "a", "model.pos": "rope"}]}'
v "no out"           "out: missing" '{"base": "base.json"}'
v "invalid json"     "invalid JSON at line 2, column 10 (byte 31)" '{"base": "base.json",
  "out": }'
v "missing base"     "nothere.json" '{"base": "nothere.json", "out": "o"}' 3
expect_rc 2 "no args" "$BIN" sweep
expect_rc 2 "bad option" "$BIN" sweep cfg/sweep.json --frob
expect_rc 3 "missing sweep file" "$BIN" sweep cfg/none.json

# every shipped sweep file validates (each point's config, keys and cross-key rules)
for f in "$SRC"/configs/sweep*.json "$SRC"/configs/results/*.json; do
    expect_rc 0 "shipped sweep $(basename "$f")" "$BIN" sweep "$f" --dry-run --out shipped
done
[ ! -e shipped ] && ok || bad "a dry run wrote its out dir"

# two sweeps into one out (a seed sweep beside its main sweep, docs/results.md (a)): the
# second keeps the first's runs in results.json, a re-run of the first keeps the second's,
# and a point directory both share is the last writer's (probe 30)
cat > cfg/sh1.json <<'EOF'
{"base": "base.json", "set": {"train.steps": 4}, "variants": [{"name": "a"}, {"name": "b", "model.pos": "rope"}],
 "eval": {"lengths": [8, 16]}, "out": "shared"}
EOF
cat > cfg/sh2.json <<'EOF'
{"base": "base.json", "set": {"train.steps": 4}, "variants": [{"name": "c", "train.seed": 2}, {"name": "b", "model.pos": "rope"}],
 "eval": {"lengths": [16, 32]}, "out": "shared"}
EOF
expect_rc 0 "first sweep into shared" "$BIN" sweep cfg/sh1.json --quiet
expect_rc 0 "second sweep into shared" "$BIN" sweep cfg/sh2.json --quiet
names() { "$PY" -c "import json; d = json.load(open('shared/results.json')); print(sorted(r['name'] for r in d['runs']), d['lengths'])"; }
[ "$(names)" = "['a', 'b', 'c'] [8, 16, 32]" ] && ok || bad "results.json after two sweeps: $(names)"
grep -q "^| a |" shared/results.md && bad "results.md lists the other sweep's runs" || ok
expect_rc 0 "the first sweep again" "$BIN" sweep cfg/sh1.json --quiet
[ "$(names)" = "['a', 'b', 'c'] [8, 16, 32]" ] && ok || bad "results.json after re-running the first: $(names)"
echo "cli_sweep: $passes passed, $fails failed"
[ "$fails" = 0 ]
