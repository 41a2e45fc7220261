/* test_tail_util.h - the check tests/test_model.c (every position method) and
 * tests/test_transforms.c (every inference-time transform) share: losses of a forward
 * that scores only the last rows against the full forward's. Static (each test is its own
 * executable). */
#ifndef ST_TEST_TAIL_UTIL_H
#define ST_TEST_TAIL_UTIL_H

#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* st_model_loss in inference mode runs the last block on the rows from the first scored
 * one on (model.c: hidden_rows). Two rows of T tokens, row b scored from from[b] on (target
 * -1 before): the token losses must be the full forward's from there, and exactly 0 before.
 * Same arithmetic per row, but OpenBLAS may round a product's row differently when the
 * row count changes (seen at these tiny widths: 1 ulp; at evaluation sizes the results
 * came out bit-identical), so "the same" is within 2e-6 of max(|loss|, 1). Returns 1 when they are;
 * *max_diff gets the largest relative difference. */
static inline int tail_loss_matches(st_model *m, int64_t T, const int64_t from[2], uint64_t seed, double *max_diff) {
    const int V = m->cfg.vocab_size;
    *max_diff = INFINITY;
    st_arena a;
    st_ctx ctx;
    st_error e = {0};
    if (st_arena_init(&a, (size_t)1 << 20, (size_t)1 << 30, &e)) return 0;
    if (st_ctx_init(&ctx, &a, 4096, &e)) { st_arena_free(&a); return 0; }
    int32_t *ids = malloc((size_t)(2 * T) * sizeof *ids), *tg = malloc((size_t)(2 * T) * sizeof *tg);
    int32_t *tg2 = malloc((size_t)(2 * T) * sizeof *tg2);
    float *full = malloc((size_t)(2 * T) * sizeof *full), *tail = malloc((size_t)(2 * T) * sizeof *tail);
    st_rng r;
    st_rng_seed(&r, seed);
    for (int64_t i = 0; i < 2 * T; i++) { ids[i] = (int32_t)st_rng_below(&r, (uint64_t)V); tg[i] = (int32_t)st_rng_below(&r, (uint64_t)V); }
    for (int64_t i = 0; i < 2 * T; i++) { tg2[i] = i % T < from[i / T] ? -1 : tg[i]; tail[i] = 1.0f; }
    st_ctx_begin(&ctx, 0, 0);
    int ok = st_model_loss(m, &ctx, ids, tg, 2, T, 0, full, &e) != NULL;
    st_ctx_begin(&ctx, 0, 0);
    ok = ok && st_model_loss(m, &ctx, ids, tg2, 2, T, 0, tail, &e) != NULL;
    if (!ok) printf("  forward failed: %s\n", e.msg[0] ? e.msg : "arena");
    *max_diff = ok ? 0.0 : INFINITY;
    for (int64_t i = 0; ok && i < 2 * T; i++) {
        const float want = tg2[i] < 0 ? 0.0f : full[i];
        const double d = fabs((double)tail[i] - (double)want) / fmax(fabs((double)want), 1.0);
        if (d > *max_diff) *max_diff = d;
        if (tg2[i] < 0 ? tail[i] != 0.0f : !(d <= 2e-6)) ok = 0;
    }
    free(ids); free(tg); free(tg2); free(full); free(tail);
    st_ctx_free(&ctx);
    st_arena_free(&a);
    return ok;
}

#endif
