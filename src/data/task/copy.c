/* copy.c - copy (Kazemnejad et al. 2023, arXiv 2305.19466): `x1 .. xn =` -> `x1 .. xn .`
 * with the xi uniform over the symbols. Each answer token is the prompt token n + 1
 * positions back: an induction head with a fixed offset per instance, which is why the
 * answer must track its own length (the `.`) once n passes the training sizes. */
#include "task_internal.h"

#define SEED_COPY 0x636f7079ull

static int64_t copy_length(const st_task_params *p, int64_t n) { (void)p; return 2 * n + 2; }

static int64_t copy_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_COPY));
    const int64_t w = task_symbol_prompt(p, &r, n, tok, ans);
    for (int64_t i = 0; i < n; i++) { tok[w + i] = tok[i]; ans[w + i] = 1; }
    return task_end(tok, ans, w + n);
}

const st_task st_task_copy = {
    .name = "copy", .cite = "Kazemnejad et al. 2023, arXiv 2305.19466", .size_unit = "symbols",
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS, .has_depth = 0,
    .max_size = NULL, .length = copy_length, .generate = copy_generate,
};
