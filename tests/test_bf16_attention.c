/* test_bf16_attention.c - attention's bf16 schedules (training's grad-mode kernel and
 * evaluation's streamed kernel, block-major batched products) against the same kernels
 * in fp32. Tolerances (the product bounds are derived in tests/test_bf16.c):
 *   - attention (block-major schedule, four bf16 products): the scores get the dot-product
 *     error of test_bf16.c, eps_S <= 2^-7 scale sum_d |q_d||k_d|; softmax maps a score error eps
 *     to a relative probability error <= 2 eps, and P'V adds its own 2^-7. With q, k, v
 *     ~ N(0,1), D = 16, scale 1/4 the worst case eps_S is ~2.5 2^-7 but the typical one is
 *     ~sqrt(D) times smaller, so the output is checked normwise:
 *       ||O_bf16 - O_fp32|| <= 2 2^-7 ||O_fp32||,
 *     and every gradient (each passes through up to four rounded products and the
 *     softmax Jacobian) against 4 2^-7 in the same norm. Measured: 0.4-0.5 2^-7 for the
 *     outputs, 0.1-0.9 2^-7 for the gradients (printed). Indexing errors of the batched
 *     schedule would show as O(1) differences, far beyond either bound.
 *   - the streamed inference kernel (block-major in bf16: QK^T and PV of every (b,h) pair
 *     per query and key block as batched products) under the same output bound, for
 *     distance and general biases, non-causal, CoPE, sinks + window, the per-instance
 *     mask and clipped positions; deterministic.
 * Reference kernels in this file are plain double loops (test code, not library GEMMs). */
#include "test_ops_util.h"

#include <omp.h>
#include <stdint.h>

#define TWO_M7 (1.0 / 128.0)   /* 2u: worst-case relative error of a bf16 product */

/* ----------------------------------------------------------- attention ---- */
/* Bias providers of both forms with learnable parameters (so their gradients are
 * checked too): distance form -s_h |d|, general form -a_h |i - j| / (1 + i / 8). */
typedef struct att_bias { float par[4]; double g[4]; } att_bias;

static void dist_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const att_bias *b = self->state;
    for (int64_t k = 0; k < n; k++) out[k] = -b->par[h] * (float)llabs(d0 + k);
}
static void dist_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    att_bias *b = self->state;
    for (int64_t k = 0; k < n; k++) b->g[h] -= (double)g[k] * (double)llabs(d0 + k);
}
static void gen_fill(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj, float *out,
                     int64_t ld) {
    const att_bias *b = self->state;
    for (int64_t r = 0; r < ni; r++)
        for (int64_t c = 0; c < nj; c++)
            out[r * ld + c] = -b->par[h] * (float)llabs(i0 + r - j0 - c) / (1.0f + (float)(i0 + r) / 8.0f);
}
static void gen_grad(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj, const float *g,
                     int64_t ld) {
    att_bias *b = self->state;
    for (int64_t r = 0; r < ni; r++)
        for (int64_t c = 0; c < nj; c++)
            b->g[h] -= (double)g[r * ld + c] * (double)llabs(i0 + r - j0 - c) / (1.0 + (double)(i0 + r) / 8.0);
}

typedef struct att_run { float *out, *dq, *dk, *dv, *de; double gb[4]; } att_run;

/* kind: 0 causal distance bias, 1 causal general bias, 2 non-causal no bias,
 * 3 causal distance bias with dropout, 4 causal CoPE (no bias). */
static void run_attention(st_mm *mm, int kind, leaves *L, const float *dy, const float *e, att_run *r) {
    const int64_t n = st_numel(L->t[0]), H = L->t[0]->shape[1], npos = 12, D = L->t[0]->shape[3];
    for (int i = 0; i < 3; i++) memset(L->t[i]->grad, 0, (size_t)n * sizeof(float));
    att_bias ab = {{0.5f, 0.25f, 0.125f, 0.0625f}, {0}};
    float *ge = calloc((size_t)(npos * D), sizeof(float));
    st_attn_cope cp = {e, ge, npos};
    st_attn_bias bias = {0};
    bias.state = &ab;
    if (kind == 0 || kind == 2 || kind == 3) { bias.fill = dist_fill; bias.grad = dist_grad; }
    if (kind == 1) { bias.fill_block = gen_fill; bias.grad_block = gen_grad; }
    if (kind == 4) bias.cope = &cp;
    env en;
    st_ctx *ctx = env_open(&en, 1, kind == 3);
    ctx->mm = mm;
    st_tensor *o = st_attention(ctx, L->t[0], L->t[1], L->t[2], kind == 2 ? NULL : &bias, kind != 2, 0.0f,
                                kind == 3 ? 0.1f : 0.0f, 99);
    r->out = malloc((size_t)n * sizeof(float));
    memcpy(r->out, o->data, (size_t)n * sizeof(float));
    const size_t used = ctx->arena->used;
    backward_from(ctx, o, dy);
    /* the backward keeps the gradients (dO, dq, dk, dv; the general bias's (H,T,T) and
     * CoPE's partials) and rewinds its scratch: dS blocks of (B*H, 64..T, T) floats */
    const int64_t T = L->t[0]->shape[2];
    const size_t kept = (size_t)(4 * n) * sizeof(float) + (kind == 1 ? (size_t)(H * T * T) * sizeof(float) : 0) +
                        (size_t)(L->t[0]->shape[0] * H * npos * D) * sizeof(float) + 65536;
    CHECK_MSG(ctx->arena->used - used <= kept, "attention backward kept %zu bytes of scratch",
              ctx->arena->used - used - (size_t)(4 * n) * sizeof(float));
    env_close(&en);
    float **dst[3] = {&r->dq, &r->dk, &r->dv};
    for (int i = 0; i < 3; i++) {
        *dst[i] = malloc((size_t)n * sizeof(float));
        memcpy(*dst[i], L->t[i]->grad, (size_t)n * sizeof(float));
    }
    r->de = ge;
    for (int h = 0; h < H && h < 4; h++) r->gb[h] = ab.g[h];
}

static void att_free(att_run *r) { free(r->out); free(r->dq); free(r->dk); free(r->dv); free(r->de); }

/* ||a - b|| / ||b|| <= tol (tol in units of 2^-7); prints the measured ratio */
static int norm_close(const char *what, const float *a, const float *b, int64_t n, double tol) {
    double d = 0, nb = 0;
    for (int64_t i = 0; i < n; i++) { d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]); nb += (double)b[i] * b[i]; }
    const double rel = sqrt(d) / (sqrt(nb) + 1e-30);
    if (rel > tol * TWO_M7) {
        fprintf(stderr, "FAIL %s: ||bf16 - fp32|| / ||fp32|| = %.3g > %g 2^-7\n", what, rel, tol);
        return 0;
    }
    printf("  %-34s rel. error %.2e (%.2f 2^-7, bound %g)\n", what, rel, rel / TWO_M7, tol);
    return 1;
}

/* The block-major schedule in both forms (src/ops/attention_batched.c, batched_qblock): T = 150
 * runs as one block of all rows (q, k, v, dO rounded once); T = 1100 in 256-row blocks
 * whose q, k, v, dO rows the backend rounds per call. P' and dS are rounded by the row
 * work in both. */
static void test_attention(st_mm *bf, int64_t B, int64_t H, int64_t T) {
    const int chosen = st_mm_attention(bf);
    st_mm_set_attention(bf, ST_MM_ATTN_GRAD);   /* the block-major bf16 schedule whatever the CPU (AMX picks it itself) */
    const int64_t D = 16, n = B * H * T * D;
    printf("grad-mode attention, B %lld H %lld T %lld:\n", (long long)B, (long long)H, (long long)T);
    const int64_t spec[3][5] = {{4, B, H, T, D}, {4, B, H, T, D}, {4, B, H, T, D}};
    static const char *const kinds[] = {"causal, distance bias", "causal, general bias", "non-causal",
                                        "causal, dropout 0.1", "causal, CoPE"};
    leaves L;
    leaves_init(&L, 31, 3, spec, 1.0f);
    float *dy = malloc((size_t)n * sizeof(float)), *e = malloc(12 * D * sizeof(float));
    fill_normal(dy, n, 32, 1.0f, 0.0f);
    fill_normal(e, 12 * D, 33, 0.5f, 0.0f);
    for (int kind = 0; kind < 5; kind++) {
        att_run f, h, h2;
        run_attention(NULL, kind, &L, dy, e, &f);
        run_attention(bf, kind, &L, dy, e, &h);
        run_attention(bf, kind, &L, dy, e, &h2);
        char what[96];
        printf("attention bf16 vs fp32, %s:\n", kinds[kind]);
        snprintf(what, sizeof what, "%s: out", kinds[kind]);
        CHECK(norm_close(what, h.out, f.out, n, 2));
        const float *gb[3] = {h.dq, h.dk, h.dv}, *gf[3] = {f.dq, f.dk, f.dv};
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof what, "%s: d%c", kinds[kind], "qkv"[i]);
            CHECK(norm_close(what, gb[i], gf[i], n, 4));
        }
        if (kind <= 1 || kind == 3) {
            float a[3], b[3];
            for (int i = 0; i < 3; i++) { a[i] = (float)h.gb[i]; b[i] = (float)f.gb[i]; }
            snprintf(what, sizeof what, "%s: bias gradient", kinds[kind]);
            CHECK(norm_close(what, a, b, 3, 4));
        }
        if (kind == 4) {
            snprintf(what, sizeof what, "%s: dE", kinds[kind]);
            CHECK(norm_close(what, h.de, f.de, 12 * D, 4));
        }
        /* the bf16 path is really taken, and it is deterministic */
        CHECK_MSG(memcmp(h.out, f.out, (size_t)n * sizeof(float)) != 0, "%s: bf16 output equals fp32", kinds[kind]);
        CHECK_MSG(!memcmp(h.out, h2.out, (size_t)n * sizeof(float)) && !memcmp(h.dq, h2.dq, (size_t)n * sizeof(float)) &&
                  !memcmp(h.dk, h2.dk, (size_t)n * sizeof(float)) && !memcmp(h.dv, h2.dv, (size_t)n * sizeof(float)),
                  "%s: bf16 attention not deterministic", kinds[kind]);
        att_free(&f); att_free(&h); att_free(&h2);
    }
    /* without AMX training attention stays fp32 (per pair, cblas_sgemm): fp32's bits */
    st_mm_set_attention(bf, 0);
    att_run f, h;
    run_attention(NULL, 0, &L, dy, e, &f);
    run_attention(bf, 0, &L, dy, e, &h);
    CHECK_MSG(!memcmp(h.out, f.out, (size_t)n * sizeof(float)) && !memcmp(h.dq, f.dq, (size_t)n * sizeof(float)),
              "grad-mode attention not routed to fp32");
    att_free(&f); att_free(&h);
    st_mm_set_attention(bf, chosen);
    free(dy);
    free(e);
    st_params_free(&L.p);
}

/* The streamed inference kernel (no gradients) in bf16: its block-major schedule with
 * batched products. kind: 0 causal distance bias, 1 causal general bias, 2 non-causal,
 * 3 causal CoPE, 4 sinks 2 + window 40 with the distance bias, 5 per-instance mask,
 * 6 clipped positions (ReRoPE's second product; q2, k2 stand-ins: k and q), 7 blocks of
 * 100 and 8 blocks of 256 (on the key blocks' grid: the pre-rounded keys) with the
 * distance bias. */
static const st_attn_mask streamed_masks[9] = {[4] = {.sinks = 2, .window = 40}, [7] = {.block = 100},
                                               [8] = {.block = 256}};
static float *run_streamed(st_mm *mm, int kind, leaves *L, const float *e) {
    const int64_t n = st_numel(L->t[0]), B = L->t[0]->shape[0], T = L->t[0]->shape[2], D = L->t[0]->shape[3];
    att_bias ab = {{0.5f, 0.25f, 0.125f, 0.0625f}, {0}};
    float *ge = calloc((size_t)(12 * D), sizeof(float));
    st_attn_cope cp = {e, ge, 12};
    st_attn_bias bias = {0};
    bias.state = &ab;
    if (kind != 1 && kind != 3) bias.fill = dist_fill;
    if (kind == 1) bias.fill_block = gen_fill;
    if (kind == 3) bias.cope = &cp;
    int32_t *doc = malloc((size_t)(B * T) * sizeof(int32_t));
    for (int64_t x = 0; x < B * T; x++) doc[x] = (int32_t)((x % T) / 37 * 37);   /* instances of 37 tokens */
    env en;
    st_ctx *ctx = env_open(&en, 0, 0);
    ctx->mm = mm;
    st_tensor *o = kind == 6   ? st_attention_clipped(ctx, L->t[0], L->t[1], L->t[2], L->t[1], L->t[0], 20, &bias, 0.0f, NULL)
                   : kind == 4 || kind >= 7
                       ? st_attention_clipped(ctx, L->t[0], L->t[1], L->t[2], NULL, NULL, 0, &bias, 0.0f, &streamed_masks[kind])
                   : kind == 5 ? st_attention_doc(ctx, L->t[0], L->t[1], L->t[2], &bias, 1, 0.0f, 0.0f, 0, doc)
                               : st_attention(ctx, L->t[0], L->t[1], L->t[2], &bias, kind != 2, 0.0f, 0.0f, 0);
    CHECK(o && ctx->n_nodes == 0);   /* inference: the streamed kernel, nothing recorded */
    float *out = malloc((size_t)n * sizeof(float));
    if (o) memcpy(out, o->data, (size_t)n * sizeof(float));
    env_close(&en);
    free(ge);
    free(doc);
    return out;
}

/* The last Tq query rows alone (a sliding window's scored rows: st_attention_clipped with
 * q holding those rows), distance bias, causal, under mask. Bit for bit the full call's
 * rows when T - Tq is a multiple of st_attention_row_block(). */
static int tail_matches(st_mm *mm, leaves *L, const float *full, const st_attn_mask *mask) {
    const int64_t B = L->t[0]->shape[0], H = L->t[0]->shape[1], T = L->t[0]->shape[2], D = L->t[0]->shape[3];
    att_bias ab = {{0.5f, 0.25f, 0.125f, 0.0625f}, {0}};
    st_attn_bias bias = {0};
    bias.state = &ab;
    bias.fill = dist_fill;
    env en;
    st_ctx *ctx = env_open(&en, 0, 0);
    ctx->mm = mm;
    const int64_t Tq = T - st_attention_row_block(ctx);
    CHECK(Tq > 0 && st_attention_row_block(ctx) == 256);
    st_tensor *qt = st_new4(ctx, B, H, Tq, D);
    for (int64_t bh = 0; bh < B * H; bh++)
        memcpy(qt->data + bh * Tq * D, L->t[0]->data + (bh * T + T - Tq) * D, (size_t)(Tq * D) * sizeof(float));
    st_tensor *o = st_attention_clipped(ctx, qt, L->t[1], L->t[2], NULL, NULL, 0, &bias, 0.0f, mask);
    int same = o != NULL;
    for (int64_t bh = 0; o && bh < B * H; bh++)
        same &= !memcmp(o->data + bh * Tq * D, full + (bh * T + T - Tq) * D, (size_t)(Tq * D) * sizeof(float));
    env_close(&en);
    return same;
}

/* Same bound as the grad-mode forward: ||O_bf16 - O_fp32|| <= 2 2^-7 ||O_fp32||. */
static void test_attention_streamed(st_mm *bf) {
    const int chosen = st_mm_attention(bf);
    st_mm_set_attention(bf, ST_MM_ATTN_STREAM);   /* bf16 products whatever the CPU (AMX picks them itself) */
    const int64_t B = 2, H = 3, T = 300, D = 16;   /* T: 5 query blocks, 2 key blocks */
    const int64_t spec[3][5] = {{4, B, H, T, D}, {4, B, H, T, D}, {4, B, H, T, D}};
    /* blocks need 3 of them to mask anything: 600 rows (3 key blocks) */
    const int64_t spec2[3][5] = {{4, B, H, 2 * T, D}, {4, B, H, 2 * T, D}, {4, B, H, 2 * T, D}};
    static const char *const kinds[] = {"causal, distance bias", "causal, general bias", "non-causal", "causal, CoPE",
                                        "sinks 2 + window 40", "per-instance mask", "clipped at 20", "blocks of 100",
                                        "blocks of 256"};
    leaves L1, L2;
    leaves_init(&L1, 41, 3, spec, 1.0f);
    leaves_init(&L2, 47, 3, spec2, 1.0f);
    float *e = malloc(12 * D * sizeof(float));
    fill_normal(e, 12 * D, 43, 0.5f, 0.0f);
    printf("streamed attention (inference) bf16 vs fp32:\n");
    for (int kind = 0; kind < 9; kind++) {
        leaves *L = kind >= 7 ? &L2 : &L1;
        const int64_t n = st_numel(L->t[0]);
        float *f = run_streamed(NULL, kind, L, e), *h = run_streamed(bf, kind, L, e), *h2 = run_streamed(bf, kind, L, e);
        char what[96];
        snprintf(what, sizeof what, "streamed %s: out", kinds[kind]);
        CHECK(norm_close(what, h, f, n, 2));
        CHECK_MSG(memcmp(h, f, (size_t)n * sizeof(float)) != 0, "%s: bf16 output equals fp32", what);
        CHECK_MSG(!memcmp(h, h2, (size_t)n * sizeof(float)), "%s: not deterministic", what);
        if (kind == 0 || kind == 4 || kind >= 7)   /* the rows past one row block, alone */
            CHECK_MSG(tail_matches(bf, L, h, &streamed_masks[kind]),
                      "%s: the last rows alone differ from the full call's", what);
        free(f); free(h); free(h2);
    }
    /* without AMX the eval kernel stays fp32: the same bits as fp32 */
    st_mm_set_attention(bf, 0);
    float *f = run_streamed(NULL, 0, &L1, e), *h = run_streamed(bf, 0, &L1, e);
    CHECK_MSG(!memcmp(h, f, (size_t)st_numel(L1.t[0]) * sizeof(float)), "streamed attention not routed to fp32");
    free(f); free(h);
    st_mm_set_attention(bf, chosen);
    free(e);
    st_params_free(&L1.p);
    st_params_free(&L2.p);
}

int main(void) {
    int rc;
    st_mm *bf = test_bf16_backend("test_bf16_attention", 0, &rc);
    if (!bf) return rc;
    test_attention(bf, 2, 3, 150);
    test_attention(bf, 1, 2, 1100);
    test_attention_streamed(bf);
    st_mm_free(bf);
    return test_finish("test_bf16_attention");
}
