/* test_model_util.h - what tests/test_model.c and tests/test_decode.c share: a tiny model
 * config, every position-method variant, a model with non-trivial values in its
 * zero/one-initialised parameters, and random token ids. Everything is static (each
 * test is its own executable). */
#ifndef ST_TEST_MODEL_UTIL_H
#define ST_TEST_MODEL_UTIL_H

#include "harness.h"

#include <string.h>

static inline void base_cfg(st_model_config *c, int pos) {
    st_model_config_default(c);
    c->vocab_size = 11;
    c->n_layers = 2;
    c->d_model = 8;
    c->n_heads = 2;
    c->d_ff = 12;
    c->pos = pos;
    c->max_len = 16;
    c->rf_rho = 3.0f;
    c->t5_buckets = 8;
    c->t5_max_distance = 16;
    /* xpos: a short scale length, so short test sequences see a strong decay and the KV
     * cache re-centres its keys every 2 * gamma = 8 tokens */
    c->xpos_gamma = 4.0f;
    /* cope: fewer rows than the test sequences, so positions clamp too */
    c->cope_npos = 6;
}

static inline void rand_ids(int32_t *ids, int64_t n, int V, uint64_t seed) {
    st_rng r; st_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)st_rng_below(&r, (uint64_t)V);
}

/* tweak: sets the method's other keys (NULL: defaults) */
struct variant { int pos, rf_kind, rf_scope; const char *name; int rf_param; void (*tweak)(st_model_config *c); };

static inline void kerple_power(st_model_config *c) { c->kerple_kind = ST_KERPLE_POWER; }
/* FIRE's threshold inside the test sequences: rows on both sides of max(L, i) */
static inline void fire_small(st_model_config *c) { c->fire_threshold = 2.5f; c->fire_hidden = 8; }
/* log-n attention scaling: past a training length of 3, and learned per head */
static inline void logn3(st_model_config *c) { c->attn_scale = ST_ATTN_SCALE_LOGN; c->attn_scale_len = 3; }
static inline void learned_logn(st_model_config *c) { c->attn_scale = ST_ATTN_SCALE_LEARNED; }
/* today's decoder block (model.norm, ffn, bias, qk_norm): LLaMA-style, and a GeGLU mix */
static inline void llama_block(st_model_config *c) {
    c->norm = ST_NORM_RMS; c->ffn = ST_FFN_SWIGLU; c->bias = 0; c->qk_norm = ST_QK_NORM_RMS;
    /* q/k norm divides by |q| per head: with init_std 0.02 and no bias, |q| ~ 0.05 and the
     * loss curves like 1/|q|^2, too sharply for finite differences; O(1) weights keep
     * every check meaningful (what is checked is the gradient, not the init) */
    c->init_std = 0.3f;
}
/* grouped-query attention: one key/value head for the two query heads (multi-query) */
static inline void llama_mqa(st_model_config *c) { llama_block(c); c->n_kv_heads = 1; }
/* model.out_gate: per value with the GPT-2 block, per head with the LLaMA one (GQA) */
static inline void gate_elementwise(st_model_config *c) { c->out_gate = ST_OUT_GATE_ELEMENTWISE; }
static inline void llama_gqa_gate_headwise(st_model_config *c) {
    llama_block(c); c->n_kv_heads = 2; c->out_gate = ST_OUT_GATE_HEADWISE;
}
/* the Forgetting Transformer's Pro block (model.out_norm, out_gate, kv_shift, with the
 * LLaMA block's q/k norm), and the shifts alone: keys with multi-query, values with the
 * GPT-2 block and the output norm */
static inline void pro_block(st_model_config *c) {
    llama_block(c); c->out_norm = ST_OUT_NORM_RMS; c->out_gate = ST_OUT_GATE_ELEMENTWISE; c->kv_shift = ST_KV_SHIFT_BOTH;
}
static inline void llama_mqa_key_shift(st_model_config *c) { llama_block(c); c->n_kv_heads = 1; c->kv_shift = ST_KV_SHIFT_KEY; }
static inline void value_shift_out_norm(st_model_config *c) { c->kv_shift = ST_KV_SHIFT_VALUE; c->out_norm = ST_OUT_NORM_RMS; }
/* the q/k norm with each head's own weights (the official Pro block's), and over the whole
 * projection (OLMo 2), with grouped-query attention (k's weights (n_kv_heads D)) */
static inline void pro_block_heads_gqa(st_model_config *c) { pro_block(c); c->qk_norm = ST_QK_NORM_RMS_HEADS; c->n_kv_heads = 1; }
static inline void llama_full_qk_gqa(st_model_config *c) { llama_block(c); c->qk_norm = ST_QK_NORM_RMS_FULL; c->n_kv_heads = 1; }
/* Abacus embeddings: ids 1..10 are the digits (the vocabulary has 11), so runs of every
 * length occur and 0 ends them */
static inline void abacus(st_model_config *c) { c->abacus_rows = 256; c->abacus_digit0 = 1; }
static inline void abacus_llama_gqa(st_model_config *c) { fire_small(c); abacus(c); llama_block(c); c->n_kv_heads = 1; }
static inline void geglu_block(st_model_config *c) { c->ffn = ST_FFN_GEGLU; c->gelu_exact = 1; c->norm = ST_NORM_RMS; }
static const struct variant variants[] = {
    {ST_POS_NONE, 0, 0, "none", 0, NULL},
    {ST_POS_ALIBI, 0, 0, "alibi", 0, NULL},
    {ST_POS_ALIBI_RF, ST_RF_EXP, ST_RF_FIXED, "alibi_rf exp fixed", 0, NULL},
    {ST_POS_ALIBI_RF, ST_RF_EXP, ST_RF_PER_LAYER, "alibi_rf exp layer", 0, NULL},
    {ST_POS_ALIBI_RF, ST_RF_GAUSSIAN, ST_RF_PER_HEAD, "alibi_rf gaussian head", 0, NULL},
    {ST_POS_ALIBI_RF, ST_RF_RECIPROCAL, ST_RF_PER_HEAD, "alibi_rf reciprocal head", 0, NULL},
    {ST_POS_SINUSOIDAL, 0, 0, "sinusoidal", 0, NULL},
    {ST_POS_LEARNED, 0, 0, "learned", 0, NULL},
    {ST_POS_ROPE, 0, 0, "rope", 0, NULL},
    {ST_POS_T5, 0, 0, "t5", 0, NULL},
    {ST_POS_KERPLE, 0, 0, "kerple", 0, NULL},
    /* appended, so indices above stay put */
    {ST_POS_ALIBI_RF, ST_RF_EXP, ST_RF_PER_HEAD, "alibi_rf exp head log-rho", ST_RF_LOG, NULL},
    {ST_POS_SANDWICH, 0, 0, "sandwich", 0, NULL},
    {ST_POS_KERPLE, 0, 0, "kerple power", 0, kerple_power},
    {ST_POS_FIRE, 0, 0, "fire", 0, fire_small},
    {ST_POS_ALIBI, 0, 0, "alibi + logn", 0, logn3},
    {ST_POS_ROPE, 0, 0, "rope + learned_logn", 0, learned_logn},
    {ST_POS_XPOS, 0, 0, "xpos", 0, NULL},
    {ST_POS_COPE, 0, 0, "cope", 0, NULL},
    {ST_POS_ALIBI, 0, 0, "alibi, llama block", 0, llama_block},
    {ST_POS_ROPE, 0, 0, "rope, llama block", 0, llama_block},
    {ST_POS_FIRE, 0, 0, "fire, geglu + rmsnorm", 0, geglu_block},
    {ST_POS_ROPE, 0, 0, "rope, llama block, multi-query", 0, llama_mqa},
    {ST_POS_XPOS, 0, 0, "xpos, llama block, multi-query", 0, llama_mqa},
    {ST_POS_T5, 0, 0, "t5, llama block, multi-query", 0, llama_mqa},
    {ST_POS_FOX, 0, 0, "fox", 0, NULL},
    {ST_POS_FOX, 0, 0, "fox, llama block, multi-query", 0, llama_mqa},
    {ST_POS_ALIBI, 0, 0, "alibi, elementwise output gate", 0, gate_elementwise},
    {ST_POS_ROPE, 0, 0, "rope, llama block, 2 kv heads, headwise output gate", 0, llama_gqa_gate_headwise},
    {ST_POS_FOX, 0, 0, "fox, elementwise output gate", 0, gate_elementwise},
    {ST_POS_FOX, 0, 0, "fox, pro block (output norm and gate, key/value shift)", 0, pro_block},
    {ST_POS_ROPE, 0, 0, "rope, llama block, multi-query, key shift", 0, llama_mqa_key_shift},
    {ST_POS_ALIBI, 0, 0, "alibi, value shift, output norm", 0, value_shift_out_norm},
    {ST_POS_FOX, 0, 0, "fox, pro block, per-head q/k norm weights, multi-query", 0, pro_block_heads_gqa},
    {ST_POS_ROPE, 0, 0, "rope, llama block, whole-row q/k norm, multi-query", 0, llama_full_qk_gqa},
    {ST_POS_NONE, 0, 0, "none + abacus", 0, abacus},
    {ST_POS_FIRE, 0, 0, "fire + abacus, llama block, multi-query", 0, abacus_llama_gqa},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* st_model_init(c) plus N(0, 0.3^2) noise on every zero/one-initialised parameter (biases,
 * LayerNorm, rf_theta, T5 table, KERPLE), so none of them is a no-op in a test. */
static inline void make_model_cfg(st_model *m, const st_model_config *c, uint64_t seed) {
    st_error e = {0};
    int rc = st_model_init(m, c, seed, &e);
    ST_ASSERT(rc == ST_OK);
    st_rng r; st_rng_seed(&r, seed + 1);
    for (int i = 0; i < m->params.count; i++) {
        const st_param_info *in = &m->params.info[i];
        if (in->init == ST_INIT_ZERO || in->init == ST_INIT_ONE || !strstr(in->name, "weight")) {
            float *d = m->params.data + in->offset;
            for (size_t k = 0; k < in->numel; k++) d[k] += 0.3f * st_rng_normal(&r);
        }
    }
}

/* The base config with variant v's position method. */
static inline void variant_cfg(st_model_config *c, const struct variant *v) {
    base_cfg(c, v->pos);
    c->rf_kind = v->rf_kind;
    c->rf_scope = v->rf_scope;
    c->rf_param = v->rf_param;
    if (v->tweak) v->tweak(c);
}

static inline void make_model(st_model *m, const struct variant *v, uint64_t seed) {
    st_model_config c;
    variant_cfg(&c, v);
    make_model_cfg(m, &c, seed);
}

#endif
