/* alibi.c - ALiBi (Press et al. 2021): bias(h, d) = -m_h |d|, and the one slope formula
 * (official get_slopes), shared with alibi_rf.
 *
 * n a power of two: geometric sequence m_h = 2^(-max_bias * h / n), h = 1..n
 *   (max_bias = 8: n=8 gives 1/2, 1/4, ..., 1/256).
 * otherwise: c = 2^floor(log2 n); the c slopes of the power-of-two rule for c, followed by
 *   elements 0, 2, 4, ... of the 2c set, first n - c of them. Those are exactly the slopes
 *   the 2c set interleaves between the c-set values (n=12: 2^-1..2^-8, then 2^-0.5,
 *   2^-1.5, 2^-2.5, 2^-3.5). The closed form 2^(-8h/n) for every n is NOT this rule.
 *
 * model.alibi_heads = K (0 < K <= n): only heads 0..K-1 are biased, with the slopes of a
 * K-head model; heads K..n-1 get slope 0, no position signal but the causal mask (as
 * x-transformers' alibi_num_heads, which pads the K-head bias with zeros). The unbiased
 * heads can attend as far back as they like, which the linear penalty forbids the others:
 * a knob between ALiBi (K = n) and NoPE (every head unbiased). K = 0 = n = plain ALiBi. */
#include "pos.h"

#include <math.h>
#include <stdio.h>

static void pow2_slopes(int n, float max_bias, float *out) {
    /* start = ratio = 2^(-max_bias/n), computed in double then rounded once */
    for (int h = 1; h <= n; h++) out[h - 1] = (float)exp2(-(double)max_bias * h / n);
}

void st_alibi_slopes(int n_heads, float max_bias, float *out) {
    ST_ASSERT(n_heads >= 1);
    int c = 1;
    while (c * 2 <= n_heads) c *= 2;
    pow2_slopes(c, max_bias, out);
    if (c == n_heads) return;
    /* every other slope of the 2c set: 2^(-max_bias*(2k+1)/(2c)), k = 0.. */
    for (int k = 0; k < n_heads - c; k++)
        out[c + k] = (float)exp2(-(double)max_bias * (2 * k + 1) / (2.0 * c));
}

void st_alibi_model_slopes(const st_model_config *c, float *out) {
    const int k = c->alibi_heads > 0 ? c->alibi_heads : c->n_heads;
    ST_ASSERT(k <= c->n_heads);
    st_alibi_slopes(k, c->alibi_max_bias, out);
    for (int h = k; h < c->n_heads; h++) out[h] = 0.0f;
}

/* relative form in fp32: -m * |d| is exact for |d| < 2^24 / m-ulp and stays finite at any
 * length (no growth with absolute position) */
static void alibi_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const float m = pb->slopes[h];
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        out[k] = -m * (float)(d < 0 ? -d : d);
    }
}

static void alibi_bias_init(st_pos_bias *pb) {
    st_alibi_model_slopes(pb->cfg, pb->slopes);
    pb->iface.fill = alibi_fill;
    pb->iface.state = pb;
}

static int alibi_validate(const st_model_config *c, const char *f, st_error *e) {
    if (c->alibi_heads > c->n_heads)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.alibi_heads: %d exceeds model.n_heads (%d)", f, c->alibi_heads,
                       c->n_heads);
    return ST_OK;
}

/* "heads4": K of the heads biased (K < n; K = n is plain ALiBi, the same model) */
static const char *alibi_variant(const st_model_config *c, char *buf, size_t n) {
    if (c->alibi_heads <= 0 || c->alibi_heads >= c->n_heads) return NULL;
    snprintf(buf, n, "heads%d", c->alibi_heads);
    return buf;
}

const st_pos_method st_pos_alibi = {
    .name = "alibi",
    .keys = "model.alibi_max_bias model.alibi_heads",
    .bias_form = ST_POS_BIAS_DISTANCE,
    .slides = 1,
    .variant_key = "alibi_heads",
    .variant = alibi_variant,
    .validate = alibi_validate,
    .bias_init = alibi_bias_init,
};
