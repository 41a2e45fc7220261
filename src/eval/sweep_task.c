/* sweep_task.c - task runs in a sweep (data.source "task"): after the perplexity
 * evaluation every such point runs the task evaluation of `stretch eval --task` at the
 * sweep's eval.task_scales (multiples of the run's data.task.max_size), task_trials
 * instances per cell and, for needle tasks, task_depths, with the point's inference
 * transform. The result is the marker's "task" object; results.md gets an accuracy
 * table (one column per scale, the mean over depths) and task_results.csv one line per
 * cell. */
#include "sweep_internal.h"
#include "eval/task_report.h"
#include "st_matmul.h"
#include "st_transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_scales(const sweep *s, const char *point, const cJSON *task);

/* The sizes of the sweep's columns, col[j] for eval.task_scales[j] (-1: not evaluated),
 * into uniq[0, *n_uniq) once each, in column order: two scales that round to one size
 * (0.5 and 0.55 of a max size of 8) are one evaluation, shown under both columns. The
 * record keeps col as "column_sizes", which the tables read. */
static void unique_sizes(const int64_t *col, int n, int64_t *uniq, int *n_uniq) {
    int u = 0;
    for (int j = 0; j < n; j++) {
        int k = 0;
        while (k < u && uniq[k] != col[j]) k++;
        if (col[j] >= 0 && k == u) uniq[u++] = col[j];
    }
    *n_uniq = u;
}

static cJSON *column_sizes_json(const int64_t *col, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int j = 0; j < n; j++) cJSON_AddItemToArray(a, col[j] >= 0 ? cJSON_CreateNumber((double)col[j]) : cJSON_CreateNull());
    return a;
}

int st_sweep_has_task(const st_run_config *cfg) { return !strcmp(cfg->data.source, "task") || cfg->data.pk_rate > 0; }

/* The point's inference transform on its model, in *xf (kept by the model: it must
 * outlive the evaluation), and the products' backend *mm in the run's train.precision
 * (bf16: the weights' shadow and the KV cache too), as the perplexity evaluation of the
 * point runs. The point's plan has every transform field resolved (point_plan: its eval.*
 * keys, else the run's config). */
static int point_model(const sweep_point *pt, const st_eval_plan *plan, const st_run_config *cfg, st_model *m,
                       st_transform *xf, st_mm **mm, st_error *e) {
    *mm = NULL;
    *xf = st_eval_plan_transform(plan, cfg->train.seq_len);
    int rc = st_transform_check(xf, m->cfg.pos, "eval.transform", e);
    if (!rc) st_model_set_transform(m, xf, pt->name);
    const int precision = plan->precision >= 0 ? plan->precision : cfg->train.precision;
    return rc ? rc : st_mm_create_for(mm, precision, 1, &m->params, e);
}

int st_sweep_check_task_scales(const sweep *s, const sweep_point *pt, st_error *e) {
    if (!s->task_scales_given || strcmp(pt->cfg.data.source, "task") != 0) return ST_OK;
    st_task_data td;
    int rc = st_task_data_init(&td, &pt->cfg.data, pt->cfg.file, e);
    if (rc) return rc;
    int64_t sizes[ST_EVAL_MAX_LENGTHS];
    st_task_sizes_from_scales(&td, s->task_scales, s->n_task_scales, sizes);
    st_error le = {0};
    if (st_task_check_sizes(&td, sizes, s->n_task_scales, "eval.task_scales", &le))
        rc = st_fail(e, ST_ERR_CONFIG, "%s: point %s: %s", s->file, pt->name, le.msg);
    st_task_data_free(&td);
    return rc;
}

int st_sweep_check_task_depths(const sweep *s, st_error *e) {
    if (!s->task_depths_given) return ST_OK;
    for (int i = 0; i < s->n_points; i++) {   /* a needle task, or a text run's passkey */
        const st_run_config *c = &s->points[i].cfg;
        if (c->data.pk_rate > 0) return ST_OK;
        const st_task *t = strcmp(c->data.source, "task") ? NULL : st_task_find(c->data.task_name);
        if (t && t->has_depth) return ST_OK;
    }
    char needle[128];
    st_task_list(needle, sizeof needle, 0, 1);
    return st_fail(e, ST_ERR_CONFIG, "%s: eval.task_depths: applies to needle tasks (%s) and text runs' passkey "
                   "(data.passkey.rate); no point of this sweep has one", s->file, needle);
}

int st_sweep_eval_task(const sweep *s, const sweep_point *pt, const st_eval_plan *plan, cJSON **out, st_error *e) {
    *out = NULL;
    st_model m;
    st_run_config cfg;
    int rc = st_checkpoint_load_model(pt->train_dir, &m, &cfg, e);
    if (rc) return rc;
    st_task_data td;
    if ((rc = st_task_data_init(&td, &cfg.data, cfg.file, e))) { st_model_free(&m); return rc; }
    st_transform xf;
    st_mm *mm = NULL;
    rc = point_model(pt, plan, &cfg, &m, &xf, &mm, e);
    int64_t sizes[ST_EVAL_MAX_LENGTHS], col[ST_EVAL_MAX_LENGTHS];
    double scales[ST_EVAL_MAX_LENGTHS];
    memcpy(scales, s->task_scales, sizeof scales);
    /* the default scales keep the sizes this point's task makes (MQAR: 16x, 32x may need
     * more keys than symbols), as `stretch eval --task` does; given ones were checked at
     * load (st_sweep_check_task_scales) */
    int n = s->n_task_scales;
    if (s->task_scales_given) st_task_sizes_from_scales(&td, scales, n, sizes);
    else n = st_task_default_sizes(&td, scales, sizes, n, pt->name, 0);
    for (int j = 0; j < s->n_task_scales; j++) {   /* column j: the kept scale equal to it */
        int k = 0;
        while (k < n && scales[k] != s->task_scales[j]) k++;
        col[j] = k < n ? sizes[k] : -1;
    }
    unique_sizes(col, s->n_task_scales, sizes, &n);
    const int n_depth = td.task->has_depth ? s->n_task_depths : 1;
    if (!rc) rc = st_task_check_sizes(&td, sizes, n, "eval.task_scales", e);
    st_task_cell *cells = rc ? NULL : calloc((size_t)n * (size_t)n_depth, sizeof *cells);
    if (!rc && !cells) rc = st_fail(e, ST_ERR_MEMORY, "out of memory");
    if (!rc) rc = st_task_eval(&m, mm, &td, sizes, n, s->task_depths, n_depth, (int)s->task_trials, 1, cells, 0, NULL, e);
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        char label[160];
        st_transform_label(&xf, label, sizeof label);
        cJSON_AddStringToObject(o, "name", td.task->name);
        cJSON_AddStringToObject(o, "size_unit", td.task->size_unit);
        cJSON_AddNumberToObject(o, "train_min_size", (double)td.min_size);
        cJSON_AddNumberToObject(o, "train_max_size", (double)td.max_size);
        cJSON_AddNumberToObject(o, "trials", (double)s->task_trials);
        cJSON_AddStringToObject(o, "transform", label);
        cJSON_AddStringToObject(o, "precision", st_precision_name(st_mm_precision(mm)));
        cJSON_AddItemToObject(o, "results", st_task_results_json(&td, cells, n, n_depth));
        cJSON_AddItemToObject(o, "column_sizes", column_sizes_json(col, s->n_task_scales));
        *out = o;
        print_scales(s, pt->name, o);
    }
    free(cells);
    st_task_data_free(&td);
    st_mm_free(mm);
    st_model_free(&m);
    return rc;
}

/* A text run trained with inserted passkeys (data.passkey.rate > 0): retrieval at
 * eval.task_scales x train.seq_len tokens, eval.task_depths, eval.task_trials per cell, on
 * the run's own split text (what `stretch eval RUN --task passkey` runs), so the sweep
 * puts retrieval beside the perplexity of the same lengths. Rows as a task's, with size =
 * the prompt's tokens and scale = size / train.seq_len. */
int st_sweep_eval_passkey_text(const sweep *s, const sweep_point *pt, const st_eval_plan *plan, cJSON **out,
                            st_error *e) {
    *out = NULL;
    st_model m;
    st_run_config cfg;
    int rc = st_checkpoint_load_model(pt->train_dir, &m, &cfg, e);
    if (rc) return rc;
    st_transform xf;
    st_mm *mm = NULL;
    rc = point_model(pt, plan, &cfg, &m, &xf, &mm, e);
    char ckpt[ST_PATH_BUF], tok_path[ST_PATH_BUF + 16];
    st_train_state ts;
    st_tokenizer *tok = NULL;
    st_passkey_cell *cells = NULL;
    const int n_depth = s->n_task_depths;
    int64_t lengths[ST_EVAL_MAX_LENGTHS], col[ST_EVAL_MAX_LENGTHS];
    for (int i = 0; i < s->n_task_scales; i++) {
        const double l = floor(s->task_scales[i] * cfg.train.seq_len + 0.5);
        col[i] = l < 1 ? 1 : (int64_t)l;
    }
    int n;
    unique_sizes(col, s->n_task_scales, lengths, &n);
    if (!rc) rc = st_checkpoint_resolve(pt->train_dir, ckpt, sizeof ckpt, e);
    if (!rc) rc = st_checkpoint_load(ckpt, NULL, NULL, 0, &ts, e);
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", pt->train_dir);
    if (!rc && !(tok = st_tokenizer_load_expect(tok_path, ts.tok_hash, m.cfg.vocab_size, e))) rc = e ? e->code : ST_ERR_DATA;
    if (!rc && !(cells = calloc((size_t)n * (size_t)n_depth, sizeof *cells))) rc = st_fail(e, ST_ERR_MEMORY, "out of memory");
    const int split = plan->split >= 0 ? plan->split : cfg.eval.split;
    int digits = 0;
    if (!rc)
        rc = st_passkey_eval_text(&m, mm, tok, &cfg.data, cfg.file, split, lengths, n, s->task_depths, n_depth,
                                  (int)s->task_trials, 1, cells, &digits, e);
    if (!rc) {
        cJSON *o = cJSON_CreateObject(), *rows = cJSON_CreateArray();
        char label[160];
        st_transform_label(&xf, label, sizeof label);
        cJSON_AddStringToObject(o, "name", "passkey");
        cJSON_AddStringToObject(o, "size_unit", "tokens");
        cJSON_AddNumberToObject(o, "train_min_size", cfg.train.seq_len);
        cJSON_AddNumberToObject(o, "train_max_size", cfg.train.seq_len);
        cJSON_AddNumberToObject(o, "trials", (double)s->task_trials);
        cJSON_AddStringToObject(o, "transform", label);
        cJSON_AddStringToObject(o, "precision", st_precision_name(st_mm_precision(mm)));
        cJSON_AddStringToObject(o, "split", split == ST_SPLIT_TEST ? "test" : "valid");
        for (int i = 0; i < n * n_depth; i++) {
            const st_passkey_cell *c = &cells[i];
            cJSON *r = cJSON_CreateObject();
            cJSON_AddNumberToObject(r, "size", (double)c->len);
            cJSON_AddNumberToObject(r, "scale", (double)c->len / (double)cfg.train.seq_len);
            cJSON_AddNumberToObject(r, "depth", c->depth);
            if (c->status || c->trials <= 0) {
                cJSON_AddStringToObject(r, "error", "not evaluated (shorter than the format or past the method's max_len)");
            } else {
                cJSON_AddNumberToObject(r, "tokens", (double)(c->len + digits));
                cJSON_AddNumberToObject(r, "trials", c->trials);
                cJSON_AddNumberToObject(r, "correct", c->correct);
                cJSON_AddNumberToObject(r, "accuracy", (double)c->correct / c->trials);
                cJSON_AddNumberToObject(r, "token_accuracy", (double)c->digits_correct / ((double)c->trials * digits));
                cJSON_AddNumberToObject(r, "answer_loss", c->loss);
            }
            cJSON_AddItemToArray(rows, r);
        }
        cJSON_AddItemToObject(o, "results", rows);
        cJSON_AddItemToObject(o, "column_sizes", column_sizes_json(col, s->n_task_scales));
        *out = o;
        print_scales(s, pt->name, o);
    }
    free(cells);
    if (tok) st_tokenizer_free(tok);
    st_mm_free(mm);
    st_model_free(&m);
    return rc;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* a task object's "name" (the registry task, or "passkey" for a text run) */
static const char *task_name(const cJSON *task) {
    const cJSON *tn = get(task, "name");
    return cJSON_IsString(tn) ? tn->valuestring : "?";
}

static int has_task(const sweep *s) {
    int any = 0;
    for (int i = 0; i < s->n_points; i++) any |= get(s->points[i].record, "task") != NULL;
    return any;
}
static double num(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Exact-match accuracy of a run's task at one scale: correct / trials over its depths;
 * NAN when none ran. */
static double accuracy_at(const cJSON *task, double scale) {
    double tr = 0, co = 0;
    const cJSON *rs = get(task, "results");
    for (const cJSON *r = rs ? rs->child : NULL; r; r = r->next)
        if (fabs(num(r, "scale") - scale) < 1e-9 && isfinite(num(r, "trials"))) {
            tr += num(r, "trials");
            co += num(r, "correct");
        }
    return tr > 0 ? co / tr : NAN;
}

static int run_scales(const cJSON *task, double *sc, int cap);

/* Exact-match accuracy of a run's task in the sweep's column j (eval.task_scales[j]): at
 * the size "column_sizes" gives it; a record written before it had that key: at the j-th
 * scale the run was evaluated at. NAN when nothing ran. */
static double column_accuracy(const cJSON *task, int j) {
    const cJSON *cs = get(task, "column_sizes");
    if (cJSON_IsArray(cs)) {
        const cJSON *sz = cJSON_GetArrayItem(cs, j);
        if (!cJSON_IsNumber(sz)) return NAN;
        double tr = 0, co = 0;
        const cJSON *rs = get(task, "results");
        for (const cJSON *r = rs ? rs->child : NULL; r; r = r->next)
            if (num(r, "size") == sz->valuedouble && isfinite(num(r, "trials"))) {
                tr += num(r, "trials");
                co += num(r, "correct");
            }
        return tr > 0 ? co / tr : NAN;
    }
    double sc[ST_EVAL_MAX_LENGTHS];
    const int ns = run_scales(task, sc, ST_EVAL_MAX_LENGTHS);
    return j < ns ? accuracy_at(task, sc[j]) : NAN;
}

static void run_label(const sweep_point *pt, const cJSON *task, char *out, size_t n) {
    char pos[160];
    st_pos_label(&pt->cfg.model, pos, sizeof pos);
    const cJSON *xf = get(task, "transform");
    const char *x = cJSON_IsString(xf) && strcmp(xf->valuestring, "none") ? xf->valuestring : "";
    snprintf(out, n, "%s%s%s%s", pos, pt->cfg.train.random_positions > 0 ? " (rand pos)" : "", x[0] ? " + " : "", x);
}

static void seed_means(const sweep *s, FILE *f);

void st_sweep_task_md(const sweep *s, FILE *f) {
    if (!has_task(s)) return;
    /* scales are the sweep's: scale = size / train max size; a rounded size can shift it */
    fprintf(f, "\n## Task accuracy\n\nExact-match accuracy (greedy decoding's verdict, %lld instances per cell; needle "
            "tasks: the mean over depths) at multiples of the largest training size.\n\n| run | pos | task | train "
            "sizes |", (long long)s->task_trials);
    for (int j = 0; j < s->n_task_scales; j++) fprintf(f, " %gx |", s->task_scales[j]);
    fprintf(f, "\n|---|---|---|---|");
    for (int j = 0; j < s->n_task_scales; j++) fprintf(f, "---:|");
    fputc('\n', f);
    char label[256];
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        const cJSON *task = get(pt->record, "task");
        if (!task) continue;
        run_label(pt, task, label, sizeof label);
        fprintf(f, "| %s | %s | %s | %.0f..%.0f |", pt->name, label, task_name(task), num(task, "train_min_size"),
                num(task, "train_max_size"));
        for (int j = 0; j < s->n_task_scales; j++) {
            const double acc = column_accuracy(task, j);
            if (isfinite(acc)) fprintf(f, " %.2f |", acc); else fprintf(f, " n/a |");
        }
        fputc('\n', f);
    }
    seed_means(s, f);
}

/* the scales run j of a task was evaluated at, in order (rows are by size, then depth) */
static int run_scales(const cJSON *task, double *sc, int cap) {
    int ns = 0;
    const cJSON *rs = get(task, "results");
    for (const cJSON *r = rs ? rs->child : NULL; r; r = r->next)
        if ((ns == 0 || fabs(sc[ns - 1] - num(r, "scale")) > 1e-9) && ns < cap) sc[ns++] = num(r, "scale");
    return ns;
}

/* One line per point: exact-match accuracy by scale, the mean over depths. */
static void print_scales(const sweep *s, const char *point, const cJSON *task) {
    printf("%s: task %s accuracy by scale:", point, task_name(task));
    for (int i = 0; i < s->n_task_scales; i++) {
        const double acc = column_accuracy(task, i);
        if (isfinite(acc)) printf("  %gx %.3f", s->task_scales[i], acc);
        else printf("  %gx n/a", s->task_scales[i]);
    }
    printf("\n");
    fflush(stdout);
}

/* With train.seed swept: per group (the run name without its seed), the mean accuracy
 * over seeds and its range, since length generalization varies between seeds. */
static void seed_means(const sweep *s, FILE *f) {
    int seeds = 0;
    for (int k = 0; k < s->n_keys; k++) seeds |= strcmp(s->keys[k], "train.seed") == 0;
    if (!seeds) return;
    fprintf(f, "\nMean over seeds (min-max):\n\n| group | runs |");
    for (int j = 0; j < s->n_task_scales; j++) fprintf(f, " %gx |", s->task_scales[j]);
    fprintf(f, "\n|---|---:|");
    for (int j = 0; j < s->n_task_scales; j++) fprintf(f, "---:|");
    fputc('\n', f);
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        int first = get(pt->record, "task") != NULL;
        for (int j = 0; j < i && first; j++) first = strcmp(s->points[j].group, pt->group) || !get(s->points[j].record, "task");
        if (!first) continue;
        int runs = 0;
        for (int j = i; j < s->n_points; j++) runs += !strcmp(s->points[j].group, pt->group) && get(s->points[j].record, "task");
        fprintf(f, "| %s | %d |", pt->group, runs);
        for (int c = 0; c < s->n_task_scales; c++) {
            double sum = 0, lo = INFINITY, hi = -INFINITY;
            int n = 0;
            for (int j = i; j < s->n_points; j++) {
                const cJSON *task = get(s->points[j].record, "task");
                if (strcmp(s->points[j].group, pt->group) || !task) continue;
                const double a = column_accuracy(task, c);
                if (!isfinite(a)) continue;
                sum += a; n++;
                lo = a < lo ? a : lo;
                hi = a > hi ? a : hi;
            }
            if (n) fprintf(f, " %.2f (%.2f-%.2f) |", sum / n, lo, hi); else fprintf(f, " n/a |");
        }
        fputc('\n', f);
    }
}

int st_sweep_task_csv(const sweep *s, st_error *e) {
    if (!has_task(s)) return ST_OK;
    char path[ST_PATH_BUF];
    snprintf(path, sizeof path, "%s/task_results.csv", s->out);
    st_atomic_file a;
    if (!st_atomic_open(&a, path, e)) return e ? e->code : ST_ERR_IO;
    fputs("run,group,pos,label,task,seed,size,scale,depth,tokens,trials,correct,accuracy,token_accuracy,answer_loss\n", a.f);
    char label[256];
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        const cJSON *task = get(pt->record, "task");
        if (!task) continue;
        run_label(pt, task, label, sizeof label);
        const cJSON *rs = get(task, "results");
        for (const cJSON *r = rs ? rs->child : NULL; r; r = r->next) {
            fprintf(a.f, "%s,%s,%s,\"%s\",%s,%llu,%.0f,%g,", pt->name, pt->group, st_pos_name(pt->cfg.model.pos), label,
                    task_name(task), (unsigned long long)pt->cfg.train.seed, num(r, "size"), num(r, "scale"));
            if (isfinite(num(r, "depth"))) fprintf(a.f, "%g", num(r, "depth"));
            if (isfinite(num(r, "trials"))) {
                fprintf(a.f, ",%.0f,%.0f,%.0f,%.6f,", num(r, "tokens"), num(r, "trials"), num(r, "correct"),
                        num(r, "accuracy"));
                if (isfinite(num(r, "token_accuracy"))) fprintf(a.f, "%.6f", num(r, "token_accuracy"));
                fprintf(a.f, ",%.6f\n", num(r, "answer_loss"));
            }
            else
                fprintf(a.f, ",,,,,,\n");
        }
    }
    return st_atomic_commit(&a, e);
}
