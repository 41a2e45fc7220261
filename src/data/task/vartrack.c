/* vartrack.c - variable tracking (RULER's VT, Hsieh et al. 2024, arXiv 2404.06654): a
 * chain of assignments scattered in filler, `VAR X1 = 12345 ... VAR X2 = X1 ... VAR X3 =
 * X2`, beside distractor chains holding other values; the question asks which variables
 * hold the value. Multi-hop retrieval: the first variable is found by its value, each
 * later one by the assignment that copies the one before it.
 *
 * In the task vocabulary: C = data.task.chains chains of H = data.task.hops variables
 * (symbols, all C H distinct). Chain c's first assignment gives its value, `K x d1 .. dk`
 * (k = data.task.digits; the chains' values distinct), each later one copies the
 * variable before it, `K y x` (y = x). The assignments sit in F filler tokens (one sample
 * of the built-in Markov source, as passkey's), the question `? d1 .. dk` names chain 0's
 * value, and the answer is chain 0's variables in chain order, then `.`:
 *   n = F + C (k + 2 + 3 (H - 1)) + k + 1 prompt tokens, n + H + 1 in all.
 * The answer follows the value's last digit, as passkey's follows its `?`: with a `=`
 * after the question the first lookup must first move the value onto the `=` (a
 * previous-token head, then the match), and a pilot (RoPE, 8,000 steps) stalled at 0.93
 * nats per answer token against 0.19 in this format (docs/results-tasks.md).
 * Chain 0's value assignment sits after the first a = round(depth F) filler tokens (depth:
 * the caller's, or drawn from the seed), its copies at uniform points of [a, F] after it;
 * a distractor chain's H assignments at uniform points of [0, F], each chain in order, so
 * every copy refers to a variable assigned before it. Answer token h + 1 is one hop from
 * answer token h: the model must find `K y x` with x the variable it just wrote. */
#include "task_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SEED_VT 0x76747231ull
#define VT_MAX (ST_TASK_MAX_HOPS * ST_TASK_MAX_CHAINS)
#define COPY_W 3   /* `K y x` */

static int64_t value_w(const st_task_params *p) { return (int64_t)p->digits + 2; }   /* `K x d1 .. dk` */

/* one chain's tokens: its value assignment, then H - 1 copies */
static int64_t chain_w(const st_task_params *p) { return value_w(p) + (int64_t)(p->hops - 1) * COPY_W; }

/* every chain and the question `? d1 .. dk`, no filler */
static int64_t vt_min(const st_task_params *p) { return (int64_t)p->chains * chain_w(p) + p->digits + 1; }

static int64_t vt_length(const st_task_params *p, int64_t n) { return n + p->hops + 1; }

static int vt_check(const st_task_params *p, char *msg, size_t n) {
    if (p->hops * p->chains > p->symbols) {
        snprintf(msg, n, "data.task.hops x data.task.chains: %d x %d = %d variables need as many distinct symbols, "
                 "data.task.symbols is %d", p->hops, p->chains, p->hops * p->chains, p->symbols);
        return 1;
    }
    if ((double)p->chains > pow(10.0, p->digits)) {
        snprintf(msg, n, "data.task.chains: %d chains need as many distinct values, data.task.digits %d makes %.0f",
                 p->chains, p->digits, pow(10.0, p->digits));
        return 1;
    }
    return 0;
}

/* the chains' values, value[c * k + i]: chain c's from its own stream (so the order the
 * assignments are written in does not matter), redrawn while it equals an earlier chain's
 * (chains <= 10^k: vt_check) */
static void draw_values(int C, int k, uint64_t digit_seed, int32_t *value) {
    const size_t bytes = (size_t)k * sizeof *value;
    for (int c = 0; c < C; c++) {
        st_rng d;
        st_rng_seed(&d, st_hash64(digit_seed, (uint64_t)c));
        int fresh;
        do {
            for (int i = 0; i < k; i++) value[c * k + i] = ST_TT_DIGIT0 + (int32_t)st_rng_below(&d, 10);
            fresh = 1;
            for (int b = 0; b < c && fresh; b++) fresh = memcmp(value + b * k, value + c * k, bytes) != 0;
        } while (!fresh);
    }
}

/* filler points: point[c H + h] filler tokens come before chain c's h-th assignment.
 * Chain 0's first at a, its copies uniform on [a, F]; a distractor's H uniform on [0, F];
 * each chain's points ascending (insertion sort), so its hops come in order. */
static void draw_points(st_rng *r, int H, int C, int64_t F, int64_t a, int64_t *point) {
    for (int c = 0; c < C; c++) {
        int64_t *pt = point + c * H;
        const int64_t lo = c ? 0 : a;
        for (int h = 0; h < H; h++) {
            const int64_t v = c == 0 && h == 0 ? a : lo + (int64_t)st_rng_below(r, (uint64_t)(F - lo) + 1);
            int i = h;
            while (i > 0 && pt[i - 1] > v) { pt[i] = pt[i - 1]; i--; }
            pt[i] = v;
        }
    }
}

static int64_t vt_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_VT));
    const int H = p->hops, C = p->chains, k = p->digits, m = H * C;
    const int64_t F = n - vt_min(p);   /* the config layer keeps F >= 0 */
    const double depth = p->depth >= 0 ? p->depth : st_rng_uniform(&r);
    int64_t a = (int64_t)floor(depth * (double)F + 0.5);
    if (a > F) a = F;
    /* var[c H + h]: chain c's h-th variable, all distinct by rejection (m <= symbols: vt_check) */
    int32_t var[VT_MAX], value[ST_TASK_MAX_CHAINS * ST_TASK_MAX_DIGITS];
    int64_t point[VT_MAX];
    int order[VT_MAX];
    for (int j = 0; j < m; j++) {
        int fresh;
        do {
            var[j] = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)p->symbols);
            fresh = 1;
            for (int i = 0; i < j && fresh; i++) fresh = var[i] != var[j];
        } while (!fresh);
    }
    draw_points(&r, H, C, F, a, point);
    /* assignments in prompt order: by point, and at one point by index (insertion sort),
     * which keeps each chain's hops in order */
    for (int j = 0; j < m; j++) {
        int i = j;
        while (i > 0 && point[order[i - 1]] > point[j]) { order[i] = order[i - 1]; i--; }
        order[i] = j;
    }
    draw_values(C, k, st_rng_u64(&r), value);
    task_filler(p, &r, tok, F);
    /* open the gaps from the back: filler [point, end) moves right past the assignments after it */
    int64_t end = F, at = F + (int64_t)C * chain_w(p);
    for (int o = m - 1; o >= 0; o--) {
        const int j = order[o], h = j % H;
        const int64_t run = end - point[j];
        memmove(tok + at - run, tok + point[j], (size_t)run * sizeof *tok);
        at -= run + (h ? COPY_W : value_w(p));
        end = point[j];
        tok[at] = ST_TT_KEY;
        tok[at + 1] = var[j];
        if (h) tok[at + 2] = var[j - 1];
        else memcpy(tok + at + 2, value + (j / H) * k, (size_t)k * sizeof *tok);
    }
    const int64_t q = n - k - 1;   /* the question: chain 0's value */
    tok[q] = ST_TT_QUERY;
    memcpy(tok + q + 1, value, (size_t)k * sizeof *tok);
    for (int64_t i = 0; i < n; i++) ans[i] = 0;
    for (int h = 0; h < H; h++) {
        tok[n + h] = var[h];
        ans[n + h] = 1;
    }
    return task_end(tok, ans, n + H);
}

const st_task st_task_vartrack = {
    .name = "vartrack", .cite = "Hsieh et al. 2024 (RULER), arXiv 2404.06654", .size_unit = "tokens",
    .min_size = 3, .keys = ST_TASK_KEY_SYMBOLS | ST_TASK_KEY_DIGITS | ST_TASK_KEY_HOPS | ST_TASK_KEY_CHAINS,
    .has_depth = 1, .min_size_of = vt_min,
    .min_rule = "data.task.chains x (data.task.digits + 3 data.task.hops - 1) + data.task.digits + 1",
    .max_size = NULL, .check = vt_check, .length = vt_length, .generate = vt_generate,
};
