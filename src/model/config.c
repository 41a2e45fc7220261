/* config.c - model hyper-parameters: the rules that relate model keys, with messages
 * naming the file and the key ("FILE: model.n_heads: ..."). Defaults and ranges are rows
 * of the key table (src/train/config_schema.c). Each key's own range is in the config schema
 * (src/train/config_schema.c), checked before this runs; a position method's own
 * cross-key rules are its validate() (src/model/pos/). */
#include "pos/pos.h"

#include <string.h>
#include <math.h>

#define BAD(...) return st_fail(e, ST_ERR_CONFIG, __VA_ARGS__)

/* model.scaling.*: a trainable transform of the model's method; keys the transform does
 * not read stay at their defaults (a set key that does nothing is a mistake to report). */
static int scaling_check(const st_model_config *c, const char *f, st_error *e) {
    const int k = c->scaling;
    if (k < 0 || k >= ST_XF_COUNT) BAD("%s: model.scaling.transform: unknown transform %d", f, k);
    const char *name = st_transform_name(k);
    if (!(c->scaling_scale >= 1.0 && isfinite(c->scaling_scale)))
        BAD("%s: model.scaling.scale: %g: must be >= 1 (the factor the context is extended by)", f, c->scaling_scale);
    if (k == ST_XF_NONE && c->scaling_scale != 1.0)
        BAD("%s: model.scaling.scale: %g does nothing without model.scaling.transform (pi, ntk, yarn or alibi_interp)",
            f, c->scaling_scale);
    if (k == ST_XF_NONE && c->scaling_len != 0)
        BAD("%s: model.scaling.train_len: %d does nothing without model.scaling.transform (pi, ntk, yarn or "
            "alibi_interp)", f, c->scaling_len);
    if (k != ST_XF_NONE && st_transform_untrainable(k))
        BAD("%s: model.scaling.transform: %s is inference-only (%s); evaluate with eval --transform %s instead", f,
            name, st_transform_untrainable(k), name);
    const char *need = st_transform_method(k);
    if (need && st_pos_from_name(need) != c->pos)
        BAD("%s: model.scaling.transform: %s applies to model.pos \"%s\" only; this model's is \"%s\"", f, name, need,
            st_pos_name(c->pos));
    const int ramp = st_transform_ramp(k);
    if (!ramp && c->yarn_alpha != ST_YARN_ALPHA)
        BAD("%s: model.scaling.yarn_alpha: applies to model.scaling.transform yarn only (this one is %s)", f, name);
    if (!ramp && c->yarn_beta != ST_YARN_BETA)
        BAD("%s: model.scaling.yarn_beta: applies to model.scaling.transform yarn only (this one is %s)", f, name);
    if (ramp && c->scaling_len < 1)
        BAD("%s: model.scaling.train_len: yarn needs the length the model was first trained at (its ramp counts "
            "rotations over it); got %d", f, c->scaling_len);
    if (ramp && !(c->yarn_alpha > 0.0 && c->yarn_beta > c->yarn_alpha && isfinite(c->yarn_beta)))
        BAD("%s: model.scaling.yarn_beta: the ramp needs 0 < model.scaling.yarn_alpha < model.scaling.yarn_beta (got "
            "yarn_alpha %g, yarn_beta %g)",
            f, c->yarn_alpha, c->yarn_beta);
    return ST_OK;
}

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
        !(c->dropout_resid >= 0.0f && c->dropout_resid < 1.0f) || c->t5_buckets < 2 || c->norm < 0 ||
        c->norm >= ST_NORM_COUNT || c->ffn < 0 || c->ffn >= ST_FFN_COUNT || c->qk_norm < 0 ||
        c->qk_norm >= ST_QK_NORM_COUNT || c->out_gate < 0 || c->out_gate >= ST_OUT_GATE_COUNT || c->out_norm < 0 ||
        c->out_norm >= ST_OUT_NORM_COUNT || c->kv_shift < 0 || c->kv_shift >= ST_KV_SHIFT_COUNT ||
        (c->bias != 0 && c->bias != 1))
        BAD("%s: model: a size, name or scale is outside what any model allows (see configs/README.md for the ranges)", f);
    /* cross-key rules */
    if (c->vocab_size == 1) BAD("%s: model.vocab_size: 0 (the dataset's) or >= 2, got 1", f);
    if (c->d_model % c->n_heads != 0)
        BAD("%s: model.n_heads: must divide model.d_model (%d %% %d != 0)", f, c->d_model, c->n_heads);
    /* the schema's ranges, for library callers: per-head and per-unit arrays have these sizes */
    if (c->n_heads > ST_MAX_HEADS) BAD("%s: model.n_heads: %d: at most %d", f, c->n_heads, ST_MAX_HEADS);
    if (c->pos == ST_POS_FIRE && (c->fire_hidden < 1 || c->fire_hidden > ST_FIRE_MAX_HIDDEN))
        BAD("%s: model.fire.hidden: %d: must be in [1, %d]", f, c->fire_hidden, ST_FIRE_MAX_HIDDEN);
    if (c->n_kv_heads == 0 || c->n_kv_heads < -1)
        BAD("%s: model.n_kv_heads: %d: must be >= 1 (or left out: model.n_heads key/value heads)", f, c->n_kv_heads);
    if (c->n_kv_heads > c->n_heads || (c->n_kv_heads > 0 && c->n_heads % c->n_kv_heads != 0))
        BAD("%s: model.n_kv_heads: %d must divide model.n_heads %d (grouped-query attention: each key/value head "
            "serves n_heads / n_kv_heads query heads)", f, c->n_kv_heads, c->n_heads);
    if (c->attn_scale < ST_ATTN_SCALE_NONE || c->attn_scale >= ST_ATTN_SCALE_COUNT)
        BAD("%s: model.attn_scale: unknown scaling %d", f, c->attn_scale);
    if (c->attn_scale == ST_ATTN_SCALE_LOGN && c->attn_scale_len < 2)
        BAD("%s: model.attn_scale_len: logn needs the training length (>= 2), got %d", f, c->attn_scale_len);
    int rc = scaling_check(c, f, e);
    if (rc) return rc;
    /* the method's own keys first: the table check below sets a provider up from them
     * (alibi's slopes read model.alibi_heads) */
    const st_pos_method *pm = st_pos_method_of(c->pos);
    rc = pm->validate ? pm->validate(c, f, e) : ST_OK;
    return rc ? rc : st_pos_method_check(c->pos, c, f, e);
}
