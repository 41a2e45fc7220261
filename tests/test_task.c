/* test_task.c - the task registry (include/st_task.h, src/data/task/) and what is built
 * on it:
 *   - every generator: sizes from min_size up, n <= length(size), ids in the vocabulary,
 *     no padding, at least one answer token; determinism by seed and variety across
 *     seeds; the answer recomputed from the prompt by an independent checker per task
 *     (tests/test_task_check.h);
 *     one known instance per task (pins each format: a change must be deliberate);
 *   - every needle task (passkey, multikey, vartrack): the asked-for needle exactly at
 *     round(depth F) for depth 0, 0.3, 0.5, 1; multikey's distractors under distinct keys,
 *     vartrack's chains (distinct variables, one chain holding the asked value, each copy
 *     after its source's assignment), the filler one chain path;
 *   - the task tokenizer: names round-trip through encode / decode;
 *   - training rows: x / y alignment, -1 on prompt and padding under loss "answer", on
 *     padding only under "all", packing;
 *   - the answer-only loss: the gradient of the masked mean equals the sum over kept
 *     rows of each row's own gradient / K (each computed by a call keeping that row only);
 *   - task evaluation through the KV cache: a cell's loss and verdict equal the full
 *     forward's per-token losses and argmax at the answer positions;
 *   - config rules: unknown task, sizes out of range, a key of another task, task keys on
 *     a text source, vartrack's variables and values against symbols and digits. */
#include "harness.h"
#include "test_model_util.h"
#include "st_eval.h"
#include "st_task.h"
#include "test_task_check.h"
#include "st_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SYMBOLS 16
/* known instances (seed 7, 16 symbols; ^ marks an answer token) */
#define KNOWN_COPY "a m c g = ^a ^m ^c ^g ^."
#define KNOWN_REVERSE "f i o l = ^l ^o ^i ^f ^."
#define KNOWN_SORT "h j a d g = ^a ^d ^g ^h ^j ^."
#define KNOWN_ADD "2 6 6 + 5 4 6 = ^8 ^1 ^2 ^."
#define KNOWN_ADD_REV "6 6 2 + 6 4 5 = ^2 ^1 ^8 ^."
#define KNOWN_PASSKEY "d K 2 5 7 0 9 a g k g ? ^2 ^5 ^7 ^0 ^9"
#define KNOWN_MQAR "a p h i d k | a ^p h ^i d ^k"
#define KNOWN_MQAR_RANDOM "a p h i d k f p e n g o | f ^p e ^n a ^p e ^n h ^i d ^k"   /* e asked twice, g never */
#define KNOWN_FLIPFLOP "W 0 I 0 I 1 R ^0 I 0 R ^0"
#define KNOWN_SEL "_ g _ _ k e o _ = ^g ^k ^e ^o ^."
#define KNOWN_MULTIKEY "K f 0 8 7 8 6 K n 4 9 1 5 1 k K c 3 7 8 2 6 c K g 4 2 5 7 7 ? c ^3 ^7 ^8 ^2 ^6"
#define KNOWN_COUNTING "k o f n h l p h ? k = ^1 ^."
#define KNOWN_COUNTING_MAX3 "k i c g c o p e g j n l ? o = ^1 ^."
#define KNOWN_PARITY "0 1 0 0 1 = ^0"
#define KNOWN_VARTRACK "j f K g 9 4 2 6 5 K m 1 5 5 5 6 K n m j o K h g j K k h p K l n ? 9 4 2 6 5 ^g ^h ^k ^."

static st_markov chain;

/* variant 1: addition's reversed format, MQAR's random queries, multikey's 7 needles,
 * vartrack's 3 chains of 4 (variant 0: 2 of 3; variant 2: one chain of one variable),
 * counting's max_count 3
 * (each task reads its own) */
static st_task_params params(int variant) {
    st_task_params p = {.symbols = SYMBOLS, .reversed = variant == 1, .random_queries = variant == 1, .digits = 5,
                        .ignore_prob = 0.8, .blank_prob = 0.75, .needles = variant == 1 ? 7 : 4,
                        .hops = variant == 2 ? 1 : 3 + variant, .chains = variant == 2 ? 1 : 2 + variant,
                        .max_count = variant == 1 ? 3 : 0,
                        .filler = &chain, .depth = -1.0};
    return p;
}

static void test_generators(void) {
    const int64_t sizes[] = {1, 2, 3, 5, 17, 64};
    for (int ti = 0; ti < st_task_count(); ti++) {
        const st_task *t = st_task_at(ti);
        const int n_variants = !strcmp(t->name, "vartrack") ? 3
                               : !strcmp(t->name, "addition") || !strcmp(t->name, "mqar") || !strcmp(t->name, "multikey") ||
                                         !strcmp(t->name, "counting")
                                   ? 2 : 1;
        for (int rev = 0; rev < n_variants; rev++) {
            st_task_params p = params(rev);
            int64_t lo, hi;
            st_task_size_range(t, &p, &lo, &hi);
            int bad = 0;
            for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
                const int64_t size = sizes[si] < lo ? lo + (int64_t)si : sizes[si];
                if (size > hi) continue;
                const int64_t L = t->length(&p, size);
                int32_t *tok = malloc((size_t)L * sizeof *tok), *tok2 = malloc((size_t)L * sizeof *tok);
                int32_t *want = malloc((size_t)L * sizeof *want);
                uint8_t *ans = malloc((size_t)L), *ans2 = malloc((size_t)L);
                int differs = 0;
                for (uint64_t seed = 1; seed <= 8; seed++) {
                    const int64_t n = t->generate(&p, size, seed, tok, ans);
                    bad |= !CHECK_MSG(n >= 2 && n <= L, "%s size %lld: %lld tokens, length() %lld", t->name,
                                      (long long)size, (long long)n, (long long)L);
                    if (n < 2 || n > L) continue;
                    int64_t n_ans = 0, first_ans = -1;
                    for (int64_t i = 0; i < n; i++) {
                        bad |= !CHECK(tok[i] > ST_TT_PAD && tok[i] < st_task_vocab(SYMBOLS));
                        if (ans[i] && first_ans < 0) first_ans = i;
                        n_ans += ans[i];
                    }
                    bad |= !CHECK_MSG(n_ans > 0 && first_ans > 0, "%s: no answer or no prompt", t->name);
                    /* the answer, recomputed from the prompt */
                    const int64_t k = expected_answer(t, &p, tok, n, want);
                    int64_t j = 0, ok = k == n_ans;
                    for (int64_t i = 0; i < n && ok; i++)
                        if (ans[i]) ok = tok[i] == want[j++];
                    bad |= !CHECK_MSG(ok, "%s (format %d) size %lld seed %llu: the answer is not the prompt's", t->name,
                                      rev, (long long)size, (unsigned long long)seed);
                    check_structure(t, &p, size, tok, n);
                    /* determinism; variety across seeds */
                    const int64_t n2 = t->generate(&p, size, seed, tok2, ans2);
                    bad |= !CHECK(n2 == n && !memcmp(tok, tok2, (size_t)n * sizeof *tok) && !memcmp(ans, ans2, (size_t)n));
                    t->generate(&p, size, seed + 100, tok2, ans2);
                    differs |= memcmp(tok, tok2, (size_t)n * sizeof *tok) != 0;
                }
                if (size >= 3) bad |= !CHECK_MSG(differs, "%s size %lld: 8 seeds, one instance", t->name, (long long)size);
                free(tok); free(tok2); free(want); free(ans); free(ans2);
            }
            printf("  %-15s format %d: %s\n", t->name, rev, bad ? "FAILED" : "ok");
        }
    }
}

/* Known instances, one per task (seed 7, symbols 16): pins the formats. */
static void test_known(void) {
    struct { const char *task; int rev; int64_t size; const char *text; } k[] = {
        {"copy", 0, 4, KNOWN_COPY},
        {"reverse", 0, 4, KNOWN_REVERSE},
        {"sort", 0, 5, KNOWN_SORT},
        {"addition", 0, 3, KNOWN_ADD},
        {"addition", 1, 3, KNOWN_ADD_REV},
        {"passkey", 0, 12, KNOWN_PASSKEY},
        {"mqar", 0, 3, KNOWN_MQAR},
        {"mqar", 1, 6, KNOWN_MQAR_RANDOM},
        {"flipflop", 0, 6, KNOWN_FLIPFLOP},
        {"selective_copy", 0, 8, KNOWN_SEL},
        {"multikey", 0, 32, KNOWN_MULTIKEY},
        {"counting", 0, 8, KNOWN_COUNTING},
        {"counting", 1, 12, KNOWN_COUNTING_MAX3},
        {"parity", 0, 5, KNOWN_PARITY},
        {"vartrack", 0, 38, KNOWN_VARTRACK},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        const st_task *t = st_task_find(k[i].task);
        st_task_params p = params(k[i].rev);
        int32_t tok[128];
        uint8_t ans[128];
        const int64_t n = t->generate(&p, k[i].size, 7, tok, ans);
        char got[1024] = "", name[16];
        for (int64_t j = 0; j < n; j++) {
            st_task_token_name(tok[j], name, sizeof name);
            strcat(got, j ? " " : "");
            if (ans[j]) strcat(got, "^");
            strcat(got, name);
        }
        CHECK_MSG(!strcmp(got, k[i].text), "%s format %d: got \"%s\"\n  want \"%s\"", k[i].task, k[i].rev, got, k[i].text);
    }
}

/* counting with max_count 3: the count uniform on [1, 3] (on [1, n] when n < 3), the
 * occurrences anywhere in the prompt, the other symbols uniform over the rest; each
 * frequency within 5 standard errors over 3,000 instances of 256 symbols */
static void test_counting_bounded(void) {
    const st_task *t = st_task_find("counting");
    st_task_params p = params(1);
    enum { N = 256, RUNS = 3000 };
    int32_t tok[N + 8];
    uint8_t ans[N + 8];
    int64_t counts[4] = {0}, first_half = 0, occ = 0, other[SYMBOLS] = {0}, others = 0, asked_other = 0;
    for (uint64_t seed = 1; seed <= RUNS; seed++) {
        t->generate(&p, N, seed, tok, ans);
        const int32_t s = tok[N + 1];
        int64_t c = 0;
        for (int64_t i = 0; i < N; i++) {
            if (tok[i] == s) { c++; first_half += i < N / 2; continue; }
            other[tok[i] - ST_TT_SYMBOL0]++;
            others++;
        }
        occ += c;
        counts[c <= 3 ? c : 0]++;
        asked_other += tok[N + 3] != ST_TT_DIGIT0 + c;   /* the answer digit is the count */
    }
    CHECK_MSG(counts[0] == 0 && asked_other == 0, "counting max_count 3: %lld counts out of [1, 3], %lld wrong answers",
              (long long)counts[0], (long long)asked_other);
    const double se3 = sqrt(RUNS * (1.0 / 3) * (2.0 / 3));
    for (int c = 1; c <= 3; c++)
        CHECK_MSG(fabs((double)counts[c] - RUNS / 3.0) < 5 * se3, "count %d: %lld of %d", c, (long long)counts[c], RUNS);
    CHECK_MSG(fabs((double)first_half - occ / 2.0) < 5 * sqrt(occ / 4.0), "occurrences in the first half: %lld of %lld",
              (long long)first_half, (long long)occ);
    /* every symbol is the asked one in 1/16 of the instances and another in the rest:
     * its share of the other positions is 1/16 overall */
    for (int j = 0; j < SYMBOLS; j++)
        CHECK_MSG(fabs((double)other[j] / (double)others - 1.0 / SYMBOLS) < 0.01, "symbol %d: %.4f of the others", j,
                  (double)other[j] / (double)others);
    int seen2 = 0;   /* n = 2 < max_count: counts 1 and 2 only */
    for (uint64_t seed = 1; seed <= 64; seed++) {
        t->generate(&p, 2, seed, tok, ans);
        const int64_t c = (tok[0] == tok[3]) + (tok[1] == tok[3]);
        CHECK(c >= 1 && c <= 2 && tok[5] == ST_TT_DIGIT0 + c);
        seen2 |= c == 2;
    }
    CHECK_MSG(seen2, "counting max_count 3 at n = 2: never 2 occurrences in 64 instances");
}

/* every needle task (has_depth): the needle asked for sits after round(depth F) filler
 * tokens (multikey: the needle under the queried key; vartrack: the asked chain's value
 * assignment; distractors may come before it, so count filler only) */
static void test_needle_depth(void) {
    int tasks = 0;
    for (int ti = 0; ti < st_task_count(); ti++) {
        const st_task *t = st_task_at(ti);
        if (!t->has_depth) continue;
        tasks++;
        st_task_params p = params(0);
        const int64_t n = 61, F = n - needle_overhead(t, &p);
        int32_t tok[96];
        uint8_t ans[96];
        const double depth[] = {0.0, 0.5, 1.0, 0.3};
        for (int d = 0; d < 4; d++) {
            p.depth = depth[d];
            for (uint64_t seed = 3; seed < 6; seed++) {
                t->generate(&p, n, seed, tok, ans);
                int64_t before, fill;
                needle_depth(t, &p, tok, n, &before, &fill);
                CHECK_MSG(fill == F && before == (int64_t)floor(depth[d] * (double)F + 0.5),
                          "%s depth %g seed %llu: %lld filler tokens before the needle of %lld", t->name, depth[d],
                          (unsigned long long)seed, (long long)before, (long long)fill);
            }
        }
    }
    CHECK_MSG(tasks == 3, "%d needle tasks (passkey, multikey, vartrack)", tasks);
}

static void test_registry_and_tokenizer(void) {
    CHECK(st_task_count() == ST_TASK_COUNT);
    CHECK(st_task_find("copy") && st_task_find("mqar") && !st_task_find("nope"));
    CHECK(st_task_index("reverse") >= 0 && !strcmp(st_task_name_at(st_task_index("reverse")), "reverse"));
    char name[16];
    st_task_token_name(ST_TT_PAD, name, sizeof name); CHECK(!strcmp(name, "<pad>"));
    st_task_token_name(ST_TT_DIGIT0 + 7, name, sizeof name); CHECK(!strcmp(name, "7"));
    st_task_token_name(ST_TT_SYMBOL0, name, sizeof name); CHECK(!strcmp(name, "a"));
    st_task_token_name(ST_TT_SYMBOL0 + 25, name, sizeof name); CHECK(!strcmp(name, "z"));
    st_task_token_name(ST_TT_SYMBOL0 + 26, name, sizeof name); CHECK(!strcmp(name, "aa"));
    st_task_token_name(ST_TT_SYMBOL0 + 26 * 27, name, sizeof name); CHECK(!strcmp(name, "aaa"));
}

static void task_cfg(st_data_config *c, const char *task, int64_t lo, int64_t hi) {
    st_data_config_default(c);
    snprintf(c->source, sizeof c->source, "task");
    snprintf(c->task_name, sizeof c->task_name, "%s", task);
    c->task_min_size = lo;
    c->task_max_size = hi;
}

static void test_dataset_and_tokenizer(void) {
    st_data_config c;
    task_cfg(&c, "mqar", 1, 4);
    st_dataset ds;
    st_error e = {0};
    CHECK(st_dataset_load(&c, "t.json", &ds, &e) == ST_OK);
    CHECK(ds.vocab_size == st_task_vocab(16) && ds.task && ds.n[1] > 1000);
    CHECK(st_tokenizer_kind(ds.tok) == ST_TOK_TASK);
    const char *text = "a b = 7 . | <pad> K ? _ W I R + p";
    int32_t ids[32];
    const int64_t n = st_tokenizer_encode(ds.tok, text, (int64_t)strlen(text), ids, 32);
    CHECK(n == 15 && ids[0] == ST_TT_SYMBOL0 && ids[2] == ST_TT_SEP && ids[3] == ST_TT_DIGIT0 + 7 &&
          ids[6] == ST_TT_PAD && ids[14] == ST_TT_SYMBOL0 + 15);
    char back[128];
    st_tokenizer_decode(ds.tok, ids, n, back, sizeof back);
    CHECK_MSG(!strcmp(back, text), "decode: \"%s\"", back);
    CHECK(st_tokenizer_encode(ds.tok, "q", 1, ids, 32) == -1);   /* symbol 16 of 16 */
    CHECK(st_tokenizer_encode(ds.tok, "ab", 2, ids, 32) == -1);
    st_dataset_free(&ds);
}

/* rows: x is the instance, y its next tokens; -1 where no loss is taken */
static void test_rows(void) {
    st_data_config c;
    task_cfg(&c, "copy", 2, 5);
    st_task_data td;
    st_error e = {0};
    CHECK(st_task_data_init(&td, &c, "t.json", &e) == ST_OK);
    CHECK(st_task_data_max_len(&td) == 12);
    const int64_t T = 20;
    int32_t x[20], y[20], x2[20], y2[20];
    for (uint64_t seed = 0; seed < 50; seed++) {
        st_task_row(&td, seed, T, x, y, NULL);
        int64_t sep = 0;
        while (x[sep] != ST_TT_SEP) sep++;
        const int64_t n = 2 * sep + 2;   /* the instance's tokens */
        CHECK(sep >= 2 && sep <= 5);
        for (int64_t t = 0; t < T; t++) {
            const int answer = t + 1 > sep && t + 1 < n;   /* token t + 1 is in the answer */
            CHECK(y[t] == (answer ? (t + 1 < T ? x[t + 1] : y[t]) : -1));
            if (t >= n) CHECK(x[t] == ST_TT_PAD);
        }
        st_task_row(&td, seed, T, x2, y2, NULL);
        CHECK(!memcmp(x, x2, sizeof x) && !memcmp(y, y2, sizeof y));
    }
    td.loss_all = 1;   /* every next token of the instance, padding still ignored */
    st_task_row(&td, 3, T, x, y, NULL);
    int64_t sep = 0;
    while (x[sep] != ST_TT_SEP) sep++;
    for (int64_t t = 0; t < T; t++) CHECK(y[t] == (t + 1 < 2 * sep + 2 ? (t + 1 < T ? x[t + 1] : y[t]) : -1));
    td.loss_all = 0;
    td.pack = 1;   /* packed: instances back to back while the longest form fits */
    int packed = 0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        st_task_row(&td, seed, T, x, y, NULL);
        int seps = 0;
        for (int64_t t = 0; t < T; t++) seps += x[t] == ST_TT_SEP;
        packed |= seps >= 2;
    }
    CHECK(packed);
    /* instance starts (data.task.doc_mask): each span is one copy instance (symbols, SEP,
     * the copy, end: 2 len + 2 tokens, the last one only in y when it ends the row) or
     * the padding, and asking for them changes nothing else */
    int32_t doc[20], x3[20], y3[20];
    for (uint64_t seed = 0; seed < 20; seed++) {
        st_task_row(&td, seed, T, x, y, doc);
        st_task_row(&td, seed, T, x3, y3, NULL);
        CHECK(!memcmp(x, x3, sizeof x) && !memcmp(y, y3, sizeof y));
        for (int64_t t = 0, spans = 0; t < T; spans++) {
            const int64_t st = doc[t];
            CHECK_MSG(st == t, "seed %llu: token %lld starts a span at %lld", (unsigned long long)seed, (long long)t,
                      (long long)st);
            int64_t en = t;
            while (en < T && doc[en] == st) en++;
            if (x[st] == ST_TT_PAD) {
                for (int64_t k = st; k < en; k++) CHECK(x[k] == ST_TT_PAD);
                CHECK(en == T && spans > 0);
            } else {
                int64_t sp = st;
                while (sp < en && x[sp] != ST_TT_SEP) sp++;
                const int64_t len = sp - st;
                CHECK_MSG(en - st == 2 * len + 2 || (en == T && en - st == 2 * len + 1),
                          "seed %llu: span [%lld, %lld) is not one instance", (unsigned long long)seed, (long long)st,
                          (long long)en);
            }
            t = en;
        }
    }
    st_task_data_free(&td);
}

static void test_config_rules(void) {
    st_data_config c;
    st_error e = {0};
    task_cfg(&c, "copy", 1, 8);
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_OK);
    snprintf(c.task_name, sizeof c.task_name, "nope");
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.name"));
    task_cfg(&c, "copy", 9, 8);
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.max_size"));
    task_cfg(&c, "mqar", 1, 9);   /* 9 distinct keys from 8 (half of 16 symbols) */
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.max_size"));
    task_cfg(&c, "passkey", 4, 30);   /* a 5-digit needle and the query need 7 */
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.min_size"));
    /* vartrack: 2 chains x (5 + 3 x 4 - 1) + 6 = 38 tokens without filler */
    task_cfg(&c, "vartrack", 37, 60);
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.min_size") &&
          strstr(e.msg, "[38, ") && strstr(e.msg, "data.task.hops"));
    task_cfg(&c, "vartrack", 38, 60);
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_OK);
    c.task_hops = 6;   /* 6 x 3 = 18 distinct variables from 16 symbols */
    c.task_chains = 3;
    c.task_min_size = c.task_max_size = 200;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG &&
          strstr(e.msg, "data.task.hops x data.task.chains: 6 x 3 = 18 variables") && strstr(e.msg, "symbols is 16"));
    task_cfg(&c, "vartrack", 100, 100);   /* 11 distinct 1-digit values */
    c.task_hops = 1;
    c.task_chains = 11;
    c.task_digits = 1;
    c.task_symbols = 32;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.chains: 11 chains") &&
          strstr(e.msg, "data.task.digits 1 makes 10"));
    c.task_chains = 10;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_OK);
    task_cfg(&c, "multikey", 40, 60);   /* hops and chains are vartrack's */
    c.task_hops = 2;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.hops") &&
          strstr(e.msg, "vartrack"));
    task_cfg(&c, "copy", 1, 8);
    c.task_chains = 3;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.chains") &&
          strstr(e.msg, "vartrack"));
    task_cfg(&c, "copy", 1, 8);
    snprintf(c.task_format, sizeof c.task_format, "reversed");
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.format") &&
          strstr(e.msg, "addition"));
    task_cfg(&c, "copy", 1, 8);
    snprintf(c.task_queries, sizeof c.task_queries, "random");
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.queries") &&
          strstr(e.msg, "mqar"));
    task_cfg(&c, "mqar", 1, 4);
    snprintf(c.task_queries, sizeof c.task_queries, "random");
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_OK);
    snprintf(c.task_queries, sizeof c.task_queries, "some");
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.queries"));
    task_cfg(&c, "copy", 1, 8);   /* the per-instance mask needs packed rows */
    c.task_doc_mask = 1;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.doc_mask") &&
          strstr(e.msg, "data.task.pack"));
    c.task_pack = 1;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_OK);
    task_cfg(&c, "addition", 1, 8);
    c.task_symbols = 32;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.symbols"));
    st_data_config_default(&c);
    snprintf(c.source, sizeof c.source, "text");
    snprintf(c.path, sizeof c.path, "x.txt");
    c.task_max_size = 9;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.max_size") &&
          strstr(e.msg, "data.source"));
    c.task_max_size = 16;
    c.task_hops = 2;
    CHECK(st_data_config_validate(&c, "t.json", &e) == ST_ERR_CONFIG && strstr(e.msg, "data.task.hops") &&
          strstr(e.msg, "data.source"));
}

/* The answer-only loss: masked mean over K kept targets; its gradient must equal
 * (1/K) sum_k grad(loss with only target k kept), each term its own forward/backward. */
static void test_answer_only_gradient(void) {
    st_data_config dc;
    task_cfg(&dc, "reverse", 2, 6);
    st_task_data td;
    st_error e = {0};
    CHECK(st_task_data_init(&td, &dc, "t.json", &e) == ST_OK);
    enum { B = 2, T = 14 };
    int32_t x[B * T], y[B * T], y1[B * T];
    for (int b = 0; b < B; b++) st_task_row(&td, 11 + (uint64_t)b, T, x + b * T, y + b * T, NULL);
    st_model_config c;
    base_cfg(&c, ST_POS_ALIBI);
    c.vocab_size = st_task_vocab(16); c.d_model = 16; c.n_heads = 2; c.d_ff = 24;
    st_model m;
    make_model_cfg(&m, &c, 3);
    st_arena ar; st_ctx ctx;
    st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &ar, 4096, &e);
    st_params *p = &m.params;
    float *g = malloc(p->n * sizeof *g), *ref = calloc(p->n, sizeof *ref);
    st_params_zero_grad(p);
    st_ctx_begin(&ctx, 1, 0);
    st_tensor *loss = st_model_loss(&m, &ctx, x, y, B, T, 0, NULL, &e);
    const double lmask = loss ? loss->data[0] : NAN;
    CHECK(loss && st_backward(&ctx, loss, 1.0f, &e) == ST_OK);
    memcpy(g, p->grad, p->n * sizeof *g);
    int K = 0;
    for (int i = 0; i < B * T; i++) K += y[i] >= 0;
    CHECK(K > 0 && K < B * T / 2 + 2);
    double lsum = 0;
    for (int k = 0; k < B * T; k++) {
        if (y[k] < 0) continue;
        for (int i = 0; i < B * T; i++) y1[i] = i == k ? y[k] : -1;
        st_params_zero_grad(p);
        st_ctx_begin(&ctx, 1, 0);
        st_tensor *l1 = st_model_loss(&m, &ctx, x, y1, B, T, 0, NULL, &e);
        lsum += l1->data[0];
        st_backward(&ctx, l1, 1.0f / (float)K, &e);
        for (size_t i = 0; i < p->n; i++) ref[i] += p->grad[i];
    }
    CHECK_NEAR(lmask, lsum / K, 1e-5);
    CHECK(th_close("answer-only gradient vs per-row reference", g, ref, (int64_t)p->n, 1e-6, 1e-4));
    free(g); free(ref);
    st_ctx_free(&ctx); st_arena_free(&ar); st_model_free(&m);
    st_task_data_free(&td);
}

/* st_task_eval through the cache equals the full forward at the answer positions */
static void test_eval_matches_forward(void) {
    for (int ti = 0; ti < 2; ti++) {
        const char *task = ti ? "mqar" : "passkey";
        st_data_config dc;
        task_cfg(&dc, task, ti ? 1 : 8, ti ? 4 : 20);
        st_task_data td;
        st_error e = {0};
        CHECK(st_task_data_init(&td, &dc, "t.json", &e) == ST_OK);
        st_model_config c;
        base_cfg(&c, ST_POS_ROPE);
        c.vocab_size = st_task_vocab(16); c.d_model = 16; c.n_heads = 2; c.max_len = 128;
        st_model m;
        make_model_cfg(&m, &c, 5);
        const int64_t size = ti ? 6 : 30;
        const double depth = 0.25;
        st_task_cell cell;
        CHECK(st_task_eval(&m, NULL, &td, &size, 1, &depth, 1, 1, 9, &cell, 0, NULL, &e) == ST_OK);
        CHECK(cell.trials == 1 && cell.status == ST_OK);
        int32_t tok[64], tg[64];
        uint8_t ans[64];
        float tl[64];
        const int64_t n = st_task_eval_instance(&td, size, 0, depth, 0, 9, tok, ans);
        for (int64_t t = 0; t + 1 < n; t++) tg[t] = ans[t + 1] ? tok[t + 1] : -1;
        st_arena ar; st_ctx ctx;
        st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
        st_ctx_init(&ctx, &ar, 4096, &e);
        st_ctx_begin(&ctx, 0, 0);
        st_tensor *loss = st_model_loss(&m, &ctx, tok, tg, 1, n - 1, 0, tl, &e);
        st_tensor *lg = st_model_logits(&m, &ctx, tok, 1, n - 1, 0, &e);
        CHECK(loss && lg);
        if (loss && lg) {
            CHECK_MSG(fabs((double)loss->data[0] - cell.loss) <= 1e-4 * fabs(cell.loss),
                      "%s: cached answer loss %.6f vs full forward %.6f", task, cell.loss, loss->data[0]);
            int all = 1, hits = 0, cnt = 0;
            for (int64_t t = 0; t + 1 < n; t++) {
                if (tg[t] < 0) continue;
                const float *z = lg->data + t * c.vocab_size;
                int am = 0;
                for (int v = 1; v < c.vocab_size; v++) if (z[v] > z[am]) am = v;
                all &= am == tg[t];
                hits += am == tg[t];
                cnt++;
            }
            CHECK_MSG(all == cell.correct && hits == cell.ans_correct && cnt == cell.ans_tokens,
                      "%s: cache %d/%lld/%lld, forward %d/%d/%d", task, cell.correct, (long long)cell.ans_correct,
                      (long long)cell.ans_tokens, all, hits, cnt);
        }
        st_ctx_free(&ctx); st_arena_free(&ar);
        st_model_free(&m);
        st_task_data_free(&td);
    }
}

int main(void) {
    st_error e = {0};
    if (st_markov_init(&chain, 1234, SYMBOLS, 2, 4, &e)) { printf("markov: %s\n", e.msg); return 1; }
    test_registry_and_tokenizer();
    test_generators();
    test_known();
    test_counting_bounded();
    test_needle_depth();
    test_dataset_and_tokenizer();
    test_rows();
    test_config_rules();
    test_answer_only_gradient();
    test_eval_matches_forward();
    st_markov_free(&chain);
    return test_finish("test_task");
}
