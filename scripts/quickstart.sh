#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, train the quickstart model
# on the built-in synthetic corpus (offline, ~2 minutes on 2 cores), then evaluate it at
# 1x..16x its training length. Figures go to runs/quickstart/.
# BLAS: this script sets OPENBLAS_CORETYPE explicitly (default SkylakeX = the AVX-512
# kernels this CPU supports; override with OPENBLAS_CORETYPE=Haswell to match the
# machine-wide AVX2 setting) and reports it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target stretch
export OPENBLAS_CORETYPE="${QUICKSTART_CORETYPE:-SkylakeX}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
echo "quickstart: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE OMP_NUM_THREADS=$OMP_NUM_THREADS"
./build/stretch selfcheck
./build/stretch train configs/quickstart.json --out runs/quickstart --force
./build/stretch eval runs/quickstart --lengths 64,128,256,512,1024 --split test
