/* test_attention.c - st_attention (grad-mode forward + backward, inference path),
 * st_attention_streamed and ref_attention (tests/test_attn_reference.h):
 *   - gradcheck of q, k, v and a learnable distance-table bias, causal and bidirectional,
 *     with and without bias, with attention dropout in train mode;
 *   - grad-mode forward == streamed == double reference at several lengths and key-block
 *     sizes that do not divide T, for a fixed ALiBi-like and a table bias;
 *   - dropout forward against a naive double loop using the documented mask formula;
 *   - causality, fully masked rows, inference memory (no backward state, no (T,T) buffer),
 *     long-range numerics (T = 16384, ALiBi biases of -65536), determinism of gradients.
 * The general (i, j) bias form is tested in test_attention_general.c. */
#include "test_attention_util.h"
#include "test_attn_reference.h"

/* ---------------------------------------------------------- bias providers ---- */
/* (a) ALiBi-like fixed slopes: bias(h, d) = -m_h |d|; window > 0 sets distances beyond it
 * to -inf (masks whole key blocks). Records how it is called. */
typedef struct alibi_bias {
    float slope[8];
    int64_t window;        /* 0: none */
    int calls;
    int64_t max_n;
} alibi_bias;

static void alibi_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    alibi_bias *a = self->state;
    a->calls++;
    if (n > a->max_n) a->max_n = n;
    for (int64_t k = 0; k < n; k++) {
        int64_t d = d0 + k, ad = d < 0 ? -d : d;
        out[k] = (a->window > 0 && ad > a->window) ? -INFINITY : -a->slope[h] * (float)ad;
    }
}

static st_attn_bias make_alibi(alibi_bias *a) {
    st_attn_bias b = {.fill = alibi_fill, .state = a};
    return b;
}

/* (b) the learnable distance table: table_bias in test_attention_util.h */

/* (c) every distance at -inf: every row is fully masked. */
static void neginf_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    for (int64_t k = 0; k < n; k++) out[k] = -INFINITY;
}

/* (d) general form, learnable: bias(h, i, j) = w[h, i, j], w (H, T, T) a parameter
 * (a table over positions, not distances); grad_block adds into w's gradient. */
static void test_gradcheck(void) {
    qkv s;
    qkv_init(&s, 2, 2, 7, 4, 1, 0.7f);
    alibi_bias al = {.slope = {0.5f, 0.125f}};
    table_bias tb = {s.w, 7};
    st_attn_bias b_alibi = make_alibi(&al), b_table = make_table(&tb);
    /* eps 1e-2 on O(1) inputs: the float forward's rounding (~1e-7 relative over a sum of
     * ~100-300 outputs) gives ~1e-5 noise in the central difference and the third-order
     * term eps^2/6 f''' ~ 1e-5; tolerance 2e-4 absolute + 2e-3 relative. */
    const double eps = 1e-2, atol = 2e-4, rtol = 2e-3;
    st_tensor *leaves3[3] = {s.q, s.k, s.v};
    st_tensor *leaves4[4] = {s.q, s.k, s.v, s.w};
    for (int causal = 0; causal <= 1; causal++) {
        char name[64];
        gc_case c0 = {&s, NULL, causal, 0.0f, 0.0f};
        snprintf(name, sizeof name, "attn %s nobias", causal ? "causal" : "bidir");
        gradcheck(name, gc_build, &c0, leaves3, 3, 0, eps, atol, rtol, 0);
        gc_case c1 = {&s, &b_alibi, causal, 0.0f, 0.0f};
        snprintf(name, sizeof name, "attn %s alibi", causal ? "causal" : "bidir");
        gradcheck(name, gc_build, &c1, leaves3, 3, 0, eps, atol, rtol, 0);
        gc_case c2 = {&s, &b_table, causal, 0.7f, 0.0f};
        snprintf(name, sizeof name, "attn %s table scale.7", causal ? "causal" : "bidir");
        gradcheck(name, gc_build, &c2, leaves4, 4, 0, eps, atol, rtol, 0);
        /* dropout p = 0.2 in train mode: the mask is a pure function of (seed, index) */
        gc_case c3 = {&s, &b_table, causal, 0.0f, 0.2f};
        snprintf(name, sizeof name, "attn %s table drop.2", causal ? "causal" : "bidir");
        gradcheck(name, gc_build, &c3, leaves4, 4, 1, eps, atol, rtol, 0);
    }
    /* learnable bias alone (q, k, v frozen): the op must still record its backward */
    for (int i = 0; i < 3; i++) leaves4[i]->requires_grad = 0;
    gc_case c4 = {&s, &b_table, 1, 0.0f, 0.0f};
    st_tensor *wl[1] = {s.w};
    gradcheck("attn causal table-only", gc_build, &c4, wl, 1, 0, eps, atol, rtol, 0);
    /* a longer causal case crossing the 64-row query block */
    qkv l;
    qkv_init(&l, 1, 2, 70, 3, 2, 0.5f);
    table_bias tl = {l.w, 70};
    st_attn_bias b_tl = make_table(&tl);
    gc_case c5 = {&l, &b_tl, 1, 0.0f, 0.1f};
    st_tensor *ll[4] = {l.q, l.k, l.v, l.w};
    gradcheck("attn causal T70 table drop.1", gc_build, &c5, ll, 4, 1, eps, atol, rtol, 40);
    gc_case c6 = {&l, &b_tl, 0, 0.0f, 0.0f};
    gradcheck("attn bidir T70 table", gc_build, &c6, ll, 4, 0, eps, atol, rtol, 40);
    st_params_free(&l.p);
    st_params_free(&s.p);
}

/* ------------------------------------------- forward vs reference vs streamed ---- */
static void test_forward_agreement(void) {
    static const int64_t Ts[] = {1, 5, 64, 257, 1000};
    static const int64_t kblocks[] = {0, 7, 100};
    env E;
    env_init(&E);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int64_t T = Ts[ti], B = T > 100 ? 1 : 2, H = 2, D = 16;
        qkv s;
        qkv_init(&s, B, H, T, D, 10 + ti, 1.0f);
        const int64_t n = B * H * T * D;
        alibi_bias al = {.slope = {0.5f, 1.0f / 16}};
        table_bias tb = {s.w, T};
        st_attn_bias ba = make_alibi(&al), bt = make_table(&tb);
        const st_attn_bias *biases[3] = {NULL, &ba, &bt};
        float *ref = malloc((size_t)n * sizeof(float)), *str = malloc((size_t)n * sizeof(float));
        for (int causal = 0; causal <= 1; causal++)
            for (int bi = 0; bi < 3; bi++) {
                const float scale = bi == 2 ? 0.37f : 0.0f;
                char what[96];
                ref_attention(s.q->data, s.k->data, s.v->data, ref, B, H, T, D,
                                       biases[bi], causal, scale);
                st_ctx_begin(&E.ctx, 1, 0);
                al.calls = 0; al.max_n = 0;
                st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, biases[bi], causal, scale, 0.0f, 0);
                snprintf(what, sizeof what, "grad-mode T=%lld causal=%d bias=%d", (long long)T, causal, bi);
                CHECK_MSG(o && E.ctx.n_nodes == 1, "%s: no node recorded", what);
                if (o) th_close(what, o->data, ref, n, 1e-5, 1e-5);
                if (bi == 1) /* one table per head over the distances needed, never (T,T) */
                    CHECK_MSG(al.calls == H && al.max_n == (causal ? T : 2 * T - 1),
                              "%s: fill calls %d, n %lld", what, al.calls, (long long)al.max_n);
                for (size_t ki = 0; ki < sizeof kblocks / sizeof kblocks[0]; ki++) {
                    st_attention_streamed(s.q->data, s.k->data, s.v->data, str, B, H, T, D,
                                          biases[bi], causal, scale, kblocks[ki]);
                    snprintf(what, sizeof what, "streamed T=%lld causal=%d bias=%d kblock=%lld",
                             (long long)T, causal, bi, (long long)kblocks[ki]);
                    th_close(what, str, ref, n, 1e-5, 1e-5);
                }
            }
        free(ref); free(str);
        st_params_free(&s.p);
    }
    env_free(&E);
}

/* Dropout: grad-mode and no-grad training forwards against a double loop that applies
 * the documented mask (dropped when st_hash_uniform(seed, ((b*H+h)*T+i)*T+j) < p). */
static void test_dropout_forward(void) {
    /* T = 300 crosses the 64-row query blocks and the default 256-key block */
    const int64_t B = 1, H = 2, T = 300, D = 8;
    const float p = 0.3f;
    const uint64_t seed = 99;
    qkv s;
    qkv_init(&s, B, H, T, D, 5, 1.0f);
    alibi_bias al = {.slope = {0.25f, 0.05f}};
    st_attn_bias ba = make_alibi(&al);
    env E;
    env_init(&E);
    float *ref = malloc((size_t)(B * H * T * D) * sizeof(float));
    double *sc_row = malloc((size_t)T * sizeof(double));
    for (int causal = 0; causal <= 1; causal++) {
        const double sc = 1.0 / sqrt((double)D);
        for (int64_t bh = 0; bh < B * H; bh++) {
            const int64_t h = bh % H;
            const float *Q = s.q->data + bh * T * D, *K = s.k->data + bh * T * D, *V = s.v->data + bh * T * D;
            for (int64_t i = 0; i < T; i++) {
                double mx = -INFINITY, z = 0, o[8] = {0};
                const int64_t jn = causal ? i + 1 : T;
                for (int64_t j = 0; j < jn; j++) {
                    double d = 0;
                    for (int64_t c = 0; c < D; c++) d += (double)Q[i * D + c] * K[j * D + c];
                    float bj;
                    int64_t dist = i - j;
                    alibi_fill(&ba, (int)h, dist, 1, &bj);
                    sc_row[j] = sc * d + bj;
                    if (sc_row[j] > mx) mx = sc_row[j];
                }
                for (int64_t j = 0; j < jn; j++) z += exp(sc_row[j] - mx);
                for (int64_t j = 0; j < jn; j++) {
                    uint64_t idx = ((uint64_t)bh * T + i) * T + j;
                    if (st_hash_uniform(seed, idx) < p) continue;
                    double w = exp(sc_row[j] - mx) / z / (1.0 - p);
                    for (int64_t c = 0; c < D; c++) o[c] += w * V[j * D + c];
                }
                for (int64_t c = 0; c < D; c++) ref[(bh * T + i) * D + c] = (float)o[c];
            }
        }
        st_ctx_begin(&E.ctx, 1, 1);
        st_tensor *og = st_attention(&E.ctx, s.q, s.k, s.v, &ba, causal, 0.0f, p, seed);
        CHECK(og && E.ctx.n_nodes == 1);
        if (og) th_close(causal ? "dropout grad-mode causal" : "dropout grad-mode bidir", og->data, ref, B * H * T * D, 1e-5, 1e-5);
        st_ctx_begin(&E.ctx, 0, 1);   /* training forward without grad: streamed kernel */
        st_tensor *os = st_attention(&E.ctx, s.q, s.k, s.v, &ba, causal, 0.0f, p, seed);
        CHECK(os && E.ctx.n_nodes == 0);
        if (os) th_close(causal ? "dropout streamed causal" : "dropout streamed bidir", os->data, ref, B * H * T * D, 1e-5, 1e-5);
        /* eval mode: no dropout */
        st_ctx_begin(&E.ctx, 1, 0);
        st_tensor *oe = st_attention(&E.ctx, s.q, s.k, s.v, &ba, causal, 0.0f, p, seed);
        ref_attention(s.q->data, s.k->data, s.v->data, ref, B, H, T, D, &ba, causal, 0.0f);
        if (oe) th_close("dropout off in eval", oe->data, ref, B * H * T * D, 1e-5, 1e-5);
    }
    free(ref); free(sc_row);
    env_free(&E);
    st_params_free(&s.p);
}

/* --------------------------------------------------------------- causality ---- */
static void test_causality(void) {
    const int64_t B = 1, H = 2, T = 100, D = 8, t = 40, n = B * H * T * D;
    qkv s;
    qkv_init(&s, B, H, T, D, 21, 1.0f);
    alibi_bias al = {.slope = {0.5f, 0.1f}};
    st_attn_bias ba = make_alibi(&al);
    env E;
    env_init(&E);
    float *g0 = malloc((size_t)n * sizeof(float)), *s0 = malloc((size_t)n * sizeof(float));
    float *s1 = malloc((size_t)n * sizeof(float));
    st_ctx_begin(&E.ctx, 1, 0);
    st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, &ba, 1, 0.0f, 0.0f, 0);
    memcpy(g0, o->data, (size_t)n * sizeof(float));
    st_attention_streamed(s.q->data, s.k->data, s.v->data, s0, B, H, T, D, &ba, 1, 0.0f, 16);
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t c = 0; c < D; c++) {
            s.k->data[(bh * T + t) * D + c] += 3.0f;
            s.v->data[(bh * T + t) * D + c] -= 5.0f;
        }
    st_ctx_begin(&E.ctx, 1, 0);
    o = st_attention(&E.ctx, s.q, s.k, s.v, &ba, 1, 0.0f, 0.0f, 0);
    st_attention_streamed(s.q->data, s.k->data, s.v->data, s1, B, H, T, D, &ba, 1, 0.0f, 16);
    int before_same = 1, at_changed = 1;
    for (int64_t bh = 0; bh < B * H; bh++) {
        for (int64_t x = bh * T * D; x < (bh * T + t) * D; x++)
            before_same &= o->data[x] == g0[x] && s1[x] == s0[x];
        int diff_g = 0, diff_s = 0;
        for (int64_t x = (bh * T + t) * D; x < (bh * T + t + 1) * D; x++) {
            diff_g |= o->data[x] != g0[x];
            diff_s |= s1[x] != s0[x];
        }
        at_changed &= diff_g && diff_s;
    }
    CHECK_MSG(before_same, "causal: outputs before t changed when k/v at t changed");
    CHECK_MSG(at_changed, "causal: output at t did not change");
    free(g0); free(s0); free(s1);
    env_free(&E);
    st_params_free(&s.p);
}

/* Every distance at -inf: rows are fully masked; outputs and gradients are 0, not NaN. */
static void test_fully_masked(void) {
    const int64_t B = 1, H = 2, T = 9, D = 4, n = B * H * T * D;
    qkv s;
    qkv_init(&s, B, H, T, D, 3, 1.0f);
    st_attn_bias bn = {.fill = neginf_fill};
    env E;
    env_init(&E);
    float *r = malloc((size_t)n * sizeof(float)), *str = malloc((size_t)n * sizeof(float));
    float *ones = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) ones[i] = 1.0f;
    for (int causal = 0; causal <= 1; causal++) {
        st_params_zero_grad(&s.p);
        st_ctx_begin(&E.ctx, 1, 1);
        st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, &bn, causal, 0.0f, 0.2f, 1);
        st_error e = {0};
        CHECK(o && st_backward(&E.ctx, wsum(&E.ctx, o, ones), 1.0f, &e) == ST_OK);
        int zero = 1;
        for (int64_t i = 0; i < n; i++) zero &= o->data[i] == 0.0f && s.q->grad[i] == 0.0f &&
                                               s.k->grad[i] == 0.0f && s.v->grad[i] == 0.0f;
        CHECK_MSG(zero, "fully masked (causal=%d): grad-mode outputs/grads not all 0", causal);
        st_attention_streamed(s.q->data, s.k->data, s.v->data, str, B, H, T, D, &bn, causal, 0.0f, 4);
        ref_attention(s.q->data, s.k->data, s.v->data, r, B, H, T, D, &bn, causal, 0.0f);
        int zs = 1;
        for (int64_t i = 0; i < n; i++) zs &= str[i] == 0.0f && r[i] == 0.0f;
        CHECK_MSG(zs, "fully masked (causal=%d): streamed/reference not all 0", causal);
    }
    /* A -inf window (distances > 5 masked) with 4-key blocks: whole blocks are masked for
     * the later rows, which must start from -inf without NaN. */
    alibi_bias aw = {.slope = {0.3f, 0.0f}, .window = 5};
    st_attn_bias bw = make_alibi(&aw);
    for (int causal = 0; causal <= 1; causal++) {
        ref_attention(s.q->data, s.k->data, s.v->data, r, B, H, T, D, &bw, causal, 0.0f);
        st_attention_streamed(s.q->data, s.k->data, s.v->data, str, B, H, T, D, &bw, causal, 0.0f, 2);
        th_close("windowed -inf bias streamed", str, r, n, 1e-5, 1e-5);
        st_ctx_begin(&E.ctx, 1, 0);
        st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, &bw, causal, 0.0f, 0.0f, 0);
        if (o) th_close("windowed -inf bias grad-mode", o->data, r, n, 1e-5, 1e-5);
    }
    free(r); free(str); free(ones);
    env_free(&E);
    st_params_free(&s.p);
}

/* NaN scores make their rows NaN, as in PyTorch: keys 0-3 NaN (the streamed kernel's
 * whole first block of 4) reach every causal row. A row whose scores are all NaN was
 * taken for a fully masked one (zeros), and so was a NaN first block of the streamed
 * kernel: a broken model then gave a finite loss (review 43). */
static void test_nan_scores(void) {
    const int64_t B = 1, H = 2, T = 9, D = 4, n = B * H * T * D;
    qkv s;
    qkv_init(&s, B, H, T, D, 5, 1.0f);
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < 4; t++)
            for (int64_t c = 0; c < D; c++) s.k->data[(h * T + t) * D + c] = NAN;
    alibi_bias al = {.slope = {0.5f, 0.25f}};
    st_attn_bias ba = make_alibi(&al);
    env E;
    env_init(&E);
    float *str = malloc((size_t)n * sizeof(float));
    st_ctx_begin(&E.ctx, 1, 0);
    st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, &ba, 1, 0.0f, 0.0f, 0);
    st_attention_streamed(s.q->data, s.k->data, s.v->data, str, B, H, T, D, &ba, 1, 0.0f, 4);
    int nan_g = o != NULL, nan_s = 1;
    for (int64_t i = 0; i < n; i++) {
        if (o) nan_g &= isnan(o->data[i]);
        nan_s &= isnan(str[i]);
    }
    CHECK_MSG(nan_g, "NaN keys: every grad-mode output row is NaN");
    CHECK_MSG(nan_s, "NaN keys: every streamed output row is NaN");
    free(str);
    env_free(&E);
    st_params_free(&s.p);
}

/* ------------------------------------------------------- inference memory ---- */
static void test_inference_memory(void) {
    const int64_t B = 1, H = 2, T = 4096, D = 16, n = B * H * T * D;
    float *q = malloc((size_t)n * sizeof(float)), *k = malloc((size_t)n * sizeof(float));
    float *v = malloc((size_t)n * sizeof(float)), *ref = malloc((size_t)n * sizeof(float));
    st_rng rng;
    st_rng_seed(&rng, 8);
    for (int64_t i = 0; i < n; i++) { q[i] = st_rng_normal(&rng); k[i] = st_rng_normal(&rng); v[i] = st_rng_normal(&rng); }
    alibi_bias al = {.slope = {0.25f, 1.0f / 64}};
    st_attn_bias ba = make_alibi(&al);
    st_arena arena;
    st_ctx ctx;
    st_error e = {0};
    st_arena_init(&arena, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &arena, 64, &e);
    int64_t shp[4] = {B, H, T, D};
    for (int grad = 0; grad <= 1; grad++) {
        /* grad = 1 with inputs that need no gradient is inference too */
        st_ctx_begin(&ctx, grad, 0);
        st_tensor *tq = st_wrap(&ctx, q, 4, shp), *tk = st_wrap(&ctx, k, 4, shp), *tv = st_wrap(&ctx, v, 4, shp);
        size_t before = arena.used;
        st_tensor *o = st_attention(&ctx, tq, tk, tv, &ba, 1, 0.0f, 0.1f, 3);
        size_t delta = arena.used - before;
        CHECK(o != NULL);
        CHECK_MSG(ctx.n_nodes == 0 && ctx.backward_bytes == 0, "inference: %d nodes, %zu backward bytes",
                  ctx.n_nodes, ctx.backward_bytes);
        /* out (512 KiB) + bias tables + per-thread blocks (< 2 MiB); one (T,T) is 64 MiB */
        CHECK_MSG(delta < (size_t)n * sizeof(float) + ((size_t)2 << 20), "inference arena use %zu bytes", delta);
        CHECK_MSG(arena.high_water < (size_t)T * T * sizeof(float) / 16, "arena high water %zu", arena.high_water);
        if (grad == 0 && o) {
            st_attention_streamed(q, k, v, ref, B, H, T, D, &ba, 1, 0.0f, 0);
            CHECK_MSG(memcmp(o->data, ref, (size_t)n * sizeof(float)) == 0,
                      "inference st_attention != st_attention_streamed bit for bit");
        }
    }
    st_ctx_free(&ctx);
    st_arena_free(&arena);
    free(q); free(k); free(v); free(ref);
}

/* ----------------------------------------------------- long-range numerics ---- */
/* T = 16384 with steep slopes: bias reaches -4 * 16383 = -65532. The output must be
 * finite and equal the softmax over the last W keys (the rest weigh < e^-(slope W)). */
static void test_long_range(void) {
    const int64_t T = 16384, D = 8, n = T * D;
    float *q = malloc((size_t)n * sizeof(float)), *k = malloc((size_t)n * sizeof(float));
    float *v = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)n * sizeof(float));
    st_rng rng;
    st_rng_seed(&rng, 16384);
    for (int64_t i = 0; i < n; i++) { q[i] = st_rng_normal(&rng); k[i] = st_rng_normal(&rng); v[i] = st_rng_normal(&rng); }
    static const float slopes[2] = {4.0f, 0.5f};
    static const int64_t windows[2] = {24, 96};   /* slope * W >= 48: dropped mass < e^-40 */
    for (int t = 0; t < 2; t++) {
        alibi_bias al = {.slope = {slopes[t]}};
        st_attn_bias ba = make_alibi(&al);
        st_attention_streamed(q, k, v, out, 1, 1, T, D, &ba, 1, 0.0f, 0);
        CHECK_MSG(all_finite(out, n), "long range slope %g: non-finite output", slopes[t]);
        /* windowed double reference */
        double maxd = 0;
        const double sc = 1.0 / sqrt((double)D);
        for (int64_t i = 0; i < T; i++) {
            const int64_t j0 = i - windows[t] + 1 > 0 ? i - windows[t] + 1 : 0;
            double s[96], mx = -INFINITY, z = 0, o[8] = {0};
            for (int64_t j = j0; j <= i; j++) {
                double d = 0;
                for (int64_t c = 0; c < D; c++) d += (double)q[i * D + c] * k[j * D + c];
                s[j - j0] = sc * d - (double)slopes[t] * (double)(i - j);
                if (s[j - j0] > mx) mx = s[j - j0];
            }
            for (int64_t j = j0; j <= i; j++) {
                double w = exp(s[j - j0] - mx);
                z += w;
                for (int64_t c = 0; c < D; c++) o[c] += w * v[j * D + c];
            }
            for (int64_t c = 0; c < D; c++) {
                TH_MAX(maxd, fabs(o[c] / z - out[i * D + c]));
            }
        }
        CHECK_MSG(maxd < 1e-5, "long range slope %g: max |out - window reference| = %.3g", slopes[t], maxd);
    }
    free(q); free(k); free(v); free(out);
}

/* ------------------------------------------------------------ determinism ---- */
static void run_fwd_bwd(qkv *s, const st_attn_bias *b, const float *r, float *grads) {
    env E;
    env_init(&E);
    st_params_zero_grad(&s->p);
    st_ctx_begin(&E.ctx, 1, 1);
    st_tensor *o = st_attention(&E.ctx, s->q, s->k, s->v, b, 1, 0.0f, 0.1f, 5);
    st_error e = {0};
    CHECK(st_backward(&E.ctx, wsum(&E.ctx, o, r), 1.0f, &e) == ST_OK);
    memcpy(grads, s->p.grad, s->p.n * sizeof(float));
    env_free(&E);
}

static void test_determinism(void) {
    qkv s;
    qkv_init(&s, 2, 4, 150, 16, 6, 0.5f);
    table_bias tb = {s.w, 150};
    st_attn_bias bt = make_table(&tb);
    const int64_t n = st_numel(s.q);
    float *r = malloc((size_t)n * sizeof(float));
    st_rng rng;
    st_rng_seed(&rng, 1);
    for (int64_t i = 0; i < n; i++) r[i] = st_rng_normal(&rng);
    float *g1 = malloc(s.p.n * sizeof(float)), *g2 = malloc(s.p.n * sizeof(float));
    run_fwd_bwd(&s, &bt, r, g1);
    run_fwd_bwd(&s, &bt, r, g2);
    CHECK_MSG(memcmp(g1, g2, s.p.n * sizeof(float)) == 0, "gradients differ between identical runs");
    CHECK(all_finite(g1, (int64_t)s.p.n));
    float wmax = 0;   /* the bias gradient is actually produced */
    for (int64_t i = 0; i < st_numel(s.w); i++) wmax = fmaxf(wmax, fabsf(s.w->grad[i]));
    CHECK(wmax > 0.0f);
    free(r); free(g1); free(g2);
    st_params_free(&s.p);
}

int main(void) {
    test_gradcheck();
    test_forward_agreement();
    test_dropout_forward();
    test_causality();
    test_fully_masked();
    test_nan_scores();
    test_inference_memory();
    test_long_range();
    test_determinism();
    return test_finish("test_attention");
}
