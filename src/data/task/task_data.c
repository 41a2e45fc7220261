/* task_data.c - a run's task data (include/st_task.h): the data.task.* keys checked
 * against the registry, and the training rows and evaluation streams built from a task's
 * generator.
 *
 * A training row is T + 1 tokens: one instance (or, with data.task.pack, instances back
 * to back while the next one's longest form fits), then <pad>. x is its first T tokens,
 * y its last T with -1 (the loss op's ignore index) wherever no loss is taken: padding
 * always, and under loss "answer" every prompt token. An ignored row costs nothing in the
 * fused LM head (src/ops/cross_entropy.c gathers the kept rows). Everything is a function
 * of (the data config, the row's seed), so batches are resumable like text windows. */
#include "st_task.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEED_SIZE 0x73697a65ull   /* "size" */
#define SEED_INST 0x696e7374ull   /* "inst" */

void st_task_size_range(const st_task *t, const st_task_params *p, int64_t *lo, int64_t *hi) {
    *lo = t->min_size_of ? t->min_size_of(p) : t->min_size;
    /* every task's sizes end at ST_TASK_MAX_SIZE (data.task.max_size's bound), some earlier */
    *hi = t->max_size && t->max_size(p) < ST_TASK_MAX_SIZE ? t->max_size(p) : ST_TASK_MAX_SIZE;
}

/* the parameters a config means (filler not yet built) */
static void params_of(const st_data_config *c, st_task_params *p) {
    memset(p, 0, sizeof *p);
    p->symbols = c->task_symbols;
    p->reversed = !strcmp(c->task_format, "reversed");
    p->random_queries = !strcmp(c->task_queries, "random");
    p->digits = c->task_digits;
    p->ignore_prob = c->task_ignore_prob;
    p->blank_prob = c->task_blank_prob;
    p->needles = c->task_needles;
    p->hops = c->task_hops;
    p->chains = c->task_chains;
    p->max_count = c->task_max_count;
    p->depth = -1.0;
}

/* The data.task keys and whether c sets each away from its default d. bit: the
 * ST_TASK_KEY_* of a task-specific key, 0 for a key every task reads. */
typedef struct { const char *key; uint32_t bit; int set; } task_key;
#define N_TASK_KEYS 17
static void task_keys_set(const st_data_config *c, const st_data_config *d, task_key k[N_TASK_KEYS]) {
    const task_key all[N_TASK_KEYS] = {
        {"name", 0, strcmp(c->task_name, d->task_name) != 0},
        {"min_size", 0, c->task_min_size != d->task_min_size},
        {"max_size", 0, c->task_max_size != d->task_max_size},
        {"symbols", ST_TASK_KEY_SYMBOLS, c->task_symbols != d->task_symbols},
        {"loss", 0, strcmp(c->task_loss, d->task_loss) != 0},
        {"pack", 0, c->task_pack != d->task_pack},
        {"doc_mask", 0, c->task_doc_mask != d->task_doc_mask},
        {"format", ST_TASK_KEY_FORMAT, strcmp(c->task_format, d->task_format) != 0},
        {"digits", ST_TASK_KEY_DIGITS, c->task_digits != d->task_digits},
        {"ignore_prob", ST_TASK_KEY_IGNORE, c->task_ignore_prob != d->task_ignore_prob},
        {"blank_prob", ST_TASK_KEY_BLANK, c->task_blank_prob != d->task_blank_prob},
        {"queries", ST_TASK_KEY_QUERIES, strcmp(c->task_queries, d->task_queries) != 0},
        {"needles", ST_TASK_KEY_NEEDLES, c->task_needles != d->task_needles},
        {"hops", ST_TASK_KEY_HOPS, c->task_hops != d->task_hops},
        {"chains", ST_TASK_KEY_CHAINS, c->task_chains != d->task_chains},
        {"max_count", ST_TASK_KEY_MAX_COUNT, c->task_max_count != d->task_max_count},
        {NULL, 0, 0},
    };
    memcpy(k, all, sizeof all);
}

/* A data.task key set away from its default, for a task (or source) that does not read
 * it: refused, so a sweep cannot silently run something other than it says. */
static int foreign_key(const task_key *keys, const st_task *t, const char *f, st_error *e) {
    for (int i = 0; keys[i].key; i++) {
        if (!keys[i].set || !keys[i].bit || (t->keys & keys[i].bit)) continue;
        char users[256];
        st_task_list(users, sizeof users, keys[i].bit, 0);
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.%s: applies to the task%s %s, not to data.task.name \"%s\"", f,
                       keys[i].key, strchr(users, ',') ? "s" : "", users, t->name);
    }
    return ST_OK;
}

int st_task_config_validate(const st_data_config *c, const char *file, st_error *e) {
    const char *f = file && *file ? file : "config";
    st_data_config d;
    st_data_config_default(&d);
    if (!memchr(c->task_name, 0, sizeof c->task_name) || !memchr(c->task_loss, 0, sizeof c->task_loss) ||
        !memchr(c->task_format, 0, sizeof c->task_format) || !memchr(c->task_queries, 0, sizeof c->task_queries))
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task: a string field is not terminated", f);
    task_key keys[N_TASK_KEYS];
    task_keys_set(c, &d, keys);
    if (strcmp(c->source, "task") != 0) {
        /* task keys on another source: the first one set names itself */
        for (int i = 0; keys[i].key; i++)
            if (keys[i].set)
                return st_fail(e, ST_ERR_CONFIG, "%s: data.task.%s: applies to data.source \"task\" (this run's source "
                               "is \"%s\")", f, keys[i].key, c->source);
        return ST_OK;
    }
    const st_task *t = st_task_find(c->task_name);
    if (!t) {
        char names[256];
        st_task_list(names, sizeof names, 0, 0);
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.name: unknown task \"%s\" (expected one of %s)", f, c->task_name,
                       names);
    }
    if (c->path[0])
        return st_fail(e, ST_ERR_CONFIG, "%s: data.path: source \"task\" generates its instances; remove data.path", f);
    if (c->pk_rate > 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.passkey.rate: inserts passkeys into text; for source \"task\" use "
                       "data.task.name \"passkey\"", f);
    if (strcmp(c->task_loss, "answer") && strcmp(c->task_loss, "all"))
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.loss: expected \"answer\" or \"all\", got \"%s\"", f, c->task_loss);
    if (c->task_doc_mask && !c->task_pack)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.doc_mask: masks attention between the instances of a packed "
                       "row; set data.task.pack true (unpacked rows hold one instance)", f);
    if (strcmp(c->task_format, "plain") && strcmp(c->task_format, "reversed"))
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.format: expected \"plain\" or \"reversed\", got \"%s\"", f,
                       c->task_format);
    if (strcmp(c->task_queries, "each") && strcmp(c->task_queries, "random"))
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.queries: expected \"each\" or \"random\", got \"%s\"", f,
                       c->task_queries);
    if (c->task_symbols < 2 || c->task_symbols > ST_TASK_MAX_SYMBOLS || c->task_digits < 1 ||
        c->task_digits > ST_TASK_MAX_DIGITS)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.symbols / digits: out of range (configs/README.md)", f);
    int rc = foreign_key(keys, t, f, e);
    if (rc) return rc;
    st_task_params p;
    params_of(c, &p);
    char why[256];
    if (t->check && t->check(&p, why, sizeof why)) return st_fail(e, ST_ERR_CONFIG, "%s: %s", f, why);
    int64_t lo, hi;
    st_task_size_range(t, &p, &lo, &hi);
    if (c->task_min_size < lo || c->task_min_size > hi)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.min_size: %s takes sizes (%s) in [%lld, %lld]%s%s%s, got %lld", f,
                       t->name, t->size_unit, (long long)lo, (long long)hi, t->min_rule ? " (" : "",
                       t->min_rule ? t->min_rule : "", t->min_rule ? ")" : "", (long long)c->task_min_size);
    if (c->task_max_size < c->task_min_size || c->task_max_size > hi)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.max_size: must be in [data.task.min_size = %lld, %lld] (%s: "
                       "%s), got %lld", f, (long long)c->task_min_size, (long long)hi, t->name, t->size_unit,
                       (long long)c->task_max_size);
    return ST_OK;
}

int st_task_data_init(st_task_data *td, const st_data_config *c, const char *cfg_file, st_error *e) {
    memset(td, 0, sizeof *td);
    int rc = st_task_config_validate(c, cfg_file, e);
    if (rc) return rc;
    td->task = st_task_find(c->task_name);
    if (!td->task) return st_fail(e, ST_ERR_CONFIG, "data.task.name: unknown task \"%s\"", c->task_name);
    params_of(c, &td->p);
    td->min_size = c->task_min_size;
    td->max_size = c->task_max_size;
    td->loss_all = !strcmp(c->task_loss, "all");
    td->pack = c->task_pack;
    if (td->task->has_depth) {
        /* the filler: the built-in Markov source (data.synthetic.{seed,order,branch}) over
         * the task's symbols */
        if (c->syn_branch > c->task_symbols)
            return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.branch: %d exceeds data.task.symbols %d (the %s task's "
                           "filler is the Markov source over the task's symbols; set data.synthetic.branch <= %d)",
                           cfg_file, c->syn_branch, c->task_symbols, td->task->name, c->task_symbols);
        st_error me = {0};
        if ((rc = st_markov_init(&td->filler, c->syn_seed, c->task_symbols, c->syn_order, c->syn_branch, &me)))
            return st_fail(e, rc, "%s: data.synthetic (the %s task's filler over data.task.symbols %d): %s", cfg_file,
                           td->task->name, c->task_symbols, me.msg);
        td->have_filler = 1;
        td->p.filler = &td->filler;
    }
    return ST_OK;
}

void st_task_data_free(st_task_data *td) {
    if (!td) return;
    if (td->have_filler) st_markov_free(&td->filler);
    memset(td, 0, sizeof *td);
}

int64_t st_task_data_max_len(const st_task_data *td) {
    int64_t m = 0;
    /* length() is monotone in size for every task; take the max anyway (cheap) */
    for (int64_t s = td->min_size; s <= td->max_size; s++) {
        int64_t l = td->task->length(&td->p, s);
        if (l > m) m = l;
    }
    return m;
}

static int64_t draw_size(const st_task_data *td, uint64_t seed, uint64_t k) {
    const uint64_t span = (uint64_t)(td->max_size - td->min_size + 1);
    return td->min_size + (int64_t)(st_hash64(seed ^ SEED_SIZE, k) % span);
}

int64_t st_task_row_tokens(const st_task_data *td, uint64_t seed, int64_t n, int32_t *tok, uint8_t *scored,
                           int32_t *start) {
    int64_t used = 0;
    for (uint64_t k = 0;; k++) {
        const int64_t size = draw_size(td, seed, k);
        if (k > 0 && (!td->pack || td->task->length(&td->p, size) > n - used)) break;
        ST_ASSERT(td->task->length(&td->p, size) <= n - used);   /* the trainer checked max_len <= T + 1 */
        const int64_t m = td->task->generate(&td->p, size, st_hash64(seed ^ SEED_INST, k), tok + used, scored + used);
        if (start)
            for (int64_t t = used; t < used + m; t++) start[t] = (int32_t)used;
        used += m;
        if (used == n) break;
    }
    for (int64_t i = used; i < n; i++) {   /* the padding: a span of its own */
        tok[i] = ST_TT_PAD;
        scored[i] = 0;
        if (start) start[i] = (int32_t)used;
    }
    /* the loss: answer tokens (or, loss "all", every instance token) after the first */
    for (int64_t i = 0; i < used; i++) scored[i] = i > 0 && (td->loss_all || scored[i]);
    return used;
}

void st_task_row(const st_task_data *td, uint64_t seed, int64_t T, int32_t *x, int32_t *y, int32_t *doc) {
    const int64_t n = T + 1;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    uint8_t *scored = malloc((size_t)n);
    int32_t *start = doc ? malloc((size_t)n * sizeof *start) : NULL;
    if (!tok || !scored || (doc && !start)) st_oom_exit("a task row", (size_t)n * 9);
    st_task_row_tokens(td, seed, n, tok, scored, start);
    for (int64_t t = 0; t < T; t++) {
        x[t] = tok[t];
        y[t] = scored[t + 1] ? tok[t + 1] : -1;
        if (doc) doc[t] = start[t];
    }
    free(start);
    free(scored);
    free(tok);
}

void st_task_stream(const st_task_data *td, uint64_t seed, int32_t *out, int64_t n) {
    int64_t longest = st_task_data_max_len(td);
    int32_t *tok = malloc((size_t)longest * sizeof *tok);
    uint8_t *ans = malloc((size_t)longest);
    if (!tok || !ans) st_oom_exit("a task instance", (size_t)longest * 5);
    for (uint64_t k = 0, used = 0; (int64_t)used < n; k++) {
        int64_t m = td->task->generate(&td->p, draw_size(td, seed, k), st_hash64(seed ^ SEED_INST, k), tok, ans);
        if (m > n - (int64_t)used) m = n - (int64_t)used;
        memcpy(out + used, tok, (size_t)m * sizeof *tok);
        used += (uint64_t)m;
    }
    free(ans);
    free(tok);
}
