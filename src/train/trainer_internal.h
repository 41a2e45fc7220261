/* trainer_internal.h - the trainer's state, shared by the loop (trainer.c) and its setup
 * (trainer_setup.c: run directory, dataset, model, state, buffers). Not a public header:
 * only those two files include it. */
#ifndef ST_TRAINER_INTERNAL_H
#define ST_TRAINER_INTERNAL_H

#include "train_internal.h"
#include "st_task.h"

#include <stdio.h>

/* Seeds derived from train.seed for independent streams. */
#define SEED_LOADER  0x6c6f61646572ull   /* "loader" */
#define SEED_DROPOUT 0x64726f706f7574ull /* "dropout" */
#define SEED_VALID   0x76616c6964ull     /* "valid" */
#define SEED_POSITIONS 0x706f73ull       /* "pos": train.random_positions */
#define SEED_ABACUS 0x616261637573ull    /* "abacus": train.abacus_max_k */

typedef struct trainer {
    st_run_config cfg;
    const char *dir;
    st_train_opts opts;
    st_dataset ds;
    st_model model;
    st_optim opt;
    st_arena arena;
    st_ctx ctx;
    st_mm *mm;              /* train.precision's matmul backend (NULL until set up) */
    st_loader loader;
    int32_t *x, *y;         /* (B*T) batch buffers */
    int64_t *positions;     /* (T) randomized positions of a micro-batch (train.random_positions) */
    int32_t *doc;           /* (B*T) instance starts of a batch's rows (data.task.doc_mask), or NULL */
    st_passkey pk;          /* data.passkey.rate > 0: the passkey pieces in the run's tokenizer */
    double *val_losses;     /* (eval_batches) one validation batch's loss per slot */
    st_dist *dist;          /* NULL or the ranks of a data-parallel run */
    st_zero zero;           /* ZeRO-1 shard of the moments (opts.zero, ranks > 1) */
    int rank, ranks;
    st_train_state st;
    st_progress pg;
    int have_ds, have_model, have_opt, have_arena, have_ctx, have_pg;
    int lock_fd;            /* rank 0: the run directory's lock (st_dir_lock), or -1 */
    int restart;            /* --resume of a run that never wrote a checkpoint: from step 0 */
    int64_t skips_in_row;   /* updates skipped since the last applied one (this session) */
    char last_ckpt[ST_PATH_BUF];
    int threads;            /* OpenMP + OpenBLAS threads in use (st_set_threads) */
    char resume_changes[2048];  /* rank 0: the train keys, thread count and backend a resume
                                 * changed, "KEY: OLD vs NEW, ..." ("" when none) */
    char *origin;           /* init_from.json of a run started from a checkpoint (NULL: none) */
} trainer;

static inline void st_trainer_join(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

/* Config, run dir, dataset, model, optimizer state, arena (trainer_setup.c). Each phase
 * ends with the ranks agreeing on its status, so a failure on any rank stops all of them
 * there. */
int st_trainer_setup(trainer *t, const st_run_config *cfg_in, st_error *e);
/* The command that continues the run in dir, into buf (returned): under mpirun with the
 * same count when it has ranks > 1 (another count is refused), without it for one. */
const char *st_trainer_resume_command(const char *dir, int64_t ranks, char *buf, size_t n);

#endif
