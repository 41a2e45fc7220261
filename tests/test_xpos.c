/* test_xpos.c - the xPos scale op (src/ops/xpos.c) and the xpos position method
 * (src/model/pos/xpos.c):
 *   - forward against a double reference of zeta_k^(sign (t - centre)/gamma), rotate-half
 *     pairing, at small and very large positions;
 *   - finite-difference gradient check (both signs) and accumulation;
 *   - RoPE + scale on q and k: q'_i.k'_j equals the double formula
 *     sum_pairs zeta_k^((i-j)/gamma) (rotated q_i . rotated k_j) for any centre, at
 *     positions near 20,000 where an uncentred scale (zeta_0^(i/gamma)) has underflowed;
 *   - the model (KV cache, eval) refuses lengths past its representable one naming
 *     model.xpos.gamma, and a forward at 20,000 tokens stays finite. */
#include "test_ops_util.h"
#include "test_model_util.h"

static double zeta(int64_t k, int64_t D) { return (2.0 * (double)k / (double)D + 0.4) / 1.4; }

typedef struct xargs { st_tensor *x; float gamma; int64_t pos0, centre; int sign; } xargs;
static st_tensor *build_xpos(st_ctx *ctx, void *u) {
    xargs *a = u;
    return st_xpos_scale(ctx, a->x, a->gamma, a->pos0, a->centre, a->sign);
}

static void test_op(void) {
    const int64_t B = 2, H = 3, T = 6, D = 8, n = B * H * T * D;
    const int64_t spec[1][5] = {{4, B, H, T, D}};
    leaves L;
    leaves_init(&L, 41, 1, spec, 1.0f);
    st_tensor *x = L.t[0];
    double *ref = malloc((size_t)n * sizeof(double));
    const struct { int64_t pos0, centre; float gamma; int sign; } cs[] = {
        {0, 0, 512.0f, 1}, {3, 0, 4.0f, -1}, {100000, 100002, 512.0f, 1}, {100000, 99000, 300.0f, -1}};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < D; c++) {
                    const double e = (double)cs[ci].sign * (double)(cs[ci].pos0 + t - cs[ci].centre) / cs[ci].gamma;
                    ref[(bh * T + t) * D + c] = x->data[(bh * T + t) * D + c] * pow(zeta(c % (D / 2), D), e);
                }
        env ev;
        st_ctx *ctx = env_open(&ev, 0, 0);
        st_tensor *y = st_xpos_scale(ctx, x, cs[ci].gamma, cs[ci].pos0, cs[ci].centre, cs[ci].sign);
        char what[96];
        snprintf(what, sizeof what, "xpos forward pos0=%lld centre=%lld sign=%d", (long long)cs[ci].pos0,
                 (long long)cs[ci].centre, cs[ci].sign);
        close_ref(what, y->data, ref, n, 1e-6, 1e-6);
        env_close(&ev);
    }
    for (int sign = -1; sign <= 1; sign += 2) {
        xargs a = {x, 3.0f, 5, 2, sign};
        gradcheck(sign > 0 ? "xpos scale (queries)" : "xpos scale (keys)", build_xpos, &a, L.t, 1, 0,
                  GC_EPS, GC_ATOL, GC_RTOL, 0);
        check_accumulates("xpos scale", build_xpos, &a, L.t, 1, 0);
    }
    free(ref);
    st_params_free(&L.p);
}

/* q'_i.k'_j = sum over pairs zeta_k^((i-j)/gamma) (R_i q).(R_j k) for the pair, at
 * positions pos0.. with any centre; rotation and scale in double as the reference. */
static void test_relative(void) {
    const int64_t T = 9, D = 8, half = D / 2, pos0 = 20000;
    const float gamma = 512.0f, base = 10000.0f;
    const int64_t spec[2][5] = {{4, 1, 1, T, D}, {4, 1, 1, T, D}};
    leaves L;
    leaves_init(&L, 43, 2, spec, 1.0f);
    const int64_t centres[3] = {pos0 + 4, pos0 - 3000, 0};
    for (int ci = 0; ci < 3; ci++) {
        env ev;
        st_ctx *ctx = env_open(&ev, 0, 0);
        st_tensor *q = st_xpos_scale(ctx, st_rope(ctx, L.t[0], base, pos0), gamma, pos0, centres[ci], 1);
        st_tensor *k = st_xpos_scale(ctx, st_rope(ctx, L.t[1], base, pos0), gamma, pos0, centres[ci], -1);
        double worst = 0;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++) {
                double got = 0, want = 0;
                for (int64_t c = 0; c < D; c++) got += (double)q->data[i * D + c] * (double)k->data[j * D + c];
                for (int64_t p = 0; p < half; p++) {
                    const double th = pow(base, -2.0 * (double)p / (double)D);
                    const double ai = (double)(pos0 + i) * th, aj = (double)(pos0 + j) * th;
                    const float *qi = L.t[0]->data + i * D, *kj = L.t[1]->data + j * D;
                    const double q1 = qi[p] * cos(ai) - qi[p + half] * sin(ai), q2 = qi[p + half] * cos(ai) + qi[p] * sin(ai);
                    const double k1 = kj[p] * cos(aj) - kj[p + half] * sin(aj), k2 = kj[p + half] * cos(aj) + kj[p] * sin(aj);
                    want += pow(zeta(p, D), (double)(i - j) / gamma) * (q1 * k1 + q2 * k2);
                }
                const double d = fabs(got - want);
                TH_MAX(worst, d);
            }
        if (ci < 2)
            CHECK_MSG(worst < 1e-4, "xpos: q'.k' depends on i - j only (centre %lld, positions %lld..): max err %.2e",
                      (long long)centres[ci], (long long)pos0, worst);
        else   /* without a centre the keys' factor zeta_0^(-20000/512) = e^49 and the
                * queries' e^-49: products still fine, but at 40k they would overflow */
            CHECK_MSG(worst < 1e-3, "xpos: centre 0 at position 20000 still representable (err %.2e)", worst);
        env_close(&ev);
    }
    st_params_free(&L.p);
}

/* The model: a forward at 20,000 tokens is finite; past the limit the method refuses. */
static void test_model_lengths(void) {
    st_model_config c;
    base_cfg(&c, ST_POS_XPOS);
    c.xpos_gamma = 512.0f;
    const int64_t lim = st_pos_max_len(&c);
    CHECK_MSG(lim > 20000 && lim < 40000, "xpos, gamma 512: representable length %lld", (long long)lim);
    c.xpos_gamma = 4.0f;
    CHECK_MSG(st_pos_max_len(&c) < 200, "xpos, gamma 4: representable length %lld", (long long)st_pos_max_len(&c));
    c.xpos_gamma = 512.0f;
    st_model m;
    make_model_cfg(&m, &c, 5);
    const int64_t T = 20000;
    int32_t *ids = malloc((size_t)T * sizeof(int32_t));
    rand_ids(ids, T, c.vocab_size, 6);
    st_arena ar;
    st_ctx ctx;
    st_error e = {0};
    ST_ASSERT(st_arena_init(&ar, 1 << 24, (size_t)2 << 30, &e) == ST_OK);
    ST_ASSERT(st_ctx_init(&ctx, &ar, 4096, &e) == ST_OK);
    st_ctx_begin(&ctx, 0, 0);
    st_tensor *lg = st_model_logits(&m, &ctx, ids, 1, T, 0, &e);
    int finite = lg != NULL;
    for (int64_t i = 0; finite && i < T * c.vocab_size; i++) finite = isfinite(lg->data[i]);
    CHECK_MSG(finite, "xpos: logits at %lld tokens are finite", (long long)T);
    st_kv_cache kv;
    CHECK(st_kv_cache_init(&kv, &m, lim + 1, ST_PREC_FP32, &e) == ST_ERR_CONFIG && strstr(e.msg, "model.xpos.gamma"));
    /* eval past the limit: refused before any forward, naming the key */
    int32_t *more = malloc((size_t)(lim + 2) * sizeof(int32_t));
    rand_ids(more, lim + 2, c.vocab_size, 8);
    st_eval_result er;
    st_error_clear(&e);
    CHECK(st_eval_run(&m, more, lim + 2, lim + 1, lim + 1, NULL, &er, &e) == ST_ERR_CONFIG &&
          strstr(e.msg, "model.xpos.gamma") && strstr(e.msg, "xpos positions represent at most"));
    free(more);
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    free(ids);
    st_model_free(&m);
    c.xpos_gamma = 0.0f;
    st_error_clear(&e);
    CHECK(st_model_config_validate(&c, "x.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "model.xpos.gamma"));
    base_cfg(&c, ST_POS_XPOS);
    c.d_model = 6; c.n_heads = 2;
    st_error_clear(&e);
    CHECK(st_model_config_validate(&c, "x.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "even head size"));
}

int main(void) {
    test_op();
    test_relative();
    test_model_lengths();
    return test_finish("test_xpos");
}
