/* trainer.c - the training loop behind `stretch train` (what runs before the first step:
 * trainer_setup.c).
 *
 *   config -> dataset -> model (+ init_from | checkpoint) -> per step:
 *     zero grads; grad_accum x [next window batch -> loss -> backward(seed: its share of
 *     the update's targets, 1/grad_accum for text)]
 *     -> global grad norm (non-finite: error or skip) -> clip -> AdamW/SGD at lr(step)
 *     -> log / metrics -> validation (every eval_every) -> checkpoint (every
 *        checkpoint_every, at the end, on SIGINT/SIGTERM/SIGHUP/SIGPIPE, time limit or
 *        stop_after)
 *
 * Determinism: every random choice is a function of saved state: batch windows of the
 * loader position (draws), dropout seeds of a checkpointed xoshiro stream, validation
 * windows of a fixed seed. Reductions are fixed-order. So with a fixed thread count the
 * same config gives the same loss sequence bit for bit, and a resumed run continues the
 * trace of an uninterrupted one exactly.
 * Memory: one arena + ctx for the whole run, reset per micro-step, sized by a measured
 * dry run (st_model_step_bytes): steady-state steps allocate nothing.
 * Data parallel (opts.dist with N > 1 ranks, trainer_dist.c): each rank runs its share of
 * the micro-batches, gradients are summed in rank order, rank 0 alone writes the run dir;
 * every exit from the loop is agreed by all ranks, so none is left waiting.
 * Not here: long-context evaluation (src/eval), the checkpoint format (checkpoint.c). */
#define _GNU_SOURCE
#include "trainer_internal.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* The mutable globals: a signal handler can only talk through them. g_stop_signal holds
 * the number of the first SIGINT/SIGTERM/SIGHUP/SIGPIPE; the loop finishes its step,
 * saves and returns. g_pipe_closed: a SIGPIPE came (the reader of our output went away). */
static volatile sig_atomic_t g_stop_signal, g_pipe_closed;

static void on_signal(int sig) {
    /* SIGPIPE: every later write to the closed pipe raises it again, which must neither
     * end the clean stop it asked for nor count as the user's second signal */
    if (sig == SIGPIPE) g_pipe_closed = 1;
    if (g_stop_signal && sig != SIGPIPE) {   /* second signal: give up on the clean stop */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    if (!g_stop_signal) g_stop_signal = sig;
}

static const char *signal_label(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP (hangup: a closed terminal or ssh session)"
         : sig == SIGPIPE ? "SIGPIPE (the reader of the output went away)" : "SIGINT";
}

/* The signals that stop a training cleanly (the step finishes, a checkpoint is saved,
 * exit 130). SIGHUP stays ignored when it was (nohup asked for that); SIGPIPE is caught
 * from the start of st_train, since setup logs too (`train ... 2>&1 | head -n 5`). */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
enum { N_STOP_SIGNALS = (int)(sizeof stop_signals / sizeof stop_signals[0]) };

static void catch_signal(int sig, struct sigaction *old) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;   /* let interrupted reads/writes continue; the loop polls the flag */
    sigemptyset(&sa.sa_mask);
    sigaction(sig, NULL, old);
    if (sig != SIGHUP || old->sa_handler != SIG_IGN) sigaction(sig, &sa, NULL);
}



static void trainer_free(trainer *t) {
    if (t->have_pg) st_progress_close(&t->pg);
    if (t->lock_fd >= 0) close(t->lock_fd);   /* last: the run's files are all written */
    if (t->have_ctx) st_ctx_free(&t->ctx);
    st_mm_free(t->mm);
    if (t->have_arena) st_arena_free(&t->arena);
    if (t->have_opt) st_optim_free(&t->opt);
    if (t->have_model) st_model_free(&t->model);
    if (t->have_ds) st_dataset_free(&t->ds);
    free(t->x);
    free(t->y);
    free(t->positions);
    free(t->doc);
    free(t->val_losses);
    free(t->origin);
    st_zero_free(&t->zero);
}


/* A failed forward: the model's own message, else the arena/tape report. */
static int forward_failed(trainer *t, st_error *e) {
    if (e && e->code) return e->code;
    int rc = st_ctx_check(&t->ctx, e);
    return rc ? rc : st_fail(e, ST_ERR_GENERIC, "model forward returned no loss");
}

/* The targets a batch takes its loss on (a task's prompt and padding targets are -1). */
static int64_t kept_targets(const int32_t *y, int64_t n) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += y[i] >= 0;
    return c;
}

/* The mean over a task run's validation batches weighs batch b by its kept targets, so
 * it is the loss over all of them, as a training update's is (train_step). Every rank
 * counts every batch (the rows are functions of the draw count). Text: the plain mean. */
static double validation_mean(trainer *t, st_loader *vl) {
    const st_train_config *tc = &t->cfg.train;
    double sum = 0, total = 0;
    for (int b = 0; b < tc->eval_batches; b++) {
        double w = 1;
        if (vl->task) {
            vl->draws = (uint64_t)b * (uint64_t)tc->batch_size;
            st_loader_next(vl, tc->batch_size, tc->seq_len, t->x, t->y);
            w = (double)kept_targets(t->y, (int64_t)tc->batch_size * tc->seq_len);
        }
        sum += t->val_losses[b] * w;   /* text: w = 1, the plain sum (x 1 is exact) */
        total += w;
    }
    return total > 0 ? sum / total : 0.0;
}

/* Mean loss over eval_batches fixed windows of the valid split at (B, T), no grad.
 * Batch b (windows b*B .. b*B + B - 1) runs on rank b mod N; the mean adds the batch
 * losses in batch order whatever N is. */
static int validate(trainer *t, double *out, st_error *e) {
    const st_train_config *tc = &t->cfg.train;
    st_loader vl;
    st_loader_init(&vl, t->ds.tokens[ST_SPLIT_VALID], t->ds.n[ST_SPLIT_VALID], tc->seed ^ SEED_VALID);
    vl.task = t->ds.task;   /* a task run validates on fresh instances, loss as in training */
    vl.doc = t->doc;        /* and with the same per-instance mask */
    int rc = ST_OK;
    for (int b = 0; b < tc->eval_batches; b++) {
        t->val_losses[b] = 0;
        if (rc || b % t->ranks != t->rank) continue;
        vl.draws = (uint64_t)b * (uint64_t)tc->batch_size;
        st_loader_next(&vl, tc->batch_size, tc->seq_len, t->x, t->y);
        st_ctx_begin(&t->ctx, 0, 0);
        st_tensor *loss = st_model_loss(&t->model, &t->ctx, t->x, t->y, tc->batch_size, tc->seq_len, 0, NULL, e);
        if (!loss) rc = forward_failed(t, e);
        else t->val_losses[b] = loss->data[0];
    }
    if ((rc = st_train_dist_validate(t->dist, t->val_losses, tc->eval_batches, rc, e))) return rc;
    *out = validation_mean(t, &vl);
    return ST_OK;
}

/* Never write non-finite parameters over a good checkpoint. */
static int save_checkpoint(trainer *t, const char *name, st_error *e) {
    if (t->rank > 0) return ST_OK;   /* rank 0 owns the run directory */
    if (!st_params_finite(&t->model.params))
        return st_fail(e, ST_ERR_NUMERIC, "step %lld: parameters are not finite; not saving a checkpoint "
                       "(last good checkpoint: %s)", (long long)t->st.step, t->last_ckpt[0] ? t->last_ckpt : "none");
    t->st.elapsed = st_progress_elapsed(&t->pg);
    if (name) {
        char path[ST_PATH_BUF];
        st_rundir_path(t->dir, name, path, sizeof path);
        return st_checkpoint_save(path, &t->cfg, &t->model.params, &t->st, e);
    }
    return st_rundir_save_step(t->dir, &t->cfg, &t->model.params, &t->st, t->cfg.train.keep_last,
                               t->last_ckpt, sizeof t->last_ckpt, e);
}

/* Rank 0: best.ckpt is the current state, a hard link to the step checkpoint just written
 * (step_saved) when the file system allows, else a file of its own. */
static int save_best(trainer *t, int step_saved, st_error *e) {
    if (t->rank > 0) return ST_OK;
    st_error le = {0};
    if (step_saved && !st_rundir_link_best(t->dir, t->last_ckpt, &le)) return ST_OK;
    return save_checkpoint(t, "best.ckpt", e);
}

/* N, the total weight of the update's micro-batches. A micro-batch's loss is the mean
 * over its kept targets, so the update's loss, the mean over all of them (what one batch
 * of B x micro rows would take), weighs micro-batch j by its count: n_j / N.
 * Text windows keep every target: each weighs 1 / micro, as before the counts existed
 * (same bits). Task rows keep only answer tokens, as many as the instances give: every
 * rank counts all `micro` global micro-batches (the loader is a pure function of draws),
 * so the ranks agree on N without a message. */
static int64_t update_targets(trainer *t, uint64_t base, int64_t micro, int64_t B, int64_t T) {
    if (!t->loader.task) return micro;
    int64_t total = 0;
    for (int64_t j = 0; j < micro; j++) {
        t->loader.draws = base + (uint64_t)(j * B);
        st_loader_next(&t->loader, B, T, t->x, t->y);
        total += kept_targets(t->y, B * T);
    }
    t->loader.draws = base;
    return total;
}

/* One optimizer update: grad_accum micro-batches on each of the N ranks. *loss_out: the
 * mean over the update's kept targets (text: the mean micro-batch loss). This rank's k-th
 * micro-batch is the update's global micro-batch j = k N + rank: loader windows
 * base + j B .. and the j-th of the update's N grad_accum dropout seeds (with N = 1: the
 * plain sequence). */
static int train_step(trainer *t, double lr, double *loss_out, double *gnorm_out, st_error *e) {
    const st_train_config *tc = &t->cfg.train;
    const int64_t B = tc->batch_size, T = tc->seq_len, micro = (int64_t)tc->grad_accum * t->ranks;
    const uint64_t base = t->loader.draws;
    const int64_t total = update_targets(t, base, micro, B, T);
    st_params_zero_grad(&t->model.params);
    double loss_sum = 0;
    int finite = 1, rc = ST_OK;
    for (int k = 0; k < tc->grad_accum && !rc; k++) {
        const int64_t j = (int64_t)k * t->ranks + t->rank;
        t->loader.draws = base + (uint64_t)(j * B);
        /* randomized positions: a function of the micro-batch's first window index, so a
         * resume (which restores draws) and any rank count draw the same ones */
        if (tc->random_positions > 0) {
            st_positions_sample(st_hash64(tc->seed ^ SEED_POSITIONS, t->loader.draws), tc->random_positions, T,
                                t->positions);
            t->model.positions = t->positions;
        }
        /* Abacus offset k in {0..max_k}: the same function of the micro-batch */
        if (tc->abacus_max_k > 0)
            t->model.abacus_k = (int64_t)(st_hash64(tc->seed ^ SEED_ABACUS, t->loader.draws) %
                                          (uint64_t)(tc->abacus_max_k + 1));
        st_loader_next(&t->loader, B, T, t->x, t->y);
        st_ctx_begin(&t->ctx, 1, 1);
        uint64_t dropout_seed = 0;
        for (int q = 0; q < t->ranks; q++) {
            uint64_t sd = st_rng_u64(&t->st.rng);
            if (q == t->rank) dropout_seed = sd;
        }
        st_tensor *loss = st_model_loss(&t->model, &t->ctx, t->x, t->y, B, T, dropout_seed, NULL, e);
        if (!loss) { rc = forward_failed(t, e); break; }
        float lv = loss->data[0];
        finite &= isfinite(lv) != 0;
        /* d(mean over the update's targets)/d(loss_j) = n_j / N (text: 1/(grad_accum N)) */
        const int64_t nj = t->loader.task ? kept_targets(t->y, B * T) : 1;
        loss_sum += (double)lv * (double)nj;
        const float seed = !t->loader.task ? 1.0f / (float)micro
                           : total > 0 ? (float)((double)nj / (double)total) : 0.0f;
        rc = st_backward(&t->ctx, loss, seed, e);
        t->model.positions = NULL;   /* validation and evaluation: natural positions, k = 0 */
        t->model.abacus_k = 0;
    }
    t->model.positions = NULL;
    t->model.abacus_k = 0;
    if ((rc = st_dist_agree(t->dist, rc, e))) return rc;
    if ((rc = st_train_dist_reduce(t->dist, &t->model.params, &loss_sum, &finite, e))) return rc;
    t->loader.draws = base + (uint64_t)(micro * B);
    t->st.loader_draws = t->loader.draws;
    t->st.step++;
    t->st.tokens += B * T * micro;
    *loss_out = total > 0 ? loss_sum / (double)total : 0.0;
    double gnorm = st_grad_norm(&t->opt, &t->model.params);
    *gnorm_out = gnorm;
    if (!finite || !isfinite(gnorm)) {
        const char *what = !finite ? "loss" : "gradient norm";
        double val = !finite ? *loss_out : gnorm;
        if (tc->nonfinite == ST_NONFINITE_ERROR) {
            if (t->dist) t->dist->agreed = 1;   /* the summed gradient: every rank sees it */
            return st_fail(e, ST_ERR_NUMERIC, "step %lld: non-finite %s (%g); stopping without saving "
                           "(last good checkpoint: %s). Lower train.optimizer.lr, set train.clip_norm, or "
                           "set train.nonfinite=\"skip\"", (long long)t->st.step, what, val,
                           t->last_ckpt[0] ? t->last_ckpt : "none");
        }
        t->st.skipped++;
        st_progress_note(&t->pg, ST_LOG_WARN, "step %lld: non-finite %s (%g): update skipped (%lld so far)",
                         (long long)t->st.step, what, val, (long long)t->st.skipped);
        /* a skipped update leaves the weights as they were: when they are what overflows
         * (finite but huge after a bad update), every later step is skipped too and the
         * run would spend its steps doing nothing, then exit 0 */
        if (tc->nonfinite_limit > 0 && ++t->skips_in_row >= tc->nonfinite_limit) {
            if (t->dist) t->dist->agreed = 1;   /* the same decision on every rank */
            return st_fail(e, ST_ERR_NUMERIC, "step %lld: %lld updates in a row skipped (train.nonfinite_limit %d): "
                           "the weights do not recover; stopping without saving (last good checkpoint: %s). Lower "
                           "train.optimizer.lr or set train.clip_norm", (long long)t->st.step,
                           (long long)t->skips_in_row, tc->nonfinite_limit, t->last_ckpt[0] ? t->last_ckpt : "none");
        }
        return ST_OK;
    }
    t->skips_in_row = 0;
    const float clip = st_clip_factor(gnorm, tc->clip_norm);   /* applied by the update itself */
    t->st.opt_t++;
    /* bf16: the weights' shadow is rewritten once per update, by the optimizer itself
     * (each item rounded while in cache) or, under ZeRO, after the gather */
    if (!t->zero.on) {
        st_optim_step(&t->opt, &t->model.params, (float)lr, t->st.opt_t, clip);
    } else {
        if (st_zero_step(&t->zero, t->dist, &t->opt, &t->model.params, (float)lr, t->st.opt_t, clip))
            return st_fail(e, ST_ERR_GENERIC, "step %lld: gathering the updated parameters failed",
                           (long long)t->st.step);
        st_params_refresh_bf16(&t->model.params);
    }
    return ST_OK;
}

/* train.patience: the validations since the best one, those at multiples of
 * train.eval_every after best_step up to step. Read off the state, so a resumed run counts
 * as the uninterrupted one did. */
static int64_t evals_since_best(const st_train_config *tc, const st_train_state *st, int64_t step) {
    const int64_t best = st->best_step > 0 ? st->best_step : 0;
    return step / tc->eval_every - best / tc->eval_every;
}

static int loop(trainer *t, st_train_result *res, st_error *e) {
    const st_train_config *tc = &t->cfg.train;
    const double t0 = st_time();
    const int64_t step0 = t->st.step;
    int rc = ST_OK;
    if (tc->patience > 0 && step0 > 0 && step0 < tc->steps && evals_since_best(tc, &t->st, step0) >= tc->patience) {
        res->stopped = 4;
        st_progress_note(&t->pg, ST_LOG_INFO, "train.patience %d: the run stopped early at step %lld (no lower "
                         "validation loss since step %lld); nothing to train (to go on: stretch train --resume %s --set "
                         "train.patience=N with N > %d)", tc->patience, (long long)step0, (long long)t->st.best_step,
                         t->dir, tc->patience);
        return ST_OK;
    }
    if (t->opts.stop_after > 0 && step0 >= t->opts.stop_after && step0 < tc->steps)
        st_log(ST_LOG_WARN, "--stop-after %lld: the run is at step %lld already; nothing to train (--resume without "
               "it continues to step %lld)", (long long)t->opts.stop_after, (long long)step0, (long long)tc->steps);
    while (t->st.step < tc->steps) {
        if (t->opts.stop_after > 0 && t->st.step >= t->opts.stop_after) break;
        double lr = st_lr_at(tc, t->st.step + 1), loss = 0, gnorm = 0;
        if ((rc = train_step(t, lr, &loss, &gnorm, e))) return rc;
        const int64_t step = t->st.step;
        const int last = step == tc->steps;
        double session = st_time() - t0;
        double tps = session > 0 ? (double)((step - step0) * tc->batch_size * tc->seq_len * tc->grad_accum * t->ranks) / session : 0;
        /* a metrics write error (rank 0) is held until the ranks agree below: the step's
         * collective work (validation, checkpoint) runs on every rank first */
        st_error pe = {0};
        int prc = st_progress_step(&t->pg, step, loss, lr, gnorm, tps, step % tc->log_every == 0 || last, &pe);
        res->step = step;
        res->loss = loss;
        res->tokens_per_s = tps;

        int best = 0, patience_out = 0;
        if (tc->eval_batches > 0 && ((tc->eval_every > 0 && step % tc->eval_every == 0) || last)) {
            double val;
            if ((rc = validate(t, &val, e))) return rc;
            best = isfinite(val) && val < t->st.best_val;
            t->st.last_val = val;
            if (best) { t->st.best_val = val; t->st.best_step = step; }
            if (!prc) prc = st_progress_val(&t->pg, step, val, best, &t->model, &pe);
            patience_out = tc->patience > 0 && !last && evals_since_best(tc, &t->st, step) >= tc->patience;
        }
        int sig = g_stop_signal;
        int out_of_time = tc->max_seconds > 0 && session >= tc->max_seconds;
        if (st_train_dist_stop(t->dist, &sig, &out_of_time))   /* a signal on any rank stops all */
            return st_fail(e, ST_ERR_GENERIC, "step %lld: the ranks could not agree on stopping", (long long)step);
        int stop_after = t->opts.stop_after > 0 && step >= t->opts.stop_after;
        int save_step = last || sig || out_of_time || stop_after || patience_out ||
                        (tc->checkpoint_every > 0 && step % tc->checkpoint_every == 0);
        /* ZeRO-1: rank 0 gathers the full moments for the writes (every rank takes part) */
        if ((save_step || best) && t->zero.on) rc = st_zero_gather(&t->zero, t->dist, &t->model.params, e);
        if (!rc && save_step) rc = save_checkpoint(t, NULL, e);
        if (!rc && best) rc = save_best(t, save_step, e);
        if ((save_step || best) && t->zero.on) st_zero_release(&t->zero, t->dist, &t->model.params);
        if (!rc && prc) rc = st_fail(e, prc, "%s", pe.msg);
        if ((rc = st_dist_agree(t->dist, rc, e))) return rc;
        char cont[2 * ST_PATH_BUF + 64];
        if (sig) {
            res->stopped = 3;
            return st_fail(e, ST_ERR_INTERRUPTED, "interrupted by %s after step %lld; saved %s; continue with: %s",
                           signal_label(sig), (long long)step, t->last_ckpt,
                           st_trainer_resume_command(t->dir, t->ranks, cont, sizeof cont));
        }
        if (patience_out) {   /* every rank saw the same validation loss */
            res->stopped = 4;
            st_progress_note(&t->pg, ST_LOG_INFO, "train.patience %d: no lower validation loss than %.4f (step %lld, "
                             "best.ckpt) in %d validations; stopped at step %lld of %lld, saved %s", tc->patience,
                             t->st.best_val, (long long)t->st.best_step, tc->patience, (long long)step,
                             (long long)tc->steps, t->last_ckpt);
            break;
        }
        if (out_of_time) {
            res->stopped = 1;
            st_progress_note(&t->pg, ST_LOG_INFO, "train.max_seconds (%g s) reached after step %lld; saved %s; "
                             "continue with: %s", tc->max_seconds, (long long)step, t->last_ckpt,
                             st_trainer_resume_command(t->dir, t->ranks, cont, sizeof cont));
            break;
        }
        if (stop_after) { res->stopped = 2; break; }
    }
    return ST_OK;
}

/* train.steps 0: the initial weights (seeded init or train.init_from) as checkpoint
 * step 0, with the validation loss when eval_batches > 0: a baseline to evaluate or
 * export like any other checkpoint. */
static int save_initial(trainer *t, st_error *e) {
    int rc, prc = ST_OK, best = 0;
    st_error pe = {0};   /* a metrics write error, after the checkpoint every rank takes part in */
    if (t->cfg.train.eval_batches > 0) {
        double val;
        if ((rc = validate(t, &val, e))) return rc;
        t->st.last_val = val;
        best = isfinite(val);
        if (best) { t->st.best_val = val; t->st.best_step = 0; }
        prc = st_progress_val(&t->pg, 0, val, best, &t->model, &pe);
    }
    rc = save_checkpoint(t, NULL, e);
    /* the baseline's loss is the run's best so far: best.ckpt holds those weights (a
     * resume that never beats it must not lose them when keep_last drops step 0) */
    if (!rc && best) rc = save_best(t, 1, e);
    return rc ? rc : prc ? st_fail(e, prc, "%s", pe.msg) : ST_OK;
}

int st_train(const st_run_config *cfg, const char *run_dir, const st_train_opts *opts,
             st_train_result *res, st_error *e) {
    st_train_result dummy;
    if (!res) res = &dummy;
    memset(res, 0, sizeof *res);
    res->val_loss = NAN;
    res->best_val = NAN;
    trainer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    t->lock_fd = -1;
    if (opts) t->opts = *opts;
    t->dir = run_dir;
    t->dist = t->opts.dist;
    t->rank = st_dist_rank(t->dist);
    t->ranks = st_dist_size(t->dist);
    if (t->rank > 0) t->opts.quiet = 1;   /* rank 0 alone reports */
    double t_start = st_time();
    const double comm0 = t->dist ? t->dist->comm_seconds : 0;
    const int64_t calls0 = t->dist ? t->dist->comm_calls : 0;
    int64_t step0 = 0;   /* the step this session starts from */
    struct sigaction old_pipe, old_stop[N_STOP_SIGNALS];
    g_stop_signal = g_pipe_closed = 0;
    catch_signal(SIGPIPE, &old_pipe);
    int rc = st_trainer_setup(t, cfg, e);
    if (!rc) {
        res->n_params = st_model_num_params(&t->model);
        res->arena_bytes = t->arena.capacity;
        res->step = step0 = t->st.step;
        if (t->opts.resume && t->st.step >= t->cfg.train.steps && !t->opts.quiet)
            st_log(ST_LOG_INFO, "%s: already trained for %lld steps (train.steps); nothing to do", run_dir,
                   (long long)t->st.step);
        /* rank 0 alone writes metrics.jsonl */
        rc = st_progress_open(&t->pg, t->rank == 0 ? run_dir : NULL, t->st.step, t->cfg.train.steps, t->st.elapsed,
                              t->opts.quiet, e);
        if (!rc) t->have_pg = 1;
        if (!rc && t->resume_changes[0])
            rc = st_progress_resume(&t->pg, t->st.step, t->last_ckpt, t->resume_changes, e);
        rc = st_dist_agree(t->dist, rc, e);
    }
    if (!rc) {
        /* a SIGINT/SIGTERM/SIGHUP during setup ended the process: nothing was trained yet */
        for (int i = 0; i < N_STOP_SIGNALS; i++) catch_signal(stop_signals[i], &old_stop[i]);
        rc = t->cfg.train.steps == 0 && !t->opts.resume ? save_initial(t, e) : loop(t, res, e);
        /* a signal that came while the last checkpoint was written: the loop had already
         * looked, so say it now (a sweep must stop, not go on to its next point) */
        if (!rc && g_stop_signal) {
            res->stopped = 3;
            rc = st_fail(e, ST_ERR_INTERRUPTED, "interrupted by %s as the session ended at step %lld (%s is "
                         "saved)", signal_label(g_stop_signal), (long long)t->st.step,
                         t->last_ckpt[0] ? t->last_ckpt : t->dir);
        }
        for (int i = 0; i < N_STOP_SIGNALS; i++) sigaction(stop_signals[i], &old_stop[i], NULL);
    }
    /* The reader is gone: SIGPIPE stays ignored, or the line reporting the exit would end
     * the process by it (141) instead of the 130 that says a checkpoint was saved. */
    if (g_pipe_closed) signal(SIGPIPE, SIG_IGN);
    else sigaction(SIGPIPE, &old_pipe, NULL);
    g_stop_signal = g_pipe_closed = 0;
    if (t->have_arena) {
        res->arena_high_water = t->arena.high_water;
        res->arena_grew = t->arena.capacity != res->arena_bytes || st_arena_chunks(&t->arena) > 1;
    }
    res->val_loss = t->st.last_val;
    res->best_val = t->st.best_val;
    res->seconds = st_time() - t_start;
    if (!rc && !t->opts.quiet && t->have_pg) {
        char best[96] = "";
        if (t->st.best_step >= 0)
            snprintf(best, sizeof best, ", best validation loss %.4f (ppl %.3f) at step %lld", t->st.best_val,
                     exp(t->st.best_val), (long long)t->st.best_step);
        char loss[48] = "";   /* the last step's loss, when this session ran one */
        if (t->st.step > step0) snprintf(loss, sizeof loss, ", loss %.4f", res->loss);
        st_progress_note(&t->pg, ST_LOG_INFO, "done: step %lld%s%s, %.1f s, %.0f tokens/s, peak RSS %.0f MiB",
                         (long long)t->st.step, loss, best, res->seconds, res->tokens_per_s,
                         (double)st_peak_rss() / 1048576.0);
        if (t->ranks > 1 && t->dist->comm_calls > calls0)
            st_progress_note(&t->pg, ST_LOG_INFO, "gradient allreduce: %.3f ms per step (%lld steps, %.1f%% of the "
                             "session; %.2f MB per step)", 1e3 * (t->dist->comm_seconds - comm0) /
                             (double)(t->dist->comm_calls - calls0), (long long)(t->dist->comm_calls - calls0),
                             100.0 * (t->dist->comm_seconds - comm0) / res->seconds,
                             (double)t->model.params.n * 4.0 / 1e6);
    }
    trainer_free(t);
    free(t);
    return rc;
}
