/* test_ops_shape.c - dropout, split/merge heads, split_qkv, rope, head_scale, FoX's
 * log_gate_cumsum, sum, mean: forward
 * values against reference loops, finite-difference gradient checks, dropout's mask
 * (hash reference, keep rate, identical with 1 and 2 threads, identity when off), the
 * one-node-three-outputs split_qkv fed through q, k or v alone, and accumulation.
 * Tolerances as in test_ops.c (gradcheck eps 1e-2, atol 2e-4, rtol 2e-3). */
#include "test_ops_util.h"

#include <omp.h>

/* ------------------------------------------------------------- dropout ---- */
static st_tensor *build_dropout(st_ctx *ctx, void *u) {
    args *a = u;
    return st_dropout(ctx, a->a, a->f0, a->u0);
}

static void test_dropout(void) {
    const float p = 0.3f;
    const uint64_t seed = 1234;
    const int64_t n = 100000;   /* > OPS_PAR_MIN: the parallel path */
    const int64_t spec[1][5] = {{1, n}};
    leaves L;
    leaves_init(&L, 15, 1, spec, 1.0f);
    st_tensor *x = L.t[0];
    float *y1 = malloc((size_t)n * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        env e;
        st_ctx *ctx = env_open(&e, 1, 1);
        st_tensor *y = st_dropout(ctx, x, p, seed);
        if (threads == 1) {
            int64_t kept = 0;
            int exact = 1;
            for (int64_t i = 0; i < n; i++) {
                int keep = st_hash_uniform(seed, (uint64_t)i) >= p;
                kept += keep;
                exact &= y->data[i] == (keep ? x->data[i] * (1.0f / (1.0f - p)) : 0.0f);
            }
            CHECK_MSG(exact, "dropout output differs from the hash mask reference");
            /* keep rate 0.7 +- 0.01 (7 standard deviations at n = 1e5) */
            CHECK_NEAR((double)kept / (double)n, 1.0 - p, 0.01);
            memcpy(y1, y->data, (size_t)n * sizeof(float));
            /* another seed gives another mask */
            st_tensor *z = st_dropout(ctx, x, p, seed + 1);
            CHECK(memcmp(z->data, y->data, (size_t)n * sizeof(float)) != 0);
        } else {
            CHECK_MSG(memcmp(y1, y->data, (size_t)n * sizeof(float)) == 0,
                      "dropout mask differs between 1 and 2 threads");
        }
        /* identity without a node when p == 0 or in eval mode */
        int nodes = ctx->n_nodes;
        CHECK(st_dropout(ctx, x, 0.0f, seed) == x && ctx->n_nodes == nodes);
        ctx->train = 0;
        CHECK(st_dropout(ctx, x, p, seed) == x && ctx->n_nodes == nodes);
        env_close(&e);
    }
    omp_set_num_threads(2);
    free(y1);
    st_params_free(&L.p);

    const int64_t spec2[1][5] = {{2, 6, 7}};
    leaves_init(&L, 16, 1, spec2, 1.0f);
    args a = {.a = L.t[0], .f0 = p, .u0 = seed};
    gradcheck("dropout p0.3 train", build_dropout, &a, L.t, 1, 1, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);
}

/* --------------------------------------------------------------- heads ---- */
static st_tensor *build_split(st_ctx *ctx, void *u) { args *a = u; return st_split_heads(ctx, a->a, a->i0); }
static st_tensor *build_merge(st_ctx *ctx, void *u) { args *a = u; return st_merge_heads(ctx, a->a); }

/* i0 selects the output fed to the loss: 0 q, 1 k, 2 v, 3 q + 2k + 3v */
static st_tensor *build_qkv(st_ctx *ctx, void *u) {
    args *a = u;
    st_tensor *q, *k, *v;
    if (!st_split_qkv(ctx, a->a, (int)a->n0, &q, &k, &v)) return NULL;
    if (a->i0 < 3) return a->i0 == 0 ? q : a->i0 == 1 ? k : v;
    return st_add(ctx, st_add(ctx, q, st_scale(ctx, k, 2.0f)), st_scale(ctx, v, 3.0f));
}

static void test_heads(void) {
    const int64_t B = 2, T = 3, H = 2, D = 4, C = H * D;
    const int64_t spec[3][5] = {{3, B, T, C}, {4, B, H, T, D}, {3, B, T, 3 * C}};
    leaves L;
    leaves_init(&L, 17, 3, spec, 1.0f);
    st_tensor *x = L.t[0], *xh = L.t[1], *qkv = L.t[2];
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *s = st_split_heads(ctx, x, (int)H), *m = st_merge_heads(ctx, xh);
    st_tensor *q, *k, *v;
    CHECK(st_split_qkv(ctx, qkv, (int)H, &q, &k, &v) == 1);
    int ok = s->ndim == 4 && s->shape[1] == H && s->shape[3] == D && m->ndim == 3 && m->shape[2] == C;
    ok &= st_is_contiguous(q) && st_is_contiguous(k) && st_is_contiguous(v) && q->shape[1] == H;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++) {
                    int64_t ih = ((b * H + h) * T + t) * D + d, it = (b * T + t) * C + h * D + d;
                    int64_t iq = (b * T + t) * 3 * C + h * D + d;
                    ok &= s->data[ih] == x->data[it] && m->data[it] == xh->data[ih];
                    ok &= q->data[ih] == qkv->data[iq] && k->data[ih] == qkv->data[iq + C] &&
                          v->data[ih] == qkv->data[iq + 2 * C];
                }
    CHECK_MSG(ok, "split/merge heads or split_qkv forward mismatch");
    st_tensor *back = st_merge_heads(ctx, st_split_heads(ctx, x, (int)H));
    CHECK(memcmp(back->data, x->data, (size_t)(B * T * C) * sizeof(float)) == 0);
    env_close(&e);
    args as = {.a = x, .i0 = (int)H}, am = {.a = xh};
    gradcheck("split_heads", build_split, &as, &L.t[0], 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("merge_heads", build_merge, &am, &L.t[1], 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    static const char *names[4] = {"split_qkv q only", "split_qkv k only", "split_qkv v only", "split_qkv q+2k+3v"};
    for (int i = 0; i < 4; i++) {
        args aq = {.a = qkv, .n0 = H, .i0 = i};
        gradcheck(names[i], build_qkv, &aq, &L.t[2], 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    }
    st_params_free(&L.p);
}

/* ---------------------------------------------------------------- rope ---- */
static st_tensor *build_rope(st_ctx *ctx, void *u) { args *a = u; return st_rope(ctx, a->a, a->f0, a->n0); }

static void test_rope(void) {
    const int64_t B = 2, H = 2, T = 5, D = 8;
    const int64_t spec[1][5] = {{4, B, H, T, D}};
    leaves L;
    leaves_init(&L, 18, 1, spec, 1.0f);
    st_tensor *x = L.t[0];
    const int64_t n = B * H * T * D;
    double *ref = malloc((size_t)n * sizeof(double));
    const int64_t pos0s[2] = {3, 100000};
    for (int pi = 0; pi < 2; pi++) {
        int64_t pos0 = pos0s[pi];
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < D / 2; i++) {
                    double a = (double)(pos0 + t) * pow(10000.0, -2.0 * (double)i / (double)D);
                    const float *xr = x->data + (bh * T + t) * D;
                    double *o = ref + (bh * T + t) * D;
                    o[i] = xr[i] * cos(a) - xr[i + D / 2] * sin(a);
                    o[i + D / 2] = xr[i + D / 2] * cos(a) + xr[i] * sin(a);
                }
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_rope(ctx, x, 10000.0f, pos0);
        /* cos/sin rounded to float, then two products: a few ulp */
        close_ref(pi ? "rope forward pos0=100000" : "rope forward pos0=3", y->data, ref, n, 1e-6, 1e-6);
        env_close(&e);
    }
    args a = {.a = x, .f0 = 10000.0f, .n0 = 7};
    gradcheck("rope", build_rope, &a, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    free(ref);
    st_params_free(&L.p);
}

/* ---------------------------------------------------------- head_scale ---- */
/* f_t = 0.5 + 0.3 t (a stand-in for log-n factors), s (H) learnable or absent */
static const float hs_f[5] = {0.5f, 0.8f, 1.1f, 1.4f, 1.7f};
static st_tensor *build_head_scale(st_ctx *ctx, void *u) { args *a = u; return st_head_scale(ctx, a->a, a->b, hs_f); }

static void test_head_scale(void) {
    const int64_t B = 2, H = 3, T = 5, D = 4;
    const int64_t spec[2][5] = {{4, B, H, T, D}, {1, H}};
    leaves L;
    leaves_init(&L, 19, 2, spec, 1.0f);
    st_tensor *x = L.t[0], *s = L.t[1];
    const int64_t n = B * H * T * D;
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < D; c++) {
                    const int64_t o = ((b * H + h) * T + t) * D + c;
                    ref[o] = (double)x->data[o] * (double)s->data[h] * (double)hs_f[t];
                }
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *y = st_head_scale(ctx, x, s, hs_f);
    close_ref("head_scale forward", y->data, ref, n, 1e-6, 1e-6);
    env_close(&e);
    args a = {.a = x, .b = s};
    gradcheck("head_scale x and s", build_head_scale, &a, L.t, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    check_accumulates("head_scale", build_head_scale, &a, L.t, 2, 0);
    args a0 = {.a = x, .b = NULL};
    gradcheck("head_scale x (s = 1)", build_head_scale, &a0, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    free(ref);
    st_params_free(&L.p);
}

/* ------------------------------------------------------ log_gate_cumsum ---- */
/* FoX's running log-gate sums: f (B,T,H) -> c (B,H,T) = cumsum_t log sigmoid(f), checked
 * against double sums, then by central differences (logits up to +-8: both tails of
 * log sigmoid) */
static st_tensor *build_log_gate(st_ctx *ctx, void *u) { args *a = u; return st_log_gate_cumsum(ctx, a->a); }

static void test_log_gate_cumsum(void) {
    const int64_t B = 2, T = 6, H = 3;
    const int64_t spec[1][5] = {{3, B, T, H}};
    leaves L;
    leaves_init(&L, 23, 1, spec, 1.0f);
    st_tensor *f = L.t[0];
    for (int64_t x = 0; x < B * T * H; x++) f->data[x] *= 4.0f;   /* logits of +-8 too */
    f->data[0] = 30.0f;    /* log sigmoid(30) = -9.4e-14: a gate of 1 to float precision */
    f->data[1] = -30.0f;   /* log sigmoid(-30) = -30 - 9.4e-14 */
    double *ref = malloc((size_t)(B * H * T) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            double acc = 0;
            for (int64_t t = 0; t < T; t++) {
                acc += -log1p(exp(-(double)f->data[(b * T + t) * H + h]));
                ref[(b * H + h) * T + t] = acc;
            }
        }
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *c = st_log_gate_cumsum(ctx, f);
    CHECK(c && c->ndim == 3 && c->shape[0] == B && c->shape[1] == H && c->shape[2] == T);
    close_ref("log_gate_cumsum forward", c->data, ref, B * H * T, 1e-6, 1e-6);
    env_close(&e);
    f->data[0] = 3.0f;     /* central differences need a slope float can see */
    f->data[1] = -3.0f;
    args a = {.a = f};
    gradcheck("log_gate_cumsum", build_log_gate, &a, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    check_accumulates("log_gate_cumsum", build_log_gate, &a, L.t, 1, 0);
    free(ref);
    st_params_free(&L.p);
}

/* ----------------------------------------------------------- sum / mean ---- */
static st_tensor *build_sum(st_ctx *ctx, void *u) { args *a = u; return a->i0 ? st_mean(ctx, a->a) : st_sum(ctx, a->a); }

static void test_reduce(void) {
    const int64_t n = 70001;   /* parallel, 18 blocks with a ragged last one */
    const int64_t spec[2][5] = {{1, n}, {2, 3, 5}};
    leaves L;
    leaves_init(&L, 19, 2, spec, 1.0f);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += L.t[0]->data[i];
    float v1[2] = {0, 0};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *a = st_sum(ctx, L.t[0]), *m = st_mean(ctx, L.t[0]);
        CHECK(a->ndim == 1 && a->shape[0] == 1);
        /* double accumulation: only the final rounding to float */
        CHECK_NEAR(a->data[0], s, 1e-6 * fabs(s) + 1e-6);
        CHECK_NEAR(m->data[0], s / (double)n, 1e-6 * fabs(s / (double)n) + 1e-9);
        if (threads == 1) { v1[0] = a->data[0]; v1[1] = m->data[0]; }
        else CHECK(v1[0] == a->data[0] && v1[1] == m->data[0]);
        env_close(&e);
    }
    omp_set_num_threads(2);
    args as = {.a = L.t[1], .i0 = 0}, am = {.a = L.t[1], .i0 = 1};
    gradcheck("sum", build_sum, &as, &L.t[1], 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("mean", build_sum, &am, &L.t[1], 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);
}

/* ------------------------------------------------------ accumulation ---- */
static void test_accumulation(void) {
    /* X (2,3,8), X4 (2,2,3,4), QKV (2,3,24) */
    const int64_t spec[3][5] = {{3, 2, 3, 8}, {4, 2, 2, 3, 4}, {3, 2, 3, 24}};
    leaves L;
    leaves_init(&L, 91, 3, spec, 1.0f);
    st_tensor *X = L.t[0], *X4 = L.t[1], *QKV = L.t[2];
    args a;
    a = (args){.a = X, .f0 = 0.3f, .u0 = 5};
    check_accumulates("dropout", build_dropout, &a, &X, 1, 1);
    a = (args){.a = X, .i0 = 2};
    check_accumulates("split_heads", build_split, &a, &X, 1, 0);
    a = (args){.a = X4};
    check_accumulates("merge_heads", build_merge, &a, &X4, 1, 0);
    a = (args){.a = QKV, .n0 = 2, .i0 = 3};
    check_accumulates("split_qkv", build_qkv, &a, &QKV, 1, 0);
    a = (args){.a = X4, .f0 = 10000.0f, .n0 = 2};
    check_accumulates("rope", build_rope, &a, &X4, 1, 0);
    a = (args){.a = X, .i0 = 0};
    check_accumulates("sum", build_sum, &a, &X, 1, 0);
    a = (args){.a = X, .i0 = 1};
    check_accumulates("mean", build_sum, &a, &X, 1, 0);
    st_params_free(&L.p);
}

int main(void) {
    omp_set_num_threads(2);
    test_dropout();
    test_heads();
    test_rope();
    test_head_scale();
    test_log_gate_cumsum();
    test_reduce();
    test_accumulation();
    return test_finish("test_ops_shape");
}
