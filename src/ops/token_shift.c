/* token_shift.c - a data-dependent token shift of keys or values (the Forgetting
 * Transformer's Pro block, Lin et al. 2025, arXiv 2503.02130, "ShiftLinear"; model.kv_shift):
 * each head mixes its row at t with the row before it, by a gate computed from the token:
 *   x (B,H,T,D) keys or values, z (B,T,H) gate logits, s = sigmoid(z[b,t,h])
 *   y[b,h,t] = s x[b,h,t-1] + (1 - s) x[b,h,t]
 * A first row has no predecessor (x[-1] = 0): t = 0, a packed instance's first token under
 * doc (the attention's instance mask (B,T): row t's instance starts at doc[b T + t]), or
 * t = 0 of a decoded chunk whose previous token's rows the caller passes as prev (H, D).
 * Backward, p(t) = 1 when row t has a predecessor (prev rows take no gradient):
 *   dx[t] += (1 - s_t) dy[t] + p(t+1) s_{t+1} dy[t+1]
 *   dz[t] += s_t (1 - s_t) sum_d dy[t,d] (x[t-1,d] - x[t,d])
 * Each (b, h) row of the work is one thread's, summed in a fixed order: the result does not
 * depend on the thread count. */
#include "ops_internal.h"

typedef struct shift_saved { const int32_t *doc; } shift_saved;

/* row t's predecessor under the instance mask (the caller's doc, as the attention's) */
static inline int has_prev(const int32_t *doc, int64_t b, int64_t T, int64_t t) {
    return t > 0 && (!doc || doc[b * T + t] < t);
}

static void token_shift_backward(st_ctx *ctx, st_node *n) {
    const shift_saved *sv = n->saved;
    st_tensor *x = n->in[0], *z = n->in[1];
    const int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    int fresh_x = 0, fresh_z = 0;
    float *dx = x->requires_grad ? ops_grad_out(ctx, x, &fresh_x) : NULL;
    float *dz = z->requires_grad ? ops_grad_out(ctx, z, &fresh_z) : NULL;
    if ((x->requires_grad && !dx) || (z->requires_grad && !dz)) return;
    const float *dy = n->out->grad, *xd = x->data;
    #pragma omp parallel for schedule(static) if (B * H * T * D > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        for (int64_t t = 0; t < T; t++) {
            const float *g = dy + (bh * T + t) * D, *xt = xd + (bh * T + t) * D;
            const float s = ops_sigmoid(z->data[(b * T + t) * H + h]);
            const int prev = has_prev(sv->doc, b, T, t);
            if (dx) {
                const int next = t + 1 < T && has_prev(sv->doc, b, T, t + 1);
                const float sn = next ? ops_sigmoid(z->data[(b * T + t + 1) * H + h]) : 0.0f;
                float *d = dx + (bh * T + t) * D;
                for (int64_t i = 0; i < D; i++) {
                    const float v = (1.0f - s) * g[i] + (next ? sn * g[D + i] : 0.0f);
                    d[i] = fresh_x ? v : d[i] + v;
                }
            }
            if (dz) {
                float acc = 0.0f;   /* sum_d dy (x[t-1] - x[t]), in one fixed order */
                for (int64_t i = 0; i < D; i++) acc += g[i] * ((prev ? xt[i - D] : 0.0f) - xt[i]);
                float *o = dz + (b * T + t) * H + h;   /* (b, t, h): this thread's alone */
                *o = (fresh_z ? 0.0f : *o) + acc * s * (1.0f - s);
            }
        }
    }
}

st_tensor *st_token_shift(st_ctx *ctx, st_tensor *x, st_tensor *z, const float *prev, const int32_t *doc) {
    if (!x || !z || ctx->failed) return NULL;
    ST_ASSERT(x->ndim == 4 && z->ndim == 3 && z->shape[0] == x->shape[0] && z->shape[1] == x->shape[2] &&
              z->shape[2] == x->shape[1] && (!prev || x->shape[0] == 1) && st_is_contiguous(z));
    if (!(x = st_contiguous(ctx, x))) return NULL;
    const int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    st_tensor *out = st_new(ctx, 4, x->shape);
    if (!out) return NULL;
    #pragma omp parallel for schedule(static) if (B * H * T * D > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x->data + (bh * T + t) * D;
            /* the row before: in this chunk, the caller's previous token, or none */
            const float *xp = has_prev(doc, b, T, t) ? xt - D : t == 0 && prev ? prev + h * D : NULL;
            const float s = ops_sigmoid(z->data[(b * T + t) * H + h]);
            float *y = out->data + (bh * T + t) * D;
            for (int64_t i = 0; i < D; i++) y[i] = (xp ? s * xp[i] : 0.0f) + (1.0f - s) * xt[i];
        }
    }
    if (st_needs_grad(ctx, x, z, NULL, NULL)) {
        ST_ASSERT(!prev);   /* decoding only: no gradient reaches a previous chunk */
        shift_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->doc = doc;
        if (!st_record(ctx, "token_shift", token_shift_backward, out, x, z, NULL, NULL, sv)) return NULL;
    }
    return out;
}
