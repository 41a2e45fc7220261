/* config.c - model hyper-parameters: the rules that relate model keys, with messages
 * naming the file and the key ("FILE: model.n_heads: ..."). Defaults and ranges are rows
 * of the key table (src/train/config_schema.c). Each key's own range is in the config schema
 * (src/train/config_schema.c), checked before this runs; a position method's own
 * cross-key rules are its validate() (src/model/pos/). */
#include "pos/pos.h"

#include <string.h>
#include <math.h>

#define BAD(...) return st_fail(e, ST_ERR_CONFIG, __VA_ARGS__)

int st_model_config_validate(const st_model_config *c, const char *file, st_error *e) {
    const char *f = file ? file : "<config>";
    /* Not ranges (those are the schema's) but what the code below and the model need to
     * be well defined, for callers that build a config without the schema (bench, tests):
     * positive sizes, known enum values, finite positive scales. */
    if (c->vocab_size < 0 || c->n_layers < 1 || c->d_model < 1 || c->n_heads < 1 || c->d_ff < 0 || c->max_len < 1 ||
        c->pos < 0 || c->pos >= ST_POS_COUNT || c->rf_kind < 0 || c->rf_kind >= ST_RF_COUNT ||
        c->rf_scope < ST_RF_FIXED || c->rf_scope > ST_RF_PER_HEAD || (c->rf_param != ST_RF_SOFTPLUS && c->rf_param != ST_RF_LOG) ||
        !(c->ln_eps > 0.0f) || !(c->init_std > 0.0f) || !(c->rf_rho > 0.0f) || !(c->alibi_max_bias > 0.0f) ||
        !(c->dropout_emb >= 0.0f && c->dropout_emb < 1.0f) || !(c->dropout_attn >= 0.0f && c->dropout_attn < 1.0f) ||
        !(c->dropout_resid >= 0.0f && c->dropout_resid < 1.0f) || c->t5_buckets < 2)
        BAD("%s: model: a size, name or scale is outside what any model allows (see configs/README.md for the ranges)", f);
    /* cross-key rules */
    if (c->vocab_size == 1) BAD("%s: model.vocab_size: 0 (the dataset's) or >= 2, got 1", f);
    if (c->d_model % c->n_heads != 0)
        BAD("%s: model.n_heads: must divide model.d_model (%d %% %d != 0)", f, c->d_model, c->n_heads);
    if (c->attn_scale < ST_ATTN_SCALE_NONE || c->attn_scale >= ST_ATTN_SCALE_COUNT)
        BAD("%s: model.attn_scale: unknown scaling %d", f, c->attn_scale);
    if (c->attn_scale == ST_ATTN_SCALE_LOGN && c->attn_scale_len < 2)
        BAD("%s: model.attn_scale_len: logn needs the training length (>= 2), got %d", f, c->attn_scale_len);
    int rc = st_pos_method_check(c->pos, c, f, e);
    if (rc) return rc;
    const st_pos_method *pm = st_pos_method_of(c->pos);
    return pm->validate ? pm->validate(c, f, e) : ST_OK;
}
