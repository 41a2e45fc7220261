/* st_model.h - the causal language model and its position methods.
 *
 *   ids (B,T) -> tok_emb (+ the method's positions: sinusoidal | learned) -> dropout
 *             -> n_layers x [ x += drop(attn(LN1(x))) ; x += drop(ffn(LN2(x))) ]
 *             -> LN_f -> logits = x @ W_head^T  (W_head = tok_emb.weight when tied)
 *
 * Position methods (docs/position-methods.md has the exact math):
 *   none, alibi, alibi_rf (receptive field: exp | gaussian | reciprocal, rho fixed or
 *   learnable per layer / per head), sinusoidal, learned, rope, t5, kerple (log | power),
 *   sandwich, fire, xpos, cope; each a table of functions in src/model/pos/<name>.c, listed by
 *   ST_POS_METHODS below. model.attn_scale (none | logn | learned_logn) combines with any. */
#ifndef ST_MODEL_H
#define ST_MODEL_H

#include "st_tensor.h"
#include "st_ops.h"
#include "st_transform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The position methods: one line each, X(ENUM_SUFFIX, name). This list is the registry:
 * src/model/pos/registry.c builds its table of methods from it, and each method lives in
 * src/model/pos/<name>.c as `const st_pos_method st_pos_<name>` (src/model/pos/pos.h).
 * Adding a method = one line here + its file (+ its tests and docs). */
#define ST_POS_METHODS(X) \
    X(NONE, none) X(ALIBI, alibi) X(ALIBI_RF, alibi_rf) X(SINUSOIDAL, sinusoidal) \
    X(LEARNED, learned) X(ROPE, rope) X(T5, t5) X(KERPLE, kerple) X(SANDWICH, sandwich) X(FIRE, fire) \
    X(XPOS, xpos) \
    X(COPE, cope) X(FOX, fox)

typedef enum st_pos_kind {
#define ST_POS_ENUM_(ID, name) ST_POS_##ID,
    ST_POS_METHODS(ST_POS_ENUM_)
#undef ST_POS_ENUM_
    ST_POS_COUNT
} st_pos_kind;

/* Widest FIRE MLP (model.fire.hidden). */
#define ST_FIRE_MAX_HIDDEN 1024
/* most attention heads a model may have (model.n_heads; per-head constants are arrays of it) */
#define ST_MAX_HEADS 256
/* Most parameter tensors a method declares at model level, and per layer. */
#define ST_POS_MAX_PARAMS 8

/* Log-n attention scaling, orthogonal to the position method (src/model/attn_scale.c). */
typedef enum st_attn_scale_kind {
    ST_ATTN_SCALE_NONE = 0, ST_ATTN_SCALE_LOGN, ST_ATTN_SCALE_LEARNED, ST_ATTN_SCALE_COUNT
} st_attn_scale_kind;
/* The decoder block's options (src/model/block.c): norm, feed-forward, q/k norm. */
typedef enum st_norm_kind { ST_NORM_LAYER = 0, ST_NORM_RMS, ST_NORM_COUNT } st_norm_kind;
typedef enum st_ffn_kind { ST_FFN_GELU = 0, ST_FFN_SWIGLU, ST_FFN_GEGLU, ST_FFN_COUNT } st_ffn_kind;
/* q/k RMSNorm: per head over D with weights (D) shared by the heads (Qwen 3), per head
 * with each head's own weights (H D; the Forgetting Transformer's Pro block), or over the
 * whole projection of H D values with weights (H D) (OLMo 2) */
typedef enum st_qk_norm_kind {
    ST_QK_NORM_NONE = 0, ST_QK_NORM_RMS, ST_QK_NORM_RMS_HEADS, ST_QK_NORM_RMS_FULL, ST_QK_NORM_COUNT
} st_qk_norm_kind;
/* A sigmoid gate on the attention output before its projection (Qiu et al. 2025): one
 * gate per value (elementwise) or per head (headwise). */
typedef enum st_out_gate_kind {
    ST_OUT_GATE_NONE = 0, ST_OUT_GATE_ELEMENTWISE, ST_OUT_GATE_HEADWISE, ST_OUT_GATE_COUNT
} st_out_gate_kind;
/* The Forgetting Transformer's Pro block pieces (Lin et al. 2025): a per-head RMSNorm of the
 * attention output (before the output gate, if any), and a data-dependent token shift of
 * the keys, the values or both. */
typedef enum st_out_norm_kind { ST_OUT_NORM_NONE = 0, ST_OUT_NORM_RMS, ST_OUT_NORM_COUNT } st_out_norm_kind;
typedef enum st_kv_shift_kind {   /* key and value are bits: both = key | value */
    ST_KV_SHIFT_NONE = 0, ST_KV_SHIFT_KEY = 1, ST_KV_SHIFT_VALUE = 2, ST_KV_SHIFT_BOTH = 3, ST_KV_SHIFT_COUNT
} st_kv_shift_kind;
typedef enum st_kerple_kind { ST_KERPLE_LOG = 0, ST_KERPLE_POWER } st_kerple_kind;
typedef enum st_rf_kind { ST_RF_EXP = 0, ST_RF_GAUSSIAN, ST_RF_RECIPROCAL, ST_RF_COUNT } st_rf_kind;
typedef enum st_rf_scope { ST_RF_FIXED = 0, ST_RF_PER_LAYER, ST_RF_PER_HEAD } st_rf_scope;
/* How a learnable rho is parameterised: rho = softplus(theta) moves additively, by about
 * the learning rate per AdamW step; rho = exp(theta) moves multiplicatively, by a factor of
 * about (1 + lr) per step, so rho can travel from 16 to 1000 within a short run. */
typedef enum st_rf_param { ST_RF_SOFTPLUS = 0, ST_RF_LOG } st_rf_param;

typedef struct st_model_config {
    int vocab_size;
    int n_layers;
    int d_model;
    int n_heads;
    int d_ff;               /* 0 -> 4 * d_model (gelu), 8 d_model / 3 up to a multiple of 64
                             * (swiglu, geglu): st_model_d_ff */
    int norm;               /* st_norm_kind: layernorm (default) or rmsnorm */
    int ffn;                /* st_ffn_kind: gelu (default), swiglu, geglu */
    int bias;               /* 1 (default): biases in the q/k/v, output and FFN projections */
    int qk_norm;            /* st_qk_norm_kind: none (default), rmsnorm, rmsnorm_heads, rmsnorm_full */
    int out_gate;           /* st_out_gate_kind: none (default), elementwise, headwise */
    int out_norm;           /* st_out_norm_kind: none (default) or rmsnorm per head */
    int kv_shift;           /* st_kv_shift_kind: none (default), key, value, both */
    int n_kv_heads;         /* key/value heads (grouped-query attention; divides n_heads);
                             * -1 (default) = n_heads: st_model_kv_heads */
    int pos;                /* st_pos_kind */
    int max_len;            /* learned positions: table length (error beyond it) */
    int tie_embeddings;     /* 1 (default): lm head = tok_emb.weight */
    float embed_scale;      /* token embeddings times this before the positions are added
                             * (1, default); 0 = sqrt(d_model), Vaswani et al. / fairseq:
                             * st_model_embed_scale */
    float dropout_emb;      /* on embeddings */
    float dropout_attn;     /* on attention probabilities */
    float dropout_resid;    /* on each residual branch */
    int gelu_exact;         /* 0: tanh approximation (default), 1: erf */
    float ln_eps;           /* 1e-5 */
    float init_std;         /* 0.02; residual output projections get std/sqrt(2*n_layers) */
    int attn_scale;         /* st_attn_scale_kind: none (default), logn, learned_logn */
    int attn_scale_len;     /* logn: the training length L (queries seeing n > L keys get
                             * log_L n); 0 in a run config = train.seq_len */
    /* trained position scaling (model.scaling.*): a transform of st_transform.h that the
     * training forward and backward apply too (context extension by fine-tuning) */
    int scaling;            /* st_xf_kind: none (default), pi, ntk, yarn, alibi_interp */
    double scaling_scale;   /* s >= 1 */
    int scaling_len;        /* L: the length the model was first trained at (yarn's ramp);
                             * 0 = unset (yarn needs it) */
    double yarn_alpha;      /* yarn: ramp bounds in rotations over L (1, 32) */
    double yarn_beta;
    /* alibi / alibi_rf */
    float alibi_max_bias;   /* 8: slopes 2^(-max_bias*h/n) for n a power of two */
    int alibi_heads;        /* 0: every head; K: heads 0..K-1 take the slopes of K heads, the
                             * rest no bias (x-transformers' alibi_num_heads) */
    int rf_kind;            /* st_rf_kind */
    int rf_scope;           /* st_rf_scope */
    int rf_param;           /* st_rf_param: learnable rho = softplus(theta) or exp(theta) */
    float rf_rho;           /* fixed rho, or the initial rho when learnable */
    /* rope */
    float rope_base;        /* 10000 */
    /* t5 */
    int t5_buckets;         /* 32 */
    int t5_max_distance;    /* 128 */
    /* kerple */
    int kerple_kind;        /* st_kerple_kind: log (default) or power */
    /* fire */
    int fire_hidden;        /* 32: MLP width, at most ST_FIRE_MAX_HIDDEN */
    float fire_c;           /* 0.1: initial c of psi(x) = log(c x + 1) */
    float fire_threshold;   /* 512: initial threshold L of psi(max(L, i)) */
    /* xpos */
    float xpos_gamma;       /* 512: scale zeta^(position / gamma) */
    /* cope */
    int cope_npos;          /* 64: rows of the contextual position table (positions clamp) */
    /* Abacus embeddings (model.abacus.*, McLeish et al. 2024, arXiv 2405.17399), added to
     * any method's: a learned row per digit's place within its run of digits */
    int abacus_rows;        /* 0 (default): none; else rows of abacus_emb.weight */
    int abacus_digit0;      /* id of the token "0" ("1".."9" follow it); -1 in a run config =
                             * the dataset's (st_dataset_digit0), set when training starts */
} st_model_config;

/* Defaults for every field: the model rows of the config key table
 * (src/train/config_schema.c); vocab_size must still be set. */
void st_model_config_default(st_model_config *c);
/* Check ranges; message names "model.<key>". */
int st_model_config_validate(const st_model_config *c, const char *file, st_error *e);
const char *st_pos_name(int pos);
int st_pos_from_name(const char *name);       /* -1 if unknown */
/* The method's variant, for labels and reports ("exp" of alibi_rf, with *key "rf_kind";
 * "heads4" of alibi with model.alibi_heads 4), or NULL (key NULL) when the method has none
 * or c is its plain form. buf (n bytes) holds a variant made from a number. */
const char *st_pos_variant(const st_model_config *c, const char **key, char *buf, size_t n);
/* The block options' names and back (-1 if unknown): "layernorm" / "rmsnorm", "gelu" /
 * "swiglu" / "geglu", "none" / "rmsnorm". */
const char *st_norm_name(int k);
int st_norm_from_name(const char *name);
const char *st_ffn_name(int k);
int st_ffn_from_name(const char *name);
const char *st_qk_norm_name(int k);
int st_qk_norm_from_name(const char *name);
const char *st_out_gate_name(int k);          /* "none" / "elementwise" / "headwise" */
int st_out_gate_from_name(const char *name);
const char *st_out_norm_name(int k);          /* "none" / "rmsnorm" */
int st_out_norm_from_name(const char *name);
const char *st_kv_shift_name(int k);          /* "none" / "key" / "value" / "both" */
int st_kv_shift_from_name(const char *name);
/* The feed-forward width (model.d_ff, or its default for model.ffn) and the rows of
 * ffn.fc1.weight (2 d_ff for the gated units: gate rows, then value rows). */
int st_model_d_ff(const st_model_config *c);
/* One way the block departs from GPT-2's: its config key under model (the reports'
 * model object), its value (name when a string; else number, a JSON bool when boolean)
 * and the log wording ("swiglu (d_ff 384)"). */
#define ST_BLOCK_MAX_DEPARTURES 8
typedef struct st_block_departure {
    const char *key, *name;
    double number;
    int boolean;
    char label[48];
} st_block_departure;
/* Fills d[0..n) (n <= ST_BLOCK_MAX_DEPARTURES) with c's departures, in a fixed order. */
int st_block_departures(const st_model_config *c, st_block_departure *d);
/* ", rmsnorm, swiglu (d_ff 384), no biases, 2 key/value heads": the departures' labels,
 * for log lines ("" for the default block). */
void st_block_label(const st_model_config *c, char *buf, size_t n);
/* Key/value heads: model.n_kv_heads, or n_heads when it is -1. */
int st_model_kv_heads(const st_model_config *c);
/* The factor on the token embeddings: model.embed_scale, or sqrt(d_model) when it is 0. */
float st_model_embed_scale(const st_model_config *c);
int st_model_fc1_rows(const st_model_config *c);
/* "none", "logn" or "learned_logn", and back (-1 if unknown). */
const char *st_attn_scale_name(int kind);
int st_attn_scale_from_name(const char *name);
/* "name", "name-variant" ("alibi_rf-exp"), then "+logn" / "+learned_logn" with
 * model.attn_scale: the label of sweeps and plots. */
void st_pos_label(const st_model_config *c, char *buf, size_t n);
/* Report key of method pos's variant ("rf_kind") or NULL. */
const char *st_pos_variant_key(int pos);
/* Longest sequence (positions 0..n-1) the method can represent, 0 = any length (learned
 * positions: model.max_len). */
int64_t st_pos_max_len(const st_model_config *c);
/* Why method pos has that limit, naming the config key that sets it ("model.max_len: ..."). */
const char *st_pos_limit_why(int pos);
/* NULL, or why the method cannot attend to a span with keys masked inside it (attention
 * sinks + window): CoPE counts its gates over one contiguous span, FoX's sinks would need
 * the gates of the keys the window dropped. */
const char *st_pos_no_sinks(int pos);
/* NULL, or why the method cannot be trained with data.task.doc_mask (each token sees the
 * keys of its own instance only): CoPE's training gates count over the whole causal row.
 * Not st_pos_no_sinks: the mask keeps one contiguous span of keys, as a window does. */
const char *st_pos_no_doc_mask(int pos);
/* NULL, or why the method cannot give attention sinks their cache positions (StreamingLLM's
 * re-positioning, st_transform.cache_positions). */
const char *st_pos_no_cache_positions(int pos);
/* NULL, or what a fresh run of the method at model.embed_scale 1 should be warned of. */
const char *st_pos_unscaled_note(int pos);
/* Whether method pos reads config key `key` ("model.fire.c"): 1 yes, 0 no (another
 * method's key, without effect here), -1 no method's own key. */
int st_pos_key_reader(const char *key, int pos);
/* Set the method's keys to a variant in which every parameter it can have is learned
 * (selfcheck, tests). */
void st_pos_exercise(st_model_config *c);
const char *st_rf_name(int kind);
int st_rf_from_name(const char *name);

/* Official ALiBi slopes (ofirpress/attention_with_linear_biases get_slopes) for n heads:
 * n a power of two -> m_h = 2^(-max_bias*h/n), h = 1..n; otherwise the slopes for
 * c = 2^floor(log2 n) followed by slopes 0, 2, 4, ... of the 2c set, first n - c of them. */
void st_alibi_slopes(int n_heads, float max_bias, float *out);
/* The slopes of a model's n_heads heads (pos alibi): st_alibi_slopes of all of them, or
 * with model.alibi_heads = K > 0 those of K heads for heads 0..K-1 and 0 after. */
void st_alibi_model_slopes(const st_model_config *c, float *out);

/* Position-bias providers (src/model/pos/<method>.c) usable on their own, e.g. by the
 * attention tests. For the methods with a bias (alibi, alibi_rf, t5, kerple, ...).
 * `params`/`grads` point at this layer's bias parameters (rf_theta, t5 table, kerple
 * r1/r2 raw values; p[k]/g[k] for a method with several tensors) or NULL for
 * parameter-free methods. bidirectional: bias depends on |i - j| (ALiBi) or on signed
 * buckets (T5). */
typedef struct st_pos_bias {
    st_attn_bias iface;     /* pass &pb->iface to st_attention */
    int kind, n_heads, bidirectional;
    const st_model_config *cfg;
    float slopes[ST_MAX_HEADS];      /* per-head constants the method precomputes (ALiBi slopes) */
    const float *params;    /* = p[0]: layer's parameters (see docs) or NULL */
    float *grads;           /* = g[0]: same layout, accumulated; NULL: no gradient */
    const float *p[ST_POS_MAX_PARAMS];   /* the method's tensors: model-level ones first,
                                          * then the layer's, in declaration order */
    float *g[ST_POS_MAX_PARAMS];
    st_attn_cope cope;      /* CoPE's embeddings (iface.cope points here) */
    st_attn_gate gate;      /* FoX's gate term (iface.gate points here), set by the caller */
    const int64_t *positions; /* randomized training positions of rows 0..T-1 (st_model.
                               * positions), NULL: row i is position i */
} st_pos_bias;
void st_pos_bias_init(st_pos_bias *pb, const st_model_config *cfg, int bidirectional,
                      const float *params, float *grads);

typedef struct st_model {
    st_model_config cfg;
    st_params params;
    /* parameter indices (-1 when absent) */
    int p_tok_emb, p_ln_f_w, p_ln_f_b, p_lm_head;
    /* the position method's tensors, in its declaration order: model level (pos_emb,
     * t5.rel_bias) and per block (attn.rf_theta, attn.kerple, ...) */
    int n_pos, p_pos[ST_POS_MAX_PARAMS];
    int n_pos_block;
    struct st_block_params {
        int ln1_w, ln1_b, qkv_w, qkv_b, out_w, out_b, ln2_w, ln2_b;
        int fc1_w, fc1_b, fc2_w, fc2_b;
        int q_norm, k_norm;     /* qk_norm: (D), or (H D) and (n_kv_heads D) weights, else -1 */
        int out_gate_w;         /* out_gate: (C, C) or (H, C) weights, else -1 */
        int out_norm_w;         /* out_norm rmsnorm: (C) weights, else -1 */
        int k_shift_w, v_shift_w;   /* kv_shift: (n_kv_heads, C) gate weights, else -1 */
        int pos[ST_POS_MAX_PARAMS];
        int logn_scale;     /* attn_scale learned_logn: s (H), else -1 */
    } *blocks;
    /* the transform every forward applies (include/st_transform.h); NULL: none. Either
     * &scaling, the model's trained scaling (model.scaling.*, training applies it too), or
     * an inference-time transform owned by the caller (st_model_set_transform). */
    struct st_transform *xf;
    st_transform scaling;   /* from the config (kind none: no trained scaling) */
    /* randomized positions (train.random_positions, Ruoss et al. 2023): the positions of
     * the T rows of the next training forward, sorted and shared by the batch rows, owned
     * by the caller (the trainer); NULL: the natural positions pos0 + t. Only methods
     * whose registry entry reads absolute indices (st_pos_abs_indices) use them. */
    const int64_t *positions;
    /* per-instance attention mask of packed task rows (data.task.doc_mask): (B,T), row t
     * of batch row b attends to rows [doc[b T + t], t] only; owned by the caller (the
     * trainer) for the next forward and its backward; NULL: plain causal attention. */
    const int32_t *doc;
    /* model.kv_shift while decoding with a KV cache: per layer the last decoded token's k and
     * v rows before the shift (L, 2, n_kv_heads, D), row -1 of the next chunk when
     * shift_valid (else that chunk's first token has none); owned by the cache (decode.c
     * points here for one chunk), NULL otherwise. */
    float *shift_rows;
    int shift_valid;
    /* inference forwards add each layer's attention statistics here (NULL: none); owned by
     * the caller (the evaluation, st_eval_opts.attn_stats) */
    struct st_attn_acc *attn_acc;
    /* model.abacus: the table's index (-1: none); abacus_k, the random offset k of the next
     * training forward's digits (train.abacus_max_k; set by the trainer, 0 otherwise);
     * abacus_run0, the digits just before row 0 of the next forward (a KV cache's
     * st_kv_cache.abacus_run while decoding, 0 otherwise) */
    int p_abacus;
    int64_t abacus_k, abacus_run0;
} st_model;

/* Attention statistics summed over the query rows of inference forwards (st_ops.h's
 * ST_ATTN_NSTATS per row: mean key distance, entropy, first-key mass, mass at distance
 * >= far), per layer and head; the mean is sum / rows. */
typedef struct st_attn_acc {
    int n_layers, n_heads;
    int64_t far;            /* keys at distance >= far count as far */
    double *sum;            /* (n_layers, n_heads, ST_ATTN_NSTATS) */
    double *rows;           /* (n_layers, n_heads): rows counted (a row seeing no key is not) */
    const int32_t *tgt;     /* the next forward's targets (B, T), or NULL: only a query row with a
                             * target (>= 0) counts, so sliding windows count the rows they
                             * score, each text position once; NULL counts every row */
} st_attn_acc;

/* Hand an inference-time transform to the model (eval, generate): an active xf replaces
 * the trained scaling (logged, naming `who`), except that a window-only xf (sinks +
 * window, kind none) takes the trained scaling's kind and scale; an inactive or NULL xf
 * restores the trained scaling. xf stays owned by the caller. */
void st_model_set_transform(st_model *m, st_transform *xf, const char *who);
/* The trained scaling of a config as a transform (kind none when there is none). */
void st_model_scaling(const st_model_config *c, st_transform *xf);

/* A sorted random subset of T distinct positions of [0, N) (T <= N), a function of
 * (seed, N, T) alone: selection sampling (Knuth's Algorithm S), each of the C(N, T)
 * subsets equally likely, O(N). */
void st_positions_sample(uint64_t seed, int64_t N, int64_t T, int64_t *out);
/* 1 when position method pos reads absolute token indices (embeddings at t, rotations
 * by t, FIRE's normaliser at i), so train.random_positions applies to it; 0 for methods
 * of distances or contextual positions only. */
int st_pos_abs_indices(int pos);
/* Those methods' names, comma-separated, into buf (for messages and docs). */
void st_pos_abs_list(char *buf, size_t n);
/* The position of row t of a forward starting at pos0: m->positions[t] or pos0 + t. */
static inline int64_t st_model_pos(const st_model *m, int64_t pos0, int64_t t) {
    return m->positions ? m->positions[t] : pos0 + t;
}

int st_model_init(st_model *m, const st_model_config *cfg, uint64_t seed, st_error *e);
/* For inference (eval, generate, export): the parameter block holds the weights only,
 * zeroed, to be loaded by the caller; no gradients or AdamW moments (a quarter of the
 * memory of st_model_init). Forward passes must run without grad. */
int st_model_init_weights(st_model *m, const st_model_config *cfg, st_error *e);
void st_model_free(st_model *m);
/* Floats in the parameter block a config implies (incl. alignment padding), without
 * allocating it: lets loaders check a file against a config before building the model.
 * 0 (with *e set) for an invalid config. */
size_t st_model_param_floats(const st_model_config *cfg, st_error *e);
size_t st_model_num_params(const st_model *m);
/* The current receptive field rho of each head of `layer` (rho[n_heads]; a per-layer rho is
 * repeated) when the model's position method learns one (alibi_rf, scope layer or head).
 * Returns 1, or 0 when there is no learnable rho (rho untouched). */
int st_model_rf_rho(const st_model *m, int layer, float *rho);

/* Forward to the final hidden states (B,T,C) after LN_f. ids: int32 (B*T), in [0, V).
 * seed: dropout seed for this step. Fails (NULL, ctx->failed) on arena overflow; a
 * learned-position model asked for T > max_len returns NULL with *e set. */
st_tensor *st_model_hidden(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T,
                           uint64_t seed, st_error *e);
/* Logits (B,T,V) (for generation and tests). */
st_tensor *st_model_logits(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T,
                           uint64_t seed, st_error *e);
/* Mean cross-entropy over targets (B*T) via the fused head+loss op. tok_loss (B*T) gets
 * each token's loss when not NULL. */
st_tensor *st_model_loss(st_model *m, st_ctx *ctx, const int32_t *ids, const int32_t *targets,
                         int64_t B, int64_t T, uint64_t seed, float *tok_loss, st_error *e);
/* Bytes of arena a step of (B,T) needs, measured by running one step in a scratch arena
 * (grad: training step incl. backward buffers). */
size_t st_model_step_bytes(st_model *m, int64_t B, int64_t T, int grad, st_error *e);

/* ---------------------------------------------------- incremental decoding ---- */
/* Keys and values of every layer for the tokens decoded so far, so each new token costs
 * one token's forward plus attention over the cached keys (O(window)) instead of a
 * forward over the whole window. Owned by the caller; everything is allocated by
 * st_kv_cache_init, nothing per token.
 *
 * window: the most keys a query sees (generate's --context). Once more tokens than that
 * have been decoded:
 *   - relative methods (none, alibi, alibi_rf, t5, kerple, sandwich, cope: a query counts its
 *     contextual positions over the keys it sees) and rope and xpos (keys are cached
 *     already rotated at their absolute position, xpos re-centres their scale; q.k depends
 *     only on the distance) drop
 *     the oldest keys: a query sees the last `window` keys of every layer (sliding-window
 *     attention). With one layer that equals the full forward over the last `window`
 *     tokens; with more it does not, because a cached key at layer >= 1 was computed
 *     while its own earlier tokens were still visible (the receptive field reaches back
 *     n_layers * (window - 1) tokens).
 *   - absolute methods (sinusoidal, learned, and fire, whose bias depends on the absolute
 *     query position) cannot slide: every position of the window
 *     changes. st_model_decode refuses (ST_ERR_CONFIG); the caller resets the cache and
 *     prefills the last `window` tokens again (st_kv_cache_slides tells which applies).
 * Layout: k, v (n_layers, n_kv_heads, rows, head_dim) (grouped-query attention keeps one
 * key/value head per group of query heads: n_heads / n_kv_heads times less memory); a
 * sliding cache keeps `rows` =
 * window + slack and, when full, moves its last window - 1 keys to the front, so keys
 * stay contiguous and the copy costs (window - 1) / (slack + 1) keys per token. */
typedef struct st_kv_cache {
    int n_layers, n_heads, head_dim;
    int n_kv_heads;         /* heads of k, v (grouped-query attention: n_heads / group) */
    int slides;             /* st_kv_cache_slides(model.pos) */
    int64_t window;         /* keys a query sees at most */
    int64_t rows;           /* key rows per (layer, head) */
    int64_t len;            /* rows in use: keys 0..len-1 are positions n_seen-len.. */
    int64_t n_seen;         /* tokens decoded since the reset: the next one's position */
    float *k, *v;           /* (L, H, rows, D) */
    float *bias;            /* (L, H, window) reversed bias tables (st_attention_bias_table),
                             * filled at the first decode after a reset; NULL: no bias */
    int bias_ready;
    int64_t pos_ref;        /* the position method's reference position of the cached keys
                             * (xpos: the centre of their scale); see its cache_keys */
    /* inference-time transform (model.xf, st_transform.h): with an attention window the
     * cache keeps its first `sinks` rows (positions 0..sinks-1) and the last `window`
     * keys, and a sliding cache's window is the transform's; xf_scale: the scale the
     * cached keys were made with (dynamic_ntk changes it with the length) */
    int64_t sinks;
    double xf_scale;
    float *k2;              /* rerope: the unrotated keys (L, H, rows, D); NULL otherwise */
    int64_t clip;           /* rerope's w, 0: none */
    /* ST_PREC_BF16: k, v, k2 are NULL and the rows are kept as bf16 in kh, vh, k2h (half the
     * memory; rounded to nearest even when appended, widened exactly for the products) */
    int precision;
    uint16_t *kh, *vh, *k2h;
    /* FoX (a method with a gate term): each cached key's running log-gate sum c, fp32
     * whatever the precision, (L, n_heads, rows), shifted with the keys; the sums continue
     * over the whole text since the reset. NULL otherwise. */
    float *gate;
    /* model.kv_shift: each layer's last token's k and v rows before the shift (L, 2,
     * n_kv_heads, D) fp32, valid while len > 0 (a reset forgets them). NULL otherwise. */
    float *shift;
    /* model.abacus: the run of digits the decoded text ends in (0 after a reset), so a
     * digit decoded next takes the place after it */
    int64_t abacus_run;
} st_kv_cache;

/* 1 when a cache for position method `pos` drops its oldest keys past the window, 0 for
 * absolute positions (sinusoidal, learned): the method's table says which. */
int st_kv_cache_slides(int pos);
/* 1 when feeding n_new more tokens needs a reset and a prefill of the last window first:
 * an absolute-position cache that would slide, or a dynamic_ntk transform whose scale at
 * the new length differs from the one the cached keys were rotated with. */
int st_kv_cache_must_reset(const st_kv_cache *c, const st_model *m, int64_t n_new);
/* Allocate for model m. window: the keys a query sees at most; under a transform's window
 * or blocks a sliding cache keeps the transform's keys instead, capped by `window`, which
 * then bounds the tokens it will hold. precision ST_PREC_FP32 or ST_PREC_BF16 (keys and values kept in
 * bf16: half the memory, the error of bf16 operands; xpos, which rescales its cached keys
 * in place, keeps fp32). Fails with ST_ERR_CONFIG for window < 1 or learned positions
 * with window > model.max_len, ST_ERR_MEMORY when it would not fit. */
int st_kv_cache_init(st_kv_cache *c, const st_model *m, int64_t window, int precision, st_error *e);
/* Forget every token (also the bias tables: call it after changing the parameters). */
void st_kv_cache_reset(st_kv_cache *c);
void st_kv_cache_free(st_kv_cache *c);
/* Bytes the cache holds: keys and values (and rerope's unrotated keys), bias tables, FoX's
 * gate sums, model.kv_shift's carried rows. */
double st_kv_cache_bytes(const st_kv_cache *c);

/* Run n_new tokens (ids, each in [0, V)) through the model in inference mode at positions
 * c->n_seen.., appending their keys and values to the cache, and write the logits (V) of
 * the last one to `logits`. n_new > 1 is a prefill (any length: it runs in chunks that
 * fit the cache); then one token at a time. ctx must be in inference mode
 * (st_ctx_begin(ctx, 0, 0)); what this allocates from its arena is released before it
 * returns. The logits equal the last row of st_model_logits over the decoded sequence
 * (within the window; past it see st_kv_cache) up to float rounding. */
int st_model_decode(st_model *m, st_kv_cache *c, st_ctx *ctx, const int32_t *ids, int64_t n_new,
                    float *logits, st_error *e);

/* ------------------------------------------------------------- sampling ---- */
/* How the next token is drawn from the logits (src/model/sample.c). temperature 0:
 * greedy (argmax, the first of equal maxima; the filters are ignored). Otherwise the
 * probabilities p_v = softmax(logits / temperature)_v are restricted by every filter
 * that is set, and renormalised:
 *   top_k  > 0: the k largest logits (ties with the k-th are kept);
 *   top_p  < 1: nucleus: the fewest most probable tokens, among those top_k keeps, whose
 *               probability sums to at least top_p (Holtzman et al. 2020; ties with the
 *               last one kept are kept);
 *   min_p  > 0: tokens with p_v >= min_p * max_v p_v.
 * The draw is one uniform number per token walked against the cumulative kept mass in
 * vocabulary order, so with top_p 1 and min_p 0 a seed gives the tokens it always did. */
typedef struct st_sampling {
    double temperature;   /* >= 0 */
    int64_t top_k;        /* 0: off */
    double top_p;         /* (0, 1]; 1: off */
    double min_p;         /* [0, 1]; 0: off */
} st_sampling;

/* One token id in [0, V) from logits (V); work: V floats of scratch. */
int st_sample_token(const float *logits, int V, const st_sampling *s, st_rng *r, float *work);

/* safetensors (F32, PyTorch [out,in] layout; names in docs/model-format.md). */
int st_model_save_safetensors(const st_model *m, const char *path, st_error *e);
/* The same bytes into an open file (an st_atomic_file the caller commits: export writes
 * its files together); path names the file in messages. */
int st_model_write_safetensors(const st_model *m, FILE *f, const char *path, st_error *e);
/* Load tensors by name into an initialised model; shapes must match exactly. */
int st_model_load_safetensors(st_model *m, const char *path, st_error *e);

#ifdef __cplusplus
}
#endif
#endif
