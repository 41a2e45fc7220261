/* test_bias_util.h - synthetic position-bias providers for the attention kernel tests
 * (test_transforms.c, test_attn_stats.c): a distance form, slope (h + 1) per head, and a
 * general (i, j) form whose tiles are smooth in both positions. */
#ifndef ST_TEST_BIAS_UTIL_H
#define ST_TEST_BIAS_UTIL_H

#include "stretch.h"

#include <math.h>

typedef struct { float slope; } dist_state;

/* out[k] = -slope (h + 1) (d0 + k) */
static inline void dist_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const dist_state *s = self->state;
    for (int64_t k = 0; k < n; k++) out[k] = -s->slope * (float)(h + 1) * (float)(d0 + k);
}

/* out[r ld + c] = 0.3 sin(0.01 (i0 + r)(h + 1) + 0.07 (j0 + c)) */
static inline void gen_fill(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj,
                            float *out, int64_t ld) {
    (void)self;
    for (int64_t r = 0; r < ni; r++)
        for (int64_t c = 0; c < nj; c++)
            out[r * ld + c] = 0.3f * sinf(0.01f * (float)((i0 + r) * (h + 1)) + 0.07f * (float)(j0 + c));
}

#endif
