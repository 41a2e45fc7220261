/* cmd_eval_task.c - `stretch eval RUN --task [NAME]`: task evaluation.
 *   - a task run (data.source "task"): exact-match accuracy of its task at sizes 1x..32x
 *     its largest training size (--scales, or --sizes), by depth for needle tasks
 *     (src/eval/task_eval.c; docs/tasks.md). Prints a table (a sizes x depths grid for
 *     needle tasks) and writes RUN_DIR/eval_task_<name>[_<transform>].json.
 *   - a text run: --task passkey (cmd_eval_passkey.c).
 * Exit 0 when every size ran, 2 on bad arguments (naming the flag), 3 for a missing run,
 * 4 when the run cannot do the task (a synthetic run, a text run asked for a registry
 * task, a task run asked for another task, too little text), 5 for a bad checkpoint. */
#include "cli/eval_task.h"
#include "st_eval.h"
#include "st_matmul.h"
#include "st_task.h"
#include "eval/task_report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "A,B,..." of numbers in [lo, hi], at most cap; 0 on anything else */
static int parse_numbers(const char *s, double lo, double hi, double *out, int cap, int *n) {
    *n = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf) return 0;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        double d;
        if (*n == cap || !cli_num_arg(tok, lo, hi, &d)) return 0;
        out[(*n)++] = d;
    }
    /* strtok skips empty items: ",," or a leading comma must not pass silently */
    return *n > 0 && !strstr(s, ",,") && s[0] != ',' && s[strlen(s) - 1] != ',';
}

/* a value after --task is a task name unless it is an option or the run itself */
static int is_task_name(const char *v) { return v && v[0] != '-' && (st_task_find(v) || !strcmp(v, "passkey")); }

/* The flags that take a value (parse_value's and the transform options). */
static const char *const valued[] = {"--lengths", "--sizes", "--scales", "--depths", "--trials", "--show", "--seed", "--split",
                                     "--json", "--threads", "--precision", CLI_TRANSFORM_FLAGS, NULL};

static int not_for_tasks(const char *f) {
    return cli_usage("eval", "--task: option '%s' does not apply to task evaluation (a task run takes --sizes, "
                     "--scales, --depths, --trials, --show, --seed, --json, --force, --threads, --precision, --quiet and "
                     "the transform options; a text run's passkey --lengths, --depths, --split and the same others)", f);
}

static int parse_value(const char *f, const char *v, task_args *a) {
    if (!strcmp(f, "--lengths")) {
        const int64_t hi = cli_key_max("eval.lengths");
        if ((a->n_lengths = cli_lengths_arg(v, 1, hi, a->lengths, ST_EVAL_MAX_LENGTHS)) <= 0)
            return cli_usage("eval", "--lengths '%s': expected integers in [1, %lld] 'A,B,...' or a doubling range "
                             "'A..B' (at most %d; as eval.lengths)", v, (long long)hi, ST_EVAL_MAX_LENGTHS);
        return cli_distinct_i64("eval", f, a->lengths, a->n_lengths);
    } else if (!strcmp(f, "--sizes")) {
        /* the sizes data.task.max_size allows: a task's instances grow with the size, its
         * forward quadratically, and 2^20 is already hours */
        if ((a->n_sizes = cli_lengths_arg(v, 1, ST_TASK_MAX_SIZE, a->sizes, ST_EVAL_MAX_LENGTHS)) <= 0)
            return cli_usage("eval", "--sizes '%s': expected integers in [1, 2^20] 'A,B,...' or a doubling range "
                             "'A..B' (at most %d)", v, ST_EVAL_MAX_LENGTHS);
        return cli_distinct_i64("eval", f, a->sizes, a->n_sizes);
    } else if (!strcmp(f, "--scales")) {
        if (!parse_numbers(v, 1e-6, 1e6, a->scales, ST_EVAL_MAX_LENGTHS, &a->n_scales))
            return cli_usage("eval", "--scales '%s': expected numbers in [1e-6, 1e6] 'A,B,...' (at most %d)", v,
                             ST_EVAL_MAX_LENGTHS);
        return cli_distinct("eval", f, a->scales, a->n_scales);
    } else if (!strcmp(f, "--depths")) {
        if (!parse_numbers(v, 0.0, 1.0, a->depths, TASK_MAX_DEPTHS, &a->n_depths))
            return cli_usage("eval", "--depths '%s': expected numbers in [0, 1], 'A,B,...' (at most %d)", v,
                             TASK_MAX_DEPTHS);
        a->depths_given = 1;
        return cli_distinct("eval", f, a->depths, a->n_depths);
    } else if (!strcmp(f, "--show")) {
        if (!cli_int_arg(v, 0, 1000, &a->show)) return cli_usage("eval", "--show '%s': expected an integer in [0, 1000]", v);
    } else if (!strcmp(f, "--trials")) {
        if (!cli_int_arg(v, 1, 1 << 20, &a->trials)) return cli_usage("eval", "--trials '%s': expected an integer in [1, 1048576]", v);
    } else if (!strcmp(f, "--seed")) {
        if (!cli_u64_arg(v, &a->seed)) return cli_usage("eval", "--seed '%s': expected an integer >= 0", v);
    } else if (!strcmp(f, "--split")) {
        a->split_given = 1;
        if (!cli_split_arg(v, &a->split)) return cli_usage("eval", "--split '%s': expected valid or test", v);
    } else if (!strcmp(f, "--json")) {
        a->json = v;
        if (cli_path_arg("eval", f, v)) return ST_ERR_CONFIG;
    } else if (!strcmp(f, "--precision")) {
        if ((a->precision = st_precision_from_name(v)) < 0)
            return cli_usage("eval", "--precision '%s': expected fp32 or bf16", v);
    } else if (!strcmp(f, "--threads")) {
        if (!cli_int_arg(v, 0, 4096, &a->threads)) return cli_usage("eval", "--threads '%s': expected an integer in [0, 4096] (as train.threads; 0: all cores)", v);
    } else {
        return not_for_tasks(f);
    }
    return ST_OK;
}

/* ST_OK, a usage error, or -1 after printing the usage for --help (exit 0). */
static int parse_args(int argc, char **argv, task_args *a) {
    int rc = ST_OK;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { cli_eval_usage(); return -1; }
        if (!strcmp(f, "--quiet")) { a->quiet = 1; continue; }
        if (!strcmp(f, "--force")) { a->force = 1; continue; }
        if (!strcmp(f, "--task")) {   /* NAME is optional: the run's own task */
            if (v && v[0] != '-' && (is_task_name(v) || a->src)) {
                if (!is_task_name(v)) {
                    char names[256];
                    st_task_list(names, sizeof names, 0, 0);
                    return cli_usage("eval", "--task '%s': unknown task (task runs: %s; text runs: passkey)", v, names);
                }
                a->task = v;
                i++;
            }
            continue;
        }
        if (f[0] != '-' || !f[1]) {
            if (a->src) return cli_usage("eval", "unexpected argument '%s' (one RUN_DIR or CHECKPOINT)", f);
            a->src = f;
            if (cli_path_arg("eval", "RUN_DIR|CHECKPOINT", f)) return ST_ERR_CONFIG;
            continue;
        }
        if ((rc = cli_flag_value("eval", valued, argc, argv, &i, &v))) return rc;
        if (!v) return not_for_tasks(f);
        if (cli_transform_arg("eval", f, v, &a->xf, &rc)) { if (rc) return rc; continue; }
        if ((rc = parse_value(f, v, a))) return rc;
    }
    if (!a->src) return cli_usage("eval", "missing RUN_DIR or CHECKPOINT");
    if (a->n_sizes && a->n_scales) return cli_usage("eval", "--sizes and --scales: give one of them");
    return a->json ? cli_output_file("eval", "--json", a->json, a->force) : ST_OK;
}

void eval_task_path(const task_args *a, const char *name, char *out, size_t n) {
    char dir[ST_PATH_BUF], stem[ST_PATH_BUF + 1] = "";
    struct stat st;
    snprintf(dir, sizeof dir, "%s", a->src);
    /* a checkpoint: its run dir, and "_<checkpoint name>" so that an earlier checkpoint's
     * report never replaces the run's (probe 29), as the perplexity report's name does */
    if (stat(a->src, &st) == 0 && !S_ISDIR(st.st_mode)) cli_checkpoint_dir(a->src, dir, sizeof dir, stem, sizeof stem);
    char tag[160];
    cli_transform_tag(&a->xf, tag, sizeof tag);
    snprintf(out, n, "%s/%s%s%s%s.json", dir, name, tag, a->prec_tag, stem);
}

/* The default report's name (without --json) must fit the path limit and its directory
 * take the file (not a read-only mount): checked before the evaluation, so a source is not
 * evaluated only to lose its report. task: the run's registry task, NULL for passkey. */
static int check_report_path(const task_args *a, const char *task) {
    if (a->json) return ST_OK;
    char name[64], path[2 * ST_PATH_BUF];
    if (task) snprintf(name, sizeof name, "eval_task_%s", task);
    else snprintf(name, sizeof name, "%s", a->split == ST_SPLIT_TEST ? "eval_test_passkey" : "eval_valid_passkey");
    eval_task_path(a, name, path, sizeof path);
    if (strlen(path) <= ST_PATH_MAX) return cli_default_report_writable("eval", path);
    return cli_usage("eval", "RUN_DIR|CHECKPOINT %.200s...: its default report would be %zu bytes long, and stretch "
                     "accepts paths of up to %d bytes: name the report with --json OUT.json or use a shorter path",
                     a->src, strlen(path), ST_PATH_MAX);
}

/* No cell was evaluated (n > 0). The default report is then not written: it would replace
 * an earlier evaluation's report with one of errors (probe 44); a --json file is. */
int eval_cells_none(const int *status, int n, size_t stride) {
    int failed = 0;
    for (int i = 0; i < n; i++) failed += *(const int *)((const char *)status + (size_t)i * stride) != ST_OK;
    return n > 0 && failed == n;
}

/* The exit rule of `stretch eval` (docs/evaluation.md), for cells: 0 when at least one
 * was evaluated (with a note counting the others), else the first one's status. */
int eval_cells_status(const int *status, int n, size_t stride, const char *what, int written) {
    int failed = 0, first = ST_OK;
    for (int i = 0; i < n; i++) {
        const int s = *(const int *)((const char *)status + (size_t)i * stride);
        if (s == ST_OK) continue;
        if (!failed++) first = s;
    }
    if (failed && failed < n) cli_line("eval", 0, "%d of %d %s could not be evaluated (see the report)",
                                      failed, n, what);
    if (failed < n || n == 0) return ST_OK;
    st_error e = {0};
    st_fail(&e, first, "none of the %d %s could be evaluated (%s)", n, what,
            written ? "see the report" : "--json FILE writes a report with each one's reason");
    return cli_report("eval", &e);
}

/* ---- registry tasks ---- */

static void print_table(const task_args *a, const st_task_data *td, const st_task_cell *cells, int n_depth) {
    const st_task *t = td->task;
    printf("task %s: exact match by argmax (greedy) over %lld instances per cell; trained on sizes %lld..%lld %s\n",
           t->name, (long long)a->trials, (long long)td->min_size, (long long)td->max_size, t->size_unit);
    printf("%8s %6s %7s", "size", "x", "tokens");
    if (t->has_depth)
        for (int d = 0; d < n_depth; d++) printf("  d=%-5.2f", a->depths[d]);
    printf("  %8s  %8s  %8s\n", "accuracy", "tok acc", "ans loss");
    for (int s = 0; s < a->n_sizes; s++) {
        const st_task_cell *row = cells + (size_t)s * (size_t)n_depth;
        printf("%8lld %6.2f %7lld", (long long)row[0].size, (double)row[0].size / (double)td->max_size,
               (long long)row[0].tokens);
        int tot = 0, cor = 0, err = 0;
        int64_t at = 0, ac = 0;
        double loss = 0;
        for (int d = 0; d < n_depth; d++) {
            err |= row[d].status != 0 || row[d].trials == 0;
            if (t->has_depth) {
                if (row[d].status || !row[d].trials) printf("  %7s", "error");
                else printf("  %7.2f", (double)row[d].correct / row[d].trials);
            }
            if (row[d].status || !row[d].trials) continue;
            tot += row[d].trials;
            cor += row[d].correct;
            at += row[d].ans_tokens;
            ac += row[d].ans_correct;
            loss += row[d].loss * (double)row[d].ans_tokens;
        }
        if (tot) printf("  %8.3f  %8.3f  %8.4f%s\n", (double)cor / tot, (double)ac / (double)at, loss / (double)at,
                        err ? "  (some depths not run)" : "");
        else printf("  %8s  %8s  %8s  not run (past the method's max_len)\n", "-", "-", "-");
    }
}

static int save_task_json(const task_args *a, const st_task_data *td, const st_task_cell *cells, int n_depth,
                          const st_run_config *cfg, size_t n_params, const char *path, st_error *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", td->task->name);
    cJSON_AddStringToObject(o, "run", a->src);
    cJSON_AddStringToObject(o, "pos", st_pos_name(cfg->model.pos));
    cJSON_AddItemToObject(o, "model", st_eval_model_json(cfg, n_params));   /* with a trained scaling */
    cJSON_AddNumberToObject(o, "train_len", cfg->train.seq_len);
    cJSON_AddNumberToObject(o, "train_min_size", (double)td->min_size);
    cJSON_AddNumberToObject(o, "train_max_size", (double)td->max_size);
    cJSON_AddStringToObject(o, "size_unit", td->task->size_unit);
    cJSON_AddNumberToObject(o, "trials", (double)a->trials);
    st_json_add_number(o, "seed", (double)a->seed);
    char label[160];
    st_transform_label(&a->xf, label, sizeof label);
    cJSON_AddStringToObject(o, "transform", label);
    cJSON_AddStringToObject(o, "precision", st_precision_name(a->precision));
    cJSON_AddStringToObject(o, "train_precision", st_precision_name(cfg->train.precision));
    cJSON_AddItemToObject(o, "results", st_task_results_json(td, cells, a->n_sizes, n_depth));
    return eval_task_write(o, path, e);
}

int eval_task_write(cJSON *o, const char *path, st_error *e) {
    char *s = st_json_print_exact(o, 1);
    cJSON_Delete(o);
    if (!s) return st_fail(e, ST_ERR_MEMORY, "%s: cannot format the report", path);
    size_t n = strlen(s);
    s[n] = '\n';   /* the NUL's byte: the file ends with a newline */
    int rc = st_write_file_atomic(path, s, n + 1, e);
    free(s);
    return rc;
}

/* --scales: each scale's size (round(scale x data.task.max_size), at least 1), each size
 * once. A scale that rounds below 1 was evaluated at size 1, and two that round to one size
 * twice (two rows of one figure), without a word: both are said, and the scale that adds
 * no size is left out. Returns the count kept in scales / a->sizes. */
static int scale_sizes(const st_task_data *td, task_args *a) {
    st_task_sizes_from_scales(td, a->scales, a->n_scales, a->sizes);
    int kept = 0;
    for (int i = 0; i < a->n_scales; i++) {
        if (floor(a->scales[i] * (double)td->max_size + 0.5) < 1)
            st_log(ST_LOG_WARN, "eval --scales %g: %g x %lld (data.task.max_size) rounds to size 0; evaluated at "
                   "size 1", a->scales[i], a->scales[i], (long long)td->max_size);
        int j = 0;
        while (j < kept && a->sizes[j] != a->sizes[i]) j++;
        if (j < kept) {
            st_log(ST_LOG_WARN, "eval --scales %g: size %lld, as %g gives: evaluated once", a->scales[i],
                   (long long)a->sizes[i], a->scales[j]);
            continue;
        }
        a->sizes[kept] = a->sizes[i];
        a->scales[kept++] = a->scales[i];
    }
    return kept;
}

/* Instances this long take long: every answer token attends to the whole instance and its
 * prefill is quadratic in the length. The default scales (32x at most) stay below it for
 * rows of up to 2,048 tokens. */
#define TASK_EVAL_LONG ((int64_t)1 << 16)

/* A warning with the token count when the sizes make instances past TASK_EVAL_LONG
 * (--sizes 1048576: 2M-token copy instances, 50 of them, accepted without a word). */
static void warn_long(const st_task_data *td, const task_args *a, int n_depth) {
    int64_t longest = 0, size = 0;
    double total = 0;
    for (int i = 0; i < a->n_sizes; i++) {
        const int64_t len = td->task->length(&td->p, a->sizes[i]);
        total += (double)len * (double)a->trials * n_depth;
        if (len > longest) { longest = len; size = a->sizes[i]; }
    }
    if (longest > TASK_EVAL_LONG)
        st_log(ST_LOG_WARN, "eval --task: size %lld makes instances of %lld tokens; %.3g tokens in all (%lld trial%s x "
               "%d depth%s per size), each answer token attending to its whole instance: this may take hours "
               "(fewer --trials or smaller sizes cut it)", (long long)size, (long long)longest, total,
               (long long)a->trials, a->trials == 1 ? "" : "s", n_depth, n_depth == 1 ? "" : "s");
}

static int eval_registry_task(task_args *a, st_model *m, const st_run_config *cfg) {
    if (a->n_lengths) return cli_usage("eval", "--lengths: applies to a text run's passkey; a task run takes --sizes or --scales");
    if (a->split_given) return cli_usage("eval", "--split: applies to a text run's passkey; a task run's instances are generated");
    st_error e = {0};
    st_task_data td;
    int rc = st_task_data_init(&td, &cfg->data, cfg->file, &e);
    if (rc) return cli_report("eval", &e);
    if (a->task && strcmp(a->task, td.task->name) != 0) {
        st_fail(&e, ST_ERR_DATA, "--task %s: %s was trained on the %s task (data.task.name)", a->task, a->src,
                td.task->name);
        st_task_data_free(&td);
        return cli_report("eval", &e);
    }
    if (a->depths_given && !td.task->has_depth) {
        char needle[128];
        st_task_list(needle, sizeof needle, 0, 1);
        rc = cli_usage("eval", "--depths: applies to needle tasks (%s); %s has no depth", needle, td.task->name);
        st_task_data_free(&td);
        return rc;
    }
    if (!a->trials) a->trials = ST_TASK_EVAL_TRIALS;
    const int n_depth = td.task->has_depth ? a->n_depths : 1;
    if (!a->n_sizes) {
        if (!a->n_scales) {   /* the default scales keep the sizes the task can make (MQAR: keys <= symbols) */
            const double dflt[] = ST_TASK_EVAL_SCALES;
            memcpy(a->scales, dflt, sizeof dflt);
            a->n_scales = st_task_default_sizes(&td, a->scales, a->sizes, (int)(sizeof dflt / sizeof *dflt),
                                                "stretch eval", a->quiet);
        } else {
            a->n_scales = scale_sizes(&td, a);
        }
        a->n_sizes = a->n_scales;
    }
    /* every size must be one the task can make (MQAR: distinct keys <= symbols) */
    if (st_task_check_sizes(&td, a->sizes, a->n_sizes, a->n_scales ? "--scales" : "--sizes", &e))
        rc = cli_usage("eval", "%s", e.msg);
    if (!rc) warn_long(&td, a, n_depth);
    st_task_cell *cells = rc ? NULL : calloc((size_t)a->n_sizes * (size_t)n_depth, sizeof *cells);
    if (!rc && !cells) rc = cli_report("eval", &(st_error){.code = ST_ERR_MEMORY, .msg = "out of memory"});
    /* --show: the instances' lines, written as they run and printed after the table */
    char *shown = NULL;
    size_t shown_len = 0;
    FILE *show = !rc && a->show > 0 ? open_memstream(&shown, &shown_len) : NULL;
    if (!rc && a->show > 0 && !show) rc = cli_report("eval", &(st_error){.code = ST_ERR_MEMORY, .msg = "out of memory"});
    if (!rc && st_task_eval(m, a->mm, &td, a->sizes, a->n_sizes, a->depths, n_depth, (int)a->trials, a->seed, cells,
                            (int)a->show, show, &e))
        rc = cli_report("eval", &e);
    if (show) fclose(show);
    if (!rc) print_table(a, &td, cells, n_depth);
    if (!rc && shown_len) {
        printf("\ninstances (the model's argmax at each answer token after the true ones before it, as the "
               "accuracy counts; * marks the first wrong one):\n%s", shown);
        fflush(stdout);
    }
    free(shown);
    if (!rc) {
        char path[ST_PATH_BUF], name[64];
        snprintf(name, sizeof name, "eval_task_%s", td.task->name);
        if (a->json) snprintf(path, sizeof path, "%s", a->json);
        else eval_task_path(a, name, path, sizeof path);
        const int none = eval_cells_none(&cells[0].status, a->n_sizes * n_depth, sizeof cells[0]);
        if (none && !a->json) cli_line("eval", 0, "no cell evaluated: %s not written (an earlier report stays)", path);
        else if (save_task_json(a, &td, cells, n_depth, cfg, st_model_num_params(m), path, &e)) rc = cli_report("eval", &e);
        else if (!a->quiet) cli_line("eval", 0, "wrote %s", path);
        if (!rc) rc = eval_cells_status(&cells[0].status, a->n_sizes * n_depth, sizeof cells[0], "cells", !none || a->json);
    }
    free(cells);
    st_task_data_free(&td);
    return rc;
}

int cmd_eval_task(int argc, char **argv) {
    task_args a = {.seed = 1, .split = ST_SPLIT_VALID, .threads = -1, .precision = -1};
    cli_transform_unset(&a.xf);   /* -1: not given, the run's eval section decides */
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? ST_OK : rc;
    if (a.n_depths == 0) {
        const double dflt[] = ST_TASK_EVAL_DEPTHS;
        memcpy(a.depths, dflt, sizeof dflt);
        a.n_depths = (int)(sizeof dflt / sizeof *dflt);
    }
    if (a.threads >= 0) st_set_threads((int)a.threads);
    st_error e = {0};
    st_model m;
    st_run_config cfg;
    st_train_state ts;
    char tok_path[ST_PATH_BUF];
    if (cli_load_trained(a.src, &m, &cfg, &ts, tok_path, sizeof tok_path, &e)) return cli_report("eval", &e);
    /* the transform options over the run's eval section (eval.transform, eval.sinks, ...),
     * as the perplexity evaluation takes them */
    st_eval_plan given;
    st_eval_plan_default(&given);
    cli_transform_plan(&a.xf, &given);
    a.xf = st_eval_merge_transform(&given, &cfg);
    rc = st_transform_check(&a.xf, m.cfg.pos, a.xf.cli ? "--transform" : "eval.transform", &e);
    if (!rc) st_model_set_transform(&m, &a.xf, "eval --task");
    const int task_run = !strcmp(cfg.data.source, "task");
    if (!rc && !strcmp(cfg.data.source, "synthetic"))
        rc = st_fail(&e, ST_ERR_DATA, "%s: --task needs a task run (data.source \"task\") or a text run (passkey); this "
                     "run's source is synthetic", a.src);
    if (!rc && !task_run && (!a.task || strcmp(a.task, "passkey") != 0))
        rc = st_fail(&e, ST_ERR_DATA, "%s: --task %s: a text run evaluates --task passkey; the registry tasks need a "
                     "run trained on them (data.source \"task\")", a.src, a.task ? a.task : "(the run's own)");
    if (rc) {
        st_model_free(&m);
        return cli_report("eval", &e);
    }
    if (!task_run && a.show > 0) {
        st_model_free(&m);
        return cli_usage("eval", "--show: shows a task run's instances; a text run's passkey prompts are text windows");
    }
    /* precision: the products' backend, the weights' bf16 shadow and the cache's rows, as
     * the perplexity evaluation and generate take it (default: the run's train.precision) */
    if (a.precision < 0) a.precision = cfg.train.precision;
    cli_precision_tag(a.precision, cfg.train.precision, a.prec_tag, sizeof a.prec_tag);
    if ((rc = check_report_path(&a, task_run ? (a.task ? a.task : cfg.data.task_name) : NULL))) {
        st_model_free(&m);
        return rc;
    }
    rc = st_mm_create_for(&a.mm, a.precision, a.quiet, &m.params, &e);
    if (rc) rc = cli_report("eval", &e);
    else rc = task_run ? eval_registry_task(&a, &m, &cfg) : eval_passkey_text(&a, &m, &cfg, &ts, tok_path);
    st_mm_free(a.mm);
    st_model_free(&m);
    return rc;
}
