#!/usr/bin/env bash
# bench_mpi.sh - 2 ranks x 1 thread against 1 rank x 2 threads on this machine, same global
# batch (rank-local batch B with 2 ranks == batch B with grad_accum 2 in one process), in
# alternating rounds; prints tokens/s per round and the time in the gradient allreduce per
# step (the trainer's instrumented st_dist_sum_f32) for the MPI runs. A third setup, two
# independent single-threaded runs side by side (what `stretch sweep --jobs 2` does), shows
# whether a sweep should run two 1-thread runs or one 2-thread run at a time.
#   scripts/bench_mpi.sh [--rounds N] [--steps N] [--config CONFIG.json] [--bin build/stretch]
# Default config: a small synthetic model (no data needed); pass configs/wt2_alibi.json
# or a bench-like config for real figures. Needs a build with -DSTRETCH_MPI=ON.
set -euo pipefail
ROUNDS=3 STEPS=30 CONFIG="" BIN=build/stretch
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    *) echo "bench_mpi.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "bench_mpi.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 3; }
T=$(mktemp -d "${TMPDIR:-/tmp}/bench_mpi.XXXXXX")
trap 'rm -rf "$T"' EXIT
if [ -z "$CONFIG" ]; then
  CONFIG=$T/small.json
  cat >"$CONFIG" <<JSON
{"model": {"n_layers": 4, "d_model": 256, "n_heads": 8, "pos": "alibi"},
 "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 512, "tokens": [400000, 20000, 20000]}},
 "train": {"batch_size": 8, "seq_len": 128, "eval_batches": 0, "checkpoint_every": 0, "log_every": 1000,
           "schedule": {"warmup": 1}}}
JSON
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
COMMON=(--set train.steps="$STEPS" --set train.eval_batches=0 --set train.checkpoint_every=0)
rate() { sed -n 's/.*done: .* \([0-9.]*\) tokens\/s.*/\1/p' "$1" | tail -1; }
comm() { sed -n 's/.*gradient allreduce: \([0-9.]*\) ms per step ([0-9]* steps, \([0-9.]*\)% of the session.*/\1 ms (\2% of the session)/p' "$1" | tail -1; }
printf "%-6s %-26s %12s %s\n" round setup tokens/s "allreduce per step"
for r in $(seq 1 "$ROUNDS"); do
  for mode in mpi threads jobs; do
    rm -rf "$T/run"
    if [ $mode = mpi ]; then
      OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY \
        "$BIN" train "$CONFIG" --out "$T/run" "${COMMON[@]}" --set train.threads=1 >"$T/log" 2>&1
      printf "%-6s %-26s %12s %s\n" "$r" "2 ranks x 1 thread" "$(rate "$T/log")" "$(comm "$T/log")"
    elif [ $mode = jobs ]; then
      rm -rf "$T/run2"
      OMP_NUM_THREADS=1 "$BIN" train "$CONFIG" --out "$T/run" "${COMMON[@]}" --set train.threads=1 >"$T/log" 2>&1 &
      OMP_NUM_THREADS=1 "$BIN" train "$CONFIG" --out "$T/run2" "${COMMON[@]}" --set train.threads=1 >"$T/log2" 2>&1
      wait
      printf "%-6s %-26s %12s %s\n" "$r" "2 runs x 1 thread (sweep)" \
        "$(awk -v a="$(rate "$T/log")" -v b="$(rate "$T/log2")" 'BEGIN{printf "%.0f", a + b}')" "-"
    else
      OMP_NUM_THREADS=2 "$BIN" train "$CONFIG" --out "$T/run" "${COMMON[@]}" --set train.threads=2 \
        --set train.grad_accum=2 >"$T/log" 2>&1
      printf "%-6s %-26s %12s %s\n" "$r" "1 rank x 2 threads, accum 2" "$(rate "$T/log")" "-"
    fi
  done
done
echo "(same global batch: 2 x batch_size sequences per update; tokens/s are global; the sweep row is the"
echo " sum of two independent runs of batch_size each)"
