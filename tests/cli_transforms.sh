#!/usr/bin/env bash
# cli_transforms.sh - inference-time transforms end to end on tiny byte-level runs:
# `stretch eval --transform/--scale/--sinks/--window/--blockwise` (report fields, its own JSON
# file beside the plain one), a transform for another method is exit 2 naming the flag
# (CLI and eval.transform in a config), `stretch generate` with the cache equals
# --no-cache under a transform, and a sweep variant setting eval.transform or eval.blockwise
# labels its rows.
. "$(dirname "$0")/lib_cli.sh" cli_transforms

tiny_text_run alibi
for r in alibi rope; do
    expect_rc 0 "train $r" "$BIN" train cfg.json --out "$r" --quiet --set model.pos="$r"
done

# eval: the plain report, then yarn in its own file with the scale per length
expect_rc 0 "plain eval" "$BIN" eval rope --lengths 32,64,128 --quiet
[ -f rope/eval_valid_nonoverlapping.json ] && ok || bad "plain report missing"
cp rope/eval_valid_nonoverlapping.json plain.json
expect_rc 0 "yarn eval" "$BIN" eval rope --lengths 32,64,128 --transform yarn --quiet
expect_out "inference-time transform: yarn"
cmp -s plain.json rope/eval_valid_nonoverlapping.json && ok || bad "the transformed eval overwrote the plain report"
"$PY" - rope/eval_valid_nonoverlapping_yarn.json plain.json <<'EOF2' && ok || bad "yarn report fields"
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["transform"]["name"] == "yarn" and r["transform"]["scale"] == "n/L" and r["transform"]["train_len"] == 32, r["transform"]
assert [x["transform_scale"] for x in r["results"]] == [1, 2, 4], r["results"]
# at n = L the yarn model is the plain one (s = 1); beyond, it differs
assert abs(r["results"][0]["loss"] - p["results"][0]["loss"]) < 1e-6
assert abs(r["results"][2]["loss"] - p["results"][2]["loss"]) > 1e-6
EOF2
expect_rc 0 "explicit scale" "$BIN" eval rope --lengths 64 --transform pi --scale 2 --json pi.json --quiet
"$PY" -c "import json; r = json.load(open('pi.json')); assert r['transform']['scale'] == 2 and r['results'][0]['transform_scale'] == 2" && ok || bad "pi --scale 2 report"
expect_rc 0 "rerope" "$BIN" eval rope --lengths 128 --transform rerope --clip 16 --json rr.json --quiet
"$PY" -c "import json; r = json.load(open('rr.json')); assert r['transform']['clip'] == 16 and r['transform']['label'] == 'rerope w=16'" && ok || bad "rerope report"
expect_rc 2 "clip without rerope" "$BIN" eval rope --lengths 64 --transform pi --clip 8 --quiet
expect_err "rerope only"
expect_rc 0 "sinks + window, sliding" "$BIN" eval alibi --lengths 64 --mode sliding --sinks 4 --window 16 --json sw.json --quiet
"$PY" -c "import json; r = json.load(open('sw.json')); t = r['transform']; assert t['sinks'] == 4 and t['window'] == 16 and t['label'] == 'sinks=4 window=16' and r['mode'] == 'sliding'" && ok || bad "sinks/window report"

# a transform for another method, sinks without a window, a scale below 1: exit 2
expect_rc 2 "pi on alibi" "$BIN" eval alibi --lengths 64 --transform pi --quiet
expect_err "--transform pi: applies to model.pos \"rope\" only"
expect_rc 2 "alibi_interp on rope" "$BIN" generate rope --transform alibi_interp --tokens 5
expect_err "alibi_interp"
expect_rc 2 "sinks without window" "$BIN" eval rope --lengths 64 --sinks 4 --quiet
expect_err "need a window"
expect_rc 2 "scale below 1" "$BIN" eval rope --lengths 64 --transform ntk --scale 0.5 --quiet
expect_err "--scale '0.5': a scale is 0 (n / L per length) or >= 1 (as eval.transform_scale)"
# the flags take their keys' values: --scale 0 and --clip 0 are the config's defaults (probe 33)
expect_rc 0 "--scale 0 is n / L" "$BIN" eval rope --lengths 128 --transform ntk --scale 0 --json s0.json --quiet
expect_rc 0 "--scale omitted" "$BIN" eval rope --lengths 128 --transform ntk --json s1.json --quiet
"$PY" -c 'import json,sys; a,b=(json.load(open(f))["results"][0]["loss"] for f in sys.argv[1:]); assert a == b, (a, b)' \
    s0.json s1.json && ok || bad "--scale 0 differs from no --scale"
expect_rc 0 "--clip 0 is train.seq_len / 2" "$BIN" eval rope --lengths 128 --transform rerope --clip 0 --quiet
expect_rc 2 "--clip -1" "$BIN" eval rope --lengths 128 --transform rerope --clip -1 --quiet
expect_err "--clip '-1': expected an integer in \[0, 16777216\] (as eval.clip; 0: train.seq_len / 2)"
expect_rc 2 "unknown transform" "$BIN" eval rope --transform bogus --quiet
expect_rc 2 "eval.transform in a config" "$BIN" train cfg.json --out bad --quiet --set eval.transform=yarn
expect_err "eval.transform yarn: applies to model.pos \"rope\""

same_text "rope yarn" rope --prompt "the quick" --tokens 40 --seed 7 --transform yarn --context 128
same_text "rope dynamic_ntk past L" rope --prompt "the quick" --tokens 60 --seed 5 --transform dynamic_ntk --context 128
same_text "rope rerope" rope --prompt "the quick" --tokens 60 --seed 4 --transform rerope --clip 8
same_text "rope rerope + sinks + window" rope --prompt "the quick brown fox" --tokens 60 --seed 8 --transform rerope --clip 6 --sinks 2 --window 10
same_text "alibi alibi_interp" alibi --prompt "the lazy" --tokens 40 --seed 3 --transform alibi_interp --context 128
same_text "alibi sinks + window" alibi --prompt "the quick brown fox" --tokens 60 --seed 9 --sinks 2 --window 8
same_text "rope sinks + window" rope --prompt "the quick brown fox" --tokens 60 --seed 9 --sinks 2 --window 8
expect_rc 2 "dynamic_ntk with a window" "$BIN" generate rope --transform dynamic_ntk --sinks 2 --window 8 --tokens 5

# the sinks at their cache positions (StreamingLLM): the report says so, in its own file; a
# text past sinks + window scores differently from text positions, a shorter one the same
same_text "rope sinks + window, cache positions" rope --prompt "the quick brown fox" --tokens 60 --seed 9 --sinks 2 --window 8 --positions cache
same_text "alibi sinks + window, cache positions" alibi --prompt "the quick brown fox" --tokens 60 --seed 9 --sinks 2 --window 8 --positions cache
# past --context, --no-cache's sinks are its span's first tokens, not the text's: it says so
expect_rc 0 "--no-cache with a window past --context" "$BIN" generate rope --prompt "the quick" --tokens 40 --sinks 2 \
    --window 8 --context 16 --no-cache
expect_err "generate --no-cache: the text will pass --context 16"
for r in rope alibi; do
    expect_rc 0 "$r: sinks at text positions" "$BIN" eval $r --lengths 8,128 --sinks 4 --window 16 --quiet
    expect_rc 0 "$r: sinks at cache positions" "$BIN" eval $r --lengths 8,128 --sinks 4 --window 16 --positions cache --quiet
    "$PY" - $r/eval_valid_nonoverlapping_sinks_4_window_16.json $r/eval_valid_nonoverlapping_sinks_4_window_16_positions_cache.json <<'EOF2' && ok || bad "$r: cache positions report"
import json, sys
t, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert t["transform"]["positions"] == "text" and c["transform"]["positions"] == "cache", (t["transform"], c["transform"])
assert c["transform"]["label"] == "sinks=4 window=16 positions=cache", c["transform"]
# n = 8 <= sinks + window - 1: nothing dropped, the same numbers; n = 128: the sinks moved
assert t["results"][0]["loss"] == c["results"][0]["loss"], (t["results"][0], c["results"][0])
assert abs(t["results"][1]["loss"] - c["results"][1]["loss"]) > 1e-7, (t["results"][1], c["results"][1])
EOF2
done
expect_rc 2 "cache positions without sinks" "$BIN" eval rope --lengths 64 --window 16 --positions cache --quiet
expect_err "--positions cache: moves the attention sinks into the cache; it needs sinks and a window (--sinks K or eval.sinks, --window W)"
expect_rc 2 "cache positions with rerope" "$BIN" generate rope --transform rerope --sinks 2 --window 8 --positions cache --tokens 5
expect_err "not supported with transform rerope"
# a run whose eval section sets the sinks: eval, eval --task passkey take them without flags
# (probe 25), and an error names each value's flag or key
expect_rc 0 "train with eval.sinks/window/positions" "$BIN" train cfg.json --out ropec --quiet --set model.pos=rope \
    --set eval.sinks=4 --set eval.window=16 --set eval.positions=cache
expect_rc 0 "passkey eval with the config's sinks" "$BIN" eval ropec --task passkey --lengths 64 --depths 0.5 --trials 2 --quiet
[ -f ropec/eval_valid_passkey_sinks_4_window_16_positions_cache.json ] && ok || { bad "passkey eval ignored the config's eval.sinks"; ls ropec; }
expect_rc 2 "config's cache positions with --transform rerope" "$BIN" eval ropec --lengths 64 --transform rerope --quiet
expect_err "eval.positions \"cache\": not supported with transform rerope (--transform)"
expect_rc 2 "--sinks 0 over the config's sinks, with --positions cache" "$BIN" eval ropec --lengths 64 --window 8 --sinks 0 --positions cache --quiet
expect_err "--positions cache: moves the attention sinks into the cache; it needs sinks and a window (--sinks K, --window W)"
# --window 0 --sinks 0 switch the config's window off: the plain model's report (probe 26)
expect_rc 0 "--window 0 --sinks 0 over the config's sinks" "$BIN" eval ropec --lengths 64 --window 0 --sinks 0 --quiet
[ -f ropec/eval_valid_nonoverlapping.json ] && ok || { bad "--window 0 did not switch the window off"; ls ropec; }
# --window 0 alone is "no window", the key's default: the config's sinks go with the window
# (it was refused: "eval.sinks 4: attention sinks need a window"), the plain model's figure
rm -f ropec/eval_valid_nonoverlapping.json
expect_rc 0 "--window 0 alone switches the config's window and sinks off" "$BIN" eval ropec --lengths 64 --window 0 --json w0.json
[ -f w0.json ] && ! grep -q '"transform"' w0.json && ok || bad "--window 0 kept a transform: $(grep -A3 '"transform"' w0.json)"
expect_rc 0 "--window 0 in task mode (passkey)" "$BIN" eval ropec --task passkey --lengths 64 --depths 0.5 --trials 2 --window 0 --quiet
[ -f ropec/eval_valid_passkey.json ] && ok || { bad "passkey --window 0 kept a transform"; ls ropec; }
# --sinks with no window: asked for where the sinks were set (it said eval.window to --sinks)
expect_rc 2 "--sinks 2 --window 0" "$BIN" eval ropec --lengths 64 --window 0 --sinks 2 --quiet
expect_err "--sinks 2: attention sinks need a window (--window W"
expect_rc 2 "--sinks 2 in task mode" "$BIN" eval rope --task passkey --lengths 64 --sinks 2 --quiet
expect_err "--sinks 2: attention sinks need a window (--window W"
expect_rc 2 "--sinks 2 in text mode" "$BIN" eval rope --lengths 64 --sinks 2 --quiet
expect_err "--sinks 2: attention sinks need a window (--window W"
expect_rc 2 "bad --positions" "$BIN" eval rope --sinks 2 --window 8 --positions slots --quiet
expect_err "--positions 'slots': expected text"
tiny_text_run sinusoidal
expect_rc 0 "train sinusoidal" "$BIN" train cfg.json --out sin --quiet --set model.pos=sinusoidal
expect_err 'model.pos "sinusoidal" with model.embed_scale 1 (init_std 0.3): the sinusoids'   # the baseline trap, said
expect_rc 0 "sinusoidal with the paper's scale" "$BIN" train cfg.json --out sin0 --quiet --set model.pos=sinusoidal \
    --set model.embed_scale=0
grep -q "embed_scale 1" err.txt && bad "warned at model.embed_scale 0" || ok
expect_rc 2 "cache positions on an absolute method" "$BIN" eval sin --lengths 64 --sinks 2 --window 8 --positions cache --quiet
expect_err "not supported for model.pos \"sinusoidal\": its positions are added to the token embeddings"
expect_rc 2 "eval.positions in a config" "$BIN" train cfg.json --out bad2 --quiet --set model.pos=sinusoidal --set eval.sinks=2 --set eval.window=8 --set eval.positions=cache
expect_err "eval.positions \"cache\": not supported for model.pos \"sinusoidal\""

# blockwise causal attention (--blockwise B, eval.blockwise): its own report, the plain model's
# figure while two blocks cover the window (L = 32 = 2 x 16), another past that
for r in rope alibi; do
    expect_rc 0 "$r: plain eval" "$BIN" eval $r --lengths 32,128 --json $r-plain.json --quiet
    expect_rc 0 "$r: blocks of 16" "$BIN" eval $r --lengths 32,128 --blockwise 16 --quiet
    "$PY" - $r/eval_valid_nonoverlapping_blockwise_16.json $r-plain.json <<'EOF2' && ok || bad "$r: block report"
import json, sys
b, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = b["transform"]
assert t["name"] == "none" and t["blockwise"] == 16 and t["label"] == "blockwise=16" and t["window"] == 0, t
assert b["results"][0]["loss"] == p["results"][0]["loss"], (b["results"][0], p["results"][0])
assert abs(b["results"][1]["loss"] - p["results"][1]["loss"]) > 1e-7, (b["results"][1], p["results"][1])
EOF2
done
expect_rc 0 "yarn + blocks" "$BIN" eval rope --lengths 128 --transform yarn --blockwise 16 --json yb.json --quiet
"$PY" -c "import json; t = json.load(open('yb.json'))['transform']; assert t['label'] == 'yarn+blockwise=16' and t['blockwise'] == 16, t" && ok || bad "yarn + block report"
expect_rc 2 "--blockwise with --window" "$BIN" eval rope --lengths 64 --blockwise 16 --window 8 --quiet
expect_err "--blockwise 16 and --window 8: blockwise causal attention and an attention window are two masks; give one"
expect_rc 2 "--blockwise -1" "$BIN" eval rope --lengths 64 --blockwise -1 --quiet
expect_err "--blockwise '-1': expected an integer in \[0, 16777216\] (as eval.blockwise; 0: no blocks)"
same_text "rope blocks" rope --prompt "the quick brown fox" --tokens 60 --seed 9 --blockwise 8
same_text "alibi blocks" alibi --prompt "the quick brown fox" --tokens 60 --seed 9 --blockwise 8
same_text "rope yarn + blocks" rope --prompt "the quick" --tokens 60 --seed 2 --transform yarn --blockwise 8 --context 128
expect_rc 2 "dynamic_ntk with blocks" "$BIN" generate rope --transform dynamic_ntk --blockwise 8 --tokens 5
expect_err "--transform dynamic_ntk with --blockwise: the current length of a windowed cache is ambiguous"
expect_rc 0 "--no-cache with blocks past --context" "$BIN" generate rope --prompt "the quick" --tokens 40 --blockwise 4 \
    --context 16 --no-cache
expect_err "each forward counts its blocks of 4 from the first of the last 16 tokens"
# a run whose eval section sets eval.blockwise: eval takes it, --blockwise 0 switches it off, and
# the key is refused beside eval.window naming both keys
expect_rc 0 "train with eval.blockwise" "$BIN" train cfg.json --out ropeb --quiet --set model.pos=rope --set eval.blockwise=16
expect_rc 0 "eval with the config's blocks" "$BIN" eval ropeb --lengths 64 --quiet
[ -f ropeb/eval_valid_nonoverlapping_blockwise_16.json ] && ok || { bad "eval ignored the config's eval.blockwise"; ls ropeb; }
expect_rc 0 "--blockwise 0 over the config's blocks" "$BIN" eval ropeb --lengths 64 --blockwise 0 --quiet
[ -f ropeb/eval_valid_nonoverlapping.json ] && ok || { bad "--blockwise 0 did not switch the blocks off"; ls ropeb; }
expect_rc 2 "--window over the config's blocks" "$BIN" eval ropeb --lengths 64 --window 8 --quiet
expect_err "eval.blockwise 16 and --window 8: blockwise causal attention and an attention window are two masks"
expect_rc 2 "eval.blockwise with eval.window" "$BIN" train cfg.json --out bad3 --quiet --set eval.blockwise=16 --set eval.window=8
expect_err "eval.blockwise 16 and eval.window 8: blockwise causal attention and an attention window are two masks"

# a sweep variant sets eval.transform: its rows say so
cat > sweep.json <<'EOF2'
{"base": "cfg.json", "set": {"model.pos": "rope"},
 "variants": [{"name": "rope"}, {"name": "rope-yarn", "eval.transform": "yarn"}, {"name": "rope-bca", "eval.blockwise": 16}],
 "eval": {"lengths": [32, 64], "buckets": 0}, "out": "sw"}
EOF2
expect_rc 0 "sweep with a transform variant" "$BIN" sweep sweep.json --quiet
expect_err "rope-yarn: same model as rope (differs in eval.\* only)"
[ ! -e sw/rope-yarn/checkpoints ] && [ -f sw/rope-yarn/sweep_done.json ] && ok || bad "the transform variant trained a copy"
grep -q "rope + yarn" sw/results.md && grep -q "rope + blockwise=16" sw/results.md && ok || { bad "results.md lacks the transform"; cat sw/results.md; }
"$PY" - sw/results.csv <<'EOF2' && ok || bad "results.csv transform columns"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
xf = {(r["run"], r["length"]): (r["transform"], r["transform_scale"]) for r in rows}
assert xf[("rope", "64")] == ("", ""), xf
assert xf[("rope-yarn", "64")] == ("yarn", "2"), xf
assert xf[("rope-bca", "64")][0] == "blockwise=16", xf
EOF2
expect_rc 0 "sweep again: finished points are skipped" "$BIN" sweep sweep.json --quiet
expect_err "finished earlier, skipped"
"$PY" -c "import json; r = json.load(open('sw/results.json'))['runs']; assert r[1]['trained_in'].endswith('sw/rope') and 'trained_in' not in r[0]" && ok || bad "results.json trained_in"
# a changed transform evaluates the variant again, still without training
sed -i 's/"eval.transform": "yarn"/"eval.transform": "ntk"/' sweep.json
expect_rc 0 "sweep with the variant changed" "$BIN" sweep sweep.json --quiet
grep -q "rope + ntk" sw/results.md && [ ! -e sw/rope-yarn/checkpoints ] && ok || { bad "changed variant"; cat sw/results.md; }

echo "cli_transforms: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
