/* loader.c - training batches: B random contiguous windows of T + 1 tokens.
 * Window w of the stream starts at st_hash64(seed, draws + w) mod (n - T): a pure
 * function of (seed, window index), so a run resumed from a saved `draws` sees exactly
 * the batches it would have seen, with any thread count. Sampling is with replacement
 * and uniform over start positions (the modulo bias is < (n - T) / 2^64). */
#include "st_data.h"
#include "st_task.h"

#include <string.h>

void st_loader_init(st_loader *l, const int32_t *tokens, int64_t n, uint64_t seed) {
    l->tokens = tokens;
    l->n = n;
    l->seed = seed;
    l->draws = 0;
    l->pk = NULL;
    l->pk_rate = 0;
    l->task = NULL;
    l->doc = NULL;
}

#define SEED_PASSKEY 0x706b6579ull   /* "pkey" */

uint64_t st_loader_row_seed(const st_loader *l, uint64_t b) { return st_hash64(l->seed, l->draws + b); }

/* x, y (B, T): y[b][t] = x[b][t + 1] in the stream */
void st_loader_next(st_loader *l, int64_t B, int64_t T, int32_t *x, int32_t *y) {
    if (l->task) {
        for (int64_t b = 0; b < B; b++)
            st_task_row(l->task, st_loader_row_seed(l, (uint64_t)b), T, x + b * T, y + b * T,
                        l->doc ? l->doc + b * T : NULL);
        l->draws += (uint64_t)B;
        return;
    }
    ST_ASSERT(B >= 1 && T >= 1 && l->n > T && !l->doc);   /* instance starts: task rows only */
    uint64_t span = (uint64_t)(l->n - T);
    for (int64_t b = 0; b < B; b++) {
        uint64_t start = st_loader_row_seed(l, (uint64_t)b) % span;
        const uint64_t h = st_hash64(l->seed ^ SEED_PASSKEY, l->draws + (uint64_t)b);
        if (l->pk && (double)(h >> 11) * (1.0 / 9007199254740992.0) < l->pk_rate) {
            /* a passkey instance of T + 1 tokens over the window's text: x its first T,
             * y its last T; depth and key from further hashes of the same index */
            int32_t key[ST_PASSKEY_MAX_DIGITS];
            st_passkey_key(l->pk, st_hash64(h, 1), key);
            const double depth = (double)(st_hash64(h, 2) >> 11) * (1.0 / 9007199254740991.0);
            const int64_t n = T + 1 - l->pk->digits;
            for (int64_t t = 0; t < T; t++) {
                x[b * T + t] = st_passkey_token(l->pk, l->tokens + start, n, depth, key, t);
                y[b * T + t] = st_passkey_token(l->pk, l->tokens + start, n, depth, key, t + 1);
            }
            continue;
        }
        memcpy(x + b * T, l->tokens + start, (size_t)T * sizeof *x);
        memcpy(y + b * T, l->tokens + start + 1, (size_t)T * sizeof *y);
    }
    l->draws += (uint64_t)B;
}
