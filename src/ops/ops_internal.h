/* ops_internal.h - small helpers shared by the op kernels in src/ops/ (static inline, no
 * state). Not part of the public API.
 *
 * Why our own exp/erfc: without -ffast-math GCC does not vectorise calls to libm's expf,
 * tanhf or erff, and the softmax of the LM head evaluates N*V ~ 5e8 exponentials per
 * step. The versions below are plain float arithmetic that GCC vectorises (AVX2/AVX-512)
 * inside simple loops, with errors of a couple of ulp (checked in tests/test_ops.c). */
#ifndef ST_OPS_INTERNAL_H
#define ST_OPS_INTERNAL_H

#include "st_ops.h"
#include "st_matmul.h"

#include <math.h>
#include <string.h>

/* Below this many elements a kernel runs on one thread: the OpenMP fork/join costs more
 * than the loop. */
#define OPS_PAR_MIN 32768

/* Rows and columns of a tensor seen as (N, last dim). */
static inline int64_t ops_cols(const st_tensor *t) { return t->shape[t->ndim - 1]; }
static inline int64_t ops_rows(const st_tensor *t) { return st_numel(t) / ops_cols(t); }

/* A new scalar tensor, shape (1). */
static inline st_tensor *ops_scalar(st_ctx *ctx) {
    int64_t one = 1;
    return st_new(ctx, 1, &one);
}

/* ---- gradient buffers a backward kernel overwrites instead of accumulating ----
 * st_grad() hands out a zeroed buffer the first time a tensor receives a gradient, and
 * every kernel adds into it. For most activations the first contribution is also the
 * only one, so the memset and the read of zeros are wasted passes over memory. These two
 * helpers let a kernel skip them safely:
 *   ops_grad_out(ctx, t, &fresh): the gradient buffer of t; fresh = 1 when none existed
 *     yet, in which case the buffer is UNINITIALISED and the caller must write every
 *     element (=, not +=). fresh = 0: an existing buffer, accumulate as usual.
 *   ops_grad_alias(t, buf): when t has no gradient yet, make buf (numel(t) floats that
 *     the caller will not touch again) its gradient and return 1. A node's output
 *     gradient is dead once its backward has run (every consumer of that output was
 *     recorded later, so ran earlier in reverse order), so an op whose input gradient
 *     equals its output gradient (residual add, lm-head dx with g = 1) can hand the buffer
 *     on instead of copying it.
 * Both only apply when t is its owner's whole buffer (not a slice or strided view) and
 * its owner has no gradient; otherwise they fall back to st_grad() / return 0.
 * Parameters always have their gradient block, so they always accumulate. A consequence
 * of the aliasing (as in PyTorch, where non-leaf .grad is not kept): after st_backward
 * the grad buffer of an intermediate op output may hold a later gradient; parameters and
 * other leaves get exactly their own. */
static inline st_tensor *ops_owner(st_tensor *t, int64_t *off) {
    *off = 0;
    while (t->base) { *off += t->offset; t = t->base; }
    return t;
}

static inline int ops_grad_whole(st_tensor *t, st_tensor **own) {
    int64_t off;
    *own = ops_owner(t, &off);
    return !t->grad && !(*own)->grad && off == 0 && st_numel(t) == st_numel(*own) && st_is_contiguous(t);
}

static inline float *ops_grad_out(st_ctx *ctx, st_tensor *t, int *fresh) {
    st_tensor *own;
    *fresh = 0;
    if (!ops_grad_whole(t, &own)) return st_grad(ctx, t);
    float *g = st_ctx_alloc(ctx, (size_t)st_numel(own) * sizeof(float), 1);
    if (!g) return NULL;
    own->grad = g;
    if (t != own) t->grad = g;
    *fresh = 1;
    return g;
}

static inline int ops_grad_alias(st_tensor *t, float *buf) {
    st_tensor *own;
    if (!ops_grad_whole(t, &own)) return 0;
    own->grad = buf;
    if (t != own) t->grad = buf;
    return 1;
}

/* ---- bf16 copies written by the producer of a linear layer's input ----
 * With the bf16 matmul backend every linear rounds its input x to bf16 (and keeps the
 * copy for dW's product). The ops whose outputs feed the linears (LayerNorm, RMSNorm,
 * GELU/GLU, merge_heads) write that copy themselves, row by row while the fp32 row is in
 * cache, instead of the linear re-reading x in a separate pass: out->bf16 points at it
 * (bf16_ver stays NULL: an activation, not a parameter shadow) and st_linear and the LM
 * head use it. The rounding is st_f32_to_bf16 either way, so results are unchanged.
 * ops_bf16_out: the copy's buffer (numel(out) values, kept for the backward in grad
 * mode), or NULL with the fp32 backend; NULL and *fail = 1 on arena overflow. */
static inline uint16_t *ops_bf16_out(st_ctx *ctx, st_tensor *out, int *fail) {
    *fail = 0;
    if (!st_mm_bf16_operands(ctx->mm) || st_numel(out) == 0) return NULL;
    uint16_t *h = st_ctx_alloc(ctx, (size_t)st_numel(out) * sizeof(uint16_t), ctx->grad);
    if (!h) { *fail = 1; return NULL; }
    out->bf16 = h;
    return h;
}

/* h[i] = bf16(y[i]) for one row (serial: called inside the producer's parallel loop) */
static inline void ops_round_row(uint16_t *restrict h, const float *restrict y, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) h[i] = st_f32_to_bf16(y[i]);
}

/* cond ? a : b, as bits: GCC (without -ffast-math) if-converts a float select in a loop
 * only when neither arm can raise an FP exception, i.e. not `x < c ? 0 : p * s`, whose
 * product it sinks into the branch. With AVX-512 it predicates the arm with a mask register
 * and vectorises anyway; with AVX2 it left such loops scalar (GELU, the LM head's and
 * attention's exponentials: GELU was 26% of a quickstart step on AMD Zen 3). Both arms
 * are computed, then one is kept bit for bit: the same values as the ternary. */
static inline float ops_select(int cond, float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint32_t m = (uint32_t)0 - (uint32_t)(cond != 0);
    const uint32_t r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* exp(x) in float, relative error < 1.5 ulp on [-87.33, 88.37]; 0 below, clamped above
 * (88.37 -> 2.4e38), NaN in -> NaN out.
 *   exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2]
 * with ln 2 split into an exact head and a tail (Cody-Waite) so r is accurate, exp(r) by
 * Cephes' degree-6 minimax polynomial, and 2^n assembled in the exponent bits.
 * round() is the 1.5*2^23 trick: adding it forces rounding to an integer. */
static inline float ops_expf(float x) {
    float xc = ops_select(x >= -87.33f, x, -87.33f);   /* NaN -> -87.33: n stays a small integer */
    xc = ops_select(xc <= 88.37f, xc, 88.37f);
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = ops_select(x < -87.33f, 0.0f, p * scale);
    return ops_select(x == x, y, x);            /* NaN in -> NaN out */
}

/* erfc(z) for z >= 0 with a small RELATIVE error everywhere (Numerical Recipes' erfcc
 * Chebyshev fit, fractional error < 1.2e-7 in exact arithmetic):
 *   erfc(z) = t exp(-z^2 + P(t)),  t = 1 / (1 + z/2).
 * In float the rounding of the exponent -z^2 + P adds ~ z^2 * 6e-8: measured with FMA
 * contraction 5e-7 for z < 2, 1.2e-6 for z < 5, 4e-6 at z = 9 (where erfc = 4e-37);
 * about twice that without FMA (-O0 / no -march=native). Relative accuracy in the
 * tail is what GELU needs: x Phi(x) for x << 0 is x erfc(-x/sqrt2) / 2, which a 1 + erf
 * formula would cancel to noise. */
static inline float ops_erfc_pos(float z) {
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * ops_expf(p - z * z);
}

/* sigmoid without overflow for either sign: e^-|z| stays in (0, 1] (the gates of
 * sigmoid_gate.c and token_shift.c) */
static inline float ops_sigmoid(float z) {
    const float e = expf(-fabsf(z));
    return z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

/* The dropout keep-mask draw: st_hash_uniform (inline in st_common.h, so the mask loop
 * vectorises). */
static inline float ops_hash_uniform(uint64_t seed, uint64_t index) { return st_hash_uniform(seed, index); }

/* db[c] += sum_r dy[r, c] for dy (N, C): the bias gradient. Threads own blocks of 64
 * columns and walk all rows in order, summing in double, so the result does not depend
 * on the thread count. dyh (or NULL): dy rounded to bf16 (N, C) in the same pass, the
 * copy a bf16 linear's backward products read (one read of dy instead of two). */
#define OPS_COLSUM_BLOCK 64
static inline void ops_colsum_acc(float *restrict db, const float *restrict dy, uint16_t *restrict dyh, int64_t N,
                                  int64_t C) {
    int64_t nblk = (C + OPS_COLSUM_BLOCK - 1) / OPS_COLSUM_BLOCK;
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN && nblk > 1)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t c0 = blk * OPS_COLSUM_BLOCK;
        int64_t nc = C - c0 < OPS_COLSUM_BLOCK ? C - c0 : OPS_COLSUM_BLOCK;
        double acc[OPS_COLSUM_BLOCK] = {0};
        for (int64_t r = 0; r < N; r++) {
            const float *row = dy + r * C + c0;
            for (int64_t j = 0; j < nc; j++) acc[j] += (double)row[j];
            if (dyh) ops_round_row(dyh + r * C + c0, row, nc);
        }
        for (int64_t j = 0; j < nc; j++) db[c0 + j] += (float)acc[j];
    }
}

#endif
