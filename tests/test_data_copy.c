/* test_data_copy.c - the synthetic corpus in copy mode: its entropy-rate formula against
 * the exact Bayes predictor run over a long sample, the sampler's invariants, and the
 * config checks of data.synthetic.mode / data.synthetic.copy.*.
 *
 * The Bayes predictor below is written from the process definition, not from the sampler:
 * it tracks the phase (refractory, free, copying), predicts P(.|s) or q on the marker and
 * (1 - q) P(.|s), and inside a copy keeps the posterior over the distances d whose source
 * tokens agree with everything copied so far. Its mean log-loss over n tokens converges
 * to the true entropy rate (Shannon-McMillan-Breiman); the formula neglects only
 * coincident candidate spans, so the two must agree within the sample's noise. */
#include "harness.h"
#include "st_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -ln p of each token from index k on; returns the mean and the standard error from
 * batch means over blocks of `block` tokens (the loss is correlated within a cycle). */
static double bayes_loss(const st_markov *m, const st_copy *c, const int32_t *x, int64_t n, int64_t block,
                         double *stderr_out, int *impossible) {
    const int V = m->vocab, k = m->order, B = m->branch;
    const int nd = c->max_dist - c->min_dist + 1;
    double *w = malloc((size_t)nd * sizeof *w);
    int64_t s = st_markov_context(m, x);
    int64_t refr = c->max_dist;
    int copy_left = 0;
    double sum = 0.0, bsum = 0.0, bsq = 0.0, cur = 0.0;
    int64_t nb = 0, in_block = 0;
    *impossible = 0;
    for (int64_t t = k; t < n; t++) {
        int32_t y = x[t];
        double p = 0.0;
        if (copy_left > 0) {
            double tot = 0.0, hit = 0.0;
            for (int i = 0; i < nd; i++) {
                tot += w[i];
                if (x[t - c->min_dist - i] == y) hit += w[i];
                else w[i] = 0.0;                   /* posterior: drop distances that disagree */
            }
            p = tot > 0 ? hit / tot : 0.0;
            if (--copy_left == 0) refr = c->gap;
        } else if (y == V) {
            p = refr > 0 ? 0.0 : c->rate;
            for (int i = 0; i < nd; i++) w[i] = c->dist_p[i];
            copy_left = c->len;
        } else {
            for (int j = 0; j < B; j++)
                if (m->next[s * B + j] == y) p = m->prob[s * B + j];
            if (refr > 0) refr--;
            else p *= 1.0 - c->rate;
        }
        if (y != V) s = (s * V + y) % m->n_ctx;
        if (!(p > 0.0)) { (*impossible)++; continue; }
        double l = -log(p);
        sum += l;
        cur += l;
        if (++in_block == block) {
            bsum += cur / (double)block;
            bsq += (cur / (double)block) * (cur / (double)block);
            nb++;
            cur = 0.0;
            in_block = 0;
        }
    }
    free(w);
    double mb = bsum / (double)nb;
    *stderr_out = sqrt(fmax(bsq / (double)nb - mb * mb, 0.0) / (double)(nb - 1));
    return sum / (double)(n - k);
}

static void check_formula(uint64_t seed, int V, int k, int branch, int len, int dmin, int dmax, double decay,
                          double rate) {
    st_markov m;
    st_copy c;
    st_error e = {0};
    CHECK(st_markov_init(&m, seed, V, k, branch, &e) == ST_OK);
    CHECK(st_copy_init(&c, &m, len, dmin, dmax, decay, rate, &e) == ST_OK);
    CHECK(c.gap == dmax - len);
    const int64_t n = 4000000;
    int32_t *x = malloc((size_t)n * sizeof *x);
    st_copy_sample(&c, &m, seed + 7, x, n);
    /* the marker rate is 1 / (mean cycle length) */
    int64_t markers = 0;
    for (int64_t t = 0; t < n; t++) markers += x[t] == V;
    double cycle = (double)c.gap + 1.0 / rate + (double)len;
    CHECK_MSG(fabs((double)markers / (double)n - 1.0 / cycle) < 4.0 * sqrt(1.0 / cycle / (double)n) + 1e-4,
              "marker rate %.5f, expected 1/%.3f", (double)markers / (double)n, cycle);
    double se;
    int impossible;
    double emp = bayes_loss(&m, &c, x, n, 20000, &se, &impossible);
    CHECK_MSG(impossible == 0, "%d tokens the process cannot emit", impossible);
    /* the formula is an upper bound up to the (tiny) coincidence term: emp <= H + noise */
    CHECK_MSG(fabs(emp - c.entropy_rate) < 4.0 * se + 5e-4,
              "V=%d k=%d branch=%d len=%d d=%d..%d: Bayes log-loss %.5f +- %.5f vs formula %.5f", V, k, branch, len, dmin,
              dmax, emp, se, c.entropy_rate);
    printf("  copy V=%d k=%d branch=%d len=%d d=%d..%d decay=%g rate=%g: formula %.5f, Bayes predictor %.5f +- %.5f "
           "(chain alone %.5f)\n", V, k, branch, len, dmin, dmax, decay, rate, c.entropy_rate, emp, se, m.entropy_rate);
    /* the copy segments add information the chain does not have: H < chain rate when the
     * distance carries fewer nats than the copied tokens would */
    CHECK(c.entropy_rate > 0.0);
    /* determinism */
    int32_t *y = malloc(100000 * sizeof *y);
    st_copy_sample(&c, &m, seed + 7, y, 100000);
    CHECK(!memcmp(x, y, 100000 * sizeof *y));
    free(y);
    free(x);
    st_copy_free(&c);
    st_markov_free(&m);
}

static void test_entropy_formula(void) {
    check_formula(1234, 64, 1, 4, 8, 9, 24, 0.1, 0.25);   /* configs/sweep_synthetic.json */
    check_formula(1234, 64, 2, 4, 8, 9, 24, 0.1, 0.25);   /* the defaults */
    check_formula(99, 32, 1, 8, 4, 6, 40, 0.0, 1.0);      /* uniform distances, copy at once */
}

/* the closed form of one small case by hand: chain of branch 1 (H_m = 0), rate 1 (no
 * free-step entropy), two distances with decay 0: H = ln 2 / (gap + 1 + len) */
static void test_formula_by_hand(void) {
    st_markov m;
    st_copy c;
    st_error e = {0};
    CHECK(st_markov_init(&m, 5, 8, 1, 1, &e) == ST_OK);
    CHECK(st_copy_init(&c, &m, 3, 4, 5, 0.0, 1.0, &e) == ST_OK);
    CHECK_NEAR(c.dist_entropy, log(2.0), 1e-12);
    CHECK_NEAR(c.entropy_rate, log(2.0) / (2 + 1 + 3), 1e-12);
    st_copy_free(&c);
    /* rate q, decay d: H(D) and h(q) terms */
    CHECK(st_copy_init(&c, &m, 3, 4, 6, 1.0, 0.5, &e) == ST_OK);
    double z = 1 + exp(-1.0) + exp(-2.0), hd = 0;
    for (int i = 0; i < 3; i++) hd -= exp(-i) / z * log(exp(-i) / z);
    CHECK_NEAR(c.dist_entropy, hd, 1e-12);
    CHECK_NEAR(c.entropy_rate, (log(2.0) / 0.5 + hd) / (3 + 2 + 3), 1e-12);
    st_copy_free(&c);
    /* parameter checks */
    CHECK(st_copy_init(&c, &m, 3, 3, 6, 0.1, 0.5, &e) == ST_ERR_CONFIG);    /* min_dist <= len */
    CHECK(strstr(e.msg, "copy.min_dist") != NULL);
    CHECK(st_copy_init(&c, &m, 3, 4, 6, 0.1, 0.0, &e) == ST_ERR_CONFIG);    /* rate 0 */
    CHECK(st_copy_init(&c, &m, 3, 4, 6, -1.0, 0.5, &e) == ST_ERR_CONFIG);   /* decay < 0 */
    st_markov_free(&m);
    CHECK(st_markov_init(&m, 5, 8, 3, 2, &e) == ST_OK);
    CHECK(st_copy_init(&c, &m, 2, 4, 6, 0.1, 0.5, &e) == ST_ERR_CONFIG);    /* len < order */
    CHECK(strstr(e.msg, "copy.len") != NULL);
    st_markov_free(&m);
}

static void expect_error(const st_data_config *c, const char *key) {
    st_error e = {0};
    int rc = st_data_config_validate(c, "x.json", &e);
    CHECK_MSG(rc == ST_ERR_CONFIG && strstr(e.msg, key), "expected an error naming %s, got %d: %s", key, rc, e.msg);
}

static void test_config(void) {
    st_data_config c;
    st_error e = {0};
    st_data_config_default(&c);
    CHECK(!strcmp(c.syn_mode, "markov"));
    strcpy(c.syn_mode, "copy");
    CHECK(st_data_config_validate(&c, "x.json", &e) == ST_OK);
    strcpy(c.syn_mode, "recall"); expect_error(&c, "data.synthetic.mode");
    st_data_config_default(&c); strcpy(c.syn_mode, "copy"); c.copy_len = 1; expect_error(&c, "data.synthetic.copy.len");
    st_data_config_default(&c); strcpy(c.syn_mode, "copy"); c.copy_min_dist = 8; expect_error(&c, "data.synthetic.copy.min_dist");
    st_data_config_default(&c); strcpy(c.syn_mode, "copy"); c.copy_max_dist = 5; expect_error(&c, "data.synthetic.copy.max_dist");
    st_data_config_default(&c); strcpy(c.syn_mode, "copy"); c.copy_rate = 0; expect_error(&c, "data.synthetic.copy.rate");
    st_data_config_default(&c); strcpy(c.syn_mode, "copy"); c.copy_decay = NAN; expect_error(&c, "data.synthetic.copy.decay");
    /* markov mode ignores the copy keys */
    st_data_config_default(&c); c.copy_rate = 0;
    CHECK(st_data_config_validate(&c, "x.json", &e) == ST_OK);
}

/* the dataset: one more symbol (the marker), the formula as its entropy rate */
static void test_dataset(void) {
    st_data_config c;
    st_error e = {0};
    st_data_config_default(&c);
    c.syn_tokens[0] = 20000; c.syn_tokens[1] = c.syn_tokens[2] = 5000;
    st_dataset a, b;
    CHECK(st_dataset_load(&c, "x.json", &a, &e) == ST_OK);
    strcpy(c.syn_mode, "copy");
    CHECK(st_dataset_load(&c, "x.json", &b, &e) == ST_OK);
    CHECK(b.vocab_size == a.vocab_size + 1 && b.tok_hash != a.tok_hash);
    CHECK(b.entropy_rate < a.entropy_rate);
    int markers = 0;
    for (int64_t t = 0; t < b.n[1]; t++) markers += b.tokens[1][t] == 64;
    CHECK(markers > 0);
    st_dataset_free(&a);
    st_dataset_free(&b);
}

int main(void) {
    test_formula_by_hand();
    test_entropy_formula();
    test_config();
    test_dataset();
    return test_finish("data_copy");
}
