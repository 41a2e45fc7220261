/* block.c - the decoder block's variation points (model.norm, model.ffn, model.bias,
 * model.qk_norm, model.out_gate, model.out_norm, model.kv_shift): one table per choice, read
 * by the parameter table (model.c) and by the forward pieces every path shares
 * (st_block_qkv2, st_block_out, the final norm).
 *
 *   norm      layernorm: (x - mean) / sqrt(var + eps) w + b   (GPT-2; the default)
 *             rmsnorm:   x / sqrt(mean(x^2) + eps) w           (LLaMA; no bias tensor)
 *   ffn       gelu:   W2 gelu(W1 h)                              (GPT-2; d_ff = 4 d)
 *             swiglu: W2 (silu(W1g h) * W1u h)                   (Shazeer 2020; LLaMA)
 *             geglu:  W2 (gelu(W1g h) * W1u h)                   (the model's gelu form)
 *             the gated units' W1 is (2 d_ff, d): gate rows first, then value rows;
 *             d_ff 0 = 4 d for gelu, 8 d / 3 rounded up to a multiple of 64 for the gated
 *             ones (about the same parameters as 4 d ungated)
 *   bias      false: no bias tensor in the q/k/v, output and FFN projections (LLaMA)
 *   n_kv_heads  grouped-query attention (Ainslie et al. 2023): H / n_kv_heads query heads
 *             share each key/value head; qkv rows are (H + 2 n_kv_heads) D; the training
 *             and full forwards repeat k, v to H heads (st_repeat_heads, whose backward sums
 *             a group's gradients), the KV cache keeps n_kv_heads and maps head h to h / g
 *   qk_norm   rmsnorm: q and k RMS-normalised per head over the head size, weights (D)
 *             shared by the heads (Qwen 3); rmsnorm_heads: the same with each head's own
 *             weights, (H D) and (n_kv_heads D) (the Forgetting Transformer's Pro block);
 *             rmsnorm_full: over each token's whole projection of H D values, weights as
 *             rmsnorm_heads (OLMo 2). Before the position method; the softmax scale stays
 *             1/sqrt(D)
 *   out_gate  the attention output a (B,T,C, heads merged) times a sigmoid gate computed
 *             from the block's normalised input h = LN1(x), before the output projection
 *             (Qiu et al. 2025, "Gated Attention for Large Language Models", arXiv
 *             2505.06708; the Forgetting Transformer's Pro block has the elementwise one):
 *               elementwise: a * sigmoid(W_g h),   W_g (C, C)
 *               headwise:    a_h * sigmoid(w_h . h), W_g (H, C): one scalar per head
 *             no bias, weights decayed; the gate gives each head a way to output nothing
 *             other than attending to a sink token. h is recomputed from x here (one norm
 *             more) so every forward path (training, tails, the KV cache) gets it alike.
 *   out_norm  rmsnorm: the attention output RMS-normalised per head over its D values,
 *             weights (C) (a GroupNorm without the mean, one group per head), before the
 *             output gate: the Forgetting Transformer's Pro block (Lin et al. 2025)
 *   kv_shift  a data-dependent token shift of the keys, values or both, per key/value head
 *             (the Pro block's ShiftLinear): k_t <- s k_{t-1} + (1 - s) k_t with
 *             s = sigmoid(w_h . h_t), W (n_kv_heads, C), no bias, decayed; applied to the
 *             projected rows, before the q/k norm and the position method. A sequence's,
 *             a packed instance's or a window's first token has no predecessor (k_{-1} = 0);
 *             the KV cache carries the last token's rows to the next chunk. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const norm_names[ST_NORM_COUNT] = {"layernorm", "rmsnorm"};
static const char *const ffn_names[ST_FFN_COUNT] = {"gelu", "swiglu", "geglu"};
static const char *const qk_norm_names[ST_QK_NORM_COUNT] = {"none", "rmsnorm", "rmsnorm_heads", "rmsnorm_full"};
static const char *const out_gate_names[ST_OUT_GATE_COUNT] = {"none", "elementwise", "headwise"};
static const char *const out_norm_names[ST_OUT_NORM_COUNT] = {"none", "rmsnorm"};
static const char *const kv_shift_names[ST_KV_SHIFT_COUNT] = {"none", "key", "value", "both"};

static int find(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++) if (strcmp(names[i], name) == 0) return i;
    return -1;
}

const char *st_norm_name(int k) { return k >= 0 && k < ST_NORM_COUNT ? norm_names[k] : "?"; }
int st_norm_from_name(const char *name) { return find(norm_names, ST_NORM_COUNT, name); }
const char *st_ffn_name(int k) { return k >= 0 && k < ST_FFN_COUNT ? ffn_names[k] : "?"; }
int st_ffn_from_name(const char *name) { return find(ffn_names, ST_FFN_COUNT, name); }
const char *st_qk_norm_name(int k) { return k >= 0 && k < ST_QK_NORM_COUNT ? qk_norm_names[k] : "?"; }
int st_qk_norm_from_name(const char *name) { return find(qk_norm_names, ST_QK_NORM_COUNT, name); }
const char *st_out_gate_name(int k) { return k >= 0 && k < ST_OUT_GATE_COUNT ? out_gate_names[k] : "?"; }
int st_out_gate_from_name(const char *name) { return find(out_gate_names, ST_OUT_GATE_COUNT, name); }
const char *st_out_norm_name(int k) { return k >= 0 && k < ST_OUT_NORM_COUNT ? out_norm_names[k] : "?"; }
int st_out_norm_from_name(const char *name) { return find(out_norm_names, ST_OUT_NORM_COUNT, name); }
const char *st_kv_shift_name(int k) { return k >= 0 && k < ST_KV_SHIFT_COUNT ? kv_shift_names[k] : "?"; }
int st_kv_shift_from_name(const char *name) { return find(kv_shift_names, ST_KV_SHIFT_COUNT, name); }

int st_model_d_ff(const st_model_config *c) {
    if (c->d_ff > 0) return c->d_ff;
    if (c->ffn == ST_FFN_GELU) return 4 * c->d_model;
    const int f = (8 * c->d_model + 2) / 3;   /* ceil(8 d / 3) */
    return (f + 63) / 64 * 64;
}

int st_model_kv_heads(const st_model_config *c) { return c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads; }

float st_model_embed_scale(const st_model_config *c) {
    return c->embed_scale > 0 ? c->embed_scale : sqrtf((float)c->d_model);
}

int st_block_expand_kv(st_model *m, st_ctx *ctx, st_tensor **k, st_tensor **v, st_tensor **k2) {
    const int g = m->cfg.n_heads / st_model_kv_heads(&m->cfg);
    if (g == 1) return 1;
    const int same = k2 && *k2 == *k;   /* the sinks' k2 is k itself: expanded once */
    *k = st_repeat_heads(ctx, *k, g);
    *v = st_repeat_heads(ctx, *v, g);
    if (same) *k2 = *k;
    else if (k2 && *k2 && !(*k2 = st_repeat_heads(ctx, *k2, g))) return 0;
    return *k && *v;
}

int st_model_fc1_rows(const st_model_config *c) {
    return c->ffn == ST_FFN_GELU ? st_model_d_ff(c) : 2 * st_model_d_ff(c);
}

/* parameter index -> tensor, NULL for an absent one (-1) */
static st_tensor *opt(st_model *m, int idx) { return idx >= 0 ? st_param(&m->params, idx) : NULL; }

st_tensor *st_block_norm(st_model *m, st_ctx *ctx, st_tensor *x, int w, int b) {
    if (m->cfg.norm == ST_NORM_RMS) return st_rmsnorm(ctx, x, opt(m, w), m->cfg.ln_eps);
    return st_layernorm(ctx, x, opt(m, w), opt(m, b), m->cfg.ln_eps);
}

st_tensor *st_block_linear(st_model *m, st_ctx *ctx, st_tensor *x, int w, int b) {
    return st_linear(ctx, x, opt(m, w), opt(m, b));
}

/* x (B,H,T,D) with weights w (H D): the heads merged to (B,T,H D), one RMSNorm group per
 * head (rmsnorm_heads) or one for the whole row (rmsnorm_full), split again */
static st_tensor *qk_norm_wide(st_model *m, st_ctx *ctx, st_tensor *x, int w) {
    const int H = (int)x->shape[1];
    st_tensor *r = st_merge_heads(ctx, x);
    r = r ? st_rmsnorm_groups(ctx, r, opt(m, w), m->cfg.qk_norm == ST_QK_NORM_RMS_HEADS ? H : 1, m->cfg.ln_eps) : NULL;
    return r ? st_split_heads(ctx, r, H) : NULL;
}

int st_block_qk_norm(st_model *m, st_ctx *ctx, int l, st_tensor **q, st_tensor **k) {
    if (m->cfg.qk_norm == ST_QK_NORM_NONE) return 1;
    const struct st_block_params *b = &m->blocks[l];
    if (m->cfg.qk_norm == ST_QK_NORM_RMS) {   /* rows of D, weights shared by the heads */
        *q = st_rmsnorm(ctx, *q, opt(m, b->q_norm), m->cfg.ln_eps);
        *k = st_rmsnorm(ctx, *k, opt(m, b->k_norm), m->cfg.ln_eps);
    } else {
        *q = qk_norm_wide(m, ctx, *q, b->q_norm);
        *k = *q ? qk_norm_wide(m, ctx, *k, b->k_norm) : NULL;
    }
    return *q && *k;
}

int st_block_kv_shift(st_model *m, st_ctx *ctx, int l, st_tensor *h, st_tensor **k, st_tensor **v) {
    if (m->cfg.kv_shift == ST_KV_SHIFT_NONE) return 1;
    const struct st_block_params *b = &m->blocks[l];
    const int64_t Hkv = (*k)->shape[1], T = (*k)->shape[2], D = (*k)->shape[3];
    float *carry = m->shift_rows ? m->shift_rows + (size_t)(l * 2 * Hkv * D) : NULL;   /* (2, Hkv, D) */
    st_tensor **xs[2] = {k, v};
    const int w[2] = {b->k_shift_w, b->v_shift_w};
    for (int i = 0; i < 2; i++) {
        if (w[i] < 0) continue;
        st_tensor *raw = *xs[i];   /* (B,Hkv,T,D), contiguous: st_split_qkv_gqa's */
        float *prev = carry ? carry + i * Hkv * D : NULL;
        if (!(*xs[i] = st_token_shift(ctx, raw, st_block_linear(m, ctx, h, w[i], -1), m->shift_valid ? prev : NULL,
                                      m->doc)))
            return 0;
        if (prev && T > 0)   /* decoding (B = 1): the chunk's last rows are the next one's row -1 */
            for (int64_t g = 0; g < Hkv; g++)
                memcpy(prev + g * D, raw->data + (g * T + T - 1) * D, (size_t)D * sizeof(float));
    }
    return 1;
}

st_tensor *st_block_out_norm_gate(st_model *m, st_ctx *ctx, int l, st_tensor *x, st_tensor *a) {
    const struct st_block_params *b = &m->blocks[l];
    if (m->cfg.out_norm != ST_OUT_NORM_NONE && a)   /* per head, before the gate */
        a = st_rmsnorm_groups(ctx, a, opt(m, b->out_norm_w), m->cfg.n_heads, m->cfg.ln_eps);
    if (m->cfg.out_gate == ST_OUT_GATE_NONE || !a) return a;
    st_tensor *h = st_block_norm(m, ctx, x, b->ln1_w, b->ln1_b);
    return st_sigmoid_gate(ctx, a, st_block_linear(m, ctx, h, b->out_gate_w, -1));
}

st_tensor *st_block_ffn(st_model *m, st_ctx *ctx, int l, st_tensor *h) {
    const struct st_block_params *b = &m->blocks[l];
    const st_model_config *c = &m->cfg;
    h = st_block_linear(m, ctx, h, b->fc1_w, b->fc1_b);
    switch (c->ffn) {
    case ST_FFN_SWIGLU: h = st_glu(ctx, h, ST_GLU_SWIGLU); break;
    case ST_FFN_GEGLU: h = st_glu(ctx, h, c->gelu_exact ? ST_GLU_GEGLU_ERF : ST_GLU_GEGLU_TANH); break;
    default: h = st_gelu(ctx, h, c->gelu_exact); break;
    }
    return st_block_linear(m, ctx, h, b->fc2_w, b->fc2_b);
}

/* The one list of the block's departures from GPT-2's: the log label and the reports'
 * model object are both read off it, so a new block option is added here alone. */
int st_block_departures(const st_model_config *c, st_block_departure *d) {
    int n = 0;
#define DEP(k, s, num, b, ...)                                                                      \
    do {                                                                                            \
        d[n] = (st_block_departure){.key = (k), .name = (s), .number = (num), .boolean = (b)};      \
        snprintf(d[n].label, sizeof d[n].label, __VA_ARGS__);                                       \
        n++;                                                                                        \
    } while (0)
    const int kv = st_model_kv_heads(c);
    if (c->norm != ST_NORM_LAYER) DEP("norm", st_norm_name(c->norm), 0, 0, "%s", st_norm_name(c->norm));
    if (c->ffn != ST_FFN_GELU)
        DEP("ffn", st_ffn_name(c->ffn), 0, 0, "%s (d_ff %d)", st_ffn_name(c->ffn), st_model_d_ff(c));
    if (!c->bias) DEP("bias", NULL, 0, 1, "no biases");
    if (c->qk_norm != ST_QK_NORM_NONE)
        DEP("qk_norm", st_qk_norm_name(c->qk_norm), 0, 0, "q/k %s", st_qk_norm_name(c->qk_norm));
    if (c->out_norm != ST_OUT_NORM_NONE)
        DEP("out_norm", st_out_norm_name(c->out_norm), 0, 0, "output %s", st_out_norm_name(c->out_norm));
    if (c->out_gate != ST_OUT_GATE_NONE)
        DEP("out_gate", st_out_gate_name(c->out_gate), 0, 0, "%s output gate", st_out_gate_name(c->out_gate));
    if (c->kv_shift != ST_KV_SHIFT_NONE)
        DEP("kv_shift", st_kv_shift_name(c->kv_shift), 0, 0, "%s shift",
            c->kv_shift == ST_KV_SHIFT_BOTH ? "key/value" : st_kv_shift_name(c->kv_shift));
    if (kv != c->n_heads) DEP("n_kv_heads", NULL, kv, 0, "%d key/value heads", kv);
#undef DEP
    return n;
}

void st_block_label(const st_model_config *c, char *buf, size_t n) {
    st_block_departure d[ST_BLOCK_MAX_DEPARTURES];
    const int k = st_block_departures(c, d);
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < k && o < n; i++) {
        const int w = snprintf(buf + o, n - o, ", %s", d[i].label);
        if (w < 0) break;
        o += (size_t)w;
    }
}
