/* schedule.c - learning rate as a function of the update number.
 *
 * Steps are 1-based: update 1 is the first optimizer step, so linear warmup starts at
 * lr / warmup (never at 0, which would waste a step) and reaches lr at step = warmup.
 *   constant : warmup, then lr
 *   cosine   : warmup, then lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2,
 *              p = (step - warmup) / (steps - warmup) in [0, 1], lr_min = min_lr_ratio * lr
 *   inv_sqrt : fairseq's inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)),
 *              i.e. linear warmup to lr, then decay proportional to 1/sqrt(step).
 *   linear   : warmup, then lr - (lr - lr_min) * p, p as for cosine (BERT, HF's default)
 *   wsd      : warmup-stable-decay (Hu et al. 2024, MiniCPM; Hagele et al. 2024): warmup,
 *              lr until the last D = round(decay_frac * steps) updates, then linear to
 *              lr_min at step = steps. The stable phase does not depend on steps, so a
 *              run's checkpoints before the decay serve any longer run of the same config.
 * Past the planned end (an extended run) cosine, linear and wsd stay at lr_min.
 * Computed in double; the optimizer receives a float. */
#include "st_train.h"

#include <math.h>

int64_t st_lr_wsd_decay(const st_train_config *t) {
    return (int64_t)llround(t->sched.decay_frac * (double)t->steps);
}

/* lr_min + (lr - lr_min) * f(p) over the span (start, end]: p = (step - start) / span
 * clamped to [0, 1]; a span of 0 is already at the end */
static double decay(double lr, double lr_min, int64_t step, int64_t start, int64_t end, int cosine) {
    const int64_t span = end - start;
    double p = span > 0 ? (double)(step - start) / (double)span : 1.0;
    if (p > 1.0) p = 1.0;   /* past the planned end (extended runs): stay at the floor */
    if (p < 0.0) p = 0.0;
    const double f = cosine ? 0.5 * (1.0 + cos(M_PI * p)) : 1.0 - p;
    return lr_min + (lr - lr_min) * f;
}

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
    case ST_SCHED_COSINE:
    case ST_SCHED_LINEAR:
    case ST_SCHED_WSD: {
        if (w > 0 && step <= w) return lr * s / (double)w;
        const double lr_min = lr * (double)t->sched.min_lr_ratio;
        if (t->sched.kind == ST_SCHED_WSD) {
            const int64_t start = t->steps - st_lr_wsd_decay(t);
            return step <= start ? lr : decay(lr, lr_min, step, start, t->steps, 0);
        }
        return decay(lr, lr_min, step, w, t->steps, t->sched.kind == ST_SCHED_COSINE);
    }
    default:
        if (w > 0 && step <= w) return lr * s / (double)w;
        return lr;
    }
}
