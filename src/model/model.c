/* model.c - the causal LM: parameter table, initialisation, forward and loss.
 *
 *   x = tok_emb[ids] (+ positions)                      (B,T,C)
 *   x = dropout(x)
 *   per block: x += drop(W_o attn(split(W_qkv LN1(x))))  (pre-LN)
 *              x += drop(W_2 gelu(W_1 LN2(x)))
 *   (the GPT-2 block; model.norm, model.ffn, model.bias and model.qk_norm vary it:
 *   src/model/block.c)
 *   h = LN_f(x); logits = h W_head^T (W_head = tok_emb when tied)
 *
 * Initialisation (GPT-2 style): every matrix and embedding N(0, init_std); the two
 * residual output projections (attn.out, ffn.fc2) N(0, init_std / sqrt(2 n_layers)) so
 * the residual stream's variance does not grow with depth; biases 0; LN weight 1.
 * The forward's pieces (embedding, a block's q/k/v, bias and rest) are declared in
 * model_internal.h and shared with incremental decoding (decode.c). The position method
 * enters only through its table (src/model/pos/pos.h): its parameters, embedding, q/k
 * transform and bias. */
#include "pos/pos.h"
#include "st_transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_param(st_model *m, const char *name, int ndim, int64_t d0, int64_t d1,
                     int decay, int init, float v) {
    int64_t shape[2] = {d0, d1};
    return st_params_add(&m->params, name, ndim, shape, decay, init, v);
}

size_t st_model_num_params(const st_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->params.count; i++) n += m->params.info[i].numel;
    return n;
}

/* Declare the position method's tensors of `layer` (-1: model level; else named
 * "blocks.<l>.<name>") and keep their indices in idx; returns the count, or -1 on failure. */
static int declare_pos(st_model *m, const st_pos_method *pm, int layer, int *idx) {
    st_pos_decl d[ST_POS_MAX_PARAMS];
    const int n = pm->params ? pm->params(&m->cfg, layer, d) : 0;
    ST_ASSERT(n >= 0 && n <= ST_POS_MAX_PARAMS);
    char nm[96];
    for (int k = 0; k < n; k++) {
        if (layer < 0) snprintf(nm, sizeof nm, "%s", d[k].name);
        else snprintf(nm, sizeof nm, "blocks.%d.%s", layer, d[k].name);
        idx[k] = add_param(m, nm, d[k].ndim, d[k].d0, d[k].d1, d[k].decay, d[k].init, d[k].value);
        if (idx[k] < 0) return -1;
        m->params.info[idx[k]].is_embedding = d[k].is_embedding;
    }
    return n;
}

/* model.out_gate's weight rows: a gate per value (C) or per head (H); 0 without one */
static int64_t out_gate_rows(const st_model_config *c) {
    return c->out_gate == ST_OUT_GATE_ELEMENTWISE ? c->d_model : c->out_gate == ST_OUT_GATE_HEADWISE ? c->n_heads : 0;
}

/* model.qk_norm's weights for q (heads = n_heads) or k (n_kv_heads): (D) shared by the
 * heads (rmsnorm), each head's own otherwise (st_block_qk_norm) */
static int64_t qk_norm_len(const st_model_config *c, int64_t heads) {
    const int64_t D = c->d_model / c->n_heads;
    return c->qk_norm == ST_QK_NORM_NONE ? 0 : c->qk_norm == ST_QK_NORM_RMS ? D : heads * D;
}

/* model.kv_shift's gate rows: n_kv_heads for each of k and v shifted */
static int64_t kv_shift_rows(const st_model_config *c) {
    return (!!(c->kv_shift & ST_KV_SHIFT_KEY) + !!(c->kv_shift & ST_KV_SHIFT_VALUE)) * (int64_t)st_model_kv_heads(c);
}

/* Floats of the position method's tensors (model level + every layer; a method declares
 * the same tensors in every layer). */
static double pos_param_count(const st_model_config *c, const st_pos_method *pm) {
    st_pos_decl d[ST_POS_MAX_PARAMS];
    double n = 0;
    for (int layer = -1; pm->params && layer <= 0; layer++) {
        const int k = pm->params(c, layer, d);
        for (int i = 0; i < k; i++)
            n += (layer < 0 ? 1.0 : (double)c->n_layers) * (double)d[i].d0 * (double)(d[i].ndim > 1 ? d[i].d1 : 1);
    }
    return n;
}

/* Declare the parameter table (names, shapes, init rules) without allocating the blocks.
 * weights_only: the block will hold the weights alone (inference), 4 bytes a parameter. */
static int model_declare(st_model *m, const st_model_config *cfg, int weights_only, st_error *e) {
    memset(m, 0, sizeof *m);
    int rc = st_model_config_validate(cfg, NULL, e);
    if (rc) return rc;
    if (cfg->vocab_size < 2) return st_fail(e, ST_ERR_CONFIG, "model.vocab_size: must be set (>= 2)");
    if (cfg->abacus_rows > 0 && (cfg->abacus_digit0 < 0 || cfg->abacus_digit0 > cfg->vocab_size - 10))
        return st_fail(e, ST_ERR_CONFIG, "model.abacus.digit0: %d: the ten digit ids must lie in the vocabulary "
                       "[0, %d)", cfg->abacus_digit0, cfg->vocab_size);
    m->cfg = *cfg;
    st_model_config *c = &m->cfg;
    st_model_scaling(c, &m->scaling);   /* the trained scaling applies to every forward */
    m->xf = m->scaling.kind != ST_XF_NONE ? &m->scaling : NULL;
    c->d_ff = st_model_d_ff(c);
    const int64_t V = c->vocab_size, C = c->d_model, F = c->d_ff, L = c->n_layers, F1 = st_model_fc1_rows(c);
    const int64_t D = C / c->n_heads, Hkv = st_model_kv_heads(c), QKV = (c->n_heads + 2 * Hkv) * D;
    const int ln_b = c->norm == ST_NORM_LAYER, lin_b = c->bias != 0;
    const int64_t QN = qk_norm_len(c, c->n_heads), KN = qk_norm_len(c, Hkv);
    const float std = c->init_std, rstd = c->init_std / sqrtf(2.0f * (float)L);

    /* Refuse sizes that cannot fit before allocating anything: parameters, grads and
     * the two AdamW moments are 4 floats per parameter. */
    const st_pos_method *pm = st_pos_method_of(c->pos);
    const double per_block = (double)(QKV + C) * C + (double)(F1 + F) * C + (ln_b ? 4.0 : 2.0) * C +
                             (lin_b ? (double)(QKV + 2 * C + F1) : 0.0) + (double)(QN + KN) +
                             (c->attn_scale == ST_ATTN_SCALE_LEARNED ? (double)c->n_heads : 0.0) +
                             (double)out_gate_rows(c) * C + (c->out_norm ? (double)C : 0.0) +
                             (double)kv_shift_rows(c) * C;
    double nparam = (double)V * C * (c->tie_embeddings ? 1 : 2) + L * per_block + (ln_b ? 2.0 : 1.0) * C +
                    pos_param_count(c, pm) + (double)c->abacus_rows * C;
    double need = nparam * (weights_only ? 4.0 : 16.0), have = (double)st_mem_total();
    if (have > 0 && need > 0.9 * have)
        return st_fail(e, ST_ERR_MEMORY, "model: %.0f parameters (model.vocab_size %d, model.d_model %d, "
                       "model.n_layers %d) need %.2f GiB (%s); this machine has %.2f GiB",
                       nparam, c->vocab_size, c->d_model, c->n_layers, need / 1073741824.0,
                       weights_only ? "weights" : "weights, grads, AdamW m and v", have / 1073741824.0);

    st_params_init(&m->params);
    m->params.weights_only = weights_only;
    m->p_tok_emb = add_param(m, "tok_emb.weight", 2, V, C, 1, ST_INIT_NORMAL, std);
    m->params.info[m->p_tok_emb].is_embedding = 1;
    m->p_lm_head = -1;
    m->n_pos = declare_pos(m, pm, -1, m->p_pos);
    if (m->n_pos < 0) return st_fail(e, ST_ERR_MEMORY, "model: cannot declare the parameters");
    m->p_abacus = -1;
    if (c->abacus_rows > 0) {   /* Abacus rows: N(0, init_std) as the other embeddings */
        if ((m->p_abacus = add_param(m, "abacus_emb.weight", 2, c->abacus_rows, C, 1, ST_INIT_NORMAL, std)) < 0)
            return st_fail(e, ST_ERR_MEMORY, "model: cannot declare the parameters");
        m->params.info[m->p_abacus].is_embedding = 1;
    }
    m->blocks = st_calloc((size_t)L, sizeof *m->blocks, e);
    if (!m->blocks) return ST_ERR_MEMORY;
    char nm[96];
    for (int l = 0; l < L; l++) {
        struct st_block_params *b = &m->blocks[l];
        /* absent tensors (model.norm rmsnorm: no LN bias; model.bias false: no projection
         * biases; no qk_norm) keep index -1 and are not declared, so names stay dense */
        b->ln1_b = b->ln2_b = b->qkv_b = b->out_b = b->fc1_b = b->fc2_b = b->q_norm = b->k_norm = b->out_gate_w = -1;
        b->out_norm_w = b->k_shift_w = b->v_shift_w = -1;
#define P(field, suffix, nd, d0, d1, decay, init, v) do { \
        snprintf(nm, sizeof nm, "blocks.%d.%s", l, suffix); \
        b->field = add_param(m, nm, nd, d0, d1, decay, init, v); } while (0)
        P(ln1_w, "ln1.weight", 1, C, 1, 0, ST_INIT_ONE, 0);
        if (ln_b) P(ln1_b, "ln1.bias", 1, C, 1, 0, ST_INIT_ZERO, 0);
        P(qkv_w, "attn.qkv.weight", 2, QKV, C, 1, ST_INIT_NORMAL, std);
        if (lin_b) P(qkv_b, "attn.qkv.bias", 1, QKV, 1, 0, ST_INIT_ZERO, 0);
        if (c->qk_norm) {
            P(q_norm, "attn.q_norm.weight", 1, QN, 1, 0, ST_INIT_ONE, 0);
            P(k_norm, "attn.k_norm.weight", 1, KN, 1, 0, ST_INIT_ONE, 0);
        }
        if (c->kv_shift & ST_KV_SHIFT_KEY) P(k_shift_w, "attn.k_shift.weight", 2, Hkv, C, 1, ST_INIT_NORMAL, std);
        if (c->kv_shift & ST_KV_SHIFT_VALUE) P(v_shift_w, "attn.v_shift.weight", 2, Hkv, C, 1, ST_INIT_NORMAL, std);
        if (c->out_norm) P(out_norm_w, "attn.out_norm.weight", 1, C, 1, 0, ST_INIT_ONE, 0);
        if (c->out_gate) P(out_gate_w, "attn.out_gate.weight", 2, out_gate_rows(c), C, 1, ST_INIT_NORMAL, std);
        P(out_w, "attn.out.weight", 2, C, C, 1, ST_INIT_NORMAL, rstd);
        if (lin_b) P(out_b, "attn.out.bias", 1, C, 1, 0, ST_INIT_ZERO, 0);
        m->n_pos_block = declare_pos(m, pm, l, b->pos);
        if (m->n_pos_block < 0) return st_fail(e, ST_ERR_MEMORY, "model: cannot declare the parameters");
        const char *sname;
        float s0;
        b->logn_scale = -1;
        if (st_attn_scale_param(c, &sname, &s0)) P(logn_scale, sname, 1, c->n_heads, 1, 0, ST_INIT_CONST, s0);
        P(ln2_w, "ln2.weight", 1, C, 1, 0, ST_INIT_ONE, 0);
        if (ln_b) P(ln2_b, "ln2.bias", 1, C, 1, 0, ST_INIT_ZERO, 0);
        P(fc1_w, "ffn.fc1.weight", 2, F1, C, 1, ST_INIT_NORMAL, std);
        if (lin_b) P(fc1_b, "ffn.fc1.bias", 1, F1, 1, 0, ST_INIT_ZERO, 0);
        P(fc2_w, "ffn.fc2.weight", 2, C, F, 1, ST_INIT_NORMAL, rstd);
        if (lin_b) P(fc2_b, "ffn.fc2.bias", 1, C, 1, 0, ST_INIT_ZERO, 0);
#undef P
    }
    m->p_ln_f_w = add_param(m, "ln_f.weight", 1, C, 1, 0, ST_INIT_ONE, 0);
    m->p_ln_f_b = ln_b ? add_param(m, "ln_f.bias", 1, C, 1, 0, ST_INIT_ZERO, 0) : -1;
    if (!c->tie_embeddings) m->p_lm_head = add_param(m, "lm_head.weight", 2, V, C, 1, ST_INIT_NORMAL, std);
    return ST_OK;
}

size_t st_model_param_floats(const st_model_config *cfg, st_error *e) {
    st_model m;
    size_t n = 0;
    if (model_declare(&m, cfg, 1, e) == ST_OK) n = m.params.n;
    st_model_free(&m);
    return n;
}

void st_model_scaling(const st_model_config *c, st_transform *xf) {
    *xf = (st_transform){0};
    if (c->scaling <= ST_XF_NONE || c->scaling >= ST_XF_COUNT) return;
    xf->kind = c->scaling;
    xf->scale = c->scaling_scale;   /* fixed: the same s at every length, in training and eval */
    xf->train_len = c->scaling_len;
    xf->yarn_alpha = c->yarn_alpha;
    xf->yarn_beta = c->yarn_beta;
}

void st_model_set_transform(st_model *m, st_transform *xf, const char *who) {
    const int trained = m->scaling.kind != ST_XF_NONE;
    if (trained && xf && xf->none_given) {
        char theirs[128];
        st_transform_label(&m->scaling, theirs, sizeof theirs);
        st_log(ST_LOG_INFO, "%s: --transform none keeps the model's trained scaling %s (model.scaling.*); an "
               "identity transform replaces it (--transform %s --scale 1)", who, theirs,
               st_transform_name(m->scaling.kind));
    }
    if (!st_transform_active(xf)) {
        m->xf = trained ? &m->scaling : NULL;
        return;
    }
    if (trained && xf->kind == ST_XF_NONE) {   /* sinks + window or blocks on top of the trained scaling */
        const st_transform w = *xf;
        *xf = m->scaling;
        xf->sinks = w.sinks;
        xf->window = w.window;
        xf->block = w.block;
        xf->cache_positions = w.cache_positions;
        xf->n = w.n;
    } else if (trained) {
        char mine[128], theirs[128];
        st_transform_label(xf, mine, sizeof mine);
        st_transform_label(&m->scaling, theirs, sizeof theirs);
        st_log(ST_LOG_WARN, "%s: transform %s replaces the model's trained scaling %s (model.scaling.*)", who, mine,
               theirs);
    }
    m->xf = xf;
}

int st_model_init(st_model *m, const st_model_config *cfg, uint64_t seed, st_error *e) {
    int rc = model_declare(m, cfg, 0, e);
    if (!rc) rc = st_params_finalize(&m->params, e);
    if (rc) { st_model_free(m); return rc; }
    st_rng rng;
    st_rng_seed(&rng, seed);
    st_params_init_values(&m->params, &rng);
    return ST_OK;
}

int st_model_init_weights(st_model *m, const st_model_config *cfg, st_error *e) {
    int rc = model_declare(m, cfg, 1, e);
    if (!rc) rc = st_params_finalize(&m->params, e);
    if (rc) st_model_free(m);
    return rc;
}

void st_model_free(st_model *m) {
    st_params_free(&m->params);
    free(m->blocks);
    m->blocks = NULL;
}

st_tensor *st_model_embed(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T,
                          int64_t pos0, uint64_t seed, st_error *e) {
    const st_model_config *c = &m->cfg;
    const st_pos_method *pm = st_pos_method_of(c->pos);
    st_tensor *x = st_embedding(ctx, ids, B, T, st_param(&m->params, m->p_tok_emb));
    /* model.embed_scale: Vaswani et al. multiply the token embeddings by sqrt(d_model)
     * before adding the sinusoids, so a token's vector is not swamped by its position's
     * (norm sqrt(C/2)) at init std 0.02; the tied head reads the unscaled table */
    const float s = st_model_embed_scale(c);
    if (s != 1.0f) x = st_scale(ctx, x, s);
    if (pm->embed) x = pm->embed(m, ctx, x, pos0, e);
    x = st_abacus_embed(m, ctx, x, ids, B, T, e);
    if (!x) return NULL;
    return st_dropout(ctx, x, c->dropout_emb, st_hash64(seed, 0));
}

int st_block_qkv(st_model *m, st_ctx *ctx, int l, st_tensor *x, int64_t pos0, int64_t window,
                 st_tensor **q, st_tensor **k, st_tensor **v) {
    ST_ASSERT(!st_pos_method_of(m->cfg.pos)->gate);
    return st_block_qkv2(m, ctx, l, x, pos0, window, q, k, v, NULL, NULL, NULL);
}

/* rerope (st_transform.h): q2 = q rotated at position w in every row, k2 = the keys
 * before the method rotated them, so q2.k2 sees relative position w. */
static int clipped_qk(st_model *m, st_ctx *ctx, st_tensor *q, st_tensor *k, st_tensor **q2, st_tensor **k2) {
    const int64_t w = st_transform_clip(m->xf);
    *q2 = *k2 = NULL;
    if (w <= 0) return 1;
    /* (B,H,T,D) seen as (B*H*T, 1, 1, D): each row is its own sequence at position w */
    const int64_t rows[4] = {q->shape[0] * q->shape[1] * q->shape[2], 1, 1, q->shape[3]};
    st_tensor *r = st_rope(ctx, st_view(ctx, q, 4, rows), m->cfg.rope_base, w);
    *q2 = r ? st_view(ctx, r, 4, q->shape) : NULL;
    *k2 = k;
    return *q2 != NULL;
}

int st_block_qkv2(st_model *m, st_ctx *ctx, int l, st_tensor *x, int64_t pos0, int64_t window, st_tensor **q,
                  st_tensor **k, st_tensor **v, st_tensor **q2, st_tensor **k2, st_tensor **gate) {
    const st_model_config *c = &m->cfg;
    const struct st_block_params *b = &m->blocks[l];
    const st_pos_method *pm = st_pos_method_of(c->pos);
    st_tensor *h = st_block_norm(m, ctx, x, b->ln1_w, b->ln1_b);
    ST_ASSERT(!pm->gate || gate);
    if (gate) *gate = NULL;
    if (pm->gate && !(*gate = pm->gate(m, ctx, l, h))) return 0;   /* FoX: from the same input as q, k, v */
    st_tensor *qkv = st_block_linear(m, ctx, h, b->qkv_w, b->qkv_b);
    if (!qkv || !st_split_qkv_gqa(ctx, qkv, c->n_heads, st_model_kv_heads(c), q, k, v)) return 0;
    if (!st_block_kv_shift(m, ctx, l, h, k, v)) return 0;   /* on the projected rows */
    if (!st_block_qk_norm(m, ctx, l, q, k)) return 0;   /* before the position method */
    if (q2 && !clipped_qk(m, ctx, *q, *k, q2, k2)) return 0;
    st_tensor *q_raw = *q;
    if (pm->qk && !pm->qk(m, ctx, l, q, k, pos0)) return 0;
    if (q2 && !*q2 && st_transform_cache_cap(m->xf) > 0) {   /* sinks at their cache positions */
        if (!st_block_sink_q(m, ctx, l, q_raw, *q, pos0, q2)) return 0;
        *k2 = *q2 ? *k : NULL;
    }
    *q = st_attn_scale_q(m, ctx, l, *q, pos0, window);
    if (q2 && *q2 && !(*q2 = st_attn_scale_q(m, ctx, l, *q2, pos0, window))) return 0;   /* same log-n factor per row */
    return *q && *k && *v;
}

int st_block_bias(st_model *m, st_ctx *ctx, int l, const st_attn_gate *gate, st_attn_bias **bias) {
    const st_model_config *c = &m->cfg;
    const st_pos_method *pm = st_pos_method_of(c->pos);
    *bias = NULL;
    if (!pm->bias_init) return 1;
    /* the provider must outlive the step (backward reads it): arena-owned */
    st_pos_bias *pb = st_ctx_alloc(ctx, sizeof *pb, 0);
    if (!pb) return 0;
    memset(pb, 0, sizeof *pb);
    pb->kind = c->pos;
    pb->n_heads = c->n_heads;
    pb->cfg = c;
    ST_ASSERT(c->n_heads <= ST_MAX_HEADS && m->n_pos + m->n_pos_block <= ST_POS_MAX_PARAMS);
    /* the method's tensors: model level first, then this layer's */
    for (int k = 0; k < m->n_pos + m->n_pos_block; k++) {
        st_tensor *t = k < m->n_pos ? st_pos_tensor(m, -1, k) : st_pos_tensor(m, l, k - m->n_pos);
        pb->p[k] = t->data;
        pb->g[k] = ctx->grad ? t->grad : NULL;
    }
    pb->params = pb->p[0];
    pb->grads = pb->g[0];
    pb->positions = m->positions;
    pm->bias_init(pb);
    ST_ASSERT(!pb->iface.gate == !gate);
    if (gate) pb->gate = *gate;
    st_transform_bias(m->xf, pb);   /* inference-time transform (alibi_interp), if any */
    *bias = &pb->iface;
    return 1;
}

st_tensor *st_block_out(st_model *m, st_ctx *ctx, int l, st_tensor *x, st_tensor *a, uint64_t ls) {
    const st_model_config *c = &m->cfg;
    const struct st_block_params *b = &m->blocks[l];
    a = st_block_out_norm_gate(m, ctx, l, x, st_merge_heads(ctx, a));   /* model.out_norm, out_gate, if any */
    a = st_block_linear(m, ctx, a, b->out_w, b->out_b);
    a = st_dropout(ctx, a, c->dropout_resid, st_hash64(ls, 2));
    x = st_add(ctx, x, a);
    /* feed-forward sub-block */
    st_tensor *h = st_block_ffn(m, ctx, l, st_block_norm(m, ctx, x, b->ln2_w, b->ln2_b));
    h = st_dropout(ctx, h, c->dropout_resid, st_hash64(ls, 3));
    return st_add(ctx, x, h);
}

st_tensor *st_block_keep(st_ctx *ctx, st_tensor *x_in, st_tensor *x, st_arena_mark mark) {
    if (ctx->grad || !x || x == x_in || !st_is_contiguous(x_in) || x_in->base) return x;
    memcpy(x_in->data, x->data, (size_t)st_numel(x) * sizeof(float));
    st_arena_rewind(ctx->arena, mark);
    return x_in;
}

/* Rows [r0, n) along dim `dim` of t (outer..., n, inner...) as a new contiguous tensor.
 * Inference only: nothing is recorded for backward. */
static st_tensor *rows_from(st_ctx *ctx, st_tensor *t, int dim, int64_t r0) {
    if (!t || r0 == 0) return t;
    ST_ASSERT(!ctx->grad && dim < t->ndim && r0 > 0 && r0 < t->shape[dim]);
    t = st_contiguous(ctx, t);
    if (!t) return NULL;
    int64_t outer = 1, inner = 1, shape[4];
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = t->shape[d];
        if (d < dim) outer *= shape[d];
        if (d > dim) inner *= shape[d];
    }
    const int64_t n = shape[dim], keep = n - r0;
    shape[dim] = keep;
    st_tensor *out = st_new(ctx, t->ndim, shape);
    if (!out) return NULL;
    for (int64_t o = 0; o < outer; o++)
        memcpy(out->data + o * keep * inner, t->data + (o * n + r0) * inner, (size_t)(keep * inner) * sizeof(float));
    return out;
}

/* m->attn_acc: ask the next attention call for its per-row statistics (B,H,Tq,NSTATS);
 * NULL when not collecting (or on arena failure, with m->attn_acc set). */
static float *attn_stats_begin(st_model *m, st_ctx *ctx, const st_tensor *q) {
    if (!m->attn_acc || ctx->grad || !q) return NULL;
    float *s = st_ctx_alloc(ctx, (size_t)st_numel(q) / (size_t)q->shape[3] * ST_ATTN_NSTATS * sizeof(float), 0);
    ctx->attn_stats = s;
    ctx->attn_far = m->attn_acc->far;
    return s;
}

/* Add layer l's rows to m->attn_acc, in one fixed order (b, h, row). q's rows are rows
 * [row0, row0 + Tq) of the forward's T (the last block of a sliding window's forward runs
 * from the scored rows' block); with acc->tgt only rows with a target count. */
static void attn_stats_end(st_model *m, st_ctx *ctx, int l, const float *s, const st_tensor *q, int64_t row0,
                           int64_t T_all) {
    st_attn_acc *acc = m->attn_acc;
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2];
    ctx->attn_stats = NULL;
    ST_ASSERT(l < acc->n_layers && H == acc->n_heads);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            double *sum = acc->sum + ((size_t)l * (size_t)H + (size_t)h) * ST_ATTN_NSTATS;
            for (int64_t i = 0; i < T; i++) {
                const float *r = s + ((b * H + h) * T + i) * ST_ATTN_NSTATS;
                if (isnan(r[0])) continue;   /* a row that sees no key */
                if (acc->tgt && acc->tgt[b * T_all + row0 + i] < 0) continue;   /* not scored */
                for (int x = 0; x < ST_ATTN_NSTATS; x++) sum[x] += r[x];
                acc->rows[l * H + h] += 1;
            }
        }
}

/* The final hidden states of rows [from, T) only, (B, T-from, C). Every block but the last
 * needs all T rows (their keys and values feed later rows), but the last block's output
 * is read only by the LM head, so from > 0 (inference) runs its queries, attention
 * output, feed-forward and LN_f on the rows from the kernel's row block containing `from`
 * on: sliding-window evaluation scores S of L rows, so a 2-layer model's forward at
 * L = 2048, S = 32 costs about half. Keys and values are computed for every row as in the
 * full forward, and the attention keeps the full call's row blocks (st_attention_clipped),
 * so the rows come out as the full forward's. */
static st_tensor *hidden_rows(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T, int64_t from,
                              uint64_t seed, st_error *e) {
    const st_model_config *c = &m->cfg;
    /* training applies the trained scaling only; other transforms are inference-time */
    ST_ASSERT(!m->xf || !ctx->grad || m->xf == &m->scaling);
    ST_ASSERT(from == 0 || (!ctx->grad && !ctx->train && !m->doc && from < T));
    st_tensor *x = st_model_embed(m, ctx, ids, B, T, 0, seed, e);
    /* Inference mode keeps nothing for backward, so each block's intermediates are freed
     * once its output is copied back over x (st_block_keep): memory is one block's
     * activations, not n_layers of them (matters at L = 16k). */
    for (int l = 0; l < c->n_layers && x; l++) {
        st_tensor *x_in = x;
        st_arena_mark mark = st_arena_mark_get(ctx->arena);
        uint64_t ls = st_hash64(seed, 1 + (uint64_t)l);
        st_tensor *q = NULL, *k = NULL, *v = NULL, *q2 = NULL, *k2 = NULL, *gt = NULL;
        st_attn_bias *bias = NULL;
        if (!st_block_qkv2(m, ctx, l, x, 0, st_attn_scale_keys(m->xf, 0), &q, &k, &v, &q2, &k2, &gt) ||
            !st_block_expand_kv(m, ctx, &k, &v, &k2))
            return NULL;
        const st_attn_gate gate = {gt, gt ? gt->data : NULL, T};   /* FoX: c of the T rows */
        if (!st_block_bias(m, ctx, l, gt ? &gate : NULL, &bias)) return NULL;
        const int tail = from > 0 && l == c->n_layers - 1;
        const int64_t f = tail ? from - from % st_attention_row_block(ctx) : 0;   /* first query row */
        q = rows_from(ctx, q, 2, f);
        q2 = rows_from(ctx, q2, 2, f);
        /* an inference-time transform's sinks + window, blocks or clipped positions, or a tail of
         * the queries: the streamed kernel with those fields; else the plain kernel. Sinks
         * at their cache positions have their own bias once rows pass cap (sinks.c). */
        const int windowed = m->xf && m->xf->window > 0;
        const int64_t cap = st_transform_cache_cap(m->xf);
        float *sb = NULL;
        int64_t sb_rows = 0;
        if (windowed && cap > 0 && cap < T - 1 && st_pos_method_of(c->pos)->bias_form == ST_POS_BIAS_DISTANCE &&
            !(sb = st_block_sink_bias(m, ctx, l, T - f, m->xf->sinks, f, &sb_rows)))
            return NULL;
        float *stats = attn_stats_begin(m, ctx, q);
        if (m->attn_acc && !ctx->grad && !stats) return NULL;
        const st_attn_mask mask = {.sinks = windowed ? m->xf->sinks : 0, .window = windowed ? m->xf->window : 0,
                                   .block = m->xf ? m->xf->block : 0, .sink_bias = sb, .sink_rows = sb_rows};
        st_tensor *a = windowed || mask.block > 0 || q2 || f > 0
                           ? st_attention_clipped(ctx, q, k, v, q2, k2, st_model_q2_clip(m), bias, 0.0f, &mask)
                           : st_attention_doc(ctx, q, k, v, bias, 1, 0.0f, c->dropout_attn, st_hash64(ls, 1), m->doc);
        if (stats && a) attn_stats_end(m, ctx, l, stats, q, f, T);
        if (tail) {   /* the rest of the block on rows [from, T) */
            x = st_block_out(m, ctx, l, rows_from(ctx, x, 1, from), rows_from(ctx, a, 2, from - f), ls);
            break;
        }
        x = st_block_keep(ctx, x_in, st_block_out(m, ctx, l, x, a, ls), mark);
    }
    return st_block_norm(m, ctx, x, m->p_ln_f_w, m->p_ln_f_b);
}

st_tensor *st_model_hidden(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T,
                           uint64_t seed, st_error *e) {
    return hidden_rows(m, ctx, ids, B, T, 0, seed, e);
}

st_tensor *st_model_head_weight(st_model *m) {
    return st_param(&m->params, m->cfg.tie_embeddings ? m->p_tok_emb : m->p_lm_head);
}

st_tensor *st_model_logits(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T,
                           uint64_t seed, st_error *e) {
    st_tensor *h = st_model_hidden(m, ctx, ids, B, T, seed, e);
    return st_linear(ctx, h, st_model_head_weight(m), NULL);
}

/* The first row any batch row scores (targets -1 are not scored) when the forward may
 * skip the rows before it (inference without a per-instance mask), else 0. */
static int64_t first_scored_row(const st_model *m, const st_ctx *ctx, const int32_t *targets, int64_t B, int64_t T) {
    if (ctx->grad || ctx->train || m->doc) return 0;
    int64_t from = T - 1;   /* at least one row, even when none is scored */
    for (int64_t b = 0; b < B && from > 0; b++)
        for (int64_t r = 0; r < from; r++)
            if (targets[b * T + r] != -1) { from = r; break; }
    return from;
}

st_tensor *st_model_loss(st_model *m, st_ctx *ctx, const int32_t *ids, const int32_t *targets,
                         int64_t B, int64_t T, uint64_t seed, float *tok_loss, st_error *e) {
    const int64_t from = first_scored_row(m, ctx, targets, B, T), n = T - from;
    st_tensor *h = hidden_rows(m, ctx, ids, B, T, from, seed, e);
    if (!h) return NULL;
    const int32_t *tg = targets;
    float *tl = tok_loss;
    if (from > 0) {   /* the targets of rows [from, T), and their losses scattered back below */
        int32_t *tt = st_ctx_alloc(ctx, (size_t)(B * n) * sizeof *tt, 0);
        tl = tok_loss && tt ? st_ctx_alloc(ctx, (size_t)(B * n) * sizeof *tl, 0) : NULL;
        if (!tt || (tok_loss && !tl)) return NULL;
        for (int64_t b = 0; b < B; b++) memcpy(tt + b * n, targets + b * T + from, (size_t)n * sizeof *tt);
        tg = tt;
    }
    int64_t shape[2] = {B * n, m->cfg.d_model};
    st_tensor *loss = st_linear_cross_entropy(ctx, st_view(ctx, h, 2, shape), st_model_head_weight(m), tg, -1, tl);
    if (loss && from > 0 && tok_loss)
        for (int64_t b = 0; b < B; b++) {
            memset(tok_loss + b * T, 0, (size_t)from * sizeof *tok_loss);   /* unscored rows: 0, as the op writes */
            memcpy(tok_loss + b * T + from, tl + b * n, (size_t)n * sizeof *tok_loss);
        }
    return loss;
}

/* One step of (B,T) in a scratch arena capped at `limit` bytes: its high-water mark. */
static size_t measure_step(st_model *m, int64_t B, int64_t T, int grad, size_t limit, st_error *e) {
    st_arena a;
    st_ctx ctx;
    /* it grows by chunks to the step's size (the high water counts the allocations, not
     * the chunks); a small start keeps a tiny model's measurement cheap under ASan */
    if (st_arena_init(&a, (size_t)1 << 20, limit, e)) return 0;
    if (st_ctx_init(&ctx, &a, 1 << 16, e)) { st_arena_free(&a); return 0; }
    size_t n = (size_t)(B * T);
    int32_t *ids = st_calloc(n, sizeof(int32_t), e);
    size_t bytes = 0;
    if (ids) {
        st_ctx_begin(&ctx, grad, grad);
        st_tensor *loss = st_model_loss(m, &ctx, ids, ids, B, T, 0, NULL, e);
        if (loss && grad) st_backward(&ctx, loss, 1.0f, e);
        if (!st_ctx_check(&ctx, e) && loss) bytes = a.high_water;
        if (grad) st_params_zero_grad(&m->params);
        free(ids);
    }
    st_ctx_free(&ctx);
    st_arena_free(&a);
    return bytes;
}

/* Refuse before allocating: every activation is linear in B*T except what attention keeps
 * for backward, P (B,H,T,T) floats per layer plus a (B,H,T,T) byte mask with attention
 * dropout (src/ops/attention.c), the position method's score_bytes (CoPE's gates), and
 * with a general (i, j) bias (fire) its (H,T,T) table per layer plus one (H,T,T)
 * gradient. A short proxy step (B=1, t <= 64) gives the bytes per token once its own t^2
 * part is removed, and
 *     estimate = B*T*per_token + grad * (L*H*B*T^2*(4 + mask + score_bytes) + general * (L+1)*H*T^2*4).
 * A step estimated above 90% of physical memory is refused with that figure; the real
 * measurement then runs in an arena capped at the same limit, so even a wrong estimate
 * ends in an arena overflow (ST_ERR_MEMORY), never in the OOM killer. */
size_t st_model_step_bytes(st_model *m, int64_t B, int64_t T, int grad, st_error *e) {
    size_t mem = st_mem_total();
    size_t limit = mem ? mem / 10 * 9 : (size_t)-1;
    if (B < 1 || T < 1) { st_fail(e, ST_ERR_CONFIG, "step of %lld x %lld tokens: sizes must be >= 1", (long long)B, (long long)T); return 0; }
    const int64_t t = T < 64 ? T : 64;
    if (B > 1 || T > t) {
        size_t proxy = measure_step(m, 1, t, grad, limit, e);
        if (!proxy) return 0;
        const st_model_config *c = &m->cfg;
        const double kept = 4.0 + (c->dropout_attn > 0.0f) + st_pos_method_of(c->pos)->score_bytes;
        double attn = grad ? (double)c->n_layers * c->n_heads * kept : 0.0;
        const int general = st_pos_method_of(c->pos)->bias_form == ST_POS_BIAS_GENERAL;
        double gen = grad && general ? (double)(c->n_layers + 1) * c->n_heads * 4.0 : 0.0;
        double per_tok = ((double)proxy - (attn + gen) * (double)t * (double)t) / (double)t;
        if (per_tok < 0) per_tok = 0;
        double est = (double)B * (double)T * per_tok + (attn * (double)B + gen) * (double)T * (double)T;
        if (mem && est > (double)limit) {
            st_fail(e, ST_ERR_MEMORY, "a %s step of train.batch_size %lld x train.seq_len %lld tokens needs about %.2f GiB of "
                    "activations%s; this machine has %.2f GiB (lower train.batch_size or train.seq_len)",
                    grad ? "training" : "forward", (long long)B, (long long)T, est / 1073741824.0,
                    grad ? " (incl. the attention probabilities kept for backward)" : "", (double)mem / 1073741824.0);
            return 0;
        }
    }
    return measure_step(m, B, T, grad, limit, e);
}
