/* fuzz_cache.c - libFuzzer harness: the token-cache readers st_sd_cache_read_tokens /
 * st_sd_cache_read_tokenizer: raw file, CRCs repaired, or a framed payload (first byte mod
 * 3).
 * The body is fz_cache() in fuzz_targets.h, shared with tests/test_fuzz_regressions.c.
 * Build: cmake -DCMAKE_C_COMPILER=clang -DSTRETCH_FUZZ=ON; run: scripts/fuzz.sh. */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_cache(data, size);
}
