/* kerple.c - KERPLE (Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding
 * for Length Extrapolation", arXiv 2205.09921), per layer and head, model.kerple.kind:
 *   log:   bias(h, d) = -r1_h log(1 + r2_h |d|),  r1 = softplus(p1), r2 = softplus(p2)
 *          "attn.kerple" (2, H), r1 = r2 = 1 at init
 *   power: bias(h, d) = -r1_h |d|^r2_h,          r1 = softplus(p1), r2 = 2 sigmoid(p2)
 *          "attn.kerple_power" (2, H), r1 = ln 2, r2 = 1 at init (raw 0)
 * The paper's constraints are r1 > 0 and, for power, 0 < r2 <= 2 (the official code
 * projects r2 into [0.01, 2] and r1 into [0.01, inf) after every step, and initialises
 * them uniformly in (0, 2) and (0, 1)). Here softplus and 2 sigmoid keep them inside
 * smoothly, with no projection step the optimizer does not know about; the init is near
 * the mean of the official uniform draws (0.5 and 1). Row 0 of the tensor is p1, row 1 p2.
 * Gradients (g = dL/dbias summed per distance):
 *   log:   dB/dr1 = -log(1 + r2 d),  dB/dr2 = -r1 d / (1 + r2 d)
 *   power: dB/dr1 = -d^r2,           dB/dr2 = -r1 d^r2 ln d  (0 at d = 0)
 * times dr/dp: sigmoid(p1) for r1, sigmoid(p2) (log) or 2 s (1 - s), s = sigmoid(p2)
 * (power) for r2. */
#include "pos.h"

static void kerple_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const double r1 = st_pos_softplus(pb->params[h]), r2 = st_pos_softplus(pb->params[pb->n_heads + h]);
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        const double ad = (double)(d < 0 ? -d : d);
        out[k] = (float)(-r1 * log1p(r2 * ad));
    }
}

static void kerple_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    const st_pos_bias *pb = self->state;
    const double p1 = pb->params[h], p2 = pb->params[pb->n_heads + h];
    const double r1 = st_pos_softplus(p1), r2 = st_pos_softplus(p2);
    double a1 = 0, a2 = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        const double ad = (double)(d < 0 ? -d : d);
        a1 += (double)g[k] * -log1p(r2 * ad);
        a2 += (double)g[k] * (-r1 * ad / (1 + r2 * ad));
    }
    pb->grads[h] += (float)(a1 * st_pos_sigmoid(p1));
    pb->grads[pb->n_heads + h] += (float)(a2 * st_pos_sigmoid(p2));
}

static void power_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const double r1 = st_pos_softplus(pb->params[h]), r2 = 2.0 * st_pos_sigmoid(pb->params[pb->n_heads + h]);
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        const double ad = (double)(d < 0 ? -d : d);
        out[k] = ad > 0 ? (float)(-r1 * pow(ad, r2)) : 0.0f;
    }
}

static void power_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    const st_pos_bias *pb = self->state;
    const double p1 = pb->params[h], s = st_pos_sigmoid(pb->params[pb->n_heads + h]);
    const double r1 = st_pos_softplus(p1), r2 = 2.0 * s;
    double a1 = 0, a2 = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        const double ad = (double)(d < 0 ? -d : d);
        if (ad == 0) continue;
        const double pw = pow(ad, r2);
        a1 += (double)g[k] * -pw;
        a2 += (double)g[k] * (-r1 * pw * log(ad));
    }
    pb->grads[h] += (float)(a1 * st_pos_sigmoid(p1));
    pb->grads[pb->n_heads + h] += (float)(a2 * 2.0 * s * (1.0 - s));
}

static void kerple_bias_init(st_pos_bias *pb) {
    const int power = pb->cfg->kerple_kind == ST_KERPLE_POWER;
    pb->iface.fill = power ? power_fill : kerple_fill;
    pb->iface.state = pb;
    pb->iface.grad = !pb->grads ? NULL : power ? power_grad : kerple_grad;
}

static int kerple_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer < 0) return 0;
    if (c->kerple_kind == ST_KERPLE_POWER) {
        /* raw 0: r1 = softplus(0) = ln 2, r2 = 2 sigmoid(0) = 1 (a linear, ALiBi-like start) */
        out[0] = (st_pos_decl){"attn.kerple_power", 2, 2, c->n_heads, 0, ST_INIT_ZERO, 0, 0};
        return 1;
    }
    /* r1 = r2 = 1 at init: softplus(0.5413) = 1 */
    out[0] = (st_pos_decl){"attn.kerple", 2, 2, c->n_heads, 0, ST_INIT_CONST, (float)st_pos_inv_softplus(1.0), 0};
    return 1;
}

static const char *kerple_variant(const st_model_config *c, char *buf, size_t n) {
    (void)buf, (void)n;
    return c->kerple_kind == ST_KERPLE_POWER ? "power" : NULL;   /* log: plain "kerple" */
}

static void kerple_exercise(st_model_config *c) { c->kerple_kind = ST_KERPLE_POWER; }

const st_pos_method st_pos_kerple = {
    .name = "kerple",
    .keys = "model.kerple",
    .bias_form = ST_POS_BIAS_DISTANCE,
    .slides = 1,
    .variant_key = "kerple_kind",
    .variant = kerple_variant,
    .exercise = kerple_exercise,
    .params = kerple_params,
    .bias_init = kerple_bias_init,
};
