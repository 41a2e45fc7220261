/* attn_scale.c - log-n attention scaling, an option orthogonal to the position method
 * (model.attn_scale). A query that sees n keys gets its content logits multiplied by
 *   logn:          f(n) = max(1, log(n) / log(L))      L = model.attn_scale_len
 *                  (Qwen's "logn attention": 1 up to the training length, so training is
 *                  unchanged; beyond it the softmax is sharpened as the row grows)
 *   learned_logn:  f(n) = s_h log(n)                    s per layer and head, init 0.43
 *                  (Scalable-Softmax, Nakanishi 2025, arXiv 2501.19399; 0.43 is the value
 *                  the paper's models settle at and its reference code's init)
 * n is the number of keys the query sees: i + 1 under the causal mask, min(i + 1, M) under
 * a mask that leaves at most M keys (sinks + window: M = K + W; a sliding KV cache of a
 * --context: M = that context), i + 1 - lo(i) under blocks (lo(i) the first key the block
 * mask leaves, st_attention_block_lo), not the row length T of the batch. The full forward and
 * the cache pass the same M (st_attn_scale_keys), so a query's scale does not depend on how
 * long the rest of its window is and the cached decode equals the forward.
 * The multiplier is applied to q (st_head_scale), i.e. to the content term q.k only: an
 * additive position bias (ALiBi, ...) keeps its calibrated size, as in Qwen, which scales
 * the query. docs/position-methods.md has the discussion. */
#include "model_internal.h"
#include "st_transform.h"

#include <math.h>
#include <string.h>

static const char *names[ST_ATTN_SCALE_COUNT] = {"none", "logn", "learned_logn"};

const char *st_attn_scale_name(int kind) { return kind >= 0 && kind < ST_ATTN_SCALE_COUNT ? names[kind] : "?"; }

int st_attn_scale_from_name(const char *name) {
    for (int i = 0; i < ST_ATTN_SCALE_COUNT; i++) if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int st_attn_scale_param(const st_model_config *c, const char **name, float *init) {
    if (c->attn_scale != ST_ATTN_SCALE_LEARNED) return 0;
    *name = "attn.logn_scale";
    *init = 0.43f;
    return 1;
}

st_tensor *st_attn_scale_q(st_model *m, st_ctx *ctx, int l, st_tensor *q, int64_t pos0, int64_t window) {
    const st_model_config *c = &m->cfg;
    if (c->attn_scale == ST_ATTN_SCALE_NONE || !q) return q;
    const int64_t T = q->shape[2];
    float *f = st_ctx_alloc(ctx, (size_t)T * sizeof(float), 0);
    if (!f) return NULL;
    const double logL = c->attn_scale == ST_ATTN_SCALE_LOGN ? log((double)c->attn_scale_len) : 1.0;
    const int64_t block = m->xf ? m->xf->block : 0;
    for (int64_t t = 0; t < T; t++) {
        int64_t n = pos0 + t + 1 - st_attention_block_lo(block, pos0 + t);
        if (window > 0 && n > window) n = window;
        const double ln = log((double)n);
        f[t] = (float)(c->attn_scale == ST_ATTN_SCALE_LOGN ? (ln > logL ? ln / logL : 1.0) : ln);
    }
    st_tensor *s = c->attn_scale == ST_ATTN_SCALE_LEARNED ? st_param(&m->params, m->blocks[l].logn_scale) : NULL;
    return st_head_scale(ctx, q, s, f);
}

int64_t st_attn_scale_keys(const struct st_transform *xf, int64_t cache_window) {
    if (xf && xf->window > 0) return xf->sinks + xf->window;   /* K sinks + the last W keys */
    return cache_window;
}
