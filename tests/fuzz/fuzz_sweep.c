/* fuzz_sweep.c - libFuzzer harness: st_sweep_load (dry run) of arbitrary sweep files beside a
 * fixed synthetic base config; accepted sweeps have distinct, valid points.
 * The body is fz_sweep() in fuzz_targets.h, shared with tests/test_fuzz_regressions.c.
 * Build: cmake -DCMAKE_C_COMPILER=clang -DSTRETCH_FUZZ=ON; run: scripts/fuzz.sh. */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_sweep(data, size);
}
