/* test_attn_reference.h - the attention tests' reference kernel: softmax(scale q.k + bias)
 * v in double precision with every score of a row materialised, the same semantics as the
 * library's kernels (st_attention* in include/st_ops.h) and none of their blocking. A
 * test-only helper: the library's products go through BLAS, this one is a plain loop.
 * Everything is static (each test is its own executable). */
#ifndef ST_TEST_ATTN_REFERENCE_H
#define ST_TEST_ATTN_REFERENCE_H

#include "harness.h"

#include <math.h>
#include <stdlib.h>

/* q, k, v, out: (B, H, T, D). bias: NULL, a distance form (fill: bias(h, d) for d from
 * d0 = 0 (causal) or -(T - 1), over T or 2T - 1 distances) or a general form (fill_block:
 * bias(h, i, j)); no CoPE (it has its own double references). scale 0: 1 / sqrt(D). A row
 * whose scores are all -inf is 0. */
static void ref_attention(const float *q, const float *k, const float *v, float *out, int64_t B, int64_t H,
                          int64_t T, int64_t D, const st_attn_bias *bias, int causal, float scale) {
    if (B * H * T == 0) return;
    const double sc = scale > 0.0f ? (double)scale : 1.0 / sqrt((double)D);
    const int64_t n = causal ? T : 2 * T - 1, d0 = causal ? 0 : -(T - 1);
    const int general = bias && !bias->fill;
    if (bias && (bias->cope || !(bias->fill || bias->fill_block))) {
        CHECK_MSG(0, "ref_attention: a bias without fill or fill_block (CoPE?)");
        return;
    }
    float *tab = malloc((size_t)n * sizeof(float));
    double *s = malloc((size_t)T * sizeof(double)), *o = malloc((size_t)D * sizeof(double));
    if (!CHECK(tab && s && o)) { free(tab); free(s); free(o); return; }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            if (bias && !general) bias->fill(bias, (int)h, d0, n, tab);   /* tab[m] = bias(h, d0 + m) */
            const int64_t base = (b * H + h) * T * D;
            for (int64_t i = 0; i < T; i++) {
                const int64_t jn = causal ? i + 1 : T;
                if (general) bias->fill_block(bias, (int)h, i, 1, 0, jn, tab, jn);   /* tab[j] = bias(h, i, j) */
                double mx = -INFINITY;
                for (int64_t j = 0; j < jn; j++) {
                    double dot = 0;
                    for (int64_t c = 0; c < D; c++) dot += (double)q[base + i * D + c] * (double)k[base + j * D + c];
                    s[j] = sc * dot + (!bias ? 0.0 : general ? (double)tab[j] : (double)tab[i - j - d0]);
                    if (s[j] > mx) mx = s[j];
                }
                double z = 0;
                for (int64_t c = 0; c < D; c++) o[c] = 0;
                if (mx > -(double)INFINITY)
                    for (int64_t j = 0; j < jn; j++) {
                        const double e = exp(s[j] - mx);
                        z += e;
                        for (int64_t c = 0; c < D; c++) o[c] += e * (double)v[base + j * D + c];
                    }
                for (int64_t c = 0; c < D; c++) out[base + i * D + c] = z > 0 ? (float)(o[c] / z) : 0.0f;
            }
        }
    free(tab); free(s); free(o);
}

#endif
