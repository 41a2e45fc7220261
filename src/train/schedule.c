/* schedule.c - learning rate as a function of the update number.
 *
 * Steps are 1-based: update 1 is the first optimizer step, so linear warmup starts at
 * lr / warmup (never at 0, which would waste a step) and reaches lr at step = warmup.
 *   constant : warmup, then lr
 *   cosine   : warmup, then lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2,
 *              p = (step - warmup) / (steps - warmup) in [0, 1], lr_min = min_lr_ratio * lr
 *   inv_sqrt : fairseq's inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)),
 *              i.e. linear warmup to lr, then decay proportional to 1/sqrt(step).
 * Computed in double; the optimizer receives a float. */
#include "st_train.h"

#include <math.h>

double st_lr_at(const st_train_config *t, int64_t step) {
    const double lr = t->optim.lr;
    const int64_t w = t->sched.warmup;
    if (step < 1) step = 1;
    const double s = (double)step;
    switch (t->sched.kind) {
    case ST_SCHED_INV_SQRT: {
        double wd = w > 0 ? (double)w : 1.0;
        return lr * fmin(s / wd, sqrt(wd / s));
    }
    case ST_SCHED_COSINE: {
        if (w > 0 && step <= w) return lr * s / (double)w;
        const double lr_min = lr * (double)t->sched.min_lr_ratio;
        const int64_t span = t->steps - w;
        double p = span > 0 ? (double)(step - w) / (double)span : 1.0;
        if (p > 1.0) p = 1.0;   /* past the planned end (extended runs): stay at the floor */
        return lr_min + (lr - lr_min) * 0.5 * (1.0 + cos(M_PI * p));
    }
    default:
        if (w > 0 && step <= w) return lr * s / (double)w;
        return lr;
    }
}
