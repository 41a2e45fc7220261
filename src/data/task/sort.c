/* sort.c - sort (Kazemnejad et al. 2023, arXiv 2305.19466): `x1 .. xn =` -> the xi in
 * ascending id order, then `.`. The xi are drawn with replacement, so the answer needs
 * counts (how many of each symbol), not only positions. Sorting is a counting sort over
 * the alphabet: O(n + symbols). */
#include "task_internal.h"

#include <string.h>

#define SEED_SORT 0x736f7274ull

static int64_t sort_length(const st_task_params *p, int64_t n) { (void)p; return 2 * n + 2; }

static int64_t sort_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_SORT));
    int64_t w = task_symbol_prompt(p, &r, n, tok, ans);
    int64_t count[ST_TASK_MAX_SYMBOLS];   /* a counting sort: one pass over the prompt */
    memset(count, 0, (size_t)p->symbols * sizeof *count);   /* the alphabet's entries only */
    for (int64_t i = 0; i < n; i++) count[tok[i] - ST_TT_SYMBOL0]++;
    for (int32_t s = 0; s < p->symbols; s++)
        for (int64_t k = 0; k < count[s]; k++) { tok[w] = ST_TT_SYMBOL0 + s; ans[w++] = 1; }
    return task_end(tok, ans, w);
}

const st_task st_task_sort = {
    .name = "sort", .cite = "Kazemnejad et al. 2023, arXiv 2305.19466", .size_unit = "symbols",
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS, .has_depth = 0,
    .max_size = NULL, .length = sort_length, .generate = sort_generate,
};
