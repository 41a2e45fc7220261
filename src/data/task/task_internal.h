/* task_internal.h - what the generators of this directory share: the `x1 .. xn =` prompt
 * of uniform symbols (copy, reverse, sort) and the closing `.` of an answer. */
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

#endif
