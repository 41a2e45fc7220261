/* forget_gate.c - the running log of FoX's forget gates (Lin, Nikishin, He, Courville 2025,
 * "Forgetting Transformer: Softmax Attention with a Forget Gate", arXiv 2503.02130):
 *   f (B,T,H) gate logits (one per head and token, a linear map of the block's input)
 *   log sigmoid(x) = -(max(-x, 0) + log1p(exp(-|x|)))       (<= 0; exact in both tails)
 *   c[b,h,t] = sum_{l <= t} log sigmoid(f[b,l,h])            (B,H,T)
 * The attention adds c_i - c_j = sum_{l = j+1..i} log f_l to score (i, j) (st_attn_gate),
 * so only differences of c matter (a KV cache adds its text's last sum to continue it).
 * Backward, with S_t = sum_{u >= t} dc[b,h,u] (a suffix sum):
 *   df[b,t,h] += S_t * d log sigmoid(x)/dx = S_t * sigmoid(-x).
 * Sums run in double per (b,h) row, in order: the result does not depend on threads. */
#include "ops_internal.h"

#include <math.h>

typedef struct gate_saved { int64_t B, T, H; } gate_saved;

static double log_sigmoid(double x) { return -(fmax(-x, 0.0) + log1p(exp(-fabs(x)))); }

static void log_gate_cumsum_backward(st_ctx *ctx, st_node *n) {
    const gate_saved *sv = n->saved;
    st_tensor *f = n->in[0];
    const int64_t B = sv->B, T = sv->T, H = sv->H;
    const float *dc = n->out->grad;
    float *df = st_grad(ctx, f);
    if (ctx->failed) return;
    #pragma omp parallel for schedule(static) if (B * H * T > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        double suffix = 0;
        for (int64_t t = T - 1; t >= 0; t--) {
            suffix += (double)dc[bh * T + t];
            const size_t o = (size_t)((b * T + t) * H + h);
            df[o] += (float)(suffix / (1.0 + exp((double)f->data[o])));   /* sigmoid(-x) */
        }
    }
}

st_tensor *st_log_gate_cumsum(st_ctx *ctx, st_tensor *f) {
    if (!f || ctx->failed) return NULL;
    ST_ASSERT(f->ndim == 3);
    f = st_contiguous(ctx, f);
    if (!f) return NULL;
    const int64_t B = f->shape[0], T = f->shape[1], H = f->shape[2];
    st_tensor *out = st_new3(ctx, B, H, T);
    if (!out) return NULL;
    #pragma omp parallel for schedule(static) if (B * H * T > OPS_PAR_MIN)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        double acc = 0.0;
        for (int64_t t = 0; t < T; t++) {
            acc += log_sigmoid((double)f->data[(b * T + t) * H + h]);
            out->data[bh * T + t] = (float)acc;
        }
    }
    if (st_needs_grad(ctx, f, NULL, NULL, NULL)) {
        gate_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        *sv = (gate_saved){B, T, H};
        if (!st_record(ctx, "forget_gate", log_gate_cumsum_backward, out, f, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
