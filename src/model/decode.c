/* decode.c - incremental decoding: the KV cache (st_kv_cache) and st_model_decode.
 *
 * A causal model's keys and values at position p depend only on tokens <= p, so once a
 * token has gone through the blocks its per-layer k, v (B=1: (H, D) each) never change
 * while the window has not slid. Decoding n new tokens at positions P = n_seen..:
 *   x = tok_emb[ids] (+ positions P)                                   (1,n,C)
 *   per layer l: q, k, v = qkv(LN1(x)) rotated at P (rope)             (1,H,n,D)
 *                append k, v to the cache rows len..len+n-1 of layer l
 *                a = attention(q; cached keys 0..len+n-1)  (st_attention_cached)
 *                x = block_out(x, a)                        (same ops as the full forward)
 *   logits = LN_f(x[n-1]) W_head^T                                     (V)
 * so a token costs one token's dense work plus O(window) attention, against a forward
 * over the whole window without the cache. A distance-form bias (alibi, alibi_rf, t5,
 * kerple, ...) depends only on the distance, so each layer's table is filled once per
 * reset over distances 0..window-1; a general (i, j) bias (fire) is evaluated per chunk
 * at the absolute positions of the cached keys. RoPE keys are cached already rotated at their absolute position: q_p.k_j
 * is a function of p - j alone, so keys stay valid however far the sequence goes.
 *
 * Past the window (relative methods and rope only; see st_kv_cache in st_model.h) a
 * query at position p sees keys p-window+1..p. The rows are kept contiguous by an
 * amortised shift: the cache has `window + slack` rows and, when a chunk does not fit,
 * moves the last window-1 keys (all a new query can still see) to the front. */
#include "pos/pos.h"

#include "st_matmul.h"

#include <stdio.h>
#include <string.h>

int st_kv_cache_init(st_kv_cache *c, const st_model *m, int64_t window, st_error *e) {
    memset(c, 0, sizeof *c);
    const st_model_config *cfg = &m->cfg;
    if (window < 1) return st_fail(e, ST_ERR_CONFIG, "kv cache: window of %lld tokens: must be >= 1", (long long)window);
    const int64_t max_len = st_pos_max_len(cfg);
    if (max_len > 0 && window > max_len)
        return st_fail(e, ST_ERR_CONFIG, "kv cache: a window of %lld tokens is longer than the %lld tokens %s "
                       "positions represent; %s", (long long)window, (long long)max_len, st_pos_name(cfg->pos),
                       st_pos_limit_why(cfg->pos));
    const int64_t L = cfg->n_layers, H = cfg->n_heads, D = cfg->d_model / cfg->n_heads;
    c->n_layers = (int)L;
    c->n_heads = (int)H;
    c->head_dim = (int)D;
    c->slides = st_kv_cache_slides(cfg->pos);
    /* slack window/4: the shift copies at most 4 keys per token per (layer, head) on
     * average, for 25% more memory */
    const int64_t slack = !c->slides ? 0 : window / 4 > 16 ? window / 4 : 16;
    c->window = window;
    c->rows = window + slack;
    const double kv = (double)L * (double)H * (double)c->rows * (double)D * sizeof(float);
    /* a distance bias is tabulated once per reset; a general one is evaluated per chunk */
    const int tables = st_pos_method_of(cfg->pos)->bias_form == ST_POS_BIAS_DISTANCE;
    const double tab = tables ? (double)L * (double)H * (double)window * sizeof(float) : 0.0;
    const double have = (double)st_mem_total();
    if (have > 0 && 2.0 * kv + tab > 0.9 * have)
        return st_fail(e, ST_ERR_MEMORY, "kv cache: a window of %lld tokens (model.n_layers %d, model.d_model %d) "
                       "needs %.2f GiB of keys and values; this machine has %.2f GiB",
                       (long long)window, cfg->n_layers, cfg->d_model, (2.0 * kv + tab) / 1073741824.0, have / 1073741824.0);
    c->k = st_aligned_alloc((size_t)kv, e);
    c->v = c->k ? st_aligned_alloc((size_t)kv, e) : NULL;
    c->bias = c->v && tab > 0 ? st_aligned_alloc((size_t)tab, e) : NULL;
    if (!c->v || (tab > 0 && !c->bias)) {
        st_kv_cache_free(c);
        return ST_ERR_MEMORY;
    }
    st_kv_cache_reset(c);
    return ST_OK;
}

void st_kv_cache_reset(st_kv_cache *c) {
    c->len = 0;
    c->n_seen = 0;
    c->bias_ready = 0;
    c->pos_ref = 0;
}

void st_kv_cache_free(st_kv_cache *c) {
    st_aligned_free(c->k);
    st_aligned_free(c->v);
    st_aligned_free(c->bias);
    memset(c, 0, sizeof *c);
}

/* Each layer's bias table over distances 0..window-1 (providers from the arena). */
static int fill_bias(st_model *m, st_kv_cache *c, st_ctx *ctx) {
    const int64_t H = c->n_heads, n = c->window;
    for (int l = 0; l < c->n_layers; l++) {
        st_attn_bias *b = NULL;
        if (!st_block_bias(m, ctx, l, &b)) return 0;
        st_attention_bias_table(b, H, n, c->bias + (size_t)l * (size_t)(H * n));
    }
    c->bias_ready = 1;
    return 1;
}

/* How many of n new tokens fit now. A sliding cache that is full first keeps only its
 * last window-1 keys: the oldest key a query at position n_seen may see is
 * n_seen - window + 1. Always >= 1. */
static int64_t make_room(st_kv_cache *c, int64_t n) {
    if (c->len + n <= c->rows) return n;
    const int64_t keep = c->len < c->window - 1 ? c->len : c->window - 1;
    if (c->slides && keep < c->len) {
        const int64_t D = c->head_dim, drop = c->len - keep;
        const int64_t pairs = (int64_t)c->n_layers * c->n_heads;
        for (int64_t lh = 0; lh < pairs; lh++) {
            float *k = c->k + (size_t)(lh * c->rows * D), *v = c->v + (size_t)(lh * c->rows * D);
            memmove(k, k + drop * D, (size_t)(keep * D) * sizeof(float));
            memmove(v, v + drop * D, (size_t)(keep * D) * sizeof(float));
        }
        c->len = keep;
    }
    const int64_t room = c->rows - c->len;
    return n < room ? n : room;
}

/* n tokens (n <= rows - len) through every block, their keys and values appended;
 * returns their residual stream x (1,n,C) before LN_f. */
static st_tensor *decode_chunk(st_model *m, st_kv_cache *c, st_ctx *ctx, const int32_t *ids,
                               int64_t n, st_error *e) {
    const int64_t H = c->n_heads, D = c->head_dim, rows = c->rows, len0 = c->len, p0 = c->n_seen;
    const st_pos_method *pm = st_pos_method_of(m->cfg.pos);
    if (pm->cache_keys) pm->cache_keys(m, c, p0, n);
    st_tensor *x = st_model_embed(m, ctx, ids, 1, n, p0, 0, e);
    for (int l = 0; l < c->n_layers && x; l++) {
        st_tensor *x_in = x;
        st_arena_mark mark = st_arena_mark_get(ctx->arena);
        st_tensor *q = NULL, *k = NULL, *v = NULL;
        if (!st_block_qkv(m, ctx, l, x, p0, c->slides ? c->window : 0, &q, &k, &v)) return NULL;
        float *kl = c->k + (size_t)(l * H * rows * D), *vl = c->v + (size_t)(l * H * rows * D);
        for (int64_t h = 0; h < H; h++) {   /* k, v (1,H,n,D) -> rows len0.. of (l, h) */
            memcpy(kl + (h * rows + len0) * D, k->data + h * n * D, (size_t)(n * D) * sizeof(float));
            memcpy(vl + (h * rows + len0) * D, v->data + h * n * D, (size_t)(n * D) * sizeof(float));
        }
        const float *tab = c->bias ? c->bias + (size_t)(l * H * c->window) : NULL;
        st_attn_bias *gb = NULL;   /* general (i, j) bias: cache row 0 is position p0 - len0 */
        if (!tab && st_pos_method_of(m->cfg.pos)->bias_form == ST_POS_BIAS_GENERAL &&
            !st_block_bias(m, ctx, l, &gb))
            return NULL;
        st_tensor *a = st_attention_cached(ctx, q, kl, vl, rows * D, len0 + n, tab, c->window, gb, p0 - len0,
                                           c->window, 0.0f);
        x = st_block_keep(ctx, x_in, st_block_out(m, ctx, l, x, a, 0), mark);
    }
    if (x) {
        c->len = len0 + n;
        c->n_seen = p0 + n;
    }
    return x;
}

int st_model_decode(st_model *m, st_kv_cache *c, st_ctx *ctx, const int32_t *ids, int64_t n_new,
                    float *logits, st_error *e) {
    const st_model_config *cfg = &m->cfg;
    const int64_t C = cfg->d_model, V = cfg->vocab_size;
    if (n_new < 1) return st_fail(e, ST_ERR_CONFIG, "decode: %lld new tokens: must be >= 1", (long long)n_new);
    if (ctx->grad || ctx->train)
        return st_fail(e, ST_ERR_GENERIC, "decode: the context must be in inference mode (st_ctx_begin(ctx, 0, 0))");
    if (c->n_layers != cfg->n_layers || c->n_heads != cfg->n_heads || c->head_dim * c->n_heads != cfg->d_model ||
        c->slides != st_kv_cache_slides(cfg->pos) ||
        (st_pos_method_of(cfg->pos)->bias_form == ST_POS_BIAS_DISTANCE && !c->bias))
        return st_fail(e, ST_ERR_CONFIG, "decode: the kv cache was made for another model");
    if (!c->slides && c->n_seen + n_new > c->window)
        return st_fail(e, ST_ERR_CONFIG, "decode: model.pos %s: absolute positions cannot slide; %lld decoded + %lld new "
                       "tokens pass the window of %lld (reset the cache and prefill the last window)",
                       st_pos_name(cfg->pos), (long long)c->n_seen, (long long)n_new, (long long)c->window);
    for (int64_t i = 0; i < n_new; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return st_fail(e, ST_ERR_DATA, "decode: token id %d at %lld is outside the vocabulary [0, %lld)",
                           (int)ids[i], (long long)i, (long long)V);
    const st_arena_mark start = st_arena_mark_get(ctx->arena);
    int ok = !c->bias || c->bias_ready || fill_bias(m, c, ctx);
    st_tensor *x = NULL;
    int64_t done = 0, n = 0;
    while (ok && done < n_new) {
        n = make_room(c, n_new - done);
        st_arena_rewind(ctx->arena, start);   /* only the last chunk's x is needed */
        x = decode_chunk(m, c, ctx, ids + done, n, e);
        ok = x != NULL;
        done += n;
    }
    /* logits of the last position only: LN_f(x[n-1]) (1,C) @ W^T (C,V) */
    int64_t row[2] = {1, C};
    st_tensor *h = NULL;
    if (ok) {
        st_params *p = &m->params;
        h = st_layernorm(ctx, st_wrap(ctx, x->data + (n - 1) * C, 2, row), st_param(p, m->p_ln_f_w),
                         st_param(p, m->p_ln_f_b), cfg->ln_eps);
    }
    if (h) {   /* one row: the fp32 backend's sgemv (OpenBLAS's sgemm packs W even then) */
        const st_tensor *W = st_model_head_weight(m);
        st_mm_gemm(ctx->mm, 1, V, C, 1.0f, st_mm_a(h->data, NULL, 0, C), st_mm_a(W->data, W->bf16, 1, C), 0.0f,
                   logits, V);
    }
    int rc = ST_OK;
    if (!h) {
        rc = e && e->code ? e->code : st_ctx_check(ctx, e);
        if (!rc) rc = st_fail(e, ST_ERR_GENERIC, "decode: forward failed");
    }
    st_arena_rewind(ctx->arena, start);
    return rc;
}
