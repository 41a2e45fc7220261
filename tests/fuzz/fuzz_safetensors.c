/* fuzz_safetensors.c - libFuzzer harness: st_model_load_safetensors into a small fixed
 * model: raw bytes, or (first byte odd) header JSON given a length prefix and a data
 * region.
 * The body is fz_safetensors() in fuzz_targets.h, shared with tests/test_fuzz_regressions.c.
 * Build: cmake -DCMAKE_C_COMPILER=clang -DSTRETCH_FUZZ=ON; run: scripts/fuzz.sh. */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_safetensors(data, size);
}
