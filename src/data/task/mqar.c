/* mqar.c - multi-query associative recall (Arora et al. 2023, Zoology, arXiv
 * 2312.04927): n key-value pairs `k1 v1 .. kn vn`, `|`, then every key once in a random
 * order (data.task.queries "each"; "random": n keys drawn with replacement), each
 * followed by its value: `q` -> `v(q)`. As in Zoology, keys and values come
 * from disjoint halves of the alphabet: keys are distinct symbols of the first half (so
 * n <= symbols / 2), values uniform symbols of the second. (A value that could equal a
 * key would make a query match twice, once followed by the wrong token.) The distance
 * from a pair to its query ranges over the whole instance, and every query is a lookup
 * by content, not by position. */
#include "st_task.h"

#define SEED_MQAR 0x6d716172ull

static int64_t mqar_max(const st_task_params *p) { return p->symbols / 2; }

static int64_t mqar_length(const st_task_params *p, int64_t n) { (void)p; return 4 * n + 1; }

static int64_t mqar_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_MQAR));
    /* distinct keys by rejection against the keys so far (no scratch memory; O(n^2)
     * compares, a few ms at the 32x sizes evaluated) */
    const int half = p->symbols / 2;
    for (int64_t i = 0; i < n; i++) {
        int32_t key;
        int fresh;
        do {   /* n <= half; expected draws half / (half - i) */
            key = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)half);
            fresh = 1;
            for (int64_t j = 0; j < i && fresh; j++) fresh = tok[2 * j] != key;
        } while (!fresh);
        tok[2 * i] = key;
        tok[2 * i + 1] = ST_TT_SYMBOL0 + half + (int32_t)st_rng_below(&r, (uint64_t)(p->symbols - half));
    }
    tok[2 * n] = ST_TT_BAR;
    /* queries, "each": a uniform permutation of the pair indices (Fisher-Yates over the
     * query slots); "random": n independent uniform draws, so a key may come back and
     * another never. With "each" the last query's value is the one not yet asked, and a
     * model that only eliminates the values already answered reaches a loss of
     * sum_n log n! / sum_n n without binding any key to its value were the values
     * distinct (they repeat: 0.546 nats for sizes 1..4 at 64 symbols, simulated in
     * docs/results-tasks.md); with "random" elimination gains almost nothing. */
    const int64_t q0 = 2 * n + 1;
    if (p->random_queries) {
        for (int64_t i = 0; i < n; i++) tok[q0 + 2 * i] = (int32_t)st_rng_below(&r, (uint64_t)n);
    } else {
        for (int64_t i = 0; i < n; i++) tok[q0 + 2 * i] = (int32_t)i;
        for (int64_t i = n - 1; i > 0; i--) {
            const int64_t j = (int64_t)st_rng_below(&r, (uint64_t)i + 1);
            const int32_t t = tok[q0 + 2 * i];
            tok[q0 + 2 * i] = tok[q0 + 2 * j];
            tok[q0 + 2 * j] = t;
        }
    }
    for (int64_t i = 0; i < q0; i++) ans[i] = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t pair = tok[q0 + 2 * i];
        tok[q0 + 2 * i] = tok[2 * pair];
        tok[q0 + 2 * i + 1] = tok[2 * pair + 1];
        ans[q0 + 2 * i] = 0;
        ans[q0 + 2 * i + 1] = 1;
    }
    return 4 * n + 1;
}

const st_task st_task_mqar = {
    .name = "mqar", .cite = "Arora et al. 2023 (Zoology), arXiv 2312.04927", .size_unit = "pairs",
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS | ST_TASK_KEY_QUERIES, .has_depth = 0,
    .max_size = mqar_max, .length = mqar_length, .generate = mqar_generate,
};
