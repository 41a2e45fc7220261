/* test_bf16.c - precision bf16: the rounding function, the oneDNN GEMM backend, and the
 * linear and fused LM-head + loss ops in bf16 against the same ops in fp32 (attention:
 * tests/test_bf16_attention.c).
 *
 * Tolerances, from bf16's 8-bit significand (7 stored bits + the implicit one, p = 8):
 *   - round to nearest even has unit roundoff u = 2^-p = 2^-8: |bf16(a) - a| <= 2^-8 |a|
 *     for normal a (half the 2^-7 spacing between bf16 numbers in [1, 2); checked below
 *     on a million random floats);
 *   - a product of two rounded inputs has relative error <= 2u + u^2 ~ 2^-7;
 *   - a K-term dot product accumulated in fp32 therefore differs from the fp32 one by
 *       |err| <= 2^-7 sum_k |a_k||b_k|  (+ fp32 accumulation, ~K 2^-24 sum |a_k b_k|)
 *     whose worst case is K 2^-7 max|a||b|; with independent rounding errors of either
 *     sign (relative standard deviation ~0.41 u per input, so ~0.58 u per product) the
 *     typical error is ~0.6 2^-8 sqrt(sum_k (a_k b_k)^2) ~ sqrt(K) 2^-8 |a||b|.
 *   Every product below is checked element by element against the worst-case bound
 *   (times 1.02 for the second-order term, plus 1e-6 relative for fp32 accumulation) and
 *   in RMS against 2^-8 sqrt(sum_k (a_k b_k)^2), ~1.7x the typical value: a backend
 *   that truncated instead of rounding (error 2u one-sided) fails the second.
 *   - the fused LM head: a logit error E <= 2^-7 max_r,v sum_k |x_rk||W_vk| moves each row
 *     loss by at most 2E (log-sum-exp and z_t are 1-Lipschitz in max norm) and each
 *     softmax row by at most 2E in L1; the gradient bounds below add that term.
 * Reference kernels in this file are plain double loops (test code, not library GEMMs). */
#include "test_ops_util.h"

#include <omp.h>
#include <stdint.h>

#define TWO_M8 (1.0 / 256.0)   /* u: typical scale (RMS check) */
#define TWO_M7 (1.0 / 128.0)   /* 2u: worst-case relative error of a product */

/* ------------------------------------------------------------ rounding ---- */
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Reference RNE on finite floats, from the definition: the two bf16 neighbours
 * (truncation and the next one up in magnitude), the nearer wins, on a tie the one with
 * an even last bit. Computed in double. */
static uint16_t ref_round(float f) {
    uint32_t u = bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double x = fabs((double)f), a = fabs((double)st_bf16_to_f32(lo));
    double b = (hi & 0x7f80) == 0x7f80 ? ldexp(1.0, 128) : fabs((double)st_bf16_to_f32(hi));
    if (x - a < b - x) return lo;
    if (x - a > b - x) return hi;
    return (lo & 1) ? hi : lo;
}

static void test_rounding(void) {
    /* exact values, ties, carries, specials */
    struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 exact */
        {0x3f808000u, 0x3f80}, /* 1 + 2^-8: tie, 0x3f80 is even: down */
        {0x3f818000u, 0x3f82}, /* 1 + 3 2^-8: tie, 0x3f81 odd: up to even */
        {0x3f808001u, 0x3f81}, /* just above the tie: up */
        {0x3f807fffu, 0x3f80}, /* just below: down */
        {0xbf808001u, 0xbf81}, /* negative: magnitude rounds the same way */
        {0x3fffffffu, 0x4000}, /* carry into the exponent */
        {0x7f7fffffu, 0x7f80}, /* largest float rounds to +Inf */
        {0x7f7f7fffu, 0x7f7f}, /* ... and just below the midpoint stays finite */
        {0x7f800000u, 0x7f80}, /* +Inf */
        {0xff800000u, 0xff80}, /* -Inf */
        {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, /* +-0 */
        {0x00000001u, 0x0000}, /* smallest subnormal: down to 0 */
        {0x00018000u, 0x0002}, /* subnormal tie, odd: up */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(st_f32_to_bf16(from_bits(cases[i].in)) == cases[i].out, "bf16(0x%08x) = 0x%04x, expected 0x%04x",
                  cases[i].in, st_f32_to_bf16(from_bits(cases[i].in)), cases[i].out);
    /* NaNs stay NaN (also those whose payload is only in the dropped bits), sign kept */
    uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f80ffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = st_f32_to_bf16(from_bits(nans[i]));
        CHECK_MSG(isnan(st_bf16_to_f32(h)) && (h >> 15) == (nans[i] >> 31), "NaN 0x%08x -> 0x%04x", nans[i], h);
    }
    /* random bit patterns against the reference; relative error <= 2^-8 for normals */
    st_rng rng;
    st_rng_seed(&rng, 5);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)st_rng_u64(&rng);
        float f = from_bits(u);
        if (!isfinite(f)) continue;
        uint16_t h = st_f32_to_bf16(f);
        if (h != ref_round(f) && !bad++) fprintf(stderr, "bf16(0x%08x) = 0x%04x, reference 0x%04x\n", u, h, ref_round(f));
        if (fabs(f) >= 1.1754943508222875e-38 && isfinite(st_bf16_to_f32(h))) {
            double rel = fabs((double)st_bf16_to_f32(h) - f) / fabs((double)f);
            TH_MAX(worst, rel);
        }
    }
    CHECK(bad == 0);
    CHECK_MSG(worst <= ldexp(1.0, -8), "max relative rounding error %.3g > 2^-8", worst);
    CHECK(worst > ldexp(1.0, -9));   /* the bound is attained: u really is 2^-8 */
    /* the array version (threaded) equals the scalar one */
    int64_t n = 200000;
    float *x = malloc((size_t)n * sizeof(float));
    uint16_t *h = malloc((size_t)n * sizeof(uint16_t));
    fill_normal(x, n, 9, 3.0f, 0.0f);
    st_bf16_round(h, x, n);
    int same = 1;
    for (int64_t i = 0; i < n; i++) same &= h[i] == st_f32_to_bf16(x[i]);
    CHECK(same);
    free(x);
    free(h);
}

/* ---------------------------------------------------------------- GEMM ---- */
/* Operand element (i, j) of op(x) where x is stored (trans ? transposed : as is), ld. */
static double opel(const float *x, int trans, int64_t ld, int64_t i, int64_t j) {
    return trans ? x[j * ld + i] : x[i * ld + j];
}

/* Check c_bf16 (M,N) = alpha op(a) op(b) + beta c0 against fp32 semantics with the bound
 * of the header. Returns 1 when within. */
static int check_product(const char *what, const float *c, const float *c0, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *a, int ta, int64_t lda, const float *b, int tb, int64_t ldb,
                         float beta, int64_t ldc) {
    double sq = 0;
    int ok = 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sabs = 0, s2 = 0;
            for (int64_t k = 0; k < K; k++) {
                double t = opel(a, ta, lda, i, k) * opel(b, tb, ldb, k, j);
                s += t; sabs += fabs(t); s2 += t * t;
            }
            double ref = alpha * s + (beta != 0.0f ? beta * c0[i * ldc + j] : 0.0);
            double err = fabs((double)c[i * ldc + j] - ref);
            double bound = 1.02 * TWO_M7 * fabs(alpha) * sabs + 1e-6 * (1 + fabs(ref));
            if (err > bound && ok) {
                fprintf(stderr, "FAIL %s: (%lld,%lld) %.7g vs %.7g, bound %.3g\n", what, (long long)i,
                        (long long)j, c[i * ldc + j], ref, bound);
                ok = 0;
            }
            if (s2 > 0) sq += err * err / (alpha * alpha * s2);
        }
    double rms = sqrt(sq / (double)(M * N));
    printf("%s: RMS error / sqrt(sum (a b)^2) = %.3g 2^-8\n", what, rms / TWO_M8);
    if (rms > TWO_M8) { fprintf(stderr, "FAIL %s: RMS relative error %.3g > 2^-8\n", what, rms); ok = 0; }
    return ok;
}

/* Every transpose, alpha and beta of one shape, with ldc padding; ready bf16 copies and a
 * packed weight give the same bits as rounding inside; repeated calls too. */
static void gemm_shape(st_mm *mm, int64_t M, int64_t N, int64_t K) {
    const int64_t ldc = N + 3;
    float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
    float *c = malloc(sizeof(float) * (size_t)(M * ldc)), *c0 = malloc(sizeof(float) * (size_t)(M * ldc));
    float *c2 = malloc(sizeof(float) * (size_t)(M * ldc));
    uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)(M * K)), *bh = malloc(sizeof(uint16_t) * (size_t)(K * N));
    fill_normal(a, M * K, 1, 1.0f, 0.1f);
    fill_normal(b, K * N, 2, 0.5f, 0.0f);
    fill_normal(c0, M * ldc, 3, 1.0f, 0.0f);
    const size_t cb = sizeof(float) * (size_t)(M * ldc);
    uint64_t ver = 1;
    for (int t = 0; t < 8; t++) {
        int ta = t & 1, tb = (t >> 1) & 1, acc = t >> 2;
        float alpha = acc ? 0.75f : 1.0f, beta = acc ? 1.0f : 0.0f;
        int64_t lda = ta ? M : K, ldb = tb ? K : N;
        memcpy(c, c0, cb);
        st_mm_gemm(mm, M, N, K, alpha, st_mm_a(a, NULL, ta, lda), st_mm_a(b, NULL, tb, ldb), beta, c, ldc);
        char what[96];
        snprintf(what, sizeof what, "bf16 gemm %lldx%lldx%lld ta %d tb %d alpha %g beta %g", (long long)M,
                 (long long)N, (long long)K, ta, tb, alpha, beta);
        CHECK_MSG(check_product(what, c, c0, M, N, K, alpha, a, ta, lda, b, tb, ldb, beta, ldc), "%s", what);
        /* columns past N (ldc padding) untouched */
        int pad = 1;
        for (int64_t i = 0; i < M; i++) for (int64_t j = N; j < ldc; j++) pad &= c[i * ldc + j] == c0[i * ldc + j];
        CHECK_MSG(pad, "%s: wrote into the ldc padding", what);
        /* ready bf16 copies (shadows) give the same bits as rounding inside */
        st_bf16_round(ah, a, M * K);
        st_bf16_round(bh, b, K * N);
        memcpy(c2, c0, cb);
        st_mm_gemm(mm, M, N, K, alpha, st_mm_a(a, ah, ta, lda), st_mm_a(b, bh, tb, ldb), beta, c2, ldc);
        CHECK_MSG(memcmp(c, c2, cb) == 0, "%s: shadow operands differ", what);
        /* ... and so does b as a weight, kept packed in the kernel's layout */
        memcpy(c2, c0, cb);
        st_mm_gemm(mm, M, N, K, alpha, st_mm_a(a, ah, ta, lda), st_mm_w(b, bh, &ver, tb, ldb), beta, c2, ldc);
        CHECK_MSG(memcmp(c, c2, cb) == 0, "%s: packed weight differs", what);
        ver++;   /* the next case rounds b in another orientation: a new shadow version */
        /* deterministic: the same call again gives the same bits */
        memcpy(c2, c0, cb);
        st_mm_gemm(mm, M, N, K, alpha, st_mm_a(a, NULL, ta, lda), st_mm_a(b, NULL, tb, ldb), beta, c2, ldc);
        CHECK_MSG(memcmp(c, c2, cb) == 0, "%s: not deterministic", what);
    }
    free(a); free(b); free(c); free(c0); free(c2); free(ah); free(bh);
}

static void test_gemm(st_mm *mm) {
    gemm_shape(mm, 37, 29, 61);
    /* a reduction >= 16x both output sides (the LM head's dx): with AMX the backend
     * computes the transposed product and writes it back; both forms, whatever the CPU */
    const int long_k = st_mm_long_k(mm);
    for (int t = 0; t < 2; t++) {
        st_mm_set_long_k(mm, t);
        CHECK(st_mm_long_k(mm) == (st_mm_native(mm) ? t : 0));   /* emulated: no such path */
        gemm_shape(mm, 9, 7, 160);
    }
    st_mm_set_long_k(mm, long_k);
    const int64_t M = 37, N = 29, K = 61;
    float *a = malloc(sizeof(float) * 64 * 64), *b = malloc(sizeof(float) * 64 * 64);
    float *c = malloc(sizeof(float) * 64 * 64), *c0 = malloc(sizeof(float) * 64 * 64);
    fill_normal(a, 64 * 64, 1, 1.0f, 0.1f);
    fill_normal(b, 64 * 64, 2, 0.5f, 0.0f);
    fill_normal(c0, 64 * 64, 3, 1.0f, 0.0f);
    /* a strided (ld > row length) operand without a shadow is rounded row by row */
    memcpy(c, c0, sizeof(float) * 64 * 64);
    st_mm_gemm(mm, M, N, K, 1.0f, st_mm_a(a, NULL, 0, 64), st_mm_a(b, NULL, 0, 64), 0.0f, c, N);
    CHECK(check_product("bf16 gemm strided", c, c0, M, N, K, 1.0f, a, 0, 64, b, 0, 64, 0.0f, N));
    /* one row (decoding) */
    memcpy(c, c0, sizeof(float) * 64 * 64);
    st_mm_gemm(mm, 1, N, K, 1.0f, st_mm_a(a, NULL, 0, K), st_mm_a(b, NULL, 1, K), 0.0f, c, N);
    CHECK(check_product("bf16 gemm one row", c, c0, 1, N, K, 1.0f, a, 0, K, b, 1, K, 0.0f, N));
    CHECK(strlen(st_mm_last_impl(mm)) > 0);
    printf("bf16 backend: %s; last kernel %s\n", st_mm_describe(mm), st_mm_last_impl(mm));
    free(a); free(b); free(c); free(c0);
}

/* Batches laid out like attention's per-(batch, head) products: q (count, T, D) blocks of
 * M rows, k (count, T, D) used transposed, scores c (count, M, ldc) with a batch stride
 * (the backend stages such a c densely and merges it: beta 1 and 0 both checked);
 * every product of the batch within the bound, fp32 batches equal to single calls. */
static void test_batched(st_mm *mm) {
    const int64_t count = 6, T = 40, D = 16, M = 24, N = 40, ldc = 48, cstride = 24 * 48 + 8;
    float *q = malloc(sizeof(float) * (size_t)(count * T * D)), *k = malloc(sizeof(float) * (size_t)(count * T * D));
    float *c = malloc(sizeof(float) * (size_t)(count * cstride)), *c0 = malloc(sizeof(float) * (size_t)(count * cstride));
    float *c1 = malloc(sizeof(float) * (size_t)(count * cstride));
    fill_normal(q, count * T * D, 41, 1.0f, 0.0f);
    fill_normal(k, count * T * D, 42, 1.0f, 0.0f);
    fill_normal(c0, count * cstride, 43, 1.0f, 0.0f);
    st_mm_batch bt = {count, T * D, T * D, cstride};
    for (int p = 0; p < 3; p++) {   /* fp32; bf16 accumulating into c; bf16 overwriting c */
        st_mm *m = p ? mm : NULL;
        float alpha = 0.25f, beta = p == 1 ? 1.0f : 0.0f;
        /* S_i (M, N) = alpha Q_i[8:8+M] K_i^T (+ beta S_i) */
        memcpy(c, c0, sizeof(float) * (size_t)(count * cstride));
        st_mm_gemm_batched(m, bt, M, N, D, alpha, st_mm_a(q + 8 * D, NULL, 0, D), st_mm_a(k, NULL, 1, D), beta, c, ldc);
        int ok = 1;
        for (int64_t i = 0; i < count; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s batched product %lld", p ? "bf16" : "fp32", (long long)i);
            if (p) ok &= check_product(what, c + i * cstride, c0 + i * cstride, M, N, D, alpha, q + i * T * D + 8 * D, 0,
                                       D, k + i * T * D, 1, D, beta, ldc);
        }
        CHECK_MSG(ok, "%s batched products", p ? "bf16" : "fp32");
        /* the same products one by one */
        memcpy(c1, c0, sizeof(float) * (size_t)(count * cstride));
        for (int64_t i = 0; i < count; i++)
            st_mm_gemm(m, M, N, D, alpha, st_mm_a(q + i * T * D + 8 * D, NULL, 0, D), st_mm_a(k + i * T * D, NULL, 1, D),
                       beta, c1 + i * cstride, ldc);
        if (!p) {
            CHECK_MSG(memcmp(c, c1, sizeof(float) * (size_t)(count * cstride)) == 0, "fp32 batch == single calls");
        } else {
            CHECK(th_close("bf16 batch vs single calls", c, c1, count * cstride, 1e-5, 1e-5));
            int gaps = 1;   /* the batch stride's gaps and the ldc padding are untouched */
            for (int64_t i = 0; i < count; i++) {
                for (int64_t r = 0; r < M; r++)
                    for (int64_t j = N; j < ldc; j++) gaps &= c[i * cstride + r * ldc + j] == c0[i * cstride + r * ldc + j];
                for (int64_t j = M * ldc; j < cstride; j++) gaps &= c[i * cstride + j] == c0[i * cstride + j];
            }
            CHECK_MSG(gaps, "bf16 batch wrote outside its matrices");
        }
    }
    free(q); free(k); free(c); free(c0); free(c1);
}

/* The fp32 backend's one-row path (cblas_sgemv) against sgemm semantics, all transposes. */
static void test_fp32_gemv(void) {
    st_mm *mm = NULL;
    st_error e = {0};
    CHECK(st_mm_create(&mm, ST_PREC_FP32, 1, &e) == ST_OK);
    CHECK(!st_mm_bf16_operands(mm) && st_mm_row_align(mm) == 16 && st_mm_parallel_safe(mm));
    const int64_t N = 33, K = 47;
    float a[47 * 2], b[47 * 33], c[33], c0[33];
    fill_normal(a, 94, 4, 1.0f, 0.0f);
    fill_normal(b, 47 * 33, 5, 1.0f, 0.0f);
    fill_normal(c0, 33, 6, 1.0f, 0.0f);
    for (int t = 0; t < 8; t++) {
        int ta = t & 1, tb = (t >> 1) & 1;
        float beta = (t >> 2) ? 1.0f : 0.0f;
        int64_t lda = ta ? 2 : K, ldb = tb ? K : N;   /* a transposed: a column of a (K,2) */
        memcpy(c, c0, sizeof c);
        if (beta == 0.0f) c[5] = NAN;   /* beta 0: c may hold anything */
        st_mm_gemm(mm, 1, N, K, 1.0f, st_mm_a(a, NULL, ta, lda), st_mm_a(b, NULL, tb, ldb), beta, c, N);
        int ok = 1;
        for (int64_t j = 0; j < N; j++) {
            double s = beta * c0[j];
            for (int64_t k = 0; k < K; k++) s += opel(a, ta, lda, 0, k) * opel(b, tb, ldb, k, j);
            ok &= fabs(c[j] - s) <= 1e-5 * (1 + fabs(s));
        }
        CHECK_MSG(ok, "fp32 one-row product ta %d tb %d beta %g", ta, tb, beta);
    }
    CHECK(strcmp(st_mm_last_impl(mm), "cblas_sgemv") == 0);
    st_mm_free(mm);
}

/* K = 0: no product, c = beta c, for one row (the sgemv path returned c unscaled) and
 * more, every transpose, fp32 and the backend mm (review 45). */
static void test_k_zero(st_mm *mm, const char *what) {
    float a[1] = {0}, b[1] = {0};
    for (int t = 0; t < 8; t++) {
        const int ta = t & 1, tb = (t >> 1) & 1;
        const float beta = (t >> 2) ? 0.5f : 0.0f;
        for (int64_t M = 1; M <= 3; M += 2) {
            float c[3 * 5];
            for (int i = 0; i < 15; i++) c[i] = 2.0f;
            if (beta == 0.0f) c[1] = NAN;   /* beta 0: c may hold anything */
            st_mm_gemm(mm, M, 5, 0, 1.0f, st_mm_a(a, NULL, ta, 1), st_mm_a(b, NULL, tb, 1), beta, c, 5);
            int ok = 1;
            for (int i = 0; i < M * 5; i++) ok &= c[i] == 2.0f * beta;
            CHECK_MSG(ok, "%s: K = 0, M %lld, ta %d tb %d beta %g: c = beta c", what, (long long)M, ta, tb, beta);
        }
    }
}

/* -------------------------------------------------------------- linear ---- */
/* y = x W^T + b and its gradients under fp32 and bf16, same inputs and upstream dy. */
typedef struct lin_run { float *y, *dx, *dw, *db; } lin_run;

static void run_linear(st_mm *mm, leaves *L, const float *dy, int64_t N, int64_t IN, int64_t OUT,
                       int shadow, lin_run *r) {
    for (int i = 0; i < 3; i++) memset(L->t[i]->grad, 0, (size_t)st_numel(L->t[i]) * sizeof(float));
    if (shadow) ST_ASSERT(st_params_enable_bf16(&L->p, NULL) == ST_OK);
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    ctx->mm = mm;
    st_tensor *y = st_linear(ctx, L->t[0], L->t[1], L->t[2]);
    r->y = malloc((size_t)(N * OUT) * sizeof(float));
    memcpy(r->y, y->data, (size_t)(N * OUT) * sizeof(float));
    backward_from(ctx, y, dy);
    env_close(&e);
    r->dx = malloc((size_t)(N * IN) * sizeof(float));
    r->dw = malloc((size_t)(OUT * IN) * sizeof(float));
    r->db = malloc((size_t)OUT * sizeof(float));
    memcpy(r->dx, L->t[0]->grad, (size_t)(N * IN) * sizeof(float));
    memcpy(r->dw, L->t[1]->grad, (size_t)(OUT * IN) * sizeof(float));
    memcpy(r->db, L->t[2]->grad, (size_t)OUT * sizeof(float));
    for (int i = 0; i < L->p.count; i++) L->p.tensors[i].bf16 = NULL;
}

static void lin_free(lin_run *r) { free(r->y); free(r->dx); free(r->dw); free(r->db); }

/* |got - fp32| element by element against 1.02 2^-7 sum_k |a_ik||b_kj| + 1e-6. */
static int within_bound(const char *what, const float *got, const float *f32, int64_t M, int64_t N, int64_t K,
                        const float *a, int ta, int64_t lda, const float *b, int tb, int64_t ldb) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double sabs = 0;
            for (int64_t k = 0; k < K; k++) sabs += fabs(opel(a, ta, lda, i, k) * opel(b, tb, ldb, k, j));
            double err = fabs((double)got[i * N + j] - f32[i * N + j]);
            double bound = 1.02 * TWO_M7 * sabs + 1e-6 * (1 + fabs(f32[i * N + j]));
            if (err > bound) {
                fprintf(stderr, "FAIL %s: (%lld,%lld) bf16 %.7g fp32 %.7g, bound %.3g\n", what, (long long)i,
                        (long long)j, got[i * N + j], f32[i * N + j], bound);
                return 0;
            }
        }
    return 1;
}

static void test_linear(st_mm *bf) {
    const int64_t N = 48, IN = 40, OUT = 24;
    const int64_t spec[3][5] = {{2, N, IN}, {2, OUT, IN}, {1, OUT}};
    leaves L;
    leaves_init(&L, 11, 3, spec, 1.0f);
    float *dy = malloc((size_t)(N * OUT) * sizeof(float));
    fill_normal(dy, N * OUT, 12, 1.0f, 0.0f);
    lin_run f, h, hs;
    run_linear(NULL, &L, dy, N, IN, OUT, 0, &f);
    run_linear(bf, &L, dy, N, IN, OUT, 0, &h);
    run_linear(bf, &L, dy, N, IN, OUT, 1, &hs);
    const float *x = L.t[0]->data, *w = L.t[1]->data;
    /* y - b = x W^T; the bias is added in fp32 (sum post-op) */
    CHECK(within_bound("linear y", h.y, f.y, N, OUT, IN, x, 0, IN, w, 1, IN));
    CHECK(within_bound("linear dx", h.dx, f.dx, N, IN, OUT, dy, 0, OUT, w, 0, IN));
    CHECK(within_bound("linear dW", h.dw, f.dw, OUT, IN, N, dy, 1, OUT, x, 0, IN));
    CHECK(th_close("linear db (fp32 in both)", h.db, f.db, OUT, 0, 0));
    /* the bf16 results differ from fp32 at all (the path is really taken) */
    CHECK(memcmp(h.y, f.y, (size_t)(N * OUT) * sizeof(float)) != 0);
    /* the weight's shadow gives exactly what rounding at use gives */
    CHECK(memcmp(h.y, hs.y, (size_t)(N * OUT) * sizeof(float)) == 0);
    CHECK(memcmp(h.dx, hs.dx, (size_t)(N * IN) * sizeof(float)) == 0);
    CHECK(memcmp(h.dw, hs.dw, (size_t)(OUT * IN) * sizeof(float)) == 0);
    lin_free(&f); lin_free(&h); lin_free(&hs);
    free(dy);
    st_params_free(&L.p);
}

/* ------------------------------------------------ linear_cross_entropy ---- */
typedef struct lce_run { double loss; float *dx, *dw; } lce_run;

static void run_lce(st_mm *mm, leaves *L, const int32_t *tg, int64_t N, int64_t C, int64_t V, lce_run *r) {
    for (int i = 0; i < 2; i++) memset(L->t[i]->grad, 0, (size_t)st_numel(L->t[i]) * sizeof(float));
    env e;
    st_ctx *ctx = env_open(&e, 1, 0);
    ctx->mm = mm;
    st_tensor *loss = st_linear_cross_entropy(ctx, L->t[0], L->t[1], tg, -1, NULL);
    r->loss = loss->data[0];
    st_error err = {0};
    ST_ASSERT(st_backward(ctx, loss, 1.0f, &err) == ST_OK);
    env_close(&e);
    r->dx = malloc((size_t)(N * C) * sizeof(float));
    r->dw = malloc((size_t)(V * C) * sizeof(float));
    memcpy(r->dx, L->t[0]->grad, (size_t)(N * C) * sizeof(float));
    memcpy(r->dw, L->t[1]->grad, (size_t)(V * C) * sizeof(float));
}

static void test_lce(st_mm *bf) {
    /* N > CE_CHUNK (256) rows: two chunks, the second accumulating into dW */
    const int64_t N = 300, C = 32, V = 50;
    const int64_t spec[2][5] = {{2, N, C}, {2, V, C}};
    leaves L;
    leaves_init(&L, 21, 2, spec, 0.5f);
    int32_t *tg = malloc((size_t)N * sizeof(int32_t));
    st_rng rng;
    st_rng_seed(&rng, 22);
    int64_t count = 0;
    for (int64_t i = 0; i < N; i++) { tg[i] = i % 7 == 3 ? -1 : (int32_t)st_rng_below(&rng, (uint64_t)V); count += tg[i] >= 0; }
    lce_run f, h;
    run_lce(NULL, &L, tg, N, C, V, &f);
    ST_ASSERT(st_params_enable_bf16(&L.p, NULL) == ST_OK);   /* W from its shadow */
    run_lce(bf, &L, tg, N, C, V, &h);
    const float *x = L.t[0]->data, *w = L.t[1]->data;
    /* E: the largest logit error bound; dz = (softmax - onehot) / count from fp32 */
    double E = 0;
    double *dz = calloc((size_t)(N * V), sizeof(double));
    for (int64_t r = 0; r < N; r++) {
        double z[64], m = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; v++) {
            double dot = 0, sabs = 0;
            for (int64_t k = 0; k < C; k++) { dot += (double)x[r * C + k] * w[v * C + k]; sabs += fabs((double)x[r * C + k] * w[v * C + k]); }
            z[v] = dot;
            m = fmax(m, dot);
            E = fmax(E, TWO_M7 * sabs);
        }
        if (tg[r] < 0) continue;
        for (int64_t v = 0; v < V; v++) s += exp(z[v] - m);
        for (int64_t v = 0; v < V; v++) dz[r * V + v] = (exp(z[v] - m) / s - (v == tg[r])) / (double)count;
    }
    CHECK_MSG(fabs(h.loss - f.loss) <= 2.0 * 1.02 * E, "LCE loss bf16 %.7g fp32 %.7g, bound %.3g", h.loss, f.loss, 2.04 * E);
    CHECK(h.loss != f.loss);
    /* dx_rj = sum_v dz_rv W_vj: product rounding 2^-7 sum_v |dz_rv||W_vj| plus the softmax
     * perturbation ||d dz_r||_1 <= 2E / count times max_v |W_vj| */
    int ok = 1;
    for (int64_t r = 0; r < N && ok; r++)
        for (int64_t j = 0; j < C && ok; j++) {
            double sabs = 0, wmax = 0;
            for (int64_t v = 0; v < V; v++) { sabs += fabs(dz[r * V + v] * w[v * C + j]); wmax = fmax(wmax, fabs(w[v * C + j])); }
            double bound = 1.02 * (TWO_M7 * sabs + (tg[r] >= 0 ? 2.0 * E / (double)count * wmax : 0)) + 1e-7;
            if (!(fabs((double)h.dx[r * C + j] - f.dx[r * C + j]) <= bound)) {   /* NaN fails */
                fprintf(stderr, "FAIL LCE dx (%lld,%lld): %.7g vs %.7g, bound %.3g\n", (long long)r, (long long)j,
                        h.dx[r * C + j], f.dx[r * C + j], bound);
                ok = 0;
            }
        }
    CHECK(ok);
    /* dW_vj = sum_r dz_rv x_rj: 2^-7 sum_r |dz_rv||x_rj| + sum_r (2E / count) |x_rj| */
    ok = 1;
    for (int64_t v = 0; v < V && ok; v++)
        for (int64_t j = 0; j < C && ok; j++) {
            double sabs = 0, xs = 0;
            for (int64_t r = 0; r < N; r++) {
                sabs += fabs(dz[r * V + v] * x[r * C + j]);
                if (tg[r] >= 0) xs += fabs((double)x[r * C + j]);
            }
            double bound = 1.02 * (TWO_M7 * sabs + 2.0 * E / (double)count * xs) + 1e-7;
            if (!(fabs((double)h.dw[v * C + j] - f.dw[v * C + j]) <= bound)) {
                fprintf(stderr, "FAIL LCE dW (%lld,%lld): %.7g vs %.7g, bound %.3g\n", (long long)v, (long long)j,
                        h.dw[v * C + j], f.dw[v * C + j], bound);
                ok = 0;
            }
        }
    CHECK(ok);
    free(dz); free(tg);
    free(f.dx); free(f.dw); free(h.dx); free(h.dw);
    st_params_free(&L.p);
}

/* ------------------------------------------------------- packed weights ---- */
/* A weight operand (st_mm_w: shadow + version) runs on a primitive that chose its own B
 * layout; its packed copy must give the plain product's results and follow the weight
 * when the shadow's version moves (and only then is it re-packed). A square weight's two
 * orientations share a packed layout, not their contents. */
static void packed_case(st_mm *bf, int64_t N, int64_t IN, int64_t OUT) {
    const int64_t spec[2][5] = {{2, N, IN}, {2, OUT, IN}};
    leaves L;
    leaves_init(&L, 71, 2, spec, 1.0f);
    ST_ASSERT(st_params_enable_bf16(&L.p, NULL) == ST_OK);
    const st_tensor *x = L.t[0], *w = L.t[1];
    float *yp = malloc((size_t)(N * OUT) * sizeof(float)), *yr = malloc((size_t)(N * OUT) * sizeof(float));
    float *y1 = malloc((size_t)(N * OUT) * sizeof(float)), *dp = malloc((size_t)(N * IN) * sizeof(float));
    float *dr = malloc((size_t)(N * IN) * sizeof(float));
    char impl[96] = "";
    for (int round = 0; round < 3; round++) {
        /* y = x W^T (the forward orientation) and dx = y W (the backward one), packed vs plain */
        st_mm_gemm(bf, N, OUT, IN, 1.0f, st_mm_a(x->data, NULL, 0, IN), st_mm_w(w->data, w->bf16, w->bf16_ver, 1, IN),
                   0.0f, yp, OUT);
        snprintf(impl, sizeof impl, "%s", st_mm_last_impl(bf));
        st_mm_gemm(bf, N, OUT, IN, 1.0f, st_mm_a(x->data, NULL, 0, IN), st_mm_a(w->data, w->bf16, 1, IN), 0.0f, yr, OUT);
        st_mm_gemm(bf, N, IN, OUT, 1.0f, st_mm_a(yr, NULL, 0, OUT), st_mm_w(w->data, w->bf16, w->bf16_ver, 0, IN), 0.0f,
                   dp, IN);
        st_mm_gemm(bf, N, IN, OUT, 1.0f, st_mm_a(yr, NULL, 0, OUT), st_mm_a(w->data, w->bf16, 0, IN), 0.0f, dr, IN);
        CHECK_MSG(th_close("packed forward == plain", yp, yr, N * OUT, 1e-6, 1e-5), "round %d (%s)", round, impl);
        CHECK_MSG(th_close("packed backward == plain", dp, dr, N * IN, 1e-6, 1e-5), "round %d", round);
        if (round == 0) memcpy(y1, yp, (size_t)(N * OUT) * sizeof(float));
        if (round == 1)   /* the weight changed and was refreshed: the packed copy followed */
            CHECK_MSG(memcmp(y1, yp, (size_t)(N * OUT) * sizeof(float)) != 0, "packed weight not re-packed");
        /* an optimizer update: new values, then the shadow's refresh (version + 1) */
        for (int64_t i = 0; i < OUT * IN; i++) w->data[i] = 0.5f * w->data[i] + 0.01f * (float)(i % 7);
        st_params_refresh_bf16(&L.p);
    }
    printf("packed weights %lldx%lld: %s\n", (long long)OUT, (long long)IN, impl);
    free(yp); free(yr); free(y1); free(dp); free(dr);
    st_params_free(&L.p);
}

static void test_packed(st_mm *bf) {
    packed_case(bf, 64, 256, 192);
    packed_case(bf, 64, 128, 128);   /* square: forward and backward read W^T and W */
}

/* ----------------------------------------------------- parameter shadow ---- */
static void test_shadow(void) {
    const int64_t spec[2][5] = {{2, 5, 7}, {1, 3}};
    leaves L;
    leaves_init(&L, 31, 2, spec, 1.0f);
    CHECK(L.t[0]->bf16 == NULL);
    st_params_refresh_bf16(&L.p);   /* no shadow: nothing to do */
    CHECK(st_params_enable_bf16(&L.p, NULL) == ST_OK);
    CHECK(L.t[0]->bf16 == L.p.bf16 && L.t[1]->bf16 == L.p.bf16 + L.p.info[1].offset);
    CHECK(L.t[1]->bf16[2] == st_f32_to_bf16(L.t[1]->data[2]));
    L.t[1]->data[2] = 3.0f;   /* an update: the shadow follows only on refresh */
    CHECK(L.t[1]->bf16[2] != st_f32_to_bf16(3.0f));
    st_params_refresh_bf16(&L.p);
    CHECK(L.t[1]->bf16[2] == 0x4040);
    st_params_free(&L.p);
}

int main(void) {
    test_rounding();
    test_fp32_gemv();
    test_k_zero(NULL, "fp32");
    test_shadow();
    int rc;
    st_mm *bf = test_bf16_backend("test_bf16", 0, &rc);
    if (!bf) return rc;
    CHECK(st_mm_precision(bf) == ST_PREC_BF16 && st_precision_from_name("bf16") == ST_PREC_BF16);
    CHECK(st_precision_from_name("fp16") == -1);
    /* the operand format and chunk rows are backend-table facts: bf16 takes rounded
     * operands and 64-row chunks, fp32 (and no backend) neither */
    CHECK(st_mm_bf16_operands(bf) && st_mm_row_align(bf) == 64);
    CHECK(!st_mm_bf16_operands(NULL) && st_mm_row_align(NULL) == 16);
    test_gemm(bf);
    test_k_zero(bf, "bf16");
    test_batched(bf);
    test_linear(bf);
    test_lce(bf);
    test_packed(bf);
    st_mm_free(bf);
    return test_finish("test_bf16");
}
