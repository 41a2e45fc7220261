/* eval_task.h - what `stretch eval RUN --task` parses (cmd_eval_task.c) and hands to the
 * text passkey evaluation (cmd_eval_passkey.c) or runs on a task run's registry task. */
#ifndef ST_CLI_EVAL_TASK_H
#define ST_CLI_EVAL_TASK_H

#include "cli/cli.h"
#include <cjson/cJSON.h>
#include "st_transform.h"

#define TASK_MAX_DEPTHS 32

typedef struct task_args {
    const char *src, *json, *task;   /* task: NULL = the run's own task */
    int64_t lengths[ST_EVAL_MAX_LENGTHS];   /* text passkey: prompt lengths (--lengths) */
    int n_lengths;
    int64_t sizes[ST_EVAL_MAX_LENGTHS];     /* task runs: instance sizes (--sizes) */
    int n_sizes;
    double scales[ST_EVAL_MAX_LENGTHS];     /* ... or multiples of data.task.max_size (--scales) */
    int n_scales;
    double depths[TASK_MAX_DEPTHS];
    int n_depths, depths_given;
    int64_t trials;         /* 0: the default (10 text passkey, 50 tasks) */
    int64_t show;           /* task runs: instances per cell printed with the model's answer */
    uint64_t seed;
    int split, split_given, quiet, force;
    int64_t threads;
    st_transform xf;
    int precision;          /* --precision (-1: the run's train.precision), then the one used */
    char prec_tag[8];       /* cli_precision_tag of it: joins the default report's name */
    struct st_mm *mm;       /* the products' backend in that precision (owned by cmd_eval_task) */
} task_args;

/* RUN_DIR/<name><transform tag>.json for a run dir or a checkpoint in RUN_DIR/checkpoints */
void eval_task_path(const task_args *a, const char *name, char *out, size_t n);
/* Write a report (pretty JSON, ending in a newline) atomically; deletes o. */
int eval_task_write(cJSON *o, const char *path, st_error *e);
/* `eval RUN --task passkey` on a text run (its split text, src/eval/passkey_eval.c) */
int eval_passkey_text(task_args *a, st_model *m, const st_run_config *cfg, const st_train_state *ts,
                      const char *tok_path);

/* 1 when none of n > 0 cells (their int status every `stride` bytes) was evaluated: the
 * default report is then not written, so an earlier one stays (cmd_eval_task.c) */
int eval_cells_none(const int *status, int n, size_t stride);
/* 0 when at least one of n cells was evaluated, with a note on stderr counting the rest;
 * else the first cell's status (cmd_eval_task.c). written: whether a report was. */
int eval_cells_status(const int *status, int n, size_t stride, const char *what, int written);

#endif
