/* multikey.c - several needles, one asked for (RULER's multi-key needle in a haystack,
 * Hsieh et al. 2024, arXiv 2404.06654, its variant with distractor needles): an instance
 * of n prompt tokens is F = n - m (k + 2) - 2 filler tokens (one sample of the built-in
 * Markov source, as passkey's) with m = data.task.needles needles `K s d1 .. dk`, each
 * under its own key symbol s (distinct), then `? s*` asking for one of them; the answer is
 * that needle's k = data.task.digits digits. The asked-for needle sits after the first
 * a = round(depth F) filler tokens (depth: the caller's, or drawn from the seed), the
 * m - 1 distractors at uniform points of the filler. Passkey can be solved by attending to
 * the one `K` in the prompt; here the model must match the queried key against every
 * needle's, and a near distractor is the wrong answer a position bias makes likely. */
#include "task_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SEED_MK 0x6d6b6e31ull

static int64_t mk_width(const st_task_params *p) { return (int64_t)p->digits + 2; }   /* `K s d1 .. dk` */

static int64_t mk_min(const st_task_params *p) { return (int64_t)p->needles * mk_width(p) + 2; }

static int64_t mk_length(const st_task_params *p, int64_t n) { return n + p->digits; }

static int mk_check(const st_task_params *p, char *msg, size_t n) {
    if (p->needles <= p->symbols) return 0;
    snprintf(msg, n, "data.task.needles: %d needles need as many distinct key symbols, data.task.symbols is %d",
             p->needles, p->symbols);
    return 1;
}

static int64_t mk_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_MK));
    const int m = p->needles, k = p->digits;
    const int64_t w = mk_width(p), F = n - m * w - 2;   /* the config layer keeps F >= 0 */
    const double depth = p->depth >= 0 ? p->depth : st_rng_uniform(&r);
    /* needle 0 is the one asked for; point[j]: filler tokens before needle j */
    int32_t key[ST_TASK_MAX_NEEDLES];
    int64_t point[ST_TASK_MAX_NEEDLES];
    int order[ST_TASK_MAX_NEEDLES];
    point[0] = (int64_t)floor(depth * (double)F + 0.5);
    if (point[0] > F) point[0] = F;
    for (int j = 0; j < m; j++) {
        int fresh;
        do {   /* distinct keys by rejection: m <= symbols (mk_check) */
            key[j] = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)p->symbols);
            fresh = 1;
            for (int i = 0; i < j && fresh; i++) fresh = key[i] != key[j];
        } while (!fresh);
        if (j) point[j] = (int64_t)st_rng_below(&r, (uint64_t)F + 1);
    }
    /* needles in prompt order: by point, and at one point by index (insertion sort, m <= 64) */
    for (int j = 0; j < m; j++) {
        int i = j;
        while (i > 0 && point[order[i - 1]] > point[j]) { order[i] = order[i - 1]; i--; }
        order[i] = j;
    }
    const uint64_t digit_seed = st_rng_u64(&r);
    task_filler(p, &r, tok, F);
    /* open the gaps from the back: filler [point, end) moves right past the needles after it */
    int64_t end = F, at = F + m * w;
    for (int o = m - 1; o >= 0; o--) {
        const int j = order[o];
        const int64_t run = end - point[j];
        memmove(tok + at - run, tok + point[j], (size_t)run * sizeof *tok);
        at -= run + w;
        end = point[j];
        tok[at] = ST_TT_KEY;
        tok[at + 1] = key[j];
        st_rng d;   /* needle j's digits: their own stream, so the write order does not matter */
        st_rng_seed(&d, st_hash64(digit_seed, (uint64_t)j));
        for (int i = 0; i < k; i++) tok[at + 2 + i] = ST_TT_DIGIT0 + (int32_t)st_rng_below(&d, 10);
        if (j == 0)
            for (int i = 0; i < k; i++) tok[n + i] = tok[at + 2 + i];
    }
    tok[n - 2] = ST_TT_QUERY;
    tok[n - 1] = key[0];
    for (int64_t i = 0; i < n; i++) ans[i] = 0;
    for (int i = 0; i < k; i++) ans[n + i] = 1;
    return n + k;
}

const st_task st_task_multikey = {
    .name = "multikey", .cite = "Hsieh et al. 2024 (RULER), arXiv 2404.06654", .size_unit = "tokens",
    .min_size = 3, .keys = ST_TASK_KEY_SYMBOLS | ST_TASK_KEY_DIGITS | ST_TASK_KEY_NEEDLES, .has_depth = 1,
    .min_size_of = mk_min, .min_rule = "data.task.needles x (data.task.digits + 2) + 2", .max_size = NULL, .check = mk_check, .length = mk_length, .generate = mk_generate,
};
