/* xpos.c - xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer", arXiv
 * 2212.10554): RoPE (base model.rope_base), then the queries scaled by zeta^(i/gamma) and
 * the keys by zeta^(-j/gamma), per rotation pair k:
 *   zeta_k = (2k/D + 0.4) / 1.4,  gamma = model.xpos.gamma (512)
 * so q_i.k_j is weighted by zeta_k^((i - j)/gamma): it decays with the distance, fastest in
 * the high-frequency pairs. Parameter-free.
 *
 * Numerics: zeta_0 = 2/7 and zeta_0^(t/gamma) leaves float range near t = 36k (gamma 512),
 * so positions are taken relative to a centre c: q_i * zeta^((i-c)/gamma), k_j *
 * zeta^(-(j-c)/gamma), which leaves q.k unchanged (c cancels) and keeps each factor near 1.
 * c = R floor((pos0 + T/2) / R), R = 2 gamma: the middle of the call's positions, rounded
 * so that successive KV-cache chunks share it. The cache keeps its keys scaled about
 * c->pos_ref; when a new chunk's centre differs, cache_keys multiplies the cached keys by
 * zeta^((c_new - c_old)/gamma) (once every R tokens). Every factor stays within
 * e^(+-XPOS_MAX_EXP) up to max_len positions from the centre; longer sequences and cache
 * windows are refused (max_len) rather than overflowing. */
#include "pos.h"

/* largest |ln factor| allowed: e^80 = 5.5e34 leaves room for |q| up to ~6000 in float */
#define XPOS_MAX_EXP 80.0
/* most rotation pairs per head (d_model <= 65536) */
#define ST_XPOS_MAX_HALF 32768

static int64_t xpos_period(const st_model_config *c) {
    const int64_t r = (int64_t)ceil(2.0 * (double)c->xpos_gamma);
    return r > 1 ? r : 1;
}

static int64_t xpos_centre(const st_model_config *c, int64_t pos0, int64_t n) {
    const int64_t r = xpos_period(c);
    return (pos0 + n / 2) / r * r;
}

/* Positions as far as lim = XPOS_MAX_EXP gamma / ln(1/zeta_0) from the centre are safe.
 * A call of n tokens has |t - c| <= n/2 + R; a cache of window W holds up to 1.25 W keys
 * behind the centre (+ R): max_len = 0.75 (lim - R) covers both. */
static int64_t xpos_max_len(const st_model_config *c) {
    const double lim = XPOS_MAX_EXP * (double)c->xpos_gamma / log(1.4 / 0.4);
    const double n = 0.75 * (lim - (double)xpos_period(c));
    return n >= 1 ? (int64_t)n : 1;
}

static int xpos_validate(const st_model_config *c, const char *f, st_error *e) {
    if ((c->d_model / c->n_heads) % 2 != 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.pos: xpos needs an even head size (d_model/n_heads = %d)",
                       f, c->d_model / c->n_heads);
    if (!(c->xpos_gamma > 0.0f && c->xpos_gamma <= 1e9f))
        return st_fail(e, ST_ERR_CONFIG, "%s: model.xpos.gamma: must be in (0, 1e9], got %g", f, c->xpos_gamma);
    return ST_OK;
}

static int xpos_qk(st_model *m, st_ctx *ctx, int layer, st_tensor **q, st_tensor **k, int64_t pos0) {
    (void)layer;
    const st_model_config *c = &m->cfg;
    /* randomized training positions (m->positions, sorted): centred on the middle one */
    const int64_t T = (*q)->shape[2], *p = m->positions;
    const int64_t centre = p ? xpos_centre(c, p[T / 2] - T / 2, T) : xpos_centre(c, pos0, T);
    *q = st_xpos_scale_pos(ctx, st_rope_pos(ctx, *q, c->rope_base, pos0, p), c->xpos_gamma, pos0, p, centre, 1);
    *k = st_xpos_scale_pos(ctx, st_rope_pos(ctx, *k, c->rope_base, pos0, p), c->xpos_gamma, pos0, p, centre, -1);
    return *q && *k;
}

/* Cached keys carry zeta^(-(j - pos_ref)/gamma); re-centre them at the new chunk's centre:
 * k *= zeta^((c_new - pos_ref)/gamma) per rotation pair. */
static void xpos_cache_keys(const st_model *m, st_kv_cache *c, int64_t p0, int64_t n) {
    const int64_t centre = xpos_centre(&m->cfg, p0, n);
    if (c->len > 0 && centre != c->pos_ref) {
        const int64_t D = c->head_dim, half = D / 2, pairs = (int64_t)c->n_layers * c->n_kv_heads;
        float f[ST_XPOS_MAX_HALF];
        ST_ASSERT(half <= ST_XPOS_MAX_HALF);
        for (int64_t k = 0; k < half; k++)
            f[k] = (float)exp(log((2.0 * (double)k / (double)D + 0.4) / 1.4) * (double)(centre - c->pos_ref) /
                              (double)m->cfg.xpos_gamma);
        #pragma omp parallel for schedule(static)
        for (int64_t lh = 0; lh < pairs; lh++)
            for (int64_t r = 0; r < c->len; r++) {
                float *kr = c->k + (size_t)((lh * c->rows + r) * D);   /* an fp32 cache (st_kv_cache_init) */
                for (int64_t k = 0; k < half; k++) { kr[k] *= f[k]; kr[k + half] *= f[k]; }
            }
    }
    c->pos_ref = centre;
}

const st_pos_method st_pos_xpos = {
    .name = "xpos",
    .keys = "model.rope_base model.xpos",
    .abs_indices = 1,
    .bias_form = ST_POS_BIAS_NONE,
    .slides = 1,
    .validate = xpos_validate,
    .max_len = xpos_max_len,
    .limit_why = "model.xpos.gamma: the scale zeta^(t/gamma) would leave float range beyond it "
                 "(the limit grows with gamma; docs/position-methods.md)",
    .qk = xpos_qk,
    .cache_keys = xpos_cache_keys,
    .no_cache_positions = "its query and key scales are taken about a centre per forward, which a query moved to "
                          "another position would not share (not implemented)",
};
