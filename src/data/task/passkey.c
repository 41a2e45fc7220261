/* passkey.c - passkey retrieval in synthetic filler (Mohtashami & Jaggi 2023, arXiv
 * 2305.16300; the needle-in-a-haystack grid of RULER, arXiv 2404.06654): an instance of
 * n prompt tokens is F = n - k - 2 filler tokens (one sample of the built-in Markov
 * source over the symbols) with the needle `K d1 .. dk` after the first
 * a = round(depth F) of them, then `?`; the answer is `d1 .. dk` (k = data.task.digits).
 * The filler is predictable only locally (an order-k chain), so the key's digits are the
 * one thing in the prompt worth attending to from the end. Depth: the caller's, or drawn
 * uniformly from the seed (training). */
#include "task_internal.h"

#include <math.h>
#include <string.h>

#define SEED_PK 0x706b7431ull

static int64_t pk_length(const st_task_params *p, int64_t n) { return n + p->digits; }

/* the needle `K d1 .. dk` and the `?`, without filler */
static int64_t pk_min(const st_task_params *p) { return p->digits + 2; }

static int64_t pk_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_PK));
    const int k = p->digits;
    const int64_t F = n - k - 2;   /* the config layer keeps n >= k + 2 */
    const double depth = p->depth >= 0 ? p->depth : st_rng_uniform(&r);
    int64_t a = (int64_t)floor(depth * (double)F + 0.5);
    if (a > F) a = F;
    /* the filler as one chain sample in tok[0, F), its tail then moved past the needle */
    task_filler(p, &r, tok, F);
    memmove(tok + a + 1 + k, tok + a, (size_t)(F - a) * sizeof *tok);
    tok[a] = ST_TT_KEY;
    for (int j = 0; j < k; j++) tok[a + 1 + j] = ST_TT_DIGIT0 + (int32_t)st_rng_below(&r, 10);
    tok[n - 1] = ST_TT_QUERY;
    for (int64_t i = 0; i < n; i++) ans[i] = 0;
    for (int j = 0; j < k; j++) {
        tok[n + j] = tok[a + 1 + j];
        ans[n + j] = 1;
    }
    return n + k;
}

const st_task st_task_passkey = {
    .name = "passkey", .cite = "Mohtashami & Jaggi 2023, arXiv 2305.16300", .size_unit = "tokens",
    .min_size = 3, .keys = ST_TASK_KEY_SYMBOLS | ST_TASK_KEY_DIGITS, .has_depth = 1,
    .min_size_of = pk_min, .min_rule = "data.task.digits + 2", .max_size = NULL, .length = pk_length, .generate = pk_generate,
};
