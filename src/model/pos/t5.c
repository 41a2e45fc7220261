/* t5.c - T5 relative position buckets (Raffel et al. 2020): bias(h, d) = w[h, bucket(d)],
 * one table "t5.rel_bias" (H, model.t5_buckets) shared by all layers; exact buckets up to
 * buckets/2, then logarithmic up to model.t5_max_distance, beyond it the last bucket. */
#include "pos.h"

/* T5 relative bucket (mesh-tensorflow _relative_position_bucket), rel = j - i. */
static int t5_bucket(int64_t rel, int bidirectional, int num_buckets, int max_distance) {
    int ret = 0;
    int64_t n = -rel;
    if (bidirectional) {
        num_buckets /= 2;
        if (n < 0) ret += num_buckets;   /* keys after the query get their own buckets */
        n = n < 0 ? -n : n;
    } else if (n < 0) {
        n = 0;
    }
    int max_exact = num_buckets / 2;
    if (n < max_exact) return ret + (int)n;
    double v = max_exact + log((double)n / max_exact) / log((double)max_distance / max_exact) *
                               (num_buckets - max_exact);
    int b = (int)v;   /* truncation as the reference's cast */
    if (b > num_buckets - 1) b = num_buckets - 1;
    return ret + b;
}

static void t5_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const st_model_config *c = pb->cfg;
    const float *w = pb->params + (size_t)h * c->t5_buckets;
    for (int64_t k = 0; k < n; k++)
        out[k] = w[t5_bucket(-(d0 + k), pb->bidirectional, c->t5_buckets, c->t5_max_distance)];
}

static void t5_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    const st_pos_bias *pb = self->state;
    const st_model_config *c = pb->cfg;
    float *w = pb->grads + (size_t)h * c->t5_buckets;
    for (int64_t k = 0; k < n; k++)
        w[t5_bucket(-(d0 + k), pb->bidirectional, c->t5_buckets, c->t5_max_distance)] += g[k];
}

static void t5_bias_init(st_pos_bias *pb) {
    pb->iface.fill = t5_fill;
    pb->iface.state = pb;
    pb->iface.grad = pb->grads ? t5_grad : NULL;
}

static int t5_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer >= 0) return 0;
    out[0] = (st_pos_decl){"t5.rel_bias", 2, c->n_heads, c->t5_buckets, 0, ST_INIT_ZERO, 0, 0};
    return 1;
}

static int t5_validate(const st_model_config *c, const char *f, st_error *e) {
    if (c->t5_max_distance <= c->t5_buckets / 2)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.t5_max_distance: must exceed t5_buckets/2 = %d, got %d",
                       f, c->t5_buckets / 2, c->t5_max_distance);
    return ST_OK;
}

const st_pos_method st_pos_t5 = {
    .name = "t5",
    .keys = "model.t5_buckets model.t5_max_distance",
    .bias_form = ST_POS_BIAS_DISTANCE,
    .slides = 1,
    .validate = t5_validate,
    .params = t5_params,
    .bias_init = t5_bias_init,
};
