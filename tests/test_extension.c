/* test_extension.c - trained position scaling (model.scaling.*, context extension by
 * fine-tuning; docs/extension.md):
 *   - a model whose config carries a scaling, with the base model's weights (zero
 *     fine-tuning steps), gives the base model's logits under the matching inference-time
 *     transform (PI, NTK, YaRN with its default and non-default ramp, ALiBi interpolation),
 *     and the scaling changes the logits;
 *   - the training forward (with gradients) applies it: the inference loss, and
 *     finite-difference gradients through the whole model with each scaling on;
 *   - randomized training positions reach the scaled rotation;
 *   - the KV-cache decode of a scaled model equals its full forward;
 *   - an explicit transform replaces the scaling, a window-only one keeps it;
 *   - config errors name the key (scale below 1, YaRN ramp, keys without their transform,
 *     a transform of another method, inference-only transforms, a length below the
 *     scaling's train_len). */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#define V 19
#define TN 24

typedef struct scase { int pos, kind; double scale; int train_len; double alpha, beta; } scase;

static const scase cases[] = {
    {ST_POS_ROPE, ST_XF_PI, 4, 8, 1, 32},
    {ST_POS_ROPE, ST_XF_NTK, 3, 8, 1, 32},
    {ST_POS_ROPE, ST_XF_YARN, 4, 8, 1, 32},
    {ST_POS_ROPE, ST_XF_YARN, 2.5, 8, 0.5, 4},   /* another ramp: more frequencies interpolated in part */
    {ST_POS_ALIBI, ST_XF_ALIBI_INTERP, 4, 8, 1, 32},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void model_cfg(st_model_config *c, int pos) {
    st_model_config_default(c);
    c->vocab_size = V; c->n_layers = 2; c->n_heads = 2; c->d_model = 16; c->d_ff = 24; c->pos = pos;
    c->rope_base = 100.0f;   /* a small base: YaRN's ramp covers several of the 4 frequencies at L = 8 */
}

static void scaled_cfg(st_model_config *c, const scase *s) {
    model_cfg(c, s->pos);
    c->scaling = s->kind;
    c->scaling_scale = s->scale;
    c->scaling_len = s->train_len;
    c->yarn_alpha = s->alpha;
    c->yarn_beta = s->beta;
}

/* st_model_init plus noise on the constant-initialised tensors; the same seed gives the
 * same weights whatever the scaling (it declares no parameter) */
static void make(st_model *m, const st_model_config *c, uint64_t seed) {
    st_error e = {0};
    ST_ASSERT(st_model_init(m, c, seed, &e) == ST_OK);
    st_rng r;
    st_rng_seed(&r, seed + 1);
    for (int i = 0; i < m->params.count; i++) {
        const st_param_info *in = &m->params.info[i];
        for (size_t k = 0; k < in->numel; k++) m->params.data[in->offset + k] += 0.3f * st_rng_normal(&r);
    }
}

static st_arena ar;
static st_ctx ctx;

static int logits(st_model *m, const int32_t *ids, int64_t T, float *out) {
    st_error e = {0};
    st_ctx_begin(&ctx, 0, 0);
    st_tensor *l = st_model_logits(m, &ctx, ids, 1, T, 0, &e);
    if (!l) return 0;
    memcpy(out, l->data, (size_t)(T * V) * sizeof(float));
    return 1;
}

static void label(const scase *s, char *buf, size_t n) {
    snprintf(buf, n, "%s %s s=%g L=%d alpha=%g beta=%g", st_pos_name(s->pos), st_transform_name(s->kind), s->scale,
             s->train_len, s->alpha, s->beta);
}

static void test_zero_steps(const int32_t *ids) {
    float *a = malloc(TN * V * sizeof(float)), *b = malloc(TN * V * sizeof(float)), *p = malloc(TN * V * sizeof(float));
    for (int i = 0; i < NCASES; i++) {
        const scase *s = &cases[i];
        char what[128];
        label(s, what, sizeof what);
        st_model_config c;
        model_cfg(&c, s->pos);
        st_model base, scaled;
        make(&base, &c, 70 + (uint64_t)i);
        scaled_cfg(&c, s);
        make(&scaled, &c, 70 + (uint64_t)i);
        CHECK_MSG(base.xf == NULL && scaled.xf == &scaled.scaling, "%s: the scaled model applies its own scaling", what);
        st_transform xf = {.kind = s->kind, .scale = s->scale, .train_len = s->train_len, .yarn_alpha = s->alpha,
                           .yarn_beta = s->beta, .n = TN};
        CHECK(logits(&base, ids, TN, p));
        st_model_set_transform(&base, &xf, "test");
        CHECK(logits(&base, ids, TN, a));
        CHECK(logits(&scaled, ids, TN, b));
        CHECK_MSG(th_max_diff(a, b, TN * V) <= 1e-5, "%s: scaled model == base model + transform (max diff %.2g)", what,
                  th_max_diff(a, b, TN * V));
        CHECK_MSG(th_max_diff(a, p, TN * V) > 1e-3, "%s: the scaling changes the logits (by %.3g)", what,
                  th_max_diff(a, p, TN * V));
        /* without the transform the base model is plain again */
        st_model_set_transform(&base, NULL, "test");
        CHECK(logits(&base, ids, TN, a) && th_max_diff(a, p, TN * V) == 0.0);
        st_model_free(&base);
        st_model_free(&scaled);
    }
    free(a); free(b); free(p);
}

/* the loss of a grad forward equals the inference one (the scaling is on in training) */
static void test_training(const int32_t *ids) {
    int32_t tg[TN];
    for (int t = 0; t < TN; t++) tg[t] = ids[(t + 1) % TN];
    for (int i = 0; i < NCASES; i++) {
        const scase *s = &cases[i];
        char what[160];
        label(s, what, sizeof what);
        st_model_config c;
        scaled_cfg(&c, s);
        st_model m, plain;
        make(&m, &c, 90 + (uint64_t)i);
        model_cfg(&c, s->pos);
        make(&plain, &c, 90 + (uint64_t)i);
        st_error e = {0};
        st_ctx_begin(&ctx, 0, 0);
        st_tensor *l0 = st_model_loss(&m, &ctx, ids, tg, 1, TN, 7, NULL, &e);
        const float inf_loss = l0 ? l0->data[0] : NAN;
        st_ctx_begin(&ctx, 0, 0);
        st_tensor *lp = st_model_loss(&plain, &ctx, ids, tg, 1, TN, 7, NULL, &e);
        const float plain_loss = lp ? lp->data[0] : NAN;
        st_params_zero_grad(&m.params);
        st_ctx_begin(&ctx, 1, 0);
        st_tensor *l1 = st_model_loss(&m, &ctx, ids, tg, 1, TN, 7, NULL, &e);
        /* (the training attention kernel keeps the probabilities, the inference one streams:
         * equal up to float rounding) */
        CHECK_MSG(l1 && fabsf(l1->data[0] - inf_loss) < 1e-5f && fabsf(inf_loss - plain_loss) > 1e-3f,
                  "%s: the training forward applies the scaling (loss %.6f, inference %.6f, unscaled %.6f)", what,
                  l1 ? l1->data[0] : NAN, inf_loss, plain_loss);
        /* finite differences of the loss against every parameter, scaling on (T = 12,
         * past the scaling's L = 8 so every frequency band is exercised) */
        st_tensor *leaves[256];
        int n = 0;
        for (int k = 0; k < m.params.count; k++) leaves[n++] = st_param(&m.params, k);
        th_fwd a = {&m, ids, tg, 1, 12};
        char name[200];
        snprintf(name, sizeof name, "model %s", what);
        gradcheck(name, th_model_loss, &a, leaves, n, 0, 1e-2, 2e-4, 2e-2, 16);
        st_model_free(&m);
        st_model_free(&plain);
    }
}

/* randomized positions 0..T-1 give the natural positions' loss; a shifted subset keeps a
 * scaled RoPE's loss (relative rotations), another subset changes it */
static void test_positions(const int32_t *ids) {
    st_model_config c;
    scaled_cfg(&c, &cases[2]);
    st_model m;
    make(&m, &c, 5);
    int32_t tg[TN];
    for (int t = 0; t < TN; t++) tg[t] = ids[(t + 3) % TN];
    st_error e = {0};
    float loss[4];
    int64_t P[3][TN];
    for (int t = 0; t < TN; t++) { P[0][t] = t; P[1][t] = t + 17; P[2][t] = t * 2; }
    for (int k = 0; k < 4; k++) {
        m.positions = k ? P[k - 1] : NULL;
        st_ctx_begin(&ctx, 1, 0);
        st_tensor *l = st_model_loss(&m, &ctx, ids, tg, 1, TN, 0, NULL, &e);
        loss[k] = l ? l->data[0] : NAN;
    }
    m.positions = NULL;
    CHECK_MSG(loss[1] == loss[0], "yarn-scaled rope: positions 0..T-1 == natural positions");
    CHECK_MSG(fabsf(loss[2] - loss[0]) < 1e-5f, "yarn-scaled rope: shifted positions keep the loss (%.7f vs %.7f)",
              loss[2], loss[0]);
    CHECK_MSG(fabsf(loss[3] - loss[0]) > 1e-4f, "yarn-scaled rope: spread positions change the loss");
    st_model_free(&m);
}

/* the cached decode of a scaled model equals its full forward, token by token */
static void test_decode(const int32_t *ids) {
    const int sel[2] = {2, 4};   /* yarn, alibi_interp */
    float *full = malloc(TN * V * sizeof(float)), *lg = malloc(V * sizeof(float));
    for (int si = 0; si < 2; si++) {
        const scase *s = &cases[sel[si]];
        st_model_config c;
        scaled_cfg(&c, s);
        st_model m;
        make(&m, &c, 11);
        CHECK(logits(&m, ids, TN, full));
        st_error e = {0};
        st_kv_cache kv;
        CHECK(st_kv_cache_init(&kv, &m, TN, ST_PREC_FP32, &e) == ST_OK);
        st_ctx_begin(&ctx, 0, 0);
        double worst = 0;
        int ok = st_model_decode(&m, &kv, &ctx, ids, 5, lg, &e) == ST_OK;
        TH_MAX(worst, th_max_diff(lg, full + 4 * V, V));
        for (int t = 5; ok && t < TN; t++) {
            ok = st_model_decode(&m, &kv, &ctx, ids + t, 1, lg, &e) == ST_OK;
            TH_MAX(worst, th_max_diff(lg, full + (int64_t)t * V, V));
        }
        CHECK_MSG(ok && worst <= 1e-4, "%s: cached decode == full forward (max diff %.2g)", st_transform_name(s->kind),
                  worst);
        st_kv_cache_free(&kv);
        st_model_free(&m);
    }
    free(full); free(lg);
}

/* an explicit transform replaces the trained scaling; sinks + window alone keep it */
static void test_override(const int32_t *ids) {
    st_model_config c;
    scaled_cfg(&c, &cases[2]);   /* yarn s=4 */
    st_model m, base;
    make(&m, &c, 21);
    model_cfg(&c, ST_POS_ROPE);
    make(&base, &c, 21);
    float *a = malloc(TN * V * sizeof(float)), *b = malloc(TN * V * sizeof(float));
    st_transform pi = {.kind = ST_XF_PI, .scale = 2, .train_len = 8, .n = TN};
    st_transform pi2 = pi;
    st_model_set_transform(&m, &pi, "test");
    st_model_set_transform(&base, &pi2, "test");
    CHECK(logits(&m, ids, TN, a) && logits(&base, ids, TN, b));
    CHECK_MSG(th_max_diff(a, b, TN * V) == 0.0, "an explicit transform replaces the trained scaling");
    st_transform w = {.sinks = 2, .window = 6, .n = TN};
    st_transform wy = {.kind = ST_XF_YARN, .scale = 4, .train_len = 8, .yarn_alpha = 1, .yarn_beta = 32, .sinks = 2,
                       .window = 6, .n = TN};
    st_model_set_transform(&m, &w, "test");
    st_model_set_transform(&base, &wy, "test");
    CHECK_MSG(w.kind == ST_XF_YARN && w.scale == 4, "a window-only transform takes the trained scaling");
    CHECK(logits(&m, ids, TN, a) && logits(&base, ids, TN, b));
    CHECK_MSG(th_max_diff(a, b, TN * V) == 0.0, "sinks + window on a scaled model == base + yarn + sinks + window");
    st_model_set_transform(&m, NULL, "test");
    CHECK(m.xf == &m.scaling);
    free(a); free(b);
    st_model_free(&m);
    st_model_free(&base);
}

/* a config text with one change; the error must name `key` (and `frag` when given) */
static void bad_config(const char *model_extra, const char *train_extra, const char *key, const char *frag) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"n_layers\": 1, \"d_model\": 16, \"n_heads\": 2, %s},"
             " \"data\": {\"source\": \"synthetic\"}, \"train\": {\"seq_len\": 32%s}}",
             model_extra, train_extra);
    st_run_config c;
    st_error e = {0};
    int rc = st_run_config_parse(json, strlen(json), "x.json", NULL, 0, &c, &e);
    CHECK_MSG(rc == ST_ERR_CONFIG && strstr(e.msg, key) && (!frag || strstr(e.msg, frag)),
              "refused naming %s: %s", key, e.msg);
}

static void test_config_errors(void) {
    const char *rope = "\"pos\": \"rope\"";
    char m[512];
#define M(...) (snprintf(m, sizeof m, __VA_ARGS__), m)
    bad_config(M("%s, \"scaling\": {\"transform\": \"pi\", \"scale\": 0.5}", rope), "", "model.scaling.scale", NULL);
    bad_config(M("%s, \"scaling\": {\"transform\": \"pi\", \"scale\": 0}", rope), "", "model.scaling.scale", NULL);
    bad_config(M("%s, \"scaling\": {\"transform\": \"pi\", \"scale\": -2}", rope), "", "model.scaling.scale", NULL);
    bad_config(M("%s, \"scaling\": {\"scale\": 4}", rope), "", "model.scaling.scale", "does nothing");
    bad_config(M("%s, \"scaling\": {\"train_len\": 16}", rope), "", "model.scaling.train_len", "does nothing");
    bad_config(M("\"pos\": \"alibi\", \"scaling\": {\"transform\": \"pi\", \"scale\": 4}"), "",
               "model.scaling.transform", "rope");
    bad_config(M("%s, \"scaling\": {\"transform\": \"alibi_interp\", \"scale\": 4}", rope), "",
               "model.scaling.transform", "alibi");
    bad_config(M("%s, \"scaling\": {\"transform\": \"dynamic_ntk\"}", rope), "", "model.scaling.transform",
               "inference-only");
    bad_config(M("%s, \"scaling\": {\"transform\": \"rerope\"}", rope), "", "model.scaling.transform", "inference-only");
    bad_config(M("%s, \"scaling\": {\"transform\": \"sinks\"}", rope), "", "model.scaling.transform", NULL);
    bad_config(M("%s, \"scaling\": {\"transform\": \"yarn\", \"scale\": 4}", rope), "", "model.scaling.train_len",
               "yarn");
    bad_config(M("%s, \"scaling\": {\"transform\": \"yarn\", \"scale\": 4, \"train_len\": 8, \"yarn_beta\": 0.5}", rope),
               "", "model.scaling.yarn_beta", NULL);
    bad_config(M("%s, \"scaling\": {\"transform\": \"pi\", \"scale\": 4, \"yarn_alpha\": 2}", rope), "",
               "model.scaling.yarn_alpha", "yarn only");
    bad_config(M("%s, \"scaling\": {\"transform\": \"yarn\", \"scale\": 4, \"train_len\": 8, \"yarn_alpha\": -1}", rope),
               "", "model.scaling.yarn_alpha", NULL);
    bad_config(M("%s, \"scaling\": {\"transform\": \"pi\", \"scale\": 4, \"train_len\": 64}", rope), "",
               "train.seq_len", "model.scaling.train_len");
#undef M
    /* a good one, for contrast, and its keys round-trip through save and load */
    const char *good = "{\"model\": {\"n_layers\": 1, \"d_model\": 16, \"n_heads\": 2, \"pos\": \"rope\", \"scaling\": "
                       "{\"transform\": \"yarn\", \"scale\": 2.5, \"train_len\": 8, \"yarn_alpha\": 0.5, \"yarn_beta\": 16}},"
                       " \"data\": {\"source\": \"synthetic\"}, \"train\": {\"seq_len\": 32}}";
    st_run_config c, d;
    st_error e = {0};
    CHECK(st_run_config_parse(good, strlen(good), "good.json", NULL, 0, &c, &e) == ST_OK);
    char dir[512], path[600];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(st_run_config_save(&c, path, &e) == ST_OK && st_run_config_load(path, NULL, 0, &d, &e) == ST_OK);
    CHECK_MSG(d.model.scaling == ST_XF_YARN && d.model.scaling_scale == 2.5 && d.model.scaling_len == 8 &&
              d.model.yarn_alpha == 0.5 && d.model.yarn_beta == 16, "model.scaling.* survive save and load");
    char label[64];
    st_pos_label(&d.model, label, sizeof label);
    CHECK_MSG(!strcmp(label, "rope+yarn2.5"), "the method label shows the scaling (%s)", label);
}

int main(void) {
    st_error e = {0};
    st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &ar, 4096, &e);
    int32_t ids[TN];
    st_rng r;
    st_rng_seed(&r, 3);
    for (int t = 0; t < TN; t++) ids[t] = (int32_t)st_rng_below(&r, V);
    test_zero_steps(ids);
    test_training(ids);
    test_positions(ids);
    test_decode(ids);
    test_override(ids);
    test_config_errors();
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    return test_finish("test_extension");
}
