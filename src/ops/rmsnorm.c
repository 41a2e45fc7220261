/* rmsnorm.c - RMSNorm over the last dim (Zhang & Sennrich 2019; LLaMA's norm, and the
 * per-head q/k norm of model.qk_norm), or over each of G equal groups of it (a group norm
 * without the mean: the per-head output norm of model.out_norm, FoX Pro's GroupNorm):
 *   rstd = 1 / sqrt(sum_{c in group} x_c^2 / D + eps),  xhat = x rstd,  y = xhat w
 * for groups of D = C / G values, w (C). Backward (per row and group, g = dy w):
 *   dx = rstd (g - xhat mean_group(g xhat)),  dw += sum_rows dy xhat
 * rstd is saved per row and group. dw is reduced deterministically as in layernorm.c: fixed
 * blocks of RMS_BLOCK rows (independent of the thread count), partial sums added in block
 * order. With the bf16 backend the forward also writes y's bf16 copy for the linear it feeds
 * (ops_bf16_out; the q/k norm's copy goes unused, 2 bytes per value). G = 1 is st_rmsnorm. */
#include "ops_internal.h"

#include <math.h>

#define RMS_BLOCK 64

typedef struct rmsnorm_saved { float *rstd; int64_t G; } rmsnorm_saved;

/* outh: y's bf16 copy (N,C), or NULL; rstd_out (N,G) or NULL */
static void rmsnorm_forward(float *out, uint16_t *outh, float *rstd_out, const float *x, const float *w, int64_t N,
                            int64_t C, int64_t G, float eps) {
    const int64_t D = C / G;
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        for (int64_t k = 0; k < G; k++) {
            const float *restrict xr = x + r * C + k * D, *restrict wk = w + k * D;
            float *restrict o = out + r * C + k * D;
            float v = 0.0f;
            #pragma omp simd reduction(+:v)
            for (int64_t c = 0; c < D; c++) v += xr[c] * xr[c];
            const float rs = 1.0f / sqrtf(v / (float)D + eps);
            for (int64_t c = 0; c < D; c++) o[c] = xr[c] * rs * wk[c];
            if (rstd_out) rstd_out[r * G + k] = rs;
        }
        if (outh) ops_round_row(outh + r * C, out + r * C, C);
    }
}

/* part: (nblocks, C) scratch for the per-block dw partials; dx_fresh: dx is written */
static void rmsnorm_backward_kernel(float *dx, int dx_fresh, float *dw, float *part, const float *dout,
                                    const float *x, const float *w, const float *rstd, int64_t N, int64_t C,
                                    int64_t G) {
    const int64_t nblk = (N + RMS_BLOCK - 1) / RMS_BLOCK, D = C / G;
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        float *restrict pw = part + blk * C;
        for (int64_t c = 0; c < C; c++) pw[c] = 0.0f;
        const int64_t r1 = (blk + 1) * RMS_BLOCK < N ? (blk + 1) * RMS_BLOCK : N;
        for (int64_t r = blk * RMS_BLOCK; r < r1; r++)
            for (int64_t k = 0; k < G; k++) {
                const float *restrict xr = x + r * C + k * D, *restrict g = dout + r * C + k * D;
                const float *restrict wk = w + k * D;
                const float rs = rstd[r * G + k];
                if (dw)
                    for (int64_t c = 0; c < D; c++) pw[k * D + c] += g[c] * xr[c] * rs;
                if (!dx) continue;
                float sgx = 0.0f;   /* sum(dy w xhat) over the group */
                #pragma omp simd reduction(+:sgx)
                for (int64_t c = 0; c < D; c++) sgx += g[c] * wk[c] * xr[c] * rs;
                const float mgx = sgx / (float)D;
                float *restrict d = dx + r * C + k * D;
                if (dx_fresh)
                    for (int64_t c = 0; c < D; c++) d[c] = rs * (g[c] * wk[c] - xr[c] * rs * mgx);
                else
                    for (int64_t c = 0; c < D; c++) d[c] += rs * (g[c] * wk[c] - xr[c] * rs * mgx);
            }
    }
    if (!dw) return;
    for (int64_t blk = 0; blk < nblk; blk++)   /* block order: the same sum for any thread count */
        for (int64_t c = 0; c < C; c++) dw[c] += part[blk * C + c];
}

static void rmsnorm_backward(st_ctx *ctx, st_node *n) {
    const rmsnorm_saved *sv = n->saved;
    st_tensor *x = n->in[0], *w = n->in[1];
    const int64_t C = ops_cols(x), N = ops_rows(x);
    float *dx = NULL, *dw = NULL;
    int fresh = 0;
    if (x->requires_grad && !(dx = ops_grad_out(ctx, x, &fresh))) return;
    if (w->requires_grad && !(dw = st_grad(ctx, w))) return;
    float *part = st_ctx_alloc(ctx, (size_t)((N + RMS_BLOCK - 1) / RMS_BLOCK) * (size_t)C * sizeof(float), 1);
    if (!part) return;
    rmsnorm_backward_kernel(dx, fresh, dw, part, n->out->grad, x->data, w->data, sv->rstd, N, C, sv->G);
}

st_tensor *st_rmsnorm(st_ctx *ctx, st_tensor *x, st_tensor *w, float eps) {
    return st_rmsnorm_groups(ctx, x, w, 1, eps);
}

st_tensor *st_rmsnorm_groups(st_ctx *ctx, st_tensor *x, st_tensor *w, int groups, float eps) {
    if (!x || !w) return NULL;
    const int64_t C = ops_cols(x), N = ops_rows(x), G = groups;
    ST_ASSERT(st_is_contiguous(x) && st_is_contiguous(w) && st_numel(w) == C && G >= 1 && C % G == 0);
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    rmsnorm_saved *sv = NULL;
    if (st_needs_grad(ctx, x, w, NULL, NULL)) {
        sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv || !(sv->rstd = st_ctx_alloc(ctx, (size_t)(N * G) * sizeof(float), 1))) return NULL;
        sv->G = G;
    }
    int fail;
    uint16_t *outh = ops_bf16_out(ctx, out, &fail);
    if (fail) return NULL;
    rmsnorm_forward(out->data, outh, sv ? sv->rstd : NULL, x->data, w->data, N, C, G, eps);
    if (sv && !st_record(ctx, "rmsnorm", rmsnorm_backward, out, x, w, NULL, NULL, sv)) return NULL;
    return out;
}
