/* sinusoidal.c - absolute sinusoidal positions added to the embeddings (Vaswani et al.
 * 2017): pe[t, 2i] = sin(t w_i), pe[t, 2i+1] = cos(t w_i), w_i = 10000^(-2i/C), computed
 * in double at any length. Absolute: a KV cache cannot slide. */
#include "pos.h"

static st_tensor *sin_embed(st_model *m, st_ctx *ctx, st_tensor *x, int64_t pos0, st_error *e) {
    (void)e;
    if (!x) return NULL;
    const int64_t B = x->shape[0], T = x->shape[1], C = m->cfg.d_model;
    int64_t shape[3] = {B, T, C};
    st_tensor *pe = st_new(ctx, 3, shape);
    if (!pe) return NULL;
    for (int64_t t = 0; t < T; t++) {
        float *row = pe->data + t * C;
        const double pt = (double)st_model_pos(m, pos0, t);   /* randomized in training, else pos0 + t */
        for (int64_t i = 0; i < C; i++) {
            double w = pow(10000.0, -(double)(i & ~(int64_t)1) / (double)C);
            row[i] = (float)((i & 1) ? cos(pt * w) : sin(pt * w));
        }
    }
    for (int64_t b = 1; b < B; b++) memcpy(pe->data + b * T * C, pe->data, (size_t)(T * C) * sizeof(float));
    return st_add(ctx, x, pe);
}

const st_pos_method st_pos_sinusoidal = {
    .name = "sinusoidal",
    .abs_indices = 1,
    .bias_form = ST_POS_BIAS_NONE,
    .slides = 0,
    .embed = sin_embed,
    .no_cache_positions = "its positions are added to the token embeddings, so a token's every hidden state "
                          "would change with the cache slot it moves to",
    .unscaled_note = "the sinusoids (norm sqrt(d_model / 2)) swamp token embeddings of norm init_std sqrt(d_model); "
                     "the paper's baseline scales the embeddings by sqrt(d_model) (model.embed_scale 0; "
                     "docs/position-methods.md)",
};
