/* sweep_eval.c - a sweep file's "eval" section: the evaluation plan every point starts from
 * (its variants' and grid's eval.* keys override it per point, sweep_run.c), the task
 * evaluation's scales, depths and trials, and the plan's signature a finished point's
 * marker records (a changed plan evaluates the point again, without training).
 *
 *   "eval": {"lengths": [...], "split", "mode", "stride", "max_tokens", "batch_tokens",
 *            "buckets", "bucket_scale", "attn_stats", "task_scales", "task_trials",
 *            "task_depths"} */
#include "sweep_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const eval_keys[] = {"lengths", "split", "mode", "stride", "max_tokens",
                                        "batch_tokens", "buckets", "bucket_scale",
                                        "task_scales", "task_trials", "task_depths", "attn_stats"};

static int get_name(const cJSON *v, const char *file, const char *path, const char *a, const char *b, int *out, st_error *e) {
    if (cJSON_IsString(v) && strcmp(v->valuestring, a) == 0) { *out = 0; return ST_OK; }
    if (cJSON_IsString(v) && strcmp(v->valuestring, b) == 0) { *out = 1; return ST_OK; }
    char want[96];
    snprintf(want, sizeof want, "\"%s\" or \"%s\"", a, b);
    return st_sweep_type_error(e, file, path, want, v);
}

/* An integer of the run config's key (path may index it: "eval.lengths[2]"), in the
 * range the config schema gives that key, so a sweep and a run config accept the same. */
static int get_key_int(const cJSON *v, const char *file, const char *path, const char *key, int64_t *out, st_error *e) {
    double lo = 0, hi = 0;
    int xlo = 0, integral = 0;
    ST_ASSERT(st_config_range(key, &lo, &hi, &xlo, &integral) && integral && !xlo);
    return st_sweep_get_int(v, file, path, (int64_t)lo, (int64_t)hi, out, e);
}

/* eval.task_scales / task_depths: arrays of distinct numbers in [lo, hi] (a repeated
 * depth would count twice in a cell's mean; `eval --scales/--depths` refuse repeats too) */
static int get_numbers(const cJSON *v, const char *file, const char *path, double lo, double hi, double *out, int cap,
                       int *n, st_error *e) {
    const int m = cJSON_GetArraySize(v);
    char want[64];
    snprintf(want, sizeof want, "an array of 1 to %d numbers", cap);
    if (!cJSON_IsArray(v) || m < 1 || m > cap) return st_sweep_type_error(e, file, path, want, v);
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= lo && it->valuedouble <= hi)) {
            char where[96];
            snprintf(where, sizeof where, "%s[%d]", path, i);
            snprintf(want, sizeof want, "a number in [%g, %g]", lo, hi);
            return st_sweep_type_error(e, file, where, want, it);
        }
        for (int k = 0; k < i; k++)
            if (out[k] == it->valuedouble)
                return st_fail(e, ST_ERR_CONFIG, "%s: %s[%d]: %g repeats %s[%d]", file, path, i, it->valuedouble, path, k);
        out[i] = it->valuedouble;
    }
    *n = m;
    return ST_OK;
}

/* The task evaluation of task runs (data.source "task"; src/eval/sweep_task.c). */
static int parse_task_eval(sweep *s, const cJSON *ev, st_error *e) {
    const cJSON *v;
    int rc = ST_OK;
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "task_scales")) &&
        (rc = get_numbers(v, s->file, "eval.task_scales", 1e-6, 1e6, s->task_scales, ST_EVAL_MAX_LENGTHS,
                          &s->n_task_scales, e)))
        return rc;
    s->task_scales_given = v != NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "task_depths")) &&
        (rc = get_numbers(v, s->file, "eval.task_depths", 0, 1, s->task_depths, 32, &s->n_task_depths, e)))
        return rc;
    s->task_depths_given = v != NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "task_trials")) &&
        (rc = st_sweep_get_int(v, s->file, "eval.task_trials", 1, 1 << 20, &s->task_trials, e)))
        return rc;
    return ST_OK;
}

int st_sweep_parse_eval(sweep *s, const cJSON *ev, st_error *e) {
    st_eval_plan *p = &s->plan;
    st_eval_plan_default(p);
    const double scales[] = ST_TASK_EVAL_SCALES, depths[] = ST_TASK_EVAL_DEPTHS;
    memcpy(s->task_scales, scales, sizeof scales);
    s->n_task_scales = (int)(sizeof scales / sizeof *scales);
    memcpy(s->task_depths, depths, sizeof depths);
    s->n_task_depths = (int)(sizeof depths / sizeof *depths);
    s->task_trials = ST_TASK_EVAL_TRIALS;
    if (!ev) return ST_OK;
    if (!cJSON_IsObject(ev)) return st_sweep_type_error(e, s->file, "eval", "an object", ev);
    int rc = st_sweep_check_keys(ev, eval_keys, (int)(sizeof eval_keys / sizeof *eval_keys), s->file, "eval", e);
    if (rc) return rc;
    char path[64];
    int64_t x = 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "lengths"))) {
        int n = cJSON_GetArraySize(v);
        if (!cJSON_IsArray(v) || n < 1 || n > ST_EVAL_MAX_LENGTHS) {
            snprintf(path, sizeof path, "an array of 1 to %d lengths", ST_EVAL_MAX_LENGTHS);
            return st_sweep_type_error(e, s->file, "eval.lengths", path, v);
        }
        int i = 0;
        for (const cJSON *it = v->child; it; it = it->next, i++) {
            snprintf(path, sizeof path, "eval.lengths[%d]", i);
            if ((rc = get_key_int(it, s->file, path, "eval.lengths", &p->lengths[i], e))) return rc;
        }
        p->n_lengths = n;
    }
    int k = 0;
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "split"))) {
        if ((rc = get_name(v, s->file, "eval.split", "valid", "test", &k, e))) return rc;
        p->split = k ? ST_SPLIT_TEST : ST_SPLIT_VALID;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "mode"))) {
        if ((rc = get_name(v, s->file, "eval.mode", "nonoverlapping", "sliding", &k, e))) return rc;
        p->mode = k ? ST_EVAL_SLIDING : ST_EVAL_NONOVERLAPPING;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "stride"))) {
        if ((rc = get_key_int(v, s->file, "eval.stride", "eval.stride", &x, e))) return rc;
        if (x > 0 && p->mode == ST_EVAL_NONOVERLAPPING)
            return st_fail(e, ST_ERR_CONFIG, "%s: eval.stride: applies to \"mode\": \"sliding\" only", s->file);
        p->stride = x;
        /* without a mode, a stride asks for sliding windows, as `stretch eval --stride S` */
        if (x > 0 && p->mode < 0) p->mode = ST_EVAL_SLIDING;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "max_tokens"))) {
        if ((rc = get_key_int(v, s->file, "eval.max_tokens", "eval.max_tokens", &x, e))) return rc;
        if (x == 1) return st_fail(e, ST_ERR_CONFIG, "%s: eval.max_tokens: " ST_EVAL_ONE_TOKEN, s->file);
        p->max_tokens = x;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "batch_tokens"))) {
        if ((rc = st_sweep_get_int(v, s->file, "eval.batch_tokens", 1, 1e9, &x, e))) return rc;
        p->opts.batch_tokens = x;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "buckets"))) {
        if ((rc = get_key_int(v, s->file, "eval.buckets", "eval.buckets", &x, e))) return rc;
        p->buckets = (int)x;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "bucket_scale"))) {
        if ((rc = get_name(v, s->file, "eval.bucket_scale", "linear", "log2", &k, e))) return rc;
        p->opts.bucket_scale = k ? ST_BUCKETS_LOG2 : ST_BUCKETS_LINEAR;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(ev, "attn_stats"))) {
        if (!cJSON_IsBool(v)) return st_sweep_type_error(e, s->file, "eval.attn_stats", "true or false", v);
        p->opts.attn_stats = cJSON_IsTrue(v);
    }
    return parse_task_eval(s, ev, e);
}

void st_sweep_sign_plan(sweep *s) {
    const st_eval_plan *p = &s->plan;
    int o = snprintf(s->plan_sig, sizeof s->plan_sig, "lengths=");
    for (int i = 0; i < p->n_lengths && o < (int)sizeof s->plan_sig; i++)
        o += snprintf(s->plan_sig + o, sizeof s->plan_sig - (size_t)o, "%s%lld", i ? "," : "", (long long)p->lengths[i]);
    if (o < (int)sizeof s->plan_sig)
        snprintf(s->plan_sig + o, sizeof s->plan_sig - (size_t)o,
                 ";split=%d;mode=%d;stride=%lld;max_tokens=%lld;buckets=%d;scale=%d",
                 p->split, p->mode, (long long)p->stride, (long long)p->max_tokens, p->buckets, p->opts.bucket_scale);
    /* the task evaluation's plan joins it when a point is a task run or a text run with
     * passkeys (its marker records both; other sweeps keep their signature) */
    int tasks = 0;
    for (int i = 0; i < s->n_points; i++) tasks |= st_sweep_has_task(&s->points[i].cfg);
    if (!tasks) return;
    o = (int)strlen(s->plan_sig);
    o += snprintf(s->plan_sig + o, sizeof s->plan_sig - (size_t)o, ";task_trials=%lld;task_scales=",
                  (long long)s->task_trials);
    for (int i = 0; i < s->n_task_scales && o < (int)sizeof s->plan_sig; i++)
        o += snprintf(s->plan_sig + o, sizeof s->plan_sig - (size_t)o, "%s%g", i ? "," : "", s->task_scales[i]);
    for (int i = 0; i < s->n_task_depths && o < (int)sizeof s->plan_sig; i++)
        o += snprintf(s->plan_sig + o, sizeof s->plan_sig - (size_t)o, "%s%g", i ? "," : ";task_depths=",
                      s->task_depths[i]);
}
