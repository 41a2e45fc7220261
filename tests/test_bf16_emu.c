/* test_bf16_emu.c - precision bf16 on a CPU without native bf16 (no AVX512-BF16, no AMX):
 * the bf16 row hands over to sgemm on bf16-rounded operands (src/core/matmul_bf16_emu.c). The
 * test caps oneDNN at AVX2 (ONEDNN_MAX_CPU_ISA, read at its first call) so that the
 * emulated row runs on every CPU, and checks:
 *   - the hand-over: not native, attention fp32, not callable in parallel regions, and the
 *     description, the log and the kernel name say "emulated";
 *   - the products are those of the rounded operands, exactly up to fp32 accumulation:
 *       |c - (alpha sum_k bf16(a_ik) bf16(b_kj) + beta c0)| <= K 2^-23 (|alpha| sum_k |..| + |beta c0|)
 *     (a product of two bf16 values is exact in fp32; only the K-term sum rounds), for
 *     every transpose, alpha and beta, a strided operand, a batch, one row (sgemv) and K = 0,
 *     while they differ from the unrounded fp32 product far beyond that bound;
 *   - an operand's bf16 copy is what is read when given (a copy that differs from the
 *     rounded fp32 values moves the result).
 * ctest runs test_bf16 and test_bf16_copies again under the same cap (the *_emulated
 * entries): every bf16 op bound of those tests holds for this row too.
 * Skipped without oneDNN. Reference products are double loops (test code). */
#include "harness.h"
#include "st_matmul.h"

#include <stdlib.h>
#include <string.h>

static float bf(float x) { return st_bf16_to_f32(st_f32_to_bf16(x)); }

static double el(const float *x, int trans, int64_t ld, int64_t i, int64_t j) {
    return trans ? x[j * ld + i] : x[i * ld + j];
}

/* max over (i,j) of |c - ref| / bound, where ref uses the operands as given (rounded by
 * the caller or not) and bound is the fp32-accumulation bound of the header. */
static double worst(const float *c, const float *c0, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *a, int ta, int64_t lda, const float *b, int tb, int64_t ldb, float beta, int64_t ldc) {
    double w = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sabs = 0;
            for (int64_t k = 0; k < K; k++) {
                double t = el(a, ta, lda, i, k) * el(b, tb, ldb, k, j);
                s += t; sabs += fabs(t);
            }
            double ref = alpha * s + beta * (double)c0[i * ldc + j];
            double bound = (double)K * 0x1p-23 * (fabs(alpha) * sabs + fabs(beta * (double)c0[i * ldc + j])) + 1e-30;
            double r = fabs((double)c[i * ldc + j] - ref) / bound;
            if (r > w) w = r;
        }
    return w;
}

static void fill(float *x, int64_t n, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)st_rng_normal(&r);
}

static void test_products(st_mm *mm) {
    enum { S = 64 };
    const int64_t M = 23, N = 31, K = 57;
    float *a = malloc(sizeof(float) * S * S), *b = malloc(sizeof(float) * S * S), *ar = malloc(sizeof(float) * S * S),
          *brr = malloc(sizeof(float) * S * S), *c = malloc(sizeof(float) * S * S), *c0 = malloc(sizeof(float) * S * S);
    fill(a, S * S, 1); fill(b, S * S, 2); fill(c0, S * S, 3);
    for (int i = 0; i < S * S; i++) { ar[i] = bf(a[i]); brr[i] = bf(b[i]); }
    for (int t = 0; t < 8; t++) {
        const int ta = t & 1, tb = (t >> 1) & 1;
        const float alpha = (t & 4) ? 0.375f : 1.0f, beta = (t & 4) ? 0.5f : 0.0f;
        const int64_t lda = S, ldb = S, ldc = S;   /* strided: ld beyond the row length */
        memcpy(c, c0, sizeof(float) * S * S);
        st_mm_gemm(mm, M, N, K, alpha, st_mm_a(a, NULL, ta, lda), st_mm_a(b, NULL, tb, ldb), beta, c, ldc);
        double wr = worst(c, c0, M, N, K, alpha, ar, ta, lda, brr, tb, ldb, beta, ldc);
        double wf = worst(c, c0, M, N, K, alpha, a, ta, lda, b, tb, ldb, beta, ldc);
        CHECK_MSG(wr <= 1.0, "ta %d tb %d alpha %g beta %g: %.3g x the bound from the rounded product", ta, tb,
                  alpha, beta, wr);
        CHECK_MSG(wf > 100.0, "ta %d tb %d: only %.3g x the bound from the fp32 product (not rounded?)", ta, tb, wf);
        CHECK(strcmp(st_mm_last_impl(mm), "cblas_sgemm (bf16 emulated)") == 0);
    }
    /* one row: sgemv on the rounded operands */
    st_mm_gemm(mm, 1, N, K, 1.0f, st_mm_a(a, NULL, 0, K), st_mm_a(b, NULL, 1, K), 0.0f, c, N);
    CHECK(worst(c, c0, 1, N, K, 1.0f, ar, 0, K, brr, 1, K, 0.0f, N) <= 1.0);
    CHECK(strcmp(st_mm_last_impl(mm), "cblas_sgemv (bf16 emulated)") == 0);
    /* no inner dimension: c = beta c0 exactly */
    memcpy(c, c0, sizeof(float) * S * S);
    st_mm_gemm(mm, M, N, 0, 1.0f, st_mm_a(a, NULL, 0, 1), st_mm_a(b, NULL, 0, N), 0.5f, c, S);
    int kzero = 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) kzero &= c[i * S + j] == 0.5f * c0[i * S + j];
    CHECK_MSG(kzero, "K = 0: c != beta c0");
    /* a batch of 4: a at a batch stride beyond rows x cols, b dense with a bf16 copy that
     * differs from bf16(b) in one element: the copy is what is multiplied */
    const int64_t bs = 4, m = 5, n = 6, k = 7, sa = m * k + 3;
    uint16_t *bh = malloc(sizeof(uint16_t) * bs * k * n);
    float *bcopy = malloc(sizeof(float) * bs * k * n);
    for (int64_t i = 0; i < bs * k * n; i++) { bh[i] = st_f32_to_bf16(b[i]); bcopy[i] = brr[i]; }
    bh[k * n + 2] = st_f32_to_bf16(100.0f);   /* batch 1, row 0, column 2 */
    bcopy[k * n + 2] = 100.0f;
    memcpy(c, c0, sizeof(float) * S * S);
    st_mm_batch batch = {bs, sa, k * n, m * n};
    st_mm_gemm_batched(mm, batch, m, n, k, 1.0f, st_mm_a(a, NULL, 0, k), st_mm_a(b, bh, 0, n), 0.0f, c, n);
    for (int64_t i = 0; i < bs; i++) {
        double w = worst(c + i * m * n, c0, m, n, k, 1.0f, ar + i * sa, 0, k, bcopy + i * k * n, 0, n, 0.0f, n);
        CHECK_MSG(w <= 1.0, "batch %lld: %.3g x the bound (bf16 copy not read?)", (long long)i, w);
    }
    free(a); free(b); free(ar); free(brr); free(c); free(c0); free(bh); free(bcopy);
}

int main(void) {
    /* before the first oneDNN call: oneDNN reads the cap once */
    setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
    if (!st_precision_available(ST_PREC_BF16)) {
        test_skip("bf16 emulation", "this build has no oneDNN (STRETCH_BF16=OFF or libdnnl-dev missing)");
        int rc = test_finish("test_bf16_emu");
        return rc ? rc : TEST_SKIPPED;
    }
    st_error e = {0};
    st_mm *mm = NULL;
    int rc = st_mm_create(&mm, ST_PREC_BF16, 0, &e);
    CHECK_MSG(rc == ST_OK, "st_mm_create(bf16) under ONEDNN_MAX_CPU_ISA=AVX2: %s", e.msg);
    if (rc) return test_finish("test_bf16_emu");
    printf("%s\n", st_mm_describe(mm));
    CHECK(st_mm_precision(mm) == ST_PREC_BF16 && strcmp(st_precision_name(ST_PREC_BF16), "bf16") == 0);
    CHECK(!st_mm_native(mm) && !st_mm_attention(mm) && !st_mm_parallel_safe(mm));
    CHECK(st_mm_bf16_operands(mm) && st_mm_row_align(mm) == 64);   /* as the native row: same chunks */
    CHECK(strstr(st_mm_describe(mm), "emulated: cblas_sgemm") && strstr(st_mm_describe(mm), "ISA avx2"));
    test_products(mm);
    st_mm_free(mm);
    return test_finish("test_bf16_emu");
}
