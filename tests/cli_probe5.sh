#!/usr/bin/env bash
# cli_probe5.sh - the findings of the fifth round of black-box probes (context extension,
# export and block interchange, paper faithfulness, generate and bench) that are not checked
# beside their feature's own tests:
#   - an extension stopped before its first checkpoint restarts on --resume from the
#     checkpoint its first start took (RUN/init_from.json), not from the base run's latest,
#     which may have moved on; a pinned checkpoint that is gone is refused (exit 5);
#   - extend RUN --out RUN --force (or a --force run whose init_from lies in its directory)
#     is refused before anything is deleted;
#   - extending a run trained with a scaling, without --transform, warns that the scaling
#     is dropped;
#   - a config error caused by the user's --set names the --set (extend and train);
#   - the extend line counts grad_accum in the tokens per step;
#   - a parameter table mismatch names the first parameter that differs;
#   - a single failing eval length says its error once;
#   - export: a run directory is never an export's (even with --force); the exported
#     config.json resolves model.d_ff and model.n_kv_heads; train.init_from naming an export
#     directory points at its model.safetensors;
#   - generate warns when --context is capped at model.max_len; --sinks without --window
#     names --sinks;
#   - bench: no GEMM probe means no MFU (n/a, JSON null), not 0%; --warmup 0 and
#     --profile without training steps are refused; flops_per_token is exact in the JSON;
#   - tasks: eval --task --sizes past 2^20 is refused (it ran for hours, gigabytes deep);
#     size ranges show 2^20, not INT64_MAX; a cross-key task error names the --set;
#     `stretch data --source task` is refused instead of printing the copy task's counts;
#   - second round: a sweep point that died before its first checkpoint restarts from its
#     pinned init_from checkpoint too; a pinned file replaced under its name (CRC32) is
#     refused; a --set that changes nothing is not blamed; sweep points name their own
#     values; extend --budget replans for a --set batch or grad_accum; wsd's decay length
#     rounds decay_frac as typed, and decay_frac with another kind is refused; init_from
#     warns about model keys that differ from the checkpoint's run;
#   - the docs' examples: eval --task's --lengths and --sizes take the doubling range A..B;
#     quickstart.sh and the results scripts answer --help; a rerope header and report do
#     not claim a scale.
. "$(dirname "$0")/lib_cli.sh" cli_probe5

cat > base.json <<JSON
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "rope"},
 "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 16, "tokens": [8000, 2000, 2000]}},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 6, "eval_batches": 1, "threads": 1, "keep_last": 4,
           "schedule": {"kind": "constant", "warmup": 0}}}
JSON
expect_rc 0 "base run" "$BIN" train base.json --out b --quiet

# ---- a restart from step 0 takes the checkpoint the first start took ----
X="--to 32 --transform pi --steps 4 --quiet"
expect_rc 0 "extension (reference)" "$BIN" extend b $X --out ref
expect_rc 0 "extension" "$BIN" extend b $X --out ext
rm -f ext/checkpoints/*   # as if killed before its first checkpoint
expect_rc 0 "the base run trains on" "$BIN" train --resume b --set train.steps=10 --quiet
expect_rc 0 "resume of the extension: a restart from step 0" "$BIN" train --resume ext
grep -q "init_from: .*b/checkpoints/step_00000006.ckpt" err.txt && ok || bad "restart took another checkpoint: $(grep init_from err.txt)"
trace() { grep -o '"loss": [0-9.e+-]*' "$1/metrics.jsonl"; }
[ "$(trace ref)" = "$(trace ext)" ] && ok || bad "the restarted extension is another run: $(trace ext) vs $(trace ref)"
grep -q '"step":.6' ext/init_from.json && ok || bad "init_from.json no longer names step 6: $(cat ext/init_from.json)"
rm -f ext/checkpoints/* b/checkpoints/step_00000006.ckpt
expect_rc 5 "restart whose pinned checkpoint is gone" "$BIN" train --resume ext --quiet
expect_err "ext/init_from.json: the run started from .*b/checkpoints/step_00000006.ckpt, which is gone"

# ---- --force never deletes the weights a run starts from ----
n0=$(ls b/checkpoints | wc -l)
expect_rc 2 "extend b --out b --force" "$BIN" extend b --to 32 --steps 2 --out b --force --quiet
expect_err "train.init_from .*b lies in b, the run directory --force would replace"
expect_rc 2 "extend b --out b/ --force" "$BIN" extend b --to 32 --steps 2 --out ./b/ --force --quiet
[ "$(ls b/checkpoints | wc -l)" = "$n0" ] && [ -s b/config.json ] && ok || bad "the base run lost files: $(ls b/checkpoints)"
expect_rc 2 "train --force over init_from's run" "$BIN" train base.json --set train.init_from=b --out b --force --quiet
[ "$(ls b/checkpoints | wc -l)" = "$n0" ] && ok || bad "train --force deleted init_from's checkpoints"

# ---- a trained scaling dropped by an extension without --transform: a warning ----
expect_rc 0 "extend without --transform" "$BIN" extend ref --to 64 --steps 0 --out ref2
expect_err "ref was trained with model.scaling.transform pi (scale 2); this extension uses none (plain fine-tuning, the scaling dropped): give --transform pi to keep it"
expect_rc 0 "extend with --transform" "$BIN" extend ref --to 64 --transform pi --steps 0 --out ref3
grep -q "scaling dropped" err.txt && bad "a kept scaling warned" || ok

# ---- the user's own --set named, not the base run's config.json ----
expect_rc 2 "extend --set train.seq_len" "$BIN" extend b --to 32 --transform pi --steps 2 --out s1 --set train.seq_len=8
expect_err "--set train.seq_len=8: the extended run's train.seq_len is --to N"
expect_rc 2 "extend --set yarn_alpha with pi" "$BIN" extend b --to 32 --transform pi --steps 2 --out s1 --set model.scaling.yarn_alpha=2
expect_err "^stretch extend: error: --transform, --set model.scaling.yarn_alpha=2: model.scaling.yarn_alpha: applies to"
expect_rc 2 "extend --set yarn_alpha past beta" "$BIN" extend b --to 32 --transform yarn --steps 2 --out s1 --set model.scaling.yarn_alpha=40
expect_err "^stretch extend: error: --set model.scaling.yarn_alpha=40: model.scaling.yarn_beta: the ramp needs"
[ ! -e s1 ] && ok || bad "a refused extension created its directory"

# ---- the budget line counts grad_accum ----
expect_rc 0 "base with grad_accum 2" "$BIN" train base.json --set train.grad_accum=2 --out ga --quiet
expect_rc 0 "extend by budget" "$BIN" extend ga --to 32 --budget 0.5
# 6 steps x 4 x 2 x 16 = 768 tokens; half of it at 2 x 2 x 32 tokens per step = 3 steps
expect_err "3 steps of 2 x 2 x 32 tokens (50.0% of the base run's tokens)"

# ---- a parameter table mismatch names the parameter ----
expect_rc 5 "init_from of another model" "$BIN" extend b --to 32 --steps 2 --out l1 --set model.pos=learned --set model.max_len=64
expect_err "parameter 1 is blocks.0.ln1.weight \[16\] in the checkpoint but pos_emb.weight \[64, 16\] in the model"

# ---- one failing eval length: one message ----
expect_rc 2 "eval: stride longer than the only length" "$BIN" eval b --lengths 8 --mode sliding --stride 12
[ "$(grep -c "sliding stride 12" err.txt)" = 1 ] && ok || bad "the error is said $(grep -c "sliding stride 12" err.txt) times"
expect_rc 0 "eval: one of two lengths fails" "$BIN" eval b --lengths 8,16 --mode sliding --stride 12
grep -q "warning: .*length 8: .*sliding stride 12" err.txt && ok || bad "the failing row of two was not warned about"

# ---- export ----
cp -r b bcopy
expect_rc 3 "export into a run directory, --force" "$BIN" export b --out bcopy --force
expect_err "--out bcopy: is a run directory (it has checkpoints/)"
cmp -s b/config.json bcopy/config.json && [ ! -e bcopy/model.safetensors ] && ok || bad "export wrote into a run directory"
expect_rc 0 "export of a llama-block run" "$BIN" train base.json --out ll --quiet --set model.ffn=swiglu --set model.norm=rmsnorm
expect_rc 0 "export" "$BIN" export ll --out exp/ll
grep -q '"d_ff":[[:space:]]*64' exp/ll/config.json && grep -q '"n_kv_heads":[[:space:]]*2' exp/ll/config.json && ok ||
    bad "the export's config.json keeps the rules: $(grep -E 'd_ff|n_kv_heads' exp/ll/config.json)"
grep -q '"d_ff":[[:space:]]*0' ll/config.json && ok || bad "the run's own config.json changed"
expect_rc 0 "train from the export's config.json" "$BIN" train exp/ll/config.json --set train.init_from=exp/ll/model.safetensors --set train.steps=0 --out ll2 --quiet
expect_rc 3 "init_from an export directory" "$BIN" train base.json --set train.init_from=exp/ll --out ll3 --quiet
expect_err "the directory holds an export: name its weights, .*exp/ll/model.safetensors)"

# ---- generate ----
expect_rc 0 "a learned-position run" "$BIN" train base.json --out lp --quiet --set model.pos=learned --set model.max_len=16
expect_rc 0 "generate past max_len" "$BIN" generate lp --tokens 4 --context 100
expect_err "warning: --context 100: learned positions represent 16 tokens (model.max_len); the context is 16"
expect_rc 2 "generate --sinks without --window" "$BIN" generate b --sinks 2 --tokens 2
expect_err "--sinks 2: attention sinks need a window (--window"

# ---- bench ----
expect_rc 0 "bench without a GEMM probe" "$BIN" bench --preset tiny --steps 1 --no-eval --sgemm 0 --json nogemm.json
grep -q "GEMM probe: not run" out.txt && ! grep -q "MFU = " out.txt && ok || bad "bench printed an MFU without a GEMM: $(cat out.txt)"
/usr/bin/python3 - nogemm.json <<'PYEOF' && ok || bad "bench JSON without a GEMM probe: $(cat nogemm.json)"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["train"]
assert t["mfu"] is None and t["mfu_interleaved"] is None and t["cpu_efficiency"] is None, t
assert r["flops_per_token"] == int(r["flops_per_token"]) and r["flops_per_token"] > 0, r["flops_per_token"]
PYEOF
expect_rc 2 "bench --warmup 0" "$BIN" bench --preset tiny --warmup 0
expect_err "--warmup 0: at least 1"
expect_rc 2 "bench --no-train --profile" "$BIN" bench --preset tiny --no-train --profile
expect_err "--profile profiles the training steps"

# ---- tasks ----
tiny_task_cfg task.json
expect_rc 0 "a copy-task run" "$BIN" train task.json --out tk --quiet
expect_rc 2 "eval --task --sizes past 2^20" timeout 60 "$BIN" eval tk --task --sizes 1048577
expect_err "--sizes '1048577': expected integers in \[1, 2^20\]"
expect_rc 2 "flipflop size 1" "$BIN" train task.json --set data.task.name=flipflop --set data.task.symbols=16 --set data.task.min_size=1 --out tk2 --quiet
expect_err "^stretch train: error: --set data.task.min_size=1: data.task.min_size: flipflop takes sizes (instructions) in \[2, 1048576\], got 1"
expect_rc 2 "a format for the copy task" "$BIN" train task.json --set data.task.format=reversed --out tk2 --quiet
expect_err "^stretch train: error: --set data.task.format=reversed: data.task.format: applies to the task addition"
expect_rc 2 "stretch data --source task" "$BIN" data --source task
expect_err "--source task: task instances are generated per batch"

# ---- second round ----
# a sweep point with train.init_from that died before its first checkpoint
cat > sx.json <<JSON
{"base": "base.json", "set": {"train.init_from": "$T/b2", "train.steps": 6, "train.seq_len": 32,
 "train.checkpoint_every": 0, "train.eval_every": 0}, "variants": [{"name": "p"}], "eval": {"lengths": [32]}}
JSON
expect_rc 0 "base b2" "$BIN" train base.json --out b2 --quiet
expect_rc 0 "sweep (reference)" "$BIN" sweep sx.json --out swref --quiet
expect_rc 0 "sweep" "$BIN" sweep sx.json --out sw --quiet
pdir=$(dirname "$(ls sw/*/init_from.json)")
rm -f "$pdir"/checkpoints/* "$pdir"/sweep_done.json   # as if killed before its first checkpoint
expect_rc 0 "b2 trains on" "$BIN" train --resume b2 --set train.steps=10 --quiet
expect_rc 0 "sweep again" "$BIN" sweep sx.json --out sw
expect_err "stopped before its first checkpoint"
grep -q "init_from: .*b2/checkpoints/step_00000006.ckpt" err.txt && ok || bad "the sweep restart took another checkpoint: $(grep init_from: err.txt)"
[ "$(trace "$pdir")" = "$(trace "$(dirname "$(ls swref/*/init_from.json)")")" ] && ok || bad "the restarted sweep point is another run"
# the pinned checkpoint replaced under its own name: refused
expect_rc 0 "an extension of b2" "$BIN" extend b2 --to 32 --steps 3 --out e2 --quiet
rm -f e2/checkpoints/*
expect_rc 0 "b2 retrained in place" "$BIN" train base.json --out b2 --force --quiet --set train.seed=9 --set train.steps=10
expect_rc 5 "restart whose pinned checkpoint changed" "$BIN" train --resume e2 --quiet
expect_err "e2/init_from.json: the run started from .*step_00000010.ckpt with CRC32 [0-9a-f]*; the file has changed since"
# a --set that changes nothing is not blamed: the file is
printf '{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "n_kv_heads": 3}}' > badkv.json
expect_rc 2 "file with a bad n_kv_heads, --set n_heads unchanged" "$BIN" train badkv.json --set model.n_heads=2 --out x
expect_err "^stretch train: error: badkv.json: model.n_kv_heads"
# sweep points name their own values
cat > sbad.json <<JSON
{"base": "base.json", "variants": [{"name": "w", "train.schedule.kind": "cosine", "train.schedule.warmup": 50}, {"name": "ok"}]}
JSON
expect_rc 2 "a sweep variant breaking warmup <= steps" "$BIN" sweep sbad.json --out swbad --quiet
expect_err "sbad.json: point w: the point's train.schedule.warmup=50: train.schedule.warmup: 50 exceeds train.steps (6)"
printf '{"base": "base.json", "variants": [{"name": "v", "model.pos": "bogus"}]}' > sbad2.json
expect_rc 2 "a sweep variant with an unknown value" "$BIN" sweep sbad2.json --out swbad --quiet
expect_err "sbad2.json: variants\[0\].model.pos: unknown value"
grep -q -- "--set" err.txt && bad "a sweep message names a --set: $(cat err.txt)" || ok
# extend --budget with a --set of grad_accum: the steps count it
# (b: 10 steps of 4 x 16 tokens; 40% of it at 2 x 2 x 32 per step is 2 steps, not 4)
expect_rc 0 "extend --budget, --set grad_accum" "$BIN" extend b --to 32 --budget 0.4 --set train.grad_accum=2 --out bga
expect_err "2 steps of 2 x 2 x 32 tokens (40.0% of the base run's tokens)"
# wsd: decay_frac as typed; with another kind refused
expect_rc 2 "wsd 0.905 x 100 with warmup 10" "$BIN" train base.json --set train.schedule.kind=wsd --set train.steps=100 --set train.schedule.warmup=10 --set train.schedule.decay_frac=0.905 --out x
expect_err "the decay's 91 steps (0.905 x 100)"
expect_rc 2 "decay_frac with cosine" "$BIN" train base.json --set train.schedule.kind=cosine --set train.schedule.decay_frac=0.3 --out x
expect_err "train.schedule.decay_frac: applies to train.schedule.kind \"wsd\" only (this one is \"cosine\")"
# init_from warns about model keys the weights were not trained with
expect_rc 0 "init_from with another embed_scale" "$BIN" train base.json --set train.steps=0 --set train.init_from=b --set model.embed_scale=2 --out es
expect_err "init_from: 1 model key differs from the run that trained .*(model.embed_scale: 1 vs 2; trained vs now)"

# ---- the docs' examples ----
expect_rc 0 "eval --task --sizes 1..4" "$BIN" eval tk --task --sizes 1..4 --trials 2 --json tk_sizes.json
/usr/bin/python3 -c "import json,sys; r=json.load(open('tk_sizes.json')); s=sorted({x['size'] for x in r['results']}); assert s==[1,2,4], s" &&
    ok || bad "--sizes 1..4 evaluated other sizes: $(head -c 300 tk_sizes.json)"
expect_rc 0 "quickstart.sh --help" bash "$SRC/scripts/quickstart.sh" --help
grep -q "usage: bash scripts/quickstart.sh" out.txt && ok || bad "quickstart --help: $(cat out.txt)"
# its threads: train.threads 0 ignores OMP_NUM_THREADS, so the script no longer exports it
# as if it set the count; one count goes to its training and its evaluation
grep -q "OMP_NUM_THREADS does not set" out.txt && ! grep -q "^export OMP_NUM_THREADS" "$SRC/scripts/quickstart.sh" &&
    grep -q 'train configs/quickstart.json .*--set train.threads="$THREADS"' "$SRC/scripts/quickstart.sh" &&
    grep -q 'eval runs/quickstart .*--threads "$THREADS"' "$SRC/scripts/quickstart.sh" && ok ||
    bad "quickstart.sh's threads: $(grep -n 'THREADS' "$SRC/scripts/quickstart.sh")"
for s in results_block results_extension; do
    expect_rc 0 "$s.py --help" /usr/bin/python3 "$SRC/scripts/$s.py" --help
done
expect_rc 0 "a rope run" "$BIN" eval b --lengths 16,32 --transform rerope --json rr.json
grep -q "per length" out.txt && bad "rerope's header claims a scale: $(grep transform out.txt)" || ok
grep -q '"scale":[[:space:]]*"none"' rr.json && ok || bad "rerope's report: $(grep -o '"scale":[^,]*' rr.json)"

finish cli_probe5
