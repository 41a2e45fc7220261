/* test_attention_util.h - helpers shared by tests/test_attention*.c: q, k, v (and a
 * distance table) as differentiable leaves, a context on its own arena, a weighted-sum
 * loss op and the gradcheck case for st_attention. Everything is static (each test is its
 * own executable). */
#ifndef ST_TEST_ATTENTION_UTIL_H
#define ST_TEST_ATTENTION_UTIL_H

#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* q, k, v (B,H,T,D) and a bias table (H, 2T-1) as parameters (leaves with gradients). */
typedef struct qkv {
    st_params p;
    st_tensor *q, *k, *v, *w;
    int64_t B, H, T, D;
} qkv;

static void qkv_init(qkv *s, int64_t B, int64_t H, int64_t T, int64_t D, uint64_t seed, float wstd) {
    st_error e = {0};
    int64_t shp[4] = {B, H, T, D}, wshp[2] = {H, 2 * T - 1};
    st_params_init(&s->p);
    st_params_add(&s->p, "q", 4, shp, 0, ST_INIT_NORMAL, 1.0f);
    st_params_add(&s->p, "k", 4, shp, 0, ST_INIT_NORMAL, 1.0f);
    st_params_add(&s->p, "v", 4, shp, 0, ST_INIT_NORMAL, 1.0f);
    st_params_add(&s->p, "bias_table", 2, wshp, 0, ST_INIT_NORMAL, wstd);
    ST_ASSERT(st_params_finalize(&s->p, &e) == ST_OK);
    st_rng rng;
    st_rng_seed(&rng, seed);
    st_params_init_values(&s->p, &rng);
    s->q = st_param(&s->p, 0); s->k = st_param(&s->p, 1);
    s->v = st_param(&s->p, 2); s->w = st_param(&s->p, 3);
    s->B = B; s->H = H; s->T = T; s->D = D;
}

/* A learnable distance-form bias: bias(h, d) = w[h, d + tmax - 1], w (H, 2 tmax - 1) a
 * parameter (qkv.w); grad accumulates into the parameter's gradient. */
typedef struct table_bias {
    st_tensor *w;          /* (H, 2*tmax-1) */
    int64_t tmax;
} table_bias;

static inline void table_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const table_bias *t = self->state;
    const int64_t len = 2 * t->tmax - 1;
    for (int64_t k = 0; k < n; k++) out[k] = t->w->data[h * len + d0 + k + t->tmax - 1];
}

static inline void table_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    const table_bias *t = self->state;
    const int64_t len = 2 * t->tmax - 1;
    for (int64_t k = 0; k < n; k++) t->w->grad[h * len + d0 + k + t->tmax - 1] += g[k];
}

static inline st_attn_bias make_table(table_bias *t) {
    st_attn_bias b = {.fill = table_fill, .grad = table_grad, .state = t};
    return b;
}

typedef struct env { st_arena arena; st_ctx ctx; } env;

static void env_init(env *v) {
    st_error e = {0};
    ST_ASSERT(st_arena_init(&v->arena, 1 << 20, (size_t)4 << 30, &e) == ST_OK);
    ST_ASSERT(st_ctx_init(&v->ctx, &v->arena, 256, &e) == ST_OK);
}

static void env_free(env *v) { st_ctx_free(&v->ctx); st_arena_free(&v->arena); }

/* loss = sum_i r_i x_i as a tape op, so st_backward seeds out.grad = r */
typedef struct { const float *r; int64_t n; } wsum_saved;

static void wsum_backward(st_ctx *ctx, st_node *nd) {
    const wsum_saved *s = nd->saved;
    float *gx = st_grad(ctx, nd->in[0]);
    for (int64_t i = 0; i < s->n; i++) gx[i] += nd->out->grad[0] * s->r[i];
}

static st_tensor *wsum(st_ctx *ctx, st_tensor *x, const float *r) {
    if (!x) return NULL;
    int64_t one = 1, n = st_numel(x);
    st_tensor *out = st_new(ctx, 1, &one);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)r[i] * x->data[i];
    out->data[0] = (float)acc;
    wsum_saved *s = st_ctx_alloc(ctx, sizeof *s, 1);
    s->r = r; s->n = n;
    st_record(ctx, "wsum", wsum_backward, out, x, NULL, NULL, NULL, s);
    return out;
}

static inline int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) if (!isfinite(x[i])) return 0;
    return 1;
}

/* ------------------------------------------------------------- gradcheck ---- */
typedef struct gc_case {
    qkv *s;
    const st_attn_bias *bias;
    int causal;
    float scale, p;
} gc_case;

static inline st_tensor *gc_build(st_ctx *ctx, void *user) {
    gc_case *c = user;
    return st_attention(ctx, c->s->q, c->s->k, c->s->v, c->bias, c->causal, c->scale, c->p, 77);
}

/* max |a - b| over max |b| (a NaN difference makes it NaN) */
static inline double rel_err(const float *a, const float *b, int64_t n) {
    double d = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        const double x = fabs((double)a[i] - (double)b[i]);
        d = x > d || isnan(x) ? x : d;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return d / m;
}

/* The last Tq query rows of q (B,H,T,D) as a (B,H,Tq,D) tensor of ctx: the new queries of
 * a KV cache, or the scored tail of a forward. */
static inline st_tensor *last_rows(st_ctx *ctx, const float *q, int64_t B, int64_t H, int64_t T, int64_t Tq,
                                   int64_t D) {
    st_tensor *qt = st_new4(ctx, B, H, Tq, D);
    for (int64_t bh = 0; bh < B * H; bh++)
        memcpy(qt->data + bh * Tq * D, q + (bh * T + T - Tq) * D, (size_t)(Tq * D) * sizeof(float));
    return qt;
}
/* The worst rel_err over the BH pairs of o (Tq rows each) against the last Tq rows of the
 * T-row reference. */
static inline double tail_err(const float *o, const float *ref, int64_t BH, int64_t T, int64_t Tq, int64_t D) {
    double err = 0;
    for (int64_t bh = 0; bh < BH; bh++) {
        const double x = rel_err(o + bh * Tq * D, ref + (bh * T + T - Tq) * D, Tq * D);
        err = x > err || isnan(x) ? x : err;
    }
    return err;
}

/* Two backward passes of L = sum r_x out_x, out = build(ctx, user), each from zeroed
 * gradients of p1 and p2 (NULL: none): 1 when both give bit-identical gradients. The
 * second pass's gradients are left in place. */
static inline int same_grads_twice(gc_build_fn build, void *user, st_params *p1, st_params *p2, const float *r) {
    const size_t n1 = (size_t)p1->n, n2 = p2 ? (size_t)p2->n : 0;
    float *g1 = malloc((n1 + n2 + 1) * sizeof(float));
    int same = 1;
    ST_ASSERT(g1);
    for (int run = 0; run < 2; run++) {
        st_params_zero_grad(p1);
        if (p2) st_params_zero_grad(p2);
        env E;
        env_init(&E);
        st_ctx_begin(&E.ctx, 1, 0);
        st_error e = {0};
        st_tensor *loss = wsum(&E.ctx, build(&E.ctx, user), r);
        ST_ASSERT(loss && st_backward(&E.ctx, loss, 1.0f, &e) == ST_OK);
        env_free(&E);
        if (!run) {
            memcpy(g1, p1->grad, n1 * sizeof(float));
            if (n2) memcpy(g1 + n1, p2->grad, n2 * sizeof(float));
        } else {
            same = memcmp(g1, p1->grad, n1 * sizeof(float)) == 0 && (!n2 || memcmp(g1 + n1, p2->grad, n2 * sizeof(float)) == 0);
        }
    }
    free(g1);
    return same;
}

#endif
