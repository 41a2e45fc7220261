/* tensor.c - tensors in the arena, views (reshape / transpose) and contiguous copies. */
#include "st_tensor.h"

#include <string.h>

int64_t st_numel(const st_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int st_is_contiguous(const st_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

int st_same_shape(const st_tensor *a, const st_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++) if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

void st_set_shape(st_tensor *t, int ndim, const int64_t *shape) {
    ST_ASSERT(ndim >= 1 && ndim <= 4);
    t->ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = s;
        s *= shape[i];
    }
    for (int i = ndim; i < 4; i++) { t->shape[i] = 1; t->stride[i] = 1; }
}

void *st_ctx_alloc(st_ctx *ctx, size_t bytes, int for_backward) {
    if (ctx->failed) return NULL;
    void *p = st_arena_alloc(ctx->arena, bytes);
    if (!p) { ctx->failed = 1; return NULL; }
    if (for_backward) ctx->backward_bytes += bytes;
    return p;
}

static st_tensor *tensor_header(st_ctx *ctx) {
    st_tensor *t = st_ctx_alloc(ctx, sizeof(st_tensor), 0);
    if (t) memset(t, 0, sizeof *t);
    return t;
}

st_tensor *st_new(st_ctx *ctx, int ndim, const int64_t *shape) {
    st_tensor *t = tensor_header(ctx);
    if (!t) return NULL;
    st_set_shape(t, ndim, shape);
    t->data = st_ctx_alloc(ctx, (size_t)st_numel(t) * sizeof(float), 0);
    return t->data ? t : NULL;
}

st_tensor *st_zeros(st_ctx *ctx, int ndim, const int64_t *shape) {
    st_tensor *t = st_new(ctx, ndim, shape);
    if (t) memset(t->data, 0, (size_t)st_numel(t) * sizeof(float));
    return t;
}

st_tensor *st_new2(st_ctx *ctx, int64_t d0, int64_t d1) { int64_t s[2] = {d0, d1}; return st_new(ctx, 2, s); }
st_tensor *st_new3(st_ctx *ctx, int64_t d0, int64_t d1, int64_t d2) { int64_t s[3] = {d0, d1, d2}; return st_new(ctx, 3, s); }
st_tensor *st_new4(st_ctx *ctx, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t s[4] = {d0, d1, d2, d3};
    return st_new(ctx, 4, s);
}

st_tensor *st_wrap(st_ctx *ctx, float *data, int ndim, const int64_t *shape) {
    st_tensor *t = tensor_header(ctx);
    if (!t) return NULL;
    st_set_shape(t, ndim, shape);
    t->data = data;
    return t;
}

static st_tensor *owner_of(st_tensor *t, int64_t *off) {
    *off = 0;
    while (t->base) { *off += t->offset; t = t->base; }
    return t;
}

st_tensor *st_view(st_ctx *ctx, st_tensor *t, int ndim, const int64_t *shape) {
    if (!t) return NULL;
    ST_ASSERT(st_is_contiguous(t));
    st_tensor *v = tensor_header(ctx);
    if (!v) return NULL;
    st_set_shape(v, ndim, shape);
    ST_ASSERT(st_numel(v) == st_numel(t));
    int64_t off;
    st_tensor *own = owner_of(t, &off);
    v->data = t->data;
    v->base = own;
    v->offset = off;
    v->requires_grad = t->requires_grad;
    v->name = t->name;
    /* the same elements in the same order: a bf16 copy (a producer's, or a parameter's
     * shadow) is the view's too */
    v->bf16 = t->bf16;
    v->bf16_ver = t->bf16_ver;
    /* Parameters own a fixed grad block: views of them see it directly. */
    if (own->grad) v->grad = own->grad + off;
    return v;
}

st_tensor *st_transpose(st_ctx *ctx, st_tensor *t, int d0, int d1) {
    if (!t) return NULL;
    ST_ASSERT(d0 >= 0 && d0 < t->ndim && d1 >= 0 && d1 < t->ndim);
    st_tensor *v = tensor_header(ctx);
    if (!v) return NULL;
    *v = *t;
    int64_t off;
    st_tensor *own = owner_of(t, &off);
    v->base = own;
    v->offset = off;
    int64_t s = v->shape[d0]; v->shape[d0] = v->shape[d1]; v->shape[d1] = s;
    s = v->stride[d0]; v->stride[d0] = v->stride[d1]; v->stride[d1] = s;
    v->grad = NULL;   /* a strided view has no contiguous grad; st_contiguous handles it */
    v->bf16 = NULL;   /* nor a bf16 copy in its element order */
    v->bf16_ver = NULL;
    return v;
}

float *st_grad(st_ctx *ctx, st_tensor *t) {
    if (t->grad) return t->grad;
    int64_t off;
    st_tensor *own = owner_of(t, &off);
    if (!own->grad) {
        own->grad = st_ctx_alloc(ctx, (size_t)st_numel(own) * sizeof(float), 1);
        if (!own->grad) return NULL;
        memset(own->grad, 0, (size_t)st_numel(own) * sizeof(float));
    }
    if (t != own) {
        /* Only a contiguous view may alias its owner's gradient buffer. */
        ST_ASSERT(st_is_contiguous(t));
        t->grad = own->grad + off;
    }
    return t->grad;
}

/* ---- contiguous copy of a strided view: out (contiguous) = x (strided) ----
 * backward: dx[strided index] += dout[linear index]. The strided grad lives in the
 * owner's buffer at the same strides. */
static void strided_walk(const st_tensor *x, float *strided, float *lin, int to_lin) {
    int64_t n0 = x->shape[0], n1 = x->ndim > 1 ? x->shape[1] : 1,
            n2 = x->ndim > 2 ? x->shape[2] : 1, n3 = x->ndim > 3 ? x->shape[3] : 1;
    int64_t s0 = x->stride[0], s1 = x->ndim > 1 ? x->stride[1] : 0,
            s2 = x->ndim > 2 ? x->stride[2] : 0, s3 = x->ndim > 3 ? x->stride[3] : 0;
    int64_t k = 0;
    for (int64_t a = 0; a < n0; a++)
        for (int64_t b = 0; b < n1; b++)
            for (int64_t c = 0; c < n2; c++)
                for (int64_t d = 0; d < n3; d++, k++) {
                    float *p = strided + a * s0 + b * s1 + c * s2 + d * s3;
                    if (to_lin) lin[k] = *p;
                    else *p += lin[k];
                }
}

static void contiguous_backward(st_ctx *ctx, st_node *n) {
    st_tensor *x = n->in[0], *out = n->out;
    int64_t off;
    st_tensor *own = owner_of(x, &off);
    /* grad buffer of the owner (contiguous), then walk with x's strides from x's offset */
    float *g = st_grad(ctx, own);
    if (!g) return;
    strided_walk(x, g + off, out->grad, 0);
}

st_tensor *st_contiguous(st_ctx *ctx, st_tensor *x) {
    if (!x) return NULL;
    if (st_is_contiguous(x)) return x;
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    strided_walk(x, x->data, out->data, 1);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL))
        st_record(ctx, "contiguous", contiguous_backward, out, x, NULL, NULL, NULL, NULL);
    return out;
}
