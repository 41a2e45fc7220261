/* attention_cached.c - attention of Tq new queries against Tk keys and values the caller
 * keeps between calls (a KV cache for incremental decoding). The streamed online-softmax
 * kernel of attention_stream.c does the work: here only the problem is described.
 *
 * Per (b,h) pair, with the new queries the last Tq of the Tk cached positions (their own
 * keys already appended), query r at key position p = Tk - Tq + r:
 *   score(r, j) = scale q_r.k_j + bias(h, p - j),   keys j <= p, and j > p - window
 *                                                   when a window is given
 *   out_r = softmax_j(score(r, .)) V
 * which is row p of causal self-attention over the cached sequence (restricted to the
 * last `window` keys, and with a blockwise mask to the keys from the start of the block
 * before the query's, blocks counted at the absolute positions kpos0 + j): decoding token
 * by token gives the logits of the full forward.
 *
 * A distance bias comes as precomputed reversed tables (st_attention_bias_table): a cache
 * that outlives many calls fills them once instead of once per token and layer. A general
 * (i, j) bias is evaluated tile by tile at the absolute positions kpos0 + j.
 * Keys and values come as fp32 or bf16 rows (st_kv_rows): a bf16 cache halves the memory,
 * and each key block is widened to fp32 before its products (exact), so the result is the
 * fp32 kernel's on the rounded keys and values.
 * Inference only: nothing is recorded for backward (cached keys are plain floats). */
#include "attention_internal.h"

#include <omp.h>

void st_attention_bias_table(const st_attn_bias *bias, int64_t H, int64_t n, float *tab) {
    /* causal tables of a length-n call cover distances 0..n-1, reversed: tab[m] = bias(n-1-m) */
    st_attn_bias_tables(bias, H, n, 1, tab);
}

st_tensor *st_attention_cached(st_ctx *ctx, st_tensor *q, const float *k, const float *v,
                               int64_t kv_stride, int64_t Tk, const float *bias_tab, int64_t bias_len,
                               const st_attn_bias *gbias, int64_t kpos0, int64_t window, float scale) {
    const st_kv_rows kv = {.k = k, .v = v, .stride = kv_stride};
    const st_attn_mask mask = {.window = window};
    return st_attention_cached_sinks(ctx, q, &kv, Tk, bias_tab, bias_len, gbias, kpos0, scale, &mask, NULL, 0, 1);
}

st_tensor *st_attention_cached_sinks(st_ctx *ctx, st_tensor *q, const st_kv_rows *kv, int64_t Tk,
                                     const float *bias_tab, int64_t bias_len, const st_attn_bias *gbias,
                                     int64_t kpos0, float scale, const st_attn_mask *mask, st_tensor *q2,
                                     int64_t clip, int64_t kv_group) {
    static const st_attn_mask none = {0};
    if (!mask) mask = &none;
    const int64_t window = mask->window, sinks = mask->sinks;
    const float *sink_bias = mask->sink_bias;
    if (!q || ctx->failed) return NULL;
    ST_ASSERT(q->ndim == 4 && st_is_contiguous(q) && !ctx->grad);
    const int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], D = q->shape[3];
    const int half = kv->kh != NULL;   /* bf16 rows */
    ST_ASSERT(Tq <= Tk && kv->stride >= Tk * D && window >= 0 && mask->block >= 0 && kv_group >= 1 &&
              H % kv_group == 0);
    ST_ASSERT(half ? kv->vh && !kv->k && !kv->v && !kv->k2 : kv->k && kv->v && !kv->vh && !kv->k2h);
    /* every distance a query can see must be in the table: p - j < window, or p - j < Tk */
    ST_ASSERT(!bias_tab || bias_len >= (window > 0 && window < Tk ? window : Tk));
    /* gbias: a general-form bias and/or CoPE (no distance table with it) */
    ST_ASSERT(!gbias || (!bias_tab && st_attn_bias_route(gbias) != ST_ATTN_ROUTE_TABLE));
    ST_ASSERT(sinks >= 0 && (sinks == 0 || window > 0) && (!sinks || sink_bias || (!bias_tab && !gbias)));
    st_tensor *out = st_new4(ctx, B, H, Tq, D);
    if (!out) return NULL;
    if (B * H * Tq * D == 0) return out;
    const int64_t kb = ST_ATTN_KBLOCK < Tk ? ST_ATTN_KBLOCK : Tk;
    const int nth = omp_get_max_threads();
    const int general = st_attn_bias_route(gbias) == ST_ATTN_ROUTE_TILES;
    const st_attn_cope *cope = gbias ? gbias->cope : NULL;
    const int clipped = q2 != NULL;
    ST_ASSERT(clipped == (kv->k2 || kv->k2h) && (!q2 || (st_same_shape(q, q2) && st_is_contiguous(q2) && !gbias)));
    st_attn_problem pb = {
        .q = q->data, .k = kv->k, .v = kv->v, .kh = kv->kh, .vh = kv->vh, .out = out->data, .B = B, .H = H,
        .T = Tq, .D = D, .Tk = Tk, .kv_stride = kv->stride, .kv_group = kv_group, .koff = Tk - Tq, .window = window,
        .rtab = bias_tab, .rtab_len = bias_len, .rtab_top = bias_len - 1, .causal = 1,
        .gbias = general ? gbias : NULL, .gtab = NULL, .cope = cope, .kpos = kpos0, .sinks = sinks, .block = mask->block,
        .sink_bias = sink_bias, .q2 = q2 ? q2->data : NULL, .k2 = kv->k2, .k2h = kv->k2h, .clip = clip,
        .scale = scale > 0.0f ? scale : 1.0f / sqrtf((float)D), .p_drop = 0.0f, .seed = 0,
    };
    st_attn_take_gate(&pb, gbias);   /* FoX: c of the cached rows (the cache's stride) */
    const size_t per = st_attn_stream_scratch_floats(&pb, kb);
    float *scratch = st_ctx_alloc(ctx, (size_t)nth * per * sizeof(float), 0);
    if (!scratch) return NULL;
    /* tasks are (b,h,query block): one new token still spreads its H heads over threads */
    st_attn_stream_run(&pb, kb, scratch, nth);
    return out;
}
