/* selective_copy.c - selective copy (Golovneva et al. 2024, CoPE, arXiv 2405.18719; the
 * selective copying task of Mamba, arXiv 2312.00752): n prompt positions, each a blank
 * `_` with probability data.task.blank_prob, else a uniform symbol (at least one symbol
 * per instance), `=`, then the symbols in order and `.`. Where the k-th answer token
 * sits in the prompt depends on how many blanks precede it: a method has to count
 * symbols, not positions (what CoPE was built for). */
#include "task_internal.h"

#define SEED_SEL 0x73656c63ull

static int64_t sel_length(const st_task_params *p, int64_t n) { (void)p; return 2 * n + 2; }

static int64_t sel_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_SEL));
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        const int blank = st_rng_uniform(&r) < p->blank_prob;
        const int32_t sym = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)p->symbols);
        tok[i] = blank ? ST_TT_BLANK : sym;
        kept += !blank;
        ans[i] = 0;
    }
    if (!kept) {   /* two draws, two statements: their order must not be the compiler's choice */
        const int64_t at = (int64_t)st_rng_below(&r, (uint64_t)n);
        tok[at] = ST_TT_SYMBOL0 + (int32_t)st_rng_below(&r, (uint64_t)p->symbols);
    }
    tok[n] = ST_TT_SEP;
    ans[n] = 0;
    int64_t w = n + 1;
    for (int64_t i = 0; i < n; i++)
        if (tok[i] != ST_TT_BLANK) { tok[w] = tok[i]; ans[w++] = 1; }
    return task_end(tok, ans, w);
}

const st_task st_task_selective_copy = {
    .name = "selective_copy", .cite = "Golovneva et al. 2024 (CoPE), arXiv 2405.18719", .size_unit = "positions",
    .min_size = 1, .keys = ST_TASK_KEY_SYMBOLS | ST_TASK_KEY_BLANK, .has_depth = 0,
    .max_size = NULL, .length = sel_length, .generate = sel_generate,
};
