/* test_ops_loss.c - cross_entropy and linear_cross_entropy (values, tok_loss, ignore_index,
 * all-ignored batches, gradients; the fused op against linear + cross_entropy over several
 * row chunks), inference mode for every op (no node, no backward byte), NULL propagation and
 * accumulation into existing gradients.
 *
 * Tolerances: forward against double reference loops (atol/rtol at each check, ~1e-6
 * relative: float logits, double row sums); gradcheck with eps 1e-2, atol 2e-4, rtol 2e-3
 * (central differences in float, loss accumulated in double; see test_ops.c). */
#include "test_ops_util.h"

#include <omp.h>

#define IGN (-100)

/* ------------------------------------------------------------- helpers ---- */
/* Random targets in [0, V), every `every`-th row ignored (never, if every == 0). */
static int32_t *make_targets(int64_t N, int64_t V, int every, uint64_t seed) {
    int32_t *t = malloc((size_t)N * sizeof(int32_t));
    st_rng rng;
    st_rng_seed(&rng, seed);
    for (int64_t i = 0; i < N; i++)
        t[i] = (every && i % every == 1) ? IGN : (int32_t)st_rng_below(&rng, (uint64_t)V);
    return t;
}

/* Double reference: mean NLL, per-row losses, and dlogits = (softmax - onehot) / count. */
static double ce_ref(const float *z, const int32_t *tg, int64_t N, int64_t V, double *rowloss, double *dz) {
    int64_t count = 0;
    for (int64_t r = 0; r < N; r++) count += tg[r] != IGN;
    double total = 0;
    for (int64_t r = 0; r < N; r++) {
        const float *zr = z + r * V;
        if (tg[r] == IGN) {
            rowloss[r] = 0;
            if (dz) for (int64_t j = 0; j < V; j++) dz[r * V + j] = 0;
            continue;
        }
        double m = zr[0], s = 0;
        for (int64_t j = 1; j < V; j++) m = zr[j] > m ? zr[j] : m;
        for (int64_t j = 0; j < V; j++) s += exp(zr[j] - m);
        double lse = m + log(s);
        rowloss[r] = lse - zr[tg[r]];
        total += rowloss[r];
        if (dz)
            for (int64_t j = 0; j < V; j++)
                dz[r * V + j] = (exp(zr[j] - lse) - (j == tg[r])) / (double)count;
    }
    return count ? total / (double)count : 0.0;
}


static st_tensor *build_ce(st_ctx *ctx, void *u) {
    args *a = u;
    return st_cross_entropy(ctx, a->a, a->ids, IGN, NULL);
}

static st_tensor *build_lce(st_ctx *ctx, void *u) {
    args *a = u;
    return st_linear_cross_entropy(ctx, a->a, a->b, a->ids, IGN, NULL);
}

/* ------------------------------------------------------- cross_entropy ---- */
static void test_cross_entropy(void) {
    /* (N,V) = (6,11) small, and (64,1000) for the parallel row loop; logits of spread 3 */
    const int64_t shapes[2][2] = {{6, 11}, {64, 1000}};
    for (int si = 0; si < 2; si++) {
        int64_t N = shapes[si][0], V = shapes[si][1];
        const int64_t spec[1][5] = {{2, N, V}};
        leaves L;
        leaves_init(&L, 30 + (uint64_t)si, 1, spec, 3.0f);
        int32_t *tg = make_targets(N, V, 3, 40 + (uint64_t)si);   /* rows 1, 4, 7, ... ignored */
        double *rl = malloc((size_t)N * sizeof(double)), *dz = malloc((size_t)(N * V) * sizeof(double));
        float *tok = malloc((size_t)N * sizeof(float));
        double ref = ce_ref(L.t[0]->data, tg, N, V, rl, dz);
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *loss = st_cross_entropy(ctx, L.t[0], tg, IGN, tok);
        CHECK(loss && loss->ndim == 1 && loss->shape[0] == 1);
        CHECK_NEAR(loss->data[0], ref, 2e-6 * fabs(ref));
        close_ref("cross_entropy tok_loss", tok, rl, N, 1e-6, 2e-6);
        st_error err = {0};
        CHECK(st_backward(ctx, loss, 1.0f, &err) == ST_OK);
        close_ref("cross_entropy dlogits", L.t[0]->grad, dz, N * V, 1e-7, 1e-5);
        env_close(&e);
        if (si == 0) {
            args a = {.a = L.t[0], .ids = tg};
            gradcheck("cross_entropy ignore_index", build_ce, &a, L.t, 1, 0, GC_EPS, GC_ATOL, GC_RTOL, 0);
        }
        free(tg); free(rl); free(dz); free(tok);
        st_params_free(&L.p);
    }

    /* every row ignored: loss 0, zero gradient, tok_loss 0 */
    const int64_t spec[1][5] = {{2, 3, 5}};
    leaves L;
    leaves_init(&L, 33, 1, spec, 1.0f);
    int32_t tg[3] = {IGN, IGN, IGN};
    float tok[3] = {1, 1, 1};
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *loss = st_cross_entropy(ctx, L.t[0], tg, IGN, tok);
    st_error err = {0};
    CHECK(loss && loss->data[0] == 0.0f && tok[0] == 0.0f && tok[2] == 0.0f);
    CHECK(st_backward(ctx, loss, 1.0f, &err) == ST_OK);
    int zero = 1;
    for (int i = 0; i < 15; i++) zero &= L.t[0]->grad[i] == 0.0f;
    CHECK_MSG(zero, "cross_entropy with all rows ignored has a non-zero gradient");
    env_close(&e);
    st_params_free(&L.p);
}

/* ------------------------------------------------ linear_cross_entropy ---- */
/* The fused op against st_linear + st_cross_entropy: loss, tok_loss, dx, dW, with an
 * upstream gradient != 1. N = 600 rows = 3 chunks (the last one partial). */
static void test_lce_matches_unfused(void) {
    const int64_t N = 600, C = 16, V = 50;
    const int64_t spec[2][5] = {{2, N, C}, {2, V, C}};
    leaves L;
    leaves_init(&L, 50, 2, spec, 1.0f);
    int32_t *tg = make_targets(N, V, 7, 51);
    float *tok1 = malloc((size_t)N * sizeof(float)), *tok2 = malloc((size_t)N * sizeof(float));
    float *g1 = malloc((size_t)(N * C + V * C) * sizeof(float));
    st_error err = {0};
    float l1 = 0, l2 = 0;
    for (int fused = 0; fused < 2; fused++) {
        st_params_zero_grad(&L.p);
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *loss = fused ? st_linear_cross_entropy(ctx, L.t[0], L.t[1], tg, IGN, tok2)
                                : st_cross_entropy(ctx, st_linear(ctx, L.t[0], L.t[1], NULL), tg, IGN, tok1);
        st_tensor *scaled = st_scale(ctx, loss, 2.5f);
        CHECK(st_backward(ctx, scaled, 1.0f, &err) == ST_OK);
        if (!fused) {
            l1 = loss->data[0];
            memcpy(g1, L.t[0]->grad, (size_t)(N * C) * sizeof(float));
            memcpy(g1 + N * C, L.t[1]->grad, (size_t)(V * C) * sizeof(float));
        } else {
            l2 = loss->data[0];
            /* same float logits up to sgemm blocking: agreement to ~1e-6 */
            CHECK_NEAR(l2, l1, 1e-6 * fabs(l1));
            th_close("lce tok_loss vs unfused", tok2, tok1, N, 1e-6, 1e-5);
            th_close("lce dx vs unfused", L.t[0]->grad, g1, N * C, 1e-7, 1e-4);
            th_close("lce dW vs unfused", L.t[1]->grad, g1 + N * C, V * C, 1e-7, 1e-4);
            /* nothing (N,V)-sized is kept for backward: dx (N,C) + dW (V,C) + a few bytes */
            CHECK_MSG(ctx->backward_bytes < (size_t)(N * C + V * C) * sizeof(float) + 4096 + (size_t)N * 8,
                      "backward bytes %zu", ctx->backward_bytes);
        }
        env_close(&e);
    }
    /* and against the double reference */
    double *z = malloc((size_t)(N * V) * sizeof(double)), *rl = malloc((size_t)N * sizeof(double));
    float *zf = malloc((size_t)(N * V) * sizeof(float));
    for (int64_t r = 0; r < N; r++)
        for (int64_t v = 0; v < V; v++) {
            double s = 0;
            for (int64_t c = 0; c < C; c++) s += (double)L.t[0]->data[r * C + c] * L.t[1]->data[v * C + c];
            z[r * V + v] = s;
            zf[r * V + v] = (float)s;
        }
    double ref = ce_ref(zf, tg, N, V, rl, NULL);
    CHECK_NEAR(l2, ref, 2e-6 * fabs(ref));
    close_ref("lce tok_loss vs double", tok2, rl, N, 1e-5, 1e-5);
    free(z); free(rl); free(zf);
    free(tg); free(tok1); free(tok2); free(g1);
    st_params_free(&L.p);
}

static void test_lce_gradcheck(void) {
    /* one chunk (5 rows), and 300 rows = 2 chunks with ignored rows (sampled elements) */
    const int64_t dims[2][3] = {{5, 4, 7}, {300, 4, 7}};
    for (int k = 0; k < 2; k++) {
        int64_t N = dims[k][0], C = dims[k][1], V = dims[k][2];
        const int64_t spec[2][5] = {{2, N, C}, {2, V, C}};
        leaves L;
        leaves_init(&L, 60 + (uint64_t)k, 2, spec, 1.0f);
        int32_t *tg = make_targets(N, V, 3, 62 + (uint64_t)k);
        args a = {.a = L.t[0], .b = L.t[1], .ids = tg};
        gradcheck(k ? "linear_cross_entropy 2 chunks" : "linear_cross_entropy", build_lce, &a, L.t, 2, 0,
                  GC_EPS, GC_ATOL, GC_RTOL, k ? 60 : 0);
        free(tg);
        st_params_free(&L.p);
    }
}

/* Only W needs a gradient (x is an activation without one), and all rows ignored. */
static void test_lce_partial_grad(void) {
    const int64_t N = 10, C = 6, V = 9;
    const int64_t spec[1][5] = {{2, V, C}};
    leaves L;
    leaves_init(&L, 70, 1, spec, 1.0f);
    int32_t *tg = make_targets(N, V, 4, 71);
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    st_tensor *x = st_new2(ctx, N, C);
    for (int64_t i = 0; i < N * C; i++) x->data[i] = 0.1f * (float)(i % 13) - 0.5f;
    st_tensor *loss = st_linear_cross_entropy(ctx, x, L.t[0], tg, IGN, NULL);
    st_error err = {0};
    CHECK(st_backward(ctx, loss, 1.0f, &err) == ST_OK);
    CHECK(x->grad == NULL);
    double *rl = malloc((size_t)N * sizeof(double));
    double *dz = malloc((size_t)(N * V) * sizeof(double)), *dw = calloc((size_t)(V * C), sizeof(double));
    float *zf = malloc((size_t)(N * V) * sizeof(float));
    for (int64_t r = 0; r < N; r++)
        for (int64_t v = 0; v < V; v++) {
            double s = 0;
            for (int64_t c = 0; c < C; c++) s += (double)x->data[r * C + c] * L.t[0]->data[v * C + c];
            zf[r * V + v] = (float)s;
        }
    double ref = ce_ref(zf, tg, N, V, rl, dz);
    CHECK_NEAR(loss->data[0], ref, 2e-6 * fabs(ref));
    for (int64_t r = 0; r < N; r++)
        for (int64_t v = 0; v < V; v++)
            for (int64_t c = 0; c < C; c++) dw[v * C + c] += dz[r * V + v] * x->data[r * C + c];
    close_ref("lce dW only", L.t[0]->grad, dw, V * C, 1e-6, 1e-5);
    free(rl); free(dz); free(dw); free(zf);

    /* all ignored */
    st_params_zero_grad(&L.p);
    st_ctx_begin(ctx, 1, 0);
    for (int64_t i = 0; i < N; i++) tg[i] = IGN;
    x = st_new2(ctx, N, C);
    memset(x->data, 0, (size_t)(N * C) * sizeof(float));
    loss = st_linear_cross_entropy(ctx, x, L.t[0], tg, IGN, NULL);
    CHECK(loss && loss->data[0] == 0.0f);
    CHECK(st_backward(ctx, loss, 1.0f, &err) == ST_OK);
    int zero = 1;
    for (int64_t i = 0; i < V * C; i++) zero &= L.t[0]->grad[i] == 0.0f;
    CHECK(zero);
    env_close(&e);
    free(tg);
    st_params_free(&L.p);
}

/* The fused head keeps what its backward reads (row losses, dx, dW) and rewinds its
 * chunk of logits: (rows, V) floats, here 64 x 5000, 16x dW's size. */
static void test_lce_scratch(void) {
    const int64_t N = 64, C = 4, V = 5000;
    const int64_t spec[2][5] = {{2, N, C}, {2, V, C}};
    leaves L;
    leaves_init(&L, 72, 2, spec, 1.0f);
    int32_t *tg = make_targets(N, V, 5, 73);
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    const size_t used = ctx->arena->used;
    st_tensor *loss = st_linear_cross_entropy(ctx, L.t[0], L.t[1], tg, IGN, NULL);
    const size_t kept = (size_t)N * sizeof(double) + (size_t)((N + V) * C) * sizeof(float) + 16384;
    CHECK(loss != NULL);
    CHECK_MSG(ctx->arena->used - used <= kept, "linear_cross_entropy kept %zu bytes (bound %zu)",
              ctx->arena->used - used, kept);
    env_close(&e);
    free(tg);
    st_params_free(&L.p);
}

/* ------------------------------------------------------- inference mode ---- */
static void test_inference_mode(void) {
    const int64_t B = 2, T = 4, H = 2, C = 8, V = 11;
    const int64_t spec[4][5] = {{3, B, T, C}, {2, C, C}, {1, C}, {2, V, C}};
    leaves L;
    leaves_init(&L, 80, 4, spec, 1.0f);
    st_tensor *x = L.t[0], *w = L.t[1], *b = L.t[2], *tab = L.t[3];
    int32_t ids[8] = {1, 2, 3, 1, 0, 10, 5, 5};
    env e;
    st_ctx *ctx = env_open(&e, 1, 1);
    st_ctx_begin(ctx, 0, 0);   /* inference: no grad, no dropout */
    int64_t s3[3] = {B, T, 3 * C};
    st_tensor *qkv = st_zeros(ctx, 3, s3);
    st_tensor *q, *k, *v;
    const st_tensor *outs[20];
    int n = 0;
    outs[n++] = st_linear(ctx, x, w, b);
    outs[n++] = st_matmul(ctx, x, w);
    outs[n++] = st_add(ctx, x, x);
    outs[n++] = st_bias(ctx, x, b);
    outs[n++] = st_scale(ctx, x, 2.0f);
    outs[n++] = st_embedding(ctx, ids, B, T, tab);
    outs[n++] = st_layernorm(ctx, x, b, b, 1e-5f);
    outs[n++] = st_gelu(ctx, x, 0);
    outs[n++] = st_gelu(ctx, x, 1);
    outs[n++] = st_dropout(ctx, x, 0.3f, 1);
    st_tensor *xh = st_split_heads(ctx, x, (int)H);
    outs[n++] = xh;
    outs[n++] = st_merge_heads(ctx, xh);
    outs[n++] = st_split_qkv(ctx, qkv, (int)H, &q, &k, &v) ? v : NULL;
    outs[n++] = st_rope(ctx, xh, 10000.0f, 0);
    outs[n++] = st_sum(ctx, x);
    outs[n++] = st_mean(ctx, x);
    outs[n++] = st_cross_entropy(ctx, st_linear(ctx, x, tab, NULL), ids, IGN, NULL);
    outs[n++] = st_linear_cross_entropy(ctx, x, tab, ids, IGN, NULL);
    int all = 1, req = 0;
    for (int i = 0; i < n; i++) { all &= outs[i] != NULL; if (outs[i] && outs[i] != x) req |= outs[i]->requires_grad; }
    CHECK_MSG(all, "an op returned NULL in inference mode");
    CHECK_MSG(ctx->n_nodes == 0, "inference mode recorded %d nodes", ctx->n_nodes);
    CHECK_MSG(ctx->backward_bytes == 0, "inference mode allocated %zu backward bytes", ctx->backward_bytes);
    CHECK(!req);
    CHECK(outs[9] == x);   /* dropout is the identity outside training */
    /* and the same ops in grad mode do record (sanity of the check above) */
    st_ctx_begin(ctx, 1, 1);
    CHECK(st_gelu(ctx, x, 0) && st_linear_cross_entropy(ctx, x, tab, ids, IGN, NULL) && ctx->n_nodes == 2);
    CHECK(ctx->backward_bytes > 0);
    env_close(&e);
    st_params_free(&L.p);
}

/* NULL inputs propagate as NULL (a failed op upstream) */
static void test_null_inputs(void) {
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    int32_t id = 0;
    st_tensor *q, *k, *v;
    CHECK(!st_linear(ctx, NULL, NULL, NULL) && !st_matmul(ctx, NULL, NULL) && !st_add(ctx, NULL, NULL));
    CHECK(!st_bias(ctx, NULL, NULL) && !st_scale(ctx, NULL, 1) && !st_embedding(ctx, &id, 1, 1, NULL));
    CHECK(!st_layernorm(ctx, NULL, NULL, NULL, 1e-5f) && !st_gelu(ctx, NULL, 0) && !st_dropout(ctx, NULL, 0.1f, 1));
    CHECK(!st_split_heads(ctx, NULL, 2) && !st_merge_heads(ctx, NULL) && !st_split_qkv(ctx, NULL, 2, &q, &k, &v));
    CHECK(!st_rope(ctx, NULL, 1e4f, 0) && !st_sum(ctx, NULL) && !st_mean(ctx, NULL));
    CHECK(!st_cross_entropy(ctx, NULL, &id, IGN, NULL) && !st_linear_cross_entropy(ctx, NULL, NULL, &id, IGN, NULL));
    CHECK(ctx->n_nodes == 0);
    env_close(&e);
}

/* Both losses ADD into existing gradients: starting from 0.25 shifts them by 0.25. */
static void test_loss_accumulates(void) {
    const int64_t N = 300, C = 4, V = 9;   /* 2 chunks in the fused op */
    const int64_t spec[3][5] = {{2, N, V}, {2, N, C}, {2, V, C}};
    leaves L;
    leaves_init(&L, 95, 3, spec, 1.0f);
    int32_t *tg = make_targets(N, V, 5, 96);
    float *g1 = malloc(L.p.n * sizeof(float));
    st_error err = {0};
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < L.p.n; i++) L.p.grad[i] = pass ? 0.25f : 0.0f;
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *l1 = st_cross_entropy(ctx, L.t[0], tg, IGN, NULL);
        st_tensor *l2 = st_linear_cross_entropy(ctx, L.t[1], L.t[2], tg, IGN, NULL);
        CHECK(st_backward(ctx, st_add(ctx, l1, st_scale(ctx, l2, 0.7f)), 1.0f, &err) == ST_OK);
        env_close(&e);
        if (!pass) { for (size_t i = 0; i < L.p.n; i++) g1[i] = L.p.grad[i] + 0.25f; }
        else th_close("losses accumulate into gradients", L.p.grad, g1, (int64_t)L.p.n, 1e-6, 1e-6);
    }
    free(g1); free(tg);
    st_params_free(&L.p);
}

/* Inference with ignored rows takes the scored-rows path (gathers the kept rows, runs the
 * head on them alone): the same loss and per-row losses as the grad-mode call, 0 for
 * ignored rows; sliding-window shape (only the last 8 of each 64
 * rows scored) and a sparse one, over more than one chunk of kept rows. */
static void test_lce_scored_rows(void) {
    const int64_t N = 1280, C = 16, V = 300;
    const int64_t spec[2][5] = {{2, N, C}, {2, V, C}};
    leaves L;
    leaves_init(&L, 60, 2, spec, 1.0f);
    for (int shape = 0; shape < 2; shape++) {
        int32_t *tg = make_targets(N, V, shape ? 5 : 0, 61);
        if (!shape)
            for (int64_t r = 0; r < N; r++) if (r % 64 < 56) tg[r] = IGN;   /* score the last 8 of 64 */
        float *tok_all = malloc((size_t)N * sizeof(float)), *tok_kept = malloc((size_t)N * sizeof(float));
        float loss[2];
        for (int grad = 1; grad >= 0; grad--) {
            env e;
            st_ctx *ctx = env_open(&e, grad, 0);
            st_tensor *l = st_linear_cross_entropy(ctx, L.t[0], L.t[1], tg, IGN, grad ? tok_all : tok_kept);
            CHECK(l != NULL);
            loss[grad] = l ? l->data[0] : NAN;
            env_close(&e);
        }
        CHECK_NEAR(loss[0], loss[1], 1e-6 * fabs(loss[1]));
        th_close("scored rows tok_loss vs every row", tok_kept, tok_all, N, 1e-6, 1e-5);
        int zeros = 1;
        for (int64_t r = 0; r < N; r++) if (tg[r] == IGN) zeros &= tok_kept[r] == 0.0f;
        CHECK_MSG(zeros, "ignored rows have a non-zero loss on the scored-rows path");
        free(tg); free(tok_all); free(tok_kept);
    }
    st_params_free(&L.p);
}

/* Answer-only training (most targets ignored) runs the head on the kept rows alone in
 * grad mode too: loss, dW and the kept rows' dx equal those of the same call on the kept
 * rows gathered by hand (bit for bit: the same products on the same rows), the ignored
 * rows' dx is 0, and all of it matches the double reference over the kept rows. Sparse
 * (1 row in 9 kept) and dense (1 in 5 ignored), over more than one chunk. */
static void test_lce_answer_only_grad(void) {
    const int64_t N = 900, C = 12, V = 40;
    for (int dense = 0; dense < 2; dense++) {
        const int64_t spec[2][5] = {{2, N, C}, {2, V, C}};
        leaves L;
        leaves_init(&L, 90 + (uint64_t)dense, 2, spec, 1.0f);
        int32_t *tg = make_targets(N, V, dense ? 5 : 0, 91);
        if (!dense)
            for (int64_t r = 0; r < N; r++) if (r % 9 != 4) tg[r] = IGN;
        int64_t K = 0;
        for (int64_t r = 0; r < N; r++) K += tg[r] != IGN;
        /* the masked call */
        env e;
        st_ctx *ctx = env_open(&e, 1, 0);
        st_tensor *loss = st_linear_cross_entropy(ctx, L.t[0], L.t[1], tg, IGN, NULL);
        st_error err = {0};
        CHECK(loss && st_backward(ctx, loss, 1.0f, &err) == ST_OK);
        const float lm = loss ? loss->data[0] : NAN;
        float *dx = malloc((size_t)(N * C) * sizeof(float)), *dw = malloc((size_t)(V * C) * sizeof(float));
        memcpy(dx, L.t[0]->grad, (size_t)(N * C) * sizeof(float));
        memcpy(dw, L.t[1]->grad, (size_t)(V * C) * sizeof(float));
        env_close(&e);
        /* the reference: the kept rows as their own leaf, no target ignored */
        const int64_t kspec[2][5] = {{2, K, C}, {2, V, C}};
        leaves R;
        leaves_init(&R, 92, 2, kspec, 1.0f);
        int32_t *tk = malloc((size_t)K * sizeof(int32_t));
        for (int64_t r = 0, k = 0; r < N; r++)
            if (tg[r] != IGN) {
                memcpy(R.t[0]->data + k * C, L.t[0]->data + r * C, (size_t)C * sizeof(float));
                tk[k++] = tg[r];
            }
        memcpy(R.t[1]->data, L.t[1]->data, (size_t)(V * C) * sizeof(float));
        ctx = env_open(&e, 1, 0);
        st_tensor *lk = st_linear_cross_entropy(ctx, R.t[0], R.t[1], tk, IGN, NULL);
        CHECK(lk && st_backward(ctx, lk, 1.0f, &err) == ST_OK);
        CHECK_MSG(lk && lk->data[0] == lm, "answer-only loss %.9g vs kept rows %.9g", lm, lk ? lk->data[0] : NAN);
        CHECK_MSG(memcmp(dw, R.t[1]->grad, (size_t)(V * C) * sizeof(float)) == 0, "dW differs from the kept rows'");
        int same = 1, zero = 1;
        for (int64_t r = 0, k = 0; r < N; r++) {
            if (tg[r] == IGN) { for (int64_t c = 0; c < C; c++) zero &= dx[r * C + c] == 0.0f; continue; }
            same &= memcmp(dx + r * C, R.t[0]->grad + k * C, (size_t)C * sizeof(float)) == 0;
            k++;
        }
        CHECK_MSG(same, "kept rows' dx differs from the kept-rows call");
        CHECK_MSG(zero, "an ignored row has a non-zero dx");
        env_close(&e);
        /* double reference over the kept rows: dW = sum_kept dz^T x, dx_kept = dz W */
        double *rl = malloc((size_t)K * sizeof(double)), *dz = malloc((size_t)(K * V) * sizeof(double));
        float *zf = malloc((size_t)(K * V) * sizeof(float));
        double *dwr = calloc((size_t)(V * C), sizeof(double)), *dxr = calloc((size_t)(K * C), sizeof(double));
        const float *xk = R.t[0]->data, *w = R.t[1]->data;
        for (int64_t r = 0; r < K; r++)
            for (int64_t v = 0; v < V; v++) {
                double acc = 0;
                for (int64_t c = 0; c < C; c++) acc += (double)xk[r * C + c] * w[v * C + c];
                zf[r * V + v] = (float)acc;
            }
        const double ref = ce_ref(zf, tk, K, V, rl, dz);
        CHECK_NEAR(lm, ref, 2e-6 * fabs(ref));
        for (int64_t r = 0; r < K; r++)
            for (int64_t v = 0; v < V; v++)
                for (int64_t c = 0; c < C; c++) {
                    dwr[v * C + c] += dz[r * V + v] * xk[r * C + c];
                    dxr[r * C + c] += dz[r * V + v] * w[v * C + c];
                }
        close_ref("answer-only dW vs double", dw, dwr, V * C, 1e-6, 1e-5);
        close_ref("answer-only kept dx vs double", R.t[0]->grad, dxr, K * C, 1e-6, 1e-5);
        free(rl); free(dz); free(zf); free(dwr); free(dxr);
        free(tk); free(tg); free(dx); free(dw);
        st_params_free(&R.p);
        st_params_free(&L.p);
    }
}

int main(void) {
    omp_set_num_threads(2);
    test_lce_answer_only_grad();
    test_cross_entropy();
    test_lce_matches_unfused();
    test_lce_gradcheck();
    test_lce_partial_grad();
    test_lce_scratch();
    test_lce_scored_rows();
    test_loss_accumulates();
    test_inference_mode();
    test_null_inputs();
    return test_finish("test_ops_loss");
}
