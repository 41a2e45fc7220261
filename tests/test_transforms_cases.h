/* test_transforms_cases.h - the model-level cases of tests/test_transforms.c: a position
 * method, a transform (kind, scale, sinks, window, clip, cache positions) and, through
 * tweak, the block options besides the method, each compared with the float64 PyTorch
 * transcription (scripts/torch_ref_transforms.py). Static: included by that test only. */
#ifndef ST_TEST_TRANSFORMS_CASES_H
#define ST_TEST_TRANSFORMS_CASES_H

#include "st_model.h"
#include "st_transform.h"

#include <stddef.h>

/* tweak, note: the model's options besides the method (make_model) and their label */
typedef struct xcase {
    int pos, kind; double scale; int64_t sinks, window, clip; int cache;
    void (*tweak)(st_model_config *c); const char *note;
    int64_t block;   /* blockwise causal attention (0: none); last, so the other rows need not say it */
} xcase;

/* xpos: a decay visible over 30 tokens (gamma 512 would be flat) */
static void xpos_g8(st_model_config *c) { c->xpos_gamma = 8.0f; }
/* fire: the threshold inside the sequence (rows on both sides of max(L, i)), a narrow MLP */
static void fire_small(st_model_config *c) { c->fire_threshold = 10.0f; c->fire_hidden = 8; }
/* cope: positions clamp at n_pos - 1 = 4 inside a window of 6 */
static void cope5(st_model_config *c) { c->cope_npos = 5; }
/* a LLaMA-style block: RMSNorm, SwiGLU, no biases, RMS qk-norm, grouped-query heads */
static void llama_gqa(st_model_config *c) {
    c->norm = ST_NORM_RMS; c->ffn = ST_FFN_SWIGLU; c->bias = 0; c->qk_norm = ST_QK_NORM_RMS; c->d_ff = 0;
    c->n_kv_heads = 2;
}
static void llama_mqa(st_model_config *c) { llama_gqa(c); c->n_kv_heads = 1; }
/* log-n scaling past L = 4 keys: with sinks + window a query sees at most K + W keys */
static void logn4(st_model_config *c) { c->attn_scale = ST_ATTN_SCALE_LOGN; c->attn_scale_len = 4; }
static void learned_logn(st_model_config *c) { c->attn_scale = ST_ATTN_SCALE_LEARNED; }
/* model.out_gate: per value, and per head in the LLaMA block */
static void gate_elem(st_model_config *c) { c->out_gate = ST_OUT_GATE_ELEMENTWISE; }
static void llama_gate_head(st_model_config *c) { llama_gqa(c); c->out_gate = ST_OUT_GATE_HEADWISE; }
/* the Forgetting Transformer's Pro block (model.out_norm, out_gate, kv_shift) on the LLaMA
 * block, and a key shift alone with multi-query heads */
static void pro_block(st_model_config *c) {
    llama_gqa(c); c->out_norm = ST_OUT_NORM_RMS; c->out_gate = ST_OUT_GATE_ELEMENTWISE; c->kv_shift = ST_KV_SHIFT_BOTH;
}
static void key_shift_mqa(st_model_config *c) { llama_mqa(c); c->kv_shift = ST_KV_SHIFT_KEY; }
/* ALiBi on the first 2 heads only (model.alibi_heads): the others unbiased */
static void alibi_heads2(st_model_config *c) { c->alibi_heads = 2; }
/* trained scalings (model.scaling.*): yarn with a ramp of its own, alibi_interp */
static void trained_yarn(st_model_config *c) {
    c->scaling = ST_XF_YARN; c->scaling_scale = 3; c->scaling_len = 8; c->yarn_alpha = 0.25; c->yarn_beta = 2;
}
static void trained_alibi(st_model_config *c) { c->scaling = ST_XF_ALIBI_INTERP; c->scaling_scale = 2.5; c->scaling_len = 8; }

static const xcase cases[] = {
    {ST_POS_ROPE, ST_XF_PI, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_NTK, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_DYNAMIC_NTK, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_YARN, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_YARN, 6.5, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_PI, 2, 3, 9, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_REROPE, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_REROPE, 0, 2, 9, 6, 0, NULL, NULL, 0},
    {ST_POS_ALIBI, ST_XF_ALIBI_INTERP, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {ST_POS_ALIBI, ST_XF_ALIBI_INTERP, 0, 2, 6, 0, 0, NULL, NULL, 0},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 0, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_NONE, 0, 2, 6, 0, 0, NULL, NULL, 0},
    {ST_POS_NONE, ST_XF_NONE, 0, 1, 5, 0, 0, NULL, NULL, 0},
    {ST_POS_T5, ST_XF_NONE, 0, 2, 7, 0, 0, NULL, NULL, 0},
    {ST_POS_KERPLE, ST_XF_NONE, 0, 3, 5, 0, 0, NULL, NULL, 0},
    {ST_POS_SINUSOIDAL, ST_XF_NONE, 0, 2, 6, 0, 0, NULL, NULL, 0},
    {ST_POS_ALIBI_RF, ST_XF_NONE, 0, 4, 4, 0, 0, NULL, NULL, 0},
    /* the sinks at their cache positions (StreamingLLM): rows past sinks + window - 1 */
    {ST_POS_ROPE, ST_XF_NONE, 0, 2, 6, 0, 1, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_YARN, 0, 3, 9, 0, 1, NULL, NULL, 0},
    {ST_POS_ROPE, ST_XF_PI, 2, 1, 5, 0, 1, NULL, NULL, 0},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 1, NULL, NULL, 0},
    {ST_POS_ALIBI, ST_XF_ALIBI_INTERP, 0, 3, 5, 0, 1, NULL, NULL, 0},
    {ST_POS_T5, ST_XF_NONE, 0, 2, 7, 0, 1, NULL, NULL, 0},
    {ST_POS_KERPLE, ST_XF_NONE, 0, 3, 5, 0, 1, NULL, NULL, 0},
    {ST_POS_ALIBI_RF, ST_XF_NONE, 0, 4, 4, 0, 1, NULL, NULL, 0},
    {ST_POS_SANDWICH, ST_XF_NONE, 0, 2, 6, 0, 1, NULL, NULL, 0},
    {ST_POS_NONE, ST_XF_NONE, 0, 1, 5, 0, 1, NULL, NULL, 0},
    /* sinks + window on the methods with q/k scales, general-form biases, absolute
     * embeddings, contextual positions (text positions: their st_pos_no_cache_positions;
     * cope: no sinks, st_pos_no_sinks) */
    {ST_POS_XPOS, ST_XF_NONE, 0, 2, 6, 0, 0, xpos_g8, "gamma 8", 0},
    {ST_POS_FIRE, ST_XF_NONE, 0, 2, 6, 0, 0, fire_small, "threshold 10", 0},
    {ST_POS_LEARNED, ST_XF_NONE, 0, 3, 5, 0, 0, NULL, NULL, 0},
    {ST_POS_COPE, ST_XF_NONE, 0, 0, 6, 0, 0, cope5, "n_pos 5", 0},
    {ST_POS_FOX, ST_XF_NONE, 0, 0, 6, 0, 0, NULL, NULL, 0},   /* a window alone (no sinks: st_pos_no_sinks) */
    {ST_POS_FOX, ST_XF_NONE, 0, 0, 7, 0, 0, llama_gqa, "rmsnorm swiglu no-bias qk-norm 2 kv heads", 0},
    {ST_POS_FOX, ST_XF_NONE, 0, 0, 0, 0, 0, logn4, "logn L=4", 5},   /* blocks, log-n over the keys they leave */
    /* the block options under a transform and a window */
    {ST_POS_ROPE, ST_XF_YARN, 0, 2, 7, 0, 0, llama_gqa, "rmsnorm swiglu no-bias qk-norm 2 kv heads", 0},
    {ST_POS_ROPE, ST_XF_YARN, 0, 3, 6, 0, 1, llama_mqa, "rmsnorm swiglu no-bias qk-norm 1 kv head", 0},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 0, logn4, "logn L=4", 0},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 0, alibi_heads2, "alibi_heads 2", 0},
    {ST_POS_ALIBI, ST_XF_ALIBI_INTERP, 0, 3, 5, 0, 1, alibi_heads2, "alibi_heads 2", 0},
    {ST_POS_ROPE, ST_XF_PI, 2, 0, 7, 0, 0, learned_logn, "learned_logn", 0},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 1, gate_elem, "elementwise output gate", 0},
    {ST_POS_ROPE, ST_XF_YARN, 0, 2, 7, 0, 0, llama_gate_head, "llama block, headwise output gate", 0},
    {ST_POS_FOX, ST_XF_NONE, 0, 0, 0, 0, 0, gate_elem, "elementwise output gate", 4},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 1, pro_block, "pro block (output norm and gate, key/value shift)", 0},
    {ST_POS_FOX, ST_XF_NONE, 0, 0, 0, 0, 0, pro_block, "pro block", 4},
    {ST_POS_ROPE, ST_XF_REROPE, 0, 2, 9, 6, 0, key_shift_mqa, "multi-query, key shift", 0},
    /* sinks + window alone keep a trained scaling (st_model_set_transform) */
    {ST_POS_ROPE, ST_XF_NONE, 0, 3, 7, 0, 0, trained_yarn, "trained yarn s=3", 0},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 6, 0, 1, trained_alibi, "trained alibi_interp s=2.5", 0},
    /* blockwise causal attention (xPos's inference setup; L / 2 = 4 is the paper's block)
     * on xpos, a distance bias, rope under a transform, a general-form bias, absolute
     * embeddings, contextual positions, log-n scaling (n = the keys the blocks leave) and
     * over a trained scaling */
    {ST_POS_XPOS, ST_XF_NONE, 0, 0, 0, 0, 0, xpos_g8, "gamma 8", 4},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 0, 0, 0, 0, NULL, NULL, 5},
    {ST_POS_ROPE, ST_XF_YARN, 0, 0, 0, 0, 0, NULL, NULL, 4},
    {ST_POS_FIRE, ST_XF_NONE, 0, 0, 0, 0, 0, fire_small, "threshold 10", 6},
    {ST_POS_LEARNED, ST_XF_NONE, 0, 0, 0, 0, 0, NULL, NULL, 4},
    {ST_POS_COPE, ST_XF_NONE, 0, 0, 0, 0, 0, cope5, "n_pos 5", 4},
    {ST_POS_ALIBI, ST_XF_NONE, 0, 0, 0, 0, 0, logn4, "logn L=4", 3},
    {ST_POS_ROPE, ST_XF_NONE, 0, 0, 0, 0, 0, trained_yarn, "trained yarn s=3", 4},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

#endif
