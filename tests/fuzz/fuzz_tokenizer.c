/* fuzz_tokenizer.c - libFuzzer harness: st_tokenizer_load of tokenizer JSON (up to the
 * first NUL byte) and encode/decode of the rest: ids in range, byte/BPE round trip exact.
 * The body is fz_tokenizer() in fuzz_targets.h, shared with tests/test_fuzz_regressions.c.
 * Build: cmake -DCMAKE_C_COMPILER=clang -DSTRETCH_FUZZ=ON; run: scripts/fuzz.sh. */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_tokenizer(data, size);
}
