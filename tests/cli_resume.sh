#!/usr/bin/env bash
# cli_resume.sh - stopping, resuming and reading a run whose circumstances changed (probe
# 36's findings on failure and recovery):
#   compute    a resume under another thread count (train.threads 0 under taskset -c 0)
#              or OpenBLAS core warns that the trace is no longer bit-identical, and
#              metrics.jsonl records it; a plain resume says nothing and is bit-identical;
#              a checkpoint of format version 2 (before the record) still resumes, exactly
#   changed    config.json edited in two train keys: the warning and the record name both
#   signals    SIGHUP saves and exits 130; `train 2>&1 | head -n 5` (the reader goes away)
#              leaves a checkpoint at the step it stopped, exit 130, and the resumed run is
#              bit-identical to an uninterrupted one
#   pointer    latest with a CRLF resumes; a control character in it is named; a latest
#              naming a deleted file is read again (keep_last beside a reader: the trainer
#              points it at the new file), and one that stays so is exit 3 naming it;
#              readers beside a training with keep_last 1 never fail
#   flags      --resume with --force is refused (exit 2)
#   best only  a run with best.ckpt and no step checkpoint resumes from it, bit-identically
#   leftovers  a fresh run into a directory holding only an empty checkpoints/ and a dead
#              writer's config.json.tmp.PID.NONCE starts (and removes it)
#   header     a flipped bit in the checkpoint header's reserved bytes 60-63 is exit 5
#   wording    `data --tokenizer x` names the flag and its values; "1 thread," in eval
. "$(dirname "$0")/lib_cli.sh" cli_resume
export OPENBLAS_CORETYPE=Haswell
cat > cfg.json <<EOF
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 2, "pos": "alibi", "dropout_resid": 0.1},
 "data": {"source": "synthetic", "cache_dir": "$T/cache",
          "synthetic": {"seed": 7, "vocab": 32, "order": 2, "branch": 4, "tokens": [40000, 4000, 4000]}},
 "train": {"seed": 1, "batch_size": 8, "seq_len": 32, "steps": 60, "threads": 1, "log_every": 1,
           "optimizer": {"name": "adamw", "lr": 0.003}, "schedule": {"kind": "cosine", "warmup": 5},
           "eval_every": 20, "eval_batches": 2, "checkpoint_every": 20},
 "eval": {"lengths": [32], "max_tokens": 2000}}
EOF
trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }
same_trace() {   # same_trace WHAT A B: the loss traces of two runs, step for step
    if [ -n "$(trace "$2")" ] && [ "$(trace "$2")" = "$(trace "$3")" ]; then ok; else bad "$1: traces differ"; fi
}
run_to() { local want=$1 what=$2; shift 2; expect_rc "$want" "$what" timeout -k 5 120 "$@"; }
LONG=(--set train.steps=100000 --set train.checkpoint_every=0 --set train.eval_every=0)   # until stopped
run_to 0 "reference" "$BIN" train cfg.json --out ref --quiet

# ---- compute: thread count and OpenBLAS core ----
run_to 0 "stop at 20" "$BIN" train cfg.json --out plain --quiet --stop-after 20
run_to 0 "plain resume" "$BIN" train --resume plain
grep -q "resuming with changes" err.txt && bad "a plain resume warned: $(grep resuming err.txt)" || ok
grep -q resumed_from plain/metrics.jsonl && bad "a plain resume wrote a record" || ok
same_trace "plain resume" ref plain
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    run_to 0 "all cores, stop at 20" "$BIN" train cfg.json --out thr --quiet --set train.threads=0 --stop-after 20
    run_to 0 "resume on one core" taskset -c 0 "$BIN" train --resume thr --quiet
    expect_err "threads in use: $(nproc) vs 1"
    expect_err "will not be bit-identical to an uninterrupted run"
    grep -q '"changed": "threads in use: [0-9]* vs 1"' thr/metrics.jsonl && ok || bad "no record of the thread count"
else
    skip "thread count: needs 2 cores and taskset"
fi
if [ "$(uname -m)" = x86_64 ]; then
    run_to 0 "Haswell, stop at 20" "$BIN" train cfg.json --out core --quiet --stop-after 20
    run_to 0 "resume under Prescott" env OPENBLAS_CORETYPE=Prescott "$BIN" train --resume core --quiet
    expect_err "compute: fp32 (OpenBLAS [A-Za-z]*) vs fp32 (OpenBLAS Prescott)"
else
    skip "OpenBLAS core: x86-64 core names"
fi
# a checkpoint of version 2 (no record: as older builds wrote it) resumes, bit-identical
run_to 0 "stop at 20 (to be version 2)" "$BIN" train cfg.json --out v2 --quiet --stop-after 20
"$PY" - v2/checkpoints/step_00000020.ckpt <<'EOF' && ok || bad "could not rewrite the checkpoint as version 2"
import struct, sys, zlib
p = sys.argv[1]
b = open(p, 'rb').read()
hdr, raw = bytearray(b[:64]), zlib.decompress(b[64:])
assert struct.unpack_from('<I', hdr, 8)[0] == 3
jl = struct.unpack_from('<I', raw, 0)[0]
at = 4 + jl + 128                          # the state of version 2 ends here
cl = struct.unpack_from('<I', raw, at + 8)[0]
raw = raw[:at] + raw[at + 12 + cl:]        # without threads and compute
comp = zlib.compress(raw, 1)
struct.pack_into('<IIQQ', hdr, 8, 2, 64, len(raw), len(comp))
struct.pack_into('<I', hdr, 56, zlib.crc32(bytes(hdr[:56]), zlib.crc32(comp)))
open(p, 'wb').write(bytes(hdr) + comp)
EOF
run_to 0 "resume from version 2" "$BIN" train --resume v2
grep -q "resuming with changes" err.txt && bad "a version-2 resume warned: $(grep resuming err.txt)" || ok
same_trace "resume from version 2" ref v2

# ---- changed: every differing key, in the warning and the record ----
run_to 0 "stop at 20" "$BIN" train cfg.json --out edit --quiet --stop-after 20
sed -i -e 's/"lr": 0.003/"lr": 0.001/' -e 's/"seed": 1,/"seed": 5,/' edit/config.json
run_to 0 "resume with an edited config.json" "$BIN" train --resume edit --quiet
expect_err "train.seed: 1 vs 5, train.optimizer.lr: 0.003 vs 0.001"
grep -q '"changed": "train.seed: 1 vs 5, train.optimizer.lr: 0.003 vs 0.001"' edit/metrics.jsonl && ok \
    || bad "the record does not name both keys: $(grep resumed_from edit/metrics.jsonl)"

# ---- signals ----
"$BIN" train cfg.json --out hup --quiet "${LONG[@]}" 2>hup.err & P=$!
for _ in $(seq 200); do [ -s hup/metrics.jsonl ] && break; sleep 0.05; done
kill -HUP $P; wait $P; rc=$?
[ "$rc" = 130 ] && grep -q "interrupted by SIGHUP" hup.err && ok || bad "SIGHUP: exit $rc: $(cat hup.err)"
[ -s hup/checkpoints/latest ] && ok || bad "SIGHUP: no checkpoint"
timeout -k 5 120 "$BIN" train cfg.json --out pipe "${LONG[@]}" 2>&1 | head -n 5 >head.txt
rc=${PIPESTATUS[0]}
[ "$rc" = 130 ] && ok || bad "a reader that went away: exit $rc, expected 130 (141: killed by SIGPIPE)"
K=$(sed -E 's/step_0*([0-9]+)\.ckpt/\1/' pipe/checkpoints/latest 2>/dev/null)
last=$(trace pipe | tail -1 | cut -d' ' -f1)
[ -n "$K" ] && [ "$K" = "$last" ] && ok || bad "pipe: checkpoint at '$K', last step logged '$last'"
K=${K:-1}
run_to 0 "resume after the pipe closed" "$BIN" train --resume pipe --quiet --stop-after $((K + 5))
run_to 0 "uninterrupted" "$BIN" train cfg.json --out pipe_ref --quiet "${LONG[@]}" --stop-after $((K + 5))
same_trace "resume after the pipe closed" pipe_ref pipe

# ---- pointer ----
cp -r ref crlf
printf 'step_00000040.ckpt\r\n' > crlf/checkpoints/latest
run_to 0 "resume with a CRLF latest" "$BIN" train --resume crlf --quiet --set train.steps=61
printf 'step_0000\00160.ckpt\n' > crlf/checkpoints/latest
run_to 5 "a control character in latest" "$BIN" eval crlf --lengths 32
expect_err "crlf/checkpoints/latest: malformed checkpoint pointer: byte 9 is the control character 0x01"
echo step_00000099.ckpt > crlf/checkpoints/latest
# pointed at the new file 0.1 s later, as a training does after the reader read it (an
# eval reads latest within ~0.03 s of its start)
(sleep 0.1; echo step_00000060.ckpt > crlf/checkpoints/l.new && mv crlf/checkpoints/l.new crlf/checkpoints/latest) &
run_to 0 "latest names a deleted file, then the new one" "$BIN" eval crlf --lengths 32 --json e.json
wait
grep -qE '"step":[[:space:]]*60,' e.json && ok || bad "the evaluation is not of step 60"
echo step_00000099.ckpt > crlf/checkpoints/latest
run_to 3 "latest names a deleted file for good" "$BIN" eval crlf --lengths 32
expect_err "crlf/checkpoints/latest names step_00000099.ckpt, which does not exist (read 10 times"
# readers beside a training that keeps one checkpoint: the file latest names may go at any
# moment (the old readers failed ~1 in 75 here)
"$BIN" train cfg.json --out race --quiet "${LONG[@]}" --set train.checkpoint_every=1 --set train.keep_last=1 \
    --set train.log_every=100 2>race.err & P=$!
for _ in $(seq 200); do [ -s race/checkpoints/latest ] && break; sleep 0.05; done
n=0; failed=0
while [ $n -lt 100 ] && kill -0 $P 2>/dev/null; do
    n=$((n + 1))
    "$BIN" eval race --lengths 32 --json race_e.json --force >/dev/null 2>race_e.err || { failed=$((failed + 1)); head -1 race_e.err; }
done
kill -TERM $P; wait $P
[ "$n" -ge 50 ] && [ "$failed" = 0 ] && ok || bad "readers beside a training: $failed of $n failed"

# ---- flags ----
run_to 2 "--resume with --force" "$BIN" train --resume ref --force
expect_err "drop --force"

# ---- best only: killed after a validation wrote best.ckpt, before any step checkpoint ----
# (probe 44: such a run could not be resumed, nor a sweep holding it). best.ckpt is a whole
# training state: the resume continues from it, bit-identical to the uninterrupted run.
# Validations at 20 and 40 are not checkpoint steps (50), so best.ckpt is a file of its own.
run_to 0 "a run with best.ckpt of its own" "$BIN" train cfg.json --out bestonly --quiet --stop-after 45 \
    --set train.checkpoint_every=50
rm -f bestonly/checkpoints/latest bestonly/checkpoints/step_*.ckpt
[ -f bestonly/checkpoints/best.ckpt ] && ok || bad "no best.ckpt of its own: $(ls bestonly/checkpoints)"
run_to 0 "resume from best.ckpt alone" "$BIN" train --resume bestonly --quiet
expect_err "latest missing and no step checkpoint: taking bestonly/checkpoints/best.ckpt"
same_trace "resumed from best.ckpt alone" ref bestonly
run_to 0 "export ref" "$BIN" export ref --out ref_x
run_to 0 "export bestonly" "$BIN" export bestonly --out best_x
cmp -s ref_x/model.safetensors best_x/model.safetensors && ok || bad "resumed from best.ckpt: other final weights"

# ---- leftovers: a run killed while it wrote config.json ----
DEAD=$(sh -c 'echo $$')
mkdir -p left/checkpoints && echo '{"mod' > "left/config.json.tmp.$DEAD.abcdef"
run_to 0 "a fresh run over a dead writer's temp file" "$BIN" train cfg.json --out left --quiet --stop-after 2
[ ! -e "left/config.json.tmp.$DEAD.abcdef" ] && ok || bad "the dead writer's temp file is left"

# ---- header: the reserved bytes ----
cp ref/checkpoints/step_00000060.ckpt hdr.ckpt
printf '\001' | dd of=hdr.ckpt bs=1 seek=61 conv=notrunc 2>/dev/null
run_to 5 "a flipped reserved header bit" "$BIN" eval hdr.ckpt --lengths 32
expect_err "hdr.ckpt: corrupt checkpoint: header bytes 60-63 (reserved)"

# ---- wording ----
run_to 2 "data --tokenizer x" "$BIN" data --source synthetic --tokenizer x
expect_err '--tokenizer: expected auto, word, byte or bpe, got "x"'
grep -q '"task"' err.txt && bad "data --tokenizer lists a value the flag does not take" || ok
run_to 0 "eval on one thread" "$BIN" eval ref --lengths 32 --threads 1 --json e1.json
expect_out "1 thread, fp32 matmuls"

finish cli_resume
