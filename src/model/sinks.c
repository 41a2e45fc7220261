/* sinks.c - what attention sinks + window (include/st_transform.h) need from the model
 * beyond the kernel's mask: the sinks' own bias and, with cache positions, their second
 * query. Shared by the full forward (model.c) and the KV cache (decode.c).
 *
 * Sinks at their positions in the text (the default): sink j < K is seen by a query at
 * position p at distance p - j, like every key.
 *
 * Sinks at their cache positions (StreamingLLM, Xiao et al. 2023, arXiv 2309.17453: "we
 * focus on positions within the cache rather than those in the original text"): the cache
 * holds the K sinks at positions 0..K-1 and the last W keys right after them, so once
 * keys were dropped (p > cap = K + W - 1) the query sits at cap, its window keys at
 * cap - (p - j) (the same distances as in the text), and sink j at distance cap - j. So
 * only the sinks' scores change, and only for rows past cap:
 *   distance-form bias (alibi, t5, kerple, sandwich, ...): bias(h, min(p, cap) - j);
 *   q/k methods (rope): q2 = the query rotated at min(p, cap) against the keys as
 *     rotated (k2 = k), for the keys at distance >= W from p (the sinks outside the
 *     window; the kernel's clipped scores with clip = W). */
#include "model_internal.h"
#include "pos/pos.h"
#include "st_transform.h"

#include <string.h>

int64_t st_model_q2_clip(const st_model *m) {
    const int64_t w = st_transform_clip(m->xf);
    if (w > 0) return w;
    return st_transform_cache_cap(m->xf) > 0 && st_pos_method_of(m->cfg.pos)->qk ? m->xf->window : 0;
}

int st_block_sink_q(st_model *m, st_ctx *ctx, int l, st_tensor *q_raw, st_tensor *q, int64_t pos0, st_tensor **q2) {
    const int64_t cap = st_transform_cache_cap(m->xf);
    const st_pos_method *pm = st_pos_method_of(m->cfg.pos);
    *q2 = NULL;
    if (cap <= 0 || !pm->qk) return 1;
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3];
    const int64_t r0 = cap + 1 - pos0 > 0 ? cap + 1 - pos0 : 0;   /* rows at p > cap */
    if (r0 >= T) return 1;   /* no row past cap: every key at its text distance */
    ST_ASSERT(!ctx->grad);
    q_raw = st_contiguous(ctx, q_raw);
    q = st_contiguous(ctx, q);
    /* rows r0.. of every (b,h) pair as sequences of one token, each at position cap */
    const int64_t n = T - r0;
    st_tensor *g = q_raw && q ? st_new4(ctx, B * H * n, 1, 1, D) : NULL;
    st_tensor *out = g ? st_new4(ctx, B, H, T, D) : NULL;
    if (!out) return 0;
    for (int64_t bh = 0; bh < B * H; bh++)
        memcpy(g->data + bh * n * D, q_raw->data + (bh * T + r0) * D, (size_t)(n * D) * sizeof(float));
    st_tensor *gk = g;   /* the method transforms a q and a k; only the q is kept */
    if (!pm->qk(m, ctx, l, &g, &gk, cap) || !(g = st_contiguous(ctx, g))) return 0;
    memcpy(out->data, q->data, (size_t)st_numel(q) * sizeof(float));   /* rows < r0: q itself */
    for (int64_t bh = 0; bh < B * H; bh++)
        memcpy(out->data + (bh * T + r0) * D, g->data + bh * n * D, (size_t)(n * D) * sizeof(float));
    *q2 = out;
    return 1;
}

float *st_block_sink_bias(st_model *m, st_ctx *ctx, int l, int64_t n, int64_t S, int64_t p0, int64_t *rows) {
    const int64_t H = m->cfg.n_heads, cap = st_transform_cache_cap(m->xf);
    /* with a cap, the rows from position cap + 1 on are all alike: one stands for them */
    if (rows && cap > 0 && cap + 2 - p0 < n) n = cap + 2 - p0 > 1 ? cap + 2 - p0 : 1;
    if (rows) *rows = n;
    st_attn_bias *b = NULL;
    float *sb = st_ctx_alloc(ctx, (size_t)(H * n * S) * sizeof(float), 0);
    float *tmp = st_ctx_alloc(ctx, (size_t)S * sizeof(float), 0);
    if (!sb || !tmp || !st_block_bias(m, ctx, l, NULL, &b) || !b) return NULL;
    for (int64_t h = 0; h < H; h++)
        for (int64_t r = 0; r < n; r++) {
            const int64_t P = p0 + r, Pe = cap > 0 && P > cap ? cap : P;   /* the query's position */
            float *o = sb + (h * n + r) * S;
            if (b->fill) {   /* tmp[k] = bias(Pe - S + 1 + k): sink j is k = S - 1 - j */
                b->fill(b, (int)h, Pe - S + 1, S, tmp);
                for (int64_t j = 0; j < S; j++) o[j] = j <= Pe ? tmp[S - 1 - j] : 0.0f;
            } else {   /* general form (text positions only: st_pos_no_cache_positions) */
                ST_ASSERT(Pe == P);
                b->fill_block(b, (int)h, P, 1, 0, S, o, S);
            }
        }
    return sb;
}
