/* st_matmul.h - matmul precision as a variation point, and bf16 rounding.
 *
 * Every large product of the ops (linear forward and both backward products, the fused
 * LM head + loss, grad-mode attention) calls st_mm_gemm(_batched) with the context's
 * backend (ctx->mm). A backend is one
 * row of a table (src/core/matmul.c):
 *   fp32  OpenBLAS cblas_sgemm (cblas_sgemv when the product has one row: decoding)
 *   bf16  oneDNN matmul, bf16 x bf16 inputs rounded to nearest even from fp32, fp32
 *         accumulation, fp32 output; primitives are created once per shape and cached.
 *         Without native bf16 (AVX512-BF16 or AMX): cblas_sgemm on the rounded operands
 *         (src/core/matmul_bf16_emu.c), the same results up to the order of additions
 * Everything else (master weights, gradients, AdamW state, LayerNorm, softmax, the loss)
 * stays fp32. ctx->mm == NULL means fp32.
 *
 * Operands: an st_mm_arg is the fp32 matrix and, optionally, the same matrix already
 * rounded to bf16 (a parameter's shadow, refreshed once per optimizer update by
 * st_params_refresh_bf16), so weights are converted once per update instead of once per
 * use. The fp32 backend ignores the bf16 copy; the bf16 backend rounds an operand that
 * has none (activations, output gradients) into its own scratch.
 *
 * Threads: the backends run on the caller's OpenMP pool (oneDNN of Debian is built with
 * OpenMP: its threads are libgomp's, omp_set_num_threads governs both) and are
 * deterministic for a fixed thread count. A backend instance is NOT thread-safe (one
 * primitive cache and scratch): call st_mm_gemm from one thread, never from inside an
 * OpenMP parallel region.
 *
 * Batches: st_mm_gemm_batched runs `count` products of one shape whose operands sit at
 * fixed strides (one 3-d oneDNN matmul in bf16, a loop of sgemms in fp32). Attention's
 * block-major schedule uses it: QK^T and PV of one query block over every (batch, head)
 * pair, and their backward products, are one batched call each, made outside the
 * parallel loop (docs/precision.md, "Attention"). */
#ifndef ST_MATMUL_H
#define ST_MATMUL_H

#include "st_common.h"

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum st_precision { ST_PREC_FP32 = 0, ST_PREC_BF16 = 1, ST_PREC_COUNT } st_precision;

const char *st_precision_name(int precision);       /* "fp32", "bf16" */
int st_precision_from_name(const char *name);       /* -1 if unknown */
/* 1 when this build can run the precision (bf16 needs oneDNN at build time). */
int st_precision_available(int precision);

/* ---- bf16: the top 16 bits of an IEEE float (8-bit exponent, 7+1-bit mantissa) ----
 * Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit, then truncate.
 * A carry out of the mantissa bumps the exponent (correct rounding up, to Inf past the
 * largest finite bf16). NaN stays NaN (quiet bit forced, sign kept); +-Inf and +-0 are
 * exact. Relative rounding error <= 2^-8 (the unit roundoff of an 8-bit significand). */
static inline uint16_t st_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float st_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* dst[i] = bf16(src[i]) for n values (OpenMP over fixed slices: deterministic). */
void st_bf16_round(uint16_t *dst, const float *src, int64_t n);
/* count matrices of (rows, cols), row r of matrix i at src + i stride + r ld, rounded to
 * bf16 into dst back to back (dense: matrix i at dst + i rows cols). */
void st_bf16_round_strided(uint16_t *dst, const float *src, int64_t count, int64_t rows, int64_t cols,
                           int64_t ld, int64_t stride);

/* ---- backends ---- */
typedef struct st_mm st_mm;

/* A backend instance for `precision`. bf16 logs the ISA oneDNN runs
 * (dnnl_get_effective_cpu_isa) and warns when the CPU has no native bf16 (the products
 * then run emulated through sgemm: correct, but slower than fp32). ST_ERR_CONFIG when
 * this build has no oneDNN, with what to install. Free with st_mm_free (NULL is fine). */
int st_mm_create(st_mm **out, int precision, int quiet, st_error *e);
/* st_mm_create for a model's parameters p: with bf16 also their bf16 shadow (rounded once,
 * st_params_enable_bf16), which the bf16 products read. What training, evaluation,
 * generation and the task evaluations each need before their first product. */
struct st_params;
int st_mm_create_for(st_mm **out, int precision, int quiet, struct st_params *p, st_error *e);
/* Time and count every gemm call into p (include/st_profile.h); NULL: stop. */
struct st_profile;
void st_mm_set_profile(st_mm *mm, struct st_profile *p);
void st_mm_free(st_mm *mm);
int st_mm_precision(const st_mm *mm);       /* NULL: ST_PREC_FP32 */
/* One line: "fp32 (OpenBLAS Haswell)" / "bf16 (oneDNN 2.6.3, ISA avx512_core_bf16)". */
const char *st_mm_describe(const st_mm *mm);
/* 1 when the bf16 products run on native bf16 instructions (AVX512-BF16 or AMX). */
int st_mm_native(const st_mm *mm);
/* Which attention kernels run their products through this backend (bits; fp32: 0):
 * ST_MM_ATTN_GRAD, training's grad-mode kernel: bf16 on a CPU with AMX, whose tiles beat
 * sgemm on attention's 64-row blocks (M step on the AMX Xeon: ~250 against ~400 ms).
 * ST_MM_ATTN_STREAM, eval's streamed kernel: bf16 on a CPU with AMX too, its keys and
 * values rounded once per call into block-major copies (S eval on the AMX Xeon at L =
 * 16,384: 1.35-1.6x fp32; docs/precision.md). With AVX512-BF16 alone both stay fp32:
 * on an Intel Xeon oneDNN's kernels ran attention's blocks slower than sgemm (training:
 * 128 against 100 ms per S step; eval: a third of the fp32 speed), on AMD Zen 4 no faster
 * (M step: 217-221 against 184-201 ms). st_mm_set_attention overrides the choice (tests). */
enum { ST_MM_ATTN_GRAD = 1, ST_MM_ATTN_STREAM = 2 };
int st_mm_attention(const st_mm *mm);
void st_mm_set_attention(st_mm *mm, int kernels);
/* 1 when a bf16 product whose reduction is much longer than both output sides (the LM
 * head's dx = dz W) is computed transposed, c^T = op(b)^T op(a)^T, and written back: on a
 * CPU with AMX, where oneDNN ran it 1.35-1.55x faster that way; with AVX512-BF16 alone
 * (AMD Zen 4) the direct product took 3-6% less of the LM head's time
 * (src/core/matmul_bf16.c). Fixed per CPU, so results stay deterministic;
 * st_mm_set_long_k overrides it (tests). fp32, emulated bf16: 0, and the override is
 * ignored. */
int st_mm_long_k(const st_mm *mm);
void st_mm_set_long_k(st_mm *mm, int transposed);
/* 1 when st_mm_gemm may be called from inside an OpenMP parallel region (fp32: OpenBLAS
 * runs single-threaded there); 0 when products must be batched outside parallel loops
 * (bf16: one primitive cache). Attention picks its schedule by this (per-pair tasks with
 * their own products, or block-major batched products). NULL: fp32. */
int st_mm_parallel_safe(const st_mm *mm);
/* 1 when the backend multiplies bf16-rounded operands (bf16, native or emulated): an op
 * that produces an operand may hand over its own bf16 copy (st_mm_arg.h) and an op that
 * rounds one keeps the copy in its arena. 0 for fp32, whose ops skip the copies. NULL: 0. */
int st_mm_bf16_operands(const st_mm *mm);
/* The row multiple a product split into row chunks (the LM head + loss) should use: 16
 * for fp32; 64 for bf16, whose AMX kernels (oneDNN 2.6) ran a chunk of 976 rows (61 x 16)
 * at a sixth of the speed of 960 or 1,024 rows (33280 x 256 logits), and 688 rows
 * (43 x 16) 10-35% below 704 (11 x 64) in each of the three products (AMX Xeon,
 * 2026-11-26, alternating pairs). Fixed per backend: the chunks, and so the sums over
 * them, do not depend on the CPU. NULL: fp32's. */
int st_mm_row_align(const st_mm *mm);
/* The implementation the backend used for its most recent product, e.g. oneDNN's
 * "brg:avx512_core_bf16" or "gemm:jit"; "cblas_sgemm" / "cblas_sgemv" for fp32. */
const char *st_mm_last_impl(const st_mm *mm);

typedef struct st_mm_arg {
    const float *f;         /* the matrix, fp32, row-major with leading dimension ld; may be
                             * NULL when h is given and the backend is bf16 (an operand
                             * that only exists rounded) */
    const uint16_t *h;      /* the same matrix rounded to bf16, dense (ld = its row
                             * length), or NULL */
    int trans;              /* 1: the stored matrix is the transpose of the operand */
    int64_t ld;
    const uint64_t *ver;    /* a weight's shadow version (st_tensor.bf16_ver), or NULL: the
                             * bf16 backend keeps such a b operand packed in the layout its
                             * kernel wants and re-packs it only when the version moves */
} st_mm_arg;

static inline st_mm_arg st_mm_a(const float *f, const uint16_t *h, int trans, int64_t ld) {
    st_mm_arg a = {f, h, trans, ld, NULL};
    return a;
}
/* A weight as operand: its fp32 data, bf16 shadow and the shadow's version. */
static inline st_mm_arg st_mm_w(const float *f, const uint16_t *h, const uint64_t *ver, int trans, int64_t ld) {
    st_mm_arg a = {f, h, trans, ld, h ? ver : NULL};
    return a;
}

/* c (M,N) = alpha op(a) (M,K) op(b) (K,N) + beta c, row-major, ldc >= N. beta = 0
 * overwrites c (which may be uninitialised). mm == NULL: fp32. */
void st_mm_gemm(st_mm *mm, int64_t M, int64_t N, int64_t K, float alpha, st_mm_arg a,
                st_mm_arg b, float beta, float *c, int64_t ldc);

/* A batch: `count` products, operand i at a.f + i * a (b, c likewise; strides in
 * elements). A bf16 copy (a.h) of a batch must be dense: stride = rows x cols. */
typedef struct st_mm_batch { int64_t count, a, b, c; } st_mm_batch;

/* For i < batch.count: c_i (M,N) = alpha op(a_i) op(b_i) + beta c_i. */
void st_mm_gemm_batched(st_mm *mm, st_mm_batch batch, int64_t M, int64_t N, int64_t K, float alpha,
                        st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc);

#ifdef __cplusplus
}
#endif
#endif
