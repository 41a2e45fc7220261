/* rope.c - rotary position embedding (Su et al. 2021) on a block's queries and keys at
 * their absolute positions (st_rope: rotate-half convention, base model.rope_base).
 * q_i.k_j then depends on i - j only, so cached keys (rotated once at their position)
 * stay valid and the cache slides. Needs an even head size. */
#include "pos.h"
#include "st_transform.h"

static int rope_validate(const st_model_config *c, const char *f, st_error *e) {
    if ((c->d_model / c->n_heads) % 2 != 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.pos: rope needs an even head size (d_model/n_heads = %d)",
                       f, c->d_model / c->n_heads);
    return ST_OK;
}

/* The frequencies come from the transform when there is one (PI, NTK, YaRN:
 * st_transform.h; the trained scaling or an inference-time one); its current length is
 * the forward's last position + 1. */
static int rope_qk(st_model *m, st_ctx *ctx, int layer, st_tensor **q, st_tensor **k, int64_t pos0) {
    (void)layer;
    if (!m->xf) {   /* m->positions: randomized training positions, else pos0 + t */
        *q = st_rope_pos(ctx, *q, m->cfg.rope_base, pos0, m->positions);
        *k = st_rope_pos(ctx, *k, m->cfg.rope_base, pos0, m->positions);
        return *q && *k;
    }
    const int64_t D = (*q)->shape[3];
    double *inv = st_ctx_alloc(ctx, (size_t)(D / 2) * sizeof(double), 0);
    if (!inv) return 0;
    float c;
    st_transform_rope_freqs(m->xf, D, m->cfg.rope_base, pos0 + (*q)->shape[2], inv, &c);
    *q = st_rope_at(ctx, *q, inv, c, pos0, m->positions);
    *k = st_rope_at(ctx, *k, inv, c, pos0, m->positions);
    return *q && *k;
}

const st_pos_method st_pos_rope = {
    .name = "rope",
    .keys = "model.rope_base",
    .abs_indices = 1,
    .bias_form = ST_POS_BIAS_NONE,
    .slides = 1,
    .validate = rope_validate,
    .qk = rope_qk,
};
