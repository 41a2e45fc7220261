/* matmul_internal.h - the precision table behind st_mm_gemm (include/st_matmul.h): one
 * row per precision, chosen once when a backend instance is created. Not public. */
#ifndef ST_MATMUL_INTERNAL_H
#define ST_MATMUL_INTERNAL_H

#include "st_matmul.h"

typedef struct st_mm_backend {
    const char *name;                                   /* "fp32", "bf16" */
    int parallel_safe;                                  /* gemm callable inside omp parallel */
    int bf16_operands;      /* multiplies bf16-rounded operands (st_mm_bf16_operands) */
    int row_align;          /* rows of a chunked product in multiples of this (st_mm_row_align) */
    int (*open)(st_mm *mm, st_error *e);            /* state, describe, native; logs */
    void (*close)(st_mm *mm);
    void (*gemm)(st_mm *mm, const st_mm_batch *bt, int64_t M, int64_t N, int64_t K, float alpha,
                 st_mm_arg a, st_mm_arg b, float beta, float *c, int64_t ldc);
} st_mm_backend;

struct st_mm {
    const st_mm_backend *be;
    int precision;
    int quiet;
    int native;             /* bf16: native instructions (not emulated) */
    int attn;               /* ST_MM_ATTN_* bits: the attention kernels that run their
                             * products here (bf16 with AMX: GRAD; st_mm_set_attention) */
    int long_k;             /* bf16: a product with a long reduction runs transposed (AMX;
                             * st_mm_set_long_k) */
    char describe[192];
    char last_impl[96];
    void *state;            /* the backend's own (oneDNN engine, stream, cache, scratch) */
    struct st_profile *prof;/* per-call flops and time (st_mm_set_profile), NULL: off */
};

extern const st_mm_backend st_mm_backend_fp32;   /* matmul_fp32.c */
extern const st_mm_backend st_mm_backend_bf16;   /* matmul_bf16.c */
/* bf16 by sgemm on bf16-rounded operands (matmul_bf16_emu.c): the bf16 row's open hands
 * mm over to it (mm->be, state, describe) when the CPU has no native bf16; `why` says so
 * in the description and the warning. No precision maps to this row, so its own open is
 * NULL: st_mm_bf16_emu_open is the only way in. */
extern const st_mm_backend st_mm_backend_bf16_emu;
int st_mm_bf16_emu_open(st_mm *mm, const char *why, st_error *e);

/* *buf holds at least `bytes` (64-byte aligned), grown and kept: a backend's scratch
 * buffers are reused by every call. */
void *st_mm_grow(void **buf, size_t *cap, size_t bytes);

#endif
