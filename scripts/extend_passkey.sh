#!/usr/bin/env bash
# extend_passkey.sh - context extension on the passkey task (docs/results-extension.md).
#
#   bash scripts/extend_passkey.sh [BASE_DIR] [OUT_DIR]
#
# BASE_DIR holds the passkey runs of configs/sweep_task_passkey.json (default
# runs/sweep_task_passkey: run that sweep first). Its rope and alibi runs (prompts of 8..32
# tokens, train.seq_len 36) are extended to prompts of 8..128 tokens (train.seq_len 132,
# s = 4) for 2% and 10% of their 9,216,000 training tokens, 8 instances per step, lr 1e-3:
# rope plain / PI / NTK / YaRN, alibi plain / slope interpolation. Each extension is then
# evaluated at prompt sizes 32..1024 (1x-32x of the base run's longest prompt), 5 depths,
# 50 trials, into OUT_DIR/<name>.json (default runs/extend_passkey); scripts/results_tasks.py
# style tables come from scripts/results_extension.py. A point whose JSON exists is skipped,
# so the script resumes where it stopped. One thread per run (OPENBLAS_CORETYPE as set).
set -euo pipefail
case "${1:-}" in   # --help printed the stretch error of a run named --help/rope, after creating OUT
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "extend_passkey.sh: error: unknown option '$1' (usage: bash scripts/extend_passkey.sh [BASE_DIR] [OUT_DIR])" >&2
        exit 2 ;;
esac
BIN=${STRETCH_BIN:-build/stretch}
BASE=${1:-runs/sweep_task_passkey}
OUT=${2:-runs/extend_passkey}
for m in rope alibi; do   # before OUT is made: a wrong BASE leaves nothing behind
    [ -f "$BASE/$m/config.json" ] || { echo "extend_passkey.sh: error: $BASE/$m: no such run (run" \
        "build/stretch sweep configs/sweep_task_passkey.json first, or give its out directory)" >&2; exit 3; }
done
SIZES=32,64,128,256,512,1024
mkdir -p "$OUT"
run() { # method transform budget
    local m=$1 xf=$2 b=$3 name="$1-$2-b$3"
    [ -f "$OUT/$name.json" ] && { echo "$name: done"; return; }
    local scale=()
    [ "$xf" != none ] && scale=(--scale 4)
    if [ ! -f "$OUT/$name/checkpoints/latest" ]; then
        "$BIN" extend "$BASE/$m" --to 132 --transform "$xf" "${scale[@]}" --budget "$b" --batch 8 --lr 1e-3 \
            --set data.task.max_size=128 --set train.threads=1 --set train.eval_every=1000000 \
            --set train.checkpoint_every=1000000 --out "$OUT/$name" --force --quiet
    fi
    "$BIN" eval "$OUT/$name" --task passkey --sizes "$SIZES" --trials 50 --threads 1 --json "$OUT/$name.json" --quiet
    echo "$name: done"
}
# the base runs themselves at the same sizes, for the "before" row
for m in rope alibi; do
    [ -f "$OUT/$m-base.json" ] || "$BIN" eval "$BASE/$m" --task passkey --sizes "$SIZES" --trials 50 --threads 1 \
        --json "$OUT/$m-base.json" --quiet
done
for b in 0.02 0.1; do
    for xf in none pi ntk yarn; do run rope "$xf" "$b"; done
    for xf in none alibi_interp; do run alibi "$xf" "$b"; done
done
