/* layernorm.c - LayerNorm over the last dim (biased variance, as PyTorch):
 *   mean = sum_c x_c / C,  rstd = 1 / sqrt(sum_c (x_c - mean)^2 / C + eps)
 *   xhat = (x - mean) rstd,  y = xhat w + b
 * Backward (per row, g = dy w):
 *   dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)),  dw += sum_rows dy xhat,  db += sum_rows dy
 * mean and rstd are saved per row. dw/db are reduced deterministically: rows are cut into
 * fixed blocks of LN_BLOCK rows (independent of the thread count), each block writes its
 * own partial sums, and the partials are added in block order. With the bf16 backend the
 * forward also writes y's bf16 copy for the linear it feeds (ops_bf16_out). */
#include "ops_internal.h"

#include <math.h>

#define LN_BLOCK 64

typedef struct layernorm_saved { float *mean, *rstd; } layernorm_saved;

/* outh: y's bf16 copy (N,C), or NULL */
static void layernorm_forward(float *out, uint16_t *outh, float *mean_out, float *rstd_out, const float *x,
                              const float *w, const float *b, int64_t N, int64_t C, float eps) {
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = out + r * C;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < C; c++) s += xr[c];
        float m = s / (float)C;
        float v = 0.0f;   /* two-pass variance: no cancellation for rows with a large mean */
        #pragma omp simd reduction(+:v)
        for (int64_t c = 0; c < C; c++) { float d = xr[c] - m; v += d * d; }
        float rs = 1.0f / sqrtf(v / (float)C + eps);
        for (int64_t c = 0; c < C; c++) o[c] = (xr[c] - m) * rs * w[c] + b[c];
        if (outh) ops_round_row(outh + r * C, o, C);
        if (mean_out) { mean_out[r] = m; rstd_out[r] = rs; }
    }
}

/* part: (nblocks, 2, C) scratch for the per-block dw, db partials (written, not read).
 * dx_fresh: dx is uninitialised (its first gradient, ops_grad_out) and is written. */
static void layernorm_backward_kernel(float *dx, int dx_fresh, float *dw, float *db, float *part, const float *dout,
                                      const float *x, const float *w, const float *mean,
                                      const float *rstd, int64_t N, int64_t C) {
    int64_t nblk = (N + LN_BLOCK - 1) / LN_BLOCK;
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        float *restrict pw = part + blk * 2 * C, *restrict pb = pw + C;
        for (int64_t c = 0; c < C; c++) { pw[c] = 0.0f; pb[c] = 0.0f; }
        int64_t r1 = (blk + 1) * LN_BLOCK < N ? (blk + 1) * LN_BLOCK : N;
        for (int64_t r = blk * LN_BLOCK; r < r1; r++) {
            const float *restrict xr = x + r * C, *restrict g = dout + r * C;
            float m = mean[r], rs = rstd[r];
            if (dw || db)
                for (int64_t c = 0; c < C; c++) {
                    pw[c] += g[c] * (xr[c] - m) * rs;
                    pb[c] += g[c];
                }
            if (!dx) continue;
            float sg = 0.0f, sgx = 0.0f;   /* sum(dy w), sum(dy w xhat) */
            #pragma omp simd reduction(+:sg, sgx)
            for (int64_t c = 0; c < C; c++) {
                float gw = g[c] * w[c];
                sg += gw;
                sgx += gw * (xr[c] - m) * rs;
            }
            float mg = sg / (float)C, mgx = sgx / (float)C;
            float *restrict d = dx + r * C;
            if (dx_fresh)
                for (int64_t c = 0; c < C; c++)
                    d[c] = rs * (g[c] * w[c] - mg - (xr[c] - m) * rs * mgx);
            else
                for (int64_t c = 0; c < C; c++)
                    d[c] += rs * (g[c] * w[c] - mg - (xr[c] - m) * rs * mgx);
        }
    }
    if (!dw && !db) return;
    /* add the partials in block order; threads own 64-column slices */
    int64_t ncb = (C + 63) / 64;
    #pragma omp parallel for schedule(static) if (nblk * C > OPS_PAR_MIN && ncb > 1)
    for (int64_t cb = 0; cb < ncb; cb++) {
        int64_t c0 = cb * 64, nc = C - c0 < 64 ? C - c0 : 64;
        float sw[64] = {0}, sb[64] = {0};
        for (int64_t blk = 0; blk < nblk; blk++) {
            const float *pw = part + blk * 2 * C + c0, *pb = pw + C;
            for (int64_t j = 0; j < nc; j++) { sw[j] += pw[j]; sb[j] += pb[j]; }
        }
        for (int64_t j = 0; j < nc; j++) {
            if (dw) dw[c0 + j] += sw[j];
            if (db) db[c0 + j] += sb[j];
        }
    }
}

static void layernorm_backward(st_ctx *ctx, st_node *n) {
    const layernorm_saved *sv = n->saved;
    st_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t C = ops_cols(x), N = ops_rows(x);
    float *dx = NULL, *dw = NULL, *db = NULL;
    int fresh = 0;
    if (x->requires_grad && !(dx = ops_grad_out(ctx, x, &fresh))) return;
    if (w->requires_grad && !(dw = st_grad(ctx, w))) return;
    if (b->requires_grad && !(db = st_grad(ctx, b))) return;
    float *part = st_ctx_alloc(ctx, (size_t)((N + LN_BLOCK - 1) / LN_BLOCK) * 2 * (size_t)C * sizeof(float), 1);
    if (!part) return;
    layernorm_backward_kernel(dx, fresh, dw, db, part, n->out->grad, x->data, w->data, sv->mean, sv->rstd, N, C);
}

st_tensor *st_layernorm(st_ctx *ctx, st_tensor *x, st_tensor *w, st_tensor *b, float eps) {
    if (!x || !w || !b) return NULL;
    int64_t C = ops_cols(x), N = ops_rows(x);
    ST_ASSERT(st_is_contiguous(x) && st_is_contiguous(w) && st_is_contiguous(b));
    ST_ASSERT(st_numel(w) == C && st_numel(b) == C);
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    layernorm_saved *sv = NULL;
    if (st_needs_grad(ctx, x, w, b, NULL)) {
        sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->mean = st_ctx_alloc(ctx, (size_t)N * sizeof(float), 1);
        sv->rstd = st_ctx_alloc(ctx, (size_t)N * sizeof(float), 1);
        if (!sv->mean || !sv->rstd) return NULL;
    }
    int fail;
    uint16_t *outh = ops_bf16_out(ctx, out, &fail);
    if (fail) return NULL;
    layernorm_forward(out->data, outh, sv ? sv->mean : NULL, sv ? sv->rstd : NULL, x->data, w->data,
                      b->data, N, C, eps);
    if (sv && !st_record(ctx, "layernorm", layernorm_backward, out, x, w, b, NULL, sv)) return NULL;
    return out;
}
