/* test_ops_block.c - the ops of today's decoder block (model.norm, model.ffn,
 * model.qk_norm, model.n_kv_heads, model.out_gate, model.out_norm, model.kv_shift): RMSNorm
 * (over the row and per group), the gated units SwiGLU / GeGLU (tanh, erf), the output
 * gate's sigmoid_gate, the token shift,
 * and grouped-query heads (split_qkv_gqa, repeat_heads: shared K/V heads' gradients sum
 * over their query groups). Forward against
 * double-precision reference loops, finite-difference gradient checks, gradients that
 * accumulate, and each backward on a shape past the OpenMP threshold: against a
 * double reference and bit-identical with 1 and 2 threads. Tolerances as test_ops.c. */
#include "test_ops_util.h"

#include <omp.h>

static st_tensor *build_rmsnorm(st_ctx *ctx, void *u) { args *a = u; return st_rmsnorm(ctx, a->a, a->b, 1e-5f); }
static st_tensor *build_rms_groups(st_ctx *ctx, void *u) {
    args *a = u;
    return st_rmsnorm_groups(ctx, a->a, a->b, a->i0, 1e-5f);
}
static st_tensor *build_shift(st_ctx *ctx, void *u) {
    args *a = u;
    return st_token_shift(ctx, a->a, a->b, NULL, a->ids);
}
static st_tensor *build_glu(st_ctx *ctx, void *u) { args *a = u; return st_glu(ctx, a->a, a->i0); }
static st_tensor *build_sgate(st_ctx *ctx, void *u) { args *a = u; return st_sigmoid_gate(ctx, a->a, a->b); }

/* y and, for dy, dx and dw of RMSNorm in double, over each of G groups of a row: the N G
 * rows of C/G values, weights (C) */
static void rmsnorm_ref(const float *x, const float *w, const float *dy, int64_t N, int64_t C, int64_t G, double *y,
                        double *dx, double *dw) {
    const int64_t D = C / G;
    for (int64_t r = 0; r < N * G; r++) {
        const float *xr = x + r * D, *wr = w + r % G * D;
        double v = 0, sgx = 0;
        for (int64_t c = 0; c < D; c++) v += (double)xr[c] * xr[c];
        const double rs = 1.0 / sqrt(v / (double)D + 1e-5);
        for (int64_t c = 0; c < D; c++) {
            if (y) y[r * D + c] = xr[c] * rs * wr[c];
            if (dy) {
                sgx += (double)dy[r * D + c] * wr[c] * xr[c] * rs;
                dw[r % G * D + c] += dy[r * D + c] * xr[c] * rs;
            }
        }
        if (dy)
            for (int64_t c = 0; c < D; c++)
                dx[r * D + c] = rs * ((double)dy[r * D + c] * wr[c] - xr[c] * rs * sgx / (double)D);
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
    rmsnorm_ref(x->data, w->data, NULL, 12, 8, 1, ref, NULL, NULL);
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
    rmsnorm_ref(x->data, w->data, dy, N, C, 1, NULL, rdx, rdw);
    args a2 = {.a = x, .b = w};
    const grad_ref refs[2] = {{"rmsnorm large dx", rdx, 1e-5, 1e-4}, {"rmsnorm large dw", rdw, 1e-4, 1e-4}};
    backward_threads("rmsnorm", build_rmsnorm, &a2, &L, dy, refs);
    free(dy); free(rdx); free(rdw);
    st_params_free(&L.p);
}

/* model.out_norm's op: RMSNorm per group of a row (one per head), weights (C): groups of 2
 * and of 4 values in (3,4,8), and 8 groups of 32 past the OpenMP threshold */
static void test_rmsnorm_groups(void) {
    const int G[2] = {4, 2};
    for (int gi = 0; gi < 2; gi++) {
        const int64_t spec[2][5] = {{3, 3, 4, 8}, {1, 8}};
        leaves L;
        leaves_init(&L, 24 + gi, 2, spec, 1.0f);
        st_tensor *x = L.t[0], *w = L.t[1];
        for (int i = 0; i < 96; i++) x->data[i] += 1.5f * (i % 8 < 4 ? 1.0f : -0.5f);   /* groups of unequal scale */
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_rmsnorm_groups(ctx, x, w, G[gi], 1e-5f);
        double ref[96];
        rmsnorm_ref(x->data, w->data, NULL, 12, 8, G[gi], ref, NULL, NULL);
        char what[64];
        snprintf(what, sizeof what, "rmsnorm %d groups forward", G[gi]);
        close_ref(what, y->data, ref, 96, 1e-6, 1e-5);
        env_close(&e);
        args a = {.a = x, .b = w, .i0 = G[gi]};
        snprintf(what, sizeof what, "rmsnorm %d groups", G[gi]);
        gradcheck(what, build_rms_groups, &a, L.t, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
        check_accumulates(what, build_rms_groups, &a, L.t, 2, 0);
        st_params_free(&L.p);
    }
    const int64_t N = 200, C = 256, NG = 8;
    const int64_t spec2[2][5] = {{2, N, C}, {1, C}};
    leaves L;
    leaves_init(&L, 26, 2, spec2, 1.0f);
    float *dy = malloc((size_t)(N * C) * sizeof(float));
    fill_normal(dy, N * C, 27, 1.0f, 0.0f);
    double *rdx = malloc((size_t)(N * C) * sizeof(double)), *rdw = calloc((size_t)C, sizeof(double));
    rmsnorm_ref(L.t[0]->data, L.t[1]->data, dy, N, C, NG, NULL, rdx, rdw);
    args a = {.a = L.t[0], .b = L.t[1], .i0 = (int)NG};
    const grad_ref refs[2] = {{"rmsnorm groups large dx", rdx, 1e-5, 1e-4},
                              {"rmsnorm groups large dw", rdw, 1e-4, 1e-4}};
    backward_threads("rmsnorm groups", build_rms_groups, &a, &L, dy, refs);
    free(dy); free(rdx); free(rdw);
    st_params_free(&L.p);
}

/* the token shift in double: x (B,H,T,D), z (B,T,H), doc (B,T) or NULL, prev (H,D) or NULL
 * (B = 1); y, and for dy the gradients dx, dz (accumulated) */
static void shift_ref(const float *x, const float *z, const int32_t *doc, const float *prev, int64_t B, int64_t H,
                      int64_t T, int64_t D, const float *dy, double *y, double *dx, double *dz) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                const double s = 1.0 / (1.0 + exp(-(double)z[(b * T + t) * H + h]));
                const int has = t > 0 && (!doc || doc[b * T + t] < t);
                const float *xt = x + ((b * H + h) * T + t) * D;
                const float *xp = has ? xt - D : t == 0 && prev ? prev + h * D : NULL;
                for (int64_t i = 0; i < D; i++) {
                    const double p = xp ? xp[i] : 0.0, o = ((b * H + h) * T + t) * D + i;
                    if (y) y[(int64_t)o] = s * p + (1 - s) * xt[i];
                    if (!dy) continue;
                    dx[(int64_t)o] += (1 - s) * dy[(int64_t)o];
                    if (has) dx[(int64_t)o - D] += s * dy[(int64_t)o];
                    dz[(b * T + t) * H + h] += s * (1 - s) * dy[(int64_t)o] * (p - xt[i]);
                }
            }
}

/* model.kv_shift's op: x (2,2,5,3), z (2,5,2) of scale 3 (both tails of the sigmoid), with
 * and without packed instances (row 0: one instance; row 1: instances from t = 0, 2, 3), a
 * decoded chunk's previous row, and a shape past the OpenMP threshold */
static void test_token_shift(void) {
    const int64_t B = 2, H = 2, T = 5, D = 3;
    static const int32_t doc[10] = {0, 0, 0, 0, 0, 0, 0, 2, 3, 3};
    for (int with_doc = 0; with_doc <= 1; with_doc++) {
        const int64_t spec[2][5] = {{4, B, H, T, D}, {3, B, T, H}};
        leaves L;
        leaves_init(&L, 61 + with_doc, 2, spec, 3.0f);
        st_tensor *x = L.t[0], *z = L.t[1];
        const int32_t *dm = with_doc ? doc : NULL;
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *y = st_token_shift(ctx, x, z, NULL, dm);
        double ref[60];
        shift_ref(x->data, z->data, dm, NULL, B, H, T, D, NULL, ref, NULL, NULL);
        char what[64];
        snprintf(what, sizeof what, "token_shift%s forward", with_doc ? " (instances)" : "");
        CHECK(y && y->ndim == 4 && y->shape[2] == T);
        close_ref(what, y->data, ref, 60, 1e-6, 4e-6);
        env_close(&e);
        args a = {.a = x, .b = z, .ids = dm};
        snprintf(what, sizeof what, "token_shift%s", with_doc ? " (instances)" : "");
        gradcheck(what, build_shift, &a, L.t, 2, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
        check_accumulates(what, build_shift, &a, L.t, 2, 0);
        st_params_free(&L.p);
    }
    {   /* a decoded chunk (B = 1, no gradient): its row -1 is the previous token's */
        const int64_t spec[2][5] = {{4, 1, H, T, D}, {3, 1, T, H}};
        leaves L;
        leaves_init(&L, 63, 2, spec, 3.0f);
        const float prev[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
        env e;
        st_ctx *ctx = env_open(&e, 0, 0);
        st_tensor *y = st_token_shift(ctx, L.t[0], L.t[1], prev, NULL);
        double ref[30];
        shift_ref(L.t[0]->data, L.t[1]->data, NULL, prev, 1, H, T, D, NULL, ref, NULL, NULL);
        close_ref("token_shift with a previous row", y->data, ref, 30, 1e-6, 4e-6);
        env_close(&e);
        st_params_free(&L.p);
    }
    const int64_t BL = 2, HL = 4, TL = 256, DL = 32;
    const int64_t spec[2][5] = {{4, BL, HL, TL, DL}, {3, BL, TL, HL}};
    leaves L;
    leaves_init(&L, 64, 2, spec, 3.0f);
    const int64_t n = BL * HL * TL * DL;
    int32_t *ldoc = malloc((size_t)(BL * TL) * sizeof(int32_t));
    for (int64_t i = 0; i < BL * TL; i++) ldoc[i] = (int32_t)(i % TL / 40 * 40);   /* instances of 40 */
    float *dy = malloc((size_t)n * sizeof(float));
    fill_normal(dy, n, 65, 1.0f, 0.0f);
    double *rdx = calloc((size_t)n, sizeof(double)), *rdz = calloc((size_t)(BL * TL * HL), sizeof(double));
    shift_ref(L.t[0]->data, L.t[1]->data, ldoc, NULL, BL, HL, TL, DL, dy, NULL, rdx, rdz);
    args a = {.a = L.t[0], .b = L.t[1], .ids = ldoc};
    const grad_ref refs[2] = {{"token_shift large dx", rdx, 1e-6, 1e-5}, {"token_shift large dz", rdz, 1e-5, 1e-4}};
    backward_threads("token_shift", build_shift, &a, &L, dy, refs);
    free(ldoc); free(dy); free(rdx); free(rdz);
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
    test_rmsnorm_groups();
    test_token_shift();
    test_glu();
    test_sigmoid_gate();
    test_gqa();
    return test_finish("test_ops_block");
}
