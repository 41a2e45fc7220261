/* elementwise.c - residual add, broadcast bias add and scaling by a constant.
 *   add:   y = a + b            da += dy, db += dy
 *   bias:  y = x + b (per row)  dx += dy, db += colsum(dy)
 *   scale: y = s x              dx += s dy
 * A first gradient is written, not accumulated, and add/bias hand dy's buffer itself to
 * one input (ops_grad_out / ops_grad_alias in ops_internal.h). */
#include "ops_internal.h"

/* dst += src over n floats (the common backward of all three ops). */
static void acc_add(float *restrict dst, const float *restrict src, int64_t n) {
    #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

/* ------------------------------------------------------------------- add ---- */
static void add_forward(float *restrict out, const float *restrict a, const float *restrict b, int64_t n) {
    #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* dst (+)= src: a fresh (uninitialised) dst is a copy. */
static void put_add(float *restrict dst, const float *restrict src, int64_t n, int fresh) {
    if (!fresh) { acc_add(dst, src, n); return; }
    #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

/* dy flows unchanged into x: the first input without a gradient takes over dy's buffer
 * (ops_grad_alias), any other is written or accumulated. */
static void pass_grad(st_ctx *ctx, st_tensor *t, float *dy, int64_t cnt, int *aliased) {
    if (!*aliased && ops_grad_alias(t, dy)) { *aliased = 1; return; }
    int fresh;
    float *d = ops_grad_out(ctx, t, &fresh);
    if (d) put_add(d, dy, cnt, fresh);
}

static void add_backward(st_ctx *ctx, st_node *n) {
    int64_t cnt = st_numel(n->out);
    int aliased = 0;
    /* one input at a time: a and b may be the same tensor (then its grad gets 2 dy; the
     * alias is not taken since dy would then be added to itself) */
    int same = n->in[0] == n->in[1];
    for (int k = 0; k < 2; k++) {
        st_tensor *t = n->in[k];
        if (!t->requires_grad) continue;
        if (same) {
            float *d = st_grad(ctx, t);
            if (!d) return;
            acc_add(d, n->out->grad, cnt);
        } else {
            pass_grad(ctx, t, n->out->grad, cnt, &aliased);
            if (ctx->failed) return;
        }
    }
}

st_tensor *st_add(st_ctx *ctx, st_tensor *a, st_tensor *b) {
    if (!a || !b) return NULL;
    ST_ASSERT(st_same_shape(a, b) && st_is_contiguous(a) && st_is_contiguous(b));
    st_tensor *out = st_new(ctx, a->ndim, a->shape);
    if (!out) return NULL;
    add_forward(out->data, a->data, b->data, st_numel(a));
    if (st_needs_grad(ctx, a, b, NULL, NULL) &&
        !st_record(ctx, "add", add_backward, out, a, b, NULL, NULL, NULL))
        return NULL;
    return out;
}

/* ------------------------------------------------------------------ bias ---- */
static void bias_forward(float *restrict out, const float *restrict x, const float *restrict b,
                         int64_t N, int64_t C) {
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        const float *xr = x + r * C;
        float *o = out + r * C;
        for (int64_t c = 0; c < C; c++) o[c] = xr[c] + b[c];
    }
}

static void bias_backward(st_ctx *ctx, st_node *n) {
    st_tensor *x = n->in[0], *b = n->in[1];
    int64_t C = ops_cols(x), N = ops_rows(x);
    float *db = NULL;
    if (b->requires_grad && !(db = st_grad(ctx, b))) return;
    /* the bias gradient first: passing dy on to x may hand x the buffer */
    if (db) ops_colsum_acc(db, n->out->grad, NULL, N, C);
    int aliased = 0;
    if (x->requires_grad) pass_grad(ctx, x, n->out->grad, N * C, &aliased);
}

st_tensor *st_bias(st_ctx *ctx, st_tensor *x, st_tensor *b) {
    if (!x || !b) return NULL;
    ST_ASSERT(st_is_contiguous(x) && st_is_contiguous(b));
    ST_ASSERT(st_numel(b) == ops_cols(x));
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    bias_forward(out->data, x->data, b->data, ops_rows(x), ops_cols(x));
    if (st_needs_grad(ctx, x, b, NULL, NULL) &&
        !st_record(ctx, "bias", bias_backward, out, x, b, NULL, NULL, NULL))
        return NULL;
    return out;
}

/* ----------------------------------------------------------------- scale ---- */
typedef struct scale_saved { float s; } scale_saved;

static void scale_kernel(float *restrict out, const float *restrict x, float s, int64_t n, int accumulate) {
    if (accumulate) {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++) out[i] += s * x[i];
    } else {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++) out[i] = s * x[i];
    }
}

static void scale_backward(st_ctx *ctx, st_node *n) {
    const scale_saved *sv = n->saved;
    int fresh;
    float *dx = ops_grad_out(ctx, n->in[0], &fresh);
    if (!dx) return;
    scale_kernel(dx, n->out->grad, sv->s, st_numel(n->out), !fresh);
}

st_tensor *st_scale(st_ctx *ctx, st_tensor *x, float s) {
    if (!x) return NULL;
    ST_ASSERT(st_is_contiguous(x));
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    scale_kernel(out->data, x->data, s, st_numel(x), 0);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL)) {
        scale_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->s = s;
        if (!st_record(ctx, "scale", scale_backward, out, x, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
