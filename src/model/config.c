/* config.c - model hyper-parameters: defaults and range checks whose messages name the
 * config file and the key ("FILE: model.n_heads: ..."); a position method's own
 * cross-key rules are its validate() (src/model/pos/). */
#include "pos/pos.h"

#include <string.h>
#include <math.h>

void st_model_config_default(st_model_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 0;          /* taken from the dataset */
    c->n_layers = 4;
    c->d_model = 256;
    c->n_heads = 8;
    c->d_ff = 0;
    c->pos = ST_POS_ALIBI;
    c->max_len = 1024;
    c->tie_embeddings = 1;
    c->gelu_exact = 0;
    c->ln_eps = 1e-5f;
    c->init_std = 0.02f;
    c->alibi_max_bias = 8.0f;
    c->rf_kind = ST_RF_EXP;
    c->rf_scope = ST_RF_FIXED;
    c->rf_param = ST_RF_SOFTPLUS;
    c->rf_rho = 64.0f;
    c->rope_base = 10000.0f;
    c->t5_buckets = 32;
    c->t5_max_distance = 128;
    c->xpos_gamma = 512.0f;
    c->cope_npos = 64;
}

#define BAD(...) return st_fail(e, ST_ERR_CONFIG, __VA_ARGS__)

int st_model_config_validate(const st_model_config *c, const char *file, st_error *e) {
    const char *f = file ? file : "<config>";
    if (c->vocab_size < 0 || c->vocab_size == 1 || c->vocab_size > (1 << 24))
        BAD("%s: model.vocab_size: must be in [2, 16777216] (or 0 = from the data), got %d", f, c->vocab_size);
    if (c->n_layers < 1 || c->n_layers > 256) BAD("%s: model.n_layers: must be in [1, 256], got %d", f, c->n_layers);
    if (c->d_model < 1 || c->d_model > 65536) BAD("%s: model.d_model: must be in [1, 65536], got %d", f, c->d_model);
    if (c->n_heads < 1 || c->n_heads > 256) BAD("%s: model.n_heads: must be in [1, 256], got %d", f, c->n_heads);
    if (c->d_model % c->n_heads != 0)
        BAD("%s: model.n_heads: must divide model.d_model (%d %% %d != 0)", f, c->d_model, c->n_heads);
    if (c->d_ff < 0 || c->d_ff > 1 << 20) BAD("%s: model.d_ff: must be in [0, 1048576] (0 = 4*d_model), got %d", f, c->d_ff);
    if (c->pos < 0 || c->pos >= ST_POS_COUNT) BAD("%s: model.pos: unknown position method %d", f, c->pos);
    if (c->max_len < 1 || c->max_len > (1 << 24)) BAD("%s: model.max_len: must be in [1, 16777216], got %d", f, c->max_len);
    if (c->tie_embeddings != 0 && c->tie_embeddings != 1) BAD("%s: model.tie_embeddings: must be true or false", f);
    const struct { const char *k; float v; } drops[] = {
        {"dropout_emb", c->dropout_emb}, {"dropout_attn", c->dropout_attn}, {"dropout_resid", c->dropout_resid}};
    for (int i = 0; i < 3; i++)
        if (!(drops[i].v >= 0.0f && drops[i].v < 1.0f)) BAD("%s: model.%s: must be in [0, 1), got %g", f, drops[i].k, drops[i].v);
    if (!(c->ln_eps > 0.0f && c->ln_eps < 1.0f)) BAD("%s: model.ln_eps: must be in (0, 1), got %g", f, c->ln_eps);
    if (!(c->init_std > 0.0f && c->init_std < 10.0f)) BAD("%s: model.init_std: must be in (0, 10), got %g", f, c->init_std);
    if (!(c->alibi_max_bias > 0.0f && c->alibi_max_bias <= 64.0f))
        BAD("%s: model.alibi_max_bias: must be in (0, 64], got %g", f, c->alibi_max_bias);
    if (c->rf_kind < 0 || c->rf_kind >= ST_RF_COUNT) BAD("%s: model.rf.kind: unknown decay %d", f, c->rf_kind);
    if (c->rf_scope < ST_RF_FIXED || c->rf_scope > ST_RF_PER_HEAD) BAD("%s: model.rf.scope: unknown scope %d", f, c->rf_scope);
    if (c->rf_param != ST_RF_SOFTPLUS && c->rf_param != ST_RF_LOG) BAD("%s: model.rf.param: unknown parameterisation %d", f, c->rf_param);
    if (!(c->rf_rho > 0.0f && c->rf_rho < 1e7f)) BAD("%s: model.rf.rho: must be in (0, 1e7), got %g", f, c->rf_rho);
    if (!(c->rope_base > 1.0f)) BAD("%s: model.rope_base: must be > 1, got %g", f, c->rope_base);
    if (c->t5_buckets < 2 || c->t5_buckets > 4096) BAD("%s: model.t5_buckets: must be in [2, 4096], got %d", f, c->t5_buckets);
    const st_pos_method *pm = st_pos_method_of(c->pos);
    return pm->validate ? pm->validate(c, f, e) : ST_OK;
}
