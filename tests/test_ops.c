/* test_ops.c - linear, matmul, add, bias, scale, embedding, layernorm, gelu (tanh, erf):
 * forward values against double-precision reference loops, finite-difference gradient
 * checks, race-free and thread-count-independent parallel backwards (linear bias,
 * embedding scatter-add, layernorm dw/db) on shapes past the OpenMP threshold, and that
 * every backward accumulates into existing gradients. Also the vectorised exp/erfc/hash
 * helpers of src/ops/ops_internal.h. Shape ops, dropout and reductions are in
 * test_ops_shape.c; the losses and inference mode in test_ops_loss.c.
 *
 * Tolerances. Forward: |a - ref| <= atol + rtol |ref| with ref in double; atol/rtol are
 * given at each check (1e-6..1e-5: float rounding of a few operations, or of a K-term
 * sgemm dot product). gradcheck (test_ops_util.h): central differences in float with the
 * loss accumulated in double, eps 1e-2 (ops linear in the checked input have no
 * truncation error, roundoff ~ 1e-7 |L| / eps; smooth ones ~ eps^2 |f'''| / 6); pass when
 * |analytic - numeric| <= 2e-4 + 2e-3 max(|analytic|, |numeric|). The printed
 * "worst |err|/tol" shows the margin (below 0.1 for every op today). */
#include "test_ops_util.h"
#include "ops/ops_internal.h"

#include <omp.h>

/* ------------------------------------------------------ exp / erfc / hash ---- */
static void test_helpers(void) {
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        double r = exp((double)x), e = fabs(ops_expf(x) - r) / r;
        TH_MAX(worst, e);
    }
    /* < 2 ulp (2^-23 = 1.19e-7) over the whole range */
    CHECK_MSG(worst < 2.4e-7, "ops_expf max rel err %.3g", worst);
    CHECK(ops_expf(-100.0f) == 0.0f && ops_expf(0.0f) == 1.0f && isnan(ops_expf(NAN)));
    /* relative error, in the deep tail too (erfc(9) = 4e-37); it grows like z^2 6e-8
     * (bounds leave room for builds without FMA contraction: 2.1e-6 and 7.7e-6 there) */
    double worst5 = 0, worst9 = 0;
    for (int i = 0; i <= 200000; i++) {
        float z = 9.0f * (float)i / 200000.0f;
        double r = erfc((double)z), e = fabs(ops_erfc_pos(z) - r) / r;
        if (z <= 5.0f && e > worst5) worst5 = e;
        if (e > worst9) worst9 = e;
    }
    CHECK_MSG(worst5 < 3e-6, "ops_erfc_pos max rel err on [0,5] %.3g", worst5);
    CHECK_MSG(worst9 < 1.2e-5, "ops_erfc_pos max rel err on [0,9] %.3g", worst9);
    int same = 1;
    for (uint64_t i = 0; i < 100000; i++) same &= ops_hash_uniform(99, i * 7919) == st_hash_uniform(99, i * 7919);
    CHECK_MSG(same, "ops_hash_uniform differs from st_hash_uniform");
}

/* -------------------------------------------------------------- linear ---- */
static st_tensor *build_linear(st_ctx *ctx, void *u) {
    args *a = u;
    return st_linear(ctx, a->a, a->b, a->c);
}

static void test_linear(void) {
    const int64_t spec[3][5] = {{3, 2, 3, 5}, {2, 4, 5}, {1, 4}};   /* x (2,3,5), W (4,5), b (4) */
    leaves L;
    leaves_init(&L, 1, 3, spec, 1.0f);
    st_tensor *x = L.t[0], *w = L.t[1], *b = L.t[2];
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    for (int bias = 0; bias < 2; bias++) {
        st_tensor *y = st_linear(ctx, x, w, bias ? b : NULL);
        CHECK(y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 4);
        double ref[24];
        for (int r = 0; r < 6; r++)
            for (int o = 0; o < 4; o++) {
                double s = bias ? b->data[o] : 0.0;
                for (int i = 0; i < 5; i++) s += (double)x->data[r * 5 + i] * w->data[o * 5 + i];
                ref[r * 4 + o] = s;
            }
        close_ref(bias ? "linear+bias forward" : "linear forward", y->data, ref, 24, 1e-5, 1e-5);
    }
    env_close(&e);
    st_tensor *lv3[3] = {x, w, b};
    args a1 = {.a = x, .b = w, .c = b}, a0 = {.a = x, .b = w};
    gradcheck("linear bias", build_linear, &a1, lv3, 3, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("linear nobias", build_linear, &a0, lv3, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);
}

/* bias gradient on a shape large enough for the parallel column sums, both thread counts */
static void test_linear_large_backward(void) {
    const int64_t N = 300, IN = 24, OUT = 130;   /* N*OUT = 39000 > OPS_PAR_MIN */
    const int64_t spec[3][5] = {{2, N, IN}, {2, OUT, IN}, {1, OUT}};
    leaves L;
    leaves_init(&L, 2, 3, spec, 1.0f);
    float *dy = malloc((size_t)(N * OUT) * sizeof(float));
    fill_normal(dy, N * OUT, 3, 1.0f, 0.0f);
    double *rdx = calloc((size_t)(N * IN), sizeof(double)), *rdw = calloc((size_t)(OUT * IN), sizeof(double));
    double *rdb = calloc((size_t)OUT, sizeof(double));
    for (int64_t r = 0; r < N; r++)
        for (int64_t o = 0; o < OUT; o++) {
            double g = dy[r * OUT + o];
            rdb[o] += g;
            for (int64_t i = 0; i < IN; i++) {
                rdx[r * IN + i] += g * L.t[1]->data[o * IN + i];
                rdw[o * IN + i] += g * L.t[0]->data[r * IN + i];
            }
        }
    float *db1 = malloc((size_t)OUT * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        st_params_zero_grad(&L.p);
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_linear(ctx, L.t[0], L.t[1], L.t[2]);
        backward_from(ctx, y, dy);
        if (threads == 1) {
            /* sums of up to 300 products: float sgemm vs double */
            close_ref("linear large dx", L.t[0]->grad, rdx, N * IN, 1e-4, 1e-4);
            close_ref("linear large dW", L.t[1]->grad, rdw, OUT * IN, 1e-4, 1e-4);
            close_ref("linear large db", L.t[2]->grad, rdb, OUT, 1e-5, 1e-5);
            memcpy(db1, L.t[2]->grad, (size_t)OUT * sizeof(float));
        } else {
            CHECK_MSG(memcmp(db1, L.t[2]->grad, (size_t)OUT * sizeof(float)) == 0,
                      "linear db differs between 1 and 2 threads");
        }
        env_close(&e);
    }
    omp_set_num_threads(2);
    free(dy); free(rdx); free(rdw); free(rdb); free(db1);
    st_params_free(&L.p);
}

/* -------------------------------------------------------------- matmul ---- */
static st_tensor *build_matmul(st_ctx *ctx, void *u) {
    args *a = u;
    return st_matmul(ctx, a->a, a->b);
}

static void test_matmul(void) {
    /* batched (2,3,4)@(2,4,5), and a shared right matrix (2,3,4)@(4,5) */
    const int64_t spec[3][5] = {{3, 2, 3, 4}, {3, 2, 4, 5}, {2, 4, 5}};
    leaves L;
    leaves_init(&L, 4, 3, spec, 1.0f);
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    for (int shared = 0; shared < 2; shared++) {
        st_tensor *bm = shared ? L.t[2] : L.t[1];
        st_tensor *c = st_matmul(ctx, L.t[0], bm);
        CHECK(c && c->ndim == 3 && c->shape[0] == 2 && c->shape[1] == 3 && c->shape[2] == 5);
        double ref[30];
        for (int bt = 0; bt < 2; bt++)
            for (int m = 0; m < 3; m++)
                for (int n = 0; n < 5; n++) {
                    double s = 0;
                    for (int k = 0; k < 4; k++)
                        s += (double)L.t[0]->data[bt * 12 + m * 4 + k] * bm->data[(shared ? 0 : bt * 20) + k * 5 + n];
                    ref[bt * 15 + m * 5 + n] = s;
                }
        close_ref(shared ? "matmul shared forward" : "matmul batched forward", c->data, ref, 30, 1e-5, 1e-5);
    }
    env_close(&e);
    st_tensor *l01[2] = {L.t[0], L.t[1]}, *l02[2] = {L.t[0], L.t[2]};
    args a1 = {.a = L.t[0], .b = L.t[1]}, a2 = {.a = L.t[0], .b = L.t[2]};
    gradcheck("matmul batched", build_matmul, &a1, l01, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("matmul shared", build_matmul, &a2, l02, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);
}

/* ------------------------------------------------- add / bias / scale ---- */
static st_tensor *build_add(st_ctx *ctx, void *u) { args *a = u; return st_add(ctx, a->a, a->b); }
static st_tensor *build_bias(st_ctx *ctx, void *u) { args *a = u; return st_bias(ctx, a->a, a->b); }
static st_tensor *build_scale(st_ctx *ctx, void *u) { args *a = u; return st_scale(ctx, a->a, a->f0); }

static void test_elementwise(void) {
    const int64_t spec[3][5] = {{3, 2, 3, 4}, {3, 2, 3, 4}, {1, 4}};
    leaves L;
    leaves_init(&L, 5, 3, spec, 1.0f);
    st_tensor *x = L.t[0], *y = L.t[1], *b = L.t[2];
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *s = st_add(ctx, x, y), *sb = st_bias(ctx, x, b), *sc = st_scale(ctx, x, -1.75f);
    double r1[24], r2[24], r3[24];
    for (int i = 0; i < 24; i++) {
        r1[i] = (double)x->data[i] + y->data[i];
        r2[i] = (double)x->data[i] + b->data[i % 4];
        r3[i] = -1.75 * x->data[i];
    }
    close_ref("add forward", s->data, r1, 24, 1e-6, 1e-6);
    close_ref("bias forward", sb->data, r2, 24, 1e-6, 1e-6);
    close_ref("scale forward", sc->data, r3, 24, 1e-6, 1e-6);
    /* a + a: both inputs are the same tensor, its gradient gets dy twice */
    st_params_zero_grad(&L.p);
    float dy[24];
    fill_normal(dy, 24, 6, 1.0f, 0.0f);
    st_tensor *xx = st_add(ctx, x, x);
    backward_from(ctx, xx, dy);
    double r4[24];
    for (int i = 0; i < 24; i++) r4[i] = 2.0 * dy[i];
    close_ref("add(x,x) backward", x->grad, r4, 24, 0, 1e-7);
    env_close(&e);

    st_tensor *lv[2] = {x, y}, *lb[2] = {x, b};
    args aa = {.a = x, .b = y}, ab = {.a = x, .b = b}, as = {.a = x, .f0 = -1.75f};
    gradcheck("add", build_add, &aa, lv, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("bias", build_bias, &ab, lb, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("scale", build_scale, &as, lv, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);
}

/* ----------------------------------------------------------- embedding ---- */
static st_tensor *build_embedding(st_ctx *ctx, void *u) {
    args *a = u;
    return st_embedding(ctx, a->ids, a->n0, a->n1, a->a);
}

static void test_embedding(void) {
    const int64_t spec[1][5] = {{2, 7, 6}};
    leaves L;
    leaves_init(&L, 7, 1, spec, 1.0f);
    st_tensor *tab = L.t[0];
    const int32_t ids[10] = {3, 1, 3, 6, 0, 3, 1, 1, 5, 3};   /* repeats: 3 x4, 1 x3 */
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *y = st_embedding(ctx, ids, 2, 5, tab);
    CHECK(y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 6);
    int same = 1;
    for (int i = 0; i < 10; i++) same &= memcmp(y->data + i * 6, tab->data + ids[i] * 6, 6 * sizeof(float)) == 0;
    CHECK_MSG(same, "embedding forward is not an exact row copy");
    env_close(&e);
    args a = {.a = tab, .ids = ids, .n0 = 2, .n1 = 5};
    gradcheck("embedding repeated ids", build_embedding, &a, &tab, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);

    /* parallel scatter-add: many repeats of few ids, against double sums, and identical
     * bits with 1 and 2 threads */
    const int64_t B = 4, T = 64, V = 9, C = 200;   /* B*T*C = 51200 > OPS_PAR_MIN */
    const int64_t spec2[1][5] = {{2, V, C}};
    leaves_init(&L, 8, 1, spec2, 1.0f);
    int32_t *id2 = malloc((size_t)(B * T) * sizeof(int32_t));
    st_rng rng;
    st_rng_seed(&rng, 9);
    for (int64_t i = 0; i < B * T; i++) id2[i] = (int32_t)st_rng_below(&rng, (uint64_t)V);
    float *dy = malloc((size_t)(B * T * C) * sizeof(float)), *g1 = malloc((size_t)(V * C) * sizeof(float));
    fill_normal(dy, B * T * C, 10, 1.0f, 0.0f);
    double *ref = calloc((size_t)(V * C), sizeof(double));
    for (int64_t i = 0; i < B * T; i++)
        for (int64_t c = 0; c < C; c++) ref[id2[i] * C + c] += dy[i * C + c];
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        st_params_zero_grad(&L.p);
        ctx = env_open(&e, 1, 0);
        backward_from(ctx, st_embedding(ctx, id2, B, T, L.t[0]), dy);
        if (threads == 1) {
            close_ref("embedding large backward", L.t[0]->grad, ref, V * C, 1e-5, 1e-5);
            memcpy(g1, L.t[0]->grad, (size_t)(V * C) * sizeof(float));
        } else {
            CHECK_MSG(memcmp(g1, L.t[0]->grad, (size_t)(V * C) * sizeof(float)) == 0,
                      "embedding backward differs between 1 and 2 threads");
        }
        env_close(&e);
    }
    omp_set_num_threads(2);
    free(id2); free(dy); free(g1); free(ref);
    st_params_free(&L.p);
}

/* ----------------------------------------------------------- layernorm ---- */
static st_tensor *build_layernorm(st_ctx *ctx, void *u) {
    args *a = u;
    return st_layernorm(ctx, a->a, a->b, a->c, 1e-5f);
}

static void layernorm_ref(double *out, const float *x, const float *w, const float *b, int64_t N, int64_t C) {
    for (int64_t r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += x[r * C + c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (x[r * C + c] - m) * (x[r * C + c] - m);
        double rs = 1.0 / sqrt(v / (double)C + 1e-5);
        for (int64_t c = 0; c < C; c++) out[r * C + c] = (x[r * C + c] - m) * rs * w[c] + b[c];
    }
}

static void test_layernorm(void) {
    const int64_t spec[3][5] = {{3, 3, 4, 8}, {1, 8}, {1, 8}};
    leaves L;
    leaves_init(&L, 11, 3, spec, 1.0f);
    st_tensor *x = L.t[0], *w = L.t[1], *b = L.t[2];
    for (int i = 0; i < 96; i++) x->data[i] += 3.0f;   /* rows with a non-zero mean */
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *y = st_layernorm(ctx, x, w, b, 1e-5f);
    double ref[96];
    layernorm_ref(ref, x->data, w->data, b->data, 12, 8);
    close_ref("layernorm forward", y->data, ref, 96, 1e-5, 1e-5);
    env_close(&e);
    st_tensor *lv[3] = {x, w, b};
    args a = {.a = x, .b = w, .c = b};
    /* LayerNorm is smooth but curved in x: eps 1e-2 leaves ~1e-4 truncation error */
    gradcheck("layernorm", build_layernorm, &a, lv, 3, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);

    /* large: parallel row blocks and the block-ordered dw/db reduction, vs double
     * reference backward; bit-identical with 1 and 2 threads */
    const int64_t N = 200, C = 256;
    const int64_t spec2[3][5] = {{2, N, C}, {1, C}, {1, C}};
    leaves_init(&L, 12, 3, spec2, 1.0f);
    x = L.t[0]; w = L.t[1]; b = L.t[2];
    float *dy = malloc((size_t)(N * C) * sizeof(float));
    fill_normal(dy, N * C, 13, 1.0f, 0.0f);
    double *rdx = malloc((size_t)(N * C) * sizeof(double)), *rdw = calloc((size_t)C, sizeof(double)),
           *rdb = calloc((size_t)C, sizeof(double));
    for (int64_t r = 0; r < N; r++) {
        const float *xr = x->data + r * C, *g = dy + r * C;
        double m = 0, v = 0, sg = 0, sgx = 0;
        for (int64_t c = 0; c < C; c++) m += xr[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        double rs = 1.0 / sqrt(v / (double)C + 1e-5);
        for (int64_t c = 0; c < C; c++) {
            double xh = (xr[c] - m) * rs;
            sg += (double)g[c] * w->data[c];
            sgx += (double)g[c] * w->data[c] * xh;
            rdw[c] += g[c] * xh;
            rdb[c] += g[c];
        }
        for (int64_t c = 0; c < C; c++) {
            double xh = (xr[c] - m) * rs;
            rdx[r * C + c] = rs * ((double)g[c] * w->data[c] - sg / (double)C - xh * sgx / (double)C);
        }
    }
    float *keep = malloc((size_t)(N * C + 2 * C) * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        st_params_zero_grad(&L.p);
        ctx = env_open(&e, 1, 0);
        backward_from(ctx, st_layernorm(ctx, x, w, b, 1e-5f), dy);
        if (threads == 1) {
            close_ref("layernorm large dx", x->grad, rdx, N * C, 1e-4, 1e-4);
            close_ref("layernorm large dw", w->grad, rdw, C, 1e-4, 1e-4);
            close_ref("layernorm large db", b->grad, rdb, C, 1e-4, 1e-4);
            memcpy(keep, x->grad, (size_t)(N * C) * sizeof(float));
            memcpy(keep + N * C, w->grad, (size_t)C * sizeof(float));
            memcpy(keep + N * C + C, b->grad, (size_t)C * sizeof(float));
        } else {
            int same = memcmp(keep, x->grad, (size_t)(N * C) * sizeof(float)) == 0 &&
                       memcmp(keep + N * C, w->grad, (size_t)C * sizeof(float)) == 0 &&
                       memcmp(keep + N * C + C, b->grad, (size_t)C * sizeof(float)) == 0;
            CHECK_MSG(same, "layernorm backward differs between 1 and 2 threads");
        }
        env_close(&e);
    }
    omp_set_num_threads(2);
    free(dy); free(rdx); free(rdw); free(rdb); free(keep);
    st_params_free(&L.p);
}

/* ---------------------------------------------------------------- gelu ---- */
static st_tensor *build_gelu(st_ctx *ctx, void *u) { args *a = u; return st_gelu(ctx, a->a, a->i0); }

static void test_gelu(void) {
    /* forward and derivative on a grid over [-12, 12] against double formulas */
    const int64_t n = 4801;
    int64_t shp[1] = {n};
    st_params P;
    st_error err = {0};
    st_params_init(&P);
    st_params_add(&P, "x", 1, shp, 0, ST_INIT_ZERO, 0);
    st_params_finalize(&P, &err);
    st_tensor *x = st_param(&P, 0);
    for (int64_t i = 0; i < n; i++) x->data[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
    double *ry = malloc((size_t)n * sizeof(double)), *rd = malloc((size_t)n * sizeof(double));
    float *ones = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0f;
    for (int exact = 0; exact < 2; exact++) {
        for (int64_t i = 0; i < n; i++) {
            double v = x->data[i];
            if (exact) {
                ry[i] = 0.5 * v * erfc(-v / sqrt(2.0));
                rd[i] = 0.5 * erfc(-v / sqrt(2.0)) + v * exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
            } else {
                double k = sqrt(2.0 / M_PI), u = k * (v + 0.044715 * v * v * v), t = tanh(u);
                ry[i] = 0.5 * v * (1.0 + t);
                rd[i] = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * v * v);
            }
        }
        st_params_zero_grad(&P);
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_gelu(ctx, x, exact);
        /* float evaluation of a few ops plus our exp/erfc (< 2e-6 relative) */
        close_ref(exact ? "gelu erf forward" : "gelu tanh forward", y->data, ry, n, 1e-6, 4e-6);
        backward_from(ctx, y, ones);
        close_ref(exact ? "gelu erf derivative" : "gelu tanh derivative", x->grad, rd, n, 2e-6, 4e-6);
        env_close(&e);
    }
    free(ry); free(rd); free(ones);
    st_params_free(&P);

    const int64_t spec[1][5] = {{2, 4, 8}};
    leaves L;
    leaves_init(&L, 14, 1, spec, 1.0f);
    args a0 = {.a = L.t[0], .i0 = 0}, a1 = {.a = L.t[0], .i0 = 1};
    gradcheck("gelu tanh", build_gelu, &a0, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    gradcheck("gelu erf", build_gelu, &a1, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    st_params_free(&L.p);
}

/* ------------------------------------------------------ accumulation ---- */
static void test_accumulation(void) {
    /* X (2,3,8), W (6,8), b6 (6), Y (2,3,8), c8 (8), c8b (8), TAB (7,8), M (8,5) */
    const int64_t spec[8][5] = {{3, 2, 3, 8}, {2, 6, 8}, {1, 6}, {3, 2, 3, 8}, {1, 8}, {1, 8},
                                {2, 7, 8}, {2, 8, 5}};
    leaves L;
    leaves_init(&L, 90, 8, spec, 1.0f);
    st_tensor **t = L.t, *X = t[0], *W = t[1], *b6 = t[2], *Y = t[3], *c8 = t[4], *c8b = t[5];
    st_tensor *TAB = t[6], *M = t[7];
    const int32_t ids[6] = {1, 6, 1, 0, 1, 3};
    args a;
    a = (args){.a = X, .b = W, .c = b6};
    check_accumulates("linear", build_linear, &a, (st_tensor *[]){X, W, b6}, 3, 0);
    a = (args){.a = X, .b = M};
    check_accumulates("matmul", build_matmul, &a, (st_tensor *[]){X, M}, 2, 0);
    a = (args){.a = X, .b = Y};
    check_accumulates("add", build_add, &a, (st_tensor *[]){X, Y}, 2, 0);
    a = (args){.a = X, .b = c8};
    check_accumulates("bias", build_bias, &a, (st_tensor *[]){X, c8}, 2, 0);
    a = (args){.a = X, .f0 = 0.5f};
    check_accumulates("scale", build_scale, &a, &X, 1, 0);
    a = (args){.a = TAB, .ids = ids, .n0 = 2, .n1 = 3};
    check_accumulates("embedding", build_embedding, &a, &TAB, 1, 0);
    a = (args){.a = X, .b = c8, .c = c8b};
    check_accumulates("layernorm", build_layernorm, &a, (st_tensor *[]){X, c8, c8b}, 3, 0);
    a = (args){.a = X, .i0 = 0};
    check_accumulates("gelu tanh", build_gelu, &a, &X, 1, 0);
    a = (args){.a = X, .i0 = 1};
    check_accumulates("gelu erf", build_gelu, &a, &X, 1, 0);
    st_params_free(&L.p);
}

int main(void) {
    omp_set_num_threads(2);
    test_helpers();
    test_linear();
    test_linear_large_backward();
    test_matmul();
    test_elementwise();
    test_embedding();
    test_layernorm();
    test_gelu();
    test_accumulation();
    return test_finish("test_ops");
}
