/* matmul_fp32.c - the fp32 backend: OpenBLAS. A product with one row (M == 1: KV-cache
 * decoding, one token) goes to cblas_sgemv: OpenBLAS 0.3.21's sgemm packs both operands
 * even then, which for a (1,C) x (C,V) head product costs more than the product itself. */
#include "core/matmul_internal.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

static int fp32_open(st_mm *mm, st_error *e) {
    snprintf(mm->describe, sizeof mm->describe, "fp32 (OpenBLAS %s)", openblas_get_corename());
    mm->native = 1;
    return ST_OK;
}

static void fp32_close(st_mm *mm) { (void)mm; }

static void fp32_one(st_mm *mm, int64_t M, int64_t N, int64_t K, float alpha, st_mm_arg a,
                     st_mm_arg b, float beta, float *c, int64_t ldc) {
    if (M == 1) {
        /* c (1,N) = alpha op(b)^T a + beta c: op(b) (K,N) stored as b (K,N) -> Trans,
         * or as b^T (N,K) -> NoTrans. a's K values are strided by lda when transposed. */
        int inca = a.trans ? (int)a.ld : 1;
        /* beta = 0 promises c may be uninitialised (arena memory): sgemv scales y by
         * beta, which would keep a NaN there */
        if (beta == 0.0f) memset(c, 0, (size_t)N * sizeof(float));
        if (b.trans)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, alpha, b.f, (int)b.ld, a.f, inca,
                        beta, c, 1);
        else
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)K, (int)N, alpha, b.f, (int)b.ld, a.f, inca,
                        beta, c, 1);
        if (mm) snprintf(mm->last_impl, sizeof mm->last_impl, "cblas_sgemv");
        return;
    }
    cblas_sgemm(CblasRowMajor, a.trans ? CblasTrans : CblasNoTrans, b.trans ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, alpha, a.f, (int)a.ld, b.f, (int)b.ld, beta, c, (int)ldc);
    if (mm) snprintf(mm->last_impl, sizeof mm->last_impl, "cblas_sgemm");
}

/* A batch is a loop: OpenBLAS threads each product. */
static void fp32_gemm(st_mm *mm, const st_mm_batch *bt, int64_t M, int64_t N, int64_t K, float alpha,
                      st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < bt->count; i++) {
        st_mm_arg ai = a, bi = b;
        ai.f += i * bt->a;
        bi.f += i * bt->b;
        fp32_one(mm, M, N, K, alpha, ai, bi, beta, c + i * bt->c, ldc);
    }
}

const st_mm_backend st_mm_backend_fp32 = {.name = "fp32", .parallel_safe = 1, .bf16_operands = 0, .row_align = 16,
                                      .open = fp32_open, .close = fp32_close, .gemm = fp32_gemm};
