/* trainer_dist.c - what data-parallel training (st_train_opts.dist, docs/distributed.md)
 * adds to the training loop. With one rank every function here is the identity.
 *
 * Data parallelism: every rank holds the whole model, the optimizer state and the
 * training state (step, RNG, loader position), identical to the bit. Per update:
 *   global micro-batch j = k * N + r  (rank r, its k-th micro-batch, k < grad_accum)
 *   reads loader windows [draws + j B, draws + (j + 1) B) and dropout seed number j of
 *   the step's N * grad_accum seeds; backward is seeded with 1 / (N * grad_accum) (a
 *   task's answer-only loss: micro-batch j's share of the update's kept targets);
 *   gradients are summed over ranks in rank order (st_dist_sum_f32), so every rank
 *   applies the same update. N ranks with grad_accum A are thus the one-process run with
 *   grad_accum N * A, up to the order in which micro-batch gradients are added.
 * Rank 0 owns the run directory; the others never write to it. */
#define _GNU_SOURCE
#include "train_internal.h"

#include <math.h>
#include <signal.h>
#include <string.h>

int st_train_dist_share_config(st_dist *d, st_run_config *cfg, const st_run_config *local, st_error *e) {
    if (st_dist_size(d) == 1) return ST_OK;
    int rc = st_dist_bcast(d, cfg, sizeof *cfg, 0);
    if (rc) return st_fail(e, rc, "rank %d: cannot receive the run config from rank 0", d->rank);
    if (d->rank > 0 && local) {
        /* the same command line on every machine must mean the same run */
        st_run_config mine = *local;
        if (mine.model.vocab_size == 0) mine.model.vocab_size = cfg->model.vocab_size;
        static const char *const sections[] = {"model", "data", "train"};
        char diff[1200];
        for (int i = 0; i < 3; i++)
            if (st_run_config_diff(cfg, &mine, sections[i], diff, sizeof diff))
                return st_fail(e, ST_ERR_CONFIG, "rank %d: %s: the config differs from rank 0's (%s: rank 0 vs "
                               "rank %d); every rank must read the same config and data paths",
                               d->rank, local->file, diff, d->rank);
    }
    return ST_OK;
}

int st_train_dist_share_state(st_dist *d, st_params *p, st_train_state *s, const st_dataset *ds, st_error *e) {
    if (st_dist_size(d) == 1) return ST_OK;
    /* the data must be the same everywhere: rank 0's split sizes and tokenizer hash */
    int64_t mine[4] = {ds->n[0], ds->n[1], ds->n[2], (int64_t)ds->tok_hash};
    int64_t root[4];
    memcpy(root, mine, sizeof root);
    int rc = st_dist_bcast(d, root, sizeof root, 0);
    if (!rc && memcmp(root, mine, sizeof root) != 0)
        rc = st_fail(e, ST_ERR_DATA, "rank %d: its dataset (%lld/%lld/%lld tokens, tokenizer %016llx) differs from "
                     "rank 0's (%lld/%lld/%lld, %016llx): every machine needs the same data at the same path",
                     d->rank, (long long)mine[0], (long long)mine[1], (long long)mine[2], (unsigned long long)mine[3],
                     (long long)root[0], (long long)root[1], (long long)root[2], (unsigned long long)root[3]);
    if ((rc = st_dist_agree(d, rc, e))) return rc;
    /* rank 0's parameters, moments and state (fresh: its initialisation and init_from;
     * resumed: its checkpoint) */
    if (st_dist_bcast(d, p->data, p->n * sizeof *p->data, 0) || st_dist_bcast(d, p->m, p->n * sizeof *p->m, 0) ||
        st_dist_bcast(d, p->v, p->n * sizeof *p->v, 0) || st_dist_bcast(d, s, sizeof *s, 0))
        return st_fail(e, ST_ERR_GENERIC, "rank %d: cannot receive the model from rank 0", d->rank);
    return ST_OK;
}

int st_train_dist_reduce(st_dist *d, st_params *p, double *loss_sum, int *finite, st_error *e) {
    if (st_dist_size(d) == 1) return ST_OK;
    double stats[2] = {*loss_sum, *finite ? 0.0 : 1.0};
    if (st_dist_sum_f32(d, p->grad, p->n) || st_dist_sum_f64(d, stats, 2))
        return st_fail(e, ST_ERR_GENERIC, "rank %d: gradient allreduce failed", d->rank);
    *loss_sum = stats[0];
    *finite = stats[1] == 0.0;
    return ST_OK;
}

int st_train_dist_stop(st_dist *d, int *sig, int *out_of_time) {
    if (st_dist_size(d) == 1) return ST_OK;
    /* SIGTERM (15) outranks SIGINT (2) in the message; any rank's signal stops all */
    int32_t v[2] = {*sig, *out_of_time};
    if (st_dist_max_i32(d, v, 2)) return ST_ERR_GENERIC;
    *sig = v[0];
    *out_of_time = v[1];
    if (*sig) d->agreed = 1;   /* every rank returns ST_ERR_INTERRUPTED together */
    return ST_OK;
}

int st_train_dist_validate(st_dist *d, double *losses, int n, int rc, st_error *e) {
    if (st_dist_size(d) == 1) return rc;
    if ((rc = st_dist_agree(d, rc, e))) return rc;
    /* one batch's loss per slot, zeros elsewhere: the rank-ordered sum is exact */
    return st_dist_sum_f64(d, losses, (size_t)n) ? st_fail(e, ST_ERR_GENERIC, "validation allreduce failed") : ST_OK;
}
