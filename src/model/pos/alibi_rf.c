/* alibi_rf.c - ALiBi with a receptive field: the linear penalty fades beyond rho,
 *   bias(h, d) = -m_h |d| f_rho(|d|)
 *     exp:        f = e^(-d/rho)
 *     gaussian:   f = e^(-d^2 / (2 rho^2))
 *     reciprocal: f = rho / (rho + d)
 * rho fixed (model.rf.rho), or learned per layer [1] / per head [H] ("attn.rf_theta") as
 * rho = softplus(theta) or exp(theta) (model.rf.param). m_h: the ALiBi slopes.
 * Math and the gradient: docs/position-methods.md. */
#include "pos.h"

static const char *rf_names[ST_RF_COUNT] = {"exp", "gaussian", "reciprocal"};

const char *st_rf_name(int kind) { return kind >= 0 && kind < ST_RF_COUNT ? rf_names[kind] : "?"; }

int st_rf_from_name(const char *name) {
    for (int i = 0; i < ST_RF_COUNT; i++) if (strcmp(name, rf_names[i]) == 0) return i;
    return -1;
}

/* rho(theta) and drho/dtheta: softplus -> sigmoid(theta); exp -> rho itself */
static double rf_rho_of(int param, double theta, double *drho) {
    if (param == ST_RF_LOG) {
        double rho = exp(theta);
        if (drho) *drho = rho;
        return rho;
    }
    if (drho) *drho = st_pos_sigmoid(theta);
    return st_pos_softplus(theta);
}

static double rf_rho(const st_pos_bias *pb, int h) {
    if (pb->cfg->rf_scope == ST_RF_FIXED || !pb->params) return pb->cfg->rf_rho;
    return rf_rho_of(pb->cfg->rf_param, pb->params[pb->cfg->rf_scope == ST_RF_PER_HEAD ? h : 0], NULL);
}

/* f_rho(d) and df/drho for d >= 0 */
static inline void rf_eval(int kind, double d, double rho, double *f, double *dfdrho) {
    switch (kind) {
    case ST_RF_GAUSSIAN:
        *f = exp(-d * d / (2 * rho * rho));
        *dfdrho = *f * d * d / (rho * rho * rho);
        break;
    case ST_RF_RECIPROCAL:
        *f = rho / (rho + d);
        *dfdrho = d / ((rho + d) * (rho + d));
        break;
    default:
        *f = exp(-d / rho);
        *dfdrho = *f * d / (rho * rho);
        break;
    }
}

static void rf_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const double m = pb->slopes[h], rho = rf_rho(pb, h);
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        double ad = (double)(d < 0 ? -d : d), f, df;
        rf_eval(pb->cfg->rf_kind, ad, rho, &f, &df);
        out[k] = (float)(-m * ad * f);
    }
}

static void rf_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    const st_pos_bias *pb = self->state;
    const st_model_config *c = pb->cfg;
    const int idx = c->rf_scope == ST_RF_PER_HEAD ? h : 0;
    double drho, rho = rf_rho_of(c->rf_param, pb->params[idx], &drho), m = pb->slopes[h], acc = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        double ad = (double)(d < 0 ? -d : d), f, df;
        rf_eval(c->rf_kind, ad, rho, &f, &df);
        acc += (double)g[k] * (-m * ad * df);      /* dB/drho */
    }
    pb->grads[idx] += (float)(acc * drho);          /* chain rule through rho(theta) */
}

static void rf_bias_init(st_pos_bias *pb) {
    st_alibi_slopes(pb->n_heads, pb->cfg->alibi_max_bias, pb->slopes);
    pb->iface.fill = rf_fill;
    pb->iface.state = pb;
    pb->iface.grad = pb->cfg->rf_scope != ST_RF_FIXED && pb->grads ? rf_grad : NULL;
}

static int rf_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer < 0 || c->rf_scope == ST_RF_FIXED) return 0;
    const double theta0 = c->rf_param == ST_RF_LOG ? log(c->rf_rho) : st_pos_inv_softplus(c->rf_rho);
    out[0] = (st_pos_decl){"attn.rf_theta", 1, c->rf_scope == ST_RF_PER_HEAD ? c->n_heads : 1, 1, 0,
                           ST_INIT_CONST, (float)theta0, 0};
    return 1;
}

static int rf_rho_values(const st_model *m, int layer, float *rho) {
    const st_model_config *c = &m->cfg;
    if (c->rf_scope == ST_RF_FIXED) return 0;
    const float *theta = m->params.data + m->params.info[m->blocks[layer].pos[0]].offset;
    for (int h = 0; h < c->n_heads; h++)
        rho[h] = (float)rf_rho_of(c->rf_param, theta[c->rf_scope == ST_RF_PER_HEAD ? h : 0], NULL);
    return 1;
}

static const char *rf_variant(const st_model_config *c, char *buf, size_t n) {
    (void)buf, (void)n;
    return st_rf_name(c->rf_kind);
}
static void rf_exercise(st_model_config *c) { c->rf_scope = ST_RF_PER_HEAD; }

/* model.alibi_heads (alibi.c) would leave heads without the slope the receptive field
 * shapes; the variant is not defined for alibi_rf, so a config asking for it is refused */
static int rf_validate(const st_model_config *c, const char *f, st_error *e) {
    if (c->alibi_heads != 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.alibi_heads: applies to model.pos \"alibi\" only, not alibi_rf "
                       "(got %d; use 0)", f, c->alibi_heads);
    return ST_OK;
}

const st_pos_method st_pos_alibi_rf = {
    .name = "alibi_rf",
    .keys = "model.alibi_max_bias model.rf",
    .bias_form = ST_POS_BIAS_DISTANCE,
    .slides = 1,
    .variant_key = "rf_kind",
    .variant = rf_variant,
    .validate = rf_validate,
    .exercise = rf_exercise,
    .params = rf_params,
    .bias_init = rf_bias_init,
    .rho = rf_rho_values,
};
