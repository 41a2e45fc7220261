/* addition.c - multi-digit addition (Zhou et al. 2024, arXiv 2402.09371; McLeish et al.
 * 2024, arXiv 2405.17399): two operands of exactly n digits (leading digit 1..9 when
 * n > 1), their sum after `=`, then `.`:
 *   plain    : `a_{n-1} .. a_0 + b_{n-1} .. b_0 =` -> `s_{m-1} .. s_0 .`
 *   reversed : `a_0 .. a_{n-1} + b_0 .. b_{n-1} =` -> `s_0 .. s_{m-1} .`
 * (data.task.format). m = n or n + 1 (no leading zero). Reversed writes every number
 * least-significant digit first, as McLeish et al. do, so each sum digit follows the
 * carry that decides it; in the plain format the first answer digit already depends on
 * every carry. */
#include "task_internal.h"

#define SEED_ADD 0x61646421ull

static int64_t add_max(const st_task_params *p) { (void)p; return (int64_t)1 << 20; }

static int64_t add_length(const st_task_params *p, int64_t n) { (void)p; return 3 * n + 4; }

/* digit i (least significant first) of an operand occupying tok[at .. at + n) */
static int digit_at(const int32_t *tok, int64_t at, int64_t n, int64_t i, int reversed) {
    return tok[at + (reversed ? i : n - 1 - i)] - ST_TT_DIGIT0;
}

static int64_t add_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_ADD));
    const int rev = p->reversed;
    /* operands at tok[0, n) and tok[n + 1, 2n + 1), written in the format's order */
    for (int k = 0; k < 2; k++) {
        const int64_t at = k * (n + 1);
        for (int64_t i = 0; i < n; i++) {   /* i: significance */
            const int lead = i == n - 1 && n > 1;
            const int d = lead ? 1 + (int)st_rng_below(&r, 9) : (int)st_rng_below(&r, 10);
            tok[at + (rev ? i : n - 1 - i)] = ST_TT_DIGIT0 + d;
        }
    }
    tok[n] = ST_TT_PLUS;
    tok[2 * n + 1] = ST_TT_SEP;
    for (int64_t i = 0; i < 2 * n + 2; i++) ans[i] = 0;
    /* the sum, least significant first, into the answer area; reversed in place for plain */
    const int64_t s0 = 2 * n + 2;
    int carry = 0;
    for (int64_t i = 0; i < n; i++) {
        const int v = digit_at(tok, 0, n, i, rev) + digit_at(tok, n + 1, n, i, rev) + carry;
        tok[s0 + i] = ST_TT_DIGIT0 + v % 10;
        carry = v / 10;
    }
    int64_t m = n;
    if (carry) tok[s0 + m++] = ST_TT_DIGIT0 + carry;
    if (!rev)
        for (int64_t i = 0; i < m / 2; i++) {
            const int32_t t = tok[s0 + i];
            tok[s0 + i] = tok[s0 + m - 1 - i];
            tok[s0 + m - 1 - i] = t;
        }
    for (int64_t i = s0; i < s0 + m; i++) ans[i] = 1;
    return task_end(tok, ans, s0 + m);
}

const st_task st_task_addition = {
    .name = "addition", .cite = "Zhou et al. 2024, arXiv 2402.09371; McLeish et al. 2024, arXiv 2405.17399",
    .size_unit = "digits", .min_size = 1, .keys = ST_TASK_KEY_FORMAT, .has_depth = 0,
    .max_size = add_max, .length = add_length, .generate = add_generate,
};
