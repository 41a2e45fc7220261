/* task_report.c - task evaluation results as JSON, and evaluation sizes (task_report.h). */
#include "eval/task_report.h"

#include <math.h>
#include <stdint.h>

cJSON *st_task_results_json(const st_task_data *td, const st_task_cell *cells, int n_sizes, int n_depth) {
    cJSON *rows = cJSON_CreateArray();
    for (int i = 0; i < n_sizes * n_depth; i++) {
        const st_task_cell *c = &cells[i];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "size", (double)c->size);
        cJSON_AddNumberToObject(r, "scale", (double)c->size / (double)td->max_size);
        if (td->task->has_depth) cJSON_AddNumberToObject(r, "depth", c->depth);
        if (c->status || c->trials == 0) {
            cJSON_AddStringToObject(r, "error", "not evaluated (past the method's max_len)");
        } else {
            cJSON_AddNumberToObject(r, "tokens", (double)c->tokens);
            cJSON_AddNumberToObject(r, "trials", c->trials);
            cJSON_AddNumberToObject(r, "correct", c->correct);
            cJSON_AddNumberToObject(r, "accuracy", (double)c->correct / c->trials);
            cJSON_AddNumberToObject(r, "token_accuracy", (double)c->ans_correct / (double)c->ans_tokens);
            cJSON_AddNumberToObject(r, "answer_loss", c->loss);
        }
        cJSON_AddItemToArray(rows, r);
    }
    return rows;
}

void st_task_sizes_from_scales(const st_task_data *td, const double *scales, int n, int64_t *sizes) {
    for (int i = 0; i < n; i++) {
        const double s = floor(scales[i] * (double)td->max_size + 0.5);
        sizes[i] = s < 1 ? 1 : (int64_t)s;
    }
}

int st_task_default_sizes(const st_task_data *td, double *scales, int64_t *sizes, int n, const char *who, int quiet) {
    st_task_sizes_from_scales(td, scales, n, sizes);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        st_error le = {0};
        if (st_task_check_sizes(td, &sizes[i], 1, "the default scales", &le)) {
            if (!quiet) st_log(ST_LOG_INFO, "%s: default scale %gx left out: %s", who, scales[i], le.msg);
            continue;
        }
        sizes[kept] = sizes[i];
        scales[kept++] = scales[i];
    }
    return kept > 0 ? kept : n;
}

int st_task_check_sizes(const st_task_data *td, const int64_t *sizes, int n, const char *flag, st_error *e) {
    int64_t lo, hi;
    st_task_size_range(td->task, &td->p, &lo, &hi);
    for (int i = 0; i < n; i++)
        if (sizes[i] < lo || sizes[i] > hi)
            return st_fail(e, ST_ERR_CONFIG, "%s: size %lld is outside what %s makes with this run's data.task keys "
                           "([%lld, %lld] %s)", flag, (long long)sizes[i], td->task->name, (long long)lo,
                           (long long)hi, td->task->size_unit);
    return ST_OK;
}
