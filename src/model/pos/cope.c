/* cope.c - Contextual Position Encoding (Golovneva, Wang, Weston, Sukhbaatar 2024,
 * "Contextual Position Encoding: Learning to Count What's Important", arXiv 2405.18719):
 * positions counted by gates that depend on q and k,
 *   g_ij = sigmoid(q_i.k_j / sqrt(D))  (causally masked),  P_ij = sum_{t=j..i} g_it
 *   logit_ij = (q_i.k_j + q_i.e[P_ij]) / sqrt(D),  e[p] interpolated linearly between the
 *   integer rows of "attn.cope_pos" (model.cope.n_pos, D), P clamped at n_pos - 1
 * e is per layer, shared by the heads, zero at init (as the paper's code). The term is
 * computed inside the attention kernels (src/ops/attention_cope.c) from this provider.
 * Positions are relative (counted from the query back over the keys it sees), so the KV
 * cache slides: past the window a query counts over its last `window` keys, the same as
 * a sliding-window forward. Math and the choices where sources differ:
 * docs/position-methods.md. */
#include "pos.h"

static int cope_validate(const st_model_config *c, const char *f, st_error *e) {
    if (c->cope_npos < 1 || c->cope_npos > (1 << 20))
        return st_fail(e, ST_ERR_CONFIG, "%s: model.cope.n_pos: must be in [1, 1048576], got %d", f, c->cope_npos);
    return ST_OK;
}

static int cope_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer < 0) return 0;
    out[0] = (st_pos_decl){"attn.cope_pos", 2, c->cope_npos, c->d_model / c->n_heads, 1, ST_INIT_ZERO, 0, 1};
    return 1;
}

static void cope_bias_init(st_pos_bias *pb) {
    pb->cope.e = pb->p[0];
    pb->cope.ge = pb->g[0];
    pb->cope.n_pos = pb->cfg->cope_npos;
    pb->iface.cope = &pb->cope;
    pb->iface.state = pb;
}

const st_pos_method st_pos_cope = {
    .name = "cope",
    .keys = "model.cope",
    .bias_form = ST_POS_BIAS_GENERAL,
    .slides = 1,
    .validate = cope_validate,
    .params = cope_params,
    .bias_init = cope_bias_init,
    .score_bytes = 4,   /* the gates (B,H,T,T) kept for backward */
    .no_sinks = "its contextual positions count gates over one contiguous span of keys, which sinks + window "
                "would cut (a window alone works)",
    .no_cache_positions = "it has no sinks (its gates count over one contiguous span of keys)",
    .no_doc_mask = "its contextual positions count gates over the whole causal row of a training window",
};
