/* attention_window.c - causal self-attention restricted to attention sinks + a sliding
 * window (inference-time transform, include/st_transform.h): query i sees keys
 *   j in [0, sinks)  and  j in (i - window, i]
 * with the position bias at the true distances i - j. The streamed kernel of
 * attention_stream.c does the work (its window and sinks fields): memory stays O(T), and
 * key blocks outside both ranges are never touched, so the cost per query is
 * O(sinks + window) instead of O(i). Inference only.
 * st_attention_clipped adds clipped relative positions (ReRoPE): keys at distance >= clip
 * score q2_i.k2_j (the kernel's q2/k2 fields). */
#include "attention_internal.h"

#include <omp.h>

/* The schedule's query blocks start at multiples of it (the block-major one's 64, 128 or
 * 256 rows all divide 256). */
int64_t st_attention_row_block(const st_ctx *ctx) {
    return ctx && st_attn_batched(ctx->mm, ST_MM_ATTN_STREAM) ? ST_ATTN_SQBLOCK_BATCHED : ST_ATTN_SQBLOCK;
}

/* Query p in block b = floor(p / block) sees blocks b - 1 and b (up to itself). */
int64_t st_attention_block_lo(int64_t block, int64_t p) {
    if (block <= 0) return 0;
    const int64_t lo = (p / block - 1) * block;
    return lo > 0 ? lo : 0;
}

st_tensor *st_attention_window(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v,
                               const st_attn_bias *bias, float scale, int64_t sinks, int64_t window) {
    const st_attn_mask mask = {.sinks = sinks, .window = window};
    return st_attention_clipped(ctx, q, k, v, NULL, NULL, 0, bias, scale, &mask);
}

st_tensor *st_attention_clipped(st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor *v, st_tensor *q2,
                                st_tensor *k2, int64_t clip, const st_attn_bias *bias, float scale,
                                const st_attn_mask *mask) {
    static const st_attn_mask none = {0};
    if (!mask) mask = &none;
    const int64_t sinks = mask->sinks, window = mask->window, sink_rows = mask->sink_rows;
    if (!q || !k || !v || ctx->failed) return NULL;
    /* q (B,H,Tq,D): the last Tq of the T positions of k, v (B,H,T,D) */
    ST_ASSERT(q->ndim == 4 && k->ndim == 4 && st_same_shape(k, v) && !ctx->grad);
    ST_ASSERT(q->shape[0] == k->shape[0] && q->shape[1] == k->shape[1] && q->shape[3] == k->shape[3] &&
              q->shape[2] <= k->shape[2]);
    ST_ASSERT(sinks >= 0 && window >= 0 && mask->block >= 0);
    q = st_contiguous(ctx, q);
    k = st_contiguous(ctx, k);
    v = st_contiguous(ctx, v);
    if (!q || !k || !v) return NULL;
    const int route = st_attn_bias_route(bias);
    /* ReRoPE's clipped scores take a distance-form bias or none */
    ST_ASSERT(!q2 == !k2 && clip >= 0 && (!q2 || (st_same_shape(q, q2) && st_same_shape(k, k2) &&
                                                 route != ST_ATTN_ROUTE_TILES && !(bias && bias->cope))));
    if (q2) {
        q2 = st_contiguous(ctx, q2);
        k2 = st_contiguous(ctx, k2);
        if (!q2 || !k2) return NULL;
    }
    const int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], T = k->shape[2], D = q->shape[3];
    st_tensor *out = st_new4(ctx, B, H, Tq, D);
    if (!out) return NULL;
    if (B * H * Tq * D == 0) return out;
    const int general = route == ST_ATTN_ROUTE_TILES;
    const st_attn_cope *cope = bias ? bias->cope : NULL;   /* CoPE: needs one contiguous span (no sinks) */
    ST_ASSERT(!cope || (sinks == 0 && !q2));
    float *rtab = NULL;
    if (route == ST_ATTN_ROUTE_TABLE) {   /* not for CoPE: no fill (its term is pb.cope) */
        rtab = st_ctx_alloc(ctx, (size_t)(H * st_attn_bias_len(T, 1)) * sizeof(float), 0);
        if (!rtab) return NULL;
        st_attn_bias_tables(bias, H, T, 1, rtab);
    }
    st_attn_problem pb = st_attn_self(q->data, k->data, v->data, out->data, B, H, T, D, rtab, 1, scale, 0.0f, 0);
    /* query row i at key position i + T - Tq. A query block's key blocks and products
     * depend only on its rows' positions, so when T - Tq is a multiple of
     * st_attention_row_block() the rows come out bit for bit as in the call over all T. */
    pb.T = Tq;
    pb.koff = T - Tq;
    pb.gbias = general ? bias : NULL;
    pb.cope = cope;
    /* FoX: c of the T key rows; query row i reads c[i + koff] */
    ST_ASSERT(!bias || !bias->gate || (bias->gate->stride >= T && !q2));
    st_attn_take_gate(&pb, bias);
    pb.window = window < T ? window : 0;   /* a window covering every key is no window */
    pb.sinks = pb.window > 0 ? sinks : 0;
    pb.block = mask->block < T ? mask->block : 0;   /* one block covering every key is no mask */
    pb.sink_bias = pb.sinks > 0 ? mask->sink_bias : NULL;   /* (H, sink_rows, sinks): rows of the kernel's T = Tq */
    pb.sink_rows = sink_rows;
    ST_ASSERT(sink_rows >= 0 && sink_rows <= Tq);
    ST_ASSERT(!pb.sink_bias || route != ST_ATTN_ROUTE_NONE);
    pb.q2 = q2 ? q2->data : NULL;
    pb.k2 = k2 ? k2->data : NULL;
    pb.clip = clip;
    const int nth = omp_get_max_threads();
    const int64_t kb = ST_ATTN_KBLOCK < T ? ST_ATTN_KBLOCK : T;
    pb.mm = ctx->mm;   /* before sizing: the block-major schedule's slots hold more */
    pb.stats = ctx->attn_stats;
    pb.stats_far = ctx->attn_far;
    const size_t per = st_attn_stream_scratch_floats(&pb, kb);
    float *scratch = st_ctx_alloc(ctx, (size_t)st_attn_stream_slots(&pb, nth) * per * sizeof(float), 0);
    if (!scratch) return NULL;
    st_attn_stream_run(&pb, kb, scratch, nth);
    return out;
}
