/* flipflop.c - flip-flop language modeling (Liu et al. NeurIPS 2023, arXiv 2306.00946):
 * n instructions, each an instruction token and a bit: `W b` writes b, `I b` is noise,
 * `R b` reads: b must be the bit of the most recent write (the answer tokens). The first
 * instruction is W and the last R; those between are I with probability
 * data.task.ignore_prob, else W or R alike. With ignore_prob near 1 the last write can be
 * arbitrarily far back, and a single glitch fails the instance. */
#include "st_task.h"

#define SEED_FF 0x666c6970ull

static int64_t ff_length(const st_task_params *p, int64_t n) { (void)p; return 2 * n; }

static int64_t ff_generate(const st_task_params *p, int64_t n, uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_rng r;
    st_rng_seed(&r, st_hash64(seed, SEED_FF));
    int32_t mem = ST_TT_DIGIT0;
    for (int64_t i = 0; i < n; i++) {
        int32_t op;
        if (i == 0) op = ST_TT_WRITE;
        else if (i == n - 1) op = ST_TT_READ;
        else if (st_rng_uniform(&r) < p->ignore_prob) op = ST_TT_IGNORE;
        else op = st_rng_below(&r, 2) ? ST_TT_READ : ST_TT_WRITE;
        const int32_t bit = ST_TT_DIGIT0 + (int32_t)st_rng_below(&r, 2);
        if (op == ST_TT_WRITE) mem = bit;
        tok[2 * i] = op;
        tok[2 * i + 1] = op == ST_TT_READ ? mem : bit;
        ans[2 * i] = 0;
        ans[2 * i + 1] = op == ST_TT_READ;
    }
    return 2 * n;
}

const st_task st_task_flipflop = {
    .name = "flipflop", .cite = "Liu et al. 2023, arXiv 2306.00946", .size_unit = "instructions",
    .min_size = 2, .keys = ST_TASK_KEY_IGNORE, .has_depth = 0,
    .max_size = NULL, .length = ff_length, .generate = ff_generate,
};
