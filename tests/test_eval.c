/* test_eval.c - the evaluation library on a tiny random model and a random token stream:
 *   - nonoverlapping and sliding windows score every target exactly once (n - 1), for
 *     several L and S including L > n;
 *   - the summed loss equals an independent per-target reference: target t scored with the
 *     context the protocol promises (window start max(0, ceil((t - L) / S) * S)), computed
 *     by running the causal model on exactly that prefix;
 *   - per-position buckets (linear, log2) partition [0, L) and add up to the totals;
 *   - batching several windows per forward matches one window at a time (1e-6 relative);
 *   - activation memory grows linearly in L (no T x T buffer);
 *   - errors: learned positions beyond max_len, bad stride, too few tokens, bad ids. */
#include "harness.h"
#include "st_eval.h"

#include <stdlib.h>
#include <string.h>

#define V 23

static int make_model(st_model *m, int pos, int layers, int d, int heads) {
    st_model_config c;
    st_model_config_default(&c);
    c.vocab_size = V;
    c.n_layers = layers;
    c.d_model = d;
    c.n_heads = heads;
    c.pos = pos;
    c.max_len = 64;
    c.fire_threshold = 6.0f;   /* fire: windows reach past its threshold (progressive part) */
    c.fire_hidden = 8;
    st_error e = {0};
    int rc = st_model_init(m, &c, 7, &e);
    if (rc) fprintf(stderr, "model init: %s\n", e.msg);
    /* larger weights than the 0.02 init, so losses vary by position and context */
    for (size_t i = 0; i < m->params.n; i++) m->params.data[i] *= 10.0f;
    return rc;
}

static int32_t *random_stream(int64_t n, uint64_t seed) {
    int32_t *t = malloc((size_t)n * sizeof *t);
    st_rng r;
    st_rng_seed(&r, seed);
    /* a little structure (runs of repeats) so context matters */
    for (int64_t i = 0; i < n; i++) t[i] = i > 0 && st_rng_uniform(&r) < 0.3 ? t[i - 1] : (int32_t)st_rng_below(&r, V);
    return t;
}

/* Independent reference: sum over targets t = 1..n-1 of the loss of token t given the
 * context the protocol assigns to it, from a forward over tokens[start, t). */
static double reference_nll(st_model *m, const int32_t *tok, int64_t n, int64_t L, int64_t S) {
    st_arena a;
    st_ctx ctx;
    st_error e = {0};
    st_arena_init(&a, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &a, 16, &e);
    float *tl = malloc((size_t)L * sizeof *tl);
    int32_t *tg = malloc((size_t)L * sizeof *tg);
    double sum = 0;
    for (int64_t t = 1; t < n; t++) {
        int64_t start = t <= L ? 0 : ((t - L + S - 1) / S) * S;
        int64_t T = t - start;           /* inputs start .. t-1, the last one predicts t */
        for (int64_t p = 0; p < T; p++) tg[p] = p == T - 1 ? tok[t] : -1;
        st_ctx_begin(&ctx, 0, 0);
        st_tensor *loss = st_model_loss(m, &ctx, tok + start, tg, 1, T, 0, tl, &e);
        if (!loss) { fprintf(stderr, "reference forward failed\n"); break; }
        sum += tl[T - 1];
    }
    free(tl);
    free(tg);
    st_ctx_free(&ctx);
    st_arena_free(&a);
    return sum;
}

static void check_buckets(const st_eval_result *r, const char *what) {
    int64_t cnt = 0;
    double nll = 0;
    for (int b = 0; b < r->n_buckets; b++) {
        CHECK_MSG(r->buckets[b].lo == (b ? r->buckets[b - 1].hi : 0), "%s: bucket %d starts where %d ends", what, b, b - 1);
        CHECK_MSG(r->buckets[b].hi > r->buckets[b].lo, "%s: bucket %d is not empty", what, b);
        cnt += r->buckets[b].tokens;
        nll += r->buckets[b].nll;
    }
    if (r->n_buckets) {
        CHECK_MSG(r->buckets[r->n_buckets - 1].hi == r->length, "%s: buckets end at L", what);
        CHECK_MSG(cnt == r->tokens, "%s: bucket counts %lld == tokens %lld", what, (long long)cnt, (long long)r->tokens);
        CHECK_MSG(fabs(nll - r->nll) <= 1e-9 * fabs(r->nll), "%s: bucket nll %.12g == total %.12g", what, nll, r->nll);
    }
}

static void test_partitions(st_model *m) {
    const int64_t n = 61;
    int32_t *tok = random_stream(n, 11);
    static const int64_t Ls[] = {1, 5, 16, 40, 60, 61, 300};
    st_eval_opts o;
    st_eval_opts_default(&o);
    o.buckets = 3;
    for (size_t i = 0; i < sizeof Ls / sizeof *Ls; i++) {
        int64_t L = Ls[i];
        int64_t strides[] = {L, L / 2, 3, 1};
        for (int j = 0; j < 4; j++) {
            int64_t S = strides[j];
            if (S < 1 || S > L || (j > 0 && S == strides[j - 1])) continue;
            st_eval_result r;
            st_error e = {0};
            o.bucket_scale = j % 2 ? ST_BUCKETS_LOG2 : ST_BUCKETS_LINEAR;
            int rc = st_eval_run(m, tok, n, L, S, &o, &r, &e);
            CHECK_MSG(rc == ST_OK, "L=%lld S=%lld: %s", (long long)L, (long long)S, e.msg);
            if (rc) continue;
            CHECK_MSG(r.tokens == n - 1, "L=%lld S=%lld: scored %lld of %lld targets", (long long)L, (long long)S,
                      (long long)r.tokens, (long long)(n - 1));
            char what[64];
            snprintf(what, sizeof what, "L=%lld S=%lld", (long long)L, (long long)S);
            check_buckets(&r, what);
            CHECK(fabs(r.ppl - exp(r.loss)) < 1e-12 * r.ppl);
            CHECK(isnan(r.bpb));
            if (S == 1 || S == L) {
                /* sliding S=1 recomputes L-1 context tokens per window (after the first) */
                int64_t expect_fw = S == L ? n - 1 : (L >= n - 1 ? n - 1 : L + (n - 1 - L) * L);
                CHECK_MSG(r.forward_tokens == expect_fw, "%s: forward tokens %lld, expected %lld", what,
                          (long long)r.forward_tokens, (long long)expect_fw);
            }
            double ref = reference_nll(m, tok, n, L, S);
            CHECK_MSG(fabs(ref - r.nll) <= 2e-5 * fabs(ref), "%s: nll %.9g vs per-target reference %.9g", what, r.nll, ref);
            st_eval_result_free(&r);
        }
    }
    free(tok);
}

/* Nonoverlapping over k*L + 1 tokens: every position of every window is scored, so each
 * linear bucket holds k * (hi - lo) targets. */
static void test_bucket_counts(st_model *m) {
    const int64_t L = 10, k = 7, n = k * L + 1;
    int32_t *tok = random_stream(n, 5);
    st_eval_opts o;
    st_eval_opts_default(&o);
    o.buckets = 3;     /* [0,4) [4,7) [7,10) */
    st_eval_result r;
    st_error e = {0};
    CHECK(st_eval_run(m, tok, n, L, L, &o, &r, &e) == ST_OK);
    CHECK(r.n_buckets == 3);
    if (r.n_buckets == 3) {
        CHECK(r.buckets[0].lo == 0 && r.buckets[0].hi == 4);
        CHECK(r.buckets[1].lo == 4 && r.buckets[1].hi == 7);
        CHECK(r.buckets[2].lo == 7 && r.buckets[2].hi == 10);
        for (int b = 0; b < 3; b++) CHECK(r.buckets[b].tokens == k * (r.buckets[b].hi - r.buckets[b].lo));
    }
    check_buckets(&r, "bucket counts");
    CHECK(r.windows == k);
    st_eval_result_free(&r);
    /* log2 layout for L = 10: {0} [1,2) [2,4) [4,8) [8,10) */
    st_eval_bucket lay[8];
    CHECK(st_eval_bucket_layout(10, 1, ST_BUCKETS_LOG2, lay) == 5);
    CHECK(lay[3].lo == 4 && lay[3].hi == 8 && lay[4].lo == 8 && lay[4].hi == 10);
    /* more linear buckets than positions: one per position */
    CHECK(st_eval_bucket_layout(4, 100, ST_BUCKETS_LINEAR, NULL) == 4);
    free(tok);
}

static void test_batching(st_model *m) {
    const int64_t n = 400;
    int32_t *tok = random_stream(n, 3);
    static const int64_t cases[][2] = {{16, 16}, {16, 5}, {50, 50}, {50, 7}};
    for (int c = 0; c < 4; c++) {
        int64_t L = cases[c][0], S = cases[c][1];
        st_eval_opts o1, o8;
        st_eval_opts_default(&o1);
        o1.batch_tokens = 1;          /* one window per forward */
        o1.buckets = 4;
        o8 = o1;
        o8.batch_tokens = 8 * L;      /* eight */
        st_eval_result r1, r8;
        st_error e = {0};
        CHECK(st_eval_run(m, tok, n, L, S, &o1, &r1, &e) == ST_OK);
        CHECK(st_eval_run(m, tok, n, L, S, &o8, &r8, &e) == ST_OK);
        CHECK(r1.batch == 1 && r8.batch >= 2 && r8.batch <= 8);
        CHECK(r1.tokens == r8.tokens && r1.windows == r8.windows && r1.forward_tokens == r8.forward_tokens);
        CHECK_MSG(fabs(r1.nll - r8.nll) <= 1e-6 * fabs(r1.nll), "L=%lld S=%lld: batched nll %.12g vs single %.12g",
                  (long long)L, (long long)S, r8.nll, r1.nll);
        for (int b = 0; b < r1.n_buckets && b < r8.n_buckets; b++) CHECK(r1.buckets[b].tokens == r8.buckets[b].tokens);
        /* deterministic: the same call twice gives the same bits */
        st_eval_result r8b;
        CHECK(st_eval_run(m, tok, n, L, S, &o8, &r8b, &e) == ST_OK);
        CHECK(r8b.nll == r8.nll);
        st_eval_result_free(&r1);
        st_eval_result_free(&r8);
        st_eval_result_free(&r8b);
    }
    free(tok);
}

/* Memory is linear in L: the arena high water at 4L is about 4x that at L (a T x T score
 * buffer would make it ~16x). */
/* Memory of one window grows linearly with its length: alibi (distance tables), fire
 * (general (i, j) bias, evaluated tile by tile) and cope (gates summed per row). */
static void test_memory_linear(int pos) {
    st_model m;
    if (make_model(&m, pos, 2, 32, 4)) { CHECK(0); return; }
    const int64_t n = 4097;
    int32_t *tok = random_stream(n, 9);
    st_eval_opts o;
    st_eval_opts_default(&o);
    o.batch_tokens = 1;
    st_eval_result a, b;
    st_error e = {0};
    CHECK(st_eval_run(&m, tok, n, 1024, 1024, &o, &a, &e) == ST_OK);
    CHECK(st_eval_run(&m, tok, n, 4096, 4096, &o, &b, &e) == ST_OK);
    double ratio = (double)b.arena_bytes / (double)a.arena_bytes;
    CHECK_MSG(ratio > 3.0 && ratio < 5.0, "%s: arena at L=4096 / L=1024 = %.2f (%zu / %zu bytes): not linear",
              st_pos_name(pos), ratio, b.arena_bytes, a.arena_bytes);
    CHECK_MSG(isfinite(b.nll), "%s: finite loss at L=4096", st_pos_name(pos));
    CHECK(b.peak_rss > 0);
    st_eval_result_free(&a);
    st_eval_result_free(&b);
    free(tok);
    st_model_free(&m);
}

static void test_errors(st_model *m) {
    int32_t tok[20];
    for (int i = 0; i < 20; i++) tok[i] = i % V;
    st_eval_result r;
    st_error e = {0};
    CHECK(st_eval_run(m, tok, 20, 8, 9, NULL, &r, &e) == ST_ERR_CONFIG);
    CHECK(st_eval_run(m, tok, 20, 8, 0, NULL, &r, &e) == ST_ERR_CONFIG);
    CHECK(st_eval_run(m, tok, 20, 0, 1, NULL, &r, &e) == ST_ERR_CONFIG);
    CHECK(st_eval_run(m, tok, 1, 8, 8, NULL, &r, &e) == ST_ERR_DATA);
    tok[13] = V;   /* out of the vocabulary */
    e.code = 0;
    CHECK(st_eval_run(m, tok, 20, 8, 8, NULL, &r, &e) == ST_ERR_DATA);
    CHECK(strstr(e.msg, "token 13") != NULL);

    /* learned positions: windows longer than max_len (64) cannot be evaluated ... */
    st_model lm;
    if (make_model(&lm, ST_POS_LEARNED, 1, 16, 2)) { CHECK(0); return; }
    int32_t *s = random_stream(200, 2);
    e.code = 0;
    CHECK(st_eval_run(&lm, s, 200, 128, 128, NULL, &r, &e) == ST_ERR_CONFIG);
    CHECK(strstr(e.msg, "max_len") != NULL);
    /* ... but a length beyond the table is fine when the stream is shorter than the table */
    CHECK(st_eval_run(&lm, s, 50, 128, 128, NULL, &r, &e) == ST_OK && r.tokens == 49);
    st_eval_result_free(&r);
    CHECK(st_eval_run(&lm, s, 200, 64, 16, NULL, &r, &e) == ST_OK && r.tokens == 199);
    st_eval_result_free(&r);
    free(s);
    st_model_free(&lm);
}

/* bits per byte from per-token byte lengths and from an average */
static void test_bpb(st_model *m) {
    const int64_t n = 64;
    int32_t *tok = random_stream(n, 4);
    double tb[V];
    for (int i = 0; i < V; i++) tb[i] = 1 + i % 3;
    st_eval_opts o;
    st_eval_opts_default(&o);
    o.token_bytes = tb;
    st_eval_result r;
    st_error e = {0};
    CHECK(st_eval_run(m, tok, n, 16, 16, &o, &r, &e) == ST_OK);
    double bytes = 0;
    for (int64_t t = 1; t < n; t++) bytes += tb[tok[t]];
    CHECK_NEAR(r.bytes, bytes, 0);
    CHECK_NEAR(r.bpb, r.nll / log(2.0) / bytes, 1e-12);
    st_eval_result_free(&r);
    o.token_bytes = NULL;
    o.bytes_per_token = 1.0;     /* byte-level: bpb = loss / ln 2 */
    CHECK(st_eval_run(m, tok, n, 16, 16, &o, &r, &e) == ST_OK);
    CHECK_NEAR(r.bpb, r.loss / log(2.0), 1e-12);
    st_eval_result_free(&r);
    free(tok);
}

int main(void) {
    st_model m;
    if (make_model(&m, ST_POS_ALIBI, 2, 16, 2)) return 1;
    /* the partition checks run thousands of forwards of a few tokens: one thread (a
     * parallel region per op costs more than the op there); the rest uses the default */
    st_blas_info bi;
    st_blas_query(&bi);
    st_set_threads(1);
    test_partitions(&m);
    st_set_threads(bi.omp_threads);
    test_bucket_counts(&m);
    test_batching(&m);
    test_bpb(&m);
    test_errors(&m);
    st_model_free(&m);
    /* position methods with their own paths through the model (sinusoidal adds positions
     * from 0 in every window; rope rotates from 0) keep the per-target reference */
    st_set_threads(1);
    static const int more[] = {ST_POS_SINUSOIDAL, ST_POS_ROPE, ST_POS_T5, ST_POS_SANDWICH, ST_POS_FIRE, ST_POS_XPOS, ST_POS_COPE,
                                 ST_POS_FOX};
    for (int i = 0; i < (int)(sizeof more / sizeof more[0]); i++) {
        st_model mm;
        if (make_model(&mm, more[i], 1, 16, 2)) { CHECK(0); continue; }
        int32_t *tok = random_stream(60, 21);
        st_eval_result r;
        st_error e = {0};
        CHECK(st_eval_run(&mm, tok, 60, 12, 5, NULL, &r, &e) == ST_OK);
        double ref = reference_nll(&mm, tok, 60, 12, 5);
        CHECK_MSG(fabs(ref - r.nll) <= 2e-5 * fabs(ref), "%s: nll %.9g vs reference %.9g", st_pos_name(more[i]), r.nll, ref);
        st_eval_result_free(&r);
        free(tok);
        st_model_free(&mm);
    }
    st_set_threads(bi.omp_threads);
    test_memory_linear(ST_POS_ALIBI);
    test_memory_linear(ST_POS_FIRE);
    test_memory_linear(ST_POS_COPE);   /* CoPE's gates are summed per row in the streamed kernel */
    test_memory_linear(ST_POS_FOX);    /* FoX's gate sums: (B,H,T) per layer, not (T,T) */
    return test_finish("test_eval");
}
