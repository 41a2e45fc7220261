/* head_scale.c - scale each (head, time) row of x (B,H,T,D) by s_h * f_t:
 *   y[b,h,t,:] = x[b,h,t,:] * s_h * f_t        (s (H) a tensor, or NULL: s_h = 1;
 *                                               f (T) constants, copied)
 * Backward: dx += dy s_h f_t;  ds_h += sum_{b,t} f_t (dy[b,h,t,:] . x[b,h,t,:]).
 * The model's log-n attention scaling applies it to the queries: scaling q_i scales the
 * content term q_i.k_j of every score of row i and leaves an additive bias alone. */
#include "ops_internal.h"

#include <string.h>

typedef struct head_scale_saved { float *f; } head_scale_saved;   /* (T) */

static void head_scale_backward(st_ctx *ctx, st_node *n) {
    const head_scale_saved *sv = n->saved;
    st_tensor *x = n->in[0], *s = n->in[1];
    const int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    const float *dy = n->out->grad;
    float *dx = x->requires_grad ? st_grad(ctx, x) : NULL;
    float *ds = s && s->requires_grad ? st_grad(ctx, s) : NULL;
    if (ctx->failed) return;
    /* one task per head: ds_h is summed over (b, t) by one thread, in order */
    #pragma omp parallel for schedule(static) if (B * H * T * D > OPS_PAR_MIN)
    for (int64_t h = 0; h < H; h++) {
        const float sh = s ? s->data[h] : 1.0f;
        double acc = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                const size_t o = (size_t)(((b * H + h) * T + t) * D);
                const float m = sh * sv->f[t];
                if (dx) for (int64_t c = 0; c < D; c++) dx[o + c] += dy[o + c] * m;
                if (ds) {
                    double dot = 0;
                    for (int64_t c = 0; c < D; c++) dot += (double)dy[o + c] * (double)x->data[o + c];
                    acc += dot * (double)sv->f[t];
                }
            }
        if (ds) ds[h] += (float)acc;
    }
}

st_tensor *st_head_scale(st_ctx *ctx, st_tensor *x, st_tensor *s, const float *f) {
    if (!x || ctx->failed) return NULL;
    ST_ASSERT(x->ndim == 4 && (!s || st_numel(s) == x->shape[1]));
    x = st_contiguous(ctx, x);
    if (!x) return NULL;
    const int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    st_tensor *out = st_new(ctx, 4, x->shape);
    if (!out) return NULL;
    #pragma omp parallel for schedule(static) if (B * H * T * D > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const float sh = s ? s->data[bh % H] : 1.0f;
        for (int64_t t = 0; t < T; t++) {
            const size_t o = (size_t)((bh * T + t) * D);
            const float m = sh * f[t];
            for (int64_t c = 0; c < D; c++) out->data[o + c] = x->data[o + c] * m;
        }
    }
    if (st_needs_grad(ctx, x, s, NULL, NULL)) {
        head_scale_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        float *fc = sv ? st_ctx_alloc(ctx, (size_t)T * sizeof(float), 1) : NULL;
        if (!fc) return NULL;
        memcpy(fc, f, (size_t)T * sizeof(float));
        sv->f = fc;
        if (!st_record(ctx, "head_scale", head_scale_backward, out, x, s, NULL, NULL, sv)) return NULL;
    }
    return out;
}
