/* xpos.c - the exponential scale of xPos (Sun et al. 2022, arXiv 2212.10554) on x
 * (B,H,T,D), rotate-half channel pairing as st_rope: channel k of the first half and
 * channel k + D/2 share
 *   zeta_k = (2k/D + 0.4) / 1.4,   k = 0..D/2-1      (0.2857 <= zeta_k < 1)
 * and at position t = pos0 + r (row r)
 *   y[.., r, k] = x[.., r, k] * zeta_k^(sign * (t - centre) / gamma)
 * xPos scales queries with sign +1 and keys with sign -1, so
 *   q'_i . k'_j = sum_k zeta_k^((i - j) / gamma) (q_i . k_j)_pair k
 * depends on i - j only, whatever the centre: the centre only keeps both factors inside
 * float range (zeta_0^(t/gamma) underflows near t = 36k for gamma = 512).
 * Backward: dx = dy * s (the scale is a constant of the positions). The (T, D/2) scale
 * table is formed in double and rounded once; it is reused by every (b, h) and by the
 * backward. */
#include "ops_internal.h"

#include <math.h>

typedef struct xpos_saved { float *s; } xpos_saved;   /* (T, D/2) */

/* position of row t: pos[t] (randomized positions) or pos0 + t */
static void xpos_table(float *s, int64_t T, int64_t D, float gamma, int64_t pos0, const int64_t *pos,
                       int64_t centre, int sign) {
    const int64_t half = D / 2;
    for (int64_t k = 0; k < half; k++) {
        const double lz = log((2.0 * (double)k / (double)D + 0.4) / 1.4);
        for (int64_t t = 0; t < T; t++)
            s[t * half + k] = (float)exp(lz * (double)sign * (double)((pos ? pos[t] : pos0 + t) - centre) / (double)gamma);
    }
}

/* out (=|+=) x * s per row; x, out (B*H, T, D) */
static void xpos_kernel(float *out, const float *x, const float *s, int64_t BH, int64_t T, int64_t D,
                        int accumulate) {
    const int64_t half = D / 2;
    #pragma omp parallel for collapse(2) schedule(static) if (BH * T * D > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t t = 0; t < T; t++) {
            const float *restrict xr = x + (bh * T + t) * D, *restrict sr = s + t * half;
            float *restrict o = out + (bh * T + t) * D;
            for (int64_t k = 0; k < half; k++) {
                const float a = xr[k] * sr[k], b = xr[k + half] * sr[k];
                if (accumulate) { o[k] += a; o[k + half] += b; }
                else { o[k] = a; o[k + half] = b; }
            }
        }
}

static void xpos_backward(st_ctx *ctx, st_node *n) {
    const xpos_saved *sv = n->saved;
    st_tensor *x = n->in[0];
    int fresh;
    float *dx = ops_grad_out(ctx, x, &fresh);
    if (!dx) return;
    xpos_kernel(dx, n->out->grad, sv->s, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], !fresh);
}

st_tensor *st_xpos_scale(st_ctx *ctx, st_tensor *x, float gamma, int64_t pos0, int64_t centre, int sign) {
    return st_xpos_scale_pos(ctx, x, gamma, pos0, NULL, centre, sign);
}

st_tensor *st_xpos_scale_pos(st_ctx *ctx, st_tensor *x, float gamma, int64_t pos0, const int64_t *pos,
                             int64_t centre, int sign) {
    if (!x) return NULL;
    ST_ASSERT(x->ndim == 4 && st_is_contiguous(x) && x->shape[3] % 2 == 0 && gamma > 0.0f && pos0 >= 0 &&
              (sign == 1 || sign == -1));
    const int64_t BH = x->shape[0] * x->shape[1], T = x->shape[2], D = x->shape[3];
    const int grad = st_needs_grad(ctx, x, NULL, NULL, NULL);
    st_tensor *out = st_new(ctx, 4, x->shape);
    float *s = out ? st_ctx_alloc(ctx, (size_t)(T * (D / 2 > 0 ? D / 2 : 1)) * sizeof(float), grad) : NULL;
    if (!s) return NULL;
    xpos_table(s, T, D, gamma, pos0, pos, centre, sign);
    xpos_kernel(out->data, x->data, s, BH, T, D, 0);
    if (grad) {
        xpos_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->s = s;
        if (!st_record(ctx, "xpos", xpos_backward, out, x, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
