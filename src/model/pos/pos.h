/* pos.h - the table of functions a position method is. One file per method under
 * src/model/pos/ defines `const st_pos_method st_pos_<name>`; registry.c lists them (from
 * ST_POS_METHODS in include/st_model.h). The model (model.c, decode.c) and every other
 * module reach a method only through this table; nothing outside a method's file branches
 * on which method it is. One exception, by design: CoPE's content term (gates from q.k,
 * positions from their running sums) has to live inside the attention kernels, between
 * the scores and the softmax, so src/ops/attention*.c carry it as st_attn_bias.cope with
 * its math in src/ops/attention_cope.c; cope.c here only declares its parameters and
 * sets the provider up.
 *
 * What a method can do, each entry NULL when it does not:
 *   validate   cross-key rules of its config keys (ranges are in the schema table,
 *              src/train/config_schema.c, grouped per method there)
 *   params     the parameter tensors it declares: at model level (layer = -1: named as
 *              given, e.g. "pos_emb.weight") and per block (layer >= 0: "blocks.<l>." is
 *              prefixed, e.g. "attn.kerple"); shape, weight-decay class, init
 *   embed      what it adds to the token embeddings at positions pos0..pos0+T-1
 *   qk         what it does to a block's queries and keys (B,H,T,D) at positions pos0..
 *   bias_init  sets up a bias provider (st_pos_bias, per step, arena-owned: the per-step
 *              state of a method) in the distance form (fill/grad) or the general (i, j)
 *              form (fill_block/grad_block) of st_attn_bias; bias_form says which
 *              (GENERAL also for a content term, st_attn_bias.cope: the KV cache then
 *              asks for the provider per chunk instead of distance tables)
 *   slides     KV cache: 1 = drop the oldest keys past the window (q.k and bias depend on
 *              relative positions, or on absolute ones the cache tracks), 0 = absolute
 *              positions that cannot slide (the caller resets and prefills)
 *   abs_indices 1 when embed/qk/bias read absolute indices: st_model_pos(m, pos0, t)
 *              gives them (randomized positions in training, train.random_positions)
 *   max_len    longest sequence it can represent (0 = any); limit_why: the key that sets
 *              it and why, for the error messages ("model.max_len: ...")
 *   variant    its variant for labels and reports ("exp" of alibi_rf) under variant_key,
 *              or NULL for the plain form; buf (n bytes) for a variant made from a number
 *   exercise   set its keys so every parameter it can have is learned (selfcheck, tests)
 *   rho        learned receptive field per head of a layer (trainer's validation log)
 *   cache_keys KV cache: called before n new tokens at positions p0.. go through the
 *              blocks, to bring the cached keys to the reference the new ones will have
 *              (xpos re-centres their scale; c->pos_ref is the method's to keep)
 *   gate       FoX's gate term (st_attn_gate): c (B,H,T) from the block's normalised input
 *              h (B,T,C), sums from the first row; its provider points iface.gate at
 *              pb->gate, which st_block_bias fills */
#ifndef ST_POS_H
#define ST_POS_H

#include "../model_internal.h"

#include <math.h>
#include <string.h>

enum { ST_POS_BIAS_NONE = 0, ST_POS_BIAS_DISTANCE, ST_POS_BIAS_GENERAL };

/* One parameter tensor a method declares: shape (d0) or (d0, d1), decay = 1 when weight
 * decay applies, init = ST_INIT_*, value: the constant or the normal std. */
typedef struct st_pos_decl {
    const char *name;
    int ndim;
    int64_t d0, d1;
    int decay, init;
    float value;
    int is_embedding;
} st_pos_decl;

typedef struct st_pos_method {
    const char *name;
    const char *keys;       /* the config keys of its own it reads, space-separated; a key
                             * names its sub-object too ("model.fire": model.fire.*). Another
                             * method's key set in a run of this one is named as without
                             * effect (st_pos_key_reader, st_run_config_unread) */
    int bias_form;          /* ST_POS_BIAS_* */
    int slides;             /* KV cache may drop its oldest keys */
    const char *variant_key;
    const char *(*variant)(const st_model_config *c, char *buf, size_t n);
    int (*validate)(const st_model_config *c, const char *file, st_error *e);
    void (*exercise)(st_model_config *c);
    /* fills out[0..n) (n <= ST_POS_MAX_PARAMS) and returns n */
    int (*params)(const st_model_config *c, int layer, st_pos_decl *out);
    int64_t (*max_len)(const st_model_config *c);
    const char *limit_why;
    int score_bytes;        /* bytes per attention score (B,H,T,T) its kernels keep for
                             * backward besides the probabilities (cope: its gates) */
    const char *no_cache_positions; /* NULL, or why the sinks cannot take their cache positions
                             * (st_transform.cache_positions); a method that can has its
                             * positions in q, k (qk: the query re-rotated for the sinks) or a
                             * distance-form bias (the sinks' bias at the capped distance) */
    const char *no_sinks;   /* NULL, or why attention sinks (keys outside the window) cannot
                             * be used with this method (cope: gates count over one span) */
    const char *no_doc_mask; /* NULL, or why data.task.doc_mask (keys before the instance
                             * masked) cannot be trained with this method (cope: its training
                             * gates count over the whole causal row); a method may refuse
                             * sinks and still take the mask, whose kept keys are one span */
    const char *unscaled_note; /* NULL, or a warning for a fresh run at model.embed_scale 1 (the
                             * method adds fixed-norm positions the small initial token
                             * embeddings drown in: sinusoidal) */
    int abs_indices;        /* reads absolute token indices (embed, qk or FIRE's i): takes
                             * randomized training positions (st_model.positions) */
    /* x (B,T,C) -> x + positions; NULL with *e set when it cannot (past max_len) */
    st_tensor *(*embed)(st_model *m, st_ctx *ctx, st_tensor *x, int64_t pos0, st_error *e);
    /* *q, *k (B,H,T,D) replaced by their transforms; 0 on failure */
    int (*qk)(st_model *m, st_ctx *ctx, int layer, st_tensor **q, st_tensor **k, int64_t pos0);
    void (*bias_init)(st_pos_bias *pb);
    int (*rho)(const st_model *m, int layer, float *rho);
    void (*cache_keys)(const st_model *m, st_kv_cache *c, int64_t p0, int64_t n);
    st_tensor *(*gate)(st_model *m, st_ctx *ctx, int layer, st_tensor *h);
} st_pos_method;

/* Refuses a method whose table is inconsistent (a bias form without the hooks it needs,
 * a gradient hook without its forward): ST_ERR_CONFIG naming model.pos. Run by
 * st_model_config_validate, so before any provider is set up. */
int st_pos_method_check(int pos, const st_model_config *cfg, const char *file, st_error *e);
/* The same check of any table pm (pos: the index its providers report; tests hand it
 * broken copies of the registered tables). */
int st_pos_table_check(const st_pos_method *pm, int pos, const st_model_config *cfg, const char *file,
                       st_error *e);

/* The method of index pos (asserts 0 <= pos < ST_POS_COUNT). */
const st_pos_method *st_pos_method_of(int pos);

/* The k-th tensor method m declared at model level (layer -1) or in block `layer`. */
static inline st_tensor *st_pos_tensor(st_model *m, int layer, int k) {
    return st_param(&m->params, layer < 0 ? m->p_pos[k] : m->blocks[layer].pos[k]);
}

/* softplus, its inverse and the logistic function, in double (several methods keep a
 * positive parameter as softplus(raw)) */
static inline double st_pos_softplus(double x) { return x > 30 ? x : log1p(exp(x)); }
static inline double st_pos_inv_softplus(double y) { return y > 30 ? y : log(expm1(y)); }
static inline double st_pos_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

#define ST_POS_METHOD_DECL_(ID, name) extern const st_pos_method st_pos_##name;
ST_POS_METHODS(ST_POS_METHOD_DECL_)
#undef ST_POS_METHOD_DECL_

#endif
