/* cmd_eval_passkey.c - `stretch eval RUN --task passkey` on a text run: retrieval
 * accuracy by length and depth (docs/evaluation.md, "Passkey retrieval"). The instances
 * are built from the run's own split text in its tokenizer (src/data/passkey.c) and
 * decoded through the KV cache with the transform options of eval. Prints the accuracy
 * grid (lengths x depths) and writes RUN_DIR/eval_<split>_passkey[_<transform>].json.
 * Exit codes: cmd_eval_task.c. */
#include "cli/eval_task.h"
#include "st_eval.h"
#include "st_matmul.h"
#include "st_transform.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void default_path(const task_args *a, char *out, size_t n) {
    eval_task_path(a, a->split == ST_SPLIT_TEST ? "eval_test_passkey" : "eval_valid_passkey", out, n);
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

static int save_json(const task_args *a, const st_passkey_cell *cells, const st_run_config *cfg, size_t n_params,
                     int digits, const char *path, st_error *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", "passkey");
    cJSON_AddStringToObject(o, "run", a->src);
    cJSON_AddItemToObject(o, "model", st_eval_model_json(cfg, n_params));   /* with a trained scaling */
    cJSON_AddStringToObject(o, "split", a->split == ST_SPLIT_TEST ? "test" : "valid");
    cJSON_AddNumberToObject(o, "train_len", cfg->train.seq_len);
    cJSON_AddNumberToObject(o, "digits", digits);
    cJSON_AddNumberToObject(o, "trials", (double)a->trials);
    st_json_add_number(o, "seed", (double)a->seed);
    char label[160];
    st_transform_label(&a->xf, label, sizeof label);
    cJSON_AddStringToObject(o, "transform", label);
    cJSON_AddStringToObject(o, "precision", st_precision_name(a->precision));
    cJSON_AddStringToObject(o, "train_precision", st_precision_name(cfg->train.precision));
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
            cJSON_AddNumberToObject(r, "token_accuracy", (double)c->digits_correct / ((double)c->trials * digits));
            cJSON_AddNumberToObject(r, "answer_loss", c->loss);
        }
        cJSON_AddItemToArray(rows, r);
    }
    return eval_task_write(o, path, e);
}

int eval_passkey_text(task_args *a, st_model *m, const st_run_config *cfg, const st_train_state *ts,
                      const char *tok_path) {
    if (a->n_sizes || a->n_scales)
        return cli_usage("eval", "--sizes / --scales: apply to task runs (data.source \"task\"); a text run's passkey "
                         "takes --lengths");
    if (!a->trials) a->trials = 10;
    if (a->n_lengths == 0) {
        a->n_lengths = cfg->eval.n_lengths;
        memcpy(a->lengths, cfg->eval.lengths, sizeof a->lengths);
    }
    st_error e = {0};
    st_tokenizer *tok = NULL;
    st_passkey_cell *cells = NULL;
    int rc = ST_OK, digits = 0;
    struct stat sb;
    if (!(tok = stat(tok_path, &sb) == 0 ? st_tokenizer_load_expect(tok_path, ts->tok_hash, m->cfg.vocab_size, &e)
                                         : NULL))
        rc = e.code ? e.code : st_fail(&e, ST_ERR_DATA, "%s: the run has no tokenizer.json", a->src);
    if (!rc && !(cells = calloc((size_t)a->n_lengths * (size_t)a->n_depths, sizeof *cells)))
        rc = st_fail(&e, ST_ERR_MEMORY, "out of memory");
    if (!rc)
        rc = st_passkey_eval_text(m, a->mm, tok, &cfg->data, cfg->file, a->split, a->lengths, a->n_lengths, a->depths,
                                  a->n_depths, (int)a->trials, a->seed, cells, &digits, &e);
    if (!rc) {
        print_grid(a, cells, digits);
        char path[ST_PATH_BUF];
        if (a->json) snprintf(path, sizeof path, "%s", a->json);
        else default_path(a, path, sizeof path);
        const int none = eval_cells_none(&cells[0].status, a->n_lengths * a->n_depths, sizeof cells[0]);
        if (none && !a->json)
            cli_line("eval", 0, "no cell evaluated: %s not written (an earlier report stays)", path);
        else if (!(rc = save_json(a, cells, cfg, st_model_num_params(m), digits, path, &e)) && !a->quiet)
            cli_line("eval", 0, "wrote %s", path);
        if (!rc) {   /* reported by eval_cells_status itself */
            const int crc = eval_cells_status(&cells[0].status, a->n_lengths * a->n_depths, sizeof cells[0], "cells",
                                              !none || a->json);
            free(cells);
            st_tokenizer_free(tok);
            return crc;
        }
    }
    free(cells);
    if (tok) st_tokenizer_free(tok);
    return rc ? cli_report("eval", &e) : 0;
}
