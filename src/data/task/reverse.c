/* reverse.c - reverse (Kazemnejad et al. 2023, arXiv 2305.19466): `x1 .. xn =` ->
 * `xn .. x1 .`. Answer token k (at n + k, counting from 0) is the prompt token 2k back:
 * the offset grows along the answer, so a method must resolve every distance up to 2n. */
#include "task_internal.h"

#define SEED_REVERSE 0x72657673ull

static int64_t reverse_length(const st_task_params *p, int64_t n) { (void)p; return 2 * n + 2; }

static int64_t reverse_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_REVERSE));
    const int64_t w = task_symbol_prompt(p, &r, n, tok, ans);
    for (int64_t i = 0; i < n; i++) { tok[w + i] = tok[n - 1 - i]; ans[w + i] = 1; }
    return task_end(tok, ans, w + n);
}

const st_task st_task_reverse = {
    .name = "reverse", .cite = "Kazemnejad et al. 2023, arXiv 2305.19466", .size_unit = "symbols",
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS, .has_depth = 0,
    .max_size = NULL, .length = reverse_length, .generate = reverse_generate,
};
