/* test_transforms.c - inference-time transforms (include/st_transform.h):
 *   - the sinks + window attention kernel against a double-precision masked reference
 *     (distance bias, general bias, no bias; sinks across key blocks);
 *   - every transform's model logits (PI, NTK, dynamic NTK, YaRN, ReRoPE, ALiBi interpolation,
 *     sinks + window on every method: cope with a window alone, as it refuses sinks) against
 *     a float64 PyTorch transcription (scripts/torch_ref_transforms.py), and that the
 *     transform changes them at all; with the block options too (RMSNorm, SwiGLU, no biases,
 *     qk-norm, grouped-query heads), log-n scaling under a window (n capped at K + W) and
 *     sinks + window on a trained scaling (model.scaling.*, kept by st_model_set_transform);
 *   - identities: PI / NTK / YaRN / alibi_interp at n = L and dynamic NTK below L equal
 *     the plain model; sinks + window with w >= n equals full attention;
 *   - KV-cache decoding equals the full forward under each transform (1e-4), including a
 *     cache that drops keys between its sinks and its window, and dynamic NTK's re-prefill;
 *   - st_rope_freqs' gradient (finite differences) and the applicability errors. */
#include "harness.h"
#include "test_bias_util.h"
#include "test_tail_util.h"
#include "test_transforms_cases.h"
#include "st_transform.h"

#include <stdlib.h>
#include <string.h>

/* a case without a tweak (NULL) is the GPT-2 block with the default options */
static st_arena ar;
static st_ctx ctx;

/* ------------------------------------------------------------ the kernel ---- */
/* double reference: causal, keys j with i - j < window or j < sinks (window 0: all) */
static void masked_ref(const float *q, const float *k, const float *v, float *out, int64_t H, int64_t T, int64_t D,
                       const st_attn_bias *bias, int64_t sinks, int64_t window, int64_t block) {
    double *s = malloc((size_t)T * sizeof(double));
    float b1;
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < T; i++) {
            const float *qi = q + (h * T + i) * D;
            double mx = -INFINITY;
            for (int64_t j = 0; j <= i; j++) {
                s[j] = -INFINITY;
                if (window > 0 && i - j >= window && j >= sinks) continue;
                /* blocks: i's own block of `block` and the one before it */
                if (block > 0 && j < i - i % block - block) continue;
                double dot = 0;
                for (int64_t c = 0; c < D; c++) dot += (double)qi[c] * (double)k[(h * T + j) * D + c];
                s[j] = dot / sqrt((double)D);
                if (bias && bias->fill) { bias->fill(bias, (int)h, i - j, 1, &b1); s[j] += b1; }
                else if (bias) { bias->fill_block(bias, (int)h, i, 1, j, 1, &b1, 1); s[j] += b1; }
                if (s[j] > mx) mx = s[j];
            }
            double z = 0, o[64] = {0};
            for (int64_t j = 0; j <= i; j++) {
                if (s[j] == -INFINITY) continue;
                const double e = exp(s[j] - mx);
                z += e;
                for (int64_t c = 0; c < D; c++) o[c] += e * (double)v[(h * T + j) * D + c];
            }
            for (int64_t c = 0; c < D; c++) out[(h * T + i) * D + c] = (float)(o[c] / z);
        }
    free(s);
}

static void test_kernel(void) {
    const int64_t H = 2, T = 600, D = 8, n = H * T * D;
    st_rng r;
    st_rng_seed(&r, 5);
    float *q = malloc((size_t)n * 4), *k = malloc((size_t)n * 4), *v = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) { q[i] = st_rng_normal(&r); k[i] = st_rng_normal(&r); v[i] = st_rng_normal(&r); }
    dist_state ds = {0.05f};
    st_attn_bias dist = {.fill = dist_fill, .state = &ds}, gen = {.fill_block = gen_fill};
    const st_attn_bias *biases[3] = {NULL, &dist, &gen};
    const char *names[3] = {"no bias", "distance bias", "general bias"};
    /* kc: (sinks, window, block) triples: window inside a key block, sinks spanning a whole
     * key block (300 > 256), a window of 1, more sinks than window, and windows covering
     * everything; blocks inside a key block, on the key blocks' grid (256), starting inside
     * one (250), of one token (a query sees itself and the token before), of 77 and
     * covering everything */
    const int64_t kc[][3] = {{0, 100, 0}, {4, 100, 0}, {3, 1, 0}, {300, 40, 0}, {70, 130, 0}, {5, 600, 0},
                             {5, 1000, 0}, {0, 0, 100}, {0, 0, 256}, {0, 0, 250}, {0, 0, 1}, {0, 0, 77},
                             {0, 0, 600}};
    int64_t shape[4] = {1, H, T, D};
    for (int b = 0; b < 3; b++)
        for (size_t c = 0; c < sizeof kc / sizeof kc[0]; c++) {
            st_ctx_begin(&ctx, 0, 0);
            st_tensor *tq = st_wrap(&ctx, q, 4, shape), *tk = st_wrap(&ctx, k, 4, shape), *tv = st_wrap(&ctx, v, 4, shape);
            const st_attn_mask mask = {.sinks = kc[c][0], .window = kc[c][1], .block = kc[c][2]};
            st_tensor *o = kc[c][2] ? st_attention_clipped(&ctx, tq, tk, tv, NULL, NULL, 0, biases[b], 0.0f, &mask)
                                    : st_attention_window(&ctx, tq, tk, tv, biases[b], 0.0f, kc[c][0], kc[c][1]);
            masked_ref(q, k, v, ref, H, T, D, biases[b], kc[c][0], kc[c][1] >= T ? 0 : kc[c][1], kc[c][2]);
            char what[128];
            snprintf(what, sizeof what, "window kernel, %s, sinks %lld window %lld block %lld", names[b],
                     (long long)kc[c][0], (long long)kc[c][1], (long long)kc[c][2]);
            CHECK_MSG(o && th_close(what, o->data, ref, n, 2e-5, 2e-5), "%s matches the masked double reference", what);
            /* the last rows' queries alone, from a row block's start: the same rows bit for bit */
            for (int64_t from = 64; from < T; from += 320) {
                int64_t qs[4] = {1, H, T - from, D};
                float *qt = st_ctx_alloc(&ctx, (size_t)(H * (T - from) * D) * 4, 0);
                for (int64_t h = 0; qt && h < H; h++)
                    memcpy(qt + h * (T - from) * D, q + (h * T + from) * D, (size_t)((T - from) * D) * 4);
                st_tensor *ot = qt ? st_attention_clipped(&ctx, st_wrap(&ctx, qt, 4, qs), tk, tv, NULL, NULL, 0, biases[b],
                                                          0.0f, &mask) : NULL;
                int same = ot && o;
                for (int64_t h = 0; same && h < H; h++)
                    same = !memcmp(ot->data + h * (T - from) * D, o->data + (h * T + from) * D, (size_t)((T - from) * D) * 4);
                CHECK_MSG(same, "%s: queries from row %lld alone give the same rows bit for bit", what, (long long)from);
            }
            if (kc[c][1] >= T || kc[c][2] >= T) {   /* w or a block >= n: the full attention kernel, bit for bit */
                st_tensor *full = st_attention(&ctx, tq, tk, tv, biases[b], 1, 0.0f, 0.0f, 0);
                CHECK_MSG(full && o && memcmp(full->data, o->data, (size_t)n * 4) == 0,
                          "%s: a window or block >= n equals full attention exactly", names[b]);
            }
        }
    free(q); free(k); free(v); free(ref);
}

/* ---------------------------------------------------------- model level ---- */
/* tweak: the block and method options of a case (NULL: the GPT-2 block, method defaults) */
static int make_model(st_model *m, int pos, void (*tweak)(st_model_config *), uint64_t seed) {
    st_model_config c;
    st_model_config_default(&c);
    c.vocab_size = 37; c.n_layers = 2; c.n_heads = 4; c.d_model = 32; c.d_ff = 48; c.pos = pos; c.max_len = 64;
    if (pos == ST_POS_LEARNED) c.max_len = 160;   /* a table row for every position test_tail reaches */
    c.t5_buckets = 8; c.t5_max_distance = 16;
    c.rope_base = 100.0f;   /* a small base: YaRN's ramp then covers several of the 4 frequencies at L = 8 */
    if (tweak) tweak(&c);
    st_error e = {0};
    if (st_model_init(m, &c, seed, &e) != ST_OK) return 0;
    st_rng r;
    st_rng_seed(&r, seed + 1);
    for (int i = 0; i < m->params.count; i++) {   /* move constant-initialised tensors off their init */
        const st_param_info *in = &m->params.info[i];
        for (size_t k = 0; k < in->numel; k++)
            m->params.data[in->offset + k] += (in->init != ST_INIT_NORMAL ? 0.2f : 0.3f) * st_rng_normal(&r);
    }
    return 1;
}

/* logits (T, V) of ids[0..T) under m->xf into out */
static int full_logits(st_model *m, const int32_t *ids, int64_t T, float *out) {
    st_error e = {0};
    st_ctx_begin(&ctx, 0, 0);
    st_tensor *l = st_model_logits(m, &ctx, ids, 1, T, 0, &e);
    if (!l) return 0;
    memcpy(out, l->data, (size_t)(T * m->cfg.vocab_size) * sizeof(float));
    return 1;
}

enum { TL = 8, TN = 30 };   /* training length L, evaluated length n */

static void set_xf(st_transform *xf, const xcase *c) {
    *xf = (st_transform){.kind = c->kind, .scale = c->scale, .sinks = c->sinks, .window = c->window,
                         .clip = c->clip, .block = c->block, .cache_positions = c->cache, .train_len = TL, .n = TN};
}

static void label(const xcase *c, char *buf, size_t n) {
    st_transform xf;
    set_xf(&xf, c);
    char l[128];
    st_transform_label(&xf, l, sizeof l);
    snprintf(buf, n, "%s + %s%s%s%s", st_pos_name(c->pos), l, c->note ? " (" : "", c->note ? c->note : "",
             c->note ? ")" : "");
}

static int write_case(const char *dir, st_model *m, const st_transform *xf, const int32_t *ids, int64_t T,
                      const float *lg, const st_attn_acc *acc) {
    char path[1024];
    const st_model_config *c = &m->cfg;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"model\": {\"n_layers\": %d, \"n_heads\": %d, \"d_model\": %d, \"pos\": \"%s\", \"alibi_max_bias\": %.9g,"
               " \"alibi_heads\": %d, \"rf\": {\"kind\": \"%s\", \"scope\": \"fixed\", \"rho\": %.9g, \"param\": \"softplus\"},"
               " \"t5_buckets\": %d, \"t5_max_distance\": %d, \"rope_base\": %.9g, \"ln_eps\": %.9g,"
               " \"gelu\": \"%s\", \"tie_embeddings\": %s, \"norm\": \"%s\", \"ffn\": \"%s\", \"bias\": %s,"
               " \"qk_norm\": \"%s\", \"n_kv_heads\": %d, \"attn_scale\": \"%s\", \"attn_scale_len\": %d,"
               " \"xpos\": {\"gamma\": %.9g}, \"embed_scale\": %.9g, \"out_gate\": \"%s\", \"out_norm\": \"%s\","
               " \"kv_shift\": \"%s\", \"scaling\": {\"transform\": \"%s\","
               " \"scale\": %.17g, \"train_len\": %d, \"yarn_alpha\": %.17g, \"yarn_beta\": %.17g}},\n"
               " \"transform\": {\"kind\": \"%s\", \"scale\": %.17g,"
               " \"sinks\": %lld, \"window\": %lld, \"positions\": \"%s\", \"clip\": %lld, \"block\": %lld,"
               " \"train_len\": %lld, \"n\": %lld}}\n",
            c->n_layers, c->n_heads, c->d_model, st_pos_name(c->pos), c->alibi_max_bias, c->alibi_heads,
            st_rf_name(c->rf_kind), c->rf_rho,
            c->t5_buckets, c->t5_max_distance, c->rope_base, c->ln_eps, c->gelu_exact ? "erf" : "tanh",
            c->tie_embeddings ? "true" : "false", st_norm_name(c->norm), st_ffn_name(c->ffn), c->bias ? "true" : "false",
            st_qk_norm_name(c->qk_norm), st_model_kv_heads(c),
            c->attn_scale == ST_ATTN_SCALE_LOGN ? "logn" : c->attn_scale == ST_ATTN_SCALE_LEARNED ? "learned_logn" : "none",
            c->attn_scale_len, c->xpos_gamma, c->embed_scale, st_out_gate_name(c->out_gate), st_out_norm_name(c->out_norm),
            st_kv_shift_name(c->kv_shift), st_transform_name(c->scaling),
            c->scaling_scale,
            c->scaling_len, c->yarn_alpha, c->yarn_beta, st_transform_name(xf->kind), xf->scale, (long long)xf->sinks,
            (long long)xf->window, xf->cache_positions ? "cache" : "text", (long long)st_transform_clip(xf),
            (long long)xf->block, (long long)xf->train_len, (long long)xf->n);
    fclose(f);
    st_error e = {0};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (st_model_save_safetensors(m, path, &e)) return 0;
    snprintf(path, sizeof path, "%s/batch.json", dir);
    if (!(f = fopen(path, "w"))) return 0;
    fprintf(f, "{\"ids\": [[");
    for (int64_t t = 0; t < T; t++) fprintf(f, "%s%d", t ? "," : "", ids[t]);
    fprintf(f, "]], \"logits\": [[");
    for (int64_t t = 0; t < T; t++) {
        fprintf(f, "%s[", t ? "," : "");
        for (int v = 0; v < c->vocab_size; v++) fprintf(f, "%s%.9g", v ? "," : "", lg[t * c->vocab_size + v]);
        fprintf(f, "]");
    }
    fprintf(f, "]]");
    if (acc) {   /* the attention statistics' means (st_attn_acc), [layer][head][stat] */
        int64_t from = 0;   /* acc->tgt: the rows from the first scored one counted (one window) */
        while (acc->tgt && from < T && acc->tgt[from] < 0) from++;
        fprintf(f, ", \"attn_far\": %lld, \"attn_rows_from\": %lld, \"attn\": [", (long long)acc->far, (long long)from);
        for (int l = 0; l < acc->n_layers; l++) {
            fprintf(f, "%s[", l ? "," : "");
            for (int h = 0; h < acc->n_heads; h++) {
                const double *s = acc->sum + ((size_t)l * (size_t)acc->n_heads + (size_t)h) * ST_ATTN_NSTATS;
                const double rows = acc->rows[l * acc->n_heads + h];
                fprintf(f, "%s[%.9g,%.9g,%.9g,%.9g]", h ? "," : "", s[0] / rows, s[1] / rows, s[2] / rows, s[3] / rows);
            }
            fprintf(f, "]");
        }
        fprintf(f, "]");
    }
    fprintf(f, "}\n");
    fclose(f);
    return 1;
}

static void test_torch(const int32_t *ids) {
    const char *src = getenv("STRETCH_SOURCE_DIR");
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        test_skip("transforms vs PyTorch", "/usr/bin/python3 with torch not found (apt-get install python3-torch)");
        return;
    }
    char script[1024];
    snprintf(script, sizeof script, "%s/scripts/torch_ref_transforms.py", src ? src : "..");
    const int V = 37;
    float *plain = malloc((size_t)(TN * V) * 4), *lg = malloc((size_t)(TN * V) * 4);
    /* every case's directory, then one python run over them all (importing torch costs
     * about a second a run); it leaves a verdict in each directory */
    static char dirs[NCASES][512];
    size_t cmd_len = strlen(script) + 64;
    for (int i = 0; i < NCASES; i++) {
        dirs[i][0] = 0;
        st_model m;
        CHECK(make_model(&m, cases[i].pos, cases[i].tweak, 40 + (uint64_t)i));
        st_transform xf;
        set_xf(&xf, &cases[i]);
        char what[160];
        label(&cases[i], what, sizeof what);
        st_error e = {0};
        CHECK_MSG(st_transform_check(&xf, cases[i].pos, "--transform", &e) == ST_OK, "%s: a valid combination (%s)", what,
                  e.msg);
        /* the reference gets the transform as given: it applies the documented rule for a
         * trained scaling (kept under sinks + window alone, replaced by a transform) itself */
        const st_transform given = xf;
        CHECK(full_logits(&m, ids, TN, plain));
        st_model_set_transform(&m, &xf, "test_transforms");
        /* the transformed forward also sums its attention statistics (compared too) */
        double sum[2 * 4 * ST_ATTN_NSTATS] = {0}, rows[2 * 4] = {0};
        st_attn_acc acc = {.n_layers = 2, .n_heads = 4, .far = TL, .sum = sum, .rows = rows};
        m.attn_acc = &acc;
        CHECK(full_logits(&m, ids, TN, lg));
        m.attn_acc = NULL;
        CHECK_MSG(th_max_diff(plain, lg, TN * V) > 1e-3, "%s: the transform changes the logits (by %.3g)", what,
                  th_max_diff(plain, lg, TN * V));
        if (xf.cache_positions && cases[i].pos != ST_POS_NONE) {   /* the sinks moved: not the text positions' logits */
            xf.cache_positions = 0;
            CHECK(full_logits(&m, ids, TN, plain));
            xf.cache_positions = 1;
            CHECK_MSG(th_max_diff(plain, lg, TN * V) > 1e-3, "%s: cache positions change the logits of text positions "
                      "(by %.3g)", what, th_max_diff(plain, lg, TN * V));
        }
        char dir[512];
        if (CHECK(test_tmpdir(dir, sizeof dir) != NULL) && CHECK(write_case(dir, &m, &given, ids, TN, lg, &acc)))
            memcpy(dirs[i], dir, sizeof dir);
        cmd_len += strlen(dirs[i]) + 1;
        st_model_free(&m);
    }
    free(plain);
    free(lg);
    char *cmd = malloc(cmd_len);
    int at = snprintf(cmd, cmd_len, "/usr/bin/python3 %s", script);
    for (int i = 0; i < NCASES; i++)
        if (dirs[i][0]) at += snprintf(cmd + at, cmd_len - (size_t)at, " %s", dirs[i]);
    fflush(stdout);
    const int rc = system(cmd);
    free(cmd);
    for (int i = 0; i < NCASES; i++) {
        char what[160], verdict[16];
        label(&cases[i], what, sizeof what);
        const int good = test_verdict_ok(dirs[i], verdict, sizeof verdict);
        CHECK_MSG(good, "%s: stretch's logits and attention statistics match the float64 "
                  "PyTorch reference (%s)", what, verdict[0] ? verdict : "no verdict");
    }
    CHECK_MSG(rc == 0, "the PyTorch reference passes every case (exit status %d)", rc);
}

/* Sliding-window evaluation's statistics: only rows with a target count (st_attn_acc.tgt),
 * through st_model_loss, whose last block runs from the scored rows' kernel row block (row
 * 64 of 100 here, so rows 64..89 are computed but not counted): against the reference's
 * mean over rows >= 90. A row index off by the block offset fails. */
static void test_scored_rows(void) {
    enum { T = 100, FROM = 90 };
    const char *src = getenv("STRETCH_SOURCE_DIR");
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        test_skip("scored-row statistics vs PyTorch", "/usr/bin/python3 with torch not found");
        return;
    }
    int32_t ids[T + 1], tgt[T];
    for (int t = 0; t <= T; t++) ids[t] = (int32_t)((t * 7 + 3) % 37);
    for (int t = 0; t < T; t++) tgt[t] = t >= FROM ? ids[t + 1] : -1;
    const xcase cs[] = {
        {ST_POS_ALIBI, ST_XF_NONE, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ROPE, ST_XF_NONE, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ALIBI, ST_XF_NONE, 0, 2, 20, 0, 0, NULL, NULL, 0},
    };
    float *lg = malloc((size_t)T * 37 * sizeof *lg);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        st_model m;
        CHECK(make_model(&m, cs[i].pos, NULL, 90 + (uint64_t)i));
        m.cfg.max_len = 0;
        st_transform xf;
        set_xf(&xf, &cs[i]);
        xf.n = T;
        m.xf = &xf;
        CHECK(full_logits(&m, ids, T, lg));
        double sum[2 * 4 * ST_ATTN_NSTATS] = {0}, rows[2 * 4] = {0};
        st_attn_acc acc = {.n_layers = 2, .n_heads = 4, .far = TL, .sum = sum, .rows = rows, .tgt = tgt};
        m.attn_acc = &acc;
        st_error e = {0};
        st_ctx_begin(&ctx, 0, 0);
        CHECK(st_model_loss(&m, &ctx, ids, tgt, 1, T, 0, NULL, &e) != NULL);
        m.attn_acc = NULL;
        CHECK_MSG(rows[0] == T - FROM, "rows counted %g, scored %d", rows[0], T - FROM);
        char dir[512], cmd[2048];
        test_tmpdir(dir, sizeof dir);
        CHECK(write_case(dir, &m, &xf, ids, T, lg, &acc));
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/torch_ref_transforms.py %s", src ? src : "..", dir);
        fflush(stdout);
        CHECK_MSG(system(cmd) == 0, "case %zu: the scored rows' statistics match the float64 PyTorch reference", i);
        st_model_free(&m);
    }
    free(lg);
}

/* PI, NTK, YaRN, alibi_interp at n = L, dynamic NTK at n <= L, sinks + window with
 * w >= n and blocks of n / 2 or more leave the model as it is. */
static void test_identities(const int32_t *ids) {
    const int V = 37;
    float *plain = malloc((size_t)(TN * V) * 4), *lg = malloc((size_t)(TN * V) * 4);
    const xcase same[] = {
        {ST_POS_ROPE, ST_XF_PI, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ROPE, ST_XF_NTK, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ROPE, ST_XF_YARN, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ALIBI, ST_XF_ALIBI_INTERP, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ROPE, ST_XF_DYNAMIC_NTK, 0, 0, 0, 0, 0, NULL, NULL, 0},
        {ST_POS_ROPE, ST_XF_NONE, 0, 3, TL, 0, 0, NULL, NULL, 0},
        {ST_POS_ALIBI, ST_XF_NONE, 0, 2, TL + 5, 0, 0, NULL, NULL, 0},
        {ST_POS_T5, ST_XF_NONE, 0, 1, TL, 0, 0, NULL, NULL, 0},
        {ST_POS_ROPE, ST_XF_REROPE, 0, 0, 0, TL, 0, NULL, NULL, 0},   /* no distance reaches the clip */
        {ST_POS_ALIBI, ST_XF_NONE, 0, 0, 0, 0, 0, NULL, NULL, TL},       /* one block holds every key */
        {ST_POS_XPOS, ST_XF_NONE, 0, 0, 0, 0, 0, NULL, NULL, TL / 2},   /* two blocks: each query sees them whole */
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        st_model m;
        CHECK(make_model(&m, same[i].pos, NULL, 70 + (uint64_t)i));
        st_transform xf;
        set_xf(&xf, &same[i]);
        xf.n = TL;   /* evaluated at the training length */
        CHECK(full_logits(&m, ids, TL, plain));
        m.xf = &xf;
        CHECK(full_logits(&m, ids, TL, lg));
        char what[160];
        label(&same[i], what, sizeof what);
        /* PI and NTK at s = 1 compute the same frequencies; YaRN's mix (1-g) t/1 + g t may
         * differ in the last bit */
        const double tol = same[i].kind == ST_XF_YARN ? 1e-5 : same[i].kind == ST_XF_REROPE ? 1e-6 : 0.0;
        CHECK_MSG(th_max_diff(plain, lg, TL * V) <= tol, "%s at n = L (= %d) equals the plain model (max diff %.3g)",
                  what, TL, th_max_diff(plain, lg, TL * V));
        st_model_free(&m);
    }
    free(plain);
    free(lg);
}

/* Decode ids one by one (a 5-token prefill first) and compare every step's logits with
 * the last row of the full forward over the prefix, under the same transform; with an
 * fp32 cache to 1e-4, with a bf16 one (sinks, rerope's unrotated keys, dynamic_ntk's
 * re-prefills in bf16 too) to 2 x 2^-7 of the largest logit (test_bf16's bound). */
static void test_cached(const int32_t *ids) {
    const int V = 37;
    const int64_t N = 44;
    float *lg = malloc((size_t)(N * V) * 4), *step = malloc((size_t)V * 4);
    for (int prec = ST_PREC_FP32; prec <= ST_PREC_BF16; prec++)
    for (int i = 0; i < NCASES; i++) {
        st_model m;
        CHECK(make_model(&m, cases[i].pos, cases[i].tweak, 90 + (uint64_t)i));
        st_transform xf;
        set_xf(&xf, &cases[i]);
        if (xf.kind != ST_XF_NONE && xf.scale == 0 && xf.kind != ST_XF_DYNAMIC_NTK) xf.n = N;   /* generate: n = context */
        st_model_set_transform(&m, &xf, "test_transforms");
        char what[160];
        label(&cases[i], what, sizeof what);
        st_kv_cache c;
        st_error e = {0};
        /* xpos rescales its cached keys in place: an fp32 cache whatever was asked
         * (st_kv_cache_init, docs/precision.md) */
        const int want_prec = cases[i].pos == ST_POS_XPOS ? ST_PREC_FP32 : prec;
        CHECK(st_kv_cache_init(&c, &m, N, prec, &e) == ST_OK && c.precision == want_prec);
        if (xf.window > 0 && c.slides)
            CHECK_MSG(c.window == xf.window && c.sinks == xf.sinks, "%s: the cache keeps sinks + window", what);
        if (xf.block > 0 && c.slides)
            CHECK_MSG(c.window == 2 * xf.block && c.sinks == 0, "%s: the cache keeps two blocks", what);
        double worst = 0, top = 1.0;
        int64_t fed = 0, resets = 0, ok = 1;
        for (int64_t t = 5; t <= N && ok; t++) {
            st_ctx_begin(&ctx, 0, 0);
            if (fed == 0 || st_kv_cache_must_reset(&c, &m, t - fed)) {
                if (fed) resets++;
                st_kv_cache_reset(&c);
                fed = 0;
            }
            ok = st_model_decode(&m, &c, &ctx, ids + fed, t - fed, step, &e) == ST_OK;
            fed = t;
            ok = ok && full_logits(&m, ids, t, lg);
            if (ok) TH_MAX(worst, th_max_diff(step, lg + (t - 1) * V, V));
            for (int64_t k = 0; ok && k < V; k++) top = fmax(top, fabs((double)lg[(t - 1) * V + k]));
        }
        const double tol = prec == ST_PREC_BF16 ? 2.0 / 128 * top : 1e-4;
        CHECK_MSG(ok && worst <= tol, "%s, %s cache: KV-cache decoding equals the full forward (max diff %.3g%s)", what,
                  st_precision_name(prec), worst, ok ? "" : ", decode failed");
        if (xf.kind == ST_XF_DYNAMIC_NTK)
            CHECK_MSG(resets == N - TL, "dynamic_ntk re-prefills once per token past L (%lld resets)", (long long)resets);
        if ((xf.window > 0 || xf.block > 0) && c.slides)   /* keys before the window or blocks were dropped */
            CHECK_MSG(c.len < c.n_seen && c.rows == c.sinks + c.window + 16, "%s: %lld rows for %lld tokens", what,
                      (long long)c.len, (long long)c.n_seen);
        printf("cached decode, %s, %-40s max |cached - full| %.2e%s\n", st_precision_name(prec), what, worst,
               xf.kind == ST_XF_DYNAMIC_NTK ? " (re-prefill when s changes)" : "");
        st_kv_cache_free(&c);
        st_model_free(&m);
    }
    free(lg);
    free(step);
}

/* The last block on the scored rows only (model.c: hidden_rows) under every transform:
 * token losses equal the full forward's bit for bit (T = 150 crosses the 64-row blocks;
 * the windows and clips of the cases sit inside the tail). */
static void test_tail(void) {
    const int64_t T = 150, froms[][2] = {{100, 70}, {64, 149}, {1, 130}};
    for (int i = 0; i < NCASES; i++) {
        st_model m;
        CHECK(make_model(&m, cases[i].pos, cases[i].tweak, 110 + (uint64_t)i));
        m.cfg.max_len = T;
        st_transform xf;
        set_xf(&xf, &cases[i]);
        xf.n = T;
        st_model_set_transform(&m, &xf, "test_transforms");
        char what[160];
        label(&cases[i], what, sizeof what);
        for (size_t k = 0; k < sizeof froms / sizeof froms[0]; k++) {
            double d;
            const int same = tail_loss_matches(&m, T, froms[k], 120 + k, &d);
            CHECK_MSG(same,
                      "%s: losses scored from rows %lld / %lld equal the full forward's (max diff %.3g)", what,
                      (long long)froms[k][0], (long long)froms[k][1], d);
        }
        st_model_free(&m);
    }
}

/* ------------------------------------------------------ rope op, errors ---- */
typedef struct { st_tensor *x; double inv[4]; float c; } rope_args;
static st_tensor *build_rope(st_ctx *cx, void *u) {
    rope_args *a = u;
    return st_rope_freqs(cx, a->x, a->inv, a->c, 3);
}

static void test_rope_grad(void) {
    /* the leaf lives in a parameter block, so it owns its gradient buffer */
    st_params P;
    st_error e = {0};
    const int64_t shape[4] = {2, 2, 5, 8};
    st_params_init(&P);
    st_params_add(&P, "x", 4, shape, 0, ST_INIT_NORMAL, 1.0f);
    CHECK(st_params_finalize(&P, &e) == ST_OK);
    st_rng r;
    st_rng_seed(&r, 3);
    st_params_init_values(&P, &r);
    st_tensor *x = st_param(&P, 0);
    rope_args a = {x, {1.0, 0.31, 0.1, 0.013}, 1.3f};
    CHECK_MSG(gradcheck("rope_freqs (scaled)", build_rope, &a, &x, 1, 0, 1e-2, 2e-4, 2e-3, 0),
              "st_rope_freqs: gradient matches finite differences (qk_scale 1.3)");
    st_params_free(&P);
}

static void test_errors(void) {
    st_error e = {0};
    st_transform xf = {.kind = ST_XF_PI};
    CHECK(st_transform_check(&xf, ST_POS_ALIBI, "--transform", &e) == ST_ERR_CONFIG);
    CHECK_MSG(strstr(e.msg, "--transform pi") && strstr(e.msg, "rope") && strstr(e.msg, "alibi"),
              "pi on an alibi run names the flag and both methods: %s", e.msg);
    xf = (st_transform){.kind = ST_XF_ALIBI_INTERP};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "eval.transform", &e) == ST_ERR_CONFIG && strstr(e.msg, "eval.transform"));
    xf = (st_transform){.sinks = 4};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "--sinks", &e) == ST_ERR_CONFIG);
    xf = (st_transform){.kind = ST_XF_NTK, .scale = 0.5};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "--scale", &e) == ST_ERR_CONFIG);
    xf = (st_transform){.kind = ST_XF_DYNAMIC_NTK, .scale = 2};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "--scale", &e) == ST_ERR_CONFIG);
    xf = (st_transform){.kind = ST_XF_PI, .clip = 4};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "--clip", &e) == ST_ERR_CONFIG);
    xf = (st_transform){.kind = ST_XF_REROPE, .scale = 2};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "--scale", &e) == ST_ERR_CONFIG);
    xf = (st_transform){.kind = ST_XF_REROPE, .train_len = 64};
    CHECK(st_transform_clip(&xf) == 32);
    xf = (st_transform){.kind = ST_XF_YARN, .sinks = 4, .window = 16};
    CHECK(st_transform_check(&xf, ST_POS_ROPE, "--transform", &e) == ST_OK);
    /* cope counts gates over one contiguous span of keys: sinks refused, a window alone works */
    xf = (st_transform){.sinks = 4, .window = 16};
    CHECK(st_transform_check(&xf, ST_POS_COPE, "--sinks", &e) == ST_ERR_CONFIG && strstr(e.msg, "cope"));
    xf = (st_transform){.window = 16};
    CHECK(st_transform_check(&xf, ST_POS_COPE, "--window", &e) == ST_OK);
    CHECK(st_transform_from_name("yarn") == ST_XF_YARN && st_transform_from_name("bogus") == -1);
    /* s defaults to max(1, n / L); dynamic follows the current length */
    xf = (st_transform){.kind = ST_XF_PI, .train_len = 64, .n = 256};
    CHECK_NEAR(st_transform_scale(&xf, 999), 4.0, 0);
    xf.n = 32;
    CHECK_NEAR(st_transform_scale(&xf, 999), 1.0, 0);
    xf = (st_transform){.kind = ST_XF_DYNAMIC_NTK, .train_len = 64, .n = 4096};
    CHECK_NEAR(st_transform_scale(&xf, 100), 100.0 / 64.0, 1e-15);
    CHECK_NEAR(st_transform_scale(&xf, 50), 1.0, 0);
}

int main(void) {
    st_error e = {0};
    st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &ar, 4096, &e);
    int32_t ids[64];
    st_rng r;
    st_rng_seed(&r, 17);
    for (int i = 0; i < 64; i++) ids[i] = (int32_t)st_rng_below(&r, 37);
    test_errors();
    test_rope_grad();
    test_kernel();
    test_identities(ids);
    test_cached(ids);
    test_tail();
    test_torch(ids);
    test_scored_rows();
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    return test_finish("test_transforms");
}
