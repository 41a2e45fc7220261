/* counting.c - counting (the counting task of Golovneva et al. 2024, CoPE, arXiv 2405.18719,
 * in the copy-task format of Kazemnejad et al. 2023): n uniform symbols, then `? s =`
 * asking how often the symbol s occurs among them; the answer is the count in decimal,
 * most significant digit first, then `.`. s is the symbol at a uniform position of the
 * prompt, so it occurs at least once (and a frequent symbol is asked for more often).
 * Counting needs every occurrence, however far back: attention that averages over the
 * prompt gives a fraction, and turning it into a count takes the prompt's length, which
 * is what a method that extrapolates must still know at 32x. Counts past the largest
 * training size are numbers the model never wrote; the answer's length grows too.
 *
 * data.task.max_count c >= 1 separates the two: the asked symbol s (uniform) occurs k
 * times, k uniform on [1, min(c, n)], at k distinct uniform positions, and the other
 * n - k positions are uniform over the other symbols. The answers are the same counts at
 * every length, so accuracy past 1x measures whether every occurrence is still found
 * among n tokens, not whether the model can write a number it never wrote. */
#include "task_internal.h"

#define SEED_COUNT 0x636e7431ull

/* decimal digits of n >= 1 */
static int64_t decimal_digits(int64_t n) {
    int64_t d = 1;
    while (n >= 10) { n /= 10; d++; }
    return d;
}

/* n symbols, `? s =`, the count's digits (at most n, or max_count), `.` */
static int64_t counting_length(const st_task_params *p, int64_t n) {
    return n + 3 + decimal_digits(p->max_count > 0 && p->max_count < n ? p->max_count : n) + 1;
}

/* The max_count prompt: k of the n positions hold s, the others another symbol; returns s.
 * Positions by rejection (a position already s is drawn again): k <= n, and the expected
 * draws are at most n H(n) when k = n. */
static int32_t bounded_prompt(const st_task_params *p, st_rng *r, int64_t n, int64_t k, int32_t *tok) {
    const int32_t s = (int32_t)st_rng_below(r, (uint64_t)p->symbols);
    for (int64_t i = 0; i < n; i++) {   /* uniform over the symbols but s: skip s's index */
        const int32_t o = (int32_t)st_rng_below(r, (uint64_t)p->symbols - 1);
        tok[i] = ST_TT_SYMBOL0 + (o >= s ? o + 1 : o);
    }
    for (int64_t placed = 0; placed < k;) {
        const int64_t i = (int64_t)st_rng_below(r, (uint64_t)n);
        if (tok[i] == ST_TT_SYMBOL0 + s) continue;
        tok[i] = ST_TT_SYMBOL0 + s;
        placed++;
    }
    return ST_TT_SYMBOL0 + s;
}

static int64_t counting_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_COUNT));
    int32_t s;
    int64_t c = 0;
    if (p->max_count > 0) {
        c = 1 + (int64_t)st_rng_below(&r, (uint64_t)(p->max_count < n ? p->max_count : n));
        s = bounded_prompt(p, &r, n, c, tok);
    } else {
        for (int64_t i = 0; i < n; i++) tok[i] = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)p->symbols);
        s = tok[st_rng_below(&r, (uint64_t)n)];
        for (int64_t i = 0; i < n; i++) c += tok[i] == s;
    }
    for (int64_t i = 0; i < n; i++) ans[i] = 0;
    tok[n] = ST_TT_QUERY;
    tok[n + 1] = s;
    tok[n + 2] = ST_TT_SEP;
    ans[n] = ans[n + 1] = ans[n + 2] = 0;
    const int64_t d = decimal_digits(c), a = n + 3;
    for (int64_t i = d - 1; i >= 0; i--, c /= 10) {
        tok[a + i] = ST_TT_DIGIT0 + (int32_t)(c % 10);
        ans[a + i] = 1;
    }
    return task_end(tok, ans, a + d);
}

const st_task st_task_counting = {
    .name = "counting", .cite = "Golovneva et al. 2024 (CoPE), arXiv 2405.18719", .size_unit = "symbols",
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS | ST_TASK_KEY_MAX_COUNT, .has_depth = 0,
    .max_size = NULL, .length = counting_length, .generate = counting_generate,
};
