/* cross_entropy.c - mean negative log-likelihood of the targets under softmax(logits),
 * plain and fused with the LM head.
 *
 * Per row r with target t (rows with t == ignore_index are skipped), count = rows kept:
 *   lse_r  = m + log sum_j exp(z_j - m),  m = max_j z_j    (max subtraction: no overflow)
 *   loss_r = lse_r - z_t,   loss = sum_r loss_r / count    (0 if count == 0)
 *   dz_j   = g / count * (softmax_j - [j == t]),  softmax_j = exp(z_j - lse_r)
 * Row sums of exp run in float over blocks of CE_BLOCK entries, the blocks and the row
 * losses are added in double, in a fixed order.
 *
 * st_linear_cross_entropy computes z = x W^T a chunk of rows at a time. In grad mode each
 * chunk of logits is turned in place into dz/count (g = 1) while it is hot, and two
 * sgemms fold it into dx (N,C) and dW (V,C) buffers; the backward only scales those by
 * the upstream g. Peak extra memory is one chunk of logits (at most CE_CHUNK_FLOATS) plus
 * dW, never (N,V). The three products go through st_mm_gemm with the context's precision
 * (bf16: x, W and dz rounded to bf16, W from its shadow, fp32 accumulation; the logits,
 * softmax and loss stay fp32). */
#include "ops_internal.h"
#include "st_matmul.h"
#include <math.h>

#define CE_BLOCK 512     /* entries per float partial sum in a row's sum of exp */
/* Rows per chunk of the fused op. Each of a chunk's three sgemms re-packs the whole
 * (V,C) head matrix (or the (rows,V) chunk), a cost of 1/rows relative to the 2*rows*V*C
 * flops: with V = 33280, C = 256 on 2 threads, 256-row chunks ran ~10% below the sgemm
 * rate of 1024-row chunks. So a big head gets chunks of up to CE_CHUNK_FLOATS logits
 * (128 MiB); a small head (V*C < CE_BIG_HEAD, where the packing is a few microseconds)
 * keeps CE_CHUNK rows, which bounds the scratch of small models and keeps the multi-chunk
 * path exercised by small tests. */
#define CE_CHUNK 256
#define CE_CHUNK_FLOATS ((int64_t)1 << 25)
#define CE_BIG_HEAD ((int64_t)1 << 20)

/* As many rows as the budget allows (at least CE_CHUNK), evened out over the chunks N
 * needs (multiples of `align`, the backend's st_mm_row_align: 16 for fp32, 64 for bf16's
 * AMX kernels) so the last chunk is not a sliver. */
static int64_t lce_chunk_rows(int64_t N, int64_t V, int64_t C, int64_t align) {
    int64_t max_rows = CE_CHUNK;
    if (V * C >= CE_BIG_HEAD && CE_CHUNK_FLOATS / V > max_rows) max_rows = CE_CHUNK_FLOATS / V / align * align;
    if (N <= max_rows) return N;
    int64_t nchunk = (N + max_rows - 1) / max_rows;
    int64_t rows = ((N + nchunk - 1) / nchunk + align - 1) / align * align;
    return rows < max_rows ? rows : max_rows;
}

/* --------------------------------------------------------- row kernels ---- */
static float row_max(const float *restrict z, int64_t V) {
    float m = -INFINITY;
    #pragma omp simd reduction(max:m)
    for (int64_t j = 0; j < V; j++) m = z[j] > m ? z[j] : m;
    return m;
}

/* sum_j exp(z_j - m) */
static double row_sumexp(const float *restrict z, float m, int64_t V) {
    double s = 0.0;
    for (int64_t j0 = 0; j0 < V; j0 += CE_BLOCK) {
        int64_t j1 = j0 + CE_BLOCK < V ? j0 + CE_BLOCK : V;
        float bs = 0.0f;
        #pragma omp simd reduction(+:bs)
        for (int64_t j = j0; j < j1; j++) bs += ops_expf(z[j] - m);
        s += (double)bs;
    }
    return s;
}

/* In place z_j -> exp(z_j - m); returns their sum (same blocking as row_sumexp). */
static double row_exp_inplace(float *restrict z, float m, int64_t V) {
    double s = 0.0;
    for (int64_t j0 = 0; j0 < V; j0 += CE_BLOCK) {
        int64_t j1 = j0 + CE_BLOCK < V ? j0 + CE_BLOCK : V;
        float bs = 0.0f;
        #pragma omp simd reduction(+:bs)
        for (int64_t j = j0; j < j1; j++) { float e = ops_expf(z[j] - m); z[j] = e; bs += e; }
        s += (double)bs;
    }
    return s;
}

static double row_lse(const float *z, int64_t V) {
    float m = row_max(z, V);
    return (double)m + log(row_sumexp(z, m, V));
}

/* In place: z -> (softmax(z) - onehot(t)) * scale. Returns the row's loss lse - z_t. */
static double row_softmax_grad(float *restrict z, int64_t V, int32_t t, float scale) {
    float m = row_max(z, V);
    float zt = z[t];
    double s = row_exp_inplace(z, m, V);
    float k = (float)((double)scale / s);
    for (int64_t j = 0; j < V; j++) z[j] *= k;
    z[t] -= scale;
    return (double)m + log(s) - (double)zt;
}

/* The same row with dz rounded to bf16 into h (the bf16 backend's operand) and z left as
 * the exponentials: the products read only h, so the fp32 dz is never written. Each value
 * is the fp32 one rounded, bit for bit: bf16((e_j k) - [j == t] scale). */
static double row_softmax_grad_bf16(float *restrict z, uint16_t *restrict h, int64_t V, int32_t t, float scale) {
    float m = row_max(z, V);
    float zt = z[t];
    double s = row_exp_inplace(z, m, V);
    float k = (float)((double)scale / s);
    #pragma omp simd
    for (int64_t j = 0; j < V; j++) h[j] = st_f32_to_bf16(z[j] * k);
    h[t] = st_f32_to_bf16(z[t] * k - scale);
    return (double)m + log(s) - (double)zt;
}

/* Checks the targets and counts the rows that are not ignored. */
static int64_t count_targets(const int32_t *targets, int64_t N, int64_t V, int32_t ignore_index) {
    int64_t count = 0;
    for (int64_t r = 0; r < N; r++) {
        if (targets[r] == ignore_index) continue;
        ST_ASSERT(targets[r] >= 0 && targets[r] < V);
        count++;
    }
    return count;
}

/* loss = sum of row losses / count (in row order); tok_loss gets each row's loss. */
static float finish_loss(const double *rowloss, int64_t N, int64_t count, float *tok_loss) {
    double total = 0.0;
    for (int64_t r = 0; r < N; r++) {
        total += rowloss[r];
        if (tok_loss) tok_loss[r] = (float)rowloss[r];
    }
    return count ? (float)(total / (double)count) : 0.0f;
}

/* ------------------------------------------------------- cross_entropy ---- */
typedef struct ce_saved {
    float *lse;          /* (N) per-row log-sum-exp */
    int32_t *targets;    /* (N) copy */
    int32_t ignore_index;
    float inv_count;     /* 1 / count, 0 if every row is ignored */
} ce_saved;

static void ce_backward_kernel(float *dz, const float *z, const float *lse, const int32_t *targets,
                               int32_t ignore_index, float g, int64_t N, int64_t V) {
    #pragma omp parallel for schedule(static) if (N * V > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        int32_t t = targets[r];
        if (t == ignore_index) continue;
        const float *restrict zr = z + r * V;
        float *restrict d = dz + r * V;
        float l = lse[r];
        #pragma omp simd
        for (int64_t j = 0; j < V; j++) d[j] += g * ops_expf(zr[j] - l);
        d[t] -= g;
    }
}

static void ce_backward(st_ctx *ctx, st_node *n) {
    const ce_saved *sv = n->saved;
    st_tensor *z = n->in[0];
    if (sv->inv_count == 0.0f) return;
    float *dz = st_grad(ctx, z);
    if (!dz) return;
    ce_backward_kernel(dz, z->data, sv->lse, sv->targets, sv->ignore_index,
                       n->out->grad[0] * sv->inv_count, ops_rows(z), ops_cols(z));
}

st_tensor *st_cross_entropy(st_ctx *ctx, st_tensor *logits, const int32_t *targets,
                            int32_t ignore_index, float *tok_loss) {
    if (!logits || !targets) return NULL;
    ST_ASSERT(st_is_contiguous(logits));
    int64_t V = ops_cols(logits), N = ops_rows(logits);
    int64_t count = count_targets(targets, N, V, ignore_index);
    int grad = st_needs_grad(ctx, logits, NULL, NULL, NULL);
    st_tensor *out = ops_scalar(ctx);
    double *rowloss = out ? st_ctx_alloc(ctx, (size_t)N * sizeof(double), 0) : NULL;
    if (!rowloss) return NULL;
    ce_saved *sv = NULL;
    if (grad) {
        sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        float *lse = sv ? st_ctx_alloc(ctx, (size_t)N * sizeof(float), 1) : NULL;
        int32_t *tc = lse ? st_ctx_alloc(ctx, (size_t)N * sizeof(int32_t), 1) : NULL;
        if (!tc) return NULL;
        memcpy(tc, targets, (size_t)N * sizeof(int32_t));
        sv->lse = lse;
        sv->targets = tc;
        sv->ignore_index = ignore_index;
        sv->inv_count = count ? 1.0f / (float)count : 0.0f;
    }
    const float *z = logits->data;
    #pragma omp parallel for schedule(static) if (N * V > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        int32_t t = targets[r];
        if (t == ignore_index) { rowloss[r] = 0.0; if (sv) sv->lse[r] = 0.0f; continue; }
        double lse = row_lse(z + r * V, V);
        rowloss[r] = lse - (double)z[r * V + t];
        if (sv) sv->lse[r] = (float)lse;
    }
    out->data[0] = finish_loss(rowloss, N, count, tok_loss);
    if (sv && !st_record(ctx, "cross_entropy", ce_backward, out, logits, NULL, NULL, NULL, sv))
        return NULL;
    return out;
}

/* ------------------------------------------------ linear_cross_entropy ---- */
typedef struct lce_saved {
    float *dx;   /* (N,C) d(loss)/dx for g = 1, or NULL */
    float *dw;   /* (V,C) d(loss)/dW for g = 1, or NULL */
} lce_saved;

static void lce_backward(st_ctx *ctx, st_node *n) {
    const lce_saved *sv = n->saved;
    st_tensor *x = n->in[0], *w = n->in[1];
    float g = n->out->grad[0];
    for (int k = 0; k < 2; k++) {
        st_tensor *t = k ? w : x;
        const float *restrict src = k ? sv->dw : sv->dx;
        if (!src || !t->requires_grad) continue;
        /* g = 1 (a plain loss): x's first gradient is the saved dx buffer itself */
        if (!k && g == 1.0f && ops_grad_alias(t, sv->dx)) continue;
        int fresh;
        float *restrict d = ops_grad_out(ctx, t, &fresh);
        if (!d) return;
        int64_t cnt = st_numel(t);
        if (fresh) {
            #pragma omp parallel for simd schedule(static) if (cnt > OPS_PAR_MIN)
            for (int64_t i = 0; i < cnt; i++) d[i] = g * src[i];
        } else {
            #pragma omp parallel for simd schedule(static) if (cnt > OPS_PAR_MIN)
            for (int64_t i = 0; i < cnt; i++) d[i] += g * src[i];
        }
    }
}

/* One chunk of `rows` rows: logits buf (rows,V) = x W^T, row losses, and in grad mode
 * dx_chunk = dz W, dW (+)= dz^T x with dz = (softmax - onehot) / count (the first chunk
 * writes dW: dw_beta = 0).
 * hbuf (rows,V) and xh (rows,C): bf16 scratch when the backend is bf16 in grad mode, else
 * NULL. Each of dz and x feeds two products; the backend would round each on every call
 * (two passes over the chunk's rows x V values for dz), so they are rounded here once:
 * x up front, each dz row by its softmax (the fp32 dz is then never written: buf keeps
 * the exponentials). */
/* xh_ready: x's rows already rounded (the producer's copy, ops_bf16_out), used as xh. */
static void lce_chunk(st_mm *mm, float *buf, uint16_t *hbuf, uint16_t *xh, const uint16_t *xh_ready, double *rowloss,
                      float *dx, float *dw, float dw_beta, const float *x, const st_tensor *w, const int32_t *targets,
                      int32_t ignore_index, float inv_count, int64_t rows, int64_t C, int64_t V) {
    if (xh && !xh_ready) st_bf16_round(xh, x, rows * C);
    const uint16_t *xr = xh_ready ? xh_ready : xh;
    st_mm_gemm(mm, rows, V, C, 1.0f, st_mm_a(x, xr, 0, C), st_mm_w(w->data, w->bf16, w->bf16_ver, 1, C), 0.0f, buf, V);
    int grad = dx || dw;
    #pragma omp parallel for schedule(static) if (rows * V > OPS_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        float *z = buf + r * V;
        int32_t t = targets[r];
        if (t == ignore_index) {
            rowloss[r] = 0.0;
            if (hbuf) memset(hbuf + r * V, 0, (size_t)V * sizeof(uint16_t));
            else if (grad) memset(z, 0, (size_t)V * sizeof(float));
        } else if (hbuf) {
            rowloss[r] = row_softmax_grad_bf16(z, hbuf + r * V, V, t, inv_count);
        } else if (grad) {
            rowloss[r] = row_softmax_grad(z, V, t, inv_count);
        } else {
            rowloss[r] = row_lse(z, V) - (double)z[t];
        }
    }
    if (dx)   /* dx (rows,C) = dz (rows,V) W (V,C) */
        st_mm_gemm(mm, rows, C, V, 1.0f, st_mm_a(buf, hbuf, 0, V), st_mm_w(w->data, w->bf16, w->bf16_ver, 0, C), 0.0f,
                   dx, C);
    if (dw)   /* dW (V,C) (+)= dz^T (V,rows) x (rows,C) */
        st_mm_gemm(mm, V, C, rows, 1.0f, st_mm_a(buf, hbuf, 1, V), st_mm_a(x, xr, 0, C), dw_beta, dw, C);
}

st_tensor *st_linear_cross_entropy(st_ctx *ctx, st_tensor *x, st_tensor *w,
                                   const int32_t *targets, int32_t ignore_index, float *tok_loss) {
    if (!x || !w || !targets) return NULL;
    ST_ASSERT(st_is_contiguous(x) && st_is_contiguous(w) && w->ndim == 2);
    int64_t C = ops_cols(x), N = ops_rows(x), V = w->shape[0];
    ST_ASSERT(w->shape[1] == C);
    int64_t count = count_targets(targets, N, V, ignore_index);
    /* no gradient work at all in inference mode or when every row is ignored */
    int grad = st_needs_grad(ctx, x, w, NULL, NULL);
    int need_dx = grad && count && x->requires_grad, need_dw = grad && count && w->requires_grad;
    float inv_count = count ? 1.0f / (float)count : 0.0f;

    st_tensor *out = ops_scalar(ctx);
    double *rowloss = out ? st_ctx_alloc(ctx, (size_t)N * sizeof(double), 0) : NULL;
    if (!rowloss) return NULL;
    /* Ignored rows cost nothing: gather the scored rows and their targets and run the head
     * on them alone (sliding-window evaluation scores the last S of L positions: an
     * L/S-fold cut; answer-only task training keeps the answer tokens). Each kept row's
     * logits, loss and dz are the same product; losses are scattered back below, 0 for
     * ignored rows, and in grad mode the gathered dx rows are scattered into dx (N,C),
     * whose ignored rows are 0 (their loss does not depend on x). dW sums dz^T x over
     * the kept rows, which is all it ever summed (an ignored row's dz is 0). */
    const float *xs = x->data;
    const int32_t *ts = targets;
    double *rl = rowloss;
    int64_t rows_n = N;
    const int gather = count < N;
    if (gather) {
        float *xc = st_ctx_alloc(ctx, (size_t)(count * C + 1) * sizeof(float), 0);
        int32_t *tc = xc ? st_ctx_alloc(ctx, (size_t)(count + 1) * sizeof(int32_t), 0) : NULL;
        rl = tc ? st_ctx_alloc(ctx, (size_t)(count + 1) * sizeof(double), 0) : NULL;
        if (!rl) return NULL;
        for (int64_t r = 0, k = 0; r < N; r++)
            if (targets[r] != ignore_index) {
                memcpy(xc + k * C, x->data + r * C, (size_t)C * sizeof(float));
                tc[k++] = targets[r];
            }
        xs = xc;
        ts = tc;
        rows_n = count;
    }
    lce_saved *sv = NULL;
    float *dxg = NULL;   /* dx of the rows the chunks see: sv->dx, or the gathered rows' */
    if (grad) {
        sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->dx = need_dx ? st_ctx_alloc(ctx, (size_t)(N * C) * sizeof(float), 1) : NULL;
        sv->dw = need_dw ? st_ctx_alloc(ctx, (size_t)(V * C) * sizeof(float), 1) : NULL;
        if ((need_dx && !sv->dx) || (need_dw && !sv->dw)) return NULL;
        dxg = sv->dx && gather ? st_ctx_alloc(ctx, (size_t)(rows_n * C + 1) * sizeof(float), 0) : sv->dx;
        if (need_dx && !dxg) return NULL;
    }
    /* The chunk's logits and bf16 copies live only through this call: rewound after the
     * chunks, so they are not held through the backward (M model, bf16: 141 MiB). */
    const st_arena_mark mark = st_arena_mark_get(ctx->arena);
    int64_t chunk = lce_chunk_rows(rows_n, V, C, st_mm_row_align(ctx->mm));
    float *buf = st_ctx_alloc(ctx, (size_t)((chunk ? chunk : 1) * V) * sizeof(float), 0);
    if (!buf) return NULL;
    /* x's bf16 copy from its producer (LN_f), when the rows were not gathered */
    const uint16_t *xh_ready = st_mm_bf16_operands(ctx->mm) && !gather ? x->bf16 : NULL;
    uint16_t *hbuf = NULL, *xh = NULL;   /* bf16 rounding of dz and x, once per chunk */
    if ((need_dx || need_dw) && st_mm_bf16_operands(ctx->mm)) {
        hbuf = st_ctx_alloc(ctx, (size_t)((chunk ? chunk : 1) * V) * sizeof(uint16_t), 0);
        if (!hbuf) return NULL;
        if (!xh_ready && !(xh = st_ctx_alloc(ctx, (size_t)((chunk ? chunk : 1) * C) * sizeof(uint16_t), 0)))
            return NULL;
    }
    for (int64_t r0 = 0; r0 < rows_n; r0 += chunk) {
        int64_t rows = rows_n - r0 < chunk ? rows_n - r0 : chunk;
        lce_chunk(ctx->mm, buf, hbuf, xh, xh_ready ? xh_ready + r0 * C : NULL, rl + r0,
                  dxg ? dxg + r0 * C : NULL, sv ? sv->dw : NULL,
                  r0 == 0 ? 0.0f : 1.0f, xs + r0 * C, w, ts + r0, ignore_index,
                  inv_count, rows, C, V);
    }
    st_arena_rewind(ctx->arena, mark);
    if (gather) {
        for (int64_t r = 0, k = 0; r < N; r++) {
            const int kept = targets[r] != ignore_index;
            rowloss[r] = kept ? rl[k] : 0.0;
            if (dxg) {
                if (kept) memcpy(sv->dx + r * C, dxg + k * C, (size_t)C * sizeof(float));
                else memset(sv->dx + r * C, 0, (size_t)C * sizeof(float));
            }
            k += kept;
        }
    }
    out->data[0] = finish_loss(rowloss, N, count, tok_loss);
    if (sv && !st_record(ctx, "linear_cross_entropy", lce_backward, out, x, w, NULL, NULL, sv))
        return NULL;
    return out;
}
