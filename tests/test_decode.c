/* test_decode.c - incremental decoding with a KV cache (src/model/decode.c,
 * src/ops/attention_cached.c) against the full forward, for every position method:
 *   - st_attention_cached (new queries against cached keys, with and without a window)
 *     equals the double reference on the whole sequence;
 *   - prefill + token-by-token decode (and a multi-token chunk in between) gives the
 *     logits of st_model_logits on the full sequence;
 *   - past the window, relative methods and rope: a one-layer model equals the full
 *     forward over the last `window` tokens; a deeper one equals a full forward with
 *     sliding-window attention (every query sees the last `window` keys of its layer),
 *     which is not the truncated forward (checked too: the difference is real);
 *   - absolute methods refuse to slide, and a re-prefilled window equals the full
 *     forward over it;
 *   - bad arguments fail with the documented codes; the arena does not grow per token.
 * Tolerance: max |decode - full| <= 1e-4 max |full| over each comparison. */
#include "harness.h"
#include "test_attn_reference.h"
#include "test_model_util.h"
#include "model/model_internal.h"
#include "st_matmul.h"
#include "st_transform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REL_TOL 1e-4

/* max |a - b| / max |b| */
static double rel_err(const float *a, const float *b, int64_t n) {
    double d = 0, s = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        d = x > d || isnan(x) ? x : d;
        s = fabs((double)b[i]) > s ? fabs((double)b[i]) : s;
    }
    return d / s;
}

/* ---- a bias that hides keys at distance >= window (sliding-window attention) ---- */
typedef struct band_bias { st_attn_bias iface; const st_attn_bias *inner; int64_t window; } band_bias;

static void band_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const band_bias *b = self->state;
    if (b->inner && b->inner->fill) b->inner->fill(b->inner, h, d0, n, out);
    else memset(out, 0, (size_t)n * sizeof(float));
    for (int64_t k = 0; k < n; k++)
        if (d0 + k >= b->window || d0 + k <= -b->window) out[k] = -INFINITY;
}

static void band_init(band_bias *b, const st_attn_bias *inner, int64_t window) {
    memset(b, 0, sizeof *b);
    b->iface.fill = band_fill;
    b->iface.state = b;
    b->inner = inner;
    b->window = window;
    b->iface.cope = inner ? inner->cope : NULL;   /* CoPE: its gates see the band's -inf too */
    b->iface.gate = inner ? inner->gate : NULL;   /* FoX: its gate term inside the band */
}

typedef struct env { st_arena ar; st_ctx ctx; } env;
static st_ctx *env_open(env *v) {
    st_error e = {0};
    ST_ASSERT(st_arena_init(&v->ar, 1 << 20, (size_t)1 << 30, &e) == ST_OK);
    ST_ASSERT(st_ctx_init(&v->ctx, &v->ar, 4096, &e) == ST_OK);
    st_ctx_begin(&v->ctx, 0, 0);
    return &v->ctx;
}
static void env_close(env *v) { st_ctx_free(&v->ctx); st_arena_free(&v->ar); }

/* ------------------------------------------------------------ the kernel ---- */
static void test_kernel(void) {
    const int64_t H = 3, T = 37, D = 8, rows = 45;
    st_model_config c;
    base_cfg(&c, ST_POS_ALIBI);
    c.n_heads = (int)H;
    st_pos_bias pb;
    st_pos_bias_init(&pb, &c, 0, NULL, NULL);
    const size_t n = (size_t)(H * T * D);
    float *q = malloc(sizeof(float) * n * 4), *k = q + n, *v = k + n, *ref = v + n;
    float *kc = calloc((size_t)(H * rows * D) * 2, sizeof(float)), *vc = kc + H * rows * D;
    float *tab = malloc(sizeof(float) * (size_t)(H * T));
    st_rng r; st_rng_seed(&r, 11);
    for (size_t i = 0; i < 3 * n; i++) q[i] = 2.0f * st_rng_normal(&r);
    for (int64_t h = 0; h < H; h++) {   /* the cache layout: rows of D, `rows` per head */
        memcpy(kc + h * rows * D, k + h * T * D, sizeof(float) * (size_t)(T * D));
        memcpy(vc + h * rows * D, v + h * T * D, sizeof(float) * (size_t)(T * D));
    }
    env ev;
    st_ctx *ctx = env_open(&ev);
    const int64_t windows[3] = {0, 6, 1};
    for (int wi = 0; wi < 3; wi++) {
        const int64_t W = windows[wi];
        band_bias bb;
        band_init(&bb, &pb.iface, W > 0 ? W : T);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            band_bias bn;
            band_init(&bn, NULL, W > 0 ? W : T);
            ref_attention(q, k, v, ref, 1, H, T, D, with_bias ? &bb.iface : &bn.iface, 1, 0.0f);
            /* the shortest table the call accepts, and a full-length one */
            const int64_t lens[2] = {W > 0 ? W : T, T};
            for (int li = 0; li < 2; li++) {
                if (with_bias) st_attention_bias_table(&pb.iface, H, lens[li], tab);
                const int64_t tqs[3] = {1, 5, T};
                for (int ti = 0; ti < 3; ti++) {
                    const int64_t Tq = tqs[ti];
                    st_tensor *qt = st_new4(ctx, 1, H, Tq, D);
                    for (int64_t h = 0; h < H; h++)
                        memcpy(qt->data + h * Tq * D, q + (h * T + T - Tq) * D, sizeof(float) * (size_t)(Tq * D));
                    st_tensor *o = st_attention_cached(ctx, qt, kc, vc, rows * D, T, with_bias ? tab : NULL,
                                                       lens[li], NULL, 0, W, 0.0f);
                    double err = 0;
                    for (int64_t h = 0; h < H; h++) {
                        double x = rel_err(o->data + h * Tq * D, ref + (h * T + T - Tq) * D, Tq * D);
                        err = x > err ? x : err;
                    }
                    CHECK_MSG(err <= REL_TOL, "cached attention, window %lld, bias %d, table %lld, %lld new queries: "
                              "rel err %.2e", (long long)W, with_bias, (long long)lens[li], (long long)Tq, err);
                }
            }
        }
    }
    env_close(&ev);
    free(q); free(kc); free(tab);
}

/* bf16 rows (a bf16 KV cache): the kernel widens each key block exactly, so its output
 * is bit for bit the fp32 kernel's on the rounded keys and values, and within 2 x 2^-7 of
 * the unrounded ones (test_bf16's bound). 300 keys: two key blocks of 256; one to all
 * queries new; a window; rerope's clipped keys; grouped-query keys (3 heads, 1 k/v head). */
static void test_kernel_bf16(void) {
    const int64_t H = 3, T = 300, D = 8, rows = 310, nkv = H * rows * D;
    float *q = malloc(sizeof(float) * (size_t)(2 * H * T * D)), *q2 = q + H * T * D;
    float *f = malloc(sizeof(float) * (size_t)(6 * nkv));   /* k, v, k2 in fp32, then rounded */
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(3 * nkv));
    st_rng r; st_rng_seed(&r, 13);
    for (int64_t i = 0; i < 2 * H * T * D; i++) q[i] = st_rng_normal(&r);
    for (int64_t i = 0; i < 3 * nkv; i++) f[i] = st_rng_normal(&r);
    st_bf16_round(h, f, 3 * nkv);
    for (int64_t i = 0; i < 3 * nkv; i++) f[3 * nkv + i] = st_bf16_to_f32(h[i]);
    env ev;
    st_ctx *ctx = env_open(&ev);
    const int64_t tqs[3] = {1, 5, T};
    for (int kind = 0; kind < 4; kind++)   /* plain, window 70, clipped at 40, grouped */
        for (int ti = 0; ti < 3; ti++) {
            const int64_t Tq = tqs[ti], W = kind == 1 ? 70 : 0, clip = kind == 2 ? 40 : 0, g = kind == 3 ? H : 1;
            st_ctx_begin(ctx, 0, 0);
            st_tensor *qt = st_new4(ctx, 1, H, Tq, D), *q2t = clip ? st_new4(ctx, 1, H, Tq, D) : NULL;
            for (int64_t hh = 0; hh < H; hh++) {
                memcpy(qt->data + hh * Tq * D, q + (hh * T + T - Tq) * D, sizeof(float) * (size_t)(Tq * D));
                if (q2t) memcpy(q2t->data + hh * Tq * D, q2 + (hh * T + T - Tq) * D, sizeof(float) * (size_t)(Tq * D));
            }
            const st_kv_rows r32 = {.k = f, .v = f + nkv, .k2 = clip ? f + 2 * nkv : NULL, .stride = rows * D};
            const st_kv_rows rr = {.k = f + 3 * nkv, .v = f + 4 * nkv, .k2 = clip ? f + 5 * nkv : NULL, .stride = rows * D};
            const st_kv_rows r16 = {.kh = h, .vh = h + nkv, .k2h = clip ? h + 2 * nkv : NULL, .stride = rows * D};
            st_tensor *o[3];
            const st_kv_rows *rs[3] = {&r32, &rr, &r16};
            for (int k = 0; k < 3; k++)
                o[k] = st_attention_cached_sinks(ctx, qt, rs[k], T, NULL, 0, NULL, 0, 0.0f, &(st_attn_mask){.window = W},
                                                 q2t, clip, g);
            const size_t n = (size_t)(H * Tq * D);
            CHECK_MSG(o[1] && o[2] && !memcmp(o[1]->data, o[2]->data, n * sizeof(float)),
                      "bf16 rows, case %d, %lld new queries: the fp32 kernel on the rounded rows, bit for bit", kind,
                      (long long)Tq);
            const double err = o[0] && o[2] ? rel_err(o[2]->data, o[0]->data, (int64_t)n) : INFINITY;
            CHECK_MSG(err <= 2.0 / 128 && err > 0, "bf16 rows, case %d, %lld new queries: rel err %.2e to fp32 rows",
                      kind, (long long)Tq, err);
        }
    env_close(&ev);
    free(q); free(f); free(h);
}

/* ------------------------------------------------------------ the model ---- */
/* A tiny model of variant v (sharp attention: init_std 0.3, so a wrong key or bias shows)
 * and n random ids for it. Returns the vocabulary size. */
static int decode_model(st_model *m, const struct variant *v, int n_layers, uint64_t seed, int32_t *ids, int64_t n) {
    st_model_config c;
    base_cfg(&c, v->pos);
    c.rf_kind = v->rf_kind;
    c.rf_scope = v->rf_scope;
    c.n_layers = n_layers;
    c.d_model = 16;
    c.d_ff = 24;
    c.max_len = 64;
    c.init_std = 0.3f;
    if (v->tweak) v->tweak(&c);
    make_model_cfg(m, &c, seed);
    rand_ids(ids, n, c.vocab_size, seed + 7);
    return c.vocab_size;
}

/* Full forward with sliding-window attention over ids (T): every query sees the last W
 * keys of its layer. Logits (1,T,V). */
static st_tensor *banded_logits(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t T, int64_t W) {
    st_error e = {0};
    st_tensor *x = st_model_embed(m, ctx, ids, 1, T, 0, 0, &e);
    for (int l = 0; l < m->cfg.n_layers && x; l++) {
        st_tensor *q, *k, *v, *g = NULL;
        st_attn_bias *inner;
        if (!st_block_qkv2(m, ctx, l, x, 0, W, &q, &k, &v, NULL, NULL, &g) || !st_block_expand_kv(m, ctx, &k, &v, NULL))
            return NULL;
        const st_attn_gate gate = {g, g ? g->data : NULL, T};   /* FoX */
        if (!st_block_bias(m, ctx, l, g ? &gate : NULL, &inner)) return NULL;
        band_bias *bb = st_ctx_alloc(ctx, sizeof *bb, 0);
        band_init(bb, inner, W);
        x = st_block_out(m, ctx, l, x, st_attention(ctx, q, k, v, &bb->iface, 1, 0.0f, 0.0f, 0), 0);
    }
    x = st_block_norm(m, ctx, x, m->p_ln_f_w, m->p_ln_f_b);
    return st_linear(ctx, x, st_model_head_weight(m), NULL);
}

/* Decode ids[from..to) into c and return the relative error of its logits against
 * ref (the full forward's row for position to-1). */
static double decode_vs(st_model *m, st_kv_cache *c, st_ctx *ctx, const int32_t *ids, int64_t from, int64_t to,
                        const float *ref) {
    float logits[64];
    st_error e = {0};
    ST_ASSERT(m->cfg.vocab_size <= 64);
    int rc = st_model_decode(m, c, ctx, ids + from, to - from, logits, &e);
    if (rc) { fprintf(stderr, "decode: %s\n", e.msg); return INFINITY; }
    return rel_err(logits, ref, m->cfg.vocab_size);
}

/* The bound a cache of `precision` is held to against the full forward: fp32 1e-4; bf16
 * keys and values (--precision bf16: rounded once when appended, widened for the
 * products) 2^-5: the kernel meets test_bf16's 2 x 2^-7 on its output (test_kernel_bf16),
 * and these deliberately sharp models (init_std 0.3) amplify that through two layers to
 * 1.6e-3..2.3e-2 in the logits. A bf16 cache must also hold bf16 rows (xpos keeps fp32:
 * it rescales its cached keys in place), half the key/value bytes, and show the rounding
 * (an error above the fp32 bound). */
static double cache_tol(int precision) { return precision == ST_PREC_BF16 ? 1.0 / 32 : REL_TOL; }

static void check_cache_rows(const st_kv_cache *kv, const st_model *m, int precision, double err, const char *what) {
    const int half = precision == ST_PREC_BF16 && m->cfg.pos != ST_POS_XPOS;
    CHECK_MSG(half ? kv->precision == ST_PREC_BF16 && kv->kh && kv->vh && !kv->k && !kv->v
                   : kv->precision == ST_PREC_FP32 && kv->k && !kv->kh,
              "%s: a %s cache keeps %s rows", what, st_precision_name(precision), half ? "bf16" : "fp32");
    const double kv32 = 2.0 * kv->n_layers * kv->n_kv_heads * (double)kv->rows * kv->head_dim * sizeof(float);
    const double tab = kv->bias ? (double)kv->n_layers * kv->n_heads * (double)kv->window * sizeof(float) : 0.0;
    /* FoX: every cached key's gate sum per query head, fp32 in either precision */
    const double gates = m->cfg.pos == ST_POS_FOX ? (double)kv->n_layers * kv->n_heads * (double)kv->rows * sizeof(float) : 0.0;
    CHECK_MSG((m->cfg.pos == ST_POS_FOX) == (kv->gate != NULL), "%s: gate sums kept for FoX only", what);
    /* model.kv_shift: each layer's last k and v rows before the shift, fp32 */
    const int shifted = m->cfg.kv_shift != ST_KV_SHIFT_NONE;
    const double shift = shifted ? 2.0 * kv->n_layers * kv->n_kv_heads * kv->head_dim * sizeof(float) : 0.0;
    CHECK_MSG(shifted == (kv->shift != NULL), "%s: shift rows kept with model.kv_shift only", what);
    CHECK_MSG(st_kv_cache_bytes(kv) == (half ? kv32 / 2 : kv32) + tab + gates + shift, "%s: %.0f bytes", what,
              st_kv_cache_bytes(kv));
    if (half) CHECK_MSG(err > REL_TOL, "%s: the bf16 rows show (rel err %.2e)", what, err);
}

/* Within the window: prefill 7, single tokens, a chunk of 5, single tokens; an fp32 and a
 * bf16 cache. */
static void test_within_window(void) {
    enum { N = 40 };
    for (int prec = ST_PREC_FP32; prec <= ST_PREC_BF16; prec++)
    for (int vi = 0; vi < N_VARIANTS; vi++) {
        st_model m;
        int32_t ids[N];
        const int V = decode_model(&m, &variants[vi], 2, 700 + (uint64_t)vi, ids, N);
        env ev;
        st_ctx *ctx = env_open(&ev);
        st_error e = {0};
        st_tensor *full = st_model_logits(&m, ctx, ids, 1, N, 0, &e);
        ST_ASSERT(full);
        float *ref = malloc(sizeof(float) * N * (size_t)V);
        memcpy(ref, full->data, sizeof(float) * N * (size_t)V);
        st_kv_cache kv;
        ST_ASSERT(st_kv_cache_init(&kv, &m, N, prec, &e) == ST_OK);
        double err = 0;
        int64_t t = 0;
        const int64_t steps[] = {7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5};
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            double x = decode_vs(&m, &kv, ctx, ids, t, t + steps[s], ref + (t + steps[s] - 1) * V);
            err = x > err ? x : err;
            t += steps[s];
        }
        st_ctx_begin(ctx, 0, 0);
        const size_t total0 = ev.ar.total;
        for (; t < N; t++) {
            st_ctx_begin(ctx, 0, 0);
            double x = decode_vs(&m, &kv, ctx, ids, t, t + 1, ref + t * V);
            err = x > err ? x : err;
        }
        CHECK_MSG(err <= cache_tol(prec), "%s, %s cache: prefill + decode vs full forward: rel err %.2e",
                  variants[vi].name, st_precision_name(prec), err);
        check_cache_rows(&kv, &m, prec, err, variants[vi].name);
        CHECK_MSG(kv.len == N && kv.n_seen == N, "%s: the cache holds every token", variants[vi].name);
        CHECK_MSG(ev.ar.total == total0 && st_arena_chunks(&ev.ar) == 1, "%s: no arena growth per token", variants[vi].name);
        /* a reset cache decodes the same sequence again, in one prefill */
        st_kv_cache_reset(&kv);
        err = decode_vs(&m, &kv, ctx, ids, 0, N, ref + (N - 1) * V);
        CHECK_MSG(err <= cache_tol(prec), "%s: one prefill of %d tokens after a reset: rel err %.2e", variants[vi].name, N, err);
        st_kv_cache_free(&kv);
        free(ref);
        env_close(&ev);
        st_model_free(&m);
    }
}

/* Past the window, methods that slide: the rows shift (fp32 and bf16 caches). */
static void test_sliding(void) {
    enum { N = 64, W = 8 };
    for (int prec = ST_PREC_FP32; prec <= ST_PREC_BF16; prec++)
    for (int vi = 0; vi < N_VARIANTS; vi++) {
        if (!st_kv_cache_slides(variants[vi].pos)) continue;
        for (int layers = 1; layers <= 2; layers++) {
            st_model m;
            int32_t ids[N];
            const int V = decode_model(&m, &variants[vi], layers, 900 + 10 * (uint64_t)vi + (uint64_t)layers, ids, N);
            env ev;
            st_ctx *ctx = env_open(&ev);
            st_error e = {0};
            /* references: banded full forward (all rows) and, per position, the full
             * forward over the last W tokens */
            float *band = malloc(sizeof(float) * N * (size_t)V), *trunc = malloc(sizeof(float) * N * (size_t)V);
            st_tensor *bl = banded_logits(&m, ctx, ids, N, W);
            ST_ASSERT(bl);
            memcpy(band, bl->data, sizeof(float) * N * (size_t)V);
            for (int64_t t = 1; t <= N; t++) {
                st_ctx_begin(ctx, 0, 0);
                const int64_t T = t < W ? t : W;
                st_tensor *lt = st_model_logits(&m, ctx, ids + t - T, 1, T, 0, &e);
                ST_ASSERT(lt);
                memcpy(trunc + (t - 1) * V, lt->data + (T - 1) * V, sizeof(float) * (size_t)V);
            }
            st_kv_cache kv;
            ST_ASSERT(st_kv_cache_init(&kv, &m, W, prec, &e) == ST_OK);
            double eb = 0, et = 0;
            st_ctx_begin(ctx, 0, 0);
            eb = decode_vs(&m, &kv, ctx, ids, 0, 3, band + 2 * V);
            for (int64_t t = 3; t < N; t++) {
                st_ctx_begin(ctx, 0, 0);
                double x = decode_vs(&m, &kv, ctx, ids, t, t + 1, band + t * V);
                eb = x > eb ? x : eb;
                x = rel_err(band + t * V, trunc + t * V, V);
                et = x > et ? x : et;
            }
            CHECK_MSG(eb <= cache_tol(prec), "%s, %d layer(s), %s cache, window %d over %d tokens: decode vs "
                      "sliding-window forward: rel err %.2e", variants[vi].name, layers, st_precision_name(prec), W, N, eb);
            check_cache_rows(&kv, &m, prec, eb, variants[vi].name);
            /* a shifted key or value also holds its predecessor's row, one token before the
             * window (the truncated forward's first token has none); an Abacus row counts
             * the digits of a run begun before the window */
            if (layers == 1 && m.cfg.kv_shift == ST_KV_SHIFT_NONE && m.cfg.abacus_rows == 0)
                CHECK_MSG(et <= REL_TOL, "%s, one layer: sliding window = full forward over the last %d tokens "
                          "(rel err %.2e)", variants[vi].name, W, et);
            else if (variants[vi].pos == ST_POS_ALIBI)
                CHECK_MSG(et > 100 * REL_TOL, "alibi, two layers: the sliding window sees past the last %d tokens "
                          "(differs from the truncated forward by %.2e)", W, et);
            CHECK_MSG(kv.n_seen == N && kv.len <= kv.rows && kv.len >= W, "%s: cache holds %lld of %lld rows",
                      variants[vi].name, (long long)kv.len, (long long)kv.rows);
            /* the whole sequence as one prefill: chunks that fit the rows, shifted between */
            st_kv_cache_reset(&kv);
            st_ctx_begin(ctx, 0, 0);
            double x = decode_vs(&m, &kv, ctx, ids, 0, N, band + (N - 1) * V);
            CHECK_MSG(x <= cache_tol(prec), "%s, %d layer(s): one prefill of %d tokens through a window of %d: rel err %.2e",
                      variants[vi].name, layers, N, W, x);
            st_kv_cache_free(&kv);
            free(band); free(trunc);
            env_close(&ev);
            st_model_free(&m);
        }
    }
}

/* Absolute positions: no sliding; a re-prefilled window equals the full forward over it. */
static void test_absolute(void) {
    enum { W = 8 };
    for (int vi = 0; vi < N_VARIANTS; vi++) {
        if (st_kv_cache_slides(variants[vi].pos)) continue;
        st_model m;
        int32_t ids[W + 3];
        const int V = decode_model(&m, &variants[vi], 2, 1100 + (uint64_t)vi, ids, W + 3);
        env ev;
        st_ctx *ctx = env_open(&ev);
        st_error e = {0};
        st_kv_cache kv;
        ST_ASSERT(st_kv_cache_init(&kv, &m, W, ST_PREC_FP32, &e) == ST_OK);
        CHECK(!kv.slides && kv.rows == W);
        float logits[64];
        CHECK(st_model_decode(&m, &kv, ctx, ids, W, logits, &e) == ST_OK);
        int rc = st_model_decode(&m, &kv, ctx, ids + W, 1, logits, &e);
        CHECK_MSG(rc == ST_ERR_CONFIG && strstr(e.msg, "cannot slide"), "%s: decoding past the window fails (%s)",
                  variants[vi].name, e.msg);
        CHECK_MSG(kv.n_seen == W, "%s: a refused decode leaves the cache as it was", variants[vi].name);
        st_kv_cache_reset(&kv);
        st_error e2 = {0};
        st_tensor *full = st_model_logits(&m, ctx, ids + 3, 1, W, 0, &e2);
        ST_ASSERT(full);
        double err = decode_vs(&m, &kv, ctx, ids, 3, W + 3, full->data + (W - 1) * V);
        CHECK_MSG(err <= REL_TOL, "%s: re-prefilled window vs full forward: rel err %.2e", variants[vi].name, err);
        st_kv_cache_free(&kv);
        env_close(&ev);
        st_model_free(&m);
    }
}

static void test_errors(void) {
    st_model m;
    int32_t unused[1];
    decode_model(&m, &variants[7], 1, 5, unused, 1);
    ST_ASSERT(m.cfg.pos == ST_POS_LEARNED);
    st_error e = {0};
    st_kv_cache kv;
    CHECK(st_kv_cache_init(&kv, &m, m.cfg.max_len + 1, ST_PREC_FP32, &e) == ST_ERR_CONFIG && strstr(e.msg, "model.max_len"));
    CHECK(kv.k == NULL);
    st_error_clear(&e);
    CHECK(st_kv_cache_init(&kv, &m, 0, ST_PREC_FP32, &e) == ST_ERR_CONFIG && strstr(e.msg, "window"));
    st_error_clear(&e);
    ST_ASSERT(st_kv_cache_init(&kv, &m, 8, ST_PREC_FP32, &e) == ST_OK);
    env ev;
    st_ctx *ctx = env_open(&ev);
    float logits[64];
    int32_t ids[3] = {1, 2, 11};   /* 11 = vocab_size: out of range */
    CHECK(st_model_decode(&m, &kv, ctx, ids, 3, logits, &e) == ST_ERR_DATA && strstr(e.msg, "token id 11"));
    CHECK(kv.n_seen == 0);
    st_error_clear(&e);
    CHECK(st_model_decode(&m, &kv, ctx, ids, 0, logits, &e) == ST_ERR_CONFIG);
    st_error_clear(&e);
    st_ctx_begin(ctx, 1, 0);
    CHECK(st_model_decode(&m, &kv, ctx, ids, 2, logits, &e) != ST_OK && strstr(e.msg, "inference mode"));
    st_error_clear(&e);
    st_ctx_begin(ctx, 0, 0);
    size_t used = ev.ar.used;
    CHECK(st_model_decode(&m, &kv, ctx, ids, 2, logits, &e) == ST_OK);
    CHECK_MSG(ev.ar.used == used, "decode returns its arena memory (%zu -> %zu bytes)", used, ev.ar.used);
    /* a cache made for another model */
    st_model m2;
    decode_model(&m2, &variants[7], 2, 6, unused, 1);
    CHECK(st_model_decode(&m2, &kv, ctx, ids, 2, logits, &e) == ST_ERR_CONFIG && strstr(e.msg, "another model"));
    st_model_free(&m2);
    st_kv_cache_free(&kv);
    env_close(&ev);
    st_model_free(&m);
}

/* A refused call changes nothing: a bad token id at the end of a call under dynamic_ntk
 * (whose scale follows the call's length) left the transform's current length and the
 * cache's scale set, and a later full forward then used that length (review 43). */
static void test_refused_keeps_state(void) {
    st_model_config c;
    base_cfg(&c, ST_POS_ROPE);
    c.d_model = 16; c.d_ff = 24; c.max_len = 64; c.init_std = 0.3f;
    st_model m;
    make_model_cfg(&m, &c, 3);
    st_transform xf = {0};
    xf.kind = ST_XF_DYNAMIC_NTK; xf.train_len = 4;
    st_error e = {0};
    ST_ASSERT(st_transform_check(&xf, c.pos, "--transform", &e) == ST_OK);
    st_model_set_transform(&m, &xf, "test");
    env ev;
    st_ctx *ctx = env_open(&ev);
    int32_t ids[32];
    rand_ids(ids, 32, c.vocab_size, 5);
    const int V = c.vocab_size;
    float before[64], lo[64];
    st_ctx_begin(ctx, 0, 0);
    st_tensor *ref = st_model_logits(&m, ctx, ids, 1, 6, 0, &e);
    ST_ASSERT(ref && V <= 64);
    memcpy(before, ref->data + 5 * V, sizeof(float) * V);
    st_kv_cache kv;
    ST_ASSERT(st_kv_cache_init(&kv, &m, 32, ST_PREC_FP32, &e) == ST_OK);
    const float scale0 = kv.xf_scale;
    int32_t bad[20];
    memcpy(bad, ids + 6, sizeof bad);
    bad[19] = V + 5;
    st_ctx_begin(ctx, 0, 0);
    CHECK(st_model_decode(&m, &kv, ctx, bad, 20, lo, &e) == ST_ERR_DATA);
    st_error_clear(&e);
    CHECK_MSG(m.xf->cur_len == 0, "a refused decode leaves the transform's length at 0 (%lld)", (long long)m.xf->cur_len);
    CHECK_MSG(kv.xf_scale == scale0 && kv.n_seen == 0, "a refused decode leaves the cache as it was (scale %g, was %g)",
              kv.xf_scale, scale0);
    st_ctx_begin(ctx, 0, 0);
    st_tensor *again = st_model_logits(&m, ctx, ids, 1, 6, 0, &e);
    ST_ASSERT(again);
    CHECK_MSG(memcmp(again->data + 5 * V, before, sizeof(float) * V) == 0,
              "the full forward after a refused decode is the one before it");
    st_kv_cache_free(&kv);
    env_close(&ev);
    st_model_free(&m);
}

/* A sliding cache keeps the transform's window: that one is checked against the
 * positions the method represents (xpos's scale overflows past max_len), not the
 * caller's window it replaces (review 43), unless the caller's bound on the tokens is
 * shorter: then no key is ever dropped and the cache holds that many (probe 6). */
static void test_window_limit(void) {
    st_model_config c;
    base_cfg(&c, ST_POS_XPOS);
    c.d_model = 16; c.d_ff = 24; c.max_len = 64; c.init_std = 0.3f; c.xpos_gamma = 4.0f;
    st_model m;
    make_model_cfg(&m, &c, 11);
    const int64_t lim = st_pos_max_len(&c);
    ST_ASSERT(lim > 100 && lim < 1000);
    st_error e = {0};
    st_transform xf = {0};
    xf.window = 1000;
    ST_ASSERT(st_transform_check(&xf, c.pos, "--transform", &e) == ST_OK);
    st_model_set_transform(&m, &xf, "test");
    st_kv_cache kv;
    CHECK_MSG(st_kv_cache_init(&kv, &m, 5000, ST_PREC_FP32, &e) == ST_ERR_CONFIG && strstr(e.msg, "--window"),
              "an xpos cache under --window 1000 (max %lld) is refused: %s", (long long)lim, e.msg);
    CHECK(kv.k == NULL);
    st_error_clear(&e);
    CHECK_MSG(st_kv_cache_init(&kv, &m, 90, ST_PREC_FP32, &e) == ST_OK && kv.window == 90,
              "a text of 90 tokens under --window 1000 needs a cache of 90: %s", e.msg);
    st_kv_cache_free(&kv);
    xf.window = 100;
    CHECK(st_kv_cache_init(&kv, &m, 100, ST_PREC_FP32, &e) == ST_OK && kv.window == 100);
    st_kv_cache_free(&kv);
    st_model_free(&m);
}

int main(void) {
    st_set_threads(2);
    test_window_limit();
    test_refused_keeps_state();
    test_kernel();
    test_kernel_bf16();
    test_within_window();
    test_sliding();
    test_absolute();
    test_errors();
    return test_finish("test_decode");
}
