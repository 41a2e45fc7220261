/* synthetic_copy.c - the built-in corpus in "copy" mode: the order-k Markov stream of
 * synthetic.c with recall segments, so that predicting it needs attention back by a
 * distance (the plain chain needs only the last k tokens: every position method reaches
 * its floor and a length-extrapolation sweep cannot tell them apart).
 *
 * Process (one cycle):
 *   1. gap = max_dist - len refractory steps: Markov tokens, no marker possible;
 *   2. free steps: with probability q the marker M (id V), else a Markov token;
 *   3. after M, len tokens x[t] = x[t - d] with d ~ D on [min_dist, max_dist],
 *      D(d) = exp(-decay (d - min_dist)) / Z (recency-biased: a linear bias in distance,
 *      ALiBi's own form, is the ideal attention prior for the first copied token);
 *   4. the chain continues from the last k copied tokens.
 * Constraints: len >= k (the context after a copy is made of copied tokens only),
 * min_dist > len (the copied span ends before the marker), gap = max_dist - len (the
 * span of any copy lies after the previous marker and never holds both a copy and its
 * source, so no two candidate spans coincide by construction).
 *
 * Entropy rate. The chain's state at every Markov step has the stationary law pi: the
 * sampler starts from pi, P preserves it, and a copy sets the state to the one at an
 * earlier Markov step, chosen independently of the tokens. The Bayes predictor (full
 * history) knows the phase: in a refractory step it predicts P(.|s), in a free step
 * q on M and (1 - q) P(.|s), and the len copied tokens together carry the information
 * about d: H(D) - E[H(d | history, copied span)]. Renewal-reward over one cycle of mean
 * length gap + 1/q + len (the free phase is geometric with mean 1/q steps incl. M):
 *   H = [(gap + (1-q)/q) Hm + h(q)/q + H(D)] / (gap + 1/q + len)
 * where Hm = sum_s pi(s) H(P(.|s)) and h(q) = -q ln q - (1-q) ln(1-q). The neglected term
 * E[H(d | ...)] is the chance that two spans d != d' of the chain coincide over len tokens
 * (about max_dist^2 * sum_y P(y|s)^2 ^ len); tests/test_data_copy.c runs the exact Bayes
 * predictor on a long sample and finds it within its noise of H. */
#include "st_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void st_copy_free(st_copy *c) {
    if (!c) return;
    free(c->dist_p);
    memset(c, 0, sizeof *c);
}

int st_copy_init(st_copy *c, const st_markov *m, int len, int min_dist, int max_dist, double decay, double rate,
                 st_error *e) {
    memset(c, 0, sizeof *c);
    if (len < m->order || len > 1 << 20)
        return st_fail(e, ST_ERR_CONFIG, "data.synthetic.copy.len: must be in [synthetic.order = %d, 2^20], got %d",
                       m->order, len);
    if (min_dist <= len || min_dist > max_dist)
        return st_fail(e, ST_ERR_CONFIG, "data.synthetic.copy.min_dist: must be in [copy.len + 1 = %d, copy.max_dist = %d] "
                       "(the copied span must end before the marker), got %d", len + 1, max_dist, min_dist);
    if (max_dist > 1 << 20)
        return st_fail(e, ST_ERR_CONFIG, "data.synthetic.copy.max_dist: must be <= 2^20, got %d", max_dist);
    if (!isfinite(decay) || decay < 0.0 || decay > 100.0)
        return st_fail(e, ST_ERR_CONFIG, "data.synthetic.copy.decay: must be in [0, 100], got %g", decay);
    if (!isfinite(rate) || rate <= 0.0 || rate > 1.0)
        return st_fail(e, ST_ERR_CONFIG, "data.synthetic.copy.rate: must be in (0, 1], got %g", rate);
    int nd = max_dist - min_dist + 1;
    c->dist_p = st_malloc((size_t)nd * sizeof *c->dist_p, e);
    if (!c->dist_p) return ST_ERR_MEMORY;
    c->len = len;
    c->min_dist = min_dist;
    c->max_dist = max_dist;
    c->gap = max_dist - len;
    c->decay = decay;
    c->rate = rate;
    double z = 0.0;
    for (int i = 0; i < nd; i++) z += c->dist_p[i] = exp(-decay * i);
    double hd = 0.0;
    for (int i = 0; i < nd; i++) {
        c->dist_p[i] /= z;
        if (c->dist_p[i] > 0) hd -= c->dist_p[i] * log(c->dist_p[i]);
    }
    c->dist_entropy = hd;
    double q = rate, hq = q < 1.0 ? -q * log(q) - (1.0 - q) * log1p(-q) : 0.0;
    double cycle_h = ((double)c->gap + (1.0 - q) / q) * m->entropy_rate + hq / q + hd;
    c->entropy_rate = cycle_h / ((double)c->gap + 1.0 / q + (double)len);
    return ST_OK;
}

/* one Markov step from context s: returns the token, advances s */
static int32_t markov_step(const st_markov *m, st_rng *rng, int64_t *s) {
    const double *pr = m->prob + *s * m->branch;
    const int32_t *nx = m->next + *s * m->branch;
    double r = st_rng_uniform(rng);
    int j = 0;
    while (j < m->branch - 1 && r >= pr[j]) r -= pr[j++];
    *s = (*s * m->vocab + nx[j]) % m->n_ctx;
    return nx[j];
}

void st_copy_sample(const st_copy *c, const st_markov *m, uint64_t seed, int32_t *out, int64_t n) {
    /* the first k tokens and the starting context, exactly as the plain chain draws them */
    int64_t head = n < m->order ? n : m->order;
    st_markov_sample(m, seed, out, head);
    if (n <= head) return;
    int64_t s = st_markov_context(m, out);
    st_rng rng;
    st_rng_seed(&rng, st_hash64(seed, 0xC0B1u));
    const int nd = c->max_dist - c->min_dist + 1;
    int64_t refractory = c->max_dist, dist = 0;
    int copy_left = 0;
    for (int64_t t = head; t < n; t++) {
        if (copy_left > 0) {
            int32_t y = out[t - dist];
            out[t] = y;
            s = (s * m->vocab + y) % m->n_ctx;   /* len >= k: s ends as the last k copied */
            if (--copy_left == 0) refractory = c->gap;
        } else if (refractory > 0) {
            out[t] = markov_step(m, &rng, &s);
            refractory--;
        } else if (st_rng_uniform(&rng) < c->rate) {
            out[t] = m->vocab;
            double r = st_rng_uniform(&rng);
            int i = 0;
            while (i < nd - 1 && r >= c->dist_p[i]) r -= c->dist_p[i++];
            dist = c->min_dist + i;
            copy_left = c->len;
        } else {
            out[t] = markov_step(m, &rng, &s);
        }
    }
}
