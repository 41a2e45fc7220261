/* task_report.h - task evaluation results as JSON, and the sizes a list of scales
 * means: shared by `stretch eval --task` (src/cli/cmd_eval_task.c) and the sweep
 * (src/eval/sweep_task.c). Not public API. */
#ifndef ST_EVAL_TASK_REPORT_H
#define ST_EVAL_TASK_REPORT_H

#include <cjson/cJSON.h>
#include "st_eval.h"
#include "st_task.h"

/* "results": one object per cell {size, scale, depth (needle tasks), tokens, trials,
 * correct, accuracy, token_accuracy, answer_loss} or {size, scale, error}. */
cJSON *st_task_results_json(const st_task_data *td, const st_task_cell *cells, int n_sizes, int n_depth);
/* sizes[i] = round(scales[i] * max training size), at least 1. */
void st_task_sizes_from_scales(const st_task_data *td, const double *scales, int n, int64_t *sizes);
/* ST_OK when every size is one the task makes with the run's keys; else ST_ERR_CONFIG
 * with a message naming `flag`. */
int st_task_check_sizes(const st_task_data *td, const int64_t *sizes, int n, const char *flag, st_error *e);
/* The default scales' sizes the task can make (MQAR: distinct keys <= symbols): keeps
 * those of scales[0..n) in place (scales and sizes), logs each one left out unless quiet
 * ("<who>: default scale 16x left out: ..."), returns how many are kept (n when none
 * can be made, so the caller's check says why). */
int st_task_default_sizes(const st_task_data *td, double *scales, int64_t *sizes, int n, const char *who, int quiet);

#endif
