/* attention_batched.c - the grad-mode attention kernel's block-major schedule, for a
 * matmul backend whose products must run outside OpenMP parallel regions (bf16: one
 * oneDNN primitive cache per backend). Per query block, each product of every (b,h) pair
 * is one st_mm_gemm_batched call, and the row work (attention.c: st_attn_forward_rows,
 * st_attn_ds_rows) runs in parallel over pairs between the calls. The math, the saved
 * state and the per-pair fp32 schedule are in attention.c. */
#include "attention_grad.h"
#include "st_matmul.h"

#include <omp.h>

/* Query rows per block of the block-major (bf16) schedule. oneDNN 2.6 runs a batched
 * product on its AMX brgemm only when each operand's matrices lie back to back. P' and dS
 * are written that way by the row work, in bf16, whatever the block (st_attn_bf16). A block
 * shorter than T reads q, k, v and dO rows at the heads' stride, though, so the backend
 * rounds those into dense copies on every call. One block of all T rows makes them dense
 * too, rounded once, at twice the causal flops: the whole (T,T) score square instead of
 * the lower triangle. Longer sequences run blocks of ATTN_BATCHED_ROWS, whose skipped
 * triangle saves more (12% more flops than exact causal; 64-row blocks rounded the keys
 * 4x as often, and before the row work wrote P' and dS in bf16 the backend rounded those
 * per call too: attention's products ran at 10-28% of the bf16 GEMM rate).
 * Measured on the AMX Xeon (2026-11-26, M model, bf16, bench --profile, attention's time
 * over the linear layers' in alternating runs), one block / 256 rows / 64 rows, the
 * 64-row and first 256-row figures with P' and dS rounded by the backend:
 *   T =   512, B x H = 32: 0.41-0.49 / 0.42-0.47 / 0.48-0.56
 *   T = 1,024, B x H = 16: 0.81-0.96 / 0.66-0.69 (0.76-0.86) / 0.99-1.08
 *   T = 2,048, B x H =  8: 1.66-1.67 / 1.44-1.52 (1.41-1.60) / 1.53-1.89
 *   T = 4,096, B x H =  8:     -     / (2.49-2.53) / 2.51-3.28  (512 rows: 3.06)
 * So one block up to ATTN_FULL_T rows (and ATTN_FULL_ELEMS scores over all pairs: g and
 * its bf16 copy in backward take 6 bytes each, 384 MiB at the cap). */
#define ATTN_FULL_T 512
#define ATTN_FULL_ELEMS ((int64_t)1 << 26)
#define ATTN_BATCHED_ROWS 256

static int64_t batched_qblock(int64_t BH, int64_t T) {
    return T <= ATTN_FULL_T && BH * T * T <= ATTN_FULL_ELEMS ? T : ATTN_BATCHED_ROWS;
}

/* Values before query block [i0, i0 + qb) in the bf16 P' of every pair, blocks of qb rows,
 * each block (B*H, rb, kend) with kend = its end (causal) or T. */
static int64_t block_offset(int64_t BH, int64_t T, int64_t qb, int causal, int64_t i0) {
    int64_t off = 0;
    for (int64_t j0 = 0; j0 < i0; j0 += qb) {
        const int64_t j1 = j0 + qb < T ? j0 + qb : T;
        off += (j1 - j0) * (causal ? j1 : T);
    }
    return BH * off;
}

/* Grad-mode forward on the block-major schedule (a backend whose products run outside
 * parallel regions: bf16): per query block, S of every (b,h) pair in one batched product,
 * the row work in parallel over pairs, then O of every pair in one batched product.
 * Keeps in s->h the bf16 P' of every block and, in one block, q, k, v rounded once (the
 * backward reads them). pd: (B*H, qb, T) for P' when dropout is on (pair bh's block dense
 * at bh rb kend), for this call only. 0 when the arena is out of memory. */
int st_attn_forward_batched(st_ctx *ctx, const st_attn_problem *pb, st_attn_saved *s) {
    const int64_t T = pb->T, D = pb->D, BH = pb->B * pb->H, qb = batched_qblock(BH, T);
    st_attn_bf16 *h = &s->h;
    if (!(h->p = st_ctx_alloc(ctx, (size_t)block_offset(BH, T, qb, pb->causal, T) * sizeof(uint16_t), 1))) return 0;
    if (qb == T) {
        const size_t nqkv = (size_t)(BH * T * D);
        if (!(h->q = st_ctx_alloc(ctx, 3 * nqkv * sizeof(uint16_t), 1))) return 0;
        h->k = h->q + nqkv;
        h->v = h->k + nqkv;
        st_bf16_round(h->q, pb->q, (int64_t)nqkv);
        st_bf16_round(h->k, pb->k, (int64_t)nqkv);
        st_bf16_round(h->v, pb->v, (int64_t)nqkv);
    }
    const st_arena_mark mark = st_arena_mark_get(ctx->arena);
    float *pd = NULL;
    if (pb->p_drop > 0.0f && !(pd = st_ctx_alloc(ctx, (size_t)(BH * qb) * (size_t)T * sizeof(float), 0))) return 0;
    st_mm *mm = ctx->mm;
    float *P = s->P;
    uint8_t *drop = s->drop;
    for (int64_t i0 = 0; i0 < T; i0 += qb) {
        const int64_t i1 = i0 + qb < T ? i0 + qb : T, rb = i1 - i0;
        const int64_t kend = pb->causal ? i1 : T;
        const st_mm_batch s_bt = {BH, T * D, T * D, T * T};
        uint16_t *ph = h->p + block_offset(BH, T, qb, pb->causal, i0);   /* (BH, rb, kend) */
        st_mm_gemm_batched(mm, s_bt, rb, kend, D, pb->scale, st_mm_a(pb->q + i0 * D, h->q, 0, D),
                           st_mm_a(pb->k, h->k, 1, D), 0.0f, P + i0 * T, T);
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t bh = 0; bh < BH; bh++)
            st_attn_forward_rows(pb, P, drop, bh, i0, i1, pd ? pd + bh * rb * kend : NULL, ph + bh * rb * kend);
        /* O[i0:i1] = P' V[0:kend], P' from its bf16 rows (the fp32 ones are not read) */
        const st_mm_batch o_bt = {BH, rb * kend, T * D, T * D};
        st_mm_gemm_batched(mm, o_bt, rb, D, kend, 1.0f, st_mm_a(NULL, ph, 0, kend), st_mm_a(pb->v, h->v, 0, D), 0.0f,
                           pb->out + i0 * D, D);
    }
    st_arena_rewind(ctx->arena, mark);
    return 1;
}

/* Backward on the block-major schedule (bf16): per query block, each product of every
 * (b,h) pair is one batched call outside the parallel region, and the row work runs in
 * parallel over pairs (over heads, batch rows in order, for a learnable general bias).
 * Blocks go in ascending order, so dK and dV sum over blocks in the per-pair order.
 * Scratch from the arena, which the caller rewinds: g (B*H, qb, T) for dP' then dS, and
 * gh for dS in bf16, rounded by the row work (6 bytes a score); pd, the same as g, for P'
 * with dropout; cs, per thread qb n_pos + T floats for CoPE; doh (B,H,T,D) for dO in bf16
 * when the sequence is one block. 0 when the arena is out of memory. */
int st_attn_backward_batched(st_ctx *ctx, const st_attn_saved *s, const float *q, const float *k, const float *v,
                             const float *dO, const st_attn_grads *G) {
    const int64_t B = s->B, H = s->H, T = s->T, D = s->D, BH = B * H, n = G->n;
    const int64_t qb = batched_qblock(BH, T), npos = s->has_cope ? s->cope.n_pos : 0, per = qb * npos + T;
    const int need_ds = G->dq || G->dk || G->gacc || G->gfull || s->has_cope || G->dgate;
    const int general = G->gfull != NULL;
    const st_attn_bf16 *h = &s->h;
    st_mm *mm = ctx->mm;
    const size_t all = (size_t)BH * (size_t)qb * (size_t)T;
    float *g = st_ctx_alloc(ctx, all * (s->drop ? 2 : 1) * sizeof(float), 1);
    float *cs = npos ? st_ctx_alloc(ctx, (size_t)omp_get_max_threads() * (size_t)per * sizeof(float), 1) : NULL;
    uint16_t *gh = st_ctx_alloc(ctx, all * sizeof(uint16_t), 1), *doh = NULL;
    if (h->q && !(doh = st_ctx_alloc(ctx, (size_t)(BH * T * D) * sizeof(uint16_t), 1))) return 0;
    if (!g || !gh || (npos && !cs)) return 0;
    float *pd = s->drop ? g + all : NULL;
    if (doh) st_bf16_round(doh, dO, BH * T * D);
    for (int64_t i0 = 0; i0 < T; i0 += qb) {
        const int64_t i1 = i0 + qb < T ? i0 + qb : T, rb = i1 - i0;
        const int64_t kend = s->causal ? i1 : T, blk = rb * kend;
        int64_t ldp = T;
        if (s->drop) {
#pragma omp parallel for schedule(static)
            for (int64_t bh = 0; bh < BH; bh++) {
                int64_t l;
                st_attn_prime_rows(s, bh, i0, i1, pd + bh * blk, &l);
            }
            ldp = kend;
        }
        const uint16_t *ph = h->p + block_offset(BH, T, qb, s->causal, i0);   /* bf16 P' (BH, rb, kend) */
        const st_mm_batch p_bt = {BH, blk, T * D, T * D};
        /* dV[0:kend] += P'^T dO[i0:i1] */
        if (G->dv)
            st_mm_gemm_batched(mm, p_bt, kend, D, rb, 1.0f, st_mm_a(NULL, ph, 1, kend),
                               st_mm_a(dO + i0 * D, doh, 0, D), 1.0f, G->dv, D);
        if (!need_ds) continue;
        /* dP' (rb, kend) = dO[i0:i1] V[0:kend]^T, dense per pair */
        const st_mm_batch g_bt = {BH, T * D, T * D, blk};
        st_mm_gemm_batched(mm, g_bt, rb, kend, D, 1.0f, st_mm_a(dO + i0 * D, doh, 0, D), st_mm_a(v, h->v, 1, D),
                           0.0f, g, kend);
        const int64_t ntask = general ? H : BH;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            float *dZ = cs ? cs + (size_t)omp_get_thread_num() * (size_t)per : NULL;
            for (int64_t b = 0; b < (general ? B : 1); b++) {
                const int64_t bh = general ? b * H + t : t;
                const size_t o = (size_t)(bh * T * D);
                const float *pp = s->drop ? pd + bh * blk : s->P + (size_t)bh * (size_t)(T * T) + i0 * T;
                st_attn_ds_rows(s, bh, i0, i1, q + o, pp, ldp, g + bh * blk, gh ? gh + bh * blk : NULL,
                                G->gacc ? G->gacc + bh * n : NULL,
                                general ? G->gfull + (size_t)t * (size_t)(T * T) : NULL, G->dq ? G->dq + o : NULL,
                                G->de ? G->de + (size_t)bh * (size_t)(npos * D) : NULL, dZ,
                                dZ ? dZ + qb * npos : NULL, G->dgate ? G->dgate + bh * T : NULL);
            }
        }
        /* dQ[i0:i1] += scale dS K[0:kend];  dK[0:kend] += scale dS^T Q[i0:i1] */
        const st_mm_batch dq_bt = {BH, blk, T * D, T * D};
        if (G->dq)
            st_mm_gemm_batched(mm, dq_bt, rb, D, kend, s->scale, st_mm_a(g, gh, 0, kend), st_mm_a(k, h->k, 0, D),
                               1.0f, G->dq + i0 * D, D);
        if (G->dk)
            st_mm_gemm_batched(mm, dq_bt, kend, D, rb, s->scale, st_mm_a(g, gh, 1, kend),
                               st_mm_a(q + i0 * D, h->q, 0, D), 1.0f, G->dk, D);
    }
    return 1;
}
