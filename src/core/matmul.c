/* matmul.c - the precision dispatcher: the table of backends, their names, and the one
 * entry point every op's large product goes through (include/st_matmul.h). */
#include "st_profile.h"
#include "st_tensor.h"
#include "core/matmul_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Indexed by st_precision: the only place that maps a precision to its code. */
static const st_mm_backend *const backends[ST_PREC_COUNT] = {
    [ST_PREC_FP32] = &st_mm_backend_fp32,
    [ST_PREC_BF16] = &st_mm_backend_bf16,
};

const char *st_precision_name(int precision) {
    return precision >= 0 && precision < ST_PREC_COUNT ? backends[precision]->name : "?";
}

int st_precision_from_name(const char *name) {
    for (int p = 0; name && p < ST_PREC_COUNT; p++)
        if (strcmp(name, backends[p]->name) == 0) return p;
    return -1;
}

int st_precision_available(int precision) {
#ifdef ST_HAVE_DNNL
    return precision >= 0 && precision < ST_PREC_COUNT;
#else
    return precision == ST_PREC_FP32;
#endif
}

int st_mm_create(st_mm **out, int precision, int quiet, st_error *e) {
    *out = NULL;
    if (precision < 0 || precision >= ST_PREC_COUNT)
        return st_fail(e, ST_ERR_CONFIG, "precision: unknown precision %d", precision);
    st_mm *mm = st_calloc(1, sizeof *mm, e);
    if (!mm) return ST_ERR_MEMORY;
    mm->be = backends[precision];
    mm->precision = precision;
    mm->quiet = quiet;
    int rc = mm->be->open(mm, e);
    if (rc) { free(mm); return rc; }
    *out = mm;
    return ST_OK;
}

int st_mm_create_for(st_mm **out, int precision, int quiet, st_params *p, st_error *e) {
    int rc = st_mm_create(out, precision, quiet, e);
    if (!rc && (*out)->be->bf16_operands) rc = st_params_enable_bf16(p, e);
    return rc;
}

void st_mm_free(st_mm *mm) {
    if (!mm) return;
    mm->be->close(mm);
    free(mm);
}

int st_mm_precision(const st_mm *mm) { return mm ? mm->precision : ST_PREC_FP32; }
const char *st_mm_describe(const st_mm *mm) { return mm ? mm->describe : "fp32 (OpenBLAS)"; }
int st_mm_native(const st_mm *mm) { return mm ? mm->native : 1; }
int st_mm_attention(const st_mm *mm) { return mm ? mm->attn : 0; }
void st_mm_set_attention(st_mm *mm, int kernels) {
    if (mm && mm->be->bf16_operands) mm->attn = kernels & (ST_MM_ATTN_GRAD | ST_MM_ATTN_STREAM);
}
int st_mm_long_k(const st_mm *mm) { return mm ? mm->long_k : 0; }
void st_mm_set_long_k(st_mm *mm, int transposed) {
    if (mm && mm->be->bf16_operands && mm->native) mm->long_k = transposed != 0;
}
int st_mm_parallel_safe(const st_mm *mm) { return mm ? mm->be->parallel_safe : 1; }
int st_mm_bf16_operands(const st_mm *mm) { return mm ? mm->be->bf16_operands : 0; }
int st_mm_row_align(const st_mm *mm) { return mm ? mm->be->row_align : st_mm_backend_fp32.row_align; }
const char *st_mm_last_impl(const st_mm *mm) { return mm ? mm->last_impl : ""; }

void st_mm_gemm_batched(st_mm *mm, st_mm_batch batch, int64_t M, int64_t N, int64_t K, float alpha,
                        st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc) {
    ST_ASSERT(M >= 0 && N >= 0 && K >= 0 && ldc >= N && batch.count >= 0 && (a.f || a.h) && (b.f || b.h) && c);
    ST_ASSERT((a.f && b.f) || (mm && mm->be->bf16_operands));   /* fp32 multiplies f */
    if (M == 0 || N == 0 || batch.count == 0) return;
    if (K == 0) {   /* no product: c = beta c (beta 0: zeros, as BLAS), for every backend alike
                     * (OpenBLAS's sgemv, the one-row path, returned with c unscaled) */
        for (int64_t i = 0; i < batch.count; i++)
            for (int64_t r = 0; r < M; r++) {
                float *cr = c + i * batch.c + r * ldc;
                for (int64_t j = 0; j < N; j++) cr[j] = beta == 0.0f ? 0.0f : beta * cr[j];
            }
        return;
    }
    const double t0 = mm && mm->prof ? st_time() : 0.0;
    (mm ? mm->be : &st_mm_backend_fp32)->gemm(mm, &batch, M, N, K, alpha, a, b, beta, c, ldc);
    if (mm && mm->prof)
        st_profile_gemm(mm->prof, M, N, K, batch.count, a.trans, b.trans, st_time() - t0,
                        mm->last_impl[0] ? mm->last_impl : mm->be->name);
}

void st_mm_set_profile(st_mm *mm, struct st_profile *p) {
    if (mm) mm->prof = p;
}

void st_mm_gemm(st_mm *mm, int64_t M, int64_t N, int64_t K, float alpha, st_mm_arg a,
                st_mm_arg b, float beta, float *c, int64_t ldc) {
    st_mm_batch one = {1, 0, 0, 0};
    st_mm_gemm_batched(mm, one, M, N, K, alpha, a, b, beta, c, ldc);
}

void *st_mm_grow(void **buf, size_t *cap, size_t bytes) {
    if (bytes > *cap) {
        free(*buf);
        *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (!*buf) st_oom_exit("a matmul backend's operand scratch", bytes);
        *cap = bytes;
    }
    return *buf;
}

/* Fixed slices of 64 Ki values: each thread rounds whole slices (the result does not
 * depend on the thread count anyway: the map is elementwise). */
void st_bf16_round(uint16_t *dst, const float *src, int64_t n) {
    const int64_t slice = 65536, ns = (n + slice - 1) / slice;
    #pragma omp parallel for schedule(static) if (ns > 1)
    for (int64_t s = 0; s < ns; s++) {
        const int64_t i1 = (s + 1) * slice < n ? (s + 1) * slice : n;
        #pragma omp simd
        for (int64_t i = s * slice; i < i1; i++) dst[i] = st_f32_to_bf16(src[i]);
    }
}

void st_bf16_round_strided(uint16_t *dst, const float *src, int64_t count, int64_t rows, int64_t cols,
                           int64_t ld, int64_t stride) {
    #pragma omp parallel for schedule(static) if (count * rows * cols > 32768)
    for (int64_t q = 0; q < count * rows; q++) {   /* row q: matrix q / rows, row q % rows */
        const float *x = src + (q / rows) * stride + (q % rows) * ld;
        uint16_t *d = dst + q * cols;
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++) d[j] = st_f32_to_bf16(x[j]);
    }
}
