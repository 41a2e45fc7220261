#!/usr/bin/env bash
# Build the libFuzzer harnesses (clang, ASan + UBSan) and run each for a bounded time.
#   FUZZ_SECONDS  seconds per harness (default 60)
#   FUZZ_TARGETS  which harnesses (default: config checkpoint safetensors cache tokenizer sweep)
#   FUZZ_JOBS     build parallelism (default: nproc)
# Each harness starts from a scratch copy of tests/fuzz/corpus/<name>/ (the repo corpus is
# never modified) in build-fuzz/corpus/<name>/; crashes land in build-fuzz/artifacts/<name>/.
# Prints executions, coverage and crashes per harness; exits 1 if any harness crashed.
# A crash becomes a regression: copy the artifact to tests/fuzz/regressions/<name>/, fix
# the bug, and tests/test_fuzz_regressions.c replays it in the normal build.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-60}"
TARGETS="${FUZZ_TARGETS:-config checkpoint safetensors cache tokenizer sweep}"
JOBS="${FUZZ_JOBS:-$(nproc)}"
B=build-fuzz
CC_BIN="$(command -v clang || command -v clang-14 || true)"
if [ -z "$CC_BIN" ]; then echo "fuzz.sh: clang not found (apt-get install clang libclang-rt-dev)" >&2; exit 2; fi
cmake -S . -B "$B" -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_BUILD_TYPE=Release -DSTRETCH_FUZZ=ON -DSTRETCH_TESTS=OFF >/dev/null || exit 2
# (with pipefail a `build | grep error && exit` would miss the failure: check the build's status)
if ! cmake --build "$B" -j"$JOBS" --target fuzz_all >"$B/build.log" 2>&1; then
    grep -E "error" "$B/build.log" | head -20
    echo "fuzz.sh: the build failed (log: $B/build.log)" >&2
    exit 2
fi

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
printf '%-12s %12s %10s %8s %8s  %s\n' harness executions exec/s cov corpus crashes
for t in $TARGETS; do
    corpus="$B/corpus/$t" art="$B/artifacts/$t"
    rm -rf "$corpus" "$art"
    mkdir -p "$corpus" "$art"
    cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
    log="$B/fuzz_$t.log"
    "$B/tests/fuzz/fuzz_$t" "$corpus" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2560 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$art/" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    ncorp=$(ls "$corpus" | wc -l)
    crashes=$(ls "$art" | wc -l)
    printf '%-12s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "$ncorp" "$crashes"
    if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
        status=1
        echo "  fuzz_$t exited $rc; artifacts in $art; log $log:" >&2
        grep -E "ERROR|SUMMARY|runtime error|property violated" "$log" | head -5 >&2
    fi
done
exit $status
