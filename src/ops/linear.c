/* linear.c - the affine map y = x W^T + b and the batched matmul, both one GEMM per
 * (batch) matrix in the forward and two in the backward.
 *
 *   linear:  y (N,OUT) = x (N,IN) W^T + b      dx += dy W,  dW += dy^T x,  db += colsum(dy)
 *   matmul:  c (M,N)   = a (M,K) b (K,N)       da += dc b^T, db += a^T dc
 * The backward sgemms use beta = 1, which is exactly the "accumulate" rule of the tape
 * (beta = 0 for a linear dx that is the input's first gradient: ops_grad_out).
 * The linear's three products go through st_mm_gemm with the context's precision
 * backend (include/st_matmul.h): fp32 sgemm, or bf16 inputs with fp32 accumulation, the
 * weight read from its bf16 shadow when it has one. With bf16 the activations are rounded
 * once each: x in the forward (the copy is saved for dW's product, N IN 2 bytes of the
 * arena, instead of rounding x again in the backward) and dy once for both backward
 * products (the backend would round an operand without a copy on every call). The
 * rounding is the same elementwise map wherever it runs, so results do not change. The
 * batched matmul stays fp32. */
#include "ops_internal.h"
#include "st_matmul.h"

#include <cblas.h>

/* ---------------------------------------------------------------- linear ---- */
/* Room for `count` bf16 values in the arena when the backend is bf16 (kept for the
 * backward when `for_backward`), else NULL; *fail set on arena overflow. */
static uint16_t *bf16_buffer(st_ctx *ctx, int64_t count, int for_backward, int *fail) {
    *fail = 0;
    if (!st_mm_bf16_operands(ctx->mm) || count == 0) return NULL;
    uint16_t *h = st_ctx_alloc(ctx, (size_t)count * sizeof(uint16_t), for_backward);
    if (!h) *fail = 1;
    return h;
}

/* x's bf16 copy (N*IN values): bf16_buffer, rounded. */
static uint16_t *bf16_copy(st_ctx *ctx, const float *x, int64_t count, int for_backward, int *fail) {
    uint16_t *h = bf16_buffer(ctx, count, for_backward, fail);
    if (h) st_bf16_round(h, x, count);
    return h;
}

static void linear_forward(st_mm *mm, float *out, const float *x, const uint16_t *xh, const st_tensor *w,
                           const float *b, int64_t N, int64_t IN, int64_t OUT) {
    float beta = 0.0f;
    if (b) {
        /* pre-fill every row with the bias, then let sgemm add x W^T on top (beta = 1) */
        #pragma omp parallel for schedule(static) if (N * OUT > OPS_PAR_MIN)
        for (int64_t r = 0; r < N; r++) memcpy(out + r * OUT, b, (size_t)OUT * sizeof(float));
        beta = 1.0f;
    }
    st_mm_gemm(mm, N, OUT, IN, 1.0f, st_mm_a(x, xh, 0, IN), st_mm_w(w->data, w->bf16, w->bf16_ver, 1, IN), beta,
               out, OUT);
}

/* dx_fresh: dx is a new, uninitialised buffer (ops_grad_out): written with beta = 0. */
/* dh, xh: bf16 copies of dout and x, or NULL (fp32, or the backend rounds them itself) */
static void linear_backward_kernel(st_mm *mm, float *dx, int dx_fresh, float *dw, const float *dout,
                                   const uint16_t *dh, const float *x, const uint16_t *xh, const st_tensor *w,
                                   int64_t N, int64_t IN, int64_t OUT) {
    if (dx)   /* dx (N,IN) (+)= dout (N,OUT) W (OUT,IN) */
        st_mm_gemm(mm, N, IN, OUT, 1.0f, st_mm_a(dout, dh, 0, OUT), st_mm_w(w->data, w->bf16, w->bf16_ver, 0, IN),
                   dx_fresh ? 0.0f : 1.0f, dx, IN);
    if (dw)   /* dW (OUT,IN) += dout^T (OUT,N) x (N,IN) */
        st_mm_gemm(mm, OUT, IN, N, 1.0f, st_mm_a(dout, dh, 1, OUT), st_mm_a(x, xh, 0, IN), 1.0f, dw, IN);
}

static void linear_backward(st_ctx *ctx, st_node *n) {
    st_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t IN = ops_cols(x), N = ops_rows(x), OUT = w->shape[0];
    float *dx = NULL, *dw = NULL, *db = NULL;
    int fresh = 0;
    if (x->requires_grad && !(dx = ops_grad_out(ctx, x, &fresh))) return;
    if (w->requires_grad && !(dw = st_grad(ctx, w))) return;
    if (b && b->requires_grad && !(db = st_grad(ctx, b))) return;
    /* dy rounded once when both products read it (one product: the backend rounds it),
     * by the bias's column sums when there is a bias (the same values, one pass over dy);
     * the copy is scratch of this call, rewound after the products (M model, bf16: the
     * 24 linears' copies were 113 MiB of the step's arena) */
    const float *dy = n->out->grad;
    const st_arena_mark mark = st_arena_mark_get(ctx->arena);
    int fail = 0;
    uint16_t *dh = dx && dw ? bf16_buffer(ctx, N * OUT, 0, &fail) : NULL;
    if (fail) return;
    if (db) ops_colsum_acc(db, dy, dh, N, OUT);
    else if (dh) st_bf16_round(dh, dy, N * OUT);
    linear_backward_kernel(ctx->mm, dx, fresh, dw, dy, dh, x->data, n->saved, w, N, IN, OUT);
    st_arena_rewind(ctx->arena, mark);
}

st_tensor *st_linear(st_ctx *ctx, st_tensor *x, st_tensor *w, st_tensor *b) {
    if (!x || !w) return NULL;
    ST_ASSERT(w->ndim == 2 && st_is_contiguous(w) && st_is_contiguous(x));
    int64_t IN = ops_cols(x), N = ops_rows(x), OUT = w->shape[0];
    ST_ASSERT(w->shape[1] == IN);
    ST_ASSERT(!b || (st_numel(b) == OUT && st_is_contiguous(b)));
    int64_t shape[4];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = OUT;
    st_tensor *out = st_new(ctx, x->ndim, shape);
    if (!out) return NULL;
    const int grad = st_needs_grad(ctx, x, w, b, NULL);
    int fail = 0;
    /* the producer's copy, else one made here (saved only when dW's product will read x) */
    uint16_t *xh = st_mm_bf16_operands(ctx->mm) && x->bf16 ? (uint16_t *)x->bf16
                 : bf16_copy(ctx, x->data, N * IN, grad && w->requires_grad, &fail);
    if (fail) return NULL;
    linear_forward(ctx->mm, out->data, x->data, xh, w, b ? b->data : NULL, N, IN, OUT);
    if (grad && !st_record(ctx, "linear", linear_backward, out, x, w, b, NULL, w->requires_grad ? xh : NULL))
        return NULL;
    return out;
}

/* ---------------------------------------------------------------- matmul ---- */
/* Batching: a and b have the same leading dims (one sgemm per batch), or b is a plain
 * matrix (K,N) shared by every batch of a, in which case a is one (batch*M, K) matrix. */
typedef struct matmul_dims { int64_t batch, M, K, N, a_stride, b_stride; } matmul_dims;

static matmul_dims matmul_shape(const st_tensor *a, const st_tensor *b) {
    matmul_dims d;
    d.M = a->shape[a->ndim - 2];
    d.K = a->shape[a->ndim - 1];
    d.N = b->shape[b->ndim - 1];
    d.batch = st_numel(a) / (d.M * d.K);
    d.a_stride = d.M * d.K;
    d.b_stride = d.K * d.N;
    if (b->ndim == 2 && a->ndim > 2) {   /* shared b: fold the batch into the rows */
        d.M *= d.batch;
        d.batch = 1;
    }
    return d;
}

static void matmul_backward(st_ctx *ctx, st_node *n) {
    st_tensor *a = n->in[0], *b = n->in[1];
    matmul_dims d = matmul_shape(a, b);
    float *da = NULL, *db = NULL;
    if (a->requires_grad && !(da = st_grad(ctx, a))) return;
    if (b->requires_grad && !(db = st_grad(ctx, b))) return;
    const float *dc = n->out->grad;
    for (int64_t i = 0; i < d.batch; i++) {
        const float *dci = dc + i * d.M * d.N;
        if (da)   /* da (M,K) += dc (M,N) b^T (N,K) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d.M, (int)d.K, (int)d.N,
                        1.0f, dci, (int)d.N, b->data + i * d.b_stride, (int)d.N,
                        1.0f, da + i * d.a_stride, (int)d.K);
        if (db)   /* db (K,N) += a^T (K,M) dc (M,N) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d.K, (int)d.N, (int)d.M,
                        1.0f, a->data + i * d.a_stride, (int)d.K, dci, (int)d.N,
                        1.0f, db + i * d.b_stride, (int)d.N);
    }
}

st_tensor *st_matmul(st_ctx *ctx, st_tensor *a, st_tensor *b) {
    if (!a || !b) return NULL;
    ST_ASSERT(a->ndim >= 2 && b->ndim >= 2 && st_is_contiguous(a) && st_is_contiguous(b));
    ST_ASSERT(a->shape[a->ndim - 1] == b->shape[b->ndim - 2]);
    if (b->ndim != 2 || a->ndim == 2) {
        ST_ASSERT(a->ndim == b->ndim);
        for (int i = 0; i < a->ndim - 2; i++) ST_ASSERT(a->shape[i] == b->shape[i]);
    }
    matmul_dims d = matmul_shape(a, b);
    int64_t shape[4];
    for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
    shape[a->ndim - 1] = d.N;
    st_tensor *out = st_new(ctx, a->ndim, shape);
    if (!out) return NULL;
    for (int64_t i = 0; i < d.batch; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d.M, (int)d.N, (int)d.K,
                    1.0f, a->data + i * d.a_stride, (int)d.K, b->data + i * d.b_stride, (int)d.N,
                    0.0f, out->data + i * d.M * d.N, (int)d.N);
    if (st_needs_grad(ctx, a, b, NULL, NULL) &&
        !st_record(ctx, "matmul", matmul_backward, out, a, b, NULL, NULL, NULL))
        return NULL;
    return out;
}
