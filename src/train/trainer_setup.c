/* trainer_setup.c - everything a training run does before its first step (trainer.c runs
 * the steps): the run directory (fresh: checked, then prepared and locked once all else is
 * ready; resume: locked, its config and checkpoint checked, or a restart from step 0), the
 * dataset and model, the training state (checkpoint, init_from or a fresh init) and the
 * step buffers and arena, sized by a dry run. Rank 0 alone touches the run directory. */
#define _GNU_SOURCE
#include "trainer_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int st_train_loader_init(const st_run_config *c, const st_dataset *ds, st_loader *l, st_error *e) {
    const st_train_config *tc = &c->train;
    st_loader_init(l, ds->tokens[ST_SPLIT_TRAIN], ds->n[ST_SPLIT_TRAIN], tc->seed ^ SEED_LOADER);
    l->task = ds->task;
    const int64_t task_len = ds->task ? st_task_data_max_len(ds->task) : 0;
    if (task_len > (int64_t)tc->seq_len + 1)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.max_size: a %s instance of size %lld has %lld tokens; "
                       "train.seq_len + 1 is %d (raise train.seq_len or lower data.task.max_size)", c->file,
                       ds->task->task->name, (long long)c->data.task_max_size, (long long)task_len, tc->seq_len + 1);
    return ST_OK;
}

/* The training state: rank 0 reads it from the checkpoint when resuming (the other ranks
 * receive it), else every rank starts from step 0. */
static int setup_state(trainer *t, const char *ckpt, st_error *e) {
    const st_train_config *tc = &t->cfg.train;
    int rc = ST_OK;
    if (t->opts.resume && t->rank == 0) {
        if ((rc = st_checkpoint_load(ckpt, NULL, &t->model.params, 1, &t->st, e))) return rc;
        if (t->st.tok_hash != t->ds.tok_hash)
            return st_fail(e, ST_ERR_DATA, "%s: trained with a different tokenizer (hash %016llx) than the "
                           "dataset now gives (%016llx)", ckpt, (unsigned long long)t->st.tok_hash,
                           (unsigned long long)t->ds.tok_hash);
        snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", ckpt);
        const uint64_t data_hash = st_dataset_hash(&t->ds);
        if (t->st.data_hash && t->st.data_hash != data_hash)
            st_log(ST_LOG_WARN, "%s: the training data changed since this checkpoint (its tokens differ; the "
                   "tokenizer is the same): the run continues on the new data, and the loss trace will differ "
                   "from an uninterrupted run's", ckpt);
        t->st.data_hash = data_hash;   /* later checkpoints record the data they saw */
        rc = st_rundir_trim_metrics(t->dir, t->st.step, e);
        st_rundir_clean_temps(t->dir);   /* checkpoint-sized leftovers of killed writers */
    } else {
        /* the other ranks receive rank 0's initialisation (st_train_dist_share_state) */
        char pinned[ST_PATH_BUF] = "";
        if (tc->init_from[0] && t->rank == 0 && t->restart) rc = st_init_from_pinned(t->dir, &t->cfg, pinned, sizeof pinned, e);
        if (!rc && tc->init_from[0] && t->rank == 0)
            rc = st_init_from_load(&t->cfg, &t->model, t->opts.quiet, pinned, &t->origin, e);
        if (!rc && t->restart) {   /* the records and temp files of the attempt that died */
            rc = st_rundir_trim_metrics(t->dir, -1, e);
            st_rundir_clean_temps(t->dir);
        }
        memset(&t->st, 0, sizeof t->st);
        st_rng_seed(&t->st.rng, tc->seed ^ SEED_DROPOUT);
        t->st.best_val = INFINITY;
        t->st.best_step = -1;
        t->st.last_val = NAN;
        t->st.tok_hash = t->ds.tok_hash;
        t->st.data_hash = st_dataset_hash(&t->ds);
    }
    /* checks only rank 0 can make (it alone read the checkpoint), agreed by all */
    const int64_t ws = t->st.world_size ? t->st.world_size : 1;
    char cont[2 * ST_PATH_BUF + 64];
    if (!rc && t->opts.resume && t->rank == 0 && ws != t->ranks)
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: written by a run of %lld rank(s), this run has %d: resume with %s "
                     "(batches and dropout streams are cut per rank, so another count would not continue the same "
                     "run)", ckpt, (long long)ws, t->ranks, st_trainer_resume_command(t->dir, ws, cont, sizeof cont));
    t->st.world_size = t->ranks;
    return rc;
}

/* --force replaces the run in t->dir: train.init_from must not lie in it (extend RUN --out
 * RUN --force would delete the weights it is about to start from, and the base run). */
static int init_from_outside(const trainer *t, st_error *e) {
    const char *from = t->cfg.train.init_from;
    char rd[PATH_MAX], rf[PATH_MAX];
    if (!from[0] || !realpath(t->dir, rd) || !realpath(from, rf)) return ST_OK;   /* nothing to lose */
    const size_t n = strlen(rd);
    if (strncmp(rf, rd, n) != 0 || (rf[n] != 0 && rf[n] != '/' && strcmp(rd, "/") != 0)) return ST_OK;
    return st_fail(e, ST_ERR_CONFIG, "%s: train.init_from %s lies in %s, the run directory --force would replace: "
                   "the weights to start from would be deleted first (choose another --out)", t->cfg.file, from,
                   t->dir);
}

/* Rank 0: the run directory (fresh: prepared; resume: its config and checkpoint checked).
 * The other ranks take their own config if they have one (compared with rank 0's later). */
static int setup_rundir(trainer *t, const st_run_config *cfg_in, char *ckpt, size_t ckpt_n, st_error *e) {
    char path[ST_PATH_BUF];
    int rc;
    const int resume = t->opts.resume;
    st_run_config ck_cfg;
    if (resume) {
        st_trainer_join(path, sizeof path, t->dir, "config.json");
        /* a run directory is one with config.json (rank 0 alone runs this) */
        if (access(path, F_OK) != 0)
            return st_fail(e, ST_ERR_IO, "%s: not a run directory (no config.json to resume from)", t->dir);
        /* an export's config.json would pass for a run stopped before its first checkpoint,
         * and the "resume" would train a new run into the export */
        if (st_rundir_is_export(t->dir))
            return st_fail(e, ST_ERR_IO, "%s: an export (model.safetensors, no checkpoints/), not a run: nothing to "
                           "resume (a run starting from its weights: train.init_from=%s/model.safetensors)", t->dir, t->dir);
        if (cfg_in) t->cfg = *cfg_in;
        else if ((rc = st_run_config_load(path, NULL, 0, &t->cfg, e))) return rc;
        if ((rc = st_dir_lock(t->dir, "a run is writing it", &t->lock_fd, e))) return rc;
        if (!st_rundir_has_checkpoint(t->dir)) {
            /* stopped (a signal, a full disk) before its first checkpoint: the run starts
             * over from step 0 in its own directory, which is the run it would have been */
            st_log(ST_LOG_INFO, "%s: no checkpoint yet; training from step 0", t->dir);
            t->opts.resume = 0;
            t->restart = 1;
            return ST_OK;
        }
        if ((rc = st_checkpoint_resolve(t->dir, ckpt, ckpt_n, e))) return rc;
        st_train_state ck_st;
        if ((rc = st_checkpoint_load(ckpt, &ck_cfg, NULL, 0, &ck_st, e))) return rc;
        /* a run cannot be shortened: config.json would then claim fewer steps than the
         * checkpoints hold (it is rewritten below with the resumed config) */
        if (t->cfg.train.steps < ck_st.step)
            return st_fail(e, ST_ERR_CONFIG, "%s: resuming with train.steps %lld, below the step the run reached "
                           "(%lld, %s): a resume can only keep or raise train.steps (evaluate the checkpoint "
                           "instead)", t->dir, (long long)t->cfg.train.steps, (long long)ck_st.step, ckpt);
        /* init_from chose the starting weights; the checkpoint holds later ones. Taken
         * silently it would also go into config.json, which then no longer repeats the run */
        if (strcmp(ck_cfg.train.init_from, t->cfg.train.init_from) != 0)
            return st_fail(e, ST_ERR_CONFIG, "%s: train.init_from applies to a fresh run only (a resume continues "
                           "from %s); it was \"%s\", now \"%s\"", t->dir, ckpt, ck_cfg.train.init_from,
                           t->cfg.train.init_from);
        char diff[1200];
        if (st_run_config_diff(&ck_cfg, &t->cfg, "model", diff, sizeof diff) ||
            st_run_config_diff(&ck_cfg, &t->cfg, "data", diff, sizeof diff))
            return st_fail(e, ST_ERR_CHECKPOINT, "%s: checkpoint does not match the run config (%s): %s "
                           "(checkpoint vs config)", ckpt, t->cfg.file, diff);
        /* keys that do not change the training trace may differ freely */
        st_train_config *k = &ck_cfg.train;
        const st_train_config *n = &t->cfg.train;
        k->max_seconds = n->max_seconds; k->log_every = n->log_every; k->eval_every = n->eval_every;
        k->eval_batches = n->eval_batches; k->checkpoint_every = n->checkpoint_every; k->keep_last = n->keep_last;
        /* said, with the thread count's and backend's changes, once those are known
         * (note_resume_changes) */
        st_run_config_diff(&ck_cfg, &t->cfg, "train", t->resume_changes, sizeof t->resume_changes);
    } else {
        if (!cfg_in) return st_fail(e, ST_ERR_CONFIG, "st_train: no config");
        t->cfg = *cfg_in;
        /* probe 28's first sweep: a sinusoidal baseline that did not learn at the default
         * embed_scale 1 (kept so the shipped results stay reproducible): say so */
        const st_model_config *mc = &t->cfg.model;
        const char *note = st_pos_unscaled_note(mc->pos);
        if (t->rank == 0 && note && mc->embed_scale == 1.0f)
            st_log(ST_LOG_WARN, "%s: model.pos \"%s\" with model.embed_scale 1 (init_std %g): %s", t->cfg.file,
                   st_pos_name(mc->pos), (double)mc->init_std, note);
        char unread[512];
        if (t->rank == 0 && st_run_config_unread(&t->cfg, unread, sizeof unread))
            st_log(ST_LOG_WARN, "%s: not read by this position method, optimizer, schedule and Abacus setting, "
                   "so without effect: %s",
                   t->cfg.file, unread);
        /* refuse an occupied dir now; with --force the old run is replaced only at the end
         * of setup, once data, model and memory have all been checked */
        if ((rc = st_rundir_check(t->dir, t->opts.force, t->opts.occupied_advice, e))) return rc;
        if (t->opts.force && (rc = init_from_outside(t, e))) return rc;
    }
    return ST_OK;
}

/* Every rank: dataset, model and optimizer (rank 0's config). */
static int setup_model(trainer *t, st_error *e) {
    st_run_config *c = &t->cfg;
    st_train_config *tc = &c->train;
    int rc;
    t->threads = st_set_threads(tc->threads);
    if (!t->opts.quiet) st_blas_log();

    c->data.quiet = t->opts.quiet;   /* --quiet, and every rank but the first */
    if ((rc = st_dataset_load(&c->data, c->file, &t->ds, e))) return rc;
    t->have_ds = 1;
    if (c->model.vocab_size == 0) c->model.vocab_size = t->ds.vocab_size;
    else if (c->model.vocab_size != t->ds.vocab_size && t->opts.resume)
        /* the saved config is the run's own: the corpus changed under it (a data error) */
        return st_fail(e, ST_ERR_DATA, "%s: the data's vocabulary has %d symbols but this run was trained with "
                       "model.vocab_size %d: the corpus or tokenizer changed since the checkpoint",
                       c->data.path[0] ? c->data.path : c->file, t->ds.vocab_size, c->model.vocab_size);
    else if (c->model.vocab_size != t->ds.vocab_size)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.vocab_size: %d does not match the dataset's vocabulary (%d); "
                       "omit it to use the dataset's", c->file, c->model.vocab_size, t->ds.vocab_size);
    if (c->model.abacus_rows > 0 && c->model.abacus_digit0 < 0 &&   /* Abacus: the data's digits */
        (c->model.abacus_digit0 = st_dataset_digit0(&t->ds)) < 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.abacus.digit0: the %s tokenizer does not give the digits 0-9 as "
                       "ten single tokens with consecutive ids (Abacus places digits); set the id of \"0\" or use a "
                       "byte, BPE or task vocabulary", c->file, st_data_tokenizer_name(&c->data));
    /* A window is seq_len + 1 consecutive tokens (inputs and their next-token targets) and
     * starts anywhere in [0, n - seq_len); seq_len + 2 tokens give at least two starts. */
    if (t->ds.n[ST_SPLIT_TRAIN] < (int64_t)tc->seq_len + 2)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.seq_len: the train split needs at least train.seq_len + 2 = %lld "
                       "tokens (a window is train.seq_len + 1 tokens, and at least two window positions), but has "
                       "%lld; lower train.seq_len or use more data", c->file, (long long)tc->seq_len + 2,
                       (long long)t->ds.n[ST_SPLIT_TRAIN]);
    if (tc->eval_batches > 0 && t->ds.n[ST_SPLIT_VALID] < (int64_t)tc->seq_len + 2)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.eval_batches: the valid split needs at least train.seq_len + 2 = "
                       "%lld tokens for validation windows, but has %lld; set train.eval_batches to 0 or lower "
                       "train.seq_len", c->file, (long long)tc->seq_len + 2, (long long)t->ds.n[ST_SPLIT_VALID]);
    if (!t->opts.quiet)
        st_log(ST_LOG_INFO, "data: %lld / %lld / %lld tokens (train/valid/test), vocabulary %d",
               (long long)t->ds.n[0], (long long)t->ds.n[1], (long long)t->ds.n[2], t->ds.vocab_size);

    if ((rc = st_model_init(&t->model, &c->model, tc->seed, e))) return rc;
    t->have_model = 1;
    if ((rc = st_optim_init(&t->opt, &tc->optim, &t->model.params, e))) return rc;
    t->have_opt = 1;
    return ST_OK;
}

/* Every rank: loader, batch buffers, step arena; rank 0 writes config.json (and the
 * tokenizer) last, once everything above worked: a run dir holding config.json is a run. */
static int setup_buffers(trainer *t, st_error *e) {
    st_run_config *c = &t->cfg;
    st_train_config *tc = &c->train;
    char path[ST_PATH_BUF];
    int rc;
    if ((rc = st_train_loader_init(c, &t->ds, &t->loader, e))) return rc;
    t->loader.draws = t->st.loader_draws;
    if (c->data.pk_rate > 0) {   /* passkeys in a fraction of the training windows */
        if ((rc = st_passkey_init(&t->pk, t->ds.tok, c->data.pk_digits, e))) return rc;
        const int64_t need = st_passkey_overhead(&t->pk);
        if (need > (int64_t)tc->seq_len + 1)
            return st_fail(e, ST_ERR_CONFIG, "%s: data.passkey.rate: an instance needs %lld tokens in this tokenizer "
                           "(needle, query, %d-digit answer); train.seq_len + 1 is %d", c->file, (long long)need,
                           t->pk.digits, tc->seq_len + 1);
        t->loader.pk = &t->pk;
        t->loader.pk_rate = c->data.pk_rate;
    }

    /* the step estimate refuses a batch that cannot fit before anything batch-sized exists */
    size_t step_bytes = st_model_step_bytes(&t->model, tc->batch_size, tc->seq_len, 1, e);
    if (!step_bytes) return e && e->code ? e->code : st_fail(e, ST_ERR_MEMORY, "cannot size the training step");
    size_t bt = (size_t)tc->batch_size * (size_t)tc->seq_len;
    t->x = st_malloc(bt * sizeof(int32_t), e);
    t->y = t->x ? st_malloc(bt * sizeof(int32_t), e) : NULL;
    t->val_losses = t->y ? st_calloc((size_t)tc->eval_batches + 1, sizeof *t->val_losses, e) : NULL;
    if (!t->val_losses) return ST_ERR_MEMORY;
    if (tc->random_positions > 0 && !(t->positions = st_malloc((size_t)tc->seq_len * sizeof(int64_t), e)))
        return ST_ERR_MEMORY;
    if (c->data.task_doc_mask) {   /* the loader writes it with every batch, the model reads it */
        if (!(t->doc = st_malloc(bt * sizeof(int32_t), e))) return ST_ERR_MEMORY;
        t->loader.doc = t->doc;
        t->model.doc = t->doc;
    }
    size_t cap = step_bytes + step_bytes / 16 + ((size_t)1 << 20);
    size_t limit = cap * 4, mem = st_mem_total();
    if (mem && limit > mem / 10 * 9) limit = mem / 10 * 9;
    if (limit < cap) limit = cap;
    if ((rc = st_arena_init(&t->arena, cap, limit, e))) return rc;
    t->have_arena = 1;
    if ((rc = st_ctx_init(&t->ctx, &t->arena, 256 * (c->model.n_layers + 4), e))) return rc;
    t->have_ctx = 1;
    /* precision: the backend and, for bf16, the weights' shadow (after any load above) */
    if ((rc = st_mm_create_for(&t->mm, tc->precision, t->opts.quiet, &t->model.params, e))) return rc;
    t->ctx.mm = t->mm;
    if (!t->opts.quiet) {
        char blk[160];
        st_block_label(&c->model, blk, sizeof blk);
        st_log(ST_LOG_INFO, "model: %s%s, %d layers, d_model %d, %d heads%s: %zu parameters; arena %.1f MiB "
               "for (B=%d, T=%d)%s", st_pos_name(c->model.pos), c->model.abacus_rows ? "+abacus" : "",
               c->model.n_layers, c->model.d_model,
               c->model.n_heads, blk, st_model_num_params(&t->model), (double)cap / 1048576.0, tc->batch_size,
               tc->seq_len, t->ranks > 1 ? " per rank" : "");
    }
    if (t->ranks > 1 && !t->opts.quiet)
        st_log(ST_LOG_INFO, "data parallel: %d ranks (%s transport), global batch %d x %d x %d = %lld sequences "
               "per update", t->ranks, t->dist->ops->name, tc->batch_size, tc->grad_accum, t->ranks,
               (long long)tc->batch_size * tc->grad_accum * t->ranks);

    if (t->rank == 0) {
        /* Only now does --force remove the previous run (st_rundir_prepare). */
        if (!t->opts.resume && !t->restart &&
            (rc = st_rundir_prepare(t->dir, t->opts.force, t->opts.occupied_advice, &t->lock_fd, e)))
            return rc;
        if (t->restart) {   /* a run dir without checkpoints/ (deleted, or only a config.json) */
            st_trainer_join(path, sizeof path, t->dir, "checkpoints");
            if ((rc = st_mkdirs(path, e))) return rc;
        }
        /* init_from.json before config.json: a directory with config.json is a run a
         * --resume restarts, and the restart must find which weights the start took */
        if (!t->opts.resume && t->origin) {
            st_trainer_join(path, sizeof path, t->dir, "init_from.json");
            if ((rc = st_write_file_atomic(path, t->origin, strlen(t->origin), e))) return rc;
        }
        st_trainer_join(path, sizeof path, t->dir, "config.json");
        if ((rc = st_run_config_save(c, path, e))) return rc;
        if (!t->opts.resume && t->ds.tok) {
            st_trainer_join(path, sizeof path, t->dir, "tokenizer.json");
            if ((rc = st_tokenizer_save(t->ds.tok, path, e))) return rc;
        }
    }
    return ST_OK;
}

const char *st_trainer_resume_command(const char *dir, int64_t ranks, char *buf, size_t n) {
    char word[2 * ST_PATH_BUF];   /* one shell word: "a b/it's" pastes as 'a b/it'\''s' */
    st_shell_word(dir, word, sizeof word);
    if (ranks > 1) snprintf(buf, n, "mpirun -np %lld stretch train --resume %s", (long long)ranks, word);
    else snprintf(buf, n, "stretch train --resume %s", word);
    return buf;
}

/* The products' backend as a checkpoint records it: st_mm_describe, naming the OpenBLAS
 * core even where the products run elsewhere (bf16 on oneDNN), since attention and the
 * other sgemm calls still run on it. */
static void compute_label(const trainer *t, char *buf, size_t n) {
    const char *d = st_mm_describe(t->mm);
    st_blas_info bi;
    st_blas_query(&bi);
    if (strstr(d, "OpenBLAS ")) snprintf(buf, n, "%s", d);
    else snprintf(buf, n, "%s, OpenBLAS %s", d, bi.corename);
}

/* Every rank, once the backend exists: the state records this session's thread count and
 * backend, which the step's bits depend on beyond the config. Rank 0, resuming: the
 * changes since the checkpoint, the train keys' (setup_rundir) and these, are said in one
 * warning and recorded in metrics.jsonl (st_progress_resume): config.json holds only the
 * new values and the warning scrolls away. A probe resumed a train.threads 0 run under
 * `taskset -c 0`, and under another OPENBLAS_CORETYPE: other grad norms, no word. Files
 * of older builds recorded neither (0, ""): nothing to compare. */
static void note_resume_changes(trainer *t) {
    char now[sizeof t->st.compute];
    compute_label(t, now, sizeof now);
    char *c = t->resume_changes;
    const size_t cap = sizeof t->resume_changes;
    size_t len = strlen(c);
    if (t->opts.resume && t->rank == 0 && t->st.threads && t->st.threads != t->threads && len < cap)
        len += (size_t)snprintf(c + len, cap - len, "%sthreads in use: %lld vs %d", len ? ", " : "",
                                (long long)t->st.threads, t->threads);
    /* another precision is a train key said above; the backends then differ anyway */
    const size_t word = strcspn(now, " ") + 1;
    if (t->opts.resume && t->rank == 0 && t->st.compute[0] && strcmp(t->st.compute, now) != 0 &&
        strncmp(t->st.compute, now, word) == 0 && len < cap)
        len += (size_t)snprintf(c + len, cap - len, "%scompute: %s vs %s", len ? ", " : "", t->st.compute, now);
    if (t->opts.resume && t->rank == 0 && c[0])
        st_log(ST_LOG_WARN, "resuming with changes since the checkpoint (%s; checkpoint vs now): the loss trace "
               "will not be bit-identical to an uninterrupted run's", c);
    t->st.threads = t->threads;
    snprintf(t->st.compute, sizeof t->st.compute, "%s", now);
}

/* Rank 0, resuming, once the checkpoint's tokenizer hash was found to be the dataset's:
 * eval and generate read RUN_DIR/tokenizer.json, so a missing, damaged or foreign one
 * is put back. */
static int restore_tokenizer(trainer *t, st_error *e) {
    char path[ST_PATH_BUF];
    st_trainer_join(path, sizeof path, t->dir, "tokenizer.json");
    st_error te = {0};
    st_tokenizer *had = st_tokenizer_load_expect(path, t->ds.tok_hash, t->ds.vocab_size, &te);
    if (had) {
        st_tokenizer_free(had);
        return ST_OK;
    }
    st_log(ST_LOG_WARN, "%s; writing the run's tokenizer again", te.msg);   /* missing, damaged or another's */
    return st_tokenizer_save(t->ds.tok, path, e);
}

/* The flags that shape the collective work must be rank 0's on every rank: a --stop-after
 * or --zero given to one rank of an MPMD launch (mpirun -np 1 ... : -np 1 ...) left the
 * other waiting in a collective for ever. */
static int same_flags(trainer *t, st_error *e) {
    if (t->ranks == 1) return ST_OK;
    const int64_t mine[3] = {t->opts.resume, t->opts.stop_after, t->opts.zero};
    int64_t root[3];
    memcpy(root, mine, sizeof root);
    const int rc = st_dist_bcast(t->dist, root, sizeof root, 0);
    if (rc) return st_fail(e, rc, "rank %d: cannot receive rank 0's flags", t->rank);
    static const char *const names[3] = {"--resume", "--stop-after", "--zero"};
    for (int i = 0; i < 3; i++)
        if (root[i] != mine[i])
            return st_fail(e, ST_ERR_CONFIG, "rank %d: %s differs from rank 0's (%lld on rank 0, %lld here): every "
                           "rank must get the same command line", t->rank, names[i], (long long)root[i],
                           (long long)mine[i]);
    return ST_OK;
}

int st_trainer_setup(trainer *t, const st_run_config *cfg_in, st_error *e) {
    char ckpt[ST_PATH_BUF] = "";
    int rc = same_flags(t, e);
    if ((rc = st_dist_agree(t->dist, rc, e))) return rc;
    rc = t->rank == 0 ? setup_rundir(t, cfg_in, ckpt, sizeof ckpt, e) : ST_OK;
    if (t->rank > 0) {
        if (cfg_in) t->cfg = *cfg_in;
        else memset(&t->cfg, 0, sizeof t->cfg);
    }
    if ((rc = st_dist_agree(t->dist, rc, e))) return rc;
    /* rank 0 alone looked for a checkpoint: a restart from step 0 is every rank's (a
     * resume of train.steps 0 then writes its initial checkpoint on all of them) */
    int32_t restart = t->restart;
    if ((rc = st_dist_bcast(t->dist, &restart, sizeof restart, 0)))
        return st_fail(e, rc, "rank %d: cannot receive from rank 0 whether the run restarts", t->rank);
    if (restart) { t->restart = 1; t->opts.resume = 0; }
    rc = st_train_dist_share_config(t->dist, &t->cfg, cfg_in, e);
    if ((rc = st_dist_agree(t->dist, rc, e))) return rc;
    rc = setup_model(t, e);
    if (!rc) rc = setup_state(t, ckpt, e);
    if (!rc && t->opts.resume && t->rank == 0 && t->ds.tok) rc = restore_tokenizer(t, e);
    if ((rc = st_dist_agree(t->dist, rc, e))) return rc;
    if ((rc = st_train_dist_share_state(t->dist, &t->model.params, &t->st, &t->ds, e))) return rc;
    if (t->opts.zero && t->ranks > 1) {
        rc = st_zero_init(&t->zero, t->dist, &t->opt, &t->model.params, e);
        if (!rc && !t->opts.quiet)
            st_log(ST_LOG_INFO, "ZeRO-1: optimizer moments sharded, %.1f MiB on this rank instead of %.1f MiB",
                   (double)(t->zero.hi - t->zero.lo) * 8.0 / 1048576.0, (double)t->model.params.n * 8.0 / 1048576.0);
    } else if (t->opts.zero) {   /* allowed (one launch line for 1..N ranks), but it saves nothing */
        st_log(ST_LOG_WARN, "--zero: one rank (not under mpirun -np N with N > 1), so the optimizer moments are "
               "not sharded and the run is an ordinary one");
    }
    if (!rc) rc = setup_buffers(t, e);
    if (!rc) note_resume_changes(t);
    return st_dist_agree(t->dist, rc, e);
}

