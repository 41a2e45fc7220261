/* test_data.c - data config checks, the training loader (determinism, resume, shapes),
 * evaluation windows (every target scored exactly once, many (n, L, S)), and the
 * synthetic Markov source: determinism, irreducible backbone, stationary distribution
 * against a direct linear solve, entropy rate against an empirical estimate. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* ---- config ---- */

static void expect_config_error(st_data_config *c, const char *key) {
    st_error e = {0};
    int rc = st_data_config_validate(c, "run.json", &e);
    char want[128];
    snprintf(want, sizeof want, "run.json: %s", key);
    CHECK_MSG(rc == ST_ERR_CONFIG && strstr(e.msg, want), "expected config error on %s, got rc %d: %s", key, rc, e.msg);
}

static void test_config(void) {
    st_data_config c;
    st_error e = {0};
    st_data_config_default(&c);
    CHECK(st_data_config_validate(&c, "run.json", &e) == ST_OK);
    CHECK(!strcmp(st_data_tokenizer_name(&c), "synthetic"));
    CHECK(c.syn_vocab == 64 && c.syn_order == 2 && c.syn_branch == 4 && c.syn_tokens[0] == 1000000);

    st_data_config_default(&c); strcpy(c.source, "wiki"); expect_config_error(&c, "data.source");
    st_data_config_default(&c); strcpy(c.tokenizer, "word"); expect_config_error(&c, "data.tokenizer");
    st_data_config_default(&c); strcpy(c.tokenizer, "chars"); expect_config_error(&c, "data.tokenizer");
    st_data_config_default(&c); strcpy(c.source, "wikitext"); expect_config_error(&c, "data.path");
    st_data_config_default(&c); strcpy(c.source, "wikitext"); strcpy(c.path, "/x");
    CHECK(st_data_config_validate(&c, "run.json", &e) == ST_OK);
    CHECK(!strcmp(st_data_tokenizer_name(&c), "word"));
    strcpy(c.tokenizer, "synthetic"); expect_config_error(&c, "data.tokenizer");
    strcpy(c.tokenizer, "bpe"); c.bpe_vocab = 256; expect_config_error(&c, "data.bpe_vocab");
    st_data_config_default(&c); strcpy(c.source, "text"); strcpy(c.path, "/x");
    CHECK(!strcmp(st_data_tokenizer_name(&c), "byte"));
    c.valid_frac = 0.0f; expect_config_error(&c, "data.valid_frac");
    c.valid_frac = 0.05f; c.test_frac = 0.0f / 0.0f; expect_config_error(&c, "data.valid_frac / data.test_frac");
    c.test_frac = 0.3f; c.valid_frac = 0.3f; expect_config_error(&c, "data.test_frac");
    st_data_config_default(&c); c.syn_vocab = 1; expect_config_error(&c, "data.synthetic: vocab");
    st_data_config_default(&c); c.syn_vocab = 1024; c.syn_order = 3; expect_config_error(&c, "data.synthetic.order");
    st_data_config_default(&c); c.syn_branch = 65; expect_config_error(&c, "data.synthetic.branch");
    st_data_config_default(&c); c.syn_tokens[1] = 3; expect_config_error(&c, "data.synthetic.tokens[1]");
    /* a NULL file name still gives a usable message */
    st_data_config_default(&c); strcpy(c.source, "nope");
    CHECK(st_data_config_validate(&c, NULL, &e) == ST_ERR_CONFIG && strstr(e.msg, "data.source"));
}

/* ---- loader ---- */

static void test_loader(void) {
    enum { N = 1000, B = 4, T = 16 };
    int32_t *tok = malloc(N * sizeof *tok);
    for (int i = 0; i < N; i++) tok[i] = i;   /* a token's value is its position */
    st_loader a, b;
    st_loader_init(&a, tok, N, 42);
    st_loader_init(&b, tok, N, 42);
    int32_t xa[5][B * T], ya[5][B * T], x[B * T], y[B * T];
    int ok_shift = 1, ok_range = 1, ok_contig = 1;
    for (int s = 0; s < 5; s++) {
        st_loader_next(&a, B, T, xa[s], ya[s]);
        for (int i = 0; i < B; i++) {
            int32_t start = xa[s][i * T];
            ok_range &= start >= 0 && start < N - T;
            CHECK(start == (int32_t)(st_hash64(42, (uint64_t)(s * B + i)) % (N - T)));
            for (int t = 0; t < T; t++) {
                ok_contig &= xa[s][i * T + t] == start + t;
                ok_shift &= ya[s][i * T + t] == xa[s][i * T + t] + 1;
            }
        }
    }
    CHECK(ok_shift && ok_range && ok_contig);
    CHECK(a.draws == 5 * B);
    /* same seed, same batches */
    int same = 1;
    for (int s = 0; s < 5; s++) {
        st_loader_next(&b, B, T, x, y);
        same &= !memcmp(x, xa[s], sizeof x) && !memcmp(y, ya[s], sizeof y);
    }
    CHECK(same);
    /* resume: a fresh loader with draws restored continues the sequence */
    st_loader r;
    st_loader_init(&r, tok, N, 42);
    r.draws = 3 * B;
    st_loader_next(&r, B, T, x, y);
    CHECK(!memcmp(x, xa[3], sizeof x) && !memcmp(y, ya[3], sizeof y));
    /* batch size does not change the window sequence: 2 x (B/2) == 1 x B */
    st_loader h;
    st_loader_init(&h, tok, N, 42);
    int32_t xh[B * T], yh[B * T];
    st_loader_next(&h, B / 2, T, xh, yh);
    st_loader_next(&h, B / 2, T, xh + (B / 2) * T, yh + (B / 2) * T);
    CHECK(!memcmp(xh, xa[0], sizeof xh));
    /* another seed, other windows */
    st_loader o;
    st_loader_init(&o, tok, N, 43);
    st_loader_next(&o, B, T, x, y);
    CHECK(memcmp(x, xa[0], sizeof x) != 0);
    /* edge: n = T + 1 allows exactly one window */
    st_loader edge;
    st_loader_init(&edge, tok, T + 1, 7);
    st_loader_next(&edge, 2, T, x, y);
    CHECK(x[0] == 0 && y[T - 1] == T && x[T] == 0);
    free(tok);
}

/* ---- eval windows ---- */

static int check_windows(int64_t n, int64_t L, int64_t S) {
    int64_t cnt = st_eval_windows(n, L, S, NULL, 0);
    st_eval_window *w = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *w);
    int64_t cnt2 = st_eval_windows(n, L, S, w, cnt);
    int ok = cnt2 == cnt;
    int *scored = calloc((size_t)(n > 0 ? n : 1), sizeof *scored);
    for (int64_t k = 0; k < cnt && ok; k++) {
        ok &= w[k].start >= 0 && w[k].len >= 1 && w[k].len <= L && w[k].start + w[k].len <= n - 1;
        ok &= w[k].score_from >= 0 && w[k].score_from < w[k].len;
        ok &= k == 0 ? w[k].start == 0 && w[k].score_from == 0 : w[k].start == w[k - 1].start + S;
        if (S == L) ok &= w[k].score_from == 0;
        else if (k > 0) ok &= w[k].score_from == L - S;
        if (k + 1 < cnt) ok &= w[k].len == L;   /* only the last window is clipped */
        for (int64_t p = w[k].score_from; p < w[k].len && ok; p++) scored[w[k].start + p + 1]++;
    }
    for (int64_t t = 1; t < n && ok; t++) ok &= scored[t] == 1;   /* targets 1 .. n-1 */
    if (n >= 1) ok &= scored[0] == 0;
    if (!ok) printf("  eval windows failed for n=%lld L=%lld S=%lld (%lld windows)\n", (long long)n, (long long)L,
                    (long long)S, (long long)cnt);
    free(scored);
    free(w);
    return ok;
}

static void test_eval_windows(void) {
    int all = 1, combos = 0;
    for (int64_t n = 0; n <= 70; n++)
        for (int64_t L = 1; L <= 13; L++)
            for (int64_t S = 1; S <= L; S++) { all &= check_windows(n, L, S); combos++; }
    int64_t big[][3] = {{1000001, 512, 512}, {1000001, 512, 256}, {1000001, 512, 1}, {217646, 3072, 512},
                        {245569, 1024, 1023}, {100, 100, 1}, {101, 100, 1}, {102, 100, 1}};
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) all &= check_windows(big[k][0], big[k][1], big[k][2]);
    CHECK_MSG(all, "every target scored exactly once over %d small (n, L, S) combos and the large ones", combos);
    /* counts: nonoverlapping = ceil((n - 1) / L); sliding = 1 + ceil((n - 1 - L) / S) */
    CHECK(st_eval_windows(1000001, 512, 512, NULL, 0) == (1000000 + 511) / 512);
    CHECK(st_eval_windows(1001, 100, 10, NULL, 0) == 1 + 90);
    CHECK(st_eval_windows(1, 10, 10, NULL, 0) == 0);
    CHECK(st_eval_windows(2, 10, 3, NULL, 0) == 1);
    /* cap limits writes, not the count */
    st_eval_window w[3], sentinel;
    memset(w, 0xab, sizeof w);
    memset(&sentinel, 0xab, sizeof sentinel);
    CHECK(st_eval_windows(1001, 100, 100, w, 2) == 10);
    CHECK(w[1].start == 100 && w[1].len == 100 && !memcmp(&w[2], &sentinel, sizeof sentinel));
}

/* ---- synthetic source ---- */

static void test_markov_determinism(void) {
    st_markov a, b, c;
    st_error e = {0};
    CHECK(st_markov_init(&a, 1234, 64, 2, 4, &e) == ST_OK);
    CHECK(st_markov_init(&b, 1234, 64, 2, 4, &e) == ST_OK);
    CHECK(st_markov_init(&c, 1235, 64, 2, 4, &e) == ST_OK);
    CHECK(a.n_ctx == 4096);
    CHECK(!memcmp(a.next, b.next, 4096 * 4 * sizeof *a.next) && !memcmp(a.prob, b.prob, 4096 * 4 * sizeof *a.prob));
    CHECK(a.entropy_rate == b.entropy_rate);
    CHECK(memcmp(a.next, c.next, 4096 * 4 * sizeof *a.next) != 0 && a.entropy_rate != c.entropy_rate);
    CHECK(a.entropy_rate > 0.3 && a.entropy_rate < log(4.0));
    CHECK_MSG(a.residual < 1e-12, "power iteration residual %.3g after %d iterations", a.residual, a.iterations);
    /* rows are distributions over distinct successors */
    int ok = 1;
    for (int64_t s = 0; s < a.n_ctx; s++) {
        double sum = 0;
        for (int j = 0; j < 4; j++) {
            sum += a.prob[s * 4 + j];
            ok &= a.prob[s * 4 + j] > 0 && a.next[s * 4 + j] >= 0 && a.next[s * 4 + j] < 64;
            for (int q = 0; q < j; q++) ok &= a.next[s * 4 + q] != a.next[s * 4 + j];
        }
        ok &= fabs(sum - 1.0) < 1e-12;
    }
    CHECK(ok);
    /* the backbone (first successor) walks one cycle through all V^k contexts */
    int64_t s = 0, steps = 0;
    do { s = (s * 64 + a.next[s * 4]) % a.n_ctx; steps++; } while (s != 0 && steps <= a.n_ctx);
    CHECK(steps == a.n_ctx);
    /* sampling: same seed same stream; every transition is one the chain allows */
    int32_t *x = malloc(20000 * sizeof *x), *y = malloc(20000 * sizeof *y);
    st_markov_sample(&a, 99, x, 20000);
    st_markov_sample(&a, 99, y, 20000);
    CHECK(!memcmp(x, y, 20000 * sizeof *x));
    st_markov_sample(&a, 100, y, 20000);
    CHECK(memcmp(x, y, 20000 * sizeof *x) != 0);
    ok = 1;
    for (int t = 2; t < 20000; t++) {
        int64_t ctx = st_markov_context(&a, x + t - 2);
        int allowed = 0;
        for (int j = 0; j < 4; j++) allowed |= a.next[ctx * 4 + j] == x[t];
        ok &= allowed;
    }
    CHECK(ok);
    free(x);
    free(y);
    st_markov_free(&a);
    st_markov_free(&b);
    st_markov_free(&c);
    /* limits */
    CHECK(st_markov_init(&a, 1, 1024, 3, 2, &e) == ST_ERR_CONFIG);
    CHECK(st_markov_init(&a, 1, 4, 1, 5, &e) == ST_ERR_CONFIG);
}

/* Solve pi (P - I) = 0, sum pi = 1 by Gaussian elimination with partial pivoting on the
 * full context transition matrix, independent of the power iteration. */
static void solve_stationary(const st_markov *m, double *pi) {
    int64_t N = m->n_ctx;
    double *A = calloc((size_t)(N * (N + 1)), sizeof *A);   /* (N, N+1) augmented */
#define A_(i, j) A[(i) * (N + 1) + (j)]
    for (int64_t s = 0; s < N; s++)            /* row s' of (P^T - I): sum_s P(s -> s') pi_s - pi_s' */
        for (int j = 0; j < m->branch; j++) A_((s * m->vocab + m->next[s * m->branch + j]) % N, s) += m->prob[s * m->branch + j];
    for (int64_t i = 0; i < N; i++) A_(i, i) -= 1.0;
    for (int64_t j = 0; j <= N; j++) A_(N - 1, j) = 1.0;   /* replace the last equation by sum = 1 */
    for (int64_t c = 0; c < N; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < N; r++) if (fabs(A_(r, c)) > fabs(A_(p, c))) p = r;
        for (int64_t j = 0; j <= N; j++) { double t = A_(c, j); A_(c, j) = A_(p, j); A_(p, j) = t; }
        for (int64_t r = 0; r < N; r++) {
            if (r == c) continue;
            double f = A_(r, c) / A_(c, c);
            for (int64_t j = c; j <= N; j++) A_(r, j) -= f * A_(c, j);
        }
    }
    for (int64_t i = 0; i < N; i++) pi[i] = A_(i, N) / A_(i, i);
#undef A_
    free(A);
}

static void check_tiny_source(int V, int k, int branch, uint64_t seed) {
    st_markov m;
    st_error e = {0};
    CHECK(st_markov_init(&m, seed, V, k, branch, &e) == ST_OK);
    int64_t N = m.n_ctx;
    double pi[64], H = 0;
    solve_stationary(&m, pi);
    double maxd = 0;
    for (int64_t s = 0; s < N; s++) {
        TH_MAX(maxd, fabs(pi[s] - m.pi[s]));
        double hs = 0;
        for (int j = 0; j < branch; j++) hs -= m.prob[s * branch + j] * log(m.prob[s * branch + j]);
        H += pi[s] * hs;
    }
    CHECK_MSG(maxd < 1e-10, "V=%d k=%d b=%d: power iteration vs linear solve: max |d pi| = %.3g", V, k, branch, maxd);
    CHECK_MSG(fabs(H - m.entropy_rate) < 1e-10, "V=%d k=%d b=%d: H %.12f vs %.12f", V, k, branch, H, m.entropy_rate);
    /* empirical: -mean log P(x_t | context) over a long stream, and context frequencies */
    const int64_t n = 2000000;
    int32_t *x = malloc((size_t)n * sizeof *x);
    st_markov_sample(&m, seed + 17, x, n);
    double nll = 0, freq[64] = {0};
    for (int64_t t = k; t < n; t++) {
        int64_t s = st_markov_context(&m, x + t - k);
        freq[s] += 1.0;
        double p = 0;
        for (int j = 0; j < branch; j++) if (m.next[s * branch + j] == x[t]) p = m.prob[s * branch + j];
        nll -= log(p);
    }
    nll /= (double)(n - k);
    double maxf = 0;
    for (int64_t s = 0; s < N; s++) TH_MAX(maxf, fabs(freq[s] / (double)(n - k) - m.pi[s]));
    CHECK_MSG(fabs(nll - m.entropy_rate) < 0.01, "V=%d k=%d b=%d: empirical %.5f vs exact %.5f nats", V, k, branch, nll,
              m.entropy_rate);
    CHECK_MSG(maxf < 0.01, "V=%d k=%d b=%d: context frequencies vs pi: max diff %.4f", V, k, branch, maxf);
    printf("  V=%d order %d branch %d: H = %.6f nats (empirical %.6f), max |pi - solve| = %.1e\n", V, k, branch,
           m.entropy_rate, nll, maxd);
    free(x);
    st_markov_free(&m);
}

static void test_markov_entropy(void) {
    check_tiny_source(3, 1, 2, 5);
    check_tiny_source(3, 2, 2, 6);
    check_tiny_source(3, 2, 3, 7);   /* dense: every symbol can follow */
    check_tiny_source(4, 2, 3, 8);
    /* branch 1 is deterministic: zero entropy */
    st_markov m;
    st_error e = {0};
    CHECK(st_markov_init(&m, 1, 5, 2, 1, &e) == ST_OK && m.entropy_rate == 0.0);
    st_markov_free(&m);
}

static void test_synthetic_dataset(void) {
    st_data_config c;
    st_data_config_default(&c);
    c.syn_tokens[0] = 50000;
    c.syn_tokens[1] = c.syn_tokens[2] = 5000;
    st_dataset a, b;
    st_error e = {0};
    CHECK(st_dataset_load(&c, "run.json", &a, &e) == ST_OK);
    CHECK(st_dataset_load(&c, "run.json", &b, &e) == ST_OK);
    CHECK(a.n[0] == 50000 && a.n[1] == 5000 && a.vocab_size == 64 && a.unit == ST_UNIT_TOKEN && a.bytes[0] == 0);
    int same = 1, range = 1;
    for (int i = 0; i < 3; i++) {
        same &= !memcmp(a.tokens[i], b.tokens[i], (size_t)a.n[i] * sizeof(int32_t));
        for (int64_t t = 0; t < a.n[i]; t++) range &= a.tokens[i][t] >= 0 && a.tokens[i][t] < 64;
    }
    CHECK(same && range);
    CHECK(memcmp(a.tokens[1], a.tokens[2], 5000 * sizeof(int32_t)) != 0);   /* different seeds per split */
    CHECK(a.entropy_rate > 0 && a.entropy_rate == b.entropy_rate && a.tok_hash == b.tok_hash);
    CHECK(st_tokenizer_kind(a.tok) == ST_TOK_SYNTHETIC && st_tokenizer_vocab_size(a.tok) == 64);
    printf("  default synthetic source: H = %.6f nats/token, ideal perplexity %.4f\n", a.entropy_rate, exp(a.entropy_rate));
    /* synthetic tokenizer text form */
    char buf[64];
    int32_t ids[3] = {5, 0, 63}, back[3];
    CHECK(st_tokenizer_decode(a.tok, ids, 3, buf, sizeof buf) == 6 && !strcmp(buf, "5 0 63"));
    CHECK(st_tokenizer_encode(a.tok, buf, 6, back, 3) == 3 && !memcmp(ids, back, sizeof ids));
    CHECK(st_tokenizer_encode(a.tok, "5 64", 4, back, 3) == -1);
    CHECK(st_tokenizer_encode(a.tok, "5 x", 3, back, 3) == -1);
    c.syn_seed = 99;
    st_dataset d;
    CHECK(st_dataset_load(&c, "run.json", &d, &e) == ST_OK);
    CHECK(memcmp(a.tokens[0], d.tokens[0], 1000 * sizeof(int32_t)) != 0 && d.tok_hash != a.tok_hash);
    st_dataset_free(&a);
    st_dataset_free(&b);
    st_dataset_free(&d);
    st_dataset_free(&d);   /* free is idempotent */
    /* invalid config through load */
    c.syn_branch = 0;
    CHECK(st_dataset_load(&c, "run.json", &a, &e) == ST_ERR_CONFIG && strstr(e.msg, "data.synthetic.branch"));
}

int main(void) {
    test_config();
    test_loader();
    test_eval_windows();
    test_markov_determinism();
    test_markov_entropy();
    test_synthetic_dataset();
    return test_finish("test_data");
}
