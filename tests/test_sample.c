/* test_sample.c - st_sample_token: greedy, temperature, top-k, nucleus (top-p), min-p.
 *
 * Each filter is checked against the distribution it must give, worked out here from the
 * definitions (st_model.h): the kept set exactly (a token outside it is never drawn in
 * N draws), and the frequencies of the kept tokens within 5 standard errors of their
 * renormalised probabilities. The no-filter path is checked draw for draw against a
 * transcription of the sampler generate had before the new filters (a seed must keep
 * giving the same text). */
#include "harness.h"
#include "st_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_DRAWS 40000

/* draw N_DRAWS tokens, then compare counts with the expected probabilities q (0: never) */
static void check_freq(const char *what, const float *logits, int V, st_sampling s, const double *q) {
    st_rng r;
    st_rng_seed(&r, 12345);
    float work[64];
    int count[64] = {0}, outside = 0;
    for (int i = 0; i < N_DRAWS; i++) {
        const int t = st_sample_token(logits, V, &s, &r, work);
        if (t >= 0 && t < V) count[t]++;
        else outside++;
    }
    CHECK_MSG(outside == 0, "%s: %d tokens out of [0, %d)", what, outside, V);
    for (int v = 0; v < V; v++) {
        const double f = (double)count[v] / N_DRAWS;
        if (q[v] == 0) {
            CHECK_MSG(count[v] == 0, "%s: token %d drawn %d times, outside the kept set", what, v, count[v]);
            continue;
        }
        const double se = sqrt(q[v] * (1 - q[v]) / N_DRAWS);
        CHECK_MSG(fabs(f - q[v]) <= 5 * se + 1e-12, "%s: token %d frequency %.4f, expected %.4f (se %.4f)", what, v,
                  f, q[v], se);
    }
}

/* p = (0.5, 0.3, 0.15, 0.05) at temperature 1, token order shuffled so id order and
 * probability order differ */
static const double P[4] = {0.15, 0.5, 0.05, 0.3};

static void logits_of(const double *p, int V, float *logits) {
    for (int v = 0; v < V; v++) logits[v] = (float)log(p[v]) + 2.0f;   /* any shift */
}

static void test_greedy(void) {
    float l[6] = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f, 0.0f};
    st_rng r;
    st_rng_seed(&r, 1);
    float work[6];
    st_sampling s = {.temperature = 0, .top_k = 0, .top_p = 1, .min_p = 0};
    CHECK(st_sample_token(l, 6, &s, &r, work) == 1);   /* the first of equal maxima */
    s.top_p = 0.01;                                       /* filters do not matter */
    CHECK(st_sample_token(l, 6, &s, &r, work) == 1);
    s = (st_sampling){.temperature = 1, .top_k = 1, .top_p = 1, .min_p = 0};
    /* top-k 1 keeps the tie at the maximum: ids 1 and 3, half each */
    double q[6] = {0, 0.5, 0, 0.5, 0, 0};
    check_freq("top-k 1 with a tie", l, 6, s, q);
    /* a tiny nucleus or min-p 1 keeps the maximum (and its tie) only */
    s = (st_sampling){.temperature = 1, .top_k = 0, .top_p = 1e-6, .min_p = 0};
    check_freq("top-p 1e-6", l, 6, s, q);
    s = (st_sampling){.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 1};
    check_freq("min-p 1", l, 6, s, q);
}

static void test_filters(void) {
    float l[4];
    logits_of(P, 4, l);
    st_sampling s = {.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0};
    check_freq("plain", l, 4, s, P);
    /* temperature 2: p^(1/2), renormalised */
    double q[4], z = 0;
    for (int v = 0; v < 4; v++) z += sqrt(P[v]);
    for (int v = 0; v < 4; v++) q[v] = sqrt(P[v]) / z;
    s.temperature = 2;
    check_freq("temperature 2", l, 4, s, q);
    s.temperature = 1;
    /* top-k 2: {0.5, 0.3} -> 0.625, 0.375 */
    s.top_k = 2;
    check_freq("top-k 2", l, 4, s, (double[4]){0, 0.625, 0, 0.375});
    s.top_k = 0;
    /* top-p 0.79: 0.5 + 0.3 reaches it -> the same two */
    s.top_p = 0.79;
    check_freq("top-p 0.79", l, 4, s, (double[4]){0, 0.625, 0, 0.375});
    /* top-p 0.81: needs the 0.15 too -> 0.5/0.95, 0.3/0.95, 0.15/0.95 */
    s.top_p = 0.81;
    check_freq("top-p 0.81", l, 4, s, (double[4]){0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
    /* top-p 0.5: the single most probable token */
    s.top_p = 0.5;
    check_freq("top-p 0.5", l, 4, s, (double[4]){0, 1, 0, 0});
    /* nucleus inside top-k: top-k 3 leaves {0.5, 0.3, 0.15} (mass 0.95); top-p 0.83 of that
     * is 0.7885 -> 0.5 + 0.3 suffices (0.83 of the whole mass would need the third) */
    s.top_k = 3;
    s.top_p = 0.83;
    check_freq("top-k 3 + top-p 0.83", l, 4, s, (double[4]){0, 0.625, 0, 0.375});
    /* ... and top-p 0.85 of 0.95 = 0.8075 needs the third */
    s.top_p = 0.85;
    check_freq("top-k 3 + top-p 0.85", l, 4, s, (double[4]){0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
    /* min-p 0.35: p >= 0.175 -> {0.5, 0.3}; min-p 0.3: p >= 0.15 -> three */
    s = (st_sampling){.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0.35};
    check_freq("min-p 0.35", l, 4, s, (double[4]){0, 0.625, 0, 0.375});
    s.min_p = 0.29;
    check_freq("min-p 0.29", l, 4, s, (double[4]){0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
    /* min-p is relative to the tempered distribution: at temperature 2 the ratios are
     * sqrt(p / 0.5): 0.15 -> 0.548, 0.05 -> 0.316; min-p 0.5 keeps three */
    s.temperature = 2;
    s.min_p = 0.5;
    z = sqrt(0.5) + sqrt(0.3) + sqrt(0.15);
    check_freq("temperature 2 + min-p 0.5", l, 4, s, (double[4]){sqrt(0.15) / z, sqrt(0.5) / z, 0, sqrt(0.3) / z});
}

/* generate's sampler before top-p/min-p, transcribed: top-k threshold by selection, the
 * draw in id order */
static int old_sample(const float *logits, int V, float temp, int top_k, st_rng *r, float *work) {
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    float kth = -INFINITY;
    if (top_k > 0 && top_k < V) {
        memcpy(work, logits, (size_t)V * sizeof(float));
        for (int i = 0; i < top_k; i++) {
            int b = i;
            for (int j = i + 1; j < V; j++) if (work[j] > work[b]) b = j;
            float t = work[i]; work[i] = work[b]; work[b] = t;
        }
        kth = work[top_k - 1];
    }
    double sum = 0;
    for (int v = 0; v < V; v++) sum += logits[v] >= kth ? exp((logits[v] - mx) / temp) : 0.0;
    double u = st_rng_uniform(r) * sum, acc = 0;
    for (int v = 0; v < V; v++) {
        if (logits[v] < kth) continue;
        acc += exp((logits[v] - mx) / temp);
        if (acc >= u) return v;
    }
    return V - 1;
}

static void test_same_draws(void) {
    enum { V = 50 };
    float l[V], w1[V], w2[V];
    st_rng g;
    st_rng_seed(&g, 7);
    int same = 1;
    for (int trial = 0; trial < 200; trial++) {
        for (int v = 0; v < V; v++) l[v] = 3 * st_rng_normal(&g);
        const int k = trial % 4 == 0 ? 0 : (int)(trial % 60);
        const float temp = 0.3f + 0.01f * (float)(trial % 150);
        st_rng a, b;
        st_rng_seed(&a, (uint64_t)trial);
        st_rng_seed(&b, (uint64_t)trial);
        st_sampling s = {.temperature = temp, .top_k = k, .top_p = 1, .min_p = 0};
        for (int i = 0; i < 20; i++) same &= st_sample_token(l, V, &s, &a, w1) == old_sample(l, V, temp, k, &b, w2);
    }
    CHECK_MSG(same, "without top-p/min-p a seed draws what the previous sampler drew");
    /* a large vocabulary with many equal logits and any k: the quickselect threshold is the
     * selection sort's, tie for tie (review 41: the sort took k V steps per token) */
    enum { VB = 1500 };
    static float lb[VB], wb1[VB], wb2[VB];
    int same_big = 1;
    for (int trial = 0; trial < 40; trial++) {
        const int levels = trial % 2 ? 7 : 1000;   /* few distinct values: long runs of ties */
        for (int v = 0; v < VB; v++) lb[v] = (float)(st_rng_below(&g, (uint64_t)levels)) * 0.25f;
        const int k = 1 + (int)st_rng_below(&g, VB - 1);
        st_rng a, b;
        st_rng_seed(&a, (uint64_t)trial);
        st_rng_seed(&b, (uint64_t)trial);
        st_sampling s = {.temperature = 1.0f, .top_k = k, .top_p = 1, .min_p = 0};
        for (int i = 0; i < 5; i++) same_big &= st_sample_token(lb, VB, &s, &a, wb1) == old_sample(lb, VB, 1.0f, k, &b, wb2);
    }
    CHECK_MSG(same_big, "top-k over 1500 tied logits: the threshold of the selection sort");
}

int main(void) {
    test_greedy();
    test_filters();
    test_same_draws();
    return test_finish("sample");
}
