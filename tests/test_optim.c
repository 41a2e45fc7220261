/* test_optim.c - optimisers and schedules on a hand-built parameter block: the SGD step
 * is exactly fmaf(-lr, g, w) (= the rounded w - lr*g), momentum and AdamW against a
 * double-precision hand computation, the weight-decay groups, global-norm clipping (and
 * clipping inside the update, bit for bit),
 * thread-count independence of the norm, and learning rates at key steps. */
#include "harness.h"
#include "st_train.h"
#include "st_matmul.h"
#include "st_model.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* A block with a matrix, a bias, a norm weight and an embedding. */
static void make_params(st_params *p, int64_t rows) {
    st_params_init(p);
    int64_t sw[2] = {rows, 37}, sb[1] = {37}, se[2] = {11, 37};
    st_params_add(p, "blocks.0.mlp.fc1.weight", 2, sw, 1, ST_INIT_NORMAL, 0.5f);
    st_params_add(p, "blocks.0.mlp.fc1.bias", 1, sb, 0, ST_INIT_NORMAL, 0.5f);
    st_params_add(p, "blocks.0.ln1.weight", 1, sb, 1, ST_INIT_NORMAL, 0.5f);   /* decay flag on: no_decay decides */
    int ie = st_params_add(p, "tok_emb.weight", 2, se, 1, ST_INIT_NORMAL, 0.5f);
    p->info[ie].is_embedding = 1;
    st_error e = {0};
    ST_ASSERT(st_params_finalize(p, &e) == ST_OK);
    st_rng r;
    st_rng_seed(&r, 7);
    st_params_init_values(p, &r);
    for (int i = 0; i < p->count; i++)
        for (size_t k = 0; k < p->info[i].numel; k++) p->grad[p->info[i].offset + k] = st_rng_normal(&r);
}

static st_optim_config optim_cfg(int name, float lr) {
    st_optim_config c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.lr = lr;
    c.beta1 = 0.9f;
    c.beta2 = 0.98f;
    c.eps = 1e-8f;
    c.no_decay = ST_NODECAY_BIAS | ST_NODECAY_NORM;
    return c;
}

static void test_decay_groups(void) {
    st_param_info in;
    memset(&in, 0, sizeof in);
    in.decay = 1;
    in.ndim = 2;
    snprintf(in.name, sizeof in.name, "blocks.0.attn.qkv.weight");
    CHECK(st_param_decays(&in, ST_NODECAY_BIAS | ST_NODECAY_NORM | ST_NODECAY_EMBEDDING) == 1);
    in.ndim = 1;
    snprintf(in.name, sizeof in.name, "blocks.0.attn.qkv.bias");
    CHECK(st_param_decays(&in, ST_NODECAY_BIAS) == 0);
    CHECK(st_param_decays(&in, ST_NODECAY_NORM) == 1);
    snprintf(in.name, sizeof in.name, "blocks.3.ln2.weight");
    CHECK(st_param_decays(&in, ST_NODECAY_NORM) == 0);
    CHECK(st_param_decays(&in, ST_NODECAY_BIAS) == 1);
    snprintf(in.name, sizeof in.name, "ln_f.weight");
    CHECK(st_param_decays(&in, ST_NODECAY_NORM) == 0);
    /* model.qk_norm's gains are norm weights: the option decides for them too (they
     * never decayed, whatever no_decay said) */
    in.decay = 0;
    snprintf(in.name, sizeof in.name, "blocks.1.attn.q_norm.weight");
    CHECK(st_param_decays(&in, ST_NODECAY_NORM) == 0);
    CHECK(st_param_decays(&in, ST_NODECAY_EMBEDDING) == 1);
    snprintf(in.name, sizeof in.name, "blocks.1.attn.k_norm.weight");
    CHECK(st_param_decays(&in, 0) == 1);
    in.decay = 1;
    in.ndim = 2;
    snprintf(in.name, sizeof in.name, "tok_emb.weight");
    CHECK(st_param_decays(&in, ST_NODECAY_EMBEDDING) == 0);
    CHECK(st_param_decays(&in, ST_NODECAY_BIAS | ST_NODECAY_NORM) == 1);
    snprintf(in.name, sizeof in.name, "pos_emb.weight");
    CHECK(st_param_decays(&in, ST_NODECAY_EMBEDDING) == 0);
    snprintf(in.name, sizeof in.name, "lm_head.weight");
    in.is_embedding = 1;
    CHECK(st_param_decays(&in, ST_NODECAY_EMBEDDING) == 0);
    in.is_embedding = 0;
    in.decay = 0;   /* outside the groups the model's flag decides */
    CHECK(st_param_decays(&in, 0) == 0);
    snprintf(in.name, sizeof in.name, "blocks.0.attn.rf_theta");
    in.ndim = 1;
    CHECK(st_param_decays(&in, 0) == 0);
    /* inside a group the option decides, even against the model's flag (issue 14 item 8) */
    snprintf(in.name, sizeof in.name, "blocks.0.attn.qkv.bias");
    CHECK(st_param_decays(&in, ST_NODECAY_NORM) == 1);
    in.decay = 1;
    CHECK(st_param_decays(&in, ST_NODECAY_BIAS) == 0);
}

/* train.optimizer.no_decay on the real model: with zero gradients an AdamW step only
 * applies the decay w *= 1 - lr*wd, so a parameter changes exactly when it decays.
 * Both directions: dropping "bias"/"norm" from the list makes them decay, adding
 * "embedding" stops the token embedding from decaying. */
static void test_model_no_decay(void) {
    st_model_config mc;
    st_model_config_default(&mc);
    mc.vocab_size = 16; mc.n_layers = 1; mc.d_model = 8; mc.n_heads = 2; mc.d_ff = 16;
    static const struct { int mask; int bias, norm, emb; } cases[] = {
        {ST_NODECAY_BIAS | ST_NODECAY_NORM, 0, 0, 1},    /* the default */
        {ST_NODECAY_NORM, 1, 0, 1},                      /* "bias" removed: biases decay */
        {ST_NODECAY_BIAS, 0, 1, 1},                      /* "norm" removed: norms decay */
        {0, 1, 1, 1},
        {ST_NODECAY_BIAS | ST_NODECAY_NORM | ST_NODECAY_EMBEDDING, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        st_model m;
        st_error e = {0};
        CHECK(st_model_init(&m, &mc, 1, &e) == ST_OK);
        for (size_t j = 0; j < m.params.n; j++) { m.params.data[j] = 1.0f; m.params.grad[j] = 0.0f; }
        st_optim_config oc = optim_cfg(ST_OPT_ADAMW, 0.1f);
        oc.weight_decay = 0.5f;
        oc.no_decay = cases[k].mask;
        st_optim o;
        CHECK(st_optim_init(&o, &oc, &m.params, &e) == ST_OK);
        st_optim_step(&o, &m.params, oc.lr, 1, 1.0f);
        const char *names[3] = {"blocks.0.attn.qkv.bias", "blocks.0.ln1.weight", "tok_emb.weight"};
        const int want[3] = {cases[k].bias, cases[k].norm, cases[k].emb};
        for (int i = 0; i < 3; i++) {
            float w = st_param(&m.params, st_params_find(&m.params, names[i]))->data[0];
            CHECK_MSG((w != 1.0f) == want[i], "no_decay mask %d: %s is %g (expected %s)", cases[k].mask, names[i],
                      w, want[i] ? "decayed" : "unchanged");
        }
        float qw = st_param(&m.params, st_params_find(&m.params, "blocks.0.attn.qkv.weight"))->data[0];
        CHECK_NEAR(qw, 1.0f - 0.1f * 0.5f, 1e-6);   /* matrices always decay */
        st_optim_free(&o);
        st_model_free(&m);
    }
}

static void test_sgd(void) {
    st_params p;
    make_params(&p, 50);
    st_error e = {0};
    st_optim_config oc = optim_cfg(ST_OPT_SGD, 0.05f);
    st_optim o;
    CHECK(st_optim_init(&o, &oc, &p, &e) == ST_OK);
    float *w0 = malloc(p.n * sizeof(float));
    memcpy(w0, p.data, p.n * sizeof(float));
    st_optim_step(&o, &p, oc.lr, 1, 1.0f);
    int exact = 1;
    double maxd = 0;
    for (size_t i = 0; i < p.n; i++) {
        if (p.data[i] != fmaf(-oc.lr, p.grad[i], w0[i])) exact = 0;
        TH_MAX(maxd, fabs((double)p.data[i] - ((double)w0[i] - (double)oc.lr * p.grad[i])));
    }
    CHECK_MSG(exact, "SGD step is not fmaf(-lr, g, w)");
    CHECK_MSG(maxd <= 1e-6 * 4, "SGD step differs from w - lr*g by %g", maxd);

    /* momentum 0.9, decoupled weight decay 0.1 (matrix decays, bias does not): 2 steps */
    st_optim_free(&o);
    oc.momentum = 0.9f;
    oc.weight_decay = 0.1f;
    CHECK(st_optim_init(&o, &oc, &p, &e) == ST_OK);
    memset(p.m, 0, p.n * sizeof(float));
    memcpy(p.data, w0, p.n * sizeof(float));
    st_optim_step(&o, &p, oc.lr, 1, 1.0f);
    st_optim_step(&o, &p, oc.lr, 2, 1.0f);
    int ok = 1;
    for (int i = 0; i < p.count && ok; i++) {
        int dec = st_param_decays(&p.info[i], oc.no_decay);
        for (size_t k = 0; k < p.info[i].numel; k++) {
            size_t j = p.info[i].offset + k;
            double w = w0[j], g = p.grad[j], buf = 0;
            for (int s = 0; s < 2; s++) {
                if (dec) w *= 1.0 - 0.05 * 0.1;
                buf = 0.9 * buf + g;
                w -= 0.05 * buf;
            }
            if (!(fabs(w - p.data[j]) <= 1e-5 * (1 + fabs(w)))) { ok = 0; break; }
        }
    }
    CHECK_MSG(ok, "SGD momentum / weight decay differs from the hand computation");
    st_optim_free(&o);
    free(w0);
    st_params_free(&p);
}

static void test_adamw(void) {
    st_params p;
    make_params(&p, 50);
    st_error e = {0};
    st_optim_config oc = optim_cfg(ST_OPT_ADAMW, 1e-2f);
    oc.weight_decay = 0.1f;
    oc.no_decay = ST_NODECAY_BIAS | ST_NODECAY_NORM | ST_NODECAY_EMBEDDING;
    st_optim o;
    CHECK(st_optim_init(&o, &oc, &p, &e) == ST_OK);
    size_t n = p.n;
    double *w = malloc(n * sizeof(double)), *m = calloc(n, sizeof(double)), *v = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) w[i] = p.data[i];
    /* 3 steps with gradients that change between steps, against double precision */
    for (int t = 1; t <= 3; t++) {
        if (t > 1)
            for (size_t i = 0; i < n; i++) p.grad[i] = p.grad[i] * -0.5f + 0.1f;
        for (int pi = 0; pi < p.count; pi++) {
            int dec = st_param_decays(&p.info[pi], oc.no_decay);
            for (size_t k = 0; k < p.info[pi].numel; k++) {
                size_t i = p.info[pi].offset + k;
                double g = p.grad[i];
                if (dec) w[i] *= 1.0 - 1e-2 * 0.1;
                m[i] = 0.9 * m[i] + 0.1 * g;
                v[i] = 0.98 * v[i] + 0.02 * g * g;
                double mh = m[i] / (1 - pow(0.9, t)), vh = v[i] / (1 - pow(0.98, t));
                w[i] -= 1e-2 * mh / (sqrt(vh) + 1e-8);
            }
        }
        st_optim_step(&o, &p, oc.lr, t, 1.0f);
    }
    double maxd = 0;
    for (size_t i = 0; i < n; i++) {
        TH_MAX(maxd, fabs(w[i] - p.data[i]));
    }
    CHECK_MSG(maxd < 2e-6, "AdamW vs hand computation: max |diff| %g", maxd);
    /* decay applied only to the matrix: with zero gradient only decayed weights move */
    memset(p.grad, 0, n * sizeof(float));
    memset(p.m, 0, n * sizeof(float));
    memset(p.v, 0, n * sizeof(float));
    float *before = malloc(n * sizeof(float));
    memcpy(before, p.data, n * sizeof(float));
    st_optim_step(&o, &p, oc.lr, 1, 1.0f);
    for (int pi = 0; pi < p.count; pi++) {
        size_t off = p.info[pi].offset;
        int moved = p.data[off] != before[off];
        CHECK_MSG(moved == (pi == 0), "param %s moved=%d", p.info[pi].name, moved);
        if (pi == 0) CHECK_NEAR(p.data[off], before[off] * (1.0 - 1e-3), 1e-7 * fabs(before[off]));
    }
    free(before); free(w); free(m); free(v);
    st_optim_free(&o);
    st_params_free(&p);
}

static void test_norm_clip(void) {
    st_params p;
    make_params(&p, 3000);   /* > ST_OPTIM_CHUNK floats: several work items */
    st_error e = {0};
    st_optim_config oc = optim_cfg(ST_OPT_ADAMW, 1e-3f);
    st_optim o;
    CHECK(st_optim_init(&o, &oc, &p, &e) == ST_OK);
    CHECK(o.n_items > 4);
    double ref = 0;
    for (size_t i = 0; i < p.n; i++) ref += (double)p.grad[i] * p.grad[i];
    ref = sqrt(ref);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    double n1 = st_grad_norm(&o, &p);
    omp_set_num_threads(2);
    double n2 = st_grad_norm(&o, &p);
    omp_set_num_threads(saved);
    CHECK(n1 == n2);                       /* bit-identical for any thread count */
    CHECK_NEAR(n1, ref, 1e-9 * ref);
    /* below the threshold: untouched */
    CHECK(st_clip_grad(&o, &p, n1, (float)(n1 * 2)) == 1.0f);
    CHECK(st_grad_norm(&o, &p) == n1);
    CHECK(st_clip_grad(&o, &p, n1, 0.0f) == 1.0f);   /* 0 = off */
    /* above: scaled to max_norm */
    float f = st_clip_grad(&o, &p, n1, 1.0f);
    CHECK_NEAR(f, 1.0 / (n1 + 1e-6), 1e-6 / n1);
    CHECK_NEAR(st_grad_norm(&o, &p), 1.0, 1e-5);
    /* finiteness */
    CHECK(st_params_finite(&p));
    p.data[p.n / 2] = NAN;
    CHECK(!st_params_finite(&p));
    p.data[p.n / 2] = INFINITY;
    CHECK(!st_params_finite(&p));
    p.data[p.n / 2] = 0;
    p.grad[5] = INFINITY;
    CHECK(!isfinite(st_grad_norm(&o, &p)));
    st_optim_free(&o);
    st_params_free(&p);
}

static void test_schedule(void) {
    st_run_config c;
    st_run_config_default(&c);
    st_train_config *t = &c.train;
    t->optim.lr = 1e-3f;
    const double lr = (double)1e-3f;
    t->steps = 100;
    t->sched.warmup = 10;
    t->sched.min_lr_ratio = 0.1f;
    const double lo = lr * (double)0.1f;

    t->sched.kind = ST_SCHED_CONSTANT;
    CHECK_NEAR(st_lr_at(t, 1), lr / 10, 1e-15);
    CHECK_NEAR(st_lr_at(t, 5), lr / 2, 1e-15);
    CHECK(st_lr_at(t, 10) == lr);
    CHECK(st_lr_at(t, 11) == lr && st_lr_at(t, 100) == lr);

    t->sched.kind = ST_SCHED_COSINE;
    CHECK_NEAR(st_lr_at(t, 1), lr / 10, 1e-15);
    CHECK_NEAR(st_lr_at(t, 10), lr, 1e-15);
    CHECK_NEAR(st_lr_at(t, 55), lo + (lr - lo) * 0.5, 1e-15);   /* halfway through the decay */
    CHECK_NEAR(st_lr_at(t, 100), lo, 1e-15);
    CHECK_NEAR(st_lr_at(t, 150), lo, 1e-15);                     /* past the end: the floor */
    CHECK(st_lr_at(t, 30) > st_lr_at(t, 31));                    /* decreasing */
    t->sched.warmup = 0;
    CHECK_NEAR(st_lr_at(t, 1), lo + (lr - lo) * 0.5 * (1 + cos(M_PI / 100)), 1e-15);

    /* linear: warmup, then a straight line from lr at w to lo at steps */
    t->sched.kind = ST_SCHED_LINEAR;
    t->sched.warmup = 10;
    CHECK_NEAR(st_lr_at(t, 5), lr / 2, 1e-15);
    CHECK_NEAR(st_lr_at(t, 10), lr, 1e-15);
    CHECK_NEAR(st_lr_at(t, 55), lr - (lr - lo) * 0.5, 1e-15);
    CHECK_NEAR(st_lr_at(t, 28), lr - (lr - lo) * 0.2, 1e-15);
    CHECK_NEAR(st_lr_at(t, 100), lo, 1e-15);
    CHECK_NEAR(st_lr_at(t, 130), lo, 1e-15);
    t->sched.warmup = 0;
    CHECK_NEAR(st_lr_at(t, 1), lr - (lr - lo) * 0.01, 1e-15);

    /* wsd: decay_frac 0.25 of 100 steps -> stable to step 75, then linear to lo at 100 */
    t->sched.kind = ST_SCHED_WSD;
    t->sched.warmup = 10;
    t->sched.decay_frac = 0.25f;
    CHECK(st_lr_wsd_decay(t) == 25);
    CHECK_NEAR(st_lr_at(t, 4), lr * 0.4, 1e-15);
    CHECK(st_lr_at(t, 10) == lr && st_lr_at(t, 11) == lr && st_lr_at(t, 75) == lr);
    CHECK_NEAR(st_lr_at(t, 76), lr - (lr - lo) / 25, 1e-15);
    CHECK_NEAR(st_lr_at(t, 80), lr - (lr - lo) * 0.2, 1e-15);
    CHECK_NEAR(st_lr_at(t, 100), lo, 1e-15);
    CHECK_NEAR(st_lr_at(t, 101), lo, 1e-15);
    /* the stable phase does not depend on steps: a longer run agrees up to its own decay */
    double before[75];
    for (int s = 1; s <= 75; s++) before[s - 1] = st_lr_at(t, s);
    t->steps = 400;   /* decay 100 steps from 300 */
    int same = 1;
    for (int s = 1; s <= 75; s++) same &= st_lr_at(t, s) == before[s - 1];
    CHECK(same && st_lr_at(t, 300) == lr && st_lr_at(t, 301) < lr);
    CHECK_NEAR(st_lr_at(t, 350), lr - (lr - lo) * 0.5, 1e-15);
    /* decay_frac 0: constant after warmup; 1 with warmup 0: the linear schedule */
    t->sched.decay_frac = 0;
    CHECK(st_lr_at(t, 400) == lr);
    t->sched.decay_frac = 1;
    t->sched.warmup = 0;
    t->steps = 100;
    same = 1;
    for (int s = 1; s <= 100; s++) {
        const double w = st_lr_at(t, s);
        t->sched.kind = ST_SCHED_LINEAR;
        same &= fabs(st_lr_at(t, s) - w) <= 1e-15;
        t->sched.kind = ST_SCHED_WSD;
    }
    CHECK(same);
    t->steps = 100;

    t->sched.kind = ST_SCHED_INV_SQRT;
    t->sched.warmup = 4;
    CHECK_NEAR(st_lr_at(t, 1), lr / 4, 1e-15);
    CHECK_NEAR(st_lr_at(t, 4), lr, 1e-15);
    CHECK_NEAR(st_lr_at(t, 16), lr / 2, 1e-15);
    CHECK_NEAR(st_lr_at(t, 100), lr * sqrt(4.0 / 100), 1e-15);
}

/* With a bf16 shadow, st_optim_step rewrites it (every value the rounding of the updated
 * weight) and bumps its version once; st_optim_step_items (ZeRO's shard) leaves it. */
static void test_bf16_shadow(void) {
    for (int name = 0; name < 2; name++) {
        st_params p;
        make_params(&p, 2000);   /* 74,000 + 1,000 values: three optimizer items */
        st_error e = {0};
        CHECK(st_params_enable_bf16(&p, &e) == ST_OK);
        st_optim_config oc = optim_cfg(name ? ST_OPT_SGD : ST_OPT_ADAMW, 0.05f);
        oc.weight_decay = 0.1f;
        st_optim o;
        CHECK(st_optim_init(&o, &oc, &p, &e) == ST_OK);
        const uint64_t v0 = *p.bf16_ver;
        for (int t = 1; t <= 2; t++) st_optim_step(&o, &p, oc.lr, t, 1.0f);
        size_t bad = 0;
        for (size_t i = 0; i < p.n; i++) bad += p.bf16[i] != st_f32_to_bf16(p.data[i]);
        CHECK_MSG(bad == 0, "%s: %zu of %zu shadow values are not the rounded weights", name ? "sgd" : "adamw", bad,
                  p.n);
        CHECK(*p.bf16_ver == v0 + 2);
        uint16_t first = p.bf16[0];
        st_optim_step_items(&o, &p, oc.lr, 3, 1.0f, 0, o.n_items, p.m, p.v, 0);
        CHECK(*p.bf16_ver == v0 + 2 && p.bf16[0] == first && p.data[0] != st_bf16_to_f32(first));
        st_optim_free(&o);
        st_params_free(&p);
    }
}

/* Clipping inside the update (st_optim_step's gscale, what the trainer does) gives the
 * bits of st_clip_grad followed by an unscaled update: AdamW, SGD with and without
 * momentum, two steps, weight decay on, the whole block and ZeRO's item ranges. */
static void test_fused_clip(void) {
    for (int kind = 0; kind < 3; kind++) {
        st_params a, b;
        make_params(&a, 2000);   /* three optimizer items */
        make_params(&b, 2000);
        st_error e = {0};
        st_optim_config oc = optim_cfg(kind ? ST_OPT_SGD : ST_OPT_ADAMW, 0.05f);
        oc.weight_decay = 0.1f;
        oc.momentum = kind == 2 ? 0.9f : 0.0f;
        st_optim oa, ob;
        CHECK(st_optim_init(&oa, &oc, &a, &e) == ST_OK && st_optim_init(&ob, &oc, &b, &e) == ST_OK);
        const size_t bytes = a.n * sizeof(float);
        float *g0 = malloc(bytes);
        memcpy(g0, a.grad, bytes);
        const double norm = st_grad_norm(&oa, &a);
        const float max_norm = (float)(norm / 3.0), f = st_clip_factor(norm, max_norm);
        CHECK(f < 0.34f && f > 0.33f && st_clip_factor(norm, 0.0f) == 1.0f && st_clip_factor(norm, 1e9f) == 1.0f);
        for (int t = 1; t <= 2; t++) {
            memcpy(a.grad, g0, bytes);
            CHECK(st_clip_grad(&oa, &a, norm, max_norm) == f);
            st_optim_step(&oa, &a, oc.lr, t, 1.0f);
            memcpy(b.grad, g0, bytes);
            if (t == 1) {
                st_optim_step(&ob, &b, oc.lr, t, f);
            } else {   /* ZeRO: two shards of items, each with the factor */
                const int64_t k = ob.n_items / 2;
                st_optim_step_items(&ob, &b, oc.lr, t, f, 0, k, b.m, b.v, 0);
                st_optim_step_items(&ob, &b, oc.lr, t, f, k, ob.n_items, b.m, b.v, 0);
            }
        }
        const char *name = kind == 0 ? "adamw" : kind == 1 ? "sgd" : "sgd momentum";
        CHECK_MSG(!memcmp(a.data, b.data, bytes) && !memcmp(a.m, b.m, bytes) && (kind || !memcmp(a.v, b.v, bytes)),
                  "%s: clipping inside the update changed the bits", name);
        /* the factor is applied: without it the weights differ */
        float *w = malloc(bytes);
        memcpy(w, b.data, bytes);
        memcpy(b.grad, g0, bytes);
        st_optim_step(&ob, &b, oc.lr, 3, f);
        memcpy(a.grad, g0, bytes);
        st_optim_step(&oa, &a, oc.lr, 3, 1.0f);
        CHECK_MSG(memcmp(a.data, b.data, bytes) != 0 && memcmp(w, b.data, bytes) != 0, "%s: gscale ignored", name);
        free(w);
        free(g0);
        st_optim_free(&oa);
        st_optim_free(&ob);
        st_params_free(&a);
        st_params_free(&b);
    }
}

int main(void) {
    test_decay_groups();
    test_model_no_decay();
    test_sgd();
    test_adamw();
    test_bf16_shadow();
    test_norm_clip();
    test_fused_clip();
    test_schedule();
    return test_finish("test_optim");
}
