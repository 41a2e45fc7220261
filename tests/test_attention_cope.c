/* test_attention_cope.c - CoPE inside the attention kernels (src/ops/attention_cope.c):
 *   - finite-difference gradient check of q, k, v and the position embeddings E (gates,
 *     cumulative sum, interpolation, embeddings), T = 7 (B = 2) and T = 70 (across the
 *     64-row query block), with positions clamped (n_pos 3) and not (n_pos T + 1), with a
 *     fixed ALiBi bias under the gates, with attention dropout, and with E the only
 *     learnable input;
 *   - grad-mode forward == inference (streamed, key blocks newest to oldest, block sizes
 *     7, 16 and 256) == an independent double reference;
 *   - KV-cache rows (st_attention_cached), all keys and a sliding window, against the
 *     double reference restricted to the window;
 *   - identical gradients between identical runs. */
#include "test_attention_util.h"

#define REL_TOL 1e-4

/* ALiBi slopes as a distance bias (fixed), to check that the gates see the bias. */
typedef struct slope_bias { const float *m; } slope_bias;
static void slope_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const slope_bias *sb = self->state;
    for (int64_t x = 0; x < n; x++) out[x] = -sb->m[h] * (float)(d0 + x);
}

/* ---------------------------------------------------- double reference ---- */
/* Causal attention with CoPE (docs/position-methods.md), row by row in double; keys
 * j in (i - W, i] when W > 0. slopes: ALiBi slopes under the gates, or NULL. */
static void cope_reference_d(const double *q, const double *k, const double *v, const double *E, int64_t npos,
                             double *out, int64_t B, int64_t H, int64_t T, int64_t D, const float *slopes,
                             int64_t W) {
    const double sc = 1.0 / sqrt((double)D);
    double *s = malloc((size_t)T * sizeof(double)), *z = malloc((size_t)npos * sizeof(double));
    for (int64_t bh = 0; bh < B * H; bh++) {
        const double *Q = q + bh * T * D, *K = k + bh * T * D, *V = v + bh * T * D;
        for (int64_t i = 0; i < T; i++) {
            const int64_t lo = W > 0 && i - W + 1 > 0 ? i - W + 1 : 0;
            for (int64_t m = 0; m < npos; m++) {
                double d = 0;
                for (int64_t c = 0; c < D; c++) d += (double)Q[i * D + c] * E[m * D + c];
                z[m] = sc * d;
            }
            double P = 0, mx = -INFINITY;
            for (int64_t j = i; j >= lo; j--) {
                double d = 0;
                for (int64_t c = 0; c < D; c++) d += (double)Q[i * D + c] * K[j * D + c];
                const double s0 = sc * d - (slopes ? slopes[bh % H] * (double)(i - j) : 0.0);
                P += 1.0 / (1.0 + exp(-s0));
                const double p = P < (double)(npos - 1) ? P : (double)(npos - 1);
                const int64_t f = (int64_t)floor(p), cc = f + 1 < npos ? f + 1 : f;
                const double w = p - (double)f;
                s[j] = s0 + (1 - w) * z[f] + w * z[cc];
                mx = s[j] > mx ? s[j] : mx;
            }
            double sum = 0;
            for (int64_t j = lo; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t c = 0; c < D; c++) {
                double o = 0;
                for (int64_t j = lo; j <= i; j++) o += s[j] * V[j * D + c];
                out[(bh * T + i) * D + c] = o / sum;
            }
        }
    }
    free(s);
    free(z);
}

static double *to_double(const float *x, int64_t n) {
    double *d = calloc((size_t)n, sizeof(double));   /* calloc: gcc cannot see n > 0 (-Wmaybe-uninitialized) */
    ST_ASSERT(d);
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* the same on float inputs, float output */
static void cope_reference(const float *q, const float *k, const float *v, const float *E, int64_t npos,
                           float *out, int64_t B, int64_t H, int64_t T, int64_t D, const float *slopes,
                           int64_t W) {
    const int64_t n = B * H * T * D;
    double *qd = to_double(q, n), *kd = to_double(k, n), *vd = to_double(v, n), *ed = to_double(E, npos * D);
    double *od = malloc((size_t)n * sizeof(double));
    cope_reference_d(qd, kd, vd, ed, npos, od, B, H, T, D, slopes, W);
    for (int64_t i = 0; i < n; i++) out[i] = (float)od[i];
    free(qd); free(kd); free(vd); free(ed); free(od);
}

/* Long rows: float finite differences cross the kinks of the interpolation (P moves by
 * ~0.1 per 1e-2 step over 70 gates) and step 1e-3 drowns in float noise, so the kernel's
 * gradients are compared with central differences (step 1e-6) of the double reference
 * instead, on `count` elements of each of q, k, v, E: L = sum r_x out_x. */
static void check_against_double_fd(const char *name, qkv *s, st_tensor *e, int64_t npos, const float *slopes,
                                    int count) {
    const int64_t B = s->B, H = s->H, T = s->T, D = s->D, n = B * H * T * D;
    double *r = malloc((size_t)n * sizeof(double));
    float *rf = malloc((size_t)n * sizeof(float));
    st_rng rng;
    st_rng_seed(&rng, 7);
    for (int64_t i = 0; i < n; i++) rf[i] = (float)(r[i] = st_rng_normal(&rng));
    /* analytic: the kernel's backward of L */
    st_params_zero_grad(&s->p);
    memset(e->grad, 0, (size_t)(npos * D) * sizeof(float));
    st_attn_cope cp = {e->data, e->grad, npos};
    slope_bias sb = {slopes};
    st_attn_bias b = {.fill = slopes ? slope_fill : NULL, .state = &sb, .cope = &cp};
    env E;
    env_init(&E);
    st_ctx_begin(&E.ctx, 1, 0);
    st_error err = {0};
    st_tensor *loss = wsum(&E.ctx, st_attention(&E.ctx, s->q, s->k, s->v, &b, 1, 0.0f, 0.0f, 0), rf);
    ST_ASSERT(st_backward(&E.ctx, loss, 1.0f, &err) == ST_OK);
    env_free(&E);
    double *in[4] = {to_double(s->q->data, n), to_double(s->k->data, n), to_double(s->v->data, n),
                     to_double(e->data, npos * D)};
    const float *grads[4] = {s->q->grad, s->k->grad, s->v->grad, e->grad};
    const int64_t sizes[4] = {n, n, n, npos * D};
    double *out = malloc((size_t)n * sizeof(double));
    double worst = 0;
    for (int leaf = 0; leaf < 4; leaf++)
        for (int c = 0; c < count; c++) {
            const int64_t x = (int64_t)st_rng_below(&rng, (uint64_t)sizes[leaf]);
            const double x0 = in[leaf][x], h = 1e-6;
            double l[2];
            for (int side = 0; side < 2; side++) {
                in[leaf][x] = x0 + (side ? -h : h);
                cope_reference_d(in[0], in[1], in[2], in[3], npos, out, B, H, T, D, slopes, 0);
                l[side] = 0;
                for (int64_t i = 0; i < n; i++) l[side] += r[i] * out[i];
            }
            in[leaf][x] = x0;
            const double num = (l[0] - l[1]) / (2 * h), an = grads[leaf][x];
            const double q = fabs(an - num) / (2e-4 + 2e-3 * fabs(num));
            worst = q > worst ? q : worst;
        }
    printf("double-fd %-30s worst |err|/tol %.3f (%d elements of q, k, v, E each)\n", name, worst, count);
    CHECK_MSG(worst <= 1.0, "%s: kernel gradients vs double finite differences, worst |err|/tol %.3f", name, worst);
    for (int i = 0; i < 4; i++) free(in[i]);
    free(out); free(r); free(rf);
}

/* E (n_pos, D) as a learnable leaf, N(0, 0.8): a visible position term */
typedef struct emb { st_params p; st_tensor *e; st_attn_cope cope; } emb;
static void emb_init(emb *m, int64_t npos, int64_t D, uint64_t seed) {
    st_error err = {0};
    int64_t shp[2] = {npos, D};
    st_params_init(&m->p);
    st_params_add(&m->p, "e", 2, shp, 0, ST_INIT_NORMAL, 0.8f);
    ST_ASSERT(st_params_finalize(&m->p, &err) == ST_OK);
    st_rng rng;
    st_rng_seed(&rng, seed);
    st_params_init_values(&m->p, &rng);
    m->e = st_param(&m->p, 0);
    m->cope = (st_attn_cope){m->e->data, m->e->grad, npos};
}

static void test_gradcheck(void) {
    const double eps = 1e-2, atol = 2e-4, rtol = 2e-3;
    const float slopes[2] = {0.5f, 0.25f};
    for (int big = 0; big <= 1; big++) {
        const int64_t B = big ? 1 : 2, H = 2, T = big ? 70 : 7, D = big ? 4 : 6;
        const int64_t nposs[2] = {3, T + 1};
        for (int ni = 0; ni < 2; ni++) {
            qkv s;
            qkv_init(&s, B, H, T, D, 80 + (uint64_t)(big * 2 + ni), 0.5f);
            emb m;
            emb_init(&m, nposs[ni], D, 90 + (uint64_t)ni);
            slope_bias sb = {slopes};
            st_attn_bias plain = {.cope = &m.cope};
            st_attn_bias with_alibi = {.fill = slope_fill, .state = &sb, .cope = &m.cope};
            st_tensor *lv[4] = {s.q, s.k, s.v, m.e};
            char name[96];
            gc_case c1 = {&s, &plain, 1, 0.0f, 0.0f};
            gc_case c2 = {&s, &with_alibi, 1, 0.0f, 0.2f};
            snprintf(name, sizeof name, "cope T%lld n_pos %lld", (long long)T, (long long)nposs[ni]);
            if (big) {
                check_against_double_fd(name, &s, m.e, nposs[ni], NULL, 30);
                snprintf(name, sizeof name, "cope T%lld n_pos %lld + alibi", (long long)T, (long long)nposs[ni]);
                check_against_double_fd(name, &s, m.e, nposs[ni], slopes, 30);
            } else {
                gradcheck(name, gc_build, &c1, lv, 4, 0, eps, atol, rtol, 0);
                snprintf(name, sizeof name, "cope T%lld n_pos %lld + alibi + dropout", (long long)T, (long long)nposs[ni]);
                gradcheck(name, gc_build, &c2, lv, 4, 1, eps, atol, rtol, 0);
                snprintf(name, sizeof name, "cope T%lld n_pos %lld, E only", (long long)T, (long long)nposs[ni]);
                gradcheck(name, gc_build, &c1, &lv[3], 1, 0, eps, atol, rtol, 0);
            }
            st_params_free(&m.p);
            st_params_free(&s.p);
        }
    }
}

/* grad-mode == streamed == inference == double reference */
static void test_forward(void) {
    const float slopes[3] = {0.5f, 0.25f, 0.125f};
    const int64_t Ts[3] = {5, 70, 300};
    for (int ti = 0; ti < 3; ti++) {
        const int64_t B = 2, H = 3, T = Ts[ti], D = 8, npos = ti == 1 ? 9 : T + 1;
        qkv s;
        qkv_init(&s, B, H, T, D, 100 + (uint64_t)ti, 1.0f);
        emb m;
        emb_init(&m, npos, D, 110 + (uint64_t)ti);
        slope_bias sb = {slopes};
        const size_t n = (size_t)(B * H * T * D);
        float *ref = malloc(n * sizeof(float)), *str = malloc(n * sizeof(float));
        for (int with_alibi = 0; with_alibi <= 1; with_alibi++) {
            st_attn_bias b = {.fill = with_alibi ? slope_fill : NULL, .state = &sb, .cope = &m.cope};
            cope_reference(s.q->data, s.k->data, s.v->data, m.e->data, npos, ref, B, H, T, D,
                           with_alibi ? slopes : NULL, 0);
            for (int grad = 0; grad <= 1; grad++) {
                env E;
                env_init(&E);
                st_ctx_begin(&E.ctx, grad, 0);
                st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, &b, 1, 0.0f, 0.0f, 0);
                const double err = rel_err(o->data, ref, (int64_t)n);
                CHECK_MSG(err <= REL_TOL, "cope T=%lld alibi %d %s vs double reference: rel err %.2e", (long long)T,
                          with_alibi, grad ? "grad-mode" : "inference", err);
                env_free(&E);
            }
            const int64_t kbs[3] = {7, 16, 256};
            for (int ki = 0; ki < 3; ki++) {
                st_attention_streamed(s.q->data, s.k->data, s.v->data, str, B, H, T, D, &b, 1, 0.0f, kbs[ki]);
                const double err = rel_err(str, ref, (int64_t)n);
                CHECK_MSG(err <= REL_TOL, "cope T=%lld alibi %d streamed, key block %lld: rel err %.2e", (long long)T,
                          with_alibi, (long long)kbs[ki], err);
            }
        }
        free(ref); free(str);
        st_params_free(&m.p);
        st_params_free(&s.p);
    }
}

/* new queries against cached keys, with and without a window */
static void test_cached(void) {
    const int64_t H = 2, T = 41, D = 8, npos = 6;
    qkv s;
    qkv_init(&s, 1, H, T, D, 120, 1.0f);
    emb m;
    emb_init(&m, npos, D, 121);
    st_attn_bias b = {.cope = &m.cope};
    float *ref = malloc((size_t)(H * T * D) * sizeof(float));
    const int64_t windows[3] = {0, 6, 1};
    for (int wi = 0; wi < 3; wi++) {
        cope_reference(s.q->data, s.k->data, s.v->data, m.e->data, npos, ref, 1, H, T, D, NULL, windows[wi]);
        const int64_t tqs[3] = {1, 5, T};
        for (int ti = 0; ti < 3; ti++) {
            const int64_t Tq = tqs[ti];
            env E;
            env_init(&E);
            st_ctx_begin(&E.ctx, 0, 0);
            st_tensor *qt = last_rows(&E.ctx, s.q->data, 1, H, T, Tq, D);
            st_tensor *o = st_attention_cached(&E.ctx, qt, s.k->data, s.v->data, T * D, T, NULL, 0, &b, 1000,
                                               windows[wi], 0.0f);
            const double err = tail_err(o->data, ref, H, T, Tq, D);
            CHECK_MSG(err <= REL_TOL, "cope cached, window %lld, %lld new queries: rel err %.2e",
                      (long long)windows[wi], (long long)Tq, err);
            env_free(&E);
        }
    }
    free(ref);
    st_params_free(&m.p);
    st_params_free(&s.p);
}

/* two identical backward passes give bit-identical gradients */
static void test_determinism(void) {
    const int64_t B = 3, H = 4, T = 100, D = 16, npos = 17;
    qkv s;
    qkv_init(&s, B, H, T, D, 130, 0.5f);
    emb m;
    emb_init(&m, npos, D, 131);
    st_attn_bias b = {.cope = &m.cope};
    float *r = malloc((size_t)(B * H * T * D) * sizeof(float));
    st_rng rng;
    st_rng_seed(&rng, 5);
    for (int64_t i = 0; i < B * H * T * D; i++) r[i] = st_rng_normal(&rng);
    gc_case c = {&s, &b, 1, 0.0f, 0.0f};
    CHECK_MSG(same_grads_twice(gc_build, &c, &s.p, &m.p, r), "cope: identical gradients from identical runs");
    CHECK_MSG(all_finite(m.p.grad, (int64_t)m.p.n), "cope: finite embedding gradient");
    free(r);
    st_params_free(&m.p);
    st_params_free(&s.p);
}

int main(void) {
    test_gradcheck();
    test_forward();
    test_cached();
    test_determinism();
    return test_finish("test_attention_cope");
}
