/* test_attn_stats.c - the attention statistics of the streamed kernel (ctx->attn_stats,
 * ST_ATTN_NSTATS in include/st_ops.h: mean key distance, entropy, first-key mass, far
 * mass per query row) against a double-precision materialised reference, for no bias, a
 * distance bias and a general bias, causal full attention (st_attention's inference
 * path) and sinks + window (st_attention_window), T crossing the query and key blocks;
 * the attention output itself unchanged by asking for them; the same numbers with 1 and
 * 2 threads. */
#include "harness.h"
#include "test_bias_util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

static st_arena ar;
static st_ctx ctx;

/* the four statistics of every row (H, T, 4) in double: causal, keys j with i - j <
 * window or j < sinks (window 0: all) */
static void stats_ref(const float *q, const float *k, int64_t H, int64_t T, int64_t D, const st_attn_bias *bias,
                      int64_t sinks, int64_t window, int64_t far, double *out) {
    double *s = malloc((size_t)T * sizeof(double));
    float b1;
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < T; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j <= i; j++) {
                s[j] = -INFINITY;
                if (window > 0 && i - j >= window && j >= sinks) continue;
                double dot = 0;
                for (int64_t c = 0; c < D; c++) dot += (double)q[(h * T + i) * D + c] * (double)k[(h * T + j) * D + c];
                s[j] = dot / sqrt((double)D);
                if (bias && bias->fill) { bias->fill(bias, (int)h, i - j, 1, &b1); s[j] += b1; }
                else if (bias) { bias->fill_block(bias, (int)h, i, 1, j, 1, &b1, 1); s[j] += b1; }
                if (s[j] > mx) mx = s[j];
            }
            double z = 0;
            for (int64_t j = 0; j <= i; j++) z += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
            double dist = 0, ent = 0, first = 0, fm = 0;
            for (int64_t j = 0; j <= i; j++) {
                if (s[j] == -INFINITY) continue;
                const double p = exp(s[j] - mx) / z;
                dist += p * (double)(i - j);
                if (p > 0) ent -= p * log(p);
                if (j == 0) first = p;
                if (i - j >= far) fm += p;
            }
            double *o = out + (h * T + i) * 4;
            o[0] = dist; o[1] = ent; o[2] = first; o[3] = fm;
        }
    free(s);
}

/* The kernel's statistics (H, T, 4) and output for one case; 0 on failure. */
static int run(const float *q, const float *k, const float *v, int64_t H, int64_t T, int64_t D,
               const st_attn_bias *bias, int64_t sinks, int64_t window, int64_t far, float *stats, float *out) {
    st_ctx_begin(&ctx, 0, 0);
    int64_t shape[4] = {1, H, T, D};
    st_tensor *tq = st_wrap(&ctx, (float *)q, 4, shape), *tk = st_wrap(&ctx, (float *)k, 4, shape);
    st_tensor *tv = st_wrap(&ctx, (float *)v, 4, shape);
    ctx.attn_stats = stats;
    ctx.attn_far = far;
    st_tensor *o = window > 0 ? st_attention_window(&ctx, tq, tk, tv, bias, 0.0f, sinks, window)
                              : st_attention(&ctx, tq, tk, tv, bias, 1, 0.0f, 0.0f, 0);
    ctx.attn_stats = NULL;
    if (!o) return 0;
    memcpy(out, o->data, (size_t)(H * T * D) * sizeof(float));
    return 1;
}

int main(void) {
    st_error e = {0};
    st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &ar, 4096, &e);
    const int64_t H = 2, T = 333, D = 8, n = H * T * D, far = 40;
    st_rng r;
    st_rng_seed(&r, 9);
    float *q = malloc((size_t)n * 4), *k = malloc((size_t)n * 4), *v = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) { q[i] = 1.5f * st_rng_normal(&r); k[i] = st_rng_normal(&r); v[i] = st_rng_normal(&r); }
    float *st = malloc((size_t)(H * T * 4) * 4), *st1 = malloc((size_t)(H * T * 4) * 4);
    float *out = malloc((size_t)n * 4), *plain = malloc((size_t)n * 4);
    double *ref = malloc((size_t)(H * T * 4) * sizeof(double));
    dist_state ds = {0.02f};
    st_attn_bias dist = {.fill = dist_fill, .state = &ds}, gen = {.fill_block = gen_fill};
    const st_attn_bias *biases[3] = {NULL, &dist, &gen};
    const char *names[3] = {"no bias", "distance bias", "general bias"};
    const int64_t cases[][2] = {{0, 0}, {4, 100}, {300, 30}, {0, 1}};   /* (sinks, window); window 0: full */
    const char *stat_names[4] = {"mean distance", "entropy", "first-key mass", "far mass"};
    for (int b = 0; b < 3; b++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t S = cases[c][0], W = cases[c][1];
            char what[128];
            snprintf(what, sizeof what, "%s, sinks %lld window %lld", names[b], (long long)S, (long long)W);
            CHECK(run(q, k, v, H, T, D, biases[b], S, W, far, st, out));
            stats_ref(q, k, H, T, D, biases[b], S, W, far, ref);
            for (int x = 0; x < 4; x++) {
                double worst = 0;
                for (int64_t i = 0; i < H * T; i++) {
                    /* distances grow with i: relative to the row's reach */
                    const double tol = x == 0 ? 2e-5 * (double)(i % T + 1) : 2e-5;
                    const double d = fabs((double)st[i * 4 + x] - ref[i * 4 + x]);
                    TH_MAX(worst, d / tol);
                }
                CHECK_MSG(worst <= 1.0, "%s: %s per row matches the double reference (worst %.3g of tolerance)",
                          what, stat_names[x], worst);
            }
            /* asking for the statistics leaves the attention as it is */
            ctx.attn_stats = NULL;
            st_ctx_begin(&ctx, 0, 0);
            int64_t shape[4] = {1, H, T, D};
            st_tensor *tq = st_wrap(&ctx, q, 4, shape), *tk = st_wrap(&ctx, k, 4, shape), *tv = st_wrap(&ctx, v, 4, shape);
            st_tensor *o = W > 0 ? st_attention_window(&ctx, tq, tk, tv, biases[b], 0.0f, S, W)
                                 : st_attention(&ctx, tq, tk, tv, biases[b], 1, 0.0f, 0.0f, 0);
            CHECK_MSG(o && !memcmp(o->data, out, (size_t)n * 4), "%s: the output is bit for bit the same without "
                      "statistics", what);
            /* one thread: the same statistics bit for bit */
            const int nt = omp_get_max_threads();
            omp_set_num_threads(1);
            CHECK(run(q, k, v, H, T, D, biases[b], S, W, far, st1, plain));
            omp_set_num_threads(nt);
            CHECK_MSG(!memcmp(st, st1, (size_t)(H * T * 4) * 4), "%s: the statistics do not depend on the thread "
                      "count", what);
        }
    free(q); free(k); free(v); free(st); free(st1); free(out); free(plain); free(ref);
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    return test_finish("test_attn_stats");
}
