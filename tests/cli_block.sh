#!/usr/bin/env bash
# cli_block.sh - the decoder block's options end to end (model.norm, ffn, bias, qk_norm,
# n_kv_heads, out_gate, out_norm, kv_shift; docs/model-format.md): a LLaMA-style run (RMSNorm, SwiGLU, no biases,
# q/k norm, grouped-query attention) trains, resumes bit for bit, evaluates in both
# protocols and with a transform, generates the same text with the KV cache as without it
# (the cache reports its key/value heads), exports the documented tensor names and shapes,
# trains in bf16, extends and sweeps; the default block's tensors are unchanged; bad block
# keys are exit 2 naming the key, with nothing written; the shipped presets load.
. "$(dirname "$0")/lib_cli.sh" cli_block

tiny_text_run rope
LL=(--set model.norm=rmsnorm --set model.ffn=swiglu --set model.bias=false --set model.qk_norm=rmsnorm
    --set model.n_kv_heads=2)
expect_rc 0 "train llama block" "$BIN" train cfg.json --out ll --quiet "${LL[@]}" --set train.log_every=1
expect_rc 0 "train, stopped" "$BIN" train cfg.json --out ll2 --quiet "${LL[@]}" --set train.log_every=1 --stop-after 7
expect_rc 0 "resume" "$BIN" train --resume ll2 --quiet
"$PY" - <<'EOF2' && ok || bad "resumed llama-block run differs"
import json
def losses(p):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "loss" in r and "step" in r]
a, b = losses("ll/metrics.jsonl"), losses("ll2/metrics.jsonl")
assert a == b and len(a) == 20, (a[-2:], b[-2:])
EOF2

expect_rc 0 "eval" "$BIN" eval ll --lengths 32,64,128 --json e1.json --quiet
expect_rc 0 "eval sliding" "$BIN" eval ll --lengths 128 --mode sliding --stride 16 --json e2.json --quiet
expect_rc 0 "eval yarn" "$BIN" eval ll --lengths 128 --transform yarn --json e3.json --quiet
"$PY" -c "
import json, math
for f in ('e1.json', 'e2.json', 'e3.json'):
    for r in json.load(open(f))['results']:
        assert r['status'] == 'ok' and math.isfinite(r['loss']) and r['loss'] < 6, (f, r['loss'])" && ok || bad "eval losses"
same_text "generate llama block" ll --prompt "the quick" --tokens 60 --context 128 --seed 4
expect_rc 0 "generate (log)" "$BIN" generate ll --prompt "the" --tokens 8 --context 48
expect_err "kv cache: .* 2 key/value heads (of 4 query heads)"

expect_rc 0 "export" "$BIN" export ll --out exp
"$PY" - <<'EOF2' && ok || bad "exported tensor names and shapes"
import json, struct
f = open("exp/model.safetensors", "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = {k: v["shape"] for k, v in json.loads(f.read(n)).items() if k != "__metadata__"}
C, H, Hkv, D = 32, 4, 2, 8
F = (8 * C + 2) // 3; F = (F + 63) // 64 * 64            # d_ff rule of the gated units: 128
assert h["blocks.0.attn.qkv.weight"] == [(H + 2 * Hkv) * D, C], h["blocks.0.attn.qkv.weight"]
assert h["blocks.0.ffn.fc1.weight"] == [2 * F, C] and h["blocks.0.ffn.fc2.weight"] == [C, F]
assert h["blocks.1.attn.q_norm.weight"] == [D] and h["blocks.1.attn.k_norm.weight"] == [D]
assert h["blocks.0.ln1.weight"] == [C] and h["ln_f.weight"] == [C]
for k in h:
    assert not k.endswith(".bias"), k                    # no biases: rmsnorm, model.bias false
EOF2
# the default block keeps its tensors (old checkpoints and exports)
expect_rc 0 "train gpt2 block" "$BIN" train cfg.json --out g --quiet
expect_rc 0 "export gpt2" "$BIN" export g --out expg
"$PY" - <<'EOF2' && ok || bad "default block's tensors changed"
import json, struct
f = open("expg/model.safetensors", "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = {k: v["shape"] for k, v in json.loads(f.read(n)).items() if k != "__metadata__"}
assert h["blocks.0.attn.qkv.weight"] == [96, 32] and h["blocks.0.attn.qkv.bias"] == [96]
assert h["blocks.0.ffn.fc1.weight"] == [128, 32] and h["ln_f.bias"] == [32] and "blocks.0.attn.q_norm.weight" not in h
EOF2

expect_rc 0 "bf16 llama block" "$BIN" train cfg.json --out bf --quiet "${LL[@]}" --set train.precision=bf16 --set train.steps=4
expect_rc 0 "extend llama block" "$BIN" extend ll --to 64 --transform ntk --steps 2 --out llx --quiet

# bad input: exit 2 naming the key, nothing written
expect_rc 2 "n_kv_heads 3" "$BIN" train cfg.json --out b1 --set model.n_kv_heads=3
expect_err "model.n_kv_heads: 3 must divide model.n_heads 4"
expect_rc 2 "n_kv_heads 0" "$BIN" train cfg.json --out b2 --set model.n_kv_heads=0
expect_err "model.n_kv_heads: 0: must be >= 1"
expect_rc 2 "n_kv_heads 8" "$BIN" train cfg.json --out b3 --set model.n_kv_heads=8
expect_err "model.n_kv_heads: 8 must divide"
expect_rc 2 "unknown norm" "$BIN" train cfg.json --out b4 --set model.norm=batchnorm
expect_err "model.norm"
expect_rc 2 "unknown ffn" "$BIN" train cfg.json --out b5 --set model.ffn=relu
expect_err "model.ffn"
expect_rc 2 "d_ff negative" "$BIN" train cfg.json --out b6 --set model.d_ff=-4
expect_err "model.d_ff"
expect_rc 2 "bias not a bool" "$BIN" train cfg.json --out b7 --set model.bias=2
expect_err "model.bias"
for d in b1 b2 b3 b4 b5 b6 b7; do [ -e "$d" ] && bad "$d was written"; done; ok

# model.out_gate: a sigmoid gate on the attention output, per value or per head
expect_rc 0 "train, elementwise output gate" "$BIN" train cfg.json --out og --set model.out_gate=elementwise
expect_err "elementwise output gate"
expect_rc 0 "train, headwise gate, stopped" "$BIN" train cfg.json --out oh --quiet "${LL[@]}" --set model.out_gate=headwise \
    --set train.log_every=1 --stop-after 9
expect_rc 0 "resume headwise gate" "$BIN" train --resume oh --quiet
expect_rc 0 "train headwise gate, whole" "$BIN" train cfg.json --out oh2 --quiet "${LL[@]}" --set model.out_gate=headwise \
    --set train.log_every=1
cmp -s <(grep -o '"loss": [^,]*' oh/metrics.jsonl) <(grep -o '"loss": [^,]*' oh2/metrics.jsonl) && ok ||
    bad "a resumed output-gate run differs from a whole one"
expect_rc 0 "eval gated" "$BIN" eval og --lengths 32,128 --json eg.json --quiet
same_text "generate, elementwise gate" og --prompt "the quick" --tokens 40 --context 128 --seed 2
same_text "generate, headwise gate, sliding cache" oh --prompt "the" --tokens 70 --context 128 --seed 3 --sinks 2 --window 24
expect_rc 0 "export gated" "$BIN" export oh --out exo
"$PY" - <<'EOF2' && ok || bad "output gate tensors in the export"
import json, struct
for d, rows in (("exo", 4), ):
    f = open(d + "/model.safetensors", "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    h = {k: v["shape"] for k, v in json.loads(f.read(n)).items() if k != "__metadata__"}
    assert h["blocks.0.attn.out_gate.weight"] == [rows, 32] and h["blocks.1.attn.out_gate.weight"] == [rows, 32], h
    assert json.load(open(d + "/config.json"))["model"]["out_gate"] == "headwise"
EOF2
expect_rc 0 "bf16 output gate" "$BIN" train cfg.json --out obf --quiet --set model.out_gate=elementwise \
    --set train.precision=bf16 --set train.steps=4
expect_rc 2 "unknown out_gate" "$BIN" train cfg.json --out b8 --set model.out_gate=sigmoid
expect_err "model.out_gate"
[ -e b8 ] && bad "b8 was written" || ok

# the Forgetting Transformer's Pro block (model.out_norm, out_gate, kv_shift) on the LLaMA block
PRO=(--set model.pos=fox --set model.out_norm=rmsnorm --set model.out_gate=elementwise --set model.kv_shift=both)
expect_rc 0 "train pro block" "$BIN" train cfg.json --out pro "${LL[@]}" "${PRO[@]}" --set train.log_every=1
expect_err "output rmsnorm, elementwise output gate, key/value shift"
expect_rc 0 "train pro block, stopped" "$BIN" train cfg.json --out pro2 --quiet "${LL[@]}" "${PRO[@]}" \
    --set train.log_every=1 --stop-after 9
expect_rc 0 "resume pro block" "$BIN" train --resume pro2 --quiet
cmp -s <(grep -o '"loss": [^,]*' pro/metrics.jsonl) <(grep -o '"loss": [^,]*' pro2/metrics.jsonl) && ok ||
    bad "a resumed pro-block run differs from a whole one"
expect_rc 0 "eval pro block" "$BIN" eval pro --lengths 32,128 --json ep.json --quiet
expect_rc 0 "eval pro block, sliding" "$BIN" eval pro --lengths 128 --mode sliding --stride 16 --json ep2.json --quiet
"$PY" -c "
import json, math
for f in ('ep.json', 'ep2.json'):
    for r in json.load(open(f))['results']:
        assert r['status'] == 'ok' and math.isfinite(r['loss']) and r['loss'] < 6, (f, r['loss'])" && ok ||
    bad "pro-block eval losses"
same_text "generate, pro block" pro --prompt "the quick" --tokens 40 --context 128 --seed 2
expect_rc 0 "generate, pro block (log)" "$BIN" generate pro --prompt "the" --tokens 8 --context 48
expect_err "kv cache: .* bytes): keys and values, gate sums, shift rows$"
same_text "generate, pro block, sliding cache" pro --prompt "the" --tokens 70 --context 128 --seed 3 --window 24
expect_rc 0 "train, value shift + output norm (gpt-2 block, alibi)" "$BIN" train cfg.json --out vs --quiet \
    --set model.pos=alibi --set model.kv_shift=value --set model.out_norm=rmsnorm --set train.steps=6
same_text "generate, value shift" vs --prompt "the" --tokens 30 --context 64 --seed 5
expect_rc 0 "export pro block" "$BIN" export pro --out exp_pro
"$PY" - <<'EOF2' && ok || bad "pro-block tensors in the export"
import json, struct
f = open("exp_pro/model.safetensors", "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = {k: v["shape"] for k, v in json.loads(f.read(n)).items() if k != "__metadata__"}
for l in (0, 1):   # n_kv_heads 2: a shift gate per key/value head
    assert h[f"blocks.{l}.attn.k_shift.weight"] == [2, 32] and h[f"blocks.{l}.attn.v_shift.weight"] == [2, 32], h
    assert h[f"blocks.{l}.attn.out_norm.weight"] == [32] and h[f"blocks.{l}.attn.out_gate.weight"] == [32, 32], h
m = json.load(open("exp_pro/config.json"))["model"]
assert m["out_norm"] == "rmsnorm" and m["kv_shift"] == "both", m
EOF2
expect_rc 0 "bf16 pro block" "$BIN" train cfg.json --out pbf --quiet "${LL[@]}" "${PRO[@]}" --set train.precision=bf16 \
    --set train.steps=4
expect_rc 2 "unknown kv_shift" "$BIN" train cfg.json --out b9 --set model.kv_shift=keys
expect_err "model.kv_shift"
expect_rc 2 "unknown out_norm" "$BIN" train cfg.json --out b10 --set model.out_norm=layernorm
expect_err "model.out_norm"
for d in b9 b10; do [ -e "$d" ] && bad "$d was written"; done; ok

# the presets load and differ in the block only (same parameters at their sizes)
for p in block_gpt2 block_llama block_fox_pro; do
    expect_rc 0 "$p loads" "$BIN" train "$SRC/configs/$p.json" --out "p_$p" --quiet --set train.steps=0 \
        --set data.path=corpus.txt --set train.seq_len=32 --set train.eval_batches=0
done
"$PY" - "$SRC" <<'EOF2' && ok || bad "presets"
import json, sys
a = json.load(open(sys.argv[1] + "/configs/block_gpt2.json"))
b = json.load(open(sys.argv[1] + "/configs/block_llama.json"))
assert {k: v for k, v in a.items() if k != "model"} == {k: v for k, v in b.items() if k != "model"}
assert b["model"]["norm"] == "rmsnorm" and b["model"]["ffn"] == "swiglu" and b["model"]["bias"] is False
# the Pro block: the LLaMA preset with FoX, its four pieces, and d_ff 704 (the gate's C^2 per
# layer about paid for by 3 x 64 x C fewer feed-forward weights)
c = json.load(open(sys.argv[1] + "/configs/block_fox_pro.json"))
assert {k: v for k, v in c.items() if k != "model"} == {k: v for k, v in b.items() if k != "model"}
pro = {"pos": "fox", "qk_norm": "rmsnorm_heads", "out_norm": "rmsnorm", "out_gate": "elementwise", "kv_shift": "both", "d_ff": 704}
assert c["model"] == dict(b["model"], **pro), c["model"]
EOF2

# a sweep over the block keys labels its points and runs them
cat > sw.json <<'EOF2'
{"base": "cfg.json", "set": {"train.steps": 4},
 "variants": [{"name": "gpt2"}, {"name": "llama", "model.norm": "rmsnorm", "model.ffn": "geglu",
              "model.bias": false, "model.n_kv_heads": 1}],
 "eval": {"lengths": [32, 64]}, "out": "sw"}
EOF2
expect_rc 0 "block sweep" "$BIN" sweep sw.json --quiet
grep -q "| llama" sw/results.md && grep -q "| gpt2" sw/results.md && ok || { bad "sweep rows"; cat sw/results.md; }

finish cli_block
