/* matmul_bf16_emu.c - precision bf16 on a CPU without native bf16 (no AVX512-BF16, no
 * AMX). There oneDNN either emulates bf16 with fp32 FMAs (plain AVX-512: its gemm:jit ran
 * at ~30 GFLOPS against 100-200 for sgemm) or has no bf16 matmul at all (2.6/2.7 on an
 * AVX2 CPU such as AMD Zen 2/3: every primitive is "unimplemented"). The bf16 backend
 * (matmul_bf16.c) hands over to this row then, so a bf16 config runs on every CPU:
 *
 *   c_i = alpha op(bf16(a_i)) op(bf16(b_i)) + beta c_i     (cblas_sgemm, fp32 accumulation)
 *
 * Each operand is rounded to bf16 (st_f32_to_bf16, or its ready bf16 copy) and widened
 * back to fp32 into scratch; OpenBLAS multiplies. A product of two bf16 values has at most
 * 16 significant bits, so it is exact in fp32, and the sums accumulate in fp32 as oneDNN's
 * do: the results are those of a native bf16 x bf16 -> f32 matmul up to the order of the
 * fp32 additions. It costs two rounding passes over the operands per call on top of an
 * sgemm, so it is slower than precision fp32: it exists to run and check bf16 results on
 * such a CPU, not for speed (the warning says so). Attention stays fp32 (no AMX). */
#include "core/matmul_internal.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct emu_state {
    void *scratch[2];    /* a, b rounded to bf16 values (fp32), dense */
    size_t cap[2];       /* in bytes */
} emu_state;

/* Operand x (`count` stored (rows, cols) matrices, leading dimension x.ld, matrix i at
 * x.f + i * stride) as dense bf16 values in fp32: widened from its bf16 copy when it has
 * one (dense, as st_mm_arg promises), else rounded row by row. Elementwise: the result
 * does not depend on the thread count. */
static const float *operand_rounded(emu_state *s, int slot, st_mm_arg x, int64_t rows, int64_t cols,
                                    int64_t count, int64_t stride) {
    if (x.h) ST_ASSERT(x.ld == cols && (count == 1 || stride == rows * cols));
    float *d = st_mm_grow(&s->scratch[slot], &s->cap[slot], (size_t)(count * rows * cols) * sizeof(float));
    const int64_t nrows = count * rows;
    #pragma omp parallel for schedule(static) if (nrows * cols > 32768)
    for (int64_t q = 0; q < nrows; q++) {   /* row q: matrix q / rows, row q % rows */
        float *dst = d + q * cols;
        if (x.h) {
            const uint16_t *src = x.h + q * cols;
            for (int64_t j = 0; j < cols; j++) dst[j] = st_bf16_to_f32(src[j]);
        } else {
            const float *src = x.f + (q / rows) * stride + (q % rows) * x.ld;
            for (int64_t j = 0; j < cols; j++) dst[j] = st_bf16_to_f32(st_f32_to_bf16(src[j]));
        }
    }
    return d;
}

static void emu_gemm(st_mm *mm, const st_mm_batch *bt, int64_t M, int64_t N, int64_t K, float alpha,
                     st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc) {
    emu_state *s = mm->state;
    ST_ASSERT(!omp_in_parallel());   /* one scratch: not from inside a parallel loop */
    ST_ASSERT(K > 0);   /* K = 0 is st_mm_gemm_batched's */
    const int64_t ar = a.trans ? K : M, ac = a.trans ? M : K, br = b.trans ? N : K, bc = b.trans ? K : N;
    st_mm_arg ar32 = st_mm_a(operand_rounded(s, 0, a, ar, ac, bt->count, bt->a), NULL, a.trans, ac);
    st_mm_arg br32 = st_mm_a(operand_rounded(s, 1, b, br, bc, bt->count, bt->b), NULL, b.trans, bc);
    const st_mm_batch dense = {bt->count, ar * ac, br * bc, bt->c};
    st_mm_backend_fp32.gemm(mm, &dense, M, N, K, alpha, ar32, br32, beta, c, ldc);
    /* "cblas_sgemm" or "cblas_sgemv", as the fp32 row chose */
    char impl[sizeof mm->last_impl];
    snprintf(impl, sizeof impl, "%s", mm->last_impl);
    snprintf(mm->last_impl, sizeof mm->last_impl, "%.60s (bf16 emulated)", impl);
}

static void emu_close(st_mm *mm) {
    emu_state *s = mm->state;
    if (!s) return;
    free(s->scratch[0]);
    free(s->scratch[1]);
    free(s);
    mm->state = NULL;
}

/* mm->describe's tail (why there is no native kernel) is the bf16 row's, in `why`. */
int st_mm_bf16_emu_open(st_mm *mm, const char *why, st_error *e) {
    emu_state *s = st_calloc(1, sizeof *s, e);
    if (!s) return ST_ERR_MEMORY;
    mm->be = &st_mm_backend_bf16_emu;
    mm->state = s;
    mm->native = 0;
    mm->attn = 0;
    snprintf(mm->describe, sizeof mm->describe, "bf16 (emulated: cblas_sgemm on bf16-rounded operands, "
             "OpenBLAS %s; %s; attention fp32)", openblas_get_corename(), why);
    if (!mm->quiet) st_log(ST_LOG_INFO, "matmul precision: %s", mm->describe);
    st_log(ST_LOG_WARN, "precision bf16: no native bf16 kernel here (%s): the products round their operands "
           "to bf16 and multiply with fp32 sgemm, bf16 results but slower than precision fp32. Use bf16 here to "
           "check results, fp32 for speed", why);
    return ST_OK;
}

/* open: NULL, the bf16 row's hand-over (st_mm_bf16_emu_open) is the only way in */
const st_mm_backend st_mm_backend_bf16_emu = {.name = "bf16", .parallel_safe = 0, .bf16_operands = 1, .row_align = 64,
                                          .open = NULL, .close = emu_close, .gemm = emu_gemm};
