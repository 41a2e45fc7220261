/* synthetic.c - the built-in corpus: a seeded sparse Markov source of order k over V
 * symbols, with its exact entropy rate (so the ideal perplexity exp(H) is known).
 *
 * Context s = (x_1 .. x_k), oldest first, indexed s = sum_i x_i V^(k-i); after emitting y
 * the next context is (s V + y) mod V^k. Each context has `branch` successors:
 *   - one along a de Bruijn cycle of order k (every context appears once on it), so all
 *     V^k contexts communicate and the stationary distribution is unique;
 *   - branch - 1 further distinct symbols drawn uniformly;
 * with probabilities ~ Dirichlet(1, ..., 1) (normalised Exp(1) draws). The next symbol
 * depends only on the last k: structure is strictly local, which is the regime where
 * a recency bias (ALiBi) extrapolates and absolute positions do not.
 *
 * Stationary distribution: power iteration on the lazy chain Q = (I + P) / 2 (same
 * fixed point as P, and it converges even if P is periodic). Entropy rate of a stationary
 * Markov chain: H = sum_s pi(s) * sum_y -P(y|s) log P(y|s) (Cover & Thomas, thm 4.2.4). */
#include "st_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITERS 20000
#define TOL 1e-13

/* FKM algorithm (Fredricksen, Kessler, Maiorana): concatenating, in lexicographic order,
 * the Lyndon words over V symbols whose length divides k gives a de Bruijn sequence of
 * length V^k. */
static void de_bruijn(int V, int k, int32_t *seq) {
    int32_t a[32] = {0};
    int64_t len = 0;
    int p = 1;
    for (;;) {
        if (k % p == 0)
            for (int j = 1; j <= p; j++) seq[len++] = a[j];
        int i = k;
        while (i > 0 && a[i] == V - 1) i--;
        if (i == 0) break;
        a[i]++;
        for (int j = i + 1; j <= k; j++) a[j] = a[j - i];
        p = i;
    }
}

int64_t st_markov_context(const st_markov *m, const int32_t *ctx) {
    int64_t s = 0;
    for (int i = 0; i < m->order; i++) s = s * m->vocab + ctx[i];
    return s;
}

void st_markov_free(st_markov *m) {
    if (!m) return;
    free(m->next);
    free(m->prob);
    free(m->pi);
    memset(m, 0, sizeof *m);
}

int st_markov_init(st_markov *m, uint64_t seed, int V, int k, int branch, st_error *e) {
    memset(m, 0, sizeof *m);
    if (V < 2 || V > 65536 || k < 1 || branch < 1 || branch > V)
        return st_fail(e, ST_ERR_CONFIG, "synthetic source: need 2 <= vocab <= 65536, order >= 1, 1 <= branch <= vocab "
                       "(got vocab %d, order %d, branch %d)", V, k, branch);
    double nd = pow((double)V, (double)k);
    if (nd > (double)(1 << 20) || nd * branch > (double)(1 << 24))
        return st_fail(e, ST_ERR_CONFIG, "synthetic source: vocab^order = %.0f contexts (x branch %d) is too large "
                       "(limits 2^20 contexts, 2^24 transitions)", nd, branch);
    int64_t N = (int64_t)nd;
    m->vocab = V;
    m->order = k;
    m->branch = branch;
    m->n_ctx = N;
    m->next = st_malloc((size_t)N * branch * sizeof *m->next, e);
    m->prob = st_malloc((size_t)N * branch * sizeof *m->prob, e);
    m->pi = st_malloc((size_t)N * sizeof *m->pi, e);
    int32_t *seq = st_malloc((size_t)N * sizeof *seq, e);
    double *nw = st_malloc((size_t)N * sizeof *nw, e);
    int32_t *perm = branch > V / 2 ? st_malloc((size_t)V * sizeof *perm, e) : NULL;
    if (!m->next || !m->prob || !m->pi || !seq || !nw || (branch > V / 2 && !perm)) {
        free(seq); free(nw); free(perm);
        st_markov_free(m);
        return ST_ERR_MEMORY;
    }
    /* backbone: the context at cyclic position i of the de Bruijn sequence is followed by
     * the symbol at i + k */
    de_bruijn(V, k, seq);
    int64_t s = 0;
    for (int j = 0; j < k; j++) s = s * V + seq[j];
    for (int64_t i = 0; i < N; i++) {
        int32_t y = seq[(i + k) % N];
        m->next[s * branch] = y;
        s = (s * V + y) % N;
    }
    st_rng rng;
    st_rng_seed(&rng, seed);
    for (int64_t c = 0; c < N; c++) {
        int32_t *nx = m->next + c * branch;
        if (perm) {   /* dense: partial Fisher-Yates over the other symbols */
            for (int v = 0; v < V; v++) perm[v] = v;
            perm[nx[0]] = V - 1;
            perm[V - 1] = nx[0];
            for (int j = 1; j < branch; j++) {
                int r = j - 1 + (int)st_rng_below(&rng, (uint64_t)(V - 1 - (j - 1)));
                int32_t tmp = perm[j - 1]; perm[j - 1] = perm[r]; perm[r] = tmp;
                nx[j] = perm[j - 1];
            }
        } else {      /* sparse: rejection */
            for (int j = 1; j < branch; j++) {
                int32_t y;
                int dup;
                do {
                    y = (int32_t)st_rng_below(&rng, (uint64_t)V);
                    dup = 0;
                    for (int q = 0; q < j; q++) dup |= nx[q] == y;
                } while (dup);
                nx[j] = y;
            }
        }
        double *pr = m->prob + c * branch, sum = 0.0;
        for (int j = 0; j < branch; j++) {
            pr[j] = -log(1.0 - st_rng_uniform(&rng)) + 1e-12;
            sum += pr[j];
        }
        for (int j = 0; j < branch; j++) pr[j] /= sum;
    }
    /* stationary distribution */
    for (int64_t c = 0; c < N; c++) m->pi[c] = 1.0 / (double)N;
    double resid = 0.0;
    int it = 0;
    if (branch == 1) {
        /* deterministic walk around the de Bruijn cycle: pi is uniform, H = 0 */
        it = 0;
    } else {
        for (it = 1; it <= MAX_ITERS; it++) {
            for (int64_t c = 0; c < N; c++) nw[c] = 0.5 * m->pi[c];
            for (int64_t c = 0; c < N; c++) {
                double h = 0.5 * m->pi[c];
                int64_t base = (c * V) % N;
                const int32_t *nx = m->next + c * branch;
                const double *pr = m->prob + c * branch;
                for (int j = 0; j < branch; j++) nw[base + nx[j]] += h * pr[j];
            }
            double tot = 0.0;
            for (int64_t c = 0; c < N; c++) tot += nw[c];
            resid = 0.0;
            for (int64_t c = 0; c < N; c++) {
                nw[c] /= tot;
                resid += fabs(nw[c] - m->pi[c]);
            }
            double *tmp = m->pi; m->pi = nw; nw = tmp;
            if (resid < TOL) break;
        }
        if (it > MAX_ITERS) it = MAX_ITERS;
        if (resid > 1e-9)
            st_log(ST_LOG_WARN, "synthetic source: stationary distribution not converged after %d iterations "
                   "(L1 change %.2e); the entropy rate is approximate", it, resid);
    }
    double H = 0.0;
    for (int64_t c = 0; c < N; c++) {
        const double *pr = m->prob + c * branch;
        double hc = 0.0;
        for (int j = 0; j < branch; j++) if (pr[j] > 0) hc -= pr[j] * log(pr[j]);
        H += m->pi[c] * hc;
    }
    m->entropy_rate = H;
    m->iterations = it;
    m->residual = resid;
    free(seq);
    free(nw);
    free(perm);
    return ST_OK;
}

void st_markov_sample(const st_markov *m, uint64_t seed, int32_t *out, int64_t n) {
    st_rng rng;
    st_rng_seed(&rng, seed);
    const int64_t N = m->n_ctx;
    const int V = m->vocab, k = m->order, B = m->branch;
    /* starting context ~ pi, so the stream is stationary from its first token */
    double u = st_rng_uniform(&rng), acc = 0.0;
    int64_t s = N - 1;
    for (int64_t c = 0; c < N; c++) {
        acc += m->pi[c];
        if (u < acc) { s = c; break; }
    }
    int64_t div = N / V;
    for (int i = 0; i < k && i < n; i++) {
        out[i] = (int32_t)((s / div) % V);
        div /= V;
    }
    for (int64_t t = k; t < n; t++) {
        const double *pr = m->prob + s * B;
        const int32_t *nx = m->next + s * B;
        double r = st_rng_uniform(&rng);
        int j = 0;
        while (j < B - 1 && r >= pr[j]) r -= pr[j++];
        out[t] = nx[j];
        s = (s * V + nx[j]) % N;
    }
}
