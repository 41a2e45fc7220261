/* test_ops_block.c - the ops of today's decoder block (model.norm, model.ffn,
 * model.qk_norm, model.n_kv_heads, model.out_gate): RMSNorm, the gated units SwiGLU / GeGLU
 * (tanh, erf), the output gate's sigmoid_gate,
 * and grouped-query heads (split_qkv_gqa, repeat_heads: shared K/V heads' gradients sum
 * over their query groups). Forward against
 * double-precision reference loops, finite-difference gradient checks, gradients that
 * accumulate, and RMSNorm's backward on a shape past the OpenMP threshold: against a
 * double reference and bit-identical with 1 and 2 threads. Tolerances as test_ops.c. */
#include "test_ops_util.h"

#include <omp.h>

static st_tensor *build_rmsnorm(st_ctx *ctx, void *u) { args *a = u; return st_rmsnorm(ctx, a->a, a->b, 1e-5f); }
static st_tensor *build_glu(st_ctx *ctx, void *u) { args *a = u; return st_glu(ctx, a->a, a->i0); }
static st_tensor *build_sgate(st_ctx *ctx, void *u) { args *a = u; return st_sigmoid_gate(ctx, a->a, a->b); }

/* y and, for dy, dx and dw of RMSNorm in double */
static void rmsnorm_ref(const float *x, const float *w, const float *dy, int64_t N, int64_t C, double *y, double *dx,
                        double *dw) {
    for (int64_t r = 0; r < N; r++) {
        const float *xr = x + r * C;
        double v = 0, sgx = 0;
        for (int64_t c = 0; c < C; c++) v += (double)xr[c] * xr[c];
        const double rs = 1.0 / sqrt(v / (double)C + 1e-5);
        for (int64_t c = 0; c < C; c++) {
            if (y) y[r * C + c] = xr[c] * rs * w[c];
            if (dy) { sgx += (double)dy[r * C + c] * w[c] * xr[c] * rs; dw[c] += dy[r * C + c] * xr[c] * rs; }
        }
        if (dy)
            for (int64_t c = 0; c < C; c++)
                dx[r * C + c] = rs * ((double)dy[r * C + c] * w[c] - xr[c] * rs * sgx / (double)C);
    }
}

/* One leaf's expected gradient in backward_threads: a double reference and its tolerances. */
typedef struct grad_ref { const char *name; const double *ref; double atol, rtol; } grad_ref;

/* The backward of build's op from dy on a shape past the OpenMP threshold, on leaves
 * L->t[0] and L->t[1]: with 1 thread each gradient against its double reference, with 2
 * threads the same bits as with 1. */
static void backward_threads(const char *op, st_tensor *(*build)(st_ctx *, void *), args *a, leaves *L,
                             const float *dy, const grad_ref ref[2]) {
    const int64_t n0 = st_numel(L->t[0]), n1 = st_numel(L->t[1]);
    float *keep = malloc((size_t)(n0 + n1) * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        st_params_zero_grad(&L->p);
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        backward_from(ctx, build(ctx, a), dy);
        if (threads == 1) {
            close_ref(ref[0].name, L->t[0]->grad, ref[0].ref, n0, ref[0].atol, ref[0].rtol);
            close_ref(ref[1].name, L->t[1]->grad, ref[1].ref, n1, ref[1].atol, ref[1].rtol);
            memcpy(keep, L->t[0]->grad, (size_t)n0 * sizeof(float));
            memcpy(keep + n0, L->t[1]->grad, (size_t)n1 * sizeof(float));
        } else {
            CHECK_MSG(memcmp(keep, L->t[0]->grad, (size_t)n0 * sizeof(float)) == 0 &&
                      memcmp(keep + n0, L->t[1]->grad, (size_t)n1 * sizeof(float)) == 0,
                      "%s backward differs between 1 and 2 threads", op);
        }
        env_close(&e);
    }
    omp_set_num_threads(2);
    free(keep);
}

static void test_rmsnorm(void) {
    const int64_t spec[2][5] = {{3, 3, 4, 8}, {1, 8}};
    leaves L;
    leaves_init(&L, 21, 2, spec, 1.0f);
    st_tensor *x = L.t[0], *w = L.t[1];
    for (int i = 0; i < 96; i++) x->data[i] += 1.5f;   /* a mean RMSNorm must keep */
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *y = st_rmsnorm(ctx, x, w, 1e-5f);
    double ref[96];
    rmsnorm_ref(x->data, w->data, NULL, 12, 8, ref, NULL, NULL);
    close_ref("rmsnorm forward", y->data, ref, 96, 1e-6, 1e-5);
    env_close(&e);
    args a = {.a = x, .b = w};
    gradcheck("rmsnorm", build_rmsnorm, &a, L.t, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    check_accumulates("rmsnorm", build_rmsnorm, &a, L.t, 2, 0);
    st_params_free(&L.p);

    /* large: parallel row blocks and the block-ordered dw sum */
    const int64_t N = 200, C = 256;
    const int64_t spec2[2][5] = {{2, N, C}, {1, C}};
    leaves_init(&L, 22, 2, spec2, 1.0f);
    x = L.t[0]; w = L.t[1];
    float *dy = malloc((size_t)(N * C) * sizeof(float));
    fill_normal(dy, N * C, 23, 1.0f, 0.0f);
    double *rdx = malloc((size_t)(N * C) * sizeof(double)), *rdw = calloc((size_t)C, sizeof(double));
    rmsnorm_ref(x->data, w->data, dy, N, C, NULL, rdx, rdw);
    args a2 = {.a = x, .b = w};
    const grad_ref refs[2] = {{"rmsnorm large dx", rdx, 1e-5, 1e-4}, {"rmsnorm large dw", rdw, 1e-4, 1e-4}};
    backward_threads("rmsnorm", build_rmsnorm, &a2, &L, dy, refs);
    free(dy); free(rdx); free(rdw);
    st_params_free(&L.p);
}

static double act_ref(double a, int kind) {
    if (kind == ST_GLU_SWIGLU) return a / (1.0 + exp(-a));
    if (kind == ST_GLU_GEGLU_ERF) return 0.5 * a * erfc(-a / sqrt(2.0));
    return 0.5 * a * (1.0 + tanh(sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)));
}

static void test_glu(void) {
    static const char *names[ST_GLU_COUNT] = {"swiglu", "geglu tanh", "geglu erf"};
    const int64_t spec[1][5] = {{3, 2, 3, 10}};   /* (2,3,2F) with F = 5 */
    leaves L;
    leaves_init(&L, 31, 1, spec, 2.0f);
    st_tensor *x = L.t[0];
    for (int kind = 0; kind < ST_GLU_COUNT; kind++) {
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_glu(ctx, x, kind);
        CHECK(y && y->ndim == 3 && y->shape[2] == 5);
        double ref[30];
        for (int r = 0; r < 6; r++)
            for (int c = 0; c < 5; c++) ref[r * 5 + c] = act_ref(x->data[r * 10 + c], kind) * x->data[r * 10 + 5 + c];
        char what[64];
        snprintf(what, sizeof what, "%s forward", names[kind]);
        close_ref(what, y->data, ref, 30, 1e-6, 4e-6);
        env_close(&e);
        args a = {.a = x, .i0 = kind};
        gradcheck(names[kind], build_glu, &a, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
        check_accumulates(names[kind], build_glu, &a, L.t, 1, 0);
    }
    st_params_free(&L.p);
}

/* model.out_gate's op: a (2,3,6) times sigmoid(z), z (2,3,G) for G = 6 (a gate per value),
 * 2 (per head of 3 values) and 1; z of scale 3 so both tails of the sigmoid
 * count, and a shape past the OpenMP threshold bit-identical with 1 and 2 threads */
static void test_sigmoid_gate(void) {
    const int64_t G[3] = {6, 2, 1};
    for (int gi = 0; gi < 3; gi++) {
        const int64_t spec[2][5] = {{3, 2, 3, 6}, {3, 2, 3, G[gi]}};
        leaves L;
        leaves_init(&L, 51 + gi, 2, spec, 3.0f);
        st_tensor *x = L.t[0], *z = L.t[1];
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_sigmoid_gate(ctx, x, z);
        CHECK(y && y->ndim == 3 && y->shape[2] == 6);
        double ref[36];
        for (int r = 0; r < 6; r++)
            for (int c = 0; c < 6; c++)
                ref[r * 6 + c] = x->data[r * 6 + c] / (1.0 + exp(-(double)z->data[r * G[gi] + c / (6 / G[gi])]));
        char what[64];
        snprintf(what, sizeof what, "sigmoid_gate G=%d forward", (int)G[gi]);
        close_ref(what, y->data, ref, 36, 1e-6, 4e-6);
        env_close(&e);
        args a = {.a = x, .b = z};
        snprintf(what, sizeof what, "sigmoid_gate G=%d", (int)G[gi]);
        gradcheck(what, build_sgate, &a, L.t, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
        check_accumulates(what, build_sgate, &a, L.t, 2, 0);
        st_params_free(&L.p);
    }
    /* 64 rows of 1024 values, 8 gates a row: past OPS_PAR_MIN; against a double
     * reference, and 1 and 2 threads must give the same bits */
    const int64_t N = 64, C = 1024, NG = 8, per = C / NG;
    const int64_t spec[2][5] = {{2, N, C}, {2, N, NG}};
    leaves L;
    leaves_init(&L, 77, 2, spec, 4.0f);
    float *dy = malloc((size_t)(N * C) * sizeof(float));
    double *rda = malloc((size_t)(N * C) * sizeof(double)), *rdz = calloc((size_t)(N * NG), sizeof(double));
    fill_normal(dy, N * C, 78, 1.0f, 0.0f);
    for (int64_t r = 0; r < N; r++)
        for (int64_t c = 0; c < C; c++) {
            const double s = 1.0 / (1.0 + exp(-(double)L.t[1]->data[r * NG + c / per]));
            rda[r * C + c] = dy[r * C + c] * s;
            rdz[r * NG + c / per] += (double)dy[r * C + c] * L.t[0]->data[r * C + c] * s * (1.0 - s);
        }
    args a = {.a = L.t[0], .b = L.t[1]};
    const grad_ref refs[2] = {{"sigmoid_gate large da", rda, 1e-6, 1e-5}, {"sigmoid_gate large dz", rdz, 1e-5, 1e-4}};
    backward_threads("sigmoid_gate", build_sgate, &a, &L, dy, refs);
    free(dy); free(rda); free(rdz);
    st_params_free(&L.p);
}

/* grouped-query heads: split qkv (B,T,(H+2Hkv)D) and repeat the key/value heads */
static st_tensor *build_gqa(st_ctx *ctx, void *u) {
    args *a = u;
    st_tensor *q, *k, *v;
    if (!st_split_qkv_gqa(ctx, a->a, 4, 2, &q, &k, &v)) return NULL;
    /* distinct weights per part so a swapped slice cannot pass */
    return st_add(ctx, st_add(ctx, q, st_scale(ctx, st_repeat_heads(ctx, k, 2), 0.5f)),
                  st_scale(ctx, st_repeat_heads(ctx, v, 2), -2.0f));
}

static void test_gqa(void) {
    const int64_t B = 2, T = 3, D = 2, H = 4, Hkv = 2;
    const int64_t spec[1][5] = {{3, B, T, (H + 2 * Hkv) * D}};
    leaves L;
    leaves_init(&L, 41, 1, spec, 1.0f);
    st_tensor *x = L.t[0];
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *q, *k, *v;
    CHECK(st_split_qkv_gqa(ctx, x, (int)H, (int)Hkv, &q, &k, &v));
    st_tensor *kr = st_repeat_heads(ctx, k, 2);
    int ok = q->shape[1] == H && k->shape[1] == Hkv && v->shape[1] == Hkv && kr->shape[1] == H;
    const int64_t ld = (H + 2 * Hkv) * D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) {
                for (int64_t h = 0; h < H; h++) {
                    ok &= q->data[((b * H + h) * T + t) * D + d] == x->data[(b * T + t) * ld + h * D + d];
                    ok &= kr->data[((b * H + h) * T + t) * D + d] == x->data[(b * T + t) * ld + (H + h / 2) * D + d];
                }
                for (int64_t h = 0; h < Hkv; h++)
                    ok &= v->data[((b * Hkv + h) * T + t) * D + d] == x->data[(b * T + t) * ld + (H + Hkv + h) * D + d];
            }
    CHECK_MSG(ok, "split_qkv_gqa and repeat_heads place every head (q, k shared by 2, v)");
    env_close(&e);
    args a = {.a = x};
    gradcheck("split_qkv_gqa + repeat_heads", build_gqa, &a, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
    check_accumulates("split_qkv_gqa + repeat_heads", build_gqa, &a, L.t, 1, 0);
    st_params_free(&L.p);
}

int main(void) {
    omp_set_num_threads(2);
    test_rmsnorm();
    test_glu();
    test_sigmoid_gate();
    test_gqa();
    return test_finish("test_ops_block");
}
