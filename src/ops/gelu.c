/* gelu.c - GELU, y = x Phi(x), in its two usual forms (and, at the end, the gated units
 * SwiGLU and GeGLU built on these activations).
 *
 * tanh approximation (exact = 0):
 *   y = 0.5 x (1 + tanh u),  u = k (x + a x^3),  k = sqrt(2/pi), a = 0.044715
 * Since 0.5 (1 + tanh u) = sigmoid(2u), we evaluate y = x s with s = 1 / (1 + exp(-2u)):
 * no cancellation in 1 + tanh u for x << 0, and only one exp. Derivative:
 *   dy/dx = s + x s (1 - s) 2k (1 + 3a x^2)
 *
 * erf form (exact = 1):
 *   y = x Phi(x),  Phi(x) = 0.5 erfc(-x / sqrt 2),  dy/dx = Phi(x) + x phi(x),
 *   phi(x) = exp(-x^2/2) / sqrt(2 pi)
 * Phi comes from erfc of |x|/sqrt2 (relative accuracy in the tail), see ops_erfc_pos.
 * The backward recomputes from the saved input x; nothing else is stored. */
#include "ops_internal.h"

#include <math.h>

#define GELU_K 0.7978845608028654f      /* sqrt(2/pi) */
#define GELU_A 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT2PI 0.3989422804014327f

typedef struct gelu_saved { int exact; } gelu_saved;

static inline float gelu_phi_cdf(float x) {       /* Phi(x) */
    float e = ops_erfc_pos(fabsf(x) * INV_SQRT2);
    return ops_select(x < 0.0f, 0.5f * e, 1.0f - 0.5f * e);
}

/* sigmoid(2u); exactly 0 where exp(-2u) would be clamped (u < -44, true value < 1e-38),
 * so x s and x s (1 - s) (1 + 3a x^2) stay 0 for absurdly negative x. */
static inline float gelu_sigmoid2(float u) {
    return ops_select(u < -44.0f, 0.0f, 1.0f / (1.0f + ops_expf(-2.0f * u)));
}

/* out = gelu(x) over n values, and outh (or NULL) = out rounded to bf16: the copy the
 * linear this output feeds would otherwise make in a second pass (ops_bf16_out). Chunks
 * of GELU_CHUNK values: each chunk is rounded while it is in cache. */
#define GELU_CHUNK 4096
static void gelu_forward(float *restrict out, uint16_t *restrict outh, const float *restrict x, int64_t n,
                         int exact) {
    const int64_t nchunk = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (n > OPS_PAR_MIN)
    for (int64_t k = 0; k < nchunk; k++) {
        const int64_t i0 = k * GELU_CHUNK, i1 = n - i0 < GELU_CHUNK ? n : i0 + GELU_CHUNK;
        if (exact) {
            #pragma omp simd
            for (int64_t i = i0; i < i1; i++) out[i] = x[i] * gelu_phi_cdf(x[i]);
        } else {
            #pragma omp simd
            for (int64_t i = i0; i < i1; i++) {
                float v = x[i];
                float u = GELU_K * (v + GELU_A * v * v * v);
                out[i] = v * gelu_sigmoid2(u);
            }
        }
        if (outh) ops_round_row(outh + i0, out + i0, i1 - i0);
    }
}

/* gelu'(x), the two forms */
static inline float gelu_grad_exact(float v) {
    return gelu_phi_cdf(v) + v * INV_SQRT2PI * ops_expf(-0.5f * v * v);
}
static inline float gelu_grad_tanh(float v) {
    float u = GELU_K * (v + GELU_A * v * v * v);
    float s = gelu_sigmoid2(u);
    return s + v * s * (1.0f - s) * 2.0f * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
}

/* dx (+)= dout * gelu'(x); acc = 0: dx is a fresh buffer (ops_grad_out), written. */
static void gelu_backward_kernel(float *restrict dx, const float *restrict dout, const float *restrict x,
                                 int64_t n, int exact, int acc) {
    if (exact && acc) {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * gelu_grad_exact(x[i]);
    } else if (exact) {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] = dout[i] * gelu_grad_exact(x[i]);
    } else if (acc) {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * gelu_grad_tanh(x[i]);
    } else {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++) dx[i] = dout[i] * gelu_grad_tanh(x[i]);
    }
}

static void gelu_backward(st_ctx *ctx, st_node *n) {
    const gelu_saved *sv = n->saved;
    int fresh;
    float *dx = ops_grad_out(ctx, n->in[0], &fresh);
    if (!dx) return;
    gelu_backward_kernel(dx, n->out->grad, n->in[0]->data, st_numel(n->out), sv->exact, !fresh);
}

st_tensor *st_gelu(st_ctx *ctx, st_tensor *x, int exact) {
    if (!x) return NULL;
    ST_ASSERT(st_is_contiguous(x));
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    int fail;
    uint16_t *outh = ops_bf16_out(ctx, out, &fail);
    if (fail) return NULL;
    gelu_forward(out->data, outh, x->data, st_numel(x), exact != 0);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL)) {
        gelu_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->exact = exact != 0;
        if (!st_record(ctx, "gelu", gelu_backward, out, x, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}

/* ---- gated linear units (Shazeer 2020, "GLU Variants Improve Transformer") ----
 * x (..,2F) holds the gate a (first F columns) and the value b (last F):
 *   swiglu: y = silu(a) b,  silu(a) = a s(a), s = sigmoid, silu'(a) = s + a s (1 - s)
 *   geglu:  y = gelu(a) b   (the tanh or erf form, as st_gelu)
 * Backward: da = dy b act'(a), db = dy act(a), recomputed from the saved input. The
 * forward writes y's bf16 copy row by row with the bf16 backend, as st_gelu. */
typedef struct glu_saved { int kind; } glu_saved;

/* act(a), and act'(a) into *grad when grad is not NULL (the forward passes NULL: the
 * derivative is the backward's work) */
static inline float glu_act(float a, int kind, float *grad) {
    if (kind == ST_GLU_SWIGLU) {
        const float s = a < -88.0f ? 0.0f : 1.0f / (1.0f + ops_expf(-a));
        if (grad) *grad = s + a * s * (1.0f - s);
        return a * s;
    }
    const int exact = kind == ST_GLU_GEGLU_ERF;
    if (grad) *grad = exact ? gelu_grad_exact(a) : gelu_grad_tanh(a);
    if (exact) return a * gelu_phi_cdf(a);
    return a * gelu_sigmoid2(GELU_K * (a + GELU_A * a * a * a));
}

static void glu_backward(st_ctx *ctx, st_node *n) {
    const glu_saved *sv = n->saved;
    const st_tensor *x = n->in[0];
    const int64_t F = ops_cols(n->out), N = ops_rows(n->out);
    int fresh;
    float *dx = ops_grad_out(ctx, n->in[0], &fresh);
    if (!dx) return;
    const float *dy = n->out->grad;
    #pragma omp parallel for schedule(static) if (N * F > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        const float *xa = x->data + r * 2 * F, *xb = xa + F, *g = dy + r * F;
        float *da = dx + r * 2 * F, *db = da + F;
        for (int64_t c = 0; c < F; c++) {
            float act_grad;
            const float act = glu_act(xa[c], sv->kind, &act_grad);
            const float ga = g[c] * xb[c] * act_grad, gb = g[c] * act;
            if (fresh) { da[c] = ga; db[c] = gb; }
            else { da[c] += ga; db[c] += gb; }
        }
    }
}

st_tensor *st_glu(st_ctx *ctx, st_tensor *x, int kind) {
    if (!x) return NULL;
    ST_ASSERT(st_is_contiguous(x) && ops_cols(x) % 2 == 0 && kind >= 0 && kind < ST_GLU_COUNT);
    int64_t shape[4];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    const int64_t F = shape[x->ndim - 1] / 2, N = ops_rows(x);
    shape[x->ndim - 1] = F;
    st_tensor *out = st_new(ctx, x->ndim, shape);
    if (!out) return NULL;
    int fail;
    uint16_t *outh = ops_bf16_out(ctx, out, &fail);
    if (fail) return NULL;
    #pragma omp parallel for schedule(static) if (N * F > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        const float *xa = x->data + r * 2 * F, *xb = xa + F;
        float *o = out->data + r * F;
        for (int64_t c = 0; c < F; c++) o[c] = glu_act(xa[c], kind, NULL) * xb[c];
        if (outh) ops_round_row(outh + r * F, o, F);
    }
    if (st_needs_grad(ctx, x, NULL, NULL, NULL)) {
        glu_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->kind = kind;
        if (!st_record(ctx, "glu", glu_backward, out, x, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
