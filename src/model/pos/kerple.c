/* kerple.c - KERPLE, logarithmic variant (Chi et al. 2022):
 *   bias(h, d) = -r1_h log(1 + r2_h |d|),  r1 = softplus(p1), r2 = softplus(p2)
 * with raw p (2, H) per layer ("attn.kerple": row 0 p1, row 1 p2), r1 = r2 = 1 at init.
 * Gradient: dB/dr1 = -log(1 + r2 d), dB/dr2 = -r1 d / (1 + r2 d), times sigmoid(p). */
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

static void kerple_bias_init(st_pos_bias *pb) {
    pb->iface.fill = kerple_fill;
    pb->iface.state = pb;
    pb->iface.grad = pb->grads ? kerple_grad : NULL;
}

static int kerple_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer < 0) return 0;
    /* r1 = r2 = 1 at init: softplus(0.5413) = 1 */
    out[0] = (st_pos_decl){"attn.kerple", 2, 2, c->n_heads, 0, ST_INIT_CONST, (float)st_pos_inv_softplus(1.0), 0};
    return 1;
}

const st_pos_method st_pos_kerple = {
    .name = "kerple",
    .bias_form = ST_POS_BIAS_DISTANCE,
    .slides = 1,
    .params = kerple_params,
    .bias_init = kerple_bias_init,
};
