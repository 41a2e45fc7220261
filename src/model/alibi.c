/* alibi.c - the one ALiBi slope formula (Press et al. 2021, official get_slopes).
 *
 * n a power of two: geometric sequence m_h = 2^(-max_bias * h / n), h = 1..n
 *   (max_bias = 8: n=8 gives 1/2, 1/4, ..., 1/256).
 * otherwise: c = 2^floor(log2 n); the c slopes of the power-of-two rule for c, followed by
 *   elements 0, 2, 4, ... of the 2c set, first n - c of them. Those are exactly the slopes
 *   the 2c set interleaves between the c-set values (n=12: 2^-1..2^-8, then 2^-0.5,
 *   2^-1.5, 2^-2.5, 2^-3.5). The closed form 2^(-8h/n) for every n is NOT this rule. */
#include "st_model.h"

#include <math.h>

static void pow2_slopes(int n, float max_bias, float *out) {
    /* start = ratio = 2^(-max_bias/n), computed in double then rounded once */
    for (int h = 1; h <= n; h++) out[h - 1] = (float)exp2(-(double)max_bias * h / n);
}

void st_alibi_slopes(int n_heads, float max_bias, float *out) {
    ST_ASSERT(n_heads >= 1);
    int c = 1;
    while (c * 2 <= n_heads) c *= 2;
    pow2_slopes(c, max_bias, out);
    if (c == n_heads) return;
    /* every other slope of the 2c set: 2^(-max_bias*(2k+1)/(2c)), k = 0.. */
    for (int k = 0; k < n_heads - c; k++)
        out[c + k] = (float)exp2(-(double)max_bias * (2 * k + 1) / (2.0 * c));
}
