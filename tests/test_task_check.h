/* test_task_check.h - the independent reading of a task instance that tests/test_task.c
 * checks every generator against: the answer recomputed from the prompt alone
 * (expected_answer, one branch per task written from docs/tasks.md, not from the
 * generators) and the structure the answer does not pin (check_structure: MQAR's distinct
 * keys, flip-flop's instruction layout, the needle tasks' filler as one chain path,
 * multikey's distinct keys, vartrack's chains, counting's and parity's prompts), and where
 * a needle task's asked-for needle sits (needle_depth). Static: test_task.c only. */
#ifndef ST_TEST_TASK_CHECK_H
#define ST_TEST_TASK_CHECK_H

#include "harness.h"
#include "st_task.h"

#include <stdio.h>
#include <string.h>

static int is_sym_of(const st_task_params *p, int32_t t) { return t >= ST_TT_SYMBOL0 && t < ST_TT_SYMBOL0 + p->symbols; }
static int is_dig(int32_t t) { return t >= ST_TT_DIGIT0 && t < ST_TT_DIGIT0 + 10; }

/* the expected answer tokens of an instance, from its prompt alone; returns their count */
static int64_t expected_answer(const st_task *t, const st_task_params *p, const int32_t *tok, int64_t n, int32_t *out) {
    int64_t k = 0;
    if (!strcmp(t->name, "copy") || !strcmp(t->name, "reverse") || !strcmp(t->name, "sort") ||
        !strcmp(t->name, "selective_copy")) {
        int64_t m = 0;
        while (tok[m] != ST_TT_SEP) m++;
        if (!strcmp(t->name, "sort")) {   /* insertion sort of a copy */
            for (int64_t i = 0; i < m; i++) {
                int64_t j = k++;
                while (j > 0 && out[j - 1] > tok[i]) { out[j] = out[j - 1]; j--; }
                out[j] = tok[i];
            }
        } else {
            for (int64_t i = 0; i < m; i++) {
                const int32_t x = !strcmp(t->name, "reverse") ? tok[m - 1 - i] : tok[i];
                if (x != ST_TT_BLANK) out[k++] = x;
            }
        }
        out[k++] = ST_TT_END;
    } else if (!strcmp(t->name, "addition")) {
        int64_t m = 0;
        while (tok[m] != ST_TT_PLUS) m++;
        /* decimal numbers most significant first, as strings; add from the right */
        char a[512], b[512], s[514];
        for (int64_t i = 0; i < m; i++) {
            a[i] = (char)('0' + tok[p->reversed ? m - 1 - i : i] - ST_TT_DIGIT0);
            b[i] = (char)('0' + tok[m + 1 + (p->reversed ? m - 1 - i : i)] - ST_TT_DIGIT0);
        }
        int c = 0;
        int64_t w = m + 1;
        s[w] = 0;
        for (int64_t i = m - 1; i >= 0; i--) {
            int v = (a[i] - '0') + (b[i] - '0') + c;
            s[--w + 0] = (char)('0' + v % 10);
            c = v / 10;
        }
        s[0] = (char)('0' + c);
        const char *sum = c ? s : s + 1;
        const int64_t len = (int64_t)strlen(sum);
        for (int64_t i = 0; i < len; i++) out[k++] = ST_TT_DIGIT0 + (sum[p->reversed ? len - 1 - i : i] - '0');
        out[k++] = ST_TT_END;
    } else if (!strcmp(t->name, "passkey")) {
        int64_t at = 0;
        while (tok[at] != ST_TT_KEY) at++;
        for (int j = 0; j < p->digits; j++) out[k++] = tok[at + 1 + j];
    } else if (!strcmp(t->name, "mqar")) {
        int64_t bar = 0;
        while (tok[bar] != ST_TT_BAR) bar++;
        for (int64_t q = bar + 1; q < n; q += 2)
            for (int64_t i = 0; i < bar; i += 2)
                if (tok[i] == tok[q]) out[k++] = tok[i + 1];
    } else if (!strcmp(t->name, "multikey")) {
        for (int64_t i = 0; i + 1 < n; i++)   /* the needle whose key the query names */
            if (tok[i] == ST_TT_KEY && tok[i + 1] == tok[n - p->digits - 1])
                for (int j = 0; j < p->digits; j++) out[k++] = tok[i + 2 + j];
    } else if (!strcmp(t->name, "vartrack")) {
        /* the variable assigned the asked value, then each variable assigned from the one
         * before, while there is one (the chain's length is check_structure's) */
        int64_t q = 0;
        while (tok[q] != ST_TT_QUERY) q++;
        const size_t value = (size_t)p->digits * sizeof *tok;
        int32_t cur = -1;
        for (int64_t i = 0; i + 1 + p->digits < q && cur < 0; i++)
            if (tok[i] == ST_TT_KEY && is_dig(tok[i + 2]) && !memcmp(tok + i + 2, tok + q + 1, value)) cur = tok[i + 1];
        while (cur >= 0 && k + 1 < n) {   /* k + 1: room for the `.` (a cycle stops there) */
            out[k++] = cur;
            int32_t next = -1;
            for (int64_t i = 0; i + 2 < q && next < 0; i++)
                if (tok[i] == ST_TT_KEY && is_sym_of(p, tok[i + 1]) && tok[i + 2] == cur) next = tok[i + 1];
            cur = next;
        }
        out[k++] = ST_TT_END;
    } else if (!strcmp(t->name, "counting")) {
        int64_t q = 0, c = 0;
        while (tok[q] != ST_TT_QUERY) q++;
        for (int64_t i = 0; i < q; i++) c += tok[i] == tok[q + 1];
        char digits[24];
        const int d = snprintf(digits, sizeof digits, "%lld", (long long)c);
        for (int i = 0; i < d; i++) out[k++] = ST_TT_DIGIT0 + (digits[i] - '0');
        out[k++] = ST_TT_END;
    } else if (!strcmp(t->name, "parity")) {
        int64_t ones = 0;
        for (int64_t i = 0; tok[i] != ST_TT_SEP; i++) ones += tok[i] == ST_TT_DIGIT0 + 1;
        out[k++] = ST_TT_DIGIT0 + (int32_t)(ones % 2);
    } else if (!strcmp(t->name, "flipflop")) {
        int32_t mem = -1;
        for (int64_t i = 0; i < n; i += 2) {
            if (tok[i] == ST_TT_WRITE) mem = tok[i + 1];
            if (tok[i] == ST_TT_READ) out[k++] = mem;
        }
    }
    return k;
}

/* Is token i of a needle task's prompt filler? Filler is symbols; a needle (an
 * assignment) is `K`, then up to two symbols (multikey's key; vartrack's variable, and a
 * copy's source), then digits (passkey, multikey, a value assignment). */
static int is_filler(const st_task_params *p, const int32_t *tok, int64_t i) {
    if (!is_sym_of(p, tok[i])) return 0;
    return !(i >= 1 && tok[i - 1] == ST_TT_KEY) && !(i >= 2 && tok[i - 2] == ST_TT_KEY && is_sym_of(p, tok[i - 1]));
}

/* prompt tokens that are not filler, from docs/tasks.md: passkey's needle and `?`,
 * multikey's needles and `? s`, vartrack's assignments and `? d1 .. dk` */
static int64_t needle_overhead(const st_task *t, const st_task_params *p) {
    const int64_t k = p->digits;
    if (!strcmp(t->name, "multikey")) return p->needles * (k + 2) + 2;
    if (!strcmp(t->name, "vartrack")) return p->chains * ((k + 2) + 3 * (p->hops - 1)) + k + 1;
    return k + 2;
}

/* Where the asked-for needle of a needle task sits: *before = the filler tokens ahead of
 * it (passkey: the `K`; multikey: the needle under the queried key; vartrack: the value
 * assignment holding the asked value), *fill = all filler tokens. */
static void needle_depth(const st_task *t, const st_task_params *p, const int32_t *tok, int64_t prompt, int64_t *before,
                         int64_t *fill) {
    int64_t q = prompt - 1;
    while (q > 0 && tok[q] != ST_TT_QUERY) q--;
    *before = -1;
    *fill = 0;
    for (int64_t i = 0; i < q; i++) {
        if (is_filler(p, tok, i)) { ++*fill; continue; }
        if (tok[i] != ST_TT_KEY) continue;
        int asked = 1;   /* passkey: its one needle */
        if (!strcmp(t->name, "multikey")) asked = tok[i + 1] == tok[q + 1];
        if (!strcmp(t->name, "vartrack"))
            asked = is_dig(tok[i + 2]) && !memcmp(tok + i + 2, tok + q + 1, (size_t)p->digits * sizeof *tok);
        if (asked) *before = *fill;
    }
}

/* the filler (the prompt's symbols outside the needles, read around them) is one path of
 * the chain: every token an allowed successor of the `order` before it (a filler sampled
 * in two parts fails) */
static int filler_is_path(const st_task_params *p, const int32_t *tok, int64_t prompt) {
    int32_t f[512];
    int64_t nf = 0;
    for (int64_t i = 0; i < prompt && nf < 512; i++)
        if (is_filler(p, tok, i)) f[nf++] = tok[i] - ST_TT_SYMBOL0;
    int path = 1;
    for (int64_t q = p->filler->order; q < nf; q++) {
        const int64_t ctx = st_markov_context(p->filler, f + q - p->filler->order);
        int allowed = 0;
        for (int b = 0; b < p->filler->branch; b++) allowed |= p->filler->next[ctx * p->filler->branch + b] == f[q];
        path &= allowed;
    }
    return path;
}

/* vartrack: `K x d1 .. dk` and `K y x` assignments in filler, `? d1 .. dk`. The
 * assigned variables are distinct, the values are distinct and exactly one chain holds
 * the asked one, every copy's source was assigned earlier in the prompt, and following
 * the copies from each value gives `chains` chains of `hops` variables that together are
 * every assignment; the filler is one chain path. */
static void check_vartrack(const st_task_params *p, int64_t size, const int32_t *tok, int64_t n) {
    const int k = p->digits;
    const int64_t q = size - k - 1;
    CHECK(tok[q] == ST_TT_QUERY && n == size + p->hops + 1 && tok[n - 1] == ST_TT_END);
    for (int j = 0; j < k; j++) CHECK(is_dig(tok[q + 1 + j]));
    enum { MAXA = ST_TASK_MAX_HOPS * ST_TASK_MAX_CHAINS };
    int32_t dst[MAXA], src[MAXA];   /* assignment a: dst[a] = src[a], a variable, or -1 - start of its value */
    int na = 0, bad = 0;
    for (int64_t i = 0; i < q && na < MAXA; i++) {
        if (tok[i] != ST_TT_KEY) continue;
        bad |= !is_sym_of(p, tok[i + 1]);
        dst[na] = tok[i + 1];
        src[na] = is_dig(tok[i + 2]) ? -1 - (int32_t)(i + 2) : tok[i + 2];
        if (src[na] >= 0) {   /* a copy: its source assigned before it */
            int earlier = 0;
            for (int b = 0; b < na; b++) earlier |= dst[b] == src[na];
            CHECK_MSG(earlier, "vartrack size %lld: `K %d %d` copies a variable not yet assigned", (long long)size,
                      (int)dst[na], (int)src[na]);
        }
        for (int b = 0; b < na; b++) bad |= dst[b] == dst[na];   /* distinct variables */
        for (int j = 0; j < k && src[na] < 0; j++) bad |= !is_dig(tok[i + 2 + j]);
        i += src[na] < 0 ? k + 1 : 2;
        na++;
    }
    int values = 0, asked = 0, reached = 0, chain_ok = 1;
    for (int a = 0; a < na; a++) {
        if (src[a] >= 0) continue;
        values++;
        const int32_t *v = tok + (-1 - src[a]);
        asked += !memcmp(v, tok + q + 1, (size_t)k * sizeof *tok);
        for (int b = 0; b < a; b++)
            if (src[b] < 0) bad |= !memcmp(v, tok + (-1 - src[b]), (size_t)k * sizeof *tok);   /* distinct values */
        int len = 1;   /* follow the copies: each variable copied at most once */
        for (int32_t cur = dst[a]; len <= na; len++) {
            int copies = 0, next = -1;
            for (int b = 0; b < na; b++)
                if (src[b] == cur) { copies++; next = b; }
            chain_ok &= copies <= 1;
            if (next < 0) break;
            cur = dst[next];
        }
        chain_ok &= len == p->hops;
        reached += len;
    }
    CHECK_MSG(!bad && values == p->chains && asked == 1 && chain_ok && reached == na && na == p->hops * p->chains,
              "vartrack size %lld: %d assignments, %d values (%d asked), chains %s, %d reached%s", (long long)size, na,
              values, asked, chain_ok ? "ok" : "not of data.task.hops", reached, bad ? ", a repeat" : "");
    int64_t fill = 0;
    for (int64_t i = 0; i < q; i++) fill += is_filler(p, tok, i);
    CHECK(fill == size - (int64_t)p->chains * (k + 2 + 3 * (p->hops - 1)) - k - 1);
    CHECK_MSG(filler_is_path(p, tok, q), "vartrack size %lld: the filler is not one path of the chain", (long long)size);
}

/* task-specific structure the answer check does not cover */
static void check_structure(const st_task *t, const st_task_params *p, int64_t size, const int32_t *tok, int64_t n) {
    if (!strcmp(t->name, "mqar")) {
        for (int64_t i = 0; i < 2 * size; i += 2)
            for (int64_t j = 0; j < i; j += 2) CHECK_MSG(tok[i] != tok[j], "mqar: keys %lld and %lld equal", (long long)i, (long long)j);
        int64_t seen = 0, distinct = 0;   /* queries "each": every key once */
        for (int64_t i = 0; i < 2 * size; i += 2) {
            int64_t asked = 0;
            for (int64_t q = 2 * size + 1; q < n; q += 2) asked += tok[q] == tok[i];
            seen += asked;
            distinct += asked > 0;
        }
        CHECK(seen == size && n == 4 * size + 1);   /* "random": size queries, each of a key */
        if (!p->random_queries) CHECK_MSG(distinct == size, "mqar: %lld of %lld keys asked", (long long)distinct,
                                          (long long)size);
        for (int64_t i = 0; i < 2 * size; i += 2)   /* keys from the first half, values the second */
            CHECK(tok[i] < ST_TT_SYMBOL0 + p->symbols / 2 && tok[i + 1] >= ST_TT_SYMBOL0 + p->symbols / 2);
    } else if (!strcmp(t->name, "flipflop")) {
        CHECK(tok[0] == ST_TT_WRITE && tok[n - 2] == ST_TT_READ && n == 2 * size);
        for (int64_t i = 0; i < n; i += 2) CHECK(tok[i] == ST_TT_WRITE || tok[i] == ST_TT_READ || tok[i] == ST_TT_IGNORE);
    } else if (!strcmp(t->name, "passkey")) {
        int64_t fill = 0;
        for (int64_t i = 0; i < size - 1; i++) fill += is_sym_of(p, tok[i]);
        CHECK_MSG(fill == size - p->digits - 2, "passkey: %lld filler tokens, want %lld", (long long)fill,
                  (long long)(size - p->digits - 2));
        CHECK(tok[size - 1] == ST_TT_QUERY && n == size + p->digits);
        CHECK_MSG(filler_is_path(p, tok, size - 1), "passkey size %lld: the filler is not one path of the chain",
                  (long long)size);
    } else if (!strcmp(t->name, "multikey")) {
        /* m needles of k digits under distinct keys, the query's key among them */
        const int64_t w = p->digits + 2;
        int64_t needles = 0, fill = 0, asked = 0;
        for (int64_t i = 0; i < size - 2; i++) {
            if (tok[i] != ST_TT_KEY) { fill += is_sym_of(p, tok[i]); continue; }
            CHECK(is_sym_of(p, tok[i + 1]));
            for (int j = 0; j < p->digits; j++) CHECK(is_dig(tok[i + 2 + j]));
            for (int64_t q = i + w; q < size - 2; q++) CHECK(!(tok[q] == ST_TT_KEY && tok[q + 1] == tok[i + 1]));
            asked += tok[i + 1] == tok[size - 1];
            needles++;
            i += w - 1;
        }
        CHECK_MSG(needles == p->needles && asked == 1 && fill == size - p->needles * w - 2,
                  "multikey size %lld: %lld needles, %lld asked, %lld filler", (long long)size, (long long)needles,
                  (long long)asked, (long long)fill);
        CHECK(tok[size - 2] == ST_TT_QUERY && is_sym_of(p, tok[size - 1]) && n == size + p->digits);
        CHECK_MSG(filler_is_path(p, tok, size - 2), "multikey size %lld: the filler is not one path of the chain",
                  (long long)size);
    } else if (!strcmp(t->name, "vartrack")) {
        check_vartrack(p, size, tok, n);
    } else if (!strcmp(t->name, "counting")) {
        for (int64_t i = 0; i < size; i++) CHECK(is_sym_of(p, tok[i]));
        int64_t c = 0;   /* the asked symbol occurs */
        for (int64_t i = 0; i < size; i++) c += tok[i] == tok[size + 1];
        CHECK(tok[size] == ST_TT_QUERY && tok[size + 2] == ST_TT_SEP && c >= 1);
        CHECK_MSG(p->max_count == 0 || c <= p->max_count, "counting size %lld: %lld occurrences, max_count %lld",
                  (long long)size, (long long)c, (long long)p->max_count);
    } else if (!strcmp(t->name, "parity")) {
        for (int64_t i = 0; i < size; i++) CHECK(tok[i] == ST_TT_DIGIT0 || tok[i] == ST_TT_DIGIT0 + 1);
        CHECK(tok[size] == ST_TT_SEP && n == size + 2);
    } else if (!strcmp(t->name, "addition")) {
        for (int64_t i = 0; i < size; i++) CHECK(is_dig(tok[i]) && is_dig(tok[size + 1 + i]));
        if (size > 1) CHECK(tok[p->reversed ? size - 1 : 0] != ST_TT_DIGIT0);
    }
}

#endif
