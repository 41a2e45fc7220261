#!/usr/bin/env bash
# cli_crashsafe.sh - crash safety of `stretch train` under SIGKILL (no handler runs, no
# checkpoint is saved on the way out: only the atomic writes protect the run).
#   1. an uninterrupted reference run, exported to safetensors;
#   2. the same run killed with SIGKILL at random moments KILLS times (the first kill
#      once a checkpoint exists, later ones at random delays after each `--resume`,
#      often in the middle of a checkpoint write: checkpoint_every is 1);
#   3. after every kill: `latest` names an existing checkpoint and every *.ckpt in the
#      run loads (`stretch export`), i.e. none is half-written; temp files of killed
#      writers are never taken for checkpoints, and the next `--resume` removes them;
#   4. a final `--resume` finishes; its export is byte-identical (cmp) to the reference
#      and the per-step loss trace in metrics.jsonl equals the reference's;
#   5. disk full (a 2 MiB tmpfs, when this user may mount one): the checkpoint write fails
#      with exit 3 naming the file, the previous checkpoints are byte-identical, no temp
#      file is left, and after freeing space `--resume` ends at the reference parameters.
# Delays come from $RANDOM seeded with CRASH_SEED (printed), scaled to the measured
# reference time, so a failure can be replayed.
set -u
BIN="${STRETCH_BIN:?set STRETCH_BIN to the stretch binary}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/stretch-crashsafe-XXXXXX")"
MOUNTED=""
trap '[ -n "$MOUNTED" ] && umount "$MOUNTED"; rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
KILLS="${CRASH_KILLS:-5}"
SEED="${CRASH_SEED:-$(( $(date +%s) % 100000 ))}"
RANDOM=$SEED
PASS=0
FAIL=0
ok()  { PASS=$((PASS + 1)); }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
now() { date +%s.%N; }

cat >cfg.json <<EOF
{
  "model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi"},
  "data": {"source": "synthetic", "cache_dir": "$TMP/cache",
           "synthetic": {"vocab": 32, "tokens": [60000, 4000, 4000]}},
  "train": {"batch_size": 8, "seq_len": 32, "steps": 240, "log_every": 1, "eval_every": 40, "eval_batches": 2,
            "checkpoint_every": 1, "keep_last": 3, "threads": 1, "optimizer": {"lr": 0.003},
            "schedule": {"kind": "cosine", "warmup": 20}}
}
EOF

trace() { grep '"loss"' "$1/metrics.jsonl" | sed -E 's/.*"step": ([0-9]+), "loss": ([^,]+),.*/\1 \2/'; }

# every checkpoint file of the run loads, and latest names one of them
verify_run() {   # verify_run LABEL
    local latest ck n=0
    latest="$(cat crash/checkpoints/latest 2>/dev/null)"
    check '[ -n "$latest" ] && [ -s "crash/checkpoints/$latest" ]' "$1: latest ('$latest') does not name a checkpoint"
    check 'printf "%s" "$latest" | grep -qE "^step_[0-9]{8}\.ckpt$"' "$1: latest names '$latest', not a step checkpoint"
    for ck in crash/checkpoints/*.ckpt; do
        [ -e "$ck" ] || continue
        n=$((n + 1))
        rm -rf probe
        if "$BIN" export "$ck" --out probe >/dev/null 2>probe.err; then ok
        else bad "$1: $ck does not load: $(cat probe.err)"; fi
    done
    check '[ "$n" -ge 1 ]' "$1: no checkpoint files"
    TMPSEEN=$((TMPSEEN + $(find crash -name '*.tmp.*' | wc -l)))
}

# ---- 1. reference ----
t0=$(now)
"$BIN" train cfg.json --out ref --quiet 2>ref.err
RC=$?
t1=$(now)
check '[ "$RC" -eq 0 ]' "reference run failed: $(cat ref.err)"
REF_MS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')
"$BIN" export ref --out ref_export >/dev/null 2>&1 || bad "reference export failed"
echo "reference run: ${REF_MS} ms; kills: $KILLS; CRASH_SEED=$SEED"

# ---- 2./3. kill, verify, resume ----
# delay in ms, uniform in [5%, 20%] of the reference time (at least 20 ms)
delay_s() { awk -v r="$REF_MS" -v u="$RANDOM" 'BEGIN { d = r * (0.05 + 0.15 * u / 32767); if (d < 20) d = 20; printf "%.3f", d / 1000 }'; }
KILLED=0
TMPSEEN=0   # temp files found right after the kills (a kill during a write leaves one)
DONE=0
"$BIN" train cfg.json --out crash --quiet 2>>crash.err &
PID=$!
for _ in $(seq 1 2000); do [ -s crash/checkpoints/latest ] && break; kill -0 "$PID" 2>/dev/null || break; sleep 0.005; done
for k in $(seq 1 "$KILLS"); do
    d=$(delay_s)
    sleep "$d"
    if kill -KILL "$PID" 2>/dev/null; then
        wait "$PID" 2>/dev/null
        KILLED=$((KILLED + 1))
        echo "  kill $k after ${d}s: at $(cat crash/checkpoints/latest 2>/dev/null), $(grep -c '"loss"' crash/metrics.jsonl) steps logged"
    else
        wait "$PID" 2>/dev/null
        echo "  kill $k: the run had already finished"
        DONE=1
    fi
    verify_run "after kill $k"
    [ "$DONE" -eq 1 ] && break
    "$BIN" train --resume crash --quiet 2>>crash.err &
    PID=$!
done
if [ "$DONE" -eq 0 ]; then wait "$PID"; fi   # the last resume, not killed: let it finish
RC=0
"$BIN" train --resume crash --quiet 2>>crash.err || RC=$?
check '[ "$RC" -eq 0 ]' "final resume failed (exit $RC): $(tail -3 crash.err)"
verify_run "final"

# ---- 4. bit-identical to the uninterrupted run ----
"$BIN" export crash --out crash_export >/dev/null 2>&1 || bad "export of the crashed run failed"
check 'cmp -s ref_export/model.safetensors crash_export/model.safetensors' \
      "parameters after $KILLED kills differ from the uninterrupted run"
check '[ "$(trace crash)" = "$(trace ref)" ]' "loss trace after $KILLED kills differs from the uninterrupted run"
check '[ "$(cat crash/checkpoints/latest)" = "step_00000240.ckpt" ]' "final checkpoint is $(cat crash/checkpoints/latest)"
check '[ "$KILLED" -ge $((KILLS - 1)) ]' "only $KILLED of $KILLS kills landed before the run finished"
# temp files of killed writers are never loaded, and the next --resume removes them
check '[ -z "$(find crash -name "*.tmp.*")" ]' "temp files left after the final resume: $(find crash -name '*.tmp.*')"
# ---- 5. disk full: a checkpoint that cannot be written fails cleanly ----
# (needs a small tmpfs: root with CAP_SYS_ADMIN; skipped otherwise)
mkdir -p small
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=2m tmpfs small 2>/dev/null; then
    MOUNTED="$TMP/small"
    "$BIN" train cfg.json --out small/run --quiet --stop-after 40 --set train.keep_last=1 \
        --set train.checkpoint_every=20 2>>crash.err
    check '[ "$(cat small/run/checkpoints/latest 2>/dev/null)" = "step_00000040.ckpt" ]' "disk-full setup run failed"
    BEFORE="$(cd small/run/checkpoints && md5sum -- * | sort)"
    avail=$(df -k --output=avail small | tail -1)
    dd if=/dev/zero of=small/filler bs=1k count=$((avail - 64)) 2>/dev/null
    RC=0
    "$BIN" train --resume small/run --quiet 2>full.err || RC=$?
    check '[ "$RC" -eq 3 ] && grep -q "small/run/checkpoints/step_00000060.ckpt: write failed: No space left on device" full.err' \
          "disk full: exit $RC: $(cat full.err)"
    check '[ "$(cd small/run/checkpoints && md5sum -- * | sort)" = "$BEFORE" ]' "disk full: the previous checkpoints changed"
    check '[ -z "$(find small/run -name "*.tmp.*")" ]' "disk full: a temp file was left behind"
    rm -f small/filler
    RC=0
    "$BIN" train --resume small/run --quiet 2>>crash.err || RC=$?
    rm -rf full_export
    "$BIN" export small/run --out full_export >/dev/null 2>&1
    check '[ "$RC" -eq 0 ] && cmp -s ref_export/model.safetensors full_export/model.safetensors' \
          "after freeing space the resumed run does not match the reference (exit $RC)"
    umount small && MOUNTED=""
    echo "disk full: refused with exit 3, nothing lost, resumed to the reference parameters"
else
    echo "SKIP disk-full part: cannot mount a tmpfs here"
fi

if grep -q -E "AddressSanitizer|runtime error:|LeakSanitizer" crash.err ref.err; then bad "sanitizer report"; fi

echo "cli_crashsafe: survived $KILLED SIGKILLs (seed $SEED; $TMPSEEN temp files of killed writers seen, all removed by --resume); $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
