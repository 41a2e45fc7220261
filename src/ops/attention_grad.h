/* attention_grad.h - what the grad-mode attention kernel's two schedules share:
 * attention.c (the st_attention entry, the row work, the per-pair fp32 schedule and the
 * backward's bias and CoPE bookkeeping) and attention_batched.c (the block-major schedule
 * of a backend whose products run outside parallel regions: bf16). The state kept for
 * backward, the gradient buffers, the row work between the products, and the block-major
 * entry points. Not a public header: only those two files include it.
 *
 * Legend: B batch, H heads, T time, D head size; P (B,H,T,T); a query block is rows
 * [i0, i1) of rb = i1 - i0 rows, reading keys [0, kend): kend = i1 (causal) or T. */
#ifndef ST_ATTENTION_GRAD_H
#define ST_ATTENTION_GRAD_H

#include "attention_internal.h"

/* The block-major (bf16) schedule's ready operands. p: P' rounded by the row work while
 * each row is in cache, query block after query block, each block's pairs
 * dense (B*H, rb, kend); the PV and dV products read it. q, k, v: (B,H,T,D) rounded once,
 * when the sequence is one block (only then are their row ranges dense over the pairs);
 * else NULL and the backend rounds each call's rows. */
typedef struct st_attn_bf16 { uint16_t *q, *k, *v, *p; } st_attn_bf16;

/* What a grad-mode call keeps for its backward (the tape node's saved state). */
typedef struct st_attn_saved {
    float *P;            /* (B,H,T,T) probabilities before dropout; causal: row i holds
                          * keys j < end of its query block, zero for j > i */
    uint8_t *drop;       /* (B,H,T,T) 1 = dropped (same extent as P); NULL: no dropout */
    st_attn_bias bias;   /* copy of the provider; used only when it is learnable */
    int has_bias_grad;
    const float *gtab;   /* general bias (H,T,T); NULL: distance form or none */
    int has_cope;
    st_attn_cope cope;   /* CoPE embeddings (has_cope) */
    const float *cope_z, *cope_g;   /* z (B,H,T,n_pos) and gates (B,H,T,T) */
    st_attn_bf16 h;      /* block-major schedule: bf16 P' (and q, k, v in one block) */
    int64_t B, H, T, D;
    int causal;
    float scale, keep;   /* keep = 1/(1-p) */
} st_attn_saved;

/* The gradient buffers of one backward, shared by both schedules. */
typedef struct st_attn_grads {
    float *dq, *dk, *dv;   /* (B,H,T,D) or NULL */
    float *gacc;           /* (B*H, n) per-pair distance-bias partials, or NULL */
    float *gfull;          /* (H,T,T) general-bias gradient, or NULL */
    float *de;             /* (B*H, n_pos, D) CoPE partials, or NULL */
    float *dgate;          /* (B,H,T) gradient of the gate term's c, or NULL */
    int64_t n;             /* distance-table length */
} st_attn_grads;

/* Row work (attention.c), shared by both schedules; each works on pair bh, query rows
 * [i0, i1), and is called from inside a parallel loop over pairs. */
void st_attn_forward_rows(const st_attn_problem *pb, float *P, uint8_t *drop, int64_t bh, int64_t i0, int64_t i1,
                          float *pd, uint16_t *ph);
const float *st_attn_prime_rows(const st_attn_saved *s, int64_t bh, int64_t i0, int64_t i1, float *pd,
                                int64_t *ldp);
void st_attn_ds_rows(const st_attn_saved *s, int64_t bh, int64_t i0, int64_t i1, const float *Q, const float *pp,
                     int64_t ldp, float *g, uint16_t *gh, float *gacc, float *gfull, float *dq, float *de, float *dZ,
                     float *crow, float *dc);

/* Block-major schedule (attention_batched.c): it sizes its own buffers (the query block,
 * the bf16 copies kept in s->h, the scratch). Each returns 0 when the arena is out of
 * memory (ctx->failed set). The forward fills s->h; the backward's scratch is left to the
 * caller's arena mark. */
int st_attn_forward_batched(st_ctx *ctx, const st_attn_problem *pb, st_attn_saved *s);
int st_attn_backward_batched(st_ctx *ctx, const st_attn_saved *s, const float *q, const float *k, const float *v,
                             const float *dO, const st_attn_grads *G);

#endif
