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
#include "st_transform.h"

#include "st_matmul.h"

#include <stdio.h>
#include <string.h>

/* Bytes of one cached element: a float, or a bf16 in a bf16 cache. */
static size_t cache_elem(const st_kv_cache *c) { return c->precision == ST_PREC_BF16 ? sizeof(uint16_t) : sizeof(float); }
/* One of k, v (k2): (L, n_kv_heads, rows, D) elements; grouped-query attention keeps one
 * key/value head per group of query heads. */
static double cache_kv_bytes(const st_kv_cache *c) {
    return (double)c->n_layers * c->n_kv_heads * (double)c->rows * c->head_dim * (double)cache_elem(c);
}
/* The distance-bias tables: (L, n_heads, window) floats. */
static double cache_tab_bytes(const st_kv_cache *c) {
    return (double)c->n_layers * c->n_heads * (double)c->window * sizeof(float);
}
/* FoX's gate sums: (L, n_heads, rows) floats when `gated` (the method has a gate term). */
static double cache_gate_bytes(const st_kv_cache *c, int gated) {
    return gated ? (double)c->n_layers * c->n_heads * (double)c->rows * sizeof(float) : 0.0;
}
/* model.kv_shift's carried rows: the last token's k and v before the shift, (L, 2, n_kv_heads,
 * D) floats when `shifted`. */
static double cache_shift_bytes(const st_kv_cache *c, int shifted) {
    return shifted ? 2.0 * c->n_layers * c->n_kv_heads * c->head_dim * sizeof(float) : 0.0;
}
/* Everything the cache holds: k, v (and rerope's unrotated keys), the tables if any, the
 * gate sums and the shift's rows (their bytes). */
static double cache_bytes(const st_kv_cache *c, int tables, double extra) {
    return (c->clip > 0 ? 3.0 : 2.0) * cache_kv_bytes(c) + (tables ? cache_tab_bytes(c) : 0.0) + extra;
}

int st_kv_cache_init(st_kv_cache *c, const st_model *m, int64_t window, int precision, st_error *e) {
    memset(c, 0, sizeof *c);
    const st_model_config *cfg = &m->cfg;
    if (window < 1) return st_fail(e, ST_ERR_CONFIG, "kv cache: window of %lld tokens: must be >= 1", (long long)window);
    ST_ASSERT(precision == ST_PREC_FP32 || precision == ST_PREC_BF16);
    /* bf16 keys and values, except for a method that rescales the cached keys in place
     * (xpos re-centres them every 2 gamma tokens): each rescale would round them again */
    c->precision = precision == ST_PREC_BF16 && !st_pos_method_of(cfg->pos)->cache_keys ? ST_PREC_BF16 : ST_PREC_FP32;
    const int64_t L = cfg->n_layers, H = cfg->n_heads, D = cfg->d_model / cfg->n_heads, Hkv = st_model_kv_heads(cfg);
    c->n_layers = (int)L;
    c->n_heads = (int)H;
    c->n_kv_heads = (int)Hkv;
    c->head_dim = (int)D;
    c->slides = st_kv_cache_slides(cfg->pos);
    /* attention sinks + window (st_transform.h): a sliding cache keeps the sinks and the
     * transform's window; an absolute one keeps its window and masks inside it. Blocks
     * (--blockwise B): a query sees at most 2B keys (its block and the previous one), so a
     * sliding cache keeps 2B, its blocks counted from the text's first token. The caller's
     * window then bounds the tokens the cache will ever hold (generate: the text's length):
     * a window or two blocks longer than the text mask nothing, and allocating (and
     * tabulating the bias of) 2B keys for a short text took gigabytes and seconds, or
     * refused it (exit 6, or xpos's limit) for --blockwise 16777216 and 30 tokens */
    const st_transform *xf = m->xf;
    const int64_t xf_keys = !xf ? 0 : xf->window > 0 ? xf->window : 2 * xf->block;
    /* sinks past the tokens the cache will hold mask nothing either (every key is one);
     * --sinks 16777216 for 30 tokens took 8 GiB and 44 s */
    if (xf && xf->window > 0) c->sinks = xf->sinks < window ? xf->sinks : window;
    if (xf_keys > 0 && c->slides && xf_keys < window) window = xf_keys;
    /* checked on the window the cache keeps (the transform's, when it slides) */
    const int64_t max_len = st_pos_max_len(cfg);
    if (max_len > 0 && window > max_len) {
        const char *whose = xf_keys > 0 && c->slides ? xf->window > 0 ? "an attention window (--window)"
                                                                      : "two attention blocks (2 x --blockwise)"
                                                     : "a window";
        memset(c, 0, sizeof *c);
        return st_fail(e, ST_ERR_CONFIG, "kv cache: %s of %lld tokens is longer than the %lld tokens %s "
                       "positions represent; %s", whose, (long long)window, (long long)max_len, st_pos_name(cfg->pos),
                       st_pos_limit_why(cfg->pos));
    }
    /* slack window/4: the shift copies at most 4 keys per token per (layer, head) on
     * average, for 25% more memory */
    const int64_t slack = !c->slides ? 0 : window / 4 > 16 ? window / 4 : 16;
    c->window = window;
    c->rows = c->sinks + window + slack;
    c->clip = st_transform_clip(xf);   /* rerope keeps the unrotated keys too */
    /* a distance bias is tabulated once per reset; a general one is evaluated per chunk */
    const int tables = st_pos_method_of(cfg->pos)->bias_form == ST_POS_BIAS_DISTANCE;
    const double gates = cache_gate_bytes(c, st_pos_method_of(cfg->pos)->gate != NULL);
    const double shift = cache_shift_bytes(c, cfg->kv_shift != ST_KV_SHIFT_NONE);
    const double kv = cache_kv_bytes(c), tab = tables ? cache_tab_bytes(c) : 0.0;
    const double total = cache_bytes(c, tables, gates + shift);
    const double have = (double)st_mem_total();
    if (have > 0 && total > 0.9 * have)
        return st_fail(e, ST_ERR_MEMORY, "kv cache: a window of %lld tokens (model.n_layers %d, model.d_model %d) "
                       "needs %.2f GiB of keys and values; this machine has %.2f GiB",
                       (long long)window, cfg->n_layers, cfg->d_model, total / 1073741824.0, have / 1073741824.0);
    if (c->clip > 0 && c->sinks > 0 && c->slides && c->clip > xf_keys)
        return st_fail(e, ST_ERR_CONFIG, "kv cache: rerope's clip window %lld is longer than the attention window %lld: "
                       "once keys are dropped the sinks' distances are no longer their rows' (use a clip <= window)",
                       (long long)c->clip, (long long)xf_keys);
    /* the rows as floats (k, v, k2) or bf16 (kh, vh, k2h): one buffer each */
    void **kv_buf[3] = {c->precision == ST_PREC_BF16 ? (void **)&c->kh : (void **)&c->k,
                        c->precision == ST_PREC_BF16 ? (void **)&c->vh : (void **)&c->v,
                        c->precision == ST_PREC_BF16 ? (void **)&c->k2h : (void **)&c->k2};
    int ok = 1;
    for (int i = 0; i < (c->clip > 0 ? 3 : 2) && ok; i++) ok = (*kv_buf[i] = st_aligned_alloc((size_t)kv, e)) != NULL;
    c->bias = ok && tab > 0 ? st_aligned_alloc((size_t)tab, e) : NULL;
    c->gate = ok && gates > 0 ? st_aligned_alloc((size_t)gates, e) : NULL;
    c->shift = ok && shift > 0 ? st_aligned_alloc((size_t)shift, e) : NULL;
    if (!ok || (tab > 0 && !c->bias) || (gates > 0 && !c->gate) || (shift > 0 && !c->shift)) {
        st_kv_cache_free(c);
        return ST_ERR_MEMORY;
    }
    st_kv_cache_reset(c);
    return ST_OK;
}

double st_kv_cache_bytes(const st_kv_cache *c) {
    const double extra = cache_gate_bytes(c, c->gate != NULL) + cache_shift_bytes(c, c->shift != NULL);
    return cache_bytes(c, c->bias != NULL, extra);
}

void st_kv_cache_reset(st_kv_cache *c) {
    c->xf_scale = 0.0;
    c->len = 0;
    c->n_seen = 0;
    c->bias_ready = 0;
    c->pos_ref = 0;
    c->abacus_run = 0;
}

/* The current length a dynamic transform sees after n_new more tokens: the keys the last
 * query attends to, at most the window. */
static int64_t xf_cur_len(const st_kv_cache *c, int64_t n_new) {
    const int64_t n = c->n_seen + n_new;
    return n < c->window ? n : c->window;
}

int st_kv_cache_must_reset(const st_kv_cache *c, const st_model *m, int64_t n_new) {
    if (!c->slides && c->n_seen + n_new > c->window) return 1;
    if (!m->xf || c->len == 0) return 0;
    st_transform xf = *m->xf;
    xf.cur_len = xf_cur_len(c, n_new);
    return st_transform_scale(&xf, 0) != c->xf_scale;
}

void st_kv_cache_free(st_kv_cache *c) {
    st_aligned_free(c->k);
    st_aligned_free(c->v);
    st_aligned_free(c->k2);
    st_aligned_free(c->kh);
    st_aligned_free(c->vh);
    st_aligned_free(c->k2h);
    st_aligned_free(c->bias);
    st_aligned_free(c->gate);
    st_aligned_free(c->shift);
    memset(c, 0, sizeof *c);
}

/* Each layer's bias table over distances 0..window-1 (providers from the arena). */
static int fill_bias(st_model *m, st_kv_cache *c, st_ctx *ctx) {
    const int64_t H = c->n_heads, n = c->window;
    for (int l = 0; l < c->n_layers; l++) {
        st_attn_bias *b = NULL;
        if (!st_block_bias(m, ctx, l, NULL, &b)) return 0;
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
    /* keep the sink rows [0, S) and the last window-1 keys after them */
    const int64_t S = c->sinks < c->len ? c->sinks : c->len;
    const int64_t tail = c->len - S < c->window - 1 ? c->len - S : c->window - 1;
    if (c->slides && S + tail < c->len) {
        const size_t D = (size_t)c->head_dim, el = cache_elem(c), pair = (size_t)c->rows * D * el;
        const size_t pairs = (size_t)c->n_layers * (size_t)c->n_kv_heads, from = (size_t)(c->len - tail);
        char *bufs[3] = {c->k ? (char *)c->k : (char *)c->kh, c->v ? (char *)c->v : (char *)c->vh,
                         c->k2 ? (char *)c->k2 : (char *)c->k2h};
        for (int b = 0; b < 3; b++)
            for (size_t lh = 0; bufs[b] && lh < pairs; lh++)
                memmove(bufs[b] + lh * pair + (size_t)S * D * el, bufs[b] + lh * pair + from * D * el,
                        (size_t)tail * D * el);
        /* FoX: the kept keys' gate sums move with them, re-based to the first kept one (only
         * differences enter the scores; the sums of a long text would otherwise grow
         * without bound, and with them the rounding of c_i - c_j in fp32) */
        const size_t gpairs = (size_t)c->n_layers * (size_t)c->n_heads;
        for (size_t lh = 0; c->gate && lh < gpairs; lh++) {
            float *row = c->gate + lh * (size_t)c->rows;
            memmove(row + S, row + from, (size_t)tail * sizeof(float));
            const float base = row[0];
            for (int64_t t = 0; t < S + tail; t++) row[t] -= base;
        }
        c->len = S + tail;
    }
    const int64_t room = c->rows - c->len;
    return n < room ? n : room;
}

/* Append the n new keys and values (k2: rerope's unrotated keys, or NULL) of layer l, (1,
 * n_kv_heads, n, D) each, at rows len.. of every head (a bf16 cache rounds them to
 * nearest even); returns layer l's rows for the attention. */
static st_kv_rows append_rows(st_kv_cache *c, int l, const st_tensor *k, const st_tensor *v, const st_tensor *k2,
                              int64_t n) {
    const int64_t Hkv = c->n_kv_heads, D = c->head_dim, rows = c->rows, len = c->len;
    const size_t off = (size_t)(l * Hkv * rows * D);
    st_kv_rows kv = {.stride = rows * D};
    const st_tensor *src[3] = {k, v, k2};
    if (c->precision == ST_PREC_BF16) {
        uint16_t *dst[3] = {c->kh + off, c->vh + off, c->k2h ? c->k2h + off : NULL};
        for (int b = 0; b < 3; b++)
            for (int64_t h = 0; dst[b] && h < Hkv; h++)
                st_bf16_round(dst[b] + (h * rows + len) * D, src[b]->data + h * n * D, n * D);
        kv.kh = dst[0], kv.vh = dst[1], kv.k2h = dst[2];
    } else {
        float *dst[3] = {c->k + off, c->v + off, c->k2 ? c->k2 + off : NULL};
        for (int b = 0; b < 3; b++)
            for (int64_t h = 0; dst[b] && h < Hkv; h++)
                memcpy(dst[b] + (h * rows + len) * D, src[b]->data + h * n * D, (size_t)(n * D) * sizeof(float));
        kv.k = dst[0], kv.v = dst[1], kv.k2 = dst[2];
    }
    return kv;
}

/* FoX: the n new rows' gate sums g (1,H,n), counted from their first token, continued from
 * the text's last sum (the newest cached row's; 0 after a reset) into rows len.. of layer
 * l; returns the gate term over layer l's rows. */
static st_attn_gate append_gate(st_kv_cache *c, int l, const st_tensor *g, int64_t n) {
    const int64_t H = c->n_heads, rows = c->rows, len = c->len;
    float *lg = c->gate + (size_t)(l * H * rows);
    for (int64_t h = 0; h < H; h++) {
        float *row = lg + h * rows;
        const float last = len > 0 ? row[len - 1] : 0.0f;
        for (int64_t t = 0; t < n; t++) row[len + t] = last + g->data[h * n + t];
    }
    return (st_attn_gate){NULL, lg, rows};
}

/* n tokens (n <= rows - len) through every block, their keys and values appended;
 * returns their residual stream x (1,n,C) before LN_f. */
static st_tensor *decode_chunk(st_model *m, st_kv_cache *c, st_ctx *ctx, const int32_t *ids,
                               int64_t n, st_error *e) {
    const int64_t H = c->n_heads, Hkv = c->n_kv_heads, len0 = c->len, p0 = c->n_seen;
    /* a second query: rerope's (its unrotated keys cached as k2) or the sinks' at cache
     * positions (against the cached keys themselves) */
    const int64_t clip = st_model_q2_clip(m);
    const st_pos_method *pm = st_pos_method_of(m->cfg.pos);
    if (pm->cache_keys) pm->cache_keys(m, c, p0, n);
    m->abacus_run0 = c->abacus_run;   /* model.abacus: a run of digits goes on across chunks */
    st_tensor *x = st_model_embed(m, ctx, ids, 1, n, p0, 0, e);
    m->abacus_run0 = 0;
    for (int l = 0; l < c->n_layers && x; l++) {
        st_tensor *x_in = x;
        st_arena_mark mark = st_arena_mark_get(ctx->arena);
        st_tensor *q = NULL, *k = NULL, *v = NULL, *q2 = NULL, *k2 = NULL, *g = NULL;
        if (!st_block_qkv2(m, ctx, l, x, p0, st_attn_scale_keys(m->xf, c->slides ? c->window : 0), &q, &k, &v,
                           clip > 0 ? &q2 : NULL, clip > 0 ? &k2 : NULL, c->gate ? &g : NULL))
            return NULL;
        st_kv_rows kv = append_rows(c, l, k, v, c->clip > 0 ? k2 : NULL, n);
        const st_attn_gate gate = c->gate ? append_gate(c, l, g, n) : (st_attn_gate){0};
        if (q2 && c->clip == 0) {   /* sinks at cache positions: q2 scores the rotated keys */
            kv.k2 = kv.k;
            kv.k2h = kv.kh;
        }
        const float *tab = c->bias ? c->bias + (size_t)(l * H * c->window) : NULL;
        st_attn_bias *gb = NULL;   /* general (i, j) bias: cache row 0 is position p0 - len0 */
        if (!tab && st_pos_method_of(m->cfg.pos)->bias_form == ST_POS_BIAS_GENERAL &&
            !st_block_bias(m, ctx, l, c->gate ? &gate : NULL, &gb))
            return NULL;
        /* attention sinks + window of the transform: the window the kernel applies, and the
         * sinks' own bias when the method has one */
        const st_transform *xf = m->xf;
        const int64_t kw = xf && xf->window > 0 && xf->window < c->window ? xf->window : c->window;
        const float *sb = NULL;
        if (c->sinks > 0 && st_pos_method_of(m->cfg.pos)->bias_form != ST_POS_BIAS_NONE &&
            !(sb = st_block_sink_bias(m, ctx, l, n, c->sinks, p0, NULL)))
            return NULL;
        const st_attn_mask mask = {.sinks = c->sinks, .window = kw, .block = xf ? xf->block : 0, .sink_bias = sb};
        st_tensor *a = st_attention_cached_sinks(ctx, q, &kv, len0 + n, tab, c->window, gb, p0 - len0, 0.0f, &mask,
                                                 q2, clip, H / Hkv);
        x = st_block_keep(ctx, x_in, st_block_out(m, ctx, l, x, a, 0), mark);
    }
    if (x) {
        c->len = len0 + n;
        c->n_seen = p0 + n;
        c->abacus_run = st_abacus_run_end(&m->cfg, ids, n, c->abacus_run);
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
        c->n_kv_heads != st_model_kv_heads(cfg) ||
        c->slides != st_kv_cache_slides(cfg->pos) || !c->gate != !st_pos_method_of(cfg->pos)->gate ||
        !c->shift != (cfg->kv_shift == ST_KV_SHIFT_NONE) ||
        (st_pos_method_of(cfg->pos)->bias_form == ST_POS_BIAS_DISTANCE && !c->bias))
        return st_fail(e, ST_ERR_CONFIG, "decode: the kv cache was made for another model");
    if (!c->slides && c->n_seen + n_new > c->window)
        return st_fail(e, ST_ERR_CONFIG, "decode: model.pos %s: absolute positions cannot slide; %lld decoded + %lld new "
                       "tokens pass the window of %lld (reset the cache and prefill the last window)",
                       st_pos_name(cfg->pos), (long long)c->n_seen, (long long)n_new, (long long)c->window);
    if (st_kv_cache_must_reset(c, m, n_new))
        return st_fail(e, ST_ERR_CONFIG, "decode: transform %s: the scale changes at %lld tokens; the cached keys were "
                       "rotated with another (reset the cache and prefill)", st_transform_name(m->xf->kind),
                       (long long)(c->n_seen + n_new));
    /* every refusal before any state changes: a refused call leaves model and cache as
     * they were (the transform's length and the cache's scale are set below) */
    for (int64_t i = 0; i < n_new; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return st_fail(e, ST_ERR_DATA, "decode: token id %d at %lld is outside the vocabulary [0, %lld)",
                           (int)ids[i], (long long)i, (long long)V);
    if (m->xf) {   /* the current length a dynamic transform sees: the whole call's */
        m->xf->cur_len = xf_cur_len(c, n_new);
        c->xf_scale = st_transform_scale(m->xf, 0);
    }
    const st_arena_mark start = st_arena_mark_get(ctx->arena);
    int ok = !c->bias || c->bias_ready || fill_bias(m, c, ctx);
    st_tensor *x = NULL;
    int64_t done = 0, n = 0;
    while (ok && done < n_new) {
        n = make_room(c, n_new - done);
        st_arena_rewind(ctx->arena, start);   /* only the last chunk's x is needed */
        m->shift_rows = c->shift;   /* model.kv_shift: the previous token's rows, if any */
        m->shift_valid = c->len > 0;
        x = decode_chunk(m, c, ctx, ids + done, n, e);
        m->shift_rows = NULL;
        m->shift_valid = 0;
        ok = x != NULL;
        done += n;
    }
    /* logits of the last position only: LN_f(x[n-1]) (1,C) @ W^T (C,V) */
    int64_t row[2] = {1, C};
    st_tensor *h = NULL;
    if (ok) h = st_block_norm(m, ctx, st_wrap(ctx, x->data + (n - 1) * C, 2, row), m->p_ln_f_w, m->p_ln_f_b);
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
    if (m->xf) m->xf->cur_len = 0;
    st_arena_rewind(ctx->arena, start);
    return rc;
}
