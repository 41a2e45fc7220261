/* test_bf16_copies.c - precision bf16: the ops that produce a linear layer's input
 * (LayerNorm, RMSNorm, GELU in both forms, SwiGLU, GeGLU, merge_heads) write its bf16
 * copy with their output, and the linear and the fused LM head read that copy instead
 * of rounding x themselves (docs/precision.md, "Activations rounded once"); a linear's
 * backward rounds dy once, in its bias's column-sum pass when it has a bias.
 * Skipped without oneDNN. */
#include "test_ops_util.h"

#include <stdint.h>

/* ------------------------------------- producers' bf16 copies of x ---- */
/* LayerNorm, RMSNorm, GELU, the GLUs and merge_heads write their output's bf16 copy in a
 * bf16 context (out->bf16) and the linear / LM head read it instead of rounding x: the
 * results must be bit for bit those of rounding x in the consumer (the output seen
 * through a view whose copy is cleared, so the consumer rounds), and the consumer must
 * really read the copy (a flipped bit in it changes y). The LM head reads LN_f's output
 * through a (B*T, C) reshape as st_model_loss does: a reshape shares the copy. fp32
 * contexts write no copy. */
enum { PROD_LN, PROD_RMS, PROD_GELU_TANH, PROD_GELU_ERF, PROD_SWIGLU, PROD_GEGLU, PROD_MERGE, PROD_COUNT };
static const char *prod_name[PROD_COUNT] = {"layernorm", "rmsnorm", "gelu tanh", "gelu erf", "swiglu", "geglu",
                                            "merge_heads"};
enum { CONS_LINEAR, CONS_HEAD };
typedef struct prod_run { float *y, *dw, *dx; int has_copy, copy_exact; } prod_run;

/* leaves: 0 x (B,T,C), 1 ln w (C), 2 ln b (C), 3 glu input (B,T,2C), 4 heads (B,H,T,D),
 * 5 W (OUT,C) (the head: (V=OUT,C)), 6 bias (OUT) */
static void run_producer(st_mm *mm, leaves *L, int prod, int cons, int strip, int poke, prod_run *r) {
    for (int i = 0; i < L->p.count; i++) memset(L->t[i]->grad, 0, (size_t)st_numel(L->t[i]) * sizeof(float));
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    ctx->mm = mm;
    st_tensor *h = NULL;
    int in = 0;
    switch (prod) {
    case PROD_LN: h = st_layernorm(ctx, L->t[0], L->t[1], L->t[2], 1e-5f); break;
    case PROD_RMS: h = st_rmsnorm(ctx, L->t[0], L->t[1], 1e-5f); break;
    case PROD_GELU_TANH: h = st_gelu(ctx, L->t[0], 0); break;
    case PROD_GELU_ERF: h = st_gelu(ctx, L->t[0], 1); break;
    case PROD_SWIGLU: h = st_glu(ctx, L->t[3], ST_GLU_SWIGLU); in = 3; break;
    case PROD_GEGLU: h = st_glu(ctx, L->t[3], ST_GLU_GEGLU_TANH); in = 3; break;
    default: h = st_merge_heads(ctx, L->t[4]); in = 4; break;
    }
    ST_ASSERT(h);
    const int64_t n = st_numel(h);
    r->has_copy = h->bf16 != NULL;
    r->copy_exact = 0;
    if (h->bf16) {
        uint16_t *ref = malloc((size_t)n * sizeof(uint16_t));
        st_bf16_round(ref, h->data, n);
        r->copy_exact = memcmp(ref, h->bf16, (size_t)n * sizeof(uint16_t)) == 0;
        free(ref);
        if (poke) ((uint16_t *)h->bf16)[0] ^= 1;   /* one ulp in the copy only */
    }
    const int64_t C = h->shape[h->ndim - 1], N = n / C, OUT = L->t[5]->shape[0];
    if (strip) {   /* the consumer rounds x itself */
        st_tensor *v = st_view(ctx, h, h->ndim, h->shape);
        ST_ASSERT(v);
        v->bf16 = NULL;
        h = v;
    } else if (cons == CONS_HEAD) {   /* as st_model_loss feeds the head */
        const int64_t shape2[2] = {N, C};
        st_tensor *v = st_view(ctx, h, 2, shape2);
        ST_ASSERT(v);
        r->has_copy = r->has_copy && v->bf16 == h->bf16;
        h = v;
    }
    st_tensor *y;
    if (cons == CONS_LINEAR) {
        y = st_linear(ctx, h, L->t[5], L->t[6]);
        ST_ASSERT(y);
        float *dy = malloc((size_t)(N * OUT) * sizeof(float));
        fill_normal(dy, N * OUT, 71, 1.0f, 0.0f);
        r->y = malloc((size_t)(N * OUT) * sizeof(float));
        memcpy(r->y, y->data, (size_t)(N * OUT) * sizeof(float));
        backward_from(ctx, y, dy);
        free(dy);
    } else {
        int32_t *tg = malloc((size_t)N * sizeof(int32_t));
        for (int64_t i = 0; i < N; i++) tg[i] = (int32_t)((i * 7 + 3) % OUT);
        y = st_linear_cross_entropy(ctx, h, L->t[5], tg, -1, NULL);
        ST_ASSERT(y);
        r->y = malloc(sizeof(float));
        r->y[0] = y->data[0];
        st_error err = {0};
        ST_ASSERT(st_backward(ctx, y, 1.0f, &err) == ST_OK);
        free(tg);
    }
    env_close(&e);
    r->dw = malloc((size_t)st_numel(L->t[5]) * sizeof(float));
    memcpy(r->dw, L->t[5]->grad, (size_t)st_numel(L->t[5]) * sizeof(float));
    r->dx = malloc((size_t)st_numel(L->t[in]) * sizeof(float));
    memcpy(r->dx, L->t[in]->grad, (size_t)st_numel(L->t[in]) * sizeof(float));
}

static void prod_free(prod_run *r) { free(r->y); free(r->dw); free(r->dx); }

/* A linear's backward rounds dy once for its two products and rewinds that copy: what it
 * keeps is dy itself (the seed) and dx, not the (N, OUT) bf16 scratch (here 512 KiB). */
static void test_linear_scratch(st_mm *bf) {
    const int64_t N = 256, IN = 4, OUT = 1024;
    const int64_t spec[2][5] = {{2, N, IN}, {2, OUT, IN}};
    leaves L;
    leaves_init(&L, 95, 2, spec, 1.0f);
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    ctx->mm = bf;
    st_tensor *y = st_linear(ctx, L.t[0], L.t[1], NULL);
    CHECK(y != NULL);
    float *dy = malloc((size_t)(N * OUT) * sizeof(float));
    fill_normal(dy, N * OUT, 96, 1.0f, 0.0f);
    const size_t used = ctx->arena->used;
    backward_from(ctx, y, dy);
    const size_t kept = (size_t)(N * OUT + N * IN) * sizeof(float) + 16384;
    CHECK_MSG(ctx->arena->used - used <= kept, "linear backward kept %zu bytes (bound %zu)", ctx->arena->used - used,
              kept);
    free(dy);
    env_close(&e);
    st_params_free(&L.p);
}

static void test_producer_copies(st_mm *bf) {
    const int64_t B = 2, T = 40, H = 4, D = 8, C = H * D, OUT = 24;
    const int64_t spec[7][5] = {{3, B, T, C}, {1, C}, {1, C}, {3, B, T, 2 * C}, {4, B, H, T, D}, {2, OUT, C}, {1, OUT}};
    leaves L;
    leaves_init(&L, 91, 7, spec, 1.0f);
    for (int prod = 0; prod < PROD_COUNT; prod++)
        for (int cons = CONS_LINEAR; cons <= CONS_HEAD; cons++) {
            if (cons == CONS_HEAD && prod != PROD_LN && prod != PROD_RMS) continue;   /* LN_f feeds the head */
            const char *what = prod_name[prod];
            const int64_t ny = cons == CONS_LINEAR ? B * T * OUT : 1, nw = OUT * C;
            const int64_t nx = st_numel(L.t[prod >= PROD_MERGE ? 4 : prod >= PROD_SWIGLU ? 3 : 0]);
            prod_run f, own, view, poked;
            run_producer(NULL, &L, prod, cons, 0, 0, &f);
            run_producer(bf, &L, prod, cons, 0, 0, &own);
            run_producer(bf, &L, prod, cons, 1, 0, &view);   /* copy cleared */
            run_producer(bf, &L, prod, cons, 0, 1, &poked);
            CHECK_MSG(!f.has_copy, "%s: an fp32 context wrote a bf16 copy", what);
            CHECK_MSG(own.has_copy && own.copy_exact, "%s: bf16 copy missing, not the rounded output, or not shared by a reshape",
                      what);
            CHECK_MSG(memcmp(own.y, view.y, (size_t)ny * sizeof(float)) == 0 &&
                      memcmp(own.dw, view.dw, (size_t)nw * sizeof(float)) == 0 &&
                      memcmp(own.dx, view.dx, (size_t)nx * sizeof(float)) == 0,
                      "%s -> %s: the producer's copy changed y, dW or dx", what, cons ? "head" : "linear");
            CHECK_MSG(memcmp(own.y, poked.y, (size_t)ny * sizeof(float)) != 0,
                      "%s -> %s: the consumer did not read the producer's copy", what, cons ? "head" : "linear");
            CHECK_MSG(memcmp(own.y, f.y, (size_t)ny * sizeof(float)) != 0, "%s: bf16 equals fp32", what);
            prod_free(&f); prod_free(&own); prod_free(&view); prod_free(&poked);
        }
    st_params_free(&L.p);
}

/* With a bias, the linear's backward rounds dy for its two products in the column-sum
 * pass (ops_colsum_acc); without one, in a pass of its own. dx and dW must be the same
 * bits either way, and within bf16's bound of fp32 (a copy left unwritten or misplaced
 * fails one or the other); db is the column sum of dy. OUT = 130: a partial column block. */
static void test_linear_bias_rounding(st_mm *bf) {
    const int64_t N = 200, IN = 40, OUT = 130;
    const int64_t spec[3][5] = {{2, N, IN}, {2, OUT, IN}, {1, OUT}};
    leaves L;
    leaves_init(&L, 97, 3, spec, 1.0f);
    float *dy = malloc((size_t)(N * OUT) * sizeof(float));
    fill_normal(dy, N * OUT, 98, 1.0f, 0.0f);
    float *g[3][2];   /* [bias / none / fp32][dx, dW] */
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < 3; i++) memset(L.t[i]->grad, 0, (size_t)st_numel(L.t[i]) * sizeof(float));
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        ctx->mm = run < 2 ? bf : NULL;
        st_tensor *y = st_linear(ctx, L.t[0], L.t[1], run == 1 ? NULL : L.t[2]);
        CHECK(y != NULL);
        backward_from(ctx, y, dy);
        for (int k = 0; k < 2; k++) {
            const size_t bytes = (size_t)st_numel(L.t[k]) * sizeof(float);
            g[run][k] = malloc(bytes);
            memcpy(g[run][k], L.t[k]->grad, bytes);
        }
        if (run == 0) {
            double worst = 0;
            for (int64_t c = 0; c < OUT; c++) {
                double ref = 0;
                for (int64_t r = 0; r < N; r++) ref += dy[r * OUT + c];
                const double d = fabs(L.t[2]->grad[c] - ref) / (1.0 + fabs(ref));
                TH_MAX(worst, d);
            }
            CHECK_MSG(worst < 1e-6, "db is not the column sum of dy (worst %g)", worst);
        }
        env_close(&e);
    }
    for (int k = 0; k < 2; k++) {
        const int64_t n = st_numel(L.t[k]);
        CHECK_MSG(!memcmp(g[0][k], g[1][k], (size_t)n * sizeof(float)), "%s: the bias's rounding pass changed the bits",
                  k ? "dW" : "dx");
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            num += (g[0][k][i] - g[2][k][i]) * (double)(g[0][k][i] - g[2][k][i]);
            den += (double)g[2][k][i] * g[2][k][i];
        }
        CHECK_MSG(sqrt(num / den) < 2.0 / 128, "%s: bf16 vs fp32 relative error %g", k ? "dW" : "dx", sqrt(num / den));
    }
    for (int run = 0; run < 3; run++) free(g[run][0]), free(g[run][1]);
    free(dy);
    st_params_free(&L.p);
}

int main(void) {
    int rc;
    st_mm *bf = test_bf16_backend("test_bf16_copies", 1, &rc);
    if (!bf) return rc;
    test_producer_copies(bf);
    test_linear_scratch(bf);
    test_linear_bias_rounding(bf);
    st_mm_free(bf);
    return test_finish("test_bf16_copies");
}
