/* position.c - additive attention biases that depend on (head h, distance d = i - j):
 *
 *   alibi     b = -m_h * d                       (bidirectional: -m_h * |d|)
 *   alibi_rf  b = -m_h * |d| * f_rho(|d|)
 *               exp:        f = e^(-d/rho)
 *               gaussian:   f = e^(-d^2 / (2 rho^2))
 *               reciprocal: f = rho / (rho + d)
 *             rho fixed, or rho = softplus(theta) or exp(theta) (model.rf.param) with theta
 *             per layer [1] or per head [H]
 *   t5        b = w[h, bucket(d)]  (T5 log buckets; table shared by all layers)
 *   kerple    b = -r1_h * log(1 + r2_h * |d|), r1 = softplus(p1), r2 = softplus(p2)
 *
 * The attention kernel calls fill() once per head for the distances it needs and
 * grad() once per head with g[d] = sum of dL/dscore over all entries at distance d, so
 * parameter gradients are a cheap loop over distances here. Math: docs/position-methods.md. */
#include "model_internal.h"

#include <math.h>
#include <string.h>

static inline double softplus(double x) { return x > 30 ? x : log1p(exp(x)); }
static inline double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

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

/* rho(theta) and drho/dtheta: softplus -> sigmoid(theta); exp -> rho itself */
static double rf_rho_of(int param, double theta, double *drho) {
    if (param == ST_RF_LOG) {
        double rho = exp(theta);
        if (drho) *drho = rho;
        return rho;
    }
    if (drho) *drho = sigmoid(theta);
    return softplus(theta);
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

static void bias_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const st_model_config *c = pb->cfg;
    switch (pb->kind) {
    case ST_POS_ALIBI: {
        /* relative form in fp32: -m * |d| is exact for |d| < 2^24 / m-ulp and stays finite
         * at any length (no growth with absolute position) */
        float m = pb->slopes[h];
        for (int64_t k = 0; k < n; k++) {
            int64_t d = d0 + k;
            out[k] = -m * (float)(d < 0 ? -d : d);
        }
        break;
    }
    case ST_POS_ALIBI_RF: {
        double m = pb->slopes[h], rho = rf_rho(pb, h);
        for (int64_t k = 0; k < n; k++) {
            int64_t d = d0 + k;
            double ad = (double)(d < 0 ? -d : d), f, df;
            rf_eval(c->rf_kind, ad, rho, &f, &df);
            out[k] = (float)(-m * ad * f);
        }
        break;
    }
    case ST_POS_T5: {
        const float *w = pb->params + (size_t)h * c->t5_buckets;
        for (int64_t k = 0; k < n; k++)
            out[k] = w[t5_bucket(-(d0 + k), pb->bidirectional, c->t5_buckets, c->t5_max_distance)];
        break;
    }
    case ST_POS_KERPLE: {
        double r1 = softplus(pb->params[h]), r2 = softplus(pb->params[pb->n_heads + h]);
        for (int64_t k = 0; k < n; k++) {
            int64_t d = d0 + k;
            double ad = (double)(d < 0 ? -d : d);
            out[k] = (float)(-r1 * log1p(r2 * ad));
        }
        break;
    }
    default:
        memset(out, 0, (size_t)n * sizeof(float));
    }
}

static void bias_grad(const st_attn_bias *self, int h, int64_t d0, int64_t n, const float *g) {
    const st_pos_bias *pb = self->state;
    const st_model_config *c = pb->cfg;
    if (!pb->grads) return;
    switch (pb->kind) {
    case ST_POS_ALIBI_RF: {
        if (c->rf_scope == ST_RF_FIXED) return;
        int idx = c->rf_scope == ST_RF_PER_HEAD ? h : 0;
        double drho, rho = rf_rho_of(c->rf_param, pb->params[idx], &drho), m = pb->slopes[h], acc = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t d = d0 + k;
            double ad = (double)(d < 0 ? -d : d), f, df;
            rf_eval(c->rf_kind, ad, rho, &f, &df);
            acc += (double)g[k] * (-m * ad * df);      /* dB/drho */
        }
        pb->grads[idx] += (float)(acc * drho);      /* chain rule through rho(theta) */
        break;
    }
    case ST_POS_T5: {
        float *w = pb->grads + (size_t)h * c->t5_buckets;
        for (int64_t k = 0; k < n; k++)
            w[t5_bucket(-(d0 + k), pb->bidirectional, c->t5_buckets, c->t5_max_distance)] += g[k];
        break;
    }
    case ST_POS_KERPLE: {
        double p1 = pb->params[h], p2 = pb->params[pb->n_heads + h];
        double r1 = softplus(p1), r2 = softplus(p2), a1 = 0, a2 = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t d = d0 + k;
            double ad = (double)(d < 0 ? -d : d);
            a1 += (double)g[k] * -log1p(r2 * ad);
            a2 += (double)g[k] * (-r1 * ad / (1 + r2 * ad));
        }
        pb->grads[h] += (float)(a1 * sigmoid(p1));
        pb->grads[pb->n_heads + h] += (float)(a2 * sigmoid(p2));
        break;
    }
    default:
        break;
    }
}

int st_model_rf_rho(const st_model *m, int layer, float *rho) {
    const st_model_config *c = &m->cfg;
    if (c->pos != ST_POS_ALIBI_RF || c->rf_scope == ST_RF_FIXED || layer < 0 || layer >= c->n_layers) return 0;
    const float *theta = m->params.data + m->params.info[m->blocks[layer].rf_theta].offset;
    for (int h = 0; h < c->n_heads; h++)
        rho[h] = (float)rf_rho_of(c->rf_param, theta[c->rf_scope == ST_RF_PER_HEAD ? h : 0], NULL);
    return 1;
}

int st_pos_has_bias(int pos) {
    return pos == ST_POS_ALIBI || pos == ST_POS_ALIBI_RF || pos == ST_POS_T5 || pos == ST_POS_KERPLE;
}

void st_pos_bias_init(st_pos_bias *pb, const st_model_config *cfg, int bidirectional,
                      const float *params, float *grads) {
    memset(pb, 0, sizeof *pb);
    pb->kind = cfg->pos;
    pb->n_heads = cfg->n_heads;
    pb->bidirectional = bidirectional;
    pb->cfg = cfg;
    pb->params = params;
    pb->grads = grads;
    ST_ASSERT(cfg->n_heads <= 256);
    st_alibi_slopes(cfg->n_heads, cfg->alibi_max_bias, pb->slopes);
    pb->iface.fill = bias_fill;
    pb->iface.state = pb;
    int learnable = (pb->kind == ST_POS_T5 || pb->kind == ST_POS_KERPLE ||
                     (pb->kind == ST_POS_ALIBI_RF && cfg->rf_scope != ST_RF_FIXED));
    pb->iface.grad = learnable && grads ? bias_grad : NULL;
}
