/* rope.c - rotary position embedding, rotate-half convention (GPT-NeoX, HF LLaMA):
 * channel i of the first half pairs with channel i + D/2; at position p
 *   theta_i = base^(-2i/D),  a = p theta_i
 *   y_i       = x_i cos a - x_{i+D/2} sin a
 *   y_{i+D/2} = x_{i+D/2} cos a + x_i sin a
 * A rotation is orthogonal, so the backward is the inverse rotation (angle -a) of dy.
 * st_rope_freqs takes the frequencies theta_i from the caller (inference-time transforms:
 * PI, NTK, YaRN; include/st_transform.h) and a factor c on the output, y = c R(a) x
 * (YaRN's attention temperature), whose backward is dx = c R(-a) dy.
 * The angles are formed in double: p theta_i reaches 1e4+ at long positions, where a
 * float product would already be off by ~1e-3 rad. The (T, D/2) cos/sin table is
 * computed once per call and reused by every (b, h) and by the backward. */
#include "ops_internal.h"

#include <math.h>

typedef struct rope_saved { float *cs; } rope_saved;   /* (T, 2, D/2): cos row, sin row */

/* cs (T, D): row t = cos(a) * qk_scale (first D/2), sin(a) * qk_scale (second D/2) with
 * a = p_t inv_freq[i], p_t = pos[t] (randomized positions) or pos0 + t. The scale rides on
 * the table, so the kernel and its backward (the inverse rotation, times the same scale)
 * need nothing else. */
static void rope_table(float *cs, int64_t T, int64_t D, const double *inv_freq, float qk_scale, int64_t pos0,
                       const int64_t *pos) {
    int64_t half = D / 2;
    for (int64_t i = 0; i < half; i++) {
        double theta = inv_freq[i];
        for (int64_t t = 0; t < T; t++) {
            double a = (double)(pos ? pos[t] : pos0 + t) * theta;
            cs[t * D + i] = (float)cos(a) * qk_scale;
            cs[t * D + half + i] = (float)sin(a) * qk_scale;
        }
    }
}

/* out (=|+=) rotation of x by +a (sign = 1) or -a (sign = -1); x, out (B*H, T, D). */
static void rope_kernel(float *out, const float *x, const float *cs, int64_t BH, int64_t T,
                        int64_t D, float sign, int accumulate) {
    int64_t half = D / 2;
    #pragma omp parallel for collapse(2) schedule(static) if (BH * T * D > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t t = 0; t < T; t++) {
            const float *restrict xr = x + (bh * T + t) * D;
            float *restrict o = out + (bh * T + t) * D;
            const float *restrict c = cs + t * D, *restrict s = c + half;
            for (int64_t i = 0; i < half; i++) {
                float x1 = xr[i], x2 = xr[i + half], sn = sign * s[i];
                float y1 = x1 * c[i] - x2 * sn, y2 = x2 * c[i] + x1 * sn;
                if (accumulate) { o[i] += y1; o[i + half] += y2; }
                else { o[i] = y1; o[i + half] = y2; }
            }
        }
}

static void rope_backward(st_ctx *ctx, st_node *n) {
    const rope_saved *sv = n->saved;
    st_tensor *x = n->in[0];
    int fresh;
    float *dx = ops_grad_out(ctx, x, &fresh);
    if (!dx) return;
    rope_kernel(dx, n->out->grad, sv->cs, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], -1.0f, !fresh);
}

st_tensor *st_rope(st_ctx *ctx, st_tensor *x, float base, int64_t pos0) {
    return st_rope_pos(ctx, x, base, pos0, NULL);
}

st_tensor *st_rope_pos(st_ctx *ctx, st_tensor *x, float base, int64_t pos0, const int64_t *pos) {
    if (!x) return NULL;
    ST_ASSERT(x->ndim == 4 && x->shape[3] % 2 == 0 && base > 0.0f);
    const int64_t half = x->shape[3] / 2;
    double *inv = st_ctx_alloc(ctx, (size_t)half * sizeof(double), 0);
    if (!inv) return NULL;
    for (int64_t i = 0; i < half; i++) inv[i] = pow((double)base, -2.0 * (double)i / (double)x->shape[3]);
    return st_rope_at(ctx, x, inv, 1.0f, pos0, pos);
}

st_tensor *st_rope_freqs(st_ctx *ctx, st_tensor *x, const double *inv_freq, float qk_scale, int64_t pos0) {
    return st_rope_at(ctx, x, inv_freq, qk_scale, pos0, NULL);
}

st_tensor *st_rope_at(st_ctx *ctx, st_tensor *x, const double *inv_freq, float qk_scale, int64_t pos0,
                      const int64_t *pos) {
    if (!x) return NULL;
    ST_ASSERT(x->ndim == 4 && st_is_contiguous(x) && x->shape[3] % 2 == 0 && pos0 >= 0 && inv_freq);
    int64_t BH = x->shape[0] * x->shape[1], T = x->shape[2], D = x->shape[3];
    int grad = st_needs_grad(ctx, x, NULL, NULL, NULL);
    st_tensor *out = st_new(ctx, 4, x->shape);
    float *cs = out ? st_ctx_alloc(ctx, (size_t)(T * D) * sizeof(float), grad) : NULL;
    if (!cs) return NULL;
    rope_table(cs, T, D, inv_freq, qk_scale, pos0, pos);
    rope_kernel(out->data, x->data, cs, BH, T, D, 1.0f, 0);
    if (grad) {
        rope_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->cs = cs;
        if (!st_record(ctx, "rope", rope_backward, out, x, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
