/* heads.c - moving between the token layout (B,T,C) and the head layout (B,H,T,D), C = H*D:
 *   split_heads:  y[b,h,t,d] = x[b,t,h*D+d]          merge_heads is the inverse
 *   split_qkv:    q[b,h,t,d] = qkv[b,t,     h*D+d]
 *                 k[b,h,t,d] = qkv[b,t,   C+h*D+d]
 *                 v[b,h,t,d] = qkv[b,t, 2*C+h*D+d]
 *                 (grouped-query: Hkv key/value heads, st_split_qkv_gqa)
 *   repeat_heads: y[b,h,t,d] = x[b,h/g,t,d]         (K/V heads shared by g query heads)
 * All are permuting copies; the backward of each is the opposite copy, accumulated (or
 * written, when it is the input's first gradient: ops_grad_out).
 *
 * split_qkv is one node with three outputs. q, k and v are contiguous views into one
 * owner tensor (B,H+2Hkv,T,D); the node is recorded on q. The first st_grad() on any of the
 * three allocates the owner's gradient, which st_backward() sees through q->base, so the
 * node runs whichever of q, k, v received a gradient (the others read as zeros). */
#include "ops_internal.h"

/* The one copy kernel. heads (B,H,T,D); tok rows of length ld with the head block at
 * column col0 (so tok element (b,t,col0+h*D+d)).
 *   to_heads: heads (=|+=) tok      else: tok (=|+=) heads
 * Threads split the (b,t) rows, so each output element has one writer.
 * tokh (tok written, not accumulated; else NULL): tok's bf16 copy, each token row's H*D
 * values rounded once the row is complete (merge_heads feeding a bf16 linear). */
static void heads_copy(float *heads, float *tok, uint16_t *tokh, int64_t B, int64_t H, int64_t T, int64_t D,
                       int64_t ld, int64_t col0, int to_heads, int accumulate) {
    #pragma omp parallel for collapse(2) schedule(static) if (B * T * H * D > OPS_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            for (int64_t h = 0; h < H; h++) {
                float *restrict hp = heads + ((b * H + h) * T + t) * D;
                float *restrict tp = tok + (b * T + t) * ld + col0 + h * D;
                if (to_heads && accumulate) for (int64_t d = 0; d < D; d++) hp[d] += tp[d];
                else if (to_heads)          for (int64_t d = 0; d < D; d++) hp[d] = tp[d];
                else if (accumulate)        for (int64_t d = 0; d < D; d++) tp[d] += hp[d];
                else                        for (int64_t d = 0; d < D; d++) tp[d] = hp[d];
            }
            if (tokh) ops_round_row(tokh + (b * T + t) * ld + col0, tok + (b * T + t) * ld + col0, H * D);
        }
}

/* ------------------------------------------------------- split / merge ---- */
static void split_heads_backward(st_ctx *ctx, st_node *n) {
    st_tensor *x = n->in[0], *y = n->out;
    int fresh;
    float *dx = ops_grad_out(ctx, x, &fresh);
    if (!dx) return;
    heads_copy(y->grad, dx, NULL, y->shape[0], y->shape[1], y->shape[2], y->shape[3], x->shape[2], 0, 0, !fresh);
}

st_tensor *st_split_heads(st_ctx *ctx, st_tensor *x, int H) {
    if (!x) return NULL;
    ST_ASSERT(x->ndim == 3 && st_is_contiguous(x) && H > 0 && x->shape[2] % H == 0);
    int64_t B = x->shape[0], T = x->shape[1], C = x->shape[2], D = C / H;
    st_tensor *out = st_new4(ctx, B, H, T, D);
    if (!out) return NULL;
    heads_copy(out->data, x->data, NULL, B, H, T, D, C, 0, 1, 0);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL) &&
        !st_record(ctx, "split_heads", split_heads_backward, out, x, NULL, NULL, NULL, NULL))
        return NULL;
    return out;
}

static void merge_heads_backward(st_ctx *ctx, st_node *n) {
    st_tensor *x = n->in[0];
    int fresh;
    float *dx = ops_grad_out(ctx, x, &fresh);
    if (!dx) return;
    heads_copy(dx, n->out->grad, NULL, x->shape[0], x->shape[1], x->shape[2], x->shape[3],
               x->shape[1] * x->shape[3], 0, 1, !fresh);
}

st_tensor *st_merge_heads(st_ctx *ctx, st_tensor *x) {
    if (!x) return NULL;
    ST_ASSERT(x->ndim == 4 && st_is_contiguous(x));
    int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    st_tensor *out = st_new3(ctx, B, T, H * D);
    if (!out) return NULL;
    int fail;
    uint16_t *outh = ops_bf16_out(ctx, out, &fail);   /* the output projection's input */
    if (fail) return NULL;
    heads_copy(x->data, out->data, outh, B, H, T, D, H * D, 0, 0, 0);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL) &&
        !st_record(ctx, "merge_heads", merge_heads_backward, out, x, NULL, NULL, NULL, NULL))
        return NULL;
    return out;
}

/* ------------------------------------------------------------ split_qkv ---- */
/* Grouped-query attention: Hkv <= H key/value heads, qkv rows (H + 2 Hkv) D wide: q at
 * columns 0.., k at H D.., v at (H + Hkv) D.. (Hkv = H: the three equal thirds). The
 * owner holds q (B,H,T,D), then k and v (B,Hkv,T,D) each. */
typedef struct split_saved { int64_t Hkv; } split_saved;

static void split_qkv_backward(st_ctx *ctx, st_node *n) {
    st_tensor *qkv = n->in[0], *q = n->out;
    const split_saved *sv = n->saved;
    int fresh;
    float *dqkv = ops_grad_out(ctx, qkv, &fresh);
    if (!dqkv) return;
    /* the owner's gradient holds dq, dk, dv back to back (zeros where none arrived) */
    float *g = q->base->grad;
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3], Hkv = sv->Hkv;
    const int64_t ld = (H + 2 * Hkv) * D, pq = B * H * T * D, pkv = B * Hkv * T * D;
    /* the three copies together cover every column of dqkv: a fresh buffer is written */
    heads_copy(g, dqkv, NULL, B, H, T, D, ld, 0, 0, !fresh);
    heads_copy(g + pq, dqkv, NULL, B, Hkv, T, D, ld, H * D, 0, !fresh);
    heads_copy(g + pq + pkv, dqkv, NULL, B, Hkv, T, D, ld, (H + Hkv) * D, 0, !fresh);
}

/* A contiguous (B,H,T,D) view of owner at element offset off. */
static st_tensor *owner_slice(st_ctx *ctx, st_tensor *owner, int64_t off, const int64_t *shape) {
    st_tensor *t = st_wrap(ctx, owner->data + off, 4, shape);
    if (!t) return NULL;
    t->base = owner;
    t->offset = off;
    return t;
}

int st_split_qkv(st_ctx *ctx, st_tensor *qkv, int H, st_tensor **q, st_tensor **k, st_tensor **v) {
    return st_split_qkv_gqa(ctx, qkv, H, H, q, k, v);
}

int st_split_qkv_gqa(st_ctx *ctx, st_tensor *qkv, int H, int Hkv, st_tensor **q, st_tensor **k, st_tensor **v) {
    *q = *k = *v = NULL;
    if (!qkv) return 0;
    ST_ASSERT(qkv->ndim == 3 && st_is_contiguous(qkv) && H > 0 && Hkv > 0 && Hkv <= H &&
              qkv->shape[2] % (H + 2 * Hkv) == 0);
    const int64_t B = qkv->shape[0], T = qkv->shape[1], ld = qkv->shape[2], D = ld / (H + 2 * Hkv);
    const int64_t pq = B * H * T * D, pkv = B * Hkv * T * D;
    st_tensor *owner = st_new4(ctx, B, H + 2 * Hkv, T, D);   /* numel pq + 2 pkv */
    if (!owner) return 0;
    const int64_t sq[4] = {B, H, T, D}, skv[4] = {B, Hkv, T, D};
    st_tensor *tq = owner_slice(ctx, owner, 0, sq);
    st_tensor *tk = owner_slice(ctx, owner, pq, skv);
    st_tensor *tv = owner_slice(ctx, owner, pq + pkv, skv);
    if (!tq || !tk || !tv) return 0;
    heads_copy(owner->data, qkv->data, NULL, B, H, T, D, ld, 0, 1, 0);
    heads_copy(owner->data + pq, qkv->data, NULL, B, Hkv, T, D, ld, H * D, 1, 0);
    heads_copy(owner->data + pq + pkv, qkv->data, NULL, B, Hkv, T, D, ld, (H + Hkv) * D, 1, 0);
    if (st_needs_grad(ctx, qkv, NULL, NULL, NULL)) {
        split_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return 0;
        sv->Hkv = Hkv;
        if (!st_record(ctx, "split_qkv", split_qkv_backward, tq, qkv, NULL, NULL, NULL, sv)) return 0;
        owner->requires_grad = tk->requires_grad = tv->requires_grad = 1;
    }
    *q = tq; *k = tk; *v = tv;
    return 1;
}

/* ---------------------------------------------------------- repeat_heads ---- */
/* y (B,H*g,T,D): head h of y is head h / g of x (B,H,T,D), the key/value heads of
 * grouped-query attention shared by g query heads each. Backward: dx[h] += the sum of
 * the g heads' gradients, in head order (deterministic). */
static void repeat_heads_backward(st_ctx *ctx, st_node *n) {
    st_tensor *x = n->in[0];
    int fresh;
    float *dx = ops_grad_out(ctx, x, &fresh);
    if (!dx) return;
    const int64_t B = x->shape[0], H = x->shape[1], TD = x->shape[2] * x->shape[3], g = n->out->shape[1] / H;
    const float *dy = n->out->grad;
    #pragma omp parallel for collapse(2) schedule(static) if (B * H * TD * g > OPS_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *restrict d = dx + (b * H + h) * TD;
            for (int64_t j = 0; j < g; j++) {
                const float *restrict s = dy + ((b * H + h) * g + j) * TD;
                if (j == 0 && fresh) for (int64_t i = 0; i < TD; i++) d[i] = s[i];
                else for (int64_t i = 0; i < TD; i++) d[i] += s[i];
            }
        }
}

st_tensor *st_repeat_heads(st_ctx *ctx, st_tensor *x, int g) {
    if (!x || g == 1) return x;
    ST_ASSERT(x->ndim == 4 && st_is_contiguous(x) && g > 1);
    const int64_t B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3], TD = T * D;
    st_tensor *out = st_new4(ctx, B, H * g, T, D);
    if (!out) return NULL;
    #pragma omp parallel for collapse(2) schedule(static) if (B * H * TD * g > OPS_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < g; j++)
                memcpy(out->data + ((b * H + h) * g + j) * TD, x->data + (b * H + h) * TD, (size_t)TD * sizeof(float));
    if (st_needs_grad(ctx, x, NULL, NULL, NULL) &&
        !st_record(ctx, "repeat_heads", repeat_heads_backward, out, x, NULL, NULL, NULL, NULL))
        return NULL;
    return out;
}
