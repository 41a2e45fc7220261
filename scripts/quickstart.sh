#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, train the quickstart model
# on the built-in synthetic corpus (offline, ~2 minutes on 2 cores), then evaluate it at
# 1x..16x its training length (the run and its eval report go to runs/quickstart/).
# BLAS: this script leaves the OpenBLAS core to stretch, which runs the best one the CPU
# supports (SkylakeX's AVX-512 kernels, else Haswell's or Zen's AVX2 ones; its first log
# line says which). QUICKSTART_CORETYPE=NAME forces one (e.g. Haswell, to match a
# machine-wide OPENBLAS_CORETYPE=Haswell); a core the CPU cannot run is replaced.
# Threads: train.threads and eval --threads, 0 = every core this process may run on;
# QUICKSTART_THREADS=N sets both (OMP_NUM_THREADS does not set stretch train's count).
set -euo pipefail
if [ $# -gt 0 ]; then   # no options: any argument (--help included) prints what the script does
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    echo "usage: bash scripts/quickstart.sh   (QUICKSTART_CORETYPE=NAME to force an OpenBLAS core, QUICKSTART_THREADS=N for N threads)"
    [ "$1" = "-h" ] || [ "$1" = "--help" ] && exit 0
    exit 2
fi
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target stretch
if [ -n "${QUICKSTART_CORETYPE:-}" ]; then export OPENBLAS_CORETYPE="$QUICKSTART_CORETYPE"; else unset OPENBLAS_CORETYPE; fi
THREADS="${QUICKSTART_THREADS:-0}"
if [ "$THREADS" = 0 ]; then th="all cores (train.threads 0; QUICKSTART_THREADS=N for N)"; else th=$THREADS; fi
echo "quickstart: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset (stretch picks the best core this CPU runs)}, threads: $th"
./build/stretch selfcheck
./build/stretch train configs/quickstart.json --out runs/quickstart --force --set train.threads="$THREADS"
./build/stretch eval runs/quickstart --lengths 64,128,256,512,1024 --split test --threads "$THREADS"
