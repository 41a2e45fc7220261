#!/usr/bin/env bash
# bf16_parity.sh - training parity of precision bf16 against fp32 (issue #15).
#
# Trains CONFIG twice, with train.precision fp32 and bf16 (same seed, data, schedule),
# evaluates both at the config's eval lengths (1x-16x the training length for
# configs/ts_calib.json), evaluates the fp32 run once more with --precision bf16, and
# checks: bf16-trained validation perplexity within 1% of fp32-trained at every length;
# bf16 eval of the fp32 run within 0.5% of its fp32 eval. Prints a table, writes
# OUT/parity.md, exits 1 when a bound is missed.
#
# usage: scripts/bf16_parity.sh [CONFIG] [OUT] [--threads N] [--set key=value ...]
#   CONFIG  default configs/ts_calib.json (the tinyshakespeare calibration model: 2
#           layers, d 128, 4 heads, B 32, T 64, lr 3e-3, 1900 steps); the WikiText-2
#           results model: configs/wt2_alibi.json
#   OUT     default runs/bf16_parity/<config name>
# Runs are resumed when OUT already holds them (re-running only re-evaluates).
# Quick end-to-end check: --set train.steps=20 --set train.schedule.warmup=5
# bf16 is fast only with AVX512-BF16 or AMX; elsewhere it runs emulated (stretch warns).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG="$ROOT/configs/ts_calib.json" OUT="" THREADS=0
SETS=()
POS=0
while [ $# -gt 0 ]; do
    case "$1" in
        --threads) THREADS=$2; shift 2 ;;
        --set) SETS+=(--set "$2"); shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) echo "bf16_parity.sh: unknown option $1" >&2; exit 2 ;;
        *) if [ $POS = 0 ]; then CONFIG=$1; else OUT=$1; fi; POS=$((POS + 1)); shift ;;
    esac
done
[ -f "$CONFIG" ] || { echo "bf16_parity.sh: $CONFIG: no such config" >&2; exit 2; }
OUT=${OUT:-$ROOT/runs/bf16_parity/$(basename "$CONFIG" .json)}
BIN=${STRETCH_BIN:-$ROOT/build/stretch}
if [ -z "${STRETCH_BIN:-}" ]; then
    cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$ROOT/build" -j2 --target stretch >/dev/null
fi
export STRETCH_DATA_DIR=${STRETCH_DATA_DIR:-$ROOT/../shared/data}
mkdir -p "$OUT"
for prec in fp32 bf16; do
    if [ -f "$OUT/$prec/config.json" ]; then
        "$BIN" train --resume "$OUT/$prec"
    else
        "$BIN" train "$CONFIG" "${SETS[@]}" --set train.precision=$prec --set train.threads=$THREADS --out "$OUT/$prec"
    fi
    "$BIN" eval "$OUT/$prec" --quiet --json "$OUT/eval_$prec.json" --force   # the script's own report
done
"$BIN" eval "$OUT/fp32" --quiet --precision bf16 --json "$OUT/eval_fp32_in_bf16.json" --force

/usr/bin/python3 - "$OUT" "$CONFIG" <<'PY'
import json, os, sys
out, config = sys.argv[1:3]
ld = lambda n: json.load(open(os.path.join(out, n)))
a, b, c = ld("eval_fp32.json"), ld("eval_bf16.json"), ld("eval_fp32_in_bf16.json")
assert (a["precision"], b["precision"], c["precision"]) == ("fp32", "bf16", "bf16")
lines = [f"# bf16 parity: {os.path.basename(config)}", "",
         "Validation perplexity (nonoverlapping windows). Bounds: bf16-trained within 1% of fp32-trained; "
         "bf16 eval of the fp32 run within 0.5% of its fp32 eval.", "",
         "| L | fp32 trained | bf16 trained | diff | fp32 run, bf16 eval | diff |", "|---|---|---|---|---|---|"]
ok = True
for x, y, z in zip(a["results"], b["results"], c["results"]):
    if "ppl" not in x or "ppl" not in y or "ppl" not in z:
        lines.append(f"| {x.get('length')} | error | | | | |")
        ok = False
        continue
    d1 = 100 * (y["ppl"] - x["ppl"]) / x["ppl"]
    d2 = 100 * (z["ppl"] - x["ppl"]) / x["ppl"]
    ok &= abs(d1) <= 1.0 and abs(d2) <= 0.5
    lines.append(f"| {x['length']} | {x['ppl']:.4f} | {y['ppl']:.4f} | {d1:+.3f}% | {z['ppl']:.4f} | {d2:+.4f}% |")
lines += ["", "Result: " + ("within both bounds at every length." if ok else "**a bound is missed** (see the diffs).")]
open(os.path.join(out, "parity.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
