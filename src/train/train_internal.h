/* train_internal.h - helpers shared by the files of src/train (not public API). */
#ifndef ST_TRAIN_INTERNAL_H
#define ST_TRAIN_INTERNAL_H

#include <stdio.h>
#include "st_train.h"
#include "st_matmul.h"
#include "st_dist.h"

/* ---- config_emit.c ---- */
struct st_ckey;
/* The value of one key as JSON text ("128", "\"alibi\"", "[64, 128]"). */
void st_config_value_str(const struct st_ckey *k, const st_run_config *c, char *buf, size_t n);


/* ---- rundir.c: the run directory ---- */
/* A fresh run: create RUN_DIR (and checkpoints/) and lock it (st_dir_lock, *lock_fd: the
 * trainer keeps it open to the end); refuse (ST_ERR_IO) when it holds files unless
 * force, in which case the previous run's files are removed (config.json, metrics.jsonl,
 * tokenizer.json, checkpoints/step_*.ckpt, best.ckpt, latest, their temp files; anything
 * else stays). st_rundir_check is the same test without touching anything: the trainer
 * calls it first and st_rundir_prepare only once the new run is ready. advice: what the
 * refusal tells the user to do (st_train_opts.occupied_advice; NULL: --resume, --force or
 * another --out, stretch train's flags). */
int st_rundir_check(const char *dir, int force, const char *advice, st_error *e);
int st_rundir_prepare(const char *dir, int force, const char *advice, int *lock_fd, st_error *e);
/* 1 when the run has written a checkpoint (checkpoints/latest or a step file exists). */
int st_rundir_has_checkpoint(const char *dir);
/* Write checkpoints/step_NNNNNNNN.ckpt, update `latest`, delete step files beyond keep. */
int st_rundir_save_step(const char *dir, const st_run_config *cfg, const st_params *p,
                        const st_train_state *s, int keep, char *written, size_t n, st_error *e);
/* Make checkpoints/best.ckpt the same file as `step_path` (hard link, atomically
 * replacing the old best); ST_ERR_IO if the file system cannot link. */
int st_rundir_link_best(const char *dir, const char *step_path, st_error *e);
/* Path of checkpoints/best.ckpt (or any other name) inside dir. */
void st_rundir_path(const char *dir, const char *name, char *out, size_t n);
/* The highest step of DIR/checkpoints/step_NNNNNNNN.ckpt, -1 when there is none (the
 * resolver's fallback when checkpoints/latest is gone). */
int64_t st_rundir_newest_step(const char *dir);
/* Remove NAME.tmp.PID files whose writer PID is no longer running (left by a SIGKILL or
 * power loss mid-write; never read; in checkpoints/ as large as a checkpoint): any in
 * checkpoints/, and in RUN_DIR those of the run's own files and eval reports. */
void st_rundir_clean_temps(const char *dir);
/* Keep only metrics.jsonl records with step <= last_step (after a resume). */
int st_rundir_trim_metrics(const char *dir, int64_t last_step, st_error *e);

/* ---- init_from.c: train.init_from ---- */
/* Load c's train.init_from into m (safetensors, a checkpoint, or a run's latest
 * checkpoint; a checkpoint must have m's parameter table), with errors naming the key.
 * pinned (non-empty): the checkpoint file to take instead of resolving the key (a restart,
 * st_init_from_pinned). *origin gets RUN/init_from.json's text (malloc'd). */
int st_init_from_load(const st_run_config *c, st_model *m, int quiet, const char *pinned, char **origin,
                      st_error *e);
/* A restart from step 0 of the run in run_dir: the checkpoint its first start took
 * (RUN/init_from.json) into pinned ("" when none is recorded, or for exported weights,
 * which are checked to be unchanged instead). ST_ERR_CHECKPOINT when the recorded weights
 * are gone or changed: a restart from others would silently be another run. */
int st_init_from_pinned(const char *run_dir, const st_run_config *c, char *pinned, size_t n, st_error *e);

/* ---- progress.c: terminal progress and metrics.jsonl ---- */
typedef struct st_progress {
    int metrics;            /* RUN_DIR/metrics.jsonl (O_APPEND), or -1 */
    char metrics_path[ST_PATH_BUF];
    st_live live;           /* the terminal's live line (off when not a TTY or quiet) */
    int quiet;
    int64_t total_steps, first_step;
    double t_start;         /* st_time() at the start of this session */
    double elapsed0;        /* training seconds of earlier sessions */
} st_progress;

/* run_dir NULL: report to the terminal only, no metrics.jsonl */
int st_progress_open(st_progress *pg, const char *run_dir, int64_t first_step,
                     int64_t total_steps, double elapsed0, int quiet, st_error *e);
/* Step record: terminal bar every step (throttled), log line + metrics every log_every.
 * A record is appended whole or not at all: a failed write (a full disk, a file-size
 * limit) is cut back off the file and returned as ST_ERR_IO naming metrics.jsonl. */
int st_progress_step(st_progress *pg, int64_t step, double loss, double lr, double gnorm,
                     double tokens_per_s, int log_now, st_error *e);
/* m: the model, for the learned receptive fields of alibi_rf ("rf_rho": [layer][head]);
 * the record is written as st_progress_step's is */
int st_progress_val(st_progress *pg, int64_t step, double val_loss, int best, const st_model *m, st_error *e);
/* A resume that changed train keys (a precision, a learning rate): the record
 * {"step": N, "resumed_from": CKPT, "changed": "train.KEY: OLD vs NEW, ..."} at the
 * checkpoint's step, so the trace says where it stops being one uninterrupted run's. */
int st_progress_resume(st_progress *pg, int64_t step, const char *ckpt, const char *changed, st_error *e);
/* A message that should not be overwritten by the bar. */
void st_progress_note(st_progress *pg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
double st_progress_elapsed(const st_progress *pg);   /* including earlier sessions */
void st_progress_close(st_progress *pg);

/* ---- trainer_dist.c: data parallelism (identity with one rank) ---- */
/* Rank 0's config to every rank; a rank whose own config (local, NULL: none) differs
 * fails with the key that differs. */
int st_train_dist_share_config(st_dist *d, st_run_config *cfg, const st_run_config *local, st_error *e);
/* Check every rank loaded rank 0's data, then copy rank 0's parameters, moments and
 * training state to all ranks. */
int st_train_dist_share_state(st_dist *d, st_params *p, st_train_state *s, const st_dataset *ds, st_error *e);
/* Sum gradients (rank order), the micro-batch loss sums and the non-finite flags. */
int st_train_dist_reduce(st_dist *d, st_params *p, double *loss_sum, int *finite, st_error *e);
/* Agree on stopping: the largest signal number and the time-limit flag of any rank. */
int st_train_dist_stop(st_dist *d, int *sig, int *out_of_time);
/* Agree on rc, then sum the per-batch validation losses (each slot filled by one rank). */
int st_train_dist_validate(st_dist *d, double *losses, int n, int rc, st_error *e);

/* ---- zero.c: ZeRO-1, the optimizer moments sharded over the ranks ---- */
typedef struct st_zero {
    int on;
    int64_t item_lo, item_hi;   /* this rank's optimizer items */
    size_t lo, hi;              /* the floats [lo, hi) of the parameter block they cover */
    float *m, *v;               /* (hi - lo) moments of this shard */
    size_t *counts, *displs;    /* (ranks) every shard's extent, for the gathers */
} st_zero;
/* Shard: keep this rank's part of p->m / p->v (after the state was shared) and free the
 * full blocks (p->m = p->v = NULL afterwards). */
int st_zero_init(st_zero *z, st_dist *d, const st_optim *o, st_params *p, st_error *e);
void st_zero_free(st_zero *z);
/* The update of this rank's items, then the all-gather of the parameters. */
int st_zero_step(st_zero *z, st_dist *d, st_optim *o, st_params *p, float lr, int64_t t, float gscale);
/* Before a checkpoint: rank 0 gets full p->m / p->v (collective); st_zero_release frees
 * them again after the write. */
int st_zero_gather(st_zero *z, st_dist *d, st_params *p, st_error *e);
void st_zero_release(st_zero *z, st_dist *d, st_params *p);

#endif
