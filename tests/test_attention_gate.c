/* test_attention_gate.c - FoX's gate term inside the attention kernels (st_attn_gate:
 * score(i, j) += c_i - c_j, include/st_ops.h):
 *   - finite-difference gradient check of q, k, v and c, T = 7 (B = 2) and T = 70 (across
 *     the 64-row query block), alone, under a fixed ALiBi bias, with attention dropout,
 *     under a per-instance (document) mask, with c the only learnable input, and through
 *     st_log_gate_cumsum (gate logits as the leaf);
 *   - grad-mode forward == inference (streamed) == an independent double reference, and
 *     the streamed kernel with a window, with blocks (xPos's blockwise mask) and on the
 *     last rows only (st_attention_clipped) against the reference restricted the same way;
 *   - KV-cache rows (st_attention_cached_sinks) with the c of a cache (a stride longer
 *     than the keys, sums continued from earlier text) against the reference;
 *   - identical gradients between identical runs. */
#include "test_attention_util.h"

#define REL_TOL 1e-5

/* ---------------------------------------------------- double reference ---- */
/* Causal attention with score(i, j) = q_i.k_j / sqrt(D) - m_h (i - j) + c_i - c_j over
 * keys j in [lo(i), i]: lo = i - W + 1 with a window W > 0, (floor(i / blk) - 1) blk with
 * blocks of blk > 0, 0 otherwise. c (B,H,T), slopes NULL: no ALiBi. Row by row in double. */
static void gate_reference(const float *q, const float *k, const float *v, const float *c, const float *slopes,
                           float *out, int64_t B, int64_t H, int64_t T, int64_t D, int64_t W, int64_t blk) {
    const double sc = 1.0 / sqrt((double)D);
    double *s = malloc((size_t)T * sizeof(double));
    for (int64_t bh = 0; bh < B * H; bh++) {
        const float *Q = q + bh * T * D, *K = k + bh * T * D, *V = v + bh * T * D, *C = c + bh * T;
        const double m = slopes ? slopes[bh % H] : 0.0;
        for (int64_t i = 0; i < T; i++) {
            int64_t lo = W > 0 && i - W + 1 > 0 ? i - W + 1 : 0;
            if (blk > 0 && (i / blk - 1) * blk > lo) lo = (i / blk - 1) * blk;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = lo; j <= i; j++) {
                double d = 0;
                for (int64_t x = 0; x < D; x++) d += (double)Q[i * D + x] * (double)K[j * D + x];
                s[j] = sc * d - m * (double)(i - j) + ((double)C[i] - (double)C[j]);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = lo; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t x = 0; x < D; x++) {
                double o = 0;
                for (int64_t j = lo; j <= i; j++) o += s[j] * (double)V[j * D + x];
                out[(bh * T + i) * D + x] = (float)(o / sum);
            }
        }
    }
    free(s);
}

/* ALiBi slopes as a fixed distance bias under the gate term */
typedef struct slope_bias { const float *m; } slope_bias;
static void slope_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const slope_bias *sb = self->state;
    for (int64_t x = 0; x < n; x++) out[x] = -sb->m[h] * (float)(d0 + x);
}

/* the gate's leaves: c (B,H,T) and gate logits f (B,T,H), N(0, 1.5^2): c's rows are not
 * monotone, which the kernel must not assume; f's gates span (0.05, 0.95) */
typedef struct gate_leaves { st_params p; st_tensor *c, *f; } gate_leaves;
static void gate_init(gate_leaves *g, int64_t B, int64_t H, int64_t T, uint64_t seed) {
    st_error e = {0};
    int64_t cs[3] = {B, H, T}, fs[3] = {B, T, H};
    st_params_init(&g->p);
    st_params_add(&g->p, "c", 3, cs, 0, ST_INIT_NORMAL, 1.5f);
    st_params_add(&g->p, "f", 3, fs, 0, ST_INIT_NORMAL, 1.5f);
    ST_ASSERT(st_params_finalize(&g->p, &e) == ST_OK);
    st_rng rng;
    st_rng_seed(&rng, seed);
    st_params_init_values(&g->p, &rng);
    g->c = st_param(&g->p, 0);
    g->f = st_param(&g->p, 1);
}

/* gradcheck case: attention of s's q, k, v with the gate term from g->c (or, with from_f,
 * from st_log_gate_cumsum of g->f), under fixed ALiBi slopes (or none), a per-instance
 * mask (or none), attention dropout p */
typedef struct gate_case {
    qkv *s;
    gate_leaves *g;
    const float *slopes;
    const int32_t *doc;
    int from_f;
    float p;
} gate_case;

static st_tensor *gate_build(st_ctx *ctx, void *user) {
    gate_case *gc = user;
    st_tensor *c = gc->from_f ? st_log_gate_cumsum(ctx, gc->g->f) : gc->g->c;
    if (!c) return NULL;
    st_attn_gate gate = {c, c->data, gc->s->T};
    slope_bias sb = {gc->slopes};
    st_attn_bias b = {.fill = gc->slopes ? slope_fill : NULL, .state = &sb, .gate = &gate};
    return st_attention_doc(ctx, gc->s->q, gc->s->k, gc->s->v, &b, 1, 0.0f, gc->p, 77, gc->doc);
}

static void test_gradcheck(void) {
    const double eps = 1e-2, atol = 2e-4, rtol = 2e-3;
    const float slopes[2] = {0.5f, 0.25f};
    static const int32_t doc7[14] = {0, 0, 0, 3, 3, 3, 3, 0, 0, 2, 2, 2, 2, 6};
    for (int big = 0; big <= 1; big++) {
        const int64_t B = big ? 1 : 2, H = 2, T = big ? 70 : 7, D = big ? 4 : 6;
        qkv s;
        qkv_init(&s, B, H, T, D, 80 + (uint64_t)big, 0.5f);
        gate_leaves g;
        gate_init(&g, B, H, T, 90 + (uint64_t)big);
        st_tensor *lv[4] = {s.q, s.k, s.v, g.c}, *lf[4] = {s.q, s.k, s.v, g.f};
        const int cap = big ? 40 : 0;   /* elements per leaf at T = 70 */
        char name[96];
        gate_case c0 = {&s, &g, NULL, NULL, 0, 0.0f};
        snprintf(name, sizeof name, "gate T%lld", (long long)T);
        gradcheck(name, gate_build, &c0, lv, 4, 0, eps, atol, rtol, cap);
        gate_case c1 = {&s, &g, slopes, NULL, 0, 0.2f};
        snprintf(name, sizeof name, "gate T%lld + alibi + dropout", (long long)T);
        gradcheck(name, gate_build, &c1, lv, 4, 1, eps, atol, rtol, cap);
        snprintf(name, sizeof name, "gate T%lld, c only", (long long)T);
        gradcheck(name, gate_build, &c0, &lv[3], 1, 0, eps, atol, rtol, cap);
        /* at T = 70 the sums of 70 broad gates (log f ~ -1 each) make scores so peaked that
         * a float central difference's truncation error is percent-sized for the early
         * logits (each moves every later c): gates near 1 there (f + 3, log f ~ -0.1), as a
         * trained FoX has; T = 7 keeps the broad ones */
        if (big)
            for (int64_t x = 0; x < B * T * H; x++) g.f->data[x] += 3.0f;
        gate_case c2 = {&s, &g, NULL, NULL, 1, 0.0f};
        snprintf(name, sizeof name, "gate T%lld from logits", (long long)T);
        gradcheck(name, gate_build, &c2, lf, 4, 0, eps, atol, rtol, cap);
        if (!big) {
            gate_case c3 = {&s, &g, slopes, doc7, 0, 0.0f};
            gradcheck("gate T7 + alibi + doc mask", gate_build, &c3, lv, 4, 0, eps, atol, rtol, 0);
        }
        st_params_free(&g.p);
        st_params_free(&s.p);
    }
}

/* grad mode == inference (streamed) == reference; the streamed kernel under a window, a
 * block mask and on the last rows only, against the reference with the same mask */
static void test_forward(void) {
    const float slopes[3] = {0.5f, 0.25f, 0.125f};
    const int64_t B = 2, H = 3, T = 300, D = 16, n = B * H * T * D;
    qkv s;
    qkv_init(&s, B, H, T, D, 100, 0.5f);
    gate_leaves g;
    gate_init(&g, B, H, T, 101);
    /* c as the running log-gate sums FoX makes (a long row: sums down to about -300) */
    for (int64_t bh = 0; bh < B * H; bh++) {
        double acc = 0;
        for (int64_t t = 0; t < T; t++) {
            acc += -log1p(exp(-(double)g.f->data[bh * T + t] - 2.0));
            g.c->data[bh * T + t] = (float)acc;
        }
    }
    float *ref = malloc((size_t)n * sizeof(float));
    st_attn_gate gate = {NULL, g.c->data, T};
    slope_bias sb = {slopes};
    for (int with_alibi = 0; with_alibi < 2; with_alibi++) {
        st_attn_bias b = {.fill = with_alibi ? slope_fill : NULL, .state = &sb, .gate = &gate};
        gate_reference(s.q->data, s.k->data, s.v->data, g.c->data, with_alibi ? slopes : NULL, ref, B, H, T, D, 0, 0);
        for (int grad = 0; grad < 2; grad++) {
            env E;
            env_init(&E);
            st_ctx_begin(&E.ctx, grad, 0);
            st_attn_gate gt = {grad ? g.c : NULL, g.c->data, T};
            st_attn_bias bg = b;
            bg.gate = &gt;
            st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, &bg, 1, 0.0f, 0.0f, 0);
            const double err = rel_err(o->data, ref, n);
            CHECK_MSG(err <= REL_TOL, "gate%s, %s forward: rel err %.2e vs the double reference",
                      with_alibi ? " + alibi" : "", grad ? "grad-mode" : "streamed", err);
            env_free(&E);
        }
        /* masks of the streamed kernel: a window of 37, blocks of 64 and of 100 */
        const int64_t masks[3][2] = {{37, 0}, {0, 64}, {0, 100}};
        for (int mi = 0; mi < 3; mi++) {
            gate_reference(s.q->data, s.k->data, s.v->data, g.c->data, with_alibi ? slopes : NULL, ref, B, H, T, D,
                           masks[mi][0], masks[mi][1]);
            const st_attn_mask mask = {.window = masks[mi][0], .block = masks[mi][1]};
            for (int tail = 0; tail < 2; tail++) {   /* every row, or the last 236 (from row 64) */
                const int64_t Tq = tail ? T - 64 : T;
                env E;
                env_init(&E);
                st_ctx_begin(&E.ctx, 0, 0);
                st_tensor *qt = last_rows(&E.ctx, s.q->data, B, H, T, Tq, D);
                st_tensor *o = st_attention_clipped(&E.ctx, qt, s.k, s.v, NULL, NULL, 0, &b, 0.0f, &mask);
                const double err = tail_err(o->data, ref, B * H, T, Tq, D);
                CHECK_MSG(err <= REL_TOL, "gate%s, window %lld, blocks of %lld, %lld rows: rel err %.2e",
                          with_alibi ? " + alibi" : "", (long long)masks[mi][0], (long long)masks[mi][1],
                          (long long)Tq, err);
                env_free(&E);
            }
        }
    }
    free(ref);
    st_params_free(&g.p);
    st_params_free(&s.p);
}

/* new queries against cached keys: the cache's c rows have a stride beyond the keys and
 * continue sums of earlier text (an offset of -1000: only differences may matter) */
static void test_cached(void) {
    const int64_t H = 2, T = 41, D = 8, rows = 50;
    qkv s;
    qkv_init(&s, 1, H, T, D, 120, 1.0f);
    gate_leaves g;
    gate_init(&g, 1, H, T, 121);
    float *ref = malloc((size_t)(H * T * D) * sizeof(float)), *crow = malloc((size_t)(H * rows) * sizeof(float));
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < rows; t++) crow[h * rows + t] = t < T ? g.c->data[h * T + t] - 1000.0f : NAN;
    float *cshift = malloc((size_t)(H * T) * sizeof(float));   /* the reference on the same floats */
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++) cshift[h * T + t] = crow[h * rows + t];
    st_attn_gate gate = {NULL, crow, rows};
    st_attn_bias b = {.gate = &gate};
    const int64_t windows[3] = {0, 6, 1};
    for (int wi = 0; wi < 3; wi++) {
        gate_reference(s.q->data, s.k->data, s.v->data, cshift, NULL, ref, 1, H, T, D, windows[wi], 0);
        const int64_t tqs[3] = {1, 5, T};
        for (int ti = 0; ti < 3; ti++) {
            const int64_t Tq = tqs[ti];
            env E;
            env_init(&E);
            st_ctx_begin(&E.ctx, 0, 0);
            st_tensor *qt = last_rows(&E.ctx, s.q->data, 1, H, T, Tq, D);
            const st_kv_rows kv = {.k = s.k->data, .v = s.v->data, .stride = T * D};
            const st_attn_mask mask = {.window = windows[wi]};
            st_tensor *o = st_attention_cached_sinks(&E.ctx, qt, &kv, T, NULL, 0, &b, 1000, 0.0f, &mask, NULL, 0, 1);
            const double err = tail_err(o->data, ref, H, T, Tq, D);
            CHECK_MSG(err <= REL_TOL, "gate cached, window %lld, %lld new queries: rel err %.2e",
                      (long long)windows[wi], (long long)Tq, err);
            env_free(&E);
        }
    }
    free(ref); free(crow); free(cshift);
    st_params_free(&g.p);
    st_params_free(&s.p);
}

/* two identical backward passes give bit-identical gradients */
static void test_determinism(void) {
    const int64_t B = 3, H = 4, T = 100, D = 16;
    qkv s;
    qkv_init(&s, B, H, T, D, 130, 0.5f);
    gate_leaves g;
    gate_init(&g, B, H, T, 131);
    float *r = malloc((size_t)(B * H * T * D) * sizeof(float));
    st_rng rng;
    st_rng_seed(&rng, 5);
    for (int64_t i = 0; i < B * H * T * D; i++) r[i] = st_rng_normal(&rng);
    gate_case gc = {&s, &g, NULL, NULL, 1, 0.0f};
    CHECK_MSG(same_grads_twice(gate_build, &gc, &s.p, &g.p, r), "gate: identical gradients from identical runs");
    CHECK_MSG(all_finite(g.f->grad, B * T * H), "gate: finite logit gradient");
    free(r);
    st_params_free(&g.p);
    st_params_free(&s.p);
}

int main(void) {
    test_gradcheck();
    test_forward();
    test_cached();
    test_determinism();
    return test_finish("test_attention_gate");
}
