#!/usr/bin/env bash
# cli_eval.sh - `stretch eval` end to end on tiny trained runs (synthetic and byte-level
# text): the table and JSON report, every target scored once, sliding S = L equal to
# nonoverlapping, per-position buckets adding up, learned positions beyond their table as
# error rows, default report paths, and the exit codes for bad arguments (2), a missing
# run dir (3) and a corrupt checkpoint (5).
. "$(dirname "$0")/lib_cli.sh" cli_eval

cat > syn.json <<'EOF'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "synthetic", "tokenizer": "synthetic", "synthetic": {"tokens": [20000, 2001, 1001]}},
 "train": {"seed": 1, "batch_size": 4, "seq_len": 32, "steps": 20, "eval_every": 10, "eval_batches": 2,
           "log_every": 10, "schedule": {"warmup": 2}},
 "eval": {"lengths": [16, 32, 64], "buckets": 4}}
EOF
expect_rc 0 "train alibi" "$BIN" train syn.json --out alibi --set train.log_every=20
expect_rc 0 "train learned" "$BIN" train syn.json --out learned --set model.pos=learned --set model.max_len=32

# --- defaults from the run's eval section; table + default JSON path
expect_rc 0 "eval defaults" "$BIN" eval alibi
grep -q "nonoverlapping" out.txt && ok || bad "table lacks the mode"
grep -q "valid split: 2001 tokens (2000 targets)" out.txt && ok || bad "the header does not give the whole split"
# (probe 9) --max-tokens: the header says the part of the split, not only its count
expect_rc 0 "eval --max-tokens" "$BIN" eval alibi --lengths 16 --max-tokens 100 --json mt.json
grep -q "valid split: the first 100 of 2001 tokens (99 targets)" out.txt && ok || bad "--max-tokens header: $(grep split: out.txt)"
[ -f alibi/eval_valid_nonoverlapping.json ] && ok || bad "default JSON path alibi/eval_valid_nonoverlapping.json missing"

# --- every target once, buckets add up, nonoverlapping vs sliding S=L
expect_rc 0 "eval nonoverlapping" "$BIN" eval alibi --lengths 8,16,64,4096 --buckets 5 --json non.json --quiet
expect_rc 0 "eval sliding S=L" "$BIN" eval alibi --lengths 16 --mode sliding --stride 16 --buckets 5 --json sl16.json --quiet
expect_rc 0 "eval sliding S=5" "$BIN" eval alibi --lengths 16,64,4096 --mode sliding --stride 5 --bucket-scale log2 --buckets 1 --json sl5.json --quiet
expect_rc 0 "eval sliding L/2 test split" "$BIN" eval alibi --lengths 16 --mode sliding --split test --quiet
[ -f alibi/eval_test_sliding.json ] && ok || bad "default JSON path alibi/eval_test_sliding.json missing"
$PY - non.json sl16.json sl5.json alibi/eval_test_sliding.json <<'EOF' && ok || bad "JSON checks"
import json, math, sys
non, sl16, sl5, test = (json.load(open(p)) for p in sys.argv[1:])
err = []
for rep in (non, sl5):
    n = rep["split_tokens"]
    for r in rep["results"]:
        if r["status"] != "ok": err.append("length %d failed: %s" % (r["length"], r.get("error"))); continue
        if r["tokens"] != n - 1: err.append("length %d scored %d of %d targets" % (r["length"], r["tokens"], n - 1))
        if sum(b["tokens"] for b in r["buckets"]) != r["tokens"]: err.append("bucket counts at %d" % r["length"])
        if abs(sum(b["nll"] for b in r["buckets"]) - r["nll"]) > 1e-9 * r["nll"]: err.append("bucket nll at %d" % r["length"])
        if abs(math.exp(r["loss"]) - r["ppl"]) > 1e-9 * r["ppl"]: err.append("ppl != exp(loss)")
        if r["buckets"][0]["lo"] != 0 or r["buckets"][-1]["hi"] != r["length"]: err.append("bucket range")
if non["split_tokens"] != 2001 or non["split"] != "valid" or non["mode"] != "nonoverlapping": err.append("header")
if [b["hi"] for b in sl5["results"][0]["buckets"]] != [1, 2, 4, 8, 16]: err.append("log2 buckets %s" % sl5["results"][0]["buckets"])
a = [r for r in non["results"] if r["length"] == 16][0]
b = sl16["results"][0]
if a["nll"] != b["nll"] or a["tokens"] != b["tokens"]: err.append("sliding S=L %r != nonoverlapping %r" % (b["nll"], a["nll"]))
if sl5["mode"] != "sliding" or sl5["results"][0]["stride"] != 5: err.append("sliding header")
if sl5["results"][0]["forward_tokens"] <= sl5["results"][0]["tokens"]: err.append("sliding recomputes context")
if test["split"] != "test" or test["split_tokens"] != 1001 or test["results"][0]["stride"] != 8: err.append("test split / default stride L/2")
if test["results"][0]["tokens"] != 1000: err.append("test split targets")
if non["data"]["unit"] != "token" or "entropy_rate" not in non["data"]: err.append("synthetic unit / entropy rate")
for e in err: print(e)
sys.exit(1 if err else 0)
EOF

# --- a checkpoint file as input: report next to the run, named after the checkpoint
ck=$(cat alibi/checkpoints/latest)
expect_rc 0 "eval checkpoint" "$BIN" eval "alibi/checkpoints/$ck" --lengths 16 --quiet
[ -f "alibi/eval_valid_nonoverlapping_${ck%.ckpt}.json" ] && ok || bad "checkpoint report path"

# --- learned positions: lengths beyond max_len are error rows; none evaluable -> exit 2
expect_rc 0 "learned partial" "$BIN" eval learned --lengths 16,32,64 --json lrn.json
grep -q "error: .*max_len" out.txt && ok || bad "no error row for length 64"
grep -q "1 of 3 lengths could not be evaluated" err.txt && ok || bad "no summary of the failed length"
$PY -c 'import json,sys; r=json.load(open("lrn.json"))["results"]; sys.exit(0 if [x["status"] for x in r]==["ok","ok","config"] and "max_len" in r[2]["error"] else 1)' && ok || bad "learned JSON rows"
expect_rc 2 "learned none evaluable" "$BIN" eval learned --lengths 64,128
grep -q "max_len" err.txt && ok || bad "message names max_len"
# (probe 8) the default report is not replaced by one of errors, as eval --task's; --json
# writes the error rows and the exit is still the first row's
grep -q "no length evaluated: .*not written (an earlier report stays" err.txt && ok || bad "no word on the report"
expect_rc 2 "learned none evaluable, --json" "$BIN" eval learned --lengths 64,128 --json lrn_none.json
grep -q "max_len" err.txt && ok || bad "--json: message names max_len"
$PY -c 'import json,sys; r=json.load(open("lrn_none.json"))["results"]; sys.exit(0 if [x["status"] for x in r]==["config","config"] else 1)' \
    && ok || bad "--json of an eval of no length: not the two error rows"

# --- byte-level text: bits per byte = loss / ln 2
$PY -c '
import random
random.seed(3)
words = ["the", "king", "queen", "of", "and", "to", "my", "lord", "thee", "thou"]
print("\n".join(" ".join(random.choice(words) for _ in range(8)) for _ in range(800)))' > text.txt
cat > txt.json <<EOF
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "text", "path": "$T/text.txt", "tokenizer": "byte", "cache_dir": "$T/cache"},
 "train": {"seed": 1, "batch_size": 4, "seq_len": 32, "steps": 10, "eval_batches": 1, "log_every": 10,
           "schedule": {"warmup": 2}}}
EOF
expect_rc 0 "train bytes" "$BIN" train txt.json --out bytes
expect_rc 0 "eval bytes" "$BIN" eval bytes --lengths 32,128 --json bytes.json --quiet
grep -q "bpb" out.txt && ok || bad "byte-level table lacks bpb"
$PY -c '
import json, math, sys
rep = json.load(open("bytes.json"))
ok = rep["data"]["unit"] == "byte" and rep["data"]["bytes_exact"]
for r in rep["results"]:
    ok = ok and abs(r["bpb"] - r["loss"] / math.log(2)) < 1e-9 and r["bytes"] == r["tokens"]
sys.exit(0 if ok else 1)' && ok || bad "bits per byte"

# BPE: bits per byte from each scored token's exact byte length, close to the average rate
expect_rc 0 "train bpe" "$BIN" train txt.json --out bpe --set data.tokenizer=bpe --set data.bpe_vocab=300
expect_rc 0 "eval bpe" "$BIN" eval bpe --lengths 32 --json bpe.json --quiet
$PY -c '
import json, math, sys
rep = json.load(open("bpe.json")); r = rep["results"][0]; d = rep["data"]
avg = r["nll"] / math.log(2) / (r["tokens"] * d["bytes_per_token"])
ok = d["unit"] == "byte" and d["bytes_exact"] and d["bytes_per_token"] > 1.5 and r["bytes"] > r["tokens"]
ok = ok and abs(r["bpb"] - r["nll"] / math.log(2) / r["bytes"]) < 1e-12 and abs(r["bpb"] - avg) < 0.05 * avg
sys.exit(0 if ok else 1)' && ok || bad "BPE bits per byte"

# the run's own text changed after training (the byte tokenizer reads any text): the eval
# still runs, warns, and its report says so; before the change it says the data is the same
"$PY" -c 'import json; d = json.load(open("bytes.json"))["data"]; assert d["changed_since_training"] is False and len(d["hash"]) == 16, d' \
    && ok || bad "report of unchanged data"
sed -i '1s/^/changed /' text.txt
expect_rc 0 "eval after the text changed" "$BIN" eval bytes --lengths 32 --json changed.json --quiet
expect_err "changed since this checkpoint was trained"
"$PY" -c '
import json
a, b = json.load(open("bytes.json"))["data"], json.load(open("changed.json"))["data"]
assert b["changed_since_training"] is True and b["hash"] != a["hash"], (a, b)' && ok || bad "report of changed data"

# --- usage errors (2), missing run (3), corrupt checkpoint (5)
expect_rc 2 "no args" "$BIN" eval
expect_rc 2 "bad lengths" "$BIN" eval alibi --lengths 16,abc
expect_rc 2 "zero length" "$BIN" eval alibi --lengths 0
expect_rc 2 "bad mode" "$BIN" eval alibi --mode overlapping
expect_rc 2 "bad split" "$BIN" eval alibi --split train2
expect_rc 2 "stride with nonoverlapping" "$BIN" eval alibi --mode nonoverlapping --stride 4
expect_rc 2 "unknown option" "$BIN" eval alibi --frobnicate 1
expect_rc 2 "missing value" "$BIN" eval alibi --lengths
expect_rc 2 "two runs" "$BIN" eval alibi learned
expect_rc 2 "stride longer than L" "$BIN" eval alibi --lengths 16 --stride 32
expect_rc 3 "missing run dir" "$BIN" eval no_such_run
grep -q "no_such_run" err.txt && ok || bad "missing path not named"
head -c 200 /dev/urandom > corrupt.ckpt
# --- attention statistics: the same losses, sane per-head values, the table, no sliding
expect_rc 0 "eval --attn-stats" "$BIN" eval alibi --lengths 16,64 --attn-stats --json attn.json --threads 2
expect_out "attention per layer, over the scored query rows"
expect_rc 0 "eval --attn-stats again" "$BIN" eval alibi --lengths 16,64 --attn-stats --json attn1.json --threads 2 --quiet
expect_rc 0 "eval without" "$BIN" eval alibi --lengths 16,64 --json noattn.json --threads 2 --quiet
"$PY" - attn.json attn1.json noattn.json <<'EOF2' && ok || bad "attention statistics in the report"
import json, math, sys
a, a1, n = (json.load(open(f)) for f in sys.argv[1:4])
for ra, r1, rn in zip(a["results"], a1["results"], n["results"]):
    assert ra["loss"] == rn["loss"], (ra["loss"], rn["loss"])      # asking changes nothing else
    assert "attention" not in rn
    at = ra["attention"]
    assert at == r1["attention"], "the same run gave other statistics"
    L = ra["length"]
    assert at["far_from"] == 32 and len(at["distance"]) == 1 and len(at["distance"][0]) == 2, at
    for d, h, f0, far in zip(at["distance"][0], at["entropy"][0], at["first"][0], at["far"][0]):
        assert 0 <= d <= L - 1, d
        assert 0 <= h <= math.log(L) + 1e-9 and 0 <= f0 <= 1 and 0 <= far <= 1, (h, f0, far)
        if L <= 32:
            assert far == 0, far                                 # nothing is that far inside L
EOF2
# sliding windows: the statistics of the scored rows (each text position once); S = L is
# the nonoverlapping protocol, bit for bit
expect_rc 0 "--attn-stats, sliding S = L" "$BIN" eval alibi --lengths 16,64 --stride 16 --attn-stats --json attn_sl16.json --threads 2 --quiet
expect_rc 0 "--attn-stats, sliding S < L" "$BIN" eval alibi --lengths 16,64 --stride 8 --attn-stats --json attn_sl8.json --threads 2 --quiet
"$PY" - attn.json attn_sl16.json attn_sl8.json <<'EOF2' && ok || bad "sliding attention statistics"
import json, sys
a, s16, s8 = (json.load(open(f)) for f in sys.argv[1:4])
# S = 16: the L = 16 row is the nonoverlapping one; at L = 64 the scored rows sit past 48
assert s16["results"][0]["attention"] == a["results"][0]["attention"], "S = L differs from nonoverlapping"
for r8 in s8["results"]:
    at = r8["attention"]
    L = r8["length"]
    for d, far in zip(at["distance"][0], at["far"][0]):
        assert 0 <= d <= L - 1 and 0 <= far <= 1, (d, far)
# scored rows of later sliding windows see more context: a head's mean distance grows
assert any(x > y for x, y in zip(s8["results"][1]["attention"]["distance"][0], a["results"][1]["attention"]["distance"][0])), \
    (s8["results"][1]["attention"], a["results"][1]["attention"])
EOF2
# a sweep asks for them: its points' results.json rows carry them, sliding ones too
cat > sw_attn.json <<'EOF2'
{"base": "syn.json", "set": {"train.steps": 4},
 "variants": [{"name": "a"}, {"name": "a-sl", "eval.mode": "sliding", "eval.stride": 8}],
 "eval": {"lengths": [16, 32], "attn_stats": true}, "out": "sw_attn"}
EOF2
expect_rc 0 "sweep with eval.attn_stats" "$BIN" sweep sw_attn.json --quiet
"$PY" -c "
import json; r = {x['name']: x for x in json.load(open('sw_attn/results.json'))['runs']}
assert all('attention' in y for y in r['a']['results']) and all('attention' in y for y in r['a-sl']['results'])" \
    && ok || bad "sweep results.json attention rows"
sed 's/"attn_stats": true/"attn_stats": 1/' sw_attn.json > sw_attn_bad.json
expect_rc 2 "sweep eval.attn_stats not a bool" "$BIN" sweep sw_attn_bad.json --quiet
expect_err "eval.attn_stats: expected true or false"
expect_rc 0 "a run whose config asks for them" "$BIN" train syn.json --out cfg_attn --set eval.attn_stats=true --set train.steps=4
expect_rc 0 "its plain eval has them" "$BIN" eval cfg_attn --lengths 16 --json cfg_attn.json --quiet
grep -q '"attention"' cfg_attn.json && ok || bad "eval.attn_stats in the run's config was not applied"
expect_rc 0 "the run's eval.attn_stats with --stride" "$BIN" eval cfg_attn --lengths 16 --stride 8 --json cfg_attn_sl.json --quiet
grep -q '"attention"' cfg_attn_sl.json && ok || bad "a sliding eval of an eval.attn_stats run lacks statistics"
# probe 28: what a path that is not a checkpoint is called, and a run whose pointer is gone
echo hi > notes.txt
expect_rc 5 "a text file as checkpoint" "$BIN" eval notes.txt
expect_err "notes.txt: not a stretch checkpoint (3 bytes"
expect_rc 3 "a run's checkpoints directory" "$BIN" eval alibi/checkpoints
expect_err "alibi/checkpoints: a run's checkpoints directory: give the run directory (alibi)"
expect_rc 0 "export" "$BIN" export alibi --out alibi_export
expect_rc 3 "an export directory" "$BIN" eval alibi_export
expect_err "alibi_export: an export (model.safetensors), not a run"
cp -r alibi nolatest && rm nolatest/checkpoints/latest
expect_rc 0 "a run without checkpoints/latest" "$BIN" eval nolatest --lengths 16 --quiet --json nolatest.json
expect_err "nolatest/checkpoints/latest missing: taking the newest step checkpoint"
expect_rc 5 "corrupt checkpoint" "$BIN" eval corrupt.ckpt
grep -q "corrupt.ckpt" err.txt && ok || bad "corrupt checkpoint not named"

echo "cli_eval: $passes passed, $fails failed"
[ "$fails" = 0 ]
