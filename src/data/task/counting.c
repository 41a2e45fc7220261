/* counting.c - counting (the counting task of Golovneva et al. 2024, CoPE, arXiv 2405.18719,
 * in the copy-task format of Kazemnejad et al. 2023): n uniform symbols, then `? s =`
 * asking how often the symbol s occurs among them; the answer is the count in decimal,
 * most significant digit first, then `.`. s is the symbol at a uniform position of the
 * prompt, so it occurs at least once (and a frequent symbol is asked for more often).
 * Counting needs every occurrence, however far back: attention that averages over the
 * prompt gives a fraction, and turning it into a count takes the prompt's length, which
 * is what a method that extrapolates must still know at 32x. Counts past the largest
 * training size are numbers the model never wrote; the answer's length grows too. */
#include "task_internal.h"

#define SEED_COUNT 0x636e7431ull

/* decimal digits of n >= 1 */
static int64_t decimal_digits(int64_t n) {
    int64_t d = 1;
    while (n >= 10) { n /= 10; d++; }
    return d;
}

static int64_t counting_length(const st_task_params *p, int64_t n) { (void)p; return n + 3 + decimal_digits(n) + 1; }

static int64_t counting_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_COUNT));
    for (int64_t i = 0; i < n; i++) {
        tok[i] = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)p->symbols);
        ans[i] = 0;
    }
    const int32_t s = tok[st_rng_below(&r, (uint64_t)n)];
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += tok[i] == s;
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
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS, .has_depth = 0,
    .max_size = NULL, .length = counting_length, .generate = counting_generate,
};
