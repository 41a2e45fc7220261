/* cmd_eval_task.c - `stretch eval RUN --task passkey`: retrieval accuracy of a text run by
 * length and depth (docs/evaluation.md, "Passkey retrieval"). The instances are built
 * from the run's own split text in its tokenizer (src/data/passkey.c) and decoded
 * through the KV cache with the transform options of eval. Prints the accuracy grid
 * (lengths x depths) and writes RUN_DIR/eval_<split>_passkey[_<transform>].json.
 * Exit 0 when every length ran, 2 on bad arguments (naming the flag), 3 for a missing
 * run, 4 when the run has no text (synthetic) or too little for the longest instance,
 * 5 for a bad checkpoint. */
#include "cli/cli.h"
#include "st_eval.h"
#include "st_transform.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTHS 32

typedef struct task_args {
    const char *src, *json, *task;
    int64_t lengths[ST_EVAL_MAX_LENGTHS];
    int n_lengths;
    double depths[MAX_DEPTHS];
    int n_depths;
    int64_t trials;
    uint64_t seed;
    int split, quiet;
    int64_t threads;
    st_transform xf;
} task_args;

static int parse_depths(const char *s, task_args *a) {
    a->n_depths = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf) return 0;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        double d;
        if (a->n_depths == MAX_DEPTHS || !cli_num_arg(tok, 0.0, 1.0, &d)) return 0;
        a->depths[a->n_depths++] = d;
    }
    /* strtok skips empty items: ",," or a leading comma must not pass silently */
    return a->n_depths > 0 && !strstr(s, ",,") && s[0] != ',' && s[strlen(s) - 1] != ',';
}

static int parse_args(int argc, char **argv, task_args *a) {
    int rc = ST_OK;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--quiet")) { a->quiet = 1; continue; }
        if (f[0] != '-' || !f[1]) {
            if (a->src) return cli_usage("eval", "unexpected argument '%s' (one RUN_DIR or CHECKPOINT)", f);
            a->src = f;
            if (cli_path_arg("eval", "RUN_DIR|CHECKPOINT", f)) return ST_ERR_CONFIG;
            continue;
        }
        if (!v) return cli_usage("eval", "%s needs a value", f);
        i++;
        if (cli_transform_arg("eval", f, v, &a->xf, &rc)) { if (rc) return rc; continue; }
        if (!strcmp(f, "--task")) a->task = v;
        else if (!strcmp(f, "--lengths")) {
            if ((a->n_lengths = cli_list_arg(v, 1, (int64_t)1 << 30, a->lengths, ST_EVAL_MAX_LENGTHS)) <= 0)
                return cli_usage("eval", "--lengths '%s': expected positive integers 'A,B,...'", v);
        } else if (!strcmp(f, "--depths")) {
            if (!parse_depths(v, a))
                return cli_usage("eval", "--depths '%s': expected numbers in [0, 1], 'A,B,...' (at most %d)", v, MAX_DEPTHS);
        } else if (!strcmp(f, "--trials")) {
            if (!cli_int_arg(v, 1, 1 << 20, &a->trials)) return cli_usage("eval", "--trials '%s': expected an integer in [1, 1048576]", v);
        } else if (!strcmp(f, "--seed")) {
            if (!cli_u64_arg(v, &a->seed)) return cli_usage("eval", "--seed '%s': expected an integer >= 0", v);
        } else if (!strcmp(f, "--split")) {
            if (!strcmp(v, "valid")) a->split = ST_SPLIT_VALID;
            else if (!strcmp(v, "test")) a->split = ST_SPLIT_TEST;
            else return cli_usage("eval", "--split '%s': expected valid or test", v);
        } else if (!strcmp(f, "--json")) {
            a->json = v;
            if (cli_path_arg("eval", f, v)) return ST_ERR_CONFIG;
        } else if (!strcmp(f, "--threads")) {
            if (!cli_int_arg(v, 0, 4096, &a->threads)) return cli_usage("eval", "--threads '%s': expected an integer >= 0", v);
        } else {
            return cli_usage("eval", "--task: option '%s' does not apply to task evaluation (it takes --lengths, "
                             "--depths, --trials, --seed, --split, --json, --threads, --quiet and the transform options)", f);
        }
    }
    if (!a->src) return cli_usage("eval", "missing RUN_DIR or CHECKPOINT");
    if (strcmp(a->task, "passkey") != 0)
        return cli_usage("eval", "--task '%s': unknown task (text runs: passkey)", a->task);
    return ST_OK;
}

/* RUN_DIR/eval_<split>_passkey[_<transform label>].json; a checkpoint's run dir is the
 * parent of its checkpoints/ directory */
static void default_path(const task_args *a, char *out, size_t n) {
    char dir[ST_PATH_BUF];
    struct stat st;
    snprintf(dir, sizeof dir, "%s", a->src);
    if (stat(a->src, &st) == 0 && !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else strcpy(dir, ".");
        size_t dl = strlen(dir);
        if (dl >= 11 && strcmp(dir + dl - 11, "checkpoints") == 0) {
            if (dl == 11) strcpy(dir, "."); else dir[dl - 12] = 0;
        }
    }
    char tag[160];
    cli_transform_tag(&a->xf, tag, sizeof tag);
    snprintf(out, n, "%s/eval_%s_passkey%s.json", dir, a->split == ST_SPLIT_TEST ? "test" : "valid", tag);
}

static void print_grid(const task_args *a, const st_passkey_cell *cells, int digits) {
    printf("passkey retrieval: %d-digit keys, %lld trials per cell, exact match by argmax (greedy)\n", digits,
           (long long)a->trials);
    printf("  length");
    for (int d = 0; d < a->n_depths; d++) printf("  d=%-5.2f", a->depths[d]);
    printf("   mean acc  ans loss\n");
    for (int l = 0; l < a->n_lengths; l++) {
        const st_passkey_cell *row = cells + (size_t)l * (size_t)a->n_depths;
        printf("%8lld", (long long)a->lengths[l]);
        int tot = 0, cor = 0;
        double loss = 0;
        for (int d = 0; d < a->n_depths; d++) {
            if (row[d].status || row[d].trials == 0) { printf("  %7s", "error"); continue; }
            printf("  %7.2f", (double)row[d].correct / row[d].trials);
            tot += row[d].trials;
            cor += row[d].correct;
            loss += row[d].loss * row[d].trials;
        }
        if (tot) printf("   %8.3f  %8.4f\n", (double)cor / tot, loss / tot);
        else printf("   %8s  %8s\n", "-", "-");
    }
}

static int save_json(const task_args *a, const st_passkey_cell *cells, const st_run_config *cfg, int digits,
                     const char *path, st_error *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", "passkey");
    cJSON_AddStringToObject(o, "run", a->src);
    cJSON_AddStringToObject(o, "split", a->split == ST_SPLIT_TEST ? "test" : "valid");
    cJSON_AddNumberToObject(o, "train_len", cfg->train.seq_len);
    cJSON_AddNumberToObject(o, "digits", digits);
    cJSON_AddNumberToObject(o, "trials", (double)a->trials);
    cJSON_AddNumberToObject(o, "seed", (double)a->seed);
    char label[160];
    st_transform_label(&a->xf, label, sizeof label);
    cJSON_AddStringToObject(o, "transform", label);
    cJSON *rows = cJSON_AddArrayToObject(o, "results");
    for (int i = 0; i < a->n_lengths * a->n_depths; i++) {
        const st_passkey_cell *c = &cells[i];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "length", (double)c->len);
        cJSON_AddNumberToObject(r, "depth", c->depth);
        if (c->status || c->trials == 0) {
            cJSON_AddStringToObject(r, "error", "not evaluated (shorter than the format or past the method's max_len)");
        } else {
            cJSON_AddNumberToObject(r, "trials", c->trials);
            cJSON_AddNumberToObject(r, "correct", c->correct);
            cJSON_AddNumberToObject(r, "accuracy", (double)c->correct / c->trials);
            cJSON_AddNumberToObject(r, "answer_loss", c->loss);
        }
        cJSON_AddItemToArray(rows, r);
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s) return st_fail(e, ST_ERR_MEMORY, "%s: cannot format the report", path);
    size_t n = strlen(s);
    s[n] = '\n';   /* the NUL's byte: the file ends with a newline */
    int rc = st_write_file_atomic(path, s, n + 1, e);
    free(s);
    return rc;
}

int cmd_eval_task(int argc, char **argv) {
    task_args a = {.trials = 10, .seed = 1, .split = ST_SPLIT_VALID, .threads = -1, .task = ""};
    a.xf = (st_transform){0};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (a.n_depths == 0) {
        const double dflt[] = {0.0, 0.25, 0.5, 0.75, 1.0};
        memcpy(a.depths, dflt, sizeof dflt);
        a.n_depths = 5;
    }
    if (a.threads >= 0) st_set_threads((int)a.threads);
    st_error e = {0};
    st_model m;
    st_run_config cfg;
    st_train_state ts;
    char tok_path[ST_PATH_BUF];
    if (cli_load_trained(a.src, &m, &cfg, &ts, tok_path, sizeof tok_path, &e)) return cli_report(&e);
    if (a.n_lengths == 0) {
        a.n_lengths = cfg.eval.n_lengths;
        memcpy(a.lengths, cfg.eval.lengths, sizeof a.lengths);
    }
    st_tokenizer *tok = NULL;
    st_dataset ds;
    memset(&ds, 0, sizeof ds);
    st_passkey_cell *cells = NULL;
    a.xf.train_len = cfg.train.seq_len;
    rc = st_transform_check(&a.xf, m.cfg.pos, "--transform", &e);
    m.xf = !rc && st_transform_active(&a.xf) ? &a.xf : NULL;
    if (!rc && !strcmp(cfg.data.source, "synthetic"))
        rc = st_fail(&e, ST_ERR_DATA, "%s: --task passkey needs a text run (data.source text or wikitext); this run's "
                     "source is synthetic", a.src);
    struct stat sb;
    if (!rc && !(tok = stat(tok_path, &sb) == 0 ? st_tokenizer_load_expect(tok_path, ts.tok_hash, m.cfg.vocab_size, &e)
                                                 : NULL))
        rc = e.code ? e.code : st_fail(&e, ST_ERR_DATA, "%s: the run has no tokenizer.json", a.src);
    st_passkey pk;
    if (!rc) rc = st_passkey_init(&pk, tok, cfg.data.pk_digits, &e);
    if (!rc) rc = st_dataset_load(&cfg.data, cfg.file, &ds, &e);
    if (!rc && !(cells = calloc((size_t)a.n_lengths * (size_t)a.n_depths, sizeof *cells)))
        rc = st_fail(&e, ST_ERR_MEMORY, "eval: out of memory");
    if (!rc)
        rc = st_passkey_eval(&m, &pk, ds.tokens[a.split], ds.n[a.split], a.lengths, a.n_lengths, a.depths, a.n_depths,
                             (int)a.trials, a.seed, cells, &e);
    if (!rc) {
        print_grid(&a, cells, pk.digits);
        char path[ST_PATH_BUF];
        if (a.json) snprintf(path, sizeof path, "%s", a.json);
        else default_path(&a, path, sizeof path);
        rc = save_json(&a, cells, &cfg, pk.digits, path, &e);
        if (!rc && !a.quiet) fprintf(stderr, "stretch eval: wrote %s\n", path);
    }
    free(cells);
    st_dataset_free(&ds);
    if (tok) st_tokenizer_free(tok);
    st_model_free(&m);
    return rc ? cli_report(&e) : 0;
}
