/* learned.c - a learned absolute position table pos_emb.weight (max_len, C) added to the
 * embeddings (GPT-2). No row exists beyond model.max_len: sequences, eval lengths and
 * cache windows longer than that are refused (it cannot extrapolate), and a cache cannot
 * slide. */
#include "pos.h"

static int64_t learned_max_len(const st_model_config *c) { return c->max_len; }

static int learned_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer >= 0) return 0;
    out[0] = (st_pos_decl){"pos_emb.weight", 2, c->max_len, c->d_model, 1, ST_INIT_NORMAL, c->init_std, 1};
    return 1;
}

static st_tensor *learned_embed(st_model *m, st_ctx *ctx, st_tensor *x, int64_t pos0, st_error *e) {
    if (!x) return NULL;
    const st_model_config *c = &m->cfg;
    const int64_t B = x->shape[0], T = x->shape[1];
    const int64_t last = T > 0 ? st_model_pos(m, pos0, T - 1) : pos0;   /* positions ascend */
    if (last + 1 > c->max_len) {
        st_fail(e, ST_ERR_CONFIG, "model.max_len: learned positions have a table of %d rows, "
                "a sequence of %lld tokens is longer (learned positions cannot extrapolate)",
                c->max_len, (long long)(last + 1));
        return NULL;
    }
    int32_t *pos = st_ctx_alloc(ctx, (size_t)(B * T) * sizeof(int32_t), 0);
    if (!pos) return NULL;
    /* row t takes table row st_model_pos (randomized in training, else pos0 + t) */
    for (int64_t i = 0; i < B * T; i++) pos[i] = (int32_t)st_model_pos(m, pos0, i % T);
    return st_add(ctx, x, st_embedding(ctx, pos, B, T, st_pos_tensor(m, -1, 0)));
}

const st_pos_method st_pos_learned = {
    .name = "learned",
    .keys = "model.max_len",
    .abs_indices = 1,
    .bias_form = ST_POS_BIAS_NONE,
    .slides = 0,
    .params = learned_params,
    .max_len = learned_max_len,
    .limit_why = "model.max_len: the learned table has no row beyond it (learned positions cannot extrapolate)",
    .embed = learned_embed,
    .no_cache_positions = "its positions are added to the token embeddings, so a token's every hidden state "
                          "would change with the cache slot it moves to",
};
