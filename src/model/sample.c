/* sample.c - the next token from the logits: greedy, or a draw from the tempered softmax
 * restricted by top-k, nucleus (top-p) and min-p filters (st_sampling, st_model.h).
 *
 * Every filter is a test on one token's logit l_v and its unnormalised weight
 * w_v = exp((l_v - max) / T), which is p_v / p_max:
 *   top-k:  l_v >= the k-th largest logit;
 *   top-p:  l_v >= c, where c is the logit at which the descending cumulative weight of
 *           the top-k survivors first reaches top_p times their total weight;
 *   min-p:  w_v >= min_p (p_v >= min_p p_max).
 * The most probable token passes all three, so the kept mass is never zero for finite
 * logits. The draw walks the vocabulary in id order: u ~ U[0, 1) times the kept total,
 * the first token whose cumulative kept weight reaches it. Sorting is needed only for
 * top-p; top-k alone reads its threshold off a selection (the same value the partial
 * selection sort generate first had found), so the tokens a seed gives without the newer
 * filters are the ones it gave before. */
#include "st_model.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* descending; NaN sorts as equal to everything (no crash, no particular order) */
static int desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The k-th largest logit (1-based), by quickselect on a copy in work: O(V) on average,
 * where the selection sort it replaced took k V steps (10 s a token at top-k 100,000 over
 * WikiText-103's words). The k-th value in descending order is the same whichever way it
 * is found, ties included, so a seed gives the text it gave. Three-way partitions keep
 * runs of equal logits (and NaN, which compares false both ways) from degrading it. */
static float kth_largest(const float *logits, int V, int k, float *work) {
    memcpy(work, logits, (size_t)V * sizeof(float));
    int lo = 0, hi = V - 1;
    const int want = k - 1;   /* its index in descending order */
    while (lo < hi) {
        const float pivot = work[lo + (hi - lo) / 2];
        /* [lo, lt): > pivot, [lt, i): == pivot (or unordered), (gt, hi]: < pivot */
        int lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            const float x = work[i];
            if (x > pivot) { work[i] = work[lt]; work[lt] = x; lt++; i++; }
            else if (x < pivot) { work[i] = work[gt]; work[gt] = x; gt--; }
            else i++;
        }
        if (want < lt) hi = lt - 1;
        else if (want > gt) lo = gt + 1;
        else return pivot;
    }
    return work[want];
}

/* The smallest logit the nucleus keeps among those >= kth: work holds the logits sorted
 * in descending order. */
static float nucleus_cut(const float *sorted, int V, float mx, float temp, float kth, double top_p) {
    double total = 0;
    int n = 0;
    while (n < V && sorted[n] >= kth) total += exp((sorted[n] - mx) / temp), n++;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += exp((sorted[i] - mx) / temp);
        if (acc >= top_p * total) return sorted[i];
    }
    return n > 0 ? sorted[n - 1] : kth;
}

int st_sample_token(const float *logits, int V, const st_sampling *s, st_rng *r, float *work) {
    if (s->temperature <= 0) {   /* greedy */
        int best = 0;
        for (int v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
        return best;
    }
    /* the products run in float: a temperature below float's range (1e-300) rounded to 0,
     * and (l - max) / 0 made the top token's weight NaN (0 / 0) and the draw garbage. The
     * smallest float keeps T -> 0's limit: the top logit weighs 1, any lower one 0 (ties
     * share the draw), as 1e-45 already did */
    const float temp = fmaxf((float)s->temperature, FLT_TRUE_MIN);
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    const int use_k = s->top_k > 0 && s->top_k < V, use_p = s->top_p < 1;
    float cut = -INFINITY;
    if (use_p) {
        memcpy(work, logits, (size_t)V * sizeof(float));
        qsort(work, (size_t)V, sizeof(float), desc);
        const float kth = use_k ? work[s->top_k - 1] : -INFINITY;
        cut = nucleus_cut(work, V, mx, temp, kth, s->top_p);
    } else if (use_k) {
        cut = kth_largest(logits, V, (int)s->top_k, work);
    }
    const double min_w = s->min_p > 0 ? s->min_p : 0;
    double sum = 0;
    for (int v = 0; v < V; v++) {
        if (logits[v] < cut) continue;
        const double w = exp((logits[v] - mx) / temp);
        if (w >= min_w) sum += w;
    }
    const double u = st_rng_uniform(r) * sum;
    double acc = 0;
    for (int v = 0; v < V; v++) {
        if (logits[v] < cut) continue;
        const double w = exp((logits[v] - mx) / temp);
        if (w < min_w) continue;
        acc += w;
        if (acc >= u) return v;
    }
    return V - 1;
}
