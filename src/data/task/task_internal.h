/* task_internal.h - what the generators of this directory share: the `x1 .. xn =` prompt
 * of uniform symbols (copy, reverse, sort), the closing `.` of an answer and the needle
 * tasks' filler (passkey, multikey, vartrack). */
#ifndef ST_TASK_INTERNAL_H
#define ST_TASK_INTERNAL_H

#include "st_task.h"

/* tok[0, n) uniform symbols from r, tok[n] = `=`, all prompt; returns n + 1 */
static inline int64_t task_symbol_prompt(const st_task_params *p, st_rng *r, int64_t n, int32_t *tok, uint8_t *ans) {
    for (int64_t i = 0; i < n; i++) {
        tok[i] = ST_TT_SYMBOL0 + (int32_t)st_rng_below(r, (uint64_t)p->symbols);
        ans[i] = 0;
    }
    tok[n] = ST_TT_SEP;
    ans[n] = 0;
    return n + 1;
}

/* the answer's closing `.` at w (an answer token: the model must know where to stop);
 * returns the instance's length */
static inline int64_t task_end(int32_t *tok, uint8_t *ans, int64_t w) {
    tok[w] = ST_TT_END;
    ans[w] = 1;
    return w + 1;
}

/* tok[0, F): F filler tokens, one sample of the chain p->filler over the symbols, as
 * symbol ids. The sample's seed is r's next draw only when F > 0: an instance without
 * filler leaves r where it was (the generators' later draws depend on it). */
static inline void task_filler(const st_task_params *p, st_rng *r, int32_t *tok, int64_t F) {
    if (F <= 0) return;
    st_markov_sample(p->filler, st_rng_u64(r), tok, F);
    for (int64_t i = 0; i < F; i++) tok[i] += ST_TT_SYMBOL0;
}

#endif
