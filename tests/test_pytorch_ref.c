/* test_pytorch_ref.c - stretch vs an independent PyTorch implementation (float64) of the
 * same model, for every position method (and the trained scalings of model.scaling.*): the
 * loss and every parameter gradient.
 * The model is exported with the real safetensors writer and re-read by
 * scripts/torch_ref.py (which builds the model from the documented math). Skips with a
 * clear line if /usr/bin/python3 has no torch. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *pos_json(int pos) { return st_pos_name(pos); }

static int write_case(const char *dir, st_model *m, const int32_t *ids, const int32_t *tg,
                      int64_t B, int64_t T, float loss) {
    /* m->positions: randomized training positions, written as "positions"; m->doc: the
     * per-instance mask, as "doc" */
    char path[1024];
    st_error e = {0};
    const st_model_config *c = &m->cfg;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"model\": {\"n_layers\": %d, \"n_heads\": %d, \"d_model\": %d, \"pos\": \"%s\", \"alibi_max_bias\": %.9g,"
               " \"alibi_heads\": %d, \"rf\": {\"kind\": \"%s\", \"scope\": \"%s\", \"rho\": %.9g, \"param\": \"%s\"}, \"t5_buckets\": %d,"
               " \"t5_max_distance\": %d, \"rope_base\": %.9g, \"ln_eps\": %.9g, \"gelu\": \"%s\","
               " \"kerple\": {\"kind\": \"%s\"}, \"attn_scale\": \"%s\", \"attn_scale_len\": %d,"
               " \"tie_embeddings\": %s, \"xpos\": {\"gamma\": %.9g}, \"cope\": {\"n_pos\": %d},"
               " \"scaling\": {\"transform\": \"%s\", \"scale\": %.17g, \"train_len\": %d, \"yarn_alpha\": %.17g,"
               " \"yarn_beta\": %.17g}, \"norm\": \"%s\", \"ffn\": \"%s\", \"bias\": %s, \"qk_norm\": \"%s\","
               " \"n_kv_heads\": %d, \"embed_scale\": %.9g, \"out_gate\": \"%s\", \"out_norm\": \"%s\","
               " \"kv_shift\": \"%s\", \"abacus\": {\"rows\": %d, \"digit0\": %d}}}\n",
            c->n_layers, c->n_heads, c->d_model, pos_json(c->pos), c->alibi_max_bias, c->alibi_heads, st_rf_name(c->rf_kind),
            c->rf_scope == ST_RF_FIXED ? "fixed" : c->rf_scope == ST_RF_PER_LAYER ? "layer" : "head",
            c->rf_rho, c->rf_param == ST_RF_LOG ? "log" : "softplus", c->t5_buckets, c->t5_max_distance, c->rope_base, c->ln_eps,
            c->gelu_exact ? "erf" : "tanh", c->kerple_kind == ST_KERPLE_POWER ? "power" : "log",
            c->attn_scale == ST_ATTN_SCALE_LOGN ? "logn" : c->attn_scale == ST_ATTN_SCALE_LEARNED ? "learned_logn" : "none",
            c->attn_scale_len,
            c->tie_embeddings ? "true" : "false", c->xpos_gamma, c->cope_npos, st_transform_name(c->scaling),
            c->scaling_scale, c->scaling_len, c->yarn_alpha, c->yarn_beta, st_norm_name(c->norm), st_ffn_name(c->ffn),
            c->bias ? "true" : "false", st_qk_norm_name(c->qk_norm), st_model_kv_heads(c), c->embed_scale,
            st_out_gate_name(c->out_gate), st_out_norm_name(c->out_norm), st_kv_shift_name(c->kv_shift),
            c->abacus_rows, c->abacus_digit0);
    fclose(f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (st_model_save_safetensors(m, path, &e)) return 0;
    st_model g = *m;                 /* same table, gradient block as the data */
    g.params.data = m->params.grad;
    snprintf(path, sizeof path, "%s/grads.safetensors", dir);
    if (st_model_save_safetensors(&g, path, &e)) return 0;
    snprintf(path, sizeof path, "%s/batch.json", dir);
    f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"loss\": %.9g, \"ids\": [", loss);
    for (int64_t b = 0; b < B; b++) {
        fprintf(f, "%s[", b ? "," : "");
        for (int64_t t = 0; t < T; t++) fprintf(f, "%s%d", t ? "," : "", ids[b * T + t]);
        fprintf(f, "]");
    }
    fprintf(f, "], \"targets\": [");
    for (int64_t b = 0; b < B; b++) {
        fprintf(f, "%s[", b ? "," : "");
        for (int64_t t = 0; t < T; t++) fprintf(f, "%s%d", t ? "," : "", tg[b * T + t]);
        fprintf(f, "]");
    }
    fprintf(f, "]");
    if (m->positions) {
        fprintf(f, ", \"positions\": [");
        for (int64_t t = 0; t < T; t++) fprintf(f, "%s%lld", t ? "," : "", (long long)m->positions[t]);
        fprintf(f, "]");
    }
    if (m->abacus_k) fprintf(f, ", \"abacus_k\": %lld", (long long)m->abacus_k);   /* train.abacus_max_k's draw */
    if (m->doc) {   /* per-instance attention mask of packed rows (data.task.doc_mask) */
        fprintf(f, ", \"doc\": [");
        for (int64_t b = 0; b < B; b++) {
            fprintf(f, "%s[", b ? "," : "");
            for (int64_t t = 0; t < T; t++) fprintf(f, "%s%d", t ? "," : "", m->doc[b * T + t]);
            fprintf(f, "]");
        }
        fprintf(f, "]");
    }
    fprintf(f, "}\n");
    fclose(f);
    return 1;
}

/* tweak: sets the method's other keys (NULL: defaults); rpos: randomized training
 * positions (a sorted subset of [0, 30), the learned table has 32 rows); doc: the
 * per-instance attention mask of packed rows (data.task.doc_mask), three instances in
 * row 0 and two in row 1 */
struct variant { int pos, rf_kind, rf_scope, heads, gelu_exact, tie, rf_param; void (*tweak)(st_model_config *c); int rpos, doc; };

static void kerple_power(st_model_config *c) { c->kerple_kind = ST_KERPLE_POWER; }
/* FIRE's threshold inside the sequence (T = 11): rows on both sides of max(L, i) */
static void fire_small(st_model_config *c) { c->fire_threshold = 4.5f; c->fire_hidden = 8; }
/* log-n scaling past a training length of 4 (T = 11), and learned per head */
static void logn4(st_model_config *c) { c->attn_scale = ST_ATTN_SCALE_LOGN; c->attn_scale_len = 4; }
static void learned_logn(st_model_config *c) { c->attn_scale = ST_ATTN_SCALE_LEARNED; }
/* trained position scaling (model.scaling.*, context extension) past a base length of 4 */
static void scale_pi(st_model_config *c) { c->scaling = ST_XF_PI; c->scaling_scale = 4; c->scaling_len = 4; }
static void scale_ntk(st_model_config *c) { c->scaling = ST_XF_NTK; c->scaling_scale = 3; c->scaling_len = 4; c->rope_base = 100; }
static void scale_yarn(st_model_config *c) {
    c->scaling = ST_XF_YARN; c->scaling_scale = 3; c->scaling_len = 4; c->yarn_alpha = 0.25; c->yarn_beta = 2;
    c->rope_base = 100;   /* the ramp then splits the 2 frequencies of head size 4 */
}
/* today's decoder block (model.norm, ffn, bias, qk_norm) */
static void llama(st_model_config *c) {
    c->norm = ST_NORM_RMS; c->ffn = ST_FFN_SWIGLU; c->bias = 0; c->qk_norm = ST_QK_NORM_RMS; c->d_ff = 0;
}
static void llama_gqa(st_model_config *c) { llama(c); c->n_kv_heads = 2; }
/* Abacus embeddings: ids 20..29 are the digits (the batch is made of runs of them) */
static void abacus(st_model_config *c) { c->abacus_rows = 24; c->abacus_digit0 = 20; }
static void abacus_fire(st_model_config *c) { fire_small(c); abacus(c); llama(c); }
static void llama_mqa(st_model_config *c) { llama(c); c->n_kv_heads = 1; }
static void geglu(st_model_config *c) { c->ffn = ST_FFN_GEGLU; c->norm = ST_NORM_RMS; }
static void scale_alibi(st_model_config *c) { c->scaling = ST_XF_ALIBI_INTERP; c->scaling_scale = 4; c->scaling_len = 4; }
/* model.embed_scale: sqrt(d_model) (0) before the sinusoids, and a plain factor */
static void alibi_heads3(st_model_config *c) { c->alibi_heads = 3; }   /* 3 heads' slopes, one head unbiased */
static void alibi_heads2_interp(st_model_config *c) { scale_alibi(c); c->alibi_heads = 2; }
/* model.out_gate, O(1) gate weights so the sigmoid's curvature shows (init_std 0.02
 * would leave every gate near 0.5) */
static void gate_elem(st_model_config *c) { c->out_gate = ST_OUT_GATE_ELEMENTWISE; c->init_std = 0.3f; }
static void gate_head_llama(st_model_config *c) { llama_gqa(c); c->out_gate = ST_OUT_GATE_HEADWISE; c->init_std = 0.3f; }
/* the Forgetting Transformer's Pro block (model.out_norm, out_gate, kv_shift on the LLaMA
 * block), and the shifts alone, O(1) shift weights (gates away from 0.5) */
static void pro_llama(st_model_config *c) {
    llama(c); c->out_norm = ST_OUT_NORM_RMS; c->out_gate = ST_OUT_GATE_ELEMENTWISE; c->kv_shift = ST_KV_SHIFT_BOTH;
    c->init_std = 0.3f;
}
/* the q/k norm with each head's own weights (the official Pro block's, here with 2
 * key/value heads), and over the whole projection (OLMo 2) */
static void pro_heads_gqa(st_model_config *c) { pro_llama(c); c->qk_norm = ST_QK_NORM_RMS_HEADS; c->n_kv_heads = 2; }
static void olmo2_full(st_model_config *c) { llama(c); c->qk_norm = ST_QK_NORM_RMS_FULL; c->n_kv_heads = 2; }
static void key_shift_norm(st_model_config *c) { c->kv_shift = ST_KV_SHIFT_KEY; c->out_norm = ST_OUT_NORM_RMS; c->init_std = 0.3f; }
static void value_shift_gqa(st_model_config *c) { llama_gqa(c); c->kv_shift = ST_KV_SHIFT_VALUE; c->init_std = 0.3f; }
static void emb_sqrt(st_model_config *c) { c->embed_scale = 0; }
static void emb_2_5(st_model_config *c) { c->embed_scale = 2.5f; }

int main(void) {
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        test_skip("test_pytorch_ref", "/usr/bin/python3 with torch not found (apt-get install python3-torch)");
        return test_finish("test_pytorch_ref");
    }
    const char *src = getenv("STRETCH_SOURCE_DIR");
    char script[1024];
    snprintf(script, sizeof script, "%s/scripts/torch_ref.py", src ? src : "..");
    const struct variant vs[] = {
        {ST_POS_NONE, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ALIBI, 0, 0, 6, 1, 0, 0, NULL, 0, 0},       /* non-power-of-two slopes, erf GELU, untied head */
        {ST_POS_ALIBI_RF, ST_RF_EXP, ST_RF_FIXED, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ALIBI_RF, ST_RF_EXP, ST_RF_PER_LAYER, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ALIBI_RF, ST_RF_GAUSSIAN, ST_RF_PER_HEAD, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ALIBI_RF, ST_RF_RECIPROCAL, ST_RF_PER_HEAD, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ALIBI_RF, ST_RF_EXP, ST_RF_PER_HEAD, 4, 0, 1, ST_RF_LOG, NULL, 0, 0},
        {ST_POS_SINUSOIDAL, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_LEARNED, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_T5, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_KERPLE, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_SANDWICH, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_KERPLE, 0, 0, 4, 0, 1, 0, kerple_power, 0, 0},
        {ST_POS_FIRE, 0, 0, 4, 0, 1, 0, fire_small, 0, 0},
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, logn4, 0, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, learned_logn, 0, 0},
        {ST_POS_XPOS, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_COPE, 0, 0, 4, 0, 1, 0, NULL, 0, 0},
        {ST_POS_COPE, 0, 0, 6, 1, 0, 0, NULL, 0, 0},    /* positions clamp at n_pos - 1 = 3 */
        {ST_POS_SINUSOIDAL, 0, 0, 4, 0, 1, 0, NULL, 1, 0},   /* train.random_positions */
        {ST_POS_LEARNED, 0, 0, 4, 0, 1, 0, NULL, 1, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, NULL, 1, 0},
        {ST_POS_XPOS, 0, 0, 4, 0, 1, 0, NULL, 1, 0},
        {ST_POS_FIRE, 0, 0, 4, 0, 1, 0, fire_small, 1, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, scale_pi, 0, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, scale_ntk, 0, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, scale_yarn, 0, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, scale_yarn, 1, 0},   /* with randomized positions */
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, scale_alibi, 0, 0},
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, llama, 0, 0},
        {ST_POS_ROPE, 0, 0, 4, 0, 0, 0, llama, 0, 0},      /* untied head */
        {ST_POS_FIRE, 0, 0, 4, 0, 1, 0, llama, 1, 0},      /* with randomized positions */
        {ST_POS_T5, 0, 0, 4, 0, 1, 0, geglu, 0, 0},        /* tanh GeGLU */
        {ST_POS_KERPLE, 0, 0, 4, 1, 1, 0, geglu, 0, 0},    /* erf GeGLU */
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, llama_gqa, 0, 0},  /* 2 key/value heads for 4 query heads */
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, llama_mqa, 0, 0}, /* multi-query */
        {ST_POS_COPE, 0, 0, 4, 0, 1, 0, llama_gqa, 0, 0},
        {ST_POS_NONE, 0, 0, 4, 0, 1, 0, NULL, 0, 1},    /* per-instance mask */
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, NULL, 0, 1},
        {ST_POS_T5, 0, 0, 4, 0, 1, 0, NULL, 0, 1},
        {ST_POS_FIRE, 0, 0, 4, 0, 1, 0, fire_small, 1, 1},
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, llama_gqa, 0, 1},
        {ST_POS_SINUSOIDAL, 0, 0, 4, 0, 1, 0, NULL, 0, 1},
        {ST_POS_SINUSOIDAL, 0, 0, 4, 0, 1, 0, emb_sqrt, 0, 0},   /* tied: the head reads the unscaled table */
        {ST_POS_LEARNED, 0, 0, 4, 0, 0, 0, emb_sqrt, 0, 0},
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, emb_2_5, 0, 0},
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, alibi_heads3, 0, 0},          /* model.alibi_heads */
        {ST_POS_ALIBI, 0, 0, 6, 0, 1, 0, alibi_heads2_interp, 0, 0},   /* with a trained alibi_interp */
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, gate_elem, 0, 0},             /* model.out_gate */
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, gate_head_llama, 0, 0},
        {ST_POS_FOX, 0, 0, 4, 0, 1, 0, gate_elem, 0, 1},               /* FoX's gate and an output gate, doc mask */
        {ST_POS_FOX, 0, 0, 4, 0, 1, 0, NULL, 0, 0},       /* forget gates */
        {ST_POS_FOX, 0, 0, 6, 1, 0, 0, NULL, 0, 1},       /* per-instance mask, untied head */
        {ST_POS_FOX, 0, 0, 4, 0, 1, 0, llama_gqa, 0, 0},
        {ST_POS_FOX, 0, 0, 4, 0, 1, 0, learned_logn, 0, 0},
        {ST_POS_FOX, 0, 0, 4, 0, 1, 0, pro_llama, 0, 1},          /* FoX Pro, per-instance mask */
        {ST_POS_ALIBI, 0, 0, 4, 0, 1, 0, key_shift_norm, 0, 0},   /* model.kv_shift key, model.out_norm */
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, value_shift_gqa, 0, 1},   /* values, 2 key/value heads */
        {ST_POS_FOX, 0, 0, 4, 0, 1, 0, pro_heads_gqa, 0, 1},      /* model.qk_norm rmsnorm_heads */
        {ST_POS_ROPE, 0, 0, 4, 0, 1, 0, olmo2_full, 0, 0},        /* model.qk_norm rmsnorm_full */
        {ST_POS_NONE, 0, 0, 4, 0, 1, 0, abacus, 0, 0},            /* model.abacus (NoPE + Abacus) */
        {ST_POS_NONE, 0, 0, 4, 0, 1, 0, abacus, 1, 0},            /* ... at a training offset k */
        {ST_POS_FIRE, 0, 0, 4, 0, 1, 0, abacus_fire, 1, 1},       /* FIRE + Abacus, random positions, doc mask */
    };
    enum { NV = sizeof vs / sizeof vs[0] };
    static char dirs[NV][512], labels[NV][256];
    static const int32_t doc[22] = {0, 0, 0, 0, 4, 4, 4, 4, 4, 9, 9, 0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6};
    st_arena ar;
    st_ctx ctx;
    st_error e = {0};
    st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &ar, 4096, &e);
    for (size_t vi = 0; vi < NV; vi++) {
        st_model_config c;
        st_model_config_default(&c);
        c.vocab_size = 37; c.n_layers = 2; c.n_heads = vs[vi].heads; c.d_model = 4 * vs[vi].heads;
        c.d_ff = 40; c.pos = vs[vi].pos; c.max_len = 32; c.rf_kind = vs[vi].rf_kind;
        c.rf_scope = vs[vi].rf_scope; c.rf_param = vs[vi].rf_param; c.rf_rho = 3.0f; c.t5_buckets = 8; c.t5_max_distance = 16;
        c.gelu_exact = vs[vi].gelu_exact; c.tie_embeddings = vs[vi].tie;
        c.xpos_gamma = 4.0f;   /* xpos: a visible decay over 11 tokens */
        c.cope_npos = vs[vi].heads == 6 ? 4 : 12;   /* cope: clamped, or room for every position */
        if (vs[vi].tweak) vs[vi].tweak(&c);
        st_model m;
        CHECK(st_model_init(&m, &c, 11 + vi, &e) == ST_OK);
        st_rng r; st_rng_seed(&r, 99 + vi);
        /* move zero/one-initialised tensors off their init so every gradient is exercised */
        for (int i = 0; i < m.params.count; i++) {
            const st_param_info *in = &m.params.info[i];
            if (in->init != ST_INIT_NORMAL)
                for (size_t k = 0; k < in->numel; k++) m.params.data[in->offset + k] += 0.2f * st_rng_normal(&r);
        }
        const int64_t B = 2, T = 11;
        int32_t ids[22], tg[22];
        for (int i = 0; i < 22; i++) { ids[i] = (int32_t)st_rng_below(&r, 37); tg[i] = (int32_t)st_rng_below(&r, 37); }
        tg[5] = -1;   /* an ignored target */
        int64_t P[11];
        if (vs[vi].rpos) {
            st_positions_sample(1000 + vi, 30, T, P);
            m.positions = P;
        }
        if (vs[vi].doc) m.doc = doc;
        if (c.abacus_rows) {   /* runs of 1..7 digits (D), row 1 starting with one (no carry from
                                * row 0's last run); rpos: offset k = 7 */
            static const char runs[] = "DDNDDDDNDDD" "DNNDDDDDDDN";
            for (int i = 0; i < 22; i++)
                ids[i] = runs[i] == 'D' ? 20 + (int32_t)st_rng_below(&r, 10) : (int32_t)st_rng_below(&r, 20);
            m.abacus_k = vs[vi].rpos ? 7 : 0;
        }
        st_params_zero_grad(&m.params);
        st_ctx_begin(&ctx, 1, 0);
        st_tensor *loss = st_model_loss(&m, &ctx, ids, tg, B, T, 0, NULL, &e);
        CHECK(loss && st_backward(&ctx, loss, 1.0f, &e) == ST_OK);
        char *dir = dirs[vi];
        CHECK(test_tmpdir(dir, sizeof dirs[vi]) != NULL);
        CHECK(write_case(dir, &m, ids, tg, B, T, loss->data[0]));
        snprintf(labels[vi], sizeof labels[vi], "%s heads=%d alibi_heads=%d rf=%s/%d/%s gelu=%s tie=%d%s%s%s block %s/%s/bias=%d/qk=%s/kv=%d/gate=%s/onorm=%s/shift=%s",
                 st_pos_name(c.pos), c.n_heads, c.alibi_heads, st_rf_name(c.rf_kind), c.rf_scope, c.rf_param == ST_RF_LOG ? "log" : "softplus",
                 c.gelu_exact ? "erf" : "tanh", c.tie_embeddings, vs[vi].rpos ? " random positions" : vs[vi].doc ? " doc mask" : "",
                 c.scaling ? " scaling " : "", c.scaling ? st_transform_name(c.scaling) : "", st_norm_name(c.norm),
                 st_ffn_name(c.ffn), c.bias, st_qk_norm_name(c.qk_norm), st_model_kv_heads(&c), st_out_gate_name(c.out_gate),
                 st_out_norm_name(c.out_norm), st_kv_shift_name(c.kv_shift));
        char path[600];
        snprintf(path, sizeof path, "%.511s/label.txt", dir);
        FILE *lf = fopen(path, "w");
        CHECK(lf != NULL);
        if (lf) { fprintf(lf, "%s\n", labels[vi]); fclose(lf); }
        st_model_free(&m);
    }
    /* one interpreter checks every case (importing torch takes ~1.5 s; 50 of them were
     * most of this test's time) */
    size_t len = strlen(script) + 32;
    for (size_t vi = 0; vi < NV; vi++) len += strlen(dirs[vi]) + 1;
    char *cmd = malloc(len);
    CHECK(cmd != NULL);
    if (cmd) {
        int o = snprintf(cmd, len, "/usr/bin/python3 %s", script);
        for (size_t vi = 0; vi < NV; vi++) o += snprintf(cmd + o, len - (size_t)o, " %s", dirs[vi]);
        fflush(stdout);
        int rc = system(cmd);
        CHECK_MSG(rc == 0, "scripts/torch_ref.py: every case matches (exit %d)", rc);
        free(cmd);
    }
    /* each case's verdict, so a failure names the case (a case without one: python died) */
    static const char *const files[] = {"config.json", "model.safetensors", "grads.safetensors", "batch.json",
                                        "label.txt", "verdict"};
    for (size_t vi = 0; vi < NV; vi++) {
        int good = test_verdict_ok(dirs[vi], NULL, 0);
        CHECK_MSG(good, "[%s] stretch matches PyTorch (loss and all gradients); case in %s", labels[vi], dirs[vi]);
        if (!good) continue;   /* a failing case's files stay for a look */
        char path[600];
        for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
            snprintf(path, sizeof path, "%.511s/%s", dirs[vi], files[k]);
            remove(path);
        }
        rmdir(dirs[vi]);
    }
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    return test_finish("test_pytorch_ref");
}
