/* fuzz_config.c - libFuzzer harness: st_run_config_parse on arbitrary bytes (+ --set
 * assignments after \x01 bytes); accepted configs must round-trip.
 * The body is fz_config() in fuzz_targets.h, shared with tests/test_fuzz_regressions.c.
 * Build: cmake -DCMAKE_C_COMPILER=clang -DSTRETCH_FUZZ=ON; run: scripts/fuzz.sh. */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_config(data, size);
}
