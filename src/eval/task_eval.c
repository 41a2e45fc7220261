/* task_eval.c - exact-match accuracy of a task run by instance size (and needle depth)
 * through the KV cache (include/st_eval.h).
 *
 * An instance's tokens up to its first answer token are one prefill; from there the
 * tokens go in one at a time (a run of prompt tokens between two answers, e.g. MQAR's
 * next query, as one chunk), and at each answer token the logits before it are scored:
 * -log p(answer token) and whether it is the argmax. Feeding the true answer (teacher
 * forcing) gives the same verdict as greedy decoding: both feed identical tokens until
 * the first miss, and one miss fails the instance either way. The per-token loss needs
 * the true tokens, which greedy decoding would not feed after a miss. */
#include "st_eval.h"
#include "st_matmul.h"
#include "st_task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_TASK_EVAL 0x74657661ull   /* "teva" */

double st_answer_nll(const float *z, int V, int t, int *hit) {
    int best = 0;
    float mx = z[0];
    for (int v = 1; v < V; v++) if (z[v] > mx) { mx = z[v]; best = v; }
    double s = 0;
    for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
    *hit = best == t;
    return (double)mx + log(s) - (double)z[t];
}

int64_t st_task_eval_instance(const st_task_data *td, int64_t size, int depth_index, double depth, int trial,
                              uint64_t seed, int32_t *tok, uint8_t *ans) {
    st_task_params p = td->p;
    p.depth = td->task->has_depth ? depth : -1.0;
    const uint64_t idx = ((uint64_t)size << 32) ^ ((uint64_t)depth_index << 24) ^ (uint64_t)trial;
    return td->task->generate(&p, size, st_hash64(seed ^ SEED_TASK_EVAL, idx), tok, ans);
}

/* one instance through a reset cache; adds to the cell; pred (NULL: not wanted) gets the
 * argmax at each answer position */
static int run_instance(st_model *m, st_kv_cache *c, st_ctx *ctx, const int32_t *tok, const uint8_t *ans, int64_t n,
                        float *logits, st_task_cell *cell, int32_t *pred, st_error *e) {
    const int V = m->cfg.vocab_size;
    int64_t a = 0;
    while (a < n && !ans[a]) a++;
    if (a == 0 || a == n) return st_fail(e, ST_ERR_DATA, "task instance without a prompt or an answer");
    st_kv_cache_reset(c);
    st_ctx_begin(ctx, 0, 0);
    int rc = st_model_decode(m, c, ctx, tok, a, logits, e);   /* logits predict token a */
    int all = 1;
    for (int64_t i = a; i < n && !rc;) {
        if (ans[i]) {
            int hit;
            if (pred) {
                int best = 0;
                for (int v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
                pred[i] = best;
            }
            cell->loss += st_answer_nll(logits, V, tok[i], &hit);
            cell->ans_tokens++;
            cell->ans_correct += hit;
            all &= hit;
        }
        if (i + 1 == n) break;
        /* feed tok[i] and the prompt tokens after it up to the next answer token */
        int64_t j = i + 1;
        while (j < n && !ans[j]) j++;
        if (j == n) break;   /* no answer left to score */
        rc = st_model_decode(m, c, ctx, tok + i, j - i, logits, e);
        i = j;
    }
    if (!rc) { cell->correct += all; cell->trials++; }
    return rc;
}

/* a token's name (the task vocabulary's) after a space */
static void put_token(FILE *f, int32_t id) {
    char name[32];
    st_task_token_name(id, name, sizeof name);
    fprintf(f, " %s", name);
}

/* One instance as --show prints it: the prompt, the expected answer, the model's argmax
 * at each answer position (pred; the first wrong one marked), the verdict and the answer
 * tokens right of those scored. An instance with prompt tokens after its first answer
 * (MQAR's next queries, flip-flop's next instructions) shows them in order, each answer
 * token's place as "[?]", so the instance can be read back whole. */
static void show_line(FILE *f, const st_task_data *td, int64_t size, double depth, int trial, const int32_t *tok,
                      const uint8_t *ans, const int32_t *pred, int64_t n, int exact, int64_t right, int64_t scored) {
    fprintf(f, "size %lld trial %d:", (long long)size, trial);
    if (td->task->has_depth) fprintf(f, " (depth %g)", depth);
    int64_t i = 0, last_prompt = -1;
    for (int64_t j = 0; j < n; j++) if (!ans[j]) last_prompt = j;
    for (; i < n && !ans[i]; i++) put_token(f, tok[i]);
    for (int64_t j = i; j <= last_prompt; j++) {
        if (ans[j]) fprintf(f, " [?]");
        else put_token(f, tok[j]);
    }
    fprintf(f, "  | expected");
    for (int64_t j = i; j < n; j++) if (ans[j]) put_token(f, tok[j]);
    fprintf(f, "  | model");
    int missed = 0;
    for (int64_t j = i; j < n; j++) {
        if (!ans[j]) continue;
        if (!missed && pred[j] != tok[j]) { fprintf(f, " *"); missed = 1; }
        put_token(f, pred[j]);
    }
    fprintf(f, "  | %s (%lld/%lld answer tokens)\n", exact ? "exact" : "wrong", (long long)right, (long long)scored);
}

/* One size: every depth x trial through one cache long enough for the longest instance;
 * the first n_show trials of each depth are written to show with the model's answers. */
static int eval_size(st_model *m, const st_task_data *td, int64_t size, const double *depths, int n_depth, int trials,
                     uint64_t seed, st_task_cell *row, int32_t *tok, uint8_t *ans, float *logits, st_ctx *ctx,
                     int n_show, FILE *show, int32_t *pred, st_error *e) {
    const int64_t longest = td->task->length(&td->p, size);
    if (m->xf) m->xf->n = longest;   /* a transform's scale for this length (s = max(1, n / L)) */
    st_kv_cache c;
    memset(&c, 0, sizeof c);
    int rc = st_kv_cache_init(&c, m, longest, st_mm_precision(ctx->mm), e);
    for (int di = 0; di < n_depth && !rc; di++) {
        st_task_cell *cell = &row[di];
        for (int tr = 0; tr < trials && !rc; tr++) {
            const int64_t n = st_task_eval_instance(td, size, di, depths[di], tr, seed, tok, ans);
            if (n > cell->tokens) cell->tokens = n;
            const int shown = show && tr < n_show;
            const st_task_cell before = *cell;
            rc = run_instance(m, &c, ctx, tok, ans, n, logits, cell, shown ? pred : NULL, e);
            if (!rc && shown)
                show_line(show, td, size, depths[di], tr, tok, ans, pred, n, cell->correct > before.correct,
                          cell->ans_correct - before.ans_correct, cell->ans_tokens - before.ans_tokens);
        }
        cell->loss = cell->ans_tokens ? cell->loss / (double)cell->ans_tokens : NAN;
    }
    st_kv_cache_free(&c);
    return rc;
}

int st_task_eval(st_model *m, st_mm *mm, const st_task_data *td, const int64_t *sizes, int n_sizes, const double *depths,
                 int n_depth, int trials, uint64_t seed, st_task_cell *cells, int n_show, FILE *show, st_error *e) {
    memset(cells, 0, (size_t)n_sizes * (size_t)n_depth * sizeof *cells);
    int64_t longest = 0;
    for (int i = 0; i < n_sizes; i++) {
        const int64_t l = td->task->length(&td->p, sizes[i]);
        longest = l > longest ? l : longest;
    }
    st_arena ar;
    st_ctx ctx;
    int32_t *tok = st_malloc((size_t)longest * sizeof *tok, e);
    uint8_t *ans = tok ? st_malloc((size_t)longest, e) : NULL;
    float *logits = ans ? st_malloc((size_t)m->cfg.vocab_size * sizeof(float), e) : NULL;
    int32_t *pred = logits && show && n_show > 0 ? st_malloc((size_t)longest * sizeof *pred, e) : NULL;
    int rc = logits && (pred || !show || n_show <= 0) ? st_arena_init(&ar, (size_t)16 << 20, (size_t)-1, e) : ST_ERR_MEMORY;
    const int have_arena = !rc;
    if (!rc) rc = st_ctx_init(&ctx, &ar, 1 << 14, e);
    if (!rc) ctx.mm = mm;
    const int have_ctx = !rc;
    const int64_t max_len = st_pos_max_len(&m->cfg);
    for (int si = 0; si < n_sizes && !rc; si++) {
        st_task_cell *row = cells + (size_t)si * (size_t)n_depth;
        const int64_t size = sizes[si];
        for (int di = 0; di < n_depth; di++) {
            row[di].size = size;
            row[di].depth = td->task->has_depth ? depths[di] : -1.0;
        }
        if (max_len > 0 && td->task->length(&td->p, size) > max_len) {
            /* past what the positions represent: a row of its own (its tokens: the bound that
             * did not fit, for the table) */
            for (int di = 0; di < n_depth; di++) {
                row[di].status = ST_ERR_CONFIG;
                row[di].loss = NAN;
                row[di].tokens = td->task->length(&td->p, size);
            }
            continue;
        }
        st_error le = {0};
        int lrc = eval_size(m, td, size, depths, n_depth, trials, seed, row, tok, ans, logits, &ctx, n_show, show, pred,
                            &le);
        if (lrc == ST_ERR_MEMORY) { rc = lrc; *e = le; }
        else if (lrc) for (int di = 0; di < n_depth; di++) { row[di].status = lrc; row[di].loss = NAN; }
    }
    if (have_ctx) st_ctx_free(&ctx);
    if (have_arena) st_arena_free(&ar);
    free(pred);
    free(logits);
    free(ans);
    free(tok);
    return rc;
}
