/* fuzz_checkpoint.c - libFuzzer harness: st_checkpoint_load from a temp file: raw bytes,
 * or (first byte odd) a raw payload framed with a valid header, CRC and zlib stream.
 * The body is fz_checkpoint() in fuzz_targets.h, shared with tests/test_fuzz_regressions.c.
 * Build: cmake -DCMAKE_C_COMPILER=clang -DSTRETCH_FUZZ=ON; run: scripts/fuzz.sh. */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_checkpoint(data, size);
}
