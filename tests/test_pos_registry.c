/* test_pos_registry.c - the position-method tables are checked before any kernel can call
 * them (src/model/pos/registry.c, st_pos_table_check; issue 24 item 4):
 *   - every registered method passes, with each variant its keys select (exercise);
 *   - a table whose provider lacks the hook its bias form needs, or has a gradient hook
 *     without the forward one, is refused with ST_ERR_CONFIG naming model.pos and the
 *     method, and st_model_config_validate runs the check;
 *   - the attention kernels route a provider the same way everywhere: a CoPE-only
 *     provider (no fill, no fill_block) through the window kernel equals the plain
 *     streamed kernel when the window covers every key (before the fix: a NULL call). */
#include "harness.h"
#include "model/pos/pos.h"

#include <math.h>
#include <string.h>

static void test_registered(void) {
    for (int p = 0; p < ST_POS_COUNT; p++) {
        st_model_config c;
        st_model_config_default(&c);
        c.vocab_size = 32;
        c.pos = p;
        st_error e = {0};
        CHECK_MSG(st_pos_method_check(p, &c, "x.json", &e) == ST_OK, "%s: %s", st_pos_name(p), e.msg);
        st_pos_exercise(&c);   /* learnable variants: grad hooks set */
        CHECK_MSG(st_pos_method_check(p, &c, "x.json", &e) == ST_OK, "%s exercised: %s", st_pos_name(p), e.msg);
        CHECK_MSG(st_model_config_validate(&c, "x.json", &e) == ST_OK, "%s: %s", st_pos_name(p), e.msg);
    }
}

/* broken providers: what a method file with a missing line would set up */
static void no_hooks(st_pos_bias *pb) { pb->iface.state = pb; }
static void fill_only(const st_attn_bias *b, int h, int64_t d0, int64_t n, float *out) {
    (void)b; (void)h; (void)d0;
    for (int64_t i = 0; i < n; i++) out[i] = 0.0f;
}
static void grad_only_init(st_pos_bias *pb) {
    pb->iface.grad = (void (*)(const st_attn_bias *, int, int64_t, int64_t, const float *))fill_only;
    pb->iface.fill_block = NULL;
    pb->iface.state = pb;
}
static void fill_init(st_pos_bias *pb) { pb->iface.fill = fill_only; }

static void expect_refused(const st_pos_method *pm, const char *what) {
    st_model_config c;
    st_model_config_default(&c);
    c.vocab_size = 32;
    st_error e = {0};
    const int rc = st_pos_table_check(pm, ST_POS_ALIBI, &c, "cfg.json", &e);
    CHECK_MSG(rc == ST_ERR_CONFIG, "%s: rc %d", what, rc);
    CHECK_MSG(strstr(e.msg, "cfg.json: model.pos \"") && strstr(e.msg, pm->name) && strstr(e.msg, "inconsistent"),
              "%s: %s", what, e.msg);
}

static void test_broken_tables(void) {
    st_pos_method m = *st_pos_method_of(ST_POS_ALIBI);
    m.name = "broken";
    m.bias_init = no_hooks;   /* distance form, no fill: the cope crash's shape */
    expect_refused(&m, "distance form without fill");
    m = *st_pos_method_of(ST_POS_COPE);
    m.name = "broken_general";
    m.bias_init = no_hooks;   /* general form, neither fill_block nor a content term */
    expect_refused(&m, "general form without fill_block or cope");
    m.bias_init = fill_init;  /* general form with a distance hook */
    expect_refused(&m, "general form with fill");
    m = *st_pos_method_of(ST_POS_ALIBI);
    m.name = "broken_grad";
    m.bias_form = ST_POS_BIAS_GENERAL;
    m.bias_init = grad_only_init;   /* nothing to fill, a gradient hook */
    expect_refused(&m, "gradient hook without forward");
    m = *st_pos_method_of(ST_POS_NONE);
    m.name = "broken_none";
    m.bias_init = fill_init;  /* form none but a provider */
    expect_refused(&m, "form none with bias_init");
    m = *st_pos_method_of(ST_POS_ALIBI);
    m.name = "broken_form";
    m.bias_init = NULL;       /* a bias form and no way to set it up */
    expect_refused(&m, "form without bias_init");
}

/* The window kernel with a CoPE-only provider (what `eval --window` hands it for a cope
 * model) equals st_attention when the window covers every key, and a real window
 * changes the result. */
static void test_cope_window_route(void) {
    const int64_t B = 1, H = 2, T = 24, D = 8, NP = 6;
    st_arena ar;
    st_ctx ctx;
    st_error e = {0};
    CHECK(st_arena_init(&ar, (size_t)1 << 22, 0, &e) == ST_OK);
    CHECK(st_ctx_init(&ctx, &ar, 256, &e) == ST_OK);
    st_ctx_begin(&ctx, 0, 0);
    st_rng rng;
    st_rng_seed(&rng, 11);
    st_tensor *q = st_new4(&ctx, B, H, T, D), *k = st_new4(&ctx, B, H, T, D), *v = st_new4(&ctx, B, H, T, D);
    float emb[6 * 8];   /* E (n_pos, D), shared by the heads */
    for (int64_t i = 0; i < B * H * T * D; i++) {
        q->data[i] = (float)st_rng_normal(&rng);
        k->data[i] = (float)st_rng_normal(&rng);
        v->data[i] = (float)st_rng_normal(&rng);
    }
    for (int i = 0; i < (int)(NP * D); i++) emb[i] = 0.3f * (float)st_rng_normal(&rng);
    st_attn_cope cope = {.e = emb, .ge = NULL, .n_pos = NP};
    st_attn_bias bias = {.cope = &cope};
    st_tensor *full = st_attention(&ctx, q, k, v, &bias, 1, 0.0f, 0.0f, 0);
    st_tensor *wide = st_attention_window(&ctx, q, k, v, &bias, 0.0f, 0, T);
    st_tensor *narrow = st_attention_window(&ctx, q, k, v, &bias, 0.0f, 0, 6);
    CHECK(full && wide && narrow);
    if (full && wide && narrow) {
        double d = 0, dn = 0;
        for (int64_t i = 0; i < B * H * T * D; i++) {
            TH_MAX(d, fabs((double)full->data[i] - wide->data[i]));
            TH_MAX(dn, fabs((double)full->data[i] - narrow->data[i]));
        }
        CHECK_MSG(d <= 1e-5, "cope window covering every key: max diff %g", d);
        CHECK_MSG(dn > 1e-3, "cope window 6 of 24 keys changes nothing (%g)", dn);
    }
    st_ctx_free(&ctx);
    st_arena_free(&ar);
}

int main(void) {
    st_set_threads(2);
    test_registered();
    test_broken_tables();
    test_cope_window_route();
    return test_finish("test_pos_registry");
}
