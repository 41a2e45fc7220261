/* none.c - no position information (NoPE): a causal decoder still infers positions from
 * the mask (Haviv et al. 2022). Nothing to declare, add or bias; the cache slides. */
#include "pos.h"

const st_pos_method st_pos_none = {
    .name = "none",
    .bias_form = ST_POS_BIAS_NONE,
    .slides = 1,
};
