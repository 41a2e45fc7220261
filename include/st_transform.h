/* st_transform.h - inference-time transforms: change how a trained model treats
 * positions at evaluation or generation time, without touching its checkpoint
 * (docs/evaluation.md, "Inference-time transforms").
 *
 * Notation: L = the run's training length (train.seq_len), n = the evaluated length (eval:
 * the window length; generate: --context), s = the scale, D = head size, theta_i =
 * base^(-2i/D) the RoPE frequencies (i < D/2).
 *
 * Position transforms (one per run; each applies to one position method):
 *   pi           rope    theta_i -> theta_i / s                 (Chen et al. 2023)
 *   ntk          rope    base -> base * s^(D/(D-2))              (NTK-aware scaling)
 *   dynamic_ntk  rope    ntk with s = max(1, n_cur / L), n_cur = the current length
 *                        (tokens of the forward; KV cache: tokens decoded, capped at its window)
 *   yarn         rope    theta_i -> (1 - g_i) theta_i / s + g_i theta_i,
 *                        g_i = clamp((r_i - alpha) / (beta - alpha), 0, 1), r_i = L theta_i / (2 pi),
 *                        alpha = 1, beta = 32; q and k scaled by 0.1 ln s + 1, so the logits
 *                        are scaled by 1/t = (0.1 ln s + 1)^2            (Peng et al. 2023)
 *   rerope       rope    relative positions clipped at w: q_i.k_j sees position min(i - j, w)
 *                        (ReRoPE, Su 2023; w = clip, default L / 2; no scale)
 *   alibi_interp alibi   m_h -> m_h / s                          (slope interpolation, m L / n)
 * s = the explicit scale when > 0, else max(1, n / L).
 *
 * Trained scaling (model.scaling.*, docs/extension.md): pi, ntk, yarn and alibi_interp can
 * also be part of the model, applied in the training forward and backward with a fixed
 * scale s and L = model.scaling.train_len: context extension by fine-tuning (Chen et al.
 * 2023; Peng et al. 2023). dynamic_ntk and rerope stay inference-only
 * (st_transform_untrainable says why).
 *
 * Attention sinks + window (any method): query i sees keys j with i - j < window (its last
 * `window` keys, itself included) and the first `sinks` keys j < sinks (StreamingLLM's
 * attention sinks, Xiao et al. 2023), at their positions in the text. window 0 = no
 * window (sinks then need a window).
 * With cache_positions (StreamingLLM's "positions within the cache"), positions are those
 * of a cache that holds the sinks and then the window: a query at position p past
 * cap = sinks + window - 1 sits at cap, so sink j is seen at distance cap - j instead of
 * p - j, while its window keys keep their distances (relative methods: rope, the distance
 * biases, none; st_pos_no_cache_positions says why another method cannot).
 *
 * Blockwise causal attention (any method; xPos's inference setup, Sun et al. 2022, arXiv
 * 2212.10554, "BCA"): positions are cut into blocks of `block` tokens from the start of
 * the forward (eval: of each window; generate: of the text) and a query sees its own block
 * up to itself and the whole previous block: keys j >= (floor(i / block) - 1) block, so
 * between block + 1 and 2 block keys once past the first block, at their true distances.
 * The paper's setting is block = L / 2 (torchscale's `block_size` is 2 block = L: queries
 * in chunks of L / 2 against windows of L keys). Not with a window (one mask at a time). */
#ifndef ST_TRANSFORM_H
#define ST_TRANSFORM_H

#include "st_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The position transforms: one line each, X(ENUM_SUFFIX, name). src/model/transform.c
 * holds the table (the method each applies to and its hooks). */
#define ST_XF_KINDS(X) \
    X(NONE, none) X(PI, pi) X(NTK, ntk) X(DYNAMIC_NTK, dynamic_ntk) X(YARN, yarn) X(REROPE, rerope) \
    X(ALIBI_INTERP, alibi_interp)

typedef enum st_xf_kind {
#define ST_XF_ENUM_(ID, name) ST_XF_##ID,
    ST_XF_KINDS(ST_XF_ENUM_)
#undef ST_XF_ENUM_
    ST_XF_COUNT
} st_xf_kind;

/* YaRN's ramp bounds (rotations over the training length; the paper's values): the
 * defaults of model.scaling.yarn_alpha / yarn_beta (the schema row spells these macros,
 * ST_XF_TEXT) and of an eval --transform yarn, which has no keys of its own. Integers, so
 * their text is the JSON the schema parses. */
#define ST_YARN_ALPHA 1
#define ST_YARN_BETA 32
#define ST_XF_TEXT_(x) #x
#define ST_XF_TEXT(x) ST_XF_TEXT_(x)

enum { ST_XF_CLI_KIND = 1, ST_XF_CLI_SCALE = 2, ST_XF_CLI_CLIP = 4, ST_XF_CLI_SINKS = 8, ST_XF_CLI_WINDOW = 16,
       ST_XF_CLI_POSITIONS = 32, ST_XF_CLI_BLOCK = 64 };

typedef struct st_transform {
    int kind;               /* st_xf_kind */
    double scale;           /* s > 0 explicit; 0 = max(1, n / train_len) */
    int64_t sinks;          /* keys 0..sinks-1 always visible (needs window > 0) */
    int64_t window;         /* > 0: a query sees its last `window` keys (and the sinks) */
    int64_t clip;           /* rerope: w, 0 = train_len / 2 */
    int64_t block;          /* > 0: blockwise causal attention with blocks of `block` tokens */
    int cache_positions;    /* 1: sinks at their cache positions (needs sinks and a window) */
    unsigned cli;           /* ST_XF_CLI_* of the fields a command line gave when the others came
                             * from a run's config (st_transform_check's messages name each
                             * field's flag or key); 0: its `flag` tells for every field */
    int none_given;         /* 1: a command line said `--transform none`, which is the absence of
                             * an inference-time transform: a trained scaling stays, and
                             * st_model_set_transform says so (the identity, the scaling's
                             * own kind at scale 1, is what replaces it) */
    double yarn_alpha;      /* yarn: the ramp's bounds in rotations over L (0: ST_YARN_ALPHA, */
    double yarn_beta;       /*       ST_YARN_BETA) */
    /* set by the caller before a forward */
    int64_t train_len;      /* L */
    int64_t n;              /* the evaluated length (eval) or the context (generate) */
    int64_t cur_len;        /* dynamic_ntk: the current length when > 0, else the
                             * forward's own (pos0 + T); set by the KV-cache decoder */
} st_transform;

const char *st_transform_name(int kind);         /* "?" when out of range */
int st_transform_from_name(const char *name);    /* -1 when unknown */
/* "none, pi, ntk, ..." (the table's names joined by ", ", for messages) */
void st_transform_list(char *buf, size_t n);
/* The position method (model.pos name) a kind applies to; NULL for none. */
const char *st_transform_method(int kind);
/* 1 when the kind's scale follows the current length (dynamic_ntk), not a fixed s or n / L. */
int st_transform_dynamic(int kind);
/* 1 when the kind has YaRN's frequency ramp: it reads model.scaling.yarn_alpha / yarn_beta
 * and counts rotations over the training length (model.scaling.train_len). */
int st_transform_ramp(int kind);
/* 1 when anything is transformed (a kind, a window or blocks). */
int st_transform_active(const st_transform *xf);
/* Check the transform against a model: its kind applies to model.pos, sinks need a window,
 * blocks exclude a window, a scale is >= 1. The ST_ERR_CONFIG message names the flag or key of the offending field:
 * per field by xf->cli, else all on the side `flag` is on ("--transform": the command
 * line, "eval.transform": a config). */
int st_transform_check(const st_transform *xf, int pos, const char *flag, st_error *e);
/* The scale s at current length len (only dynamic_ntk reads len). */
double st_transform_scale(const st_transform *xf, int64_t len);
/* "yarn", "pi s=4", "sinks=4 window=64", "ntk+sinks=4 window=64", "blockwise=512", "none". */
void st_transform_label(const st_transform *xf, char *buf, size_t n);

/* Why transform `kind` cannot be a trained scaling (model.scaling.transform), or NULL
 * when it can. */
const char *st_transform_untrainable(int kind);

/* rerope's w (clip, or train_len / 2, at least 1); 0 for other kinds. */
int64_t st_transform_clip(const st_transform *xf);
/* With cache positions: cap = sinks + window - 1, the position a query past it takes
 * (st_transform.cache_positions); 0 without. */
int64_t st_transform_cache_cap(const st_transform *xf);
/* RoPE frequencies for head size D and base under the transform (xf NULL or a non-rope
 * kind: the plain theta_i) at current length len: inv_freq[D/2] and the factor by which
 * q and k are scaled (1 except yarn). */
void st_transform_rope_freqs(const st_transform *xf, int64_t D, double base, int64_t len,
                             double *inv_freq, float *qk_scale);
/* Apply the transform to a layer's bias provider, after the method set it up (alibi_interp
 * divides the slopes by s at the evaluated length n). No-op for other kinds. */
struct st_pos_bias;
void st_transform_bias(const st_transform *xf, struct st_pos_bias *pb);

#ifdef __cplusplus
}
#endif
#endif
