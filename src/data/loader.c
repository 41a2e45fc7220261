/* loader.c - training batches: B random contiguous windows of T + 1 tokens.
 * Window w of the stream starts at st_hash64(seed, draws + w) mod (n - T): a pure
 * function of (seed, window index), so a run resumed from a saved `draws` sees exactly
 * the batches it would have seen, with any thread count. Sampling is with replacement
 * and uniform over start positions (the modulo bias is < (n - T) / 2^64). */
#include "st_data.h"

#include <string.h>

void st_loader_init(st_loader *l, const int32_t *tokens, int64_t n, uint64_t seed) {
    l->tokens = tokens;
    l->n = n;
    l->seed = seed;
    l->draws = 0;
}

/* x, y (B, T): y[b][t] = x[b][t + 1] in the stream */
void st_loader_next(st_loader *l, int64_t B, int64_t T, int32_t *x, int32_t *y) {
    ST_ASSERT(B >= 1 && T >= 1 && l->n > T);
    uint64_t span = (uint64_t)(l->n - T);
    for (int64_t b = 0; b < B; b++) {
        uint64_t start = st_hash64(l->seed, l->draws + (uint64_t)b) % span;
        memcpy(x + b * T, l->tokens + start, (size_t)T * sizeof *x);
        memcpy(y + b * T, l->tokens + start + 1, (size_t)T * sizeof *y);
    }
    l->draws += (uint64_t)B;
}
