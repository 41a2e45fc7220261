#!/usr/bin/env bash
# cli_bf16.sh - precision bf16 end to end (docs/precision.md):
#   - training parity: a tiny model (2 layers, d 64) trained 300 steps on the synthetic
#     corpus in fp32 and in bf16 (train.precision): the training loss at steps 100/200/300
#     and the validation perplexity at 1x and 4x the training length agree within 1% (the
#     issue's bound); the two traces are not bit-identical (the bf16 path really ran);
#   - a bf16 run resumed from a checkpoint continues the uninterrupted bf16 trace bit for
#     bit (the weights' bf16 shadow is rebuilt after the load, and oneDNN is deterministic
#     for a fixed thread count);
#   - a bf16 run resumed in fp32 (--set train.precision=fp32) says so in metrics.jsonl, a
#     record at the checkpoint's step naming the change, and none for a plain resume;
#   - `stretch eval --precision bf16` of the fp32-trained run: perplexity within 0.5% of
#     the fp32 eval at every length, and the report says which precision ran;
#   - `stretch bench --precision bf16` prints the bf16 GEMM rate, tokens/s, MFU, RSS;
#   - bad precision names are usage/config errors (exit 2) naming the flag or key.
# Skipped (exit 77) when the binary was built without oneDNN.
. "$(dirname "$0")/lib_cli.sh" cli_bf16

if ! "$BIN" bench --preset tiny --precision bf16 --no-train --no-eval --sgemm 32 --sgemm-reps 1 >probe.out 2>probe.err; then
    if grep -q "built without oneDNN" probe.err; then echo "SKIP cli_bf16: $(tail -1 probe.err)"; exit 77; fi
    bad "bf16 probe failed: $(tail -3 probe.err)"
fi

cat >cfg.json <<EOF
{
  "model": {"n_layers": 2, "d_model": 64, "n_heads": 4, "pos": "alibi"},
  "data": {"source": "synthetic", "cache_dir": "$T/cache",
           "synthetic": {"vocab": 32, "order": 1, "branch": 4, "tokens": [200000, 20000, 20000]}},
  "train": {"batch_size": 16, "seq_len": 32, "steps": 300, "log_every": 100, "eval_every": 300, "eval_batches": 20,
            "checkpoint_every": 150, "threads": 2, "optimizer": {"lr": 0.01}, "schedule": {"warmup": 30}},
  "eval": {"lengths": [32, 128]}
}
EOF

# ---- training parity ----
expect_rc 0 "train fp32" "$BIN" train cfg.json --out r32
expect_rc 0 "train bf16" "$BIN" train cfg.json --set train.precision=bf16 --out r16
expect_err "matmul precision: bf16 ("
if ! grep -q avx512_bf16 /proc/cpuinfo && ! grep -q amx_bf16 /proc/cpuinfo; then
    expect_err "no native bf16 kernel here"   # never emulated silently
fi
grep -q '"precision": "bf16"' r16/config.json && ok || bad "r16/config.json lacks train.precision bf16"
"$PY" - r32/metrics.jsonl r16/metrics.jsonl <<'EOF' && ok || bad "training parity (see above)"
import json, sys
def trace(p):
    rows = [json.loads(l) for l in open(p)]
    return ({r["step"]: r["loss"] for r in rows if "loss" in r}, [r["val_loss"] for r in rows if "val_loss" in r][-1])
(a, va), (b, vb) = trace(sys.argv[1]), trace(sys.argv[2])
bad = 0
for s in sorted(a):
    rel = abs(b[s] - a[s]) / a[s]
    print(f"step {s}: loss fp32 {a[s]:.5f} bf16 {b[s]:.5f} ({100 * rel:.3f}%)")
    bad |= rel > 0.01
print(f"validation loss fp32 {va:.5f} bf16 {vb:.5f}")
bad |= abs(vb - va) / va > 0.01
bad |= a == b   # bit-identical traces: the bf16 path did not run
sys.exit(bad)
EOF
expect_rc 0 "eval fp32 run" "$BIN" eval r32 --quiet --json e32.json
expect_rc 0 "eval bf16 run" "$BIN" eval r16 --quiet --json e16.json
expect_out "bf16 matmuls"   # the run's train.precision is the eval default
"$PY" - e32.json e16.json 1.0 <<'EOF' && ok || bad "bf16-trained vs fp32-trained validation perplexity"
import json, sys
a, b, tol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
assert a["precision"] == "fp32" and b["precision"] == "bf16", (a["precision"], b["precision"])
bad = 0
for x, y in zip(a["results"], b["results"]):
    rel = 100 * abs(y["ppl"] - x["ppl"]) / x["ppl"]
    print(f"L={x['length']}: ppl {x['ppl']:.4f} vs {y['ppl']:.4f} ({rel:.3f}%, bound {tol}%)")
    bad |= rel > tol
sys.exit(bad)
EOF

# ---- resume in bf16: the uninterrupted trace, bit for bit ----
expect_rc 0 "bf16 stop at 150" "$BIN" train cfg.json --set train.precision=bf16 --out rr --stop-after 150
expect_rc 0 "bf16 resume" "$BIN" train --resume rr
"$PY" - r16/metrics.jsonl rr/metrics.jsonl <<'EOF' && ok || bad "bf16 resume is not bit-identical"
import json, sys
t = [{(r["step"], k): v for l in open(p) for r in [json.loads(l)] for k, v in r.items() if k in ("loss", "val_loss")}
     for p in sys.argv[1:]]
print("resumed:", t[1] == t[0])
sys.exit(t[0] != t[1])
EOF
grep -q resumed_from rr/metrics.jsonl && bad "a resume without changes wrote a record: $(grep resumed_from rr/metrics.jsonl)" || ok
# ... and in fp32: config.json says fp32 from then on, metrics.jsonl keeps the seam (the
# resume warning alone said it, and scrolled away)
expect_rc 0 "bf16 stop at 150, again" "$BIN" train cfg.json --set train.precision=bf16 --out rp --stop-after 150 --quiet
expect_rc 0 "resume in fp32" "$BIN" train --resume rp --set train.precision=fp32 --quiet
grep -qxF '{"step": 150, "resumed_from": "rp/checkpoints/step_00000150.ckpt", "changed": "train.precision: \"bf16\" vs \"fp32\""}' \
    rp/metrics.jsonl && ok || bad "no resume record for the precision change: $(grep -n resumed rp/metrics.jsonl)"
"$PY" -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' rp/metrics.jsonl && ok || bad "rp/metrics.jsonl: not JSON lines"

# ---- bf16 eval of the fp32-trained run: within 0.5% ----
expect_rc 0 "eval fp32 run in bf16" "$BIN" eval r32 --precision bf16 --json e32b.json
expect_out "bf16 matmuls"
"$PY" - e32.json e32b.json 0.5 <<'EOF' && ok || bad "bf16 eval of the fp32 run"
import json, sys
a, b, tol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
assert b["precision"] == "bf16"
bad = 0
for x, y in zip(a["results"], b["results"]):
    rel = 100 * abs(y["ppl"] - x["ppl"]) / x["ppl"]
    print(f"L={x['length']}: ppl fp32 {x['ppl']:.5f} bf16 {y['ppl']:.5f} ({rel:.4f}%, bound {tol}%)")
    bad |= rel > tol or not (0 < y["ppl"] < 1e9)
sys.exit(bad)
EOF

# ---- default report names: an eval in another precision than training keeps its own file
# (probe 27: a bf16 eval replaced the run's fp32 report) ----
expect_rc 0 "default eval of the fp32 run" "$BIN" eval r32 --lengths 32 --quiet
expect_rc 0 "bf16 eval of the fp32 run, default name" "$BIN" eval r32 --lengths 32 --precision bf16 --quiet
"$PY" -c '
import json
a, b = json.load(open("r32/eval_valid_nonoverlapping.json")), json.load(open("r32/eval_valid_nonoverlapping_bf16.json"))
assert a["precision"] == "fp32" and b["precision"] == "bf16", (a["precision"], b["precision"])
assert a["train"]["precision"] == b["train"]["precision"] == "fp32", (a["train"], b["train"])' && ok || bad "precision report names"

# ---- task evaluation in the run's precision: bf16 products and KV cache, recorded ----
cat >task.json <<EOF
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "copy", "symbols": 8, "min_size": 1, "max_size": 4}},
 "train": {"batch_size": 16, "seq_len": 12, "steps": 60, "log_every": 60, "eval_every": 0, "eval_batches": 2,
           "threads": 2, "optimizer": {"lr": 0.01}, "schedule": {"warmup": 5}}}
EOF
expect_rc 0 "train a bf16 task run" "$BIN" train task.json --set train.precision=bf16 --out t16 --quiet
expect_rc 0 "task eval of the bf16 run" "$BIN" eval t16 --task --scales 1,2 --trials 8
expect_err "matmul precision: bf16"
expect_rc 0 "task eval of the bf16 run in fp32" "$BIN" eval t16 --task --scales 1,2 --trials 8 --precision fp32 --quiet
"$PY" - t16/eval_task_copy.json t16/eval_task_copy_fp32.json <<'EOF' && ok || bad "task eval precision"
import json, sys
b, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["precision"] == "bf16" and f["precision"] == "fp32" and b["train_precision"] == f["train_precision"] == "bf16"
for x, y in zip(b["results"], f["results"]):
    d = abs(x["answer_loss"] - y["answer_loss"])
    print(f"size {x['size']}: answer loss bf16 {x['answer_loss']:.5f} fp32 {y['answer_loss']:.5f}")
    assert d < 0.02 * y["answer_loss"] + 1e-3, d   # the same model, bf16 rounding apart
assert any(x["answer_loss"] != y["answer_loss"] for x, y in zip(b["results"], f["results"])), "bf16 did not run"
EOF
# plot_tasks.py keeps the two apart (probe 29 saw them averaged as seeds of one line)
"$PY" -c "
import sys; sys.path.insert(0, '$SRC/scripts'); import plot_tasks
g = sorted(r['group'] for r in plot_tasks.load(['t16/eval_task_copy.json', 't16/eval_task_copy_fp32.json']))
assert g == ['alibi [bf16-trained, fp32 eval]', 'alibi [bf16-trained]'], g" && ok || bad "plot_tasks.py groups of bf16 reports"

# ---- bench ----
expect_rc 0 "bench bf16" "$BIN" bench --preset tiny --precision bf16 --steps 2 --warmup 1 --eval 64 --eval-reps 1 \
    --sgemm 256 --sgemm-reps 2 --json b.json
expect_out "matmul precision: bf16"
expect_out "bf16 GEMM 256^3"
expect_out "tokens/s"
"$PY" -c 'import json,sys; j=json.load(open("b.json")); assert j["config"]["precision"]=="bf16" and j["sgemm"]["precision"]=="bf16" and j["sgemm"]["gflops_best"]>0 and j["train"]["mfu"]>0 and j["train"]["peak_rss_bytes"]>0 and j["sgemm"]["impl"], j' \
    && ok || bad "bench JSON"

# ---- bad input ----
expect_rc 2 "eval --precision fp16" "$BIN" eval r32 --precision fp16
expect_err "--precision 'fp16': expected fp32 or bf16"
expect_rc 2 "bench --precision" "$BIN" bench --preset tiny --precision half
expect_err "--precision: fp32 or bf16"
expect_rc 2 "train.precision" "$BIN" train cfg.json --set train.precision=fp8 --out bad
expect_err "train.precision"
[ ! -e bad ] && ok || bad "a rejected config left a run directory"

echo "cli_bf16: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
