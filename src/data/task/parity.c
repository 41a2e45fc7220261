/* parity.c - parity (Kazemnejad et al. 2023, arXiv 2305.19466; Anil et al. 2022, arXiv
 * 2207.04901): n uniform bits `b1 .. bn =`, the answer one digit, their sum mod 2. Every
 * bit decides the answer, so no bounded window or recency bias can solve it: a method
 * that generalizes must attend to the whole prompt evenly at any length, which is the
 * case softmax attention's dilution (1 / n per token) makes hard. The answer has one
 * token and no closing `.`. */
#include "st_task.h"

#define SEED_PARITY 0x70617231ull

static int64_t parity_length(const st_task_params *p, int64_t n) { (void)p; return n + 2; }

static int64_t parity_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    (void)p;
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_PARITY));
    int32_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t b = (int32_t)st_rng_below(&r, 2);
        tok[i] = ST_TT_DIGIT0 + b;
        ans[i] = 0;
        sum ^= b;
    }
    tok[n] = ST_TT_SEP;
    ans[n] = 0;
    tok[n + 1] = ST_TT_DIGIT0 + sum;
    ans[n + 1] = 1;
    return n + 2;
}

const st_task st_task_parity = {
    .name = "parity", .cite = "Kazemnejad et al. 2023, arXiv 2305.19466", .size_unit = "bits",
    .min_size = 1, .keys = 0, .has_depth = 0,
    .max_size = NULL, .length = parity_length, .generate = parity_generate,
};
