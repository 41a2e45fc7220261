/* sweep_internal.h - shared by the files of the sweep (src/eval/sweep*.c): the parsed
 * sweep, its points and the small file helpers. Not public API. */
#ifndef ST_SWEEP_INTERNAL_H
#define ST_SWEEP_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include "st_eval.h"

typedef enum { PT_PENDING = 0, PT_DONE, PT_SKIPPED, PT_INCOMPLETE, PT_FAILED } sweep_point_state;

typedef struct sweep_point {
    char name[256];             /* run dir name, from the override values */
    char group[256];            /* the name without the train.seed part (seed means) */
    char dir[ST_PATH_MAX + 258];       /* OUT/name */
    char train_dir[ST_PATH_MAX + 258]; /* the run evaluated: dir, or an earlier point's that trained the
                                 * same model (points differing in eval.* only) */
    char **sets;                /* "section.key=<json>" assignments, variant then grid */
    int n_sets;
    cJSON *overrides;           /* {"model.pos": "alibi", ...} in the same order */
    st_run_config cfg;          /* base + sets, validated */
    char config_hash[17];       /* hash of cfg without train.threads / max_seconds */
    /* outcome */
    int state;                  /* sweep_point_state */
    int status;                 /* st_status of a failure */
    char error[ST_PATH_BUF + 1024];
    char changed[2 * ST_PATH_BUF];     /* why its marker no longer stands for its run ("": it does) */
    cJSON *record;              /* {"train": {...}, "report": {...}} (done / skipped) */
} sweep_point;

typedef struct sweep {
    char file[ST_PATH_MAX + 1];        /* the sweep file, as given */
    char base_desc[ST_PATH_BUF + 16];       /* base path, or "<file>:base" for an inline config */
    char out[ST_PATH_MAX + 1];
    cJSON *root;
    st_eval_plan plan;          /* the "eval" section; -1 fields: each run's config */
    char plan_sig[768];         /* canonical text of the plan (marker comparison) */
    /* task runs (data.source "task"): eval.task_scales / task_trials / task_depths */
    double task_scales[ST_EVAL_MAX_LENGTHS];
    int n_task_scales;          /* default 1, 2, 4, 8, 16, 32 */
    int task_scales_given;      /* set by the file: every point must make them (checked at load) */
    int64_t task_trials;        /* default 50 */
    double task_depths[32];
    int n_task_depths;          /* default 0, 0.25, 0.5, 0.75, 1 (needle tasks) */
    int task_depths_given;      /* set by the file: some point must take a depth grid (checked at load) */
    int threads;
    int jobs;                   /* runs side by side per rank ("jobs", --jobs; 1: in turn) */
    int n_points;
    sweep_point *points;
    int n_keys;                 /* distinct override keys, in order of appearance */
    char **keys;
} sweep;

/* sweep.c: parse + validate the file and expand the grid. */
int st_sweep_load(sweep *s, const char *file, const st_sweep_opts *opts, st_error *e);
void st_sweep_free(sweep *s);
/* The strict JSON field readers sweep.c and sweep_eval.c share, messages "FILE: PATH: ...":
 * keys of obj outside list[0..n) (at `where`), a value of the wrong type ("expected WANT,
 * got VALUE"), an integer in [lo, hi]. */
int st_sweep_check_keys(const cJSON *obj, const char *const *list, int n, const char *file, const char *where,
                        st_error *e);
int st_sweep_type_error(st_error *e, const char *file, const char *path, const char *want, const cJSON *v);
int st_sweep_get_int(const cJSON *v, const char *file, const char *path, double lo, double hi, int64_t *out,
                     st_error *e);

/* sweep_eval.c: the file's "eval" section into s->plan and the task fields (ev NULL: the
 * defaults), and the plan's signature s->plan_sig (after the points are expanded). */
int st_sweep_parse_eval(sweep *s, const cJSON *ev, st_error *e);
void st_sweep_sign_plan(sweep *s);

/* sweep_run.c: one point (train, then evaluate), state and error recorded in the point. */
int st_sweep_run_point(sweep *s, int i, const st_sweep_opts *opts);
/* Re-read point i's marker (finished by another process); 1 when it matches. */
int st_sweep_same_model(const sweep *s, int i, int j);
int st_sweep_reload_point(sweep *s, int i);

/* sweep_sched.c: run the pending points owned by this rank (point i: rank i mod N),
 * `s->jobs` at a time in child processes (1: in this process), then share every point's
 * outcome with rank 0. Returns ST_ERR_INTERRUPTED after a signal, else ST_OK. */
int st_sweep_schedule(sweep *s, const st_sweep_opts *opts, st_error *e);

/* sweep_task.c: a task run's accuracy by size (eval.task_* of the sweep, the point's
 * transform) as the marker's "task" object; the task tables of results.md and
 * task_results.csv. */
/* 1 when a point with this config gets a task evaluation: a task run, or a text run
 * trained with passkeys */
int st_sweep_has_task(const st_run_config *cfg);
int st_sweep_eval_task(const sweep *s, const sweep_point *pt, const st_eval_plan *plan, cJSON **out, st_error *e);
/* eval.task_scales given by the file: ST_OK when a task point's task makes every size
 * (checked at load, before any training), else the error naming the point. */
/* eval.task_depths given although no point takes a depth grid: refused, naming the key */
int st_sweep_check_task_depths(const sweep *s, st_error *e);
int st_sweep_check_task_scales(const sweep *s, const sweep_point *pt, st_error *e);
/* the same for a text run trained with passkeys (data.passkey.rate > 0): retrieval at
 * eval.task_scales x train.seq_len tokens on the run's own text */
int st_sweep_eval_passkey_text(const sweep *s, const sweep_point *pt, const st_eval_plan *plan, cJSON **out,
                            st_error *e);
void st_sweep_task_md(const sweep *s, FILE *f);
int st_sweep_task_csv(const sweep *s, st_error *e);

/* sweep_results.c: results.csv / results.json / results.md in s->out. */
int st_sweep_write_results(const sweep *s, st_error *e);
/* Before anything is written: s->out may hold the tables only when a sweep wrote them
 * (its results.json is there and reads as one); a user's results.md is never replaced. */
int st_sweep_check_out(const sweep *s, st_error *e);

/* The files a sweep reads (sweep files, point markers, results.json), at most this large. */
#define SWEEP_TEXT_MAX ((size_t)64 << 20)

/* sweep_io.c */
int st_sweep_exists(const char *path);
/* The checkpoint a point's evaluation read (train_dir's latest) as its marker's
 * "checkpoint" object, {"file", "step", "crc32"}; NULL when the run holds none. */
cJSON *st_sweep_ckpt_id(const char *train_dir, int64_t step);
/* 1 when marker m (the file marker_path) evaluated the checkpoint train_dir holds now;
 * else 0 and what changed in why (n bytes). */
int st_sweep_same_ckpt(const cJSON *m, const char *marker_path, const char *train_dir, char *why, size_t n);

#endif
