#!/usr/bin/env bash
# Memcheck (valgrind --leak-check=full --error-exitcode=1) over a short training run and
# the commands that read its outputs: train, resume, eval (both modes), export, generate,
# and a few refused inputs (exit codes 2/3/5 must not leak either).
# Valgrind cannot decode AVX-512, so this builds its own portable binary in build-vg
# (-DSTRETCH_NATIVE=OFF, RelWithDebInfo) and pins OpenBLAS to the Haswell kernels.
# tests/valgrind.supp suppresses libgomp's thread-pool TLS ("possibly lost", not ours).
# Prints one line per command and exits 1 if any reported an error or a leak.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
B=build-vg
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRETCH_NATIVE=OFF -DSTRETCH_TESTS=OFF >/dev/null || exit 2
cmake --build "$B" -j"$(nproc)" --target stretch 2>&1 | grep -E "error" && exit 2
TMP="$(mktemp -d "${TMPDIR:-/tmp}/stretch-valgrind-XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
# OMP_WAIT_POLICY set: otherwise main() re-executes /proc/self/exe to set it, and under
# valgrind that is the valgrind tool itself, which refuses to run
export OMP_NUM_THREADS=2 OPENBLAS_CORETYPE=Haswell OMP_WAIT_POLICY=PASSIVE
cat >vg.json <<JSON
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "alibi"},
 "data": {"source": "synthetic", "cache_dir": "$TMP/cache", "synthetic": {"vocab": 32, "tokens": [20000, 2000, 2000]}},
 "train": {"batch_size": 4, "seq_len": 32, "steps": 6, "eval_every": 3, "eval_batches": 1, "log_every": 1,
           "checkpoint_every": 3, "threads": 2, "schedule": {"kind": "constant", "warmup": 0}}}
JSON
head -c 20000 /dev/urandom | base64 >corpus.txt
status=0
vg() {   # vg EXPECTED_EXIT LABEL ARGS...
    local want="$1" label="$2"; shift 2
    local t0=$SECONDS
    valgrind --leak-check=full --error-exitcode=99 --suppressions="$ROOT/tests/valgrind.supp" \
        "$ROOT/$B/stretch" "$@" >"$label.out" 2>"$label.log"
    local rc=$?
    local errs lost
    errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$label.log" | tail -1)
    lost=$(grep -E "(definitely|indirectly|possibly) lost:" "$label.log" | sed -E 's/.*lost: ([0-9,]+) bytes.*/\1/' | tr '\n' '/')
    printf '%-22s exit %-3s errors %-3s lost (def/ind/poss) %-12s %3ds\n' "$label" "$rc" "${errs:-?}" "${lost:-0/0/0/}" $((SECONDS - t0))
    if [ "$rc" -ne "$want" ] || [ "${errs:-1}" != 0 ]; then status=1; grep -A12 -E "Invalid|uninitialised|lost in loss" "$label.log" | head -40; fi
}
vg 0 train          train vg.json --out run --quiet --set train.steps=3
vg 0 resume         train --resume run --quiet --set train.steps=6
vg 0 eval           eval run --lengths 32,128 --max-tokens 1024 --quiet
vg 0 eval-sliding   eval run --lengths 64 --mode sliding --stride 16 --max-tokens 512 --quiet
vg 0 export         export run --out exp
vg 0 generate       generate run --tokens 8
vg 0 train-bytes-bpe train vg.json --out bpe --quiet --set data.source=text --set "data.path=$TMP/corpus.txt" \
                    --set data.tokenizer=bpe --set data.bpe_vocab=300 --set train.steps=2
vg 2 bad-config     train vg.json --out bad --quiet --set model.n_heads=5
vg 3 occupied       train vg.json --out run --quiet
head -c 500 "run/checkpoints/$(cat run/checkpoints/latest)" >cut.ckpt
vg 5 bad-checkpoint eval cut.ckpt --lengths 32 --quiet
vg 6 too-big        train vg.json --out big --quiet --set model.d_model=65536 --set model.n_layers=256 --set model.n_heads=256
exit $status
