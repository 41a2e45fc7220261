/* attention.c - fused multi-head attention with an additive distance bias: the
 * st_attention entry, the grad-mode forward that keeps the probabilities, and the
 * hand-written backward, with the row work between the products and the per-pair (fp32)
 * schedule. The block-major (bf16) schedule is in attention_batched.c; the inference
 * forward (online softmax, no (T,T) buffer) and the double reference in attention_stream.c.
 *
 * Legend: B batch, H heads, T time, D head size; q, k, v, out (B,H,T,D).
 * Forward, per (b,h), with P' the dropped-out probabilities (mask M, keep = 1/(1-p)):
 *   S = scale Q K^T + bias(h, i - j)      causal: j <= i only
 *   P = softmax_rows(S)                   (max-subtracted, starts at -inf)
 *   P' = P * M * keep                     (P' = P without dropout)
 *   O = P' V
 * Backward (dO given):
 *   dV += P'^T dO
 *   dP' = dO V^T,  dP = dP' * M * keep
 *   dS = P * (dP - rowsum(dP * P)) = P' * dP' - P * c,  c_i = sum_j P'_ij dP'_ij
 *   dQ += scale dS K,  dK += scale dS^T Q
 *   dbias(h, d) = sum over (b, i, j) with i - j = d of dS_ij   (the bias is unscaled)
 *   general form: dbias(h, i, j) = sum over b of dS_ij, handed to grad_block as (H,T,T)
 * FoX's gate term (st_attn_gate) adds c_i - c_j to S with the bias; its gradient
 *   dc_i += sum_j dS_ij (0 up to rounding: softmax is shift-invariant per row),
 *   dc_j -= sum_i dS_ij
 * is summed per pair in the row work (a pair's query blocks in order, by one thread).
 * CoPE (attention_cope.c) adds its term to S after the bias (forward_block) and turns a
 * row of dS into dS0 plus dZ before dQ/dK (backward_pair); it keeps the gates (B,H,T,T)
 * and z (B,H,T,n_pos), and sums dE per (b,h) pair, then over the pairs in order.
 * Every product works on a block of query rows; for causal attention a block [i0, i1)
 * only touches keys [0, i1), which skips the upper triangle except inside the diagonal
 * block (masked to 0 there). Two schedules, chosen by the matmul backend
 * (st_attn_batched): per pair (fp32: tasks in an OpenMP loop, one cblas_sgemm per
 * ST_ATTN_QBLOCK-row block each) or block-major (bf16: per query block, one
 * st_mm_gemm_batched call over every (b,h) pair outside the parallel loop, the row work
 * in parallel between the calls; one block of all T rows up to a size; attention_batched.c).
 * The row work (st_attn_forward_rows, st_attn_prime_rows, st_attn_ds_rows) is shared by both.
 *
 * Memory (grad mode): P (B,H,T,T) floats and, with dropout, a (B,H,T,T) byte mask are
 * kept for backward; that is the price of a fast backward at training lengths. A general
 * (i, j) bias adds its (H,T,T) table, and with learnable parameters an (H,T,T) gradient
 * during backward; the backward then runs one task per head (batch rows in order inside
 * it) so the per-head gradient is summed without races or thread-count dependence. The
 * block-major (bf16) schedule also keeps P' in bf16 (its blocks, at most (B,H,T,T)) and,
 * in one block, q, k, v in bf16. Scratch
 * that only one call reads (dropout's P' rows, the backward's dP'/dS blocks and their
 * bf16 copies) is rewound at the end of that call. */
#include "attention_grad.h"
#include "st_matmul.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

/* In-place softmax of p[0..n): max-subtracted; a row with every entry -inf becomes 0, one
 * with a NaN entry NaN. */
static void softmax_row(float *p, int64_t n) {
    const float mx = st_attn_max(p, n);
    if (mx == -INFINITY) {
        const float fill = st_attn_has_nan(p, n) ? NAN : 0.0f;
        for (int64_t j = 0; j < n; j++) p[j] = fill;
        return;
    }
    const float inv = 1.0f / st_attn_exp_sum(p, n, mx);   /* sum >= 1: the max term is exp(0) */
    for (int64_t j = 0; j < n; j++) p[j] *= inv;
}

/* h[0, n) = bf16(x[0, n)), h[n, len) = 0: a row of P' or dS whose entries past n (future
 * keys) are zero. */
static void round_row(uint16_t *restrict h, const float *restrict x, int64_t n, int64_t len) {
    ops_round_row(h, x, n);
    memset(h + n, 0, (size_t)(len - n) * sizeof(uint16_t));
}

/* Row work of a grad-mode forward block, once S = scale Q K^T of pair bh, query rows
 * [i0, i1), is in P: bias, CoPE gates, softmax, the dropout mask and, with dropout, the
 * P' rows in pd ((rb, kend), ld kend). ph: P' rounded to bf16 ((rb, kend) dense), or NULL. */
void st_attn_forward_rows(const st_attn_problem *pb, float *P, uint8_t *drop, int64_t bh, int64_t i0, int64_t i1,
                          float *pd, uint16_t *ph) {
    const int64_t T = pb->T, D = pb->D, rb = i1 - i0;
    const float *rtab = pb->rtab ? pb->rtab + (bh % pb->H) * st_attn_bias_len(T, pb->causal) : NULL;
    const float *gtab = pb->gtab ? pb->gtab + (size_t)(bh % pb->H) * (size_t)(T * T) : NULL;
    const float keep = st_attn_keep_scale(pb->p_drop);
    const int64_t kend = pb->causal ? i1 : T;
    float *Pb = P + (size_t)bh * (size_t)(T * T) + (size_t)(i0 * T);   /* (rb, kend), ld T */
    const int64_t npos = pb->cope ? pb->cope->n_pos : 0;
    float *Zb = pb->cope ? pb->cope_z + (size_t)(bh * T + i0) * (size_t)npos : NULL;   /* (rb, npos) */
    if (Zb) st_cope_z(pb->cope, pb->q + bh * T * D + i0 * D, rb, D, pb->scale, Zb);
    for (int64_t r = 0; r < rb; r++) {
        const int64_t i = i0 + r, jn = pb->causal ? i + 1 : T;
        float *p = Pb + r * T;
        if (rtab) {
            const float *br = st_attn_bias_row(rtab, T, i);
            for (int64_t j = 0; j < jn; j++) p[j] += br[j];
        } else if (gtab) {
            const float *br = gtab + i * T;   /* br[j] = bias(h, i, j) */
            for (int64_t j = 0; j < jn; j++) p[j] += br[j];
        }
        if (pb->gate) {   /* FoX: log of the gates between key j and query i */
            const float *c = pb->gate + bh * pb->gate_stride, ci = c[i];
            for (int64_t j = 0; j < jn; j++) p[j] += ci - c[j];
        }
        if (pb->doc)   /* per-instance mask: keys before the row's instance get p = 0 */
            for (int64_t j = 0, lo = pb->doc[(bh / pb->H) * T + i]; j < lo; j++) p[j] = -INFINITY;
        if (Zb) {   /* CoPE: gates of this row's scores, counted from the query backwards */
            float csum = 0.0f;
            st_cope_row_forward(Zb + r * npos, npos, p, jn, &csum,
                                pb->cope_g + (size_t)bh * (size_t)(T * T) + (size_t)(i * T));
        }
        softmax_row(p, jn);
        for (int64_t j = jn; j < kend; j++) p[j] = 0.0f;   /* future keys in the diagonal block */
        if (drop) {
            uint8_t *dr = drop + ((size_t)bh * (size_t)T + (size_t)i) * (size_t)T;
            float *x = pd + r * kend;
            for (int64_t j = 0; j < jn; j++) {
                const int d = st_attn_dropped(pb->seed, bh, T, i, j, pb->p_drop);
                dr[j] = (uint8_t)d;
                x[j] = p[j] * (d ? 0.0f : keep);
            }
            for (int64_t j = jn; j < kend; j++) { dr[j] = 0; x[j] = 0.0f; }
        }
        if (ph) round_row(ph + r * kend, drop ? pd + r * kend : p, jn, kend);
    }
}

/* Grad-mode forward of pair bh, query rows [i0, i1), inside a parallel loop (fp32):
 * P rows, mask rows, out rows. pd: (QBLOCK, T) scratch for P' when dropout is on. */
static void forward_block(const st_attn_problem *pb, float *P, uint8_t *drop, int64_t bh,
                          int64_t i0, int64_t i1, float *pd) {
    const int64_t T = pb->T, D = pb->D, rb = i1 - i0;
    const float *Q = pb->q + bh * T * D, *K = pb->k + bh * T * D, *V = pb->v + bh * T * D;
    const int64_t kend = pb->causal ? i1 : T;
    float *Pb = P + (size_t)bh * (size_t)(T * T) + (size_t)(i0 * T);   /* (rb, kend), ld T */
    /* S (rb, kend) = scale Q[i0:i1] K[0:kend]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)kend, (int)D,
                pb->scale, Q + i0 * D, (int)D, K, (int)D, 0.0f, Pb, (int)T);
    st_attn_forward_rows(pb, P, drop, bh, i0, i1, pd, NULL);
    /* O[i0:i1] (rb, D) = P' (rb, kend) V[0:kend] (kend, D) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)D, (int)kend, 1.0f,
                drop ? pd : Pb, drop ? (int)kend : (int)T, V, (int)D, 0.0f,
                pb->out + bh * T * D + i0 * D, (int)D);
}


/* P' rows of pair bh, query rows [i0, i1): the saved P (ld T), or with dropout P * mask *
 * keep rebuilt from the byte mask into pd ((rb, kend), ld kend). Returns the rows; *ldp
 * their leading dimension. */
const float *st_attn_prime_rows(const st_attn_saved *s, int64_t bh, int64_t i0, int64_t i1, float *pd,
                                int64_t *ldp) {
    const int64_t T = s->T, rb = i1 - i0, kend = s->causal ? i1 : T;
    const float *Pb = s->P + (size_t)bh * (size_t)(T * T) + (size_t)(i0 * T);
    *ldp = T;
    if (!s->drop) return Pb;
    const uint8_t *dr = s->drop + ((size_t)bh * (size_t)T + (size_t)i0) * (size_t)T;
    for (int64_t r = 0; r < rb; r++) {
        const uint8_t *d = dr + r * T;
        const float *p = Pb + r * T;
        float *x = pd + r * kend;
        for (int64_t j = 0; j < kend; j++) x[j] = p[j] * ((float)(1 - d[j]) * s->keep);
    }
    *ldp = kend;
    return pd;
}

/* Row work of the backward of pair bh, query rows [i0, i1), once g holds dP' (rb, kend):
 * g becomes dS (and gh, when not NULL, its bf16 rounding); the bias gradient (gacc:
 * reversed-distance accumulator of the pair, gfull: (T,T) of its head), the gate term's
 * (dc: the pair's (T) row of dL/dc) and CoPE's dZ -> dq rows and de are accumulated. Q:
 * the pair's q; dZ (rb, n_pos) and crow (T): CoPE scratch. */
void st_attn_ds_rows(const st_attn_saved *s, int64_t bh, int64_t i0, int64_t i1, const float *Q, const float *pp,
                     int64_t ldp, float *g, uint16_t *gh, float *gacc, float *gfull, float *dq, float *de, float *dZ,
                     float *crow, float *dc) {
    const int64_t T = s->T, D = s->D, rb = i1 - i0, kend = s->causal ? i1 : T;
    const int64_t npos = s->has_cope ? s->cope.n_pos : 0;
    const float *Pb = s->P + (size_t)bh * (size_t)(T * T) + (size_t)(i0 * T);
    if (npos) memset(dZ, 0, (size_t)(rb * npos) * sizeof(float));
    for (int64_t r = 0; r < rb; r++) {
        const int64_t i = i0 + r, jn = s->causal ? i + 1 : T;
        const float *p = Pb + r * T, *x = pp + r * ldp;
        float *gr = g + r * kend;
        const float c = st_attn_dot(x, gr, jn);
        /* dS = P' dP' - P c  (= P (dP - c) without dropout) */
        for (int64_t j = 0; j < jn; j++) gr[j] = x[j] * gr[j] - p[j] * c;
        for (int64_t j = jn; j < kend; j++) gr[j] = 0.0f;
        if (dc) {   /* s_ij = ... + c_i - c_j */
            float row = 0.0f;
            for (int64_t j = 0; j < jn; j++) { row += gr[j]; dc[j] -= gr[j]; }
            dc[i] += row;
        }
        if (npos)   /* CoPE: dS -> dS0 (softmax and gate paths), dZ of the row */
            st_cope_row_backward(s->cope_z + (size_t)(bh * T + i) * (size_t)npos, npos,
                                 s->cope_g + (size_t)bh * (size_t)(T * T) + (size_t)(i * T), jn, gr,
                                 dZ + r * npos, crow);
        if (gacc) {
            float *ga = gacc + (T - 1 - i);   /* ga[j] accumulates distance i - j */
            for (int64_t j = 0; j < jn; j++) ga[j] += gr[j];
        } else if (gfull) {
            float *gf = gfull + i * T;
            for (int64_t j = 0; j < jn; j++) gf[j] += gr[j];
        }
        if (gh) round_row(gh + r * kend, gr, jn, kend);
    }
    if (npos) st_cope_z_backward(&s->cope, dZ, Q + i0 * D, rb, D, s->scale, dq ? dq + i0 * D : NULL, de);
}

/* Backward of pair bh inside a parallel loop (fp32). dq/dk/dv: (T,D) gradient rows of this
 * pair or NULL when that input needs none; gacc: (n) reversed-distance bias-gradient
 * accumulator of this pair or NULL; gfull: (T,T) general-bias gradient of this pair's head
 * (summed over b) or NULL; de: (n_pos, D) CoPE embedding-gradient partial of this pair or
 * NULL. scratch: dP' (QBLOCK, T) then, with dropout, P' (QBLOCK, T); with CoPE then dZ
 * (QBLOCK, n_pos) and one row (T). */
static void backward_pair(const st_attn_saved *s, int64_t bh, const float *Q, const float *K,
                          const float *V, const float *dO, float *dq, float *dk, float *dv,
                          float *gacc, float *gfull, float *de, float *dc, float *scratch) {
    const int64_t T = s->T, D = s->D, npos = s->has_cope ? s->cope.n_pos : 0;
    const int need_ds = dq || dk || gacc || gfull || s->has_cope || dc;
    float *g = scratch;                                   /* dP' then dS, (rb, kend) */
    float *pd = scratch + (size_t)ST_ATTN_QBLOCK * (size_t)T;  /* P', (rb, kend) */
    float *dZ = scratch + (size_t)ST_ATTN_QBLOCK * (size_t)T * (s->drop ? 2 : 1);   /* (rb, npos) */
    float *crow = dZ + (size_t)ST_ATTN_QBLOCK * (size_t)npos;                        /* (T) */
    for (int64_t i0 = 0; i0 < T; i0 += ST_ATTN_QBLOCK) {
        const int64_t i1 = i0 + ST_ATTN_QBLOCK < T ? i0 + ST_ATTN_QBLOCK : T, rb = i1 - i0;
        const int64_t kend = s->causal ? i1 : T;
        const float *dOb = dO + i0 * D;
        int64_t ldp;
        const float *pp = st_attn_prime_rows(s, bh, i0, i1, pd, &ldp);
        /* dV[0:kend] += P'^T (kend, rb) dO[i0:i1] (rb, D) */
        if (dv)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kend, (int)D, (int)rb, 1.0f,
                        pp, (int)ldp, dOb, (int)D, 1.0f, dv, (int)D);
        if (!need_ds) continue;
        /* dP' (rb, kend) = dO[i0:i1] V[0:kend]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)kend, (int)D, 1.0f,
                    dOb, (int)D, V, (int)D, 0.0f, g, (int)kend);
        st_attn_ds_rows(s, bh, i0, i1, Q, pp, ldp, g, NULL, gacc, gfull, dq, de, dZ, crow, dc);
        /* dQ[i0:i1] += scale dS (rb, kend) K[0:kend];  dK[0:kend] += scale dS^T Q[i0:i1] */
        if (dq)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)D, (int)kend, s->scale,
                        g, (int)kend, K, (int)D, 1.0f, dq + i0 * D, (int)D);
        if (dk)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kend, (int)D, (int)rb, s->scale,
                        g, (int)kend, Q + i0 * D, (int)D, 1.0f, dk, (int)D);
    }
}

/* Backward on the per-pair schedule (fp32): one task per (b,h), so the pair's dK and dV
 * rows are summed over all its query blocks by one thread. OpenBLAS (OpenMP build) runs
 * each sgemm single-threaded inside the region. Pairs are handed out dynamically: equal
 * work, but a thread that loses its core to another process does not hold up the rest.
 * A learnable general bias: one task per head, its batch rows in order, so gfull of the
 * head is summed over b by one thread in a fixed order. scratch: `per` floats a thread. */
static void backward_pairs(const st_attn_saved *s, const float *q, const float *k, const float *v, const float *dO,
                           const st_attn_grads *G, float *scratch, size_t per, int nth) {
    const int64_t B = s->B, H = s->H, T = s->T, D = s->D, BH = B * H, n = G->n;
    const int64_t npos = s->has_cope ? s->cope.n_pos : 0;
    const int general = G->gfull != NULL;
    const int64_t ntask = general ? H : BH;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
    for (int64_t t = 0; t < ntask; t++) {
        for (int64_t b = 0; b < (general ? B : 1); b++) {
            const int64_t bh = general ? b * H + t : t;
            const size_t o = (size_t)(bh * T * D);
            backward_pair(s, bh, q + o, k + o, v + o, dO + o, G->dq ? G->dq + o : NULL, G->dk ? G->dk + o : NULL,
                          G->dv ? G->dv + o : NULL, G->gacc ? G->gacc + bh * n : NULL,
                          general ? G->gfull + (size_t)t * (size_t)(T * T) : NULL,
                          G->de ? G->de + (size_t)bh * (size_t)(npos * D) : NULL, G->dgate ? G->dgate + bh * T : NULL,
                          scratch + (size_t)omp_get_thread_num() * per);
        }
    }
}

static void attention_backward(st_ctx *ctx, st_node *node) {
    const st_attn_saved *s = node->saved;
    st_tensor *q = node->in[0], *k = node->in[1], *v = node->in[2];
    const int64_t B = s->B, H = s->H, T = s->T, D = s->D, BH = B * H;
    const int64_t n = st_attn_bias_len(T, s->causal);
    float *dq = q->requires_grad ? st_grad(ctx, q) : NULL;
    float *dk = k->requires_grad ? st_grad(ctx, k) : NULL;
    float *dv = v->requires_grad ? st_grad(ctx, v) : NULL;
    if (ctx->failed) return;
    const float *dO = node->out->grad;

    /* per-pair bias-gradient partials, summed over b in a fixed order afterwards, so the
     * result does not depend on the thread count */
    const int general = s->has_bias_grad && s->gtab;
    float *gacc = NULL, *gfull = NULL;
    if (general) {
        gfull = st_ctx_alloc(ctx, (size_t)H * (size_t)(T * T) * sizeof(float), 1);
        if (!gfull) return;
        memset(gfull, 0, (size_t)H * (size_t)(T * T) * sizeof(float));
    } else if (s->has_bias_grad) {
        gacc = st_ctx_alloc(ctx, (size_t)(BH * n + n) * sizeof(float), 1);
        if (!gacc) return;
        memset(gacc, 0, (size_t)(BH * n) * sizeof(float));
    }
    /* CoPE: dE partial per (b,h) pair, summed over the pairs in order afterwards */
    const int64_t npos = s->has_cope ? s->cope.n_pos : 0;
    float *de = NULL;
    if (npos && s->cope.ge) {
        de = st_ctx_alloc(ctx, (size_t)BH * (size_t)(npos * D) * sizeof(float), 1);
        if (!de) return;
        memset(de, 0, (size_t)BH * (size_t)(npos * D) * sizeof(float));
    }
    /* FoX's gate term: its c (B,H,T) is the node's 4th input */
    st_tensor *gt = node->in[3];
    float *dgate = gt && gt->requires_grad ? st_grad(ctx, gt) : NULL;
    if (ctx->failed) return;
    const int nth = omp_get_max_threads();
    const st_attn_grads G = {dq, dk, dv, gacc, gfull, de, dgate, n};
    /* the scratch below lives only through this call: rewound at the end, so a model's
     * layers do not each keep theirs until the step ends (one block: dS (B,H,T,T) in fp32
     * and bf16, 48 MiB a layer at B x H = 32, T = 512) */
    const st_arena_mark mark = st_arena_mark_get(ctx->arena);
    if (st_attn_batched(ctx->mm, ST_MM_ATTN_GRAD)) {
        if (!st_attn_backward_batched(ctx, s, q->data, k->data, v->data, dO, &G)) return;
    } else {
        const size_t per = (size_t)ST_ATTN_QBLOCK * (size_t)T * (s->drop ? 2 : 1) +
                           (npos ? (size_t)ST_ATTN_QBLOCK * (size_t)npos + (size_t)T : 0);
        float *scratch = st_ctx_alloc(ctx, (size_t)nth * per * sizeof(float), 1);
        if (!scratch) return;
        backward_pairs(s, q->data, k->data, v->data, dO, &G, scratch, per, nth);
    }
    st_arena_rewind(ctx->arena, mark);

    if (gacc) {
        /* g[k] = sum_b gacc[b,h][m] with m the reversed index of distance d0 + k */
        float *gd = gacc + BH * n;
        for (int64_t h = 0; h < H; h++) {
            for (int64_t kk = 0; kk < n; kk++) {
                float a = 0.0f;
                for (int64_t b = 0; b < B; b++) a += gacc[(b * H + h) * n + (n - 1 - kk)];
                gd[kk] = a;
            }
            s->bias.grad(&s->bias, (int)h, st_attn_bias_d0(T, s->causal), n, gd);
        }
    }
    if (de)
        for (int64_t bh = 0; bh < BH; bh++)
            for (int64_t x = 0; x < npos * D; x++) s->cope.ge[x] += de[(size_t)bh * (size_t)(npos * D) + (size_t)x];
    if (gfull)   /* causal: keys j < end of the query block only (the rest is 0) */
        for (int64_t h = 0; h < H; h++)
            for (int64_t i0 = 0; i0 < T; i0 += ST_ATTN_QBLOCK) {
                const int64_t i1 = i0 + ST_ATTN_QBLOCK < T ? i0 + ST_ATTN_QBLOCK : T;
                s->bias.grad_block(&s->bias, (int)h, i0, i1 - i0, 0, s->causal ? i1 : T,
                                   gfull + (size_t)h * (size_t)(T * T) + (size_t)(i0 * T), T);
            }
}

/* General bias materialised for the grad-mode kernels: gtab (H,T,T), row i of head h
 * holds bias(h, i, j) for the keys j a row of its query block reads (causal: j < i1).
 * Tasks (h, query block) in parallel: fill_block only reads its state. */
static void fill_general(const st_attn_bias *bias, int64_t H, int64_t T, int causal, float *gtab) {
    const int64_t nq = (T + ST_ATTN_QBLOCK - 1) / ST_ATTN_QBLOCK;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < H * nq; t++) {
        const int64_t h = t / nq, i0 = (t % nq) * ST_ATTN_QBLOCK;
        const int64_t i1 = i0 + ST_ATTN_QBLOCK < T ? i0 + ST_ATTN_QBLOCK : T;
        bias->fill_block(bias, (int)h, i0, i1 - i0, 0, causal ? i1 : T,
                         gtab + (size_t)h * (size_t)(T * T) + (size_t)(i0 * T), T);
    }
}

st_tensor *st_attention(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v,
                        const st_attn_bias *bias, int causal, float scale,
                        float p_drop, uint64_t seed) {
    return st_attention_doc(ctx, q, k, v, bias, causal, scale, p_drop, seed, NULL);
}

st_tensor *st_attention_doc(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v,
                            const st_attn_bias *bias, int causal, float scale,
                            float p_drop, uint64_t seed, const int32_t *doc) {
    if (!q || !k || !v || ctx->failed) return NULL;
    ST_ASSERT(q->ndim == 4 && st_same_shape(q, k) && st_same_shape(q, v));
    ST_ASSERT(!(p_drop < 0.0f));
    q = st_contiguous(ctx, q);
    k = st_contiguous(ctx, k);
    v = st_contiguous(ctx, v);
    if (!q || !k || !v) return NULL;
    causal = causal != 0;
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3];
    st_tensor *out = st_new4(ctx, B, H, T, D);
    if (!out) return NULL;
    if (B * H * T * D == 0) return out;

    const int64_t n = st_attn_bias_len(T, causal);
    const int route = st_attn_bias_route(bias);
    const int general = route == ST_ATTN_ROUTE_TILES;
    const st_attn_cope *cope = bias ? bias->cope : NULL;
    ST_ASSERT(!cope || causal);   /* CoPE counts from the query back over the keys it sees */
    ST_ASSERT(!doc || (causal && !cope));   /* the config refuses doc_mask with CoPE */
    const st_attn_gate *gate = bias ? bias->gate : NULL;
    ST_ASSERT(!gate || (causal && gate->c && gate->stride >= T &&
                        (!gate->t || (gate->t->ndim == 3 && gate->t->shape[0] == B && gate->t->shape[1] == H &&
                                      gate->t->shape[2] == T && gate->c == gate->t->data && st_is_contiguous(gate->t)))));
    float *rtab = NULL;
    if (route == ST_ATTN_ROUTE_TABLE) {
        rtab = st_ctx_alloc(ctx, (size_t)(H * n) * sizeof(float), 0);
        if (!rtab) return NULL;
        st_attn_bias_tables(bias, H, T, causal, rtab);
    }
    st_attn_problem pb = st_attn_self(q->data, k->data, v->data, out->data, B, H, T, D, rtab, causal,
                                      scale, ctx->train ? p_drop : 0.0f, seed);
    pb.doc = doc;
    st_attn_take_gate(&pb, bias);
    const int nth = omp_get_max_threads();
    /* A learnable bias needs the backward even when q, k, v do not. */
    const int record = st_needs_grad(ctx, q, k, v, gate ? gate->t : NULL) || (ctx->grad && st_attn_bias_learnable(bias));

    if (!record) {
        /* inference: streamed online softmax, O(block) scratch per thread, nothing kept */
        const int64_t kb = ST_ATTN_KBLOCK < T ? ST_ATTN_KBLOCK : T;
        pb.mm = ctx->mm;
        pb.gbias = general ? bias : NULL;
        pb.cope = cope;
        pb.stats = ctx->attn_stats;   /* before sizing: the stats' running sums take scratch */
        pb.stats_far = ctx->attn_far;
        const size_t per = st_attn_stream_scratch_floats(&pb, kb);
        float *scratch = st_ctx_alloc(ctx, (size_t)st_attn_stream_slots(&pb, nth) * per * sizeof(float), 0);
        if (!scratch) return NULL;
        st_attn_stream_run(&pb, kb, scratch, nth);
        return out;
    }

    st_attn_saved *s = st_ctx_alloc(ctx, sizeof *s, 1);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    const size_t tt = (size_t)(B * H) * (size_t)T * (size_t)T;
    s->P = st_ctx_alloc(ctx, tt * sizeof(float), 1);
    if (!s->P) return NULL;
    const int dropout = pb.p_drop > 0.0f;
    if (dropout && !(s->drop = st_ctx_alloc(ctx, tt, 1))) return NULL;
    if (general) {
        float *gtab = st_ctx_alloc(ctx, (size_t)H * (size_t)(T * T) * sizeof(float), 1);
        if (!gtab) return NULL;
        fill_general(bias, H, T, causal, gtab);
        pb.gtab = s->gtab = gtab;
    }
    if (st_attn_bias_has_grad(bias)) { s->bias = *bias; s->has_bias_grad = 1; }
    if (cope) {
        pb.cope = cope;
        pb.cope_z = st_ctx_alloc(ctx, (size_t)(B * H * T * cope->n_pos) * sizeof(float), 1);
        pb.cope_g = st_ctx_alloc(ctx, tt * sizeof(float), 1);
        if (!pb.cope_z || !pb.cope_g) return NULL;
        s->has_cope = 1;
        s->cope = *cope;
        s->cope_z = pb.cope_z;
        s->cope_g = pb.cope_g;
    }
    s->B = B; s->H = H; s->T = T; s->D = D;
    s->causal = causal;
    s->scale = pb.scale;
    s->keep = st_attn_keep_scale(pb.p_drop);

    if (st_attn_batched(ctx->mm, ST_MM_ATTN_GRAD)) {
        if (!st_attn_forward_batched(ctx, &pb, s)) return NULL;
    } else {
        /* Tasks are (b,h,query block): each writes disjoint rows of P, the mask and out.
         * Causal blocks cost in proportion to their key range, so tasks go out dearest
         * first (last query block of every pair, then the one before, ...) to whichever
         * thread is free: a cyclic static split gave one thread of two every odd block,
         * 25-50% more work at T = 512-256. Results do not depend on which thread runs a
         * task. Dropout's P' rows: one block a thread, for this call only (rewound). */
        const int64_t nq = (T + ST_ATTN_QBLOCK - 1) / ST_ATTN_QBLOCK, BH = B * H, ntask = BH * nq;
        const st_arena_mark mark = st_arena_mark_get(ctx->arena);
        float *pd = NULL;
        if (dropout && !(pd = st_ctx_alloc(ctx, (size_t)(nth * ST_ATTN_QBLOCK) * (size_t)T * sizeof(float), 0)))
            return NULL;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            const int64_t bh = t % BH, i0 = (nq - 1 - t / BH) * ST_ATTN_QBLOCK;
            const int64_t i1 = i0 + ST_ATTN_QBLOCK < T ? i0 + ST_ATTN_QBLOCK : T;
            forward_block(&pb, s->P, s->drop, bh, i0, i1,
                          pd ? pd + (size_t)omp_get_thread_num() * (size_t)ST_ATTN_QBLOCK * (size_t)T : NULL);
        }
        st_arena_rewind(ctx->arena, mark);
    }
    if (!st_record(ctx, "attention", attention_backward, out, q, k, v, gate ? gate->t : NULL, s)) return NULL;
    return out;
}
