/* progress.c - what a training run tells the user and the run directory.
 *
 * Terminal (stderr is a tty): the live line (st_live, src/core/live.c), at most 10
 * redraws a second:
 *   step 120/2000 [####......] loss 3.2101 lr 3.0e-04 41.2k tok/s ETA 1m23s
 * Otherwise (logs, CI): a plain line every log_every steps. Either way, every
 * log_every-th step and every validation appends one JSON object to metrics.jsonl:
 *   {"step": 100, "loss": 3.21, "ppl": 24.8, "lr": 0.0003, "grad_norm": 0.91,
 *    "tokens_per_s": 41200, "elapsed": 12.5}
 *   {"step": 200, "val_loss": 3.05, "val_ppl": 21.1}
 * (plus "rf_rho": [[rho per head] per layer] when the model learns alibi_rf receptive fields)
 * Losses are written with 17 significant digits so traces compare bit for bit. */
#define _GNU_SOURCE
#include "train_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int st_progress_open(st_progress *pg, const char *run_dir, int64_t first_step,
                     int64_t total_steps, double elapsed0, int quiet, st_error *e) {
    memset(pg, 0, sizeof *pg);
    if (run_dir) {   /* NULL: no metrics file (the ranks > 0 of a data-parallel run) */
        char path[ST_PATH_BUF];
        snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
        /* O_NONBLOCK: a FIFO in place of the file must not block open() (or the run);
         * anything but a regular file is refused */
        const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
        if (fd < 0) return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return st_fail(e, ST_ERR_IO, "%s: not a regular file", path);
        }
        if (!(pg->metrics = fdopen(fd, "a"))) {
            close(fd);
            return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        }
    }
    st_live_init(&pg->live, quiet);
    pg->quiet = quiet;
    pg->first_step = first_step;
    pg->total_steps = total_steps;
    pg->t_start = st_time();
    pg->elapsed0 = elapsed0;
    return ST_OK;
}

double st_progress_elapsed(const st_progress *pg) { return pg->elapsed0 + (st_time() - pg->t_start); }

static void clear_bar(st_progress *pg) { st_live_clear(&pg->live); }

/* JSON has no NaN / Infinity: non-finite values (skipped steps) are written as null. */
static const char *jnum(char *buf, size_t n, double x, int prec) {
    if (!isfinite(x)) snprintf(buf, n, "null");
    else snprintf(buf, n, "%.*g", prec, x);
    return buf;
}

void st_progress_step(st_progress *pg, int64_t step, double loss, double lr, double gnorm,
                      double tokens_per_s, int log_now) {
    double now = st_time();
    double session = now - pg->t_start;
    int64_t done = step - pg->first_step;
    double eta = done > 0 ? session / (double)done * (double)(pg->total_steps - step) : NAN;
    if (log_now && pg->metrics) {
        char a[40], b[40], c[40];
        fprintf(pg->metrics,
                "{\"step\": %lld, \"loss\": %s, \"ppl\": %s, \"lr\": %.9g, \"grad_norm\": %s, "
                "\"tokens_per_s\": %.1f, \"elapsed\": %.3f}\n",
                (long long)step, jnum(a, sizeof a, loss, 17), jnum(b, sizeof b, exp(loss), 17), lr,
                jnum(c, sizeof c, gnorm, 9), tokens_per_s, pg->elapsed0 + session);
        fflush(pg->metrics);
    }
    if (pg->quiet) return;
    char rate[32], etas[32];
    st_fmt_rate(rate, sizeof rate, tokens_per_s);
    st_fmt_duration(etas, sizeof etas, eta);
    if (pg->live.on) {
        char bar[21];
        st_fmt_bar(bar, 20, step, pg->total_steps);
        st_live_show(&pg->live, step == pg->total_steps, "step %lld/%lld [%s] loss %.4f lr %.2e %s tok/s ETA %s",
                     (long long)step, (long long)pg->total_steps, bar, loss, lr, rate, etas);
    } else if (log_now) {
        st_log(ST_LOG_INFO, "step %lld/%lld | loss %.4f | ppl %.2f | lr %.3e | grad norm %.3f | %s tok/s | ETA %s",
               (long long)step, (long long)pg->total_steps, loss, exp(loss), lr, gnorm, rate, etas);
    }
}

void st_progress_val(st_progress *pg, int64_t step, double val_loss, int best, const st_model *m) {
    /* learned receptive fields: their trajectory is part of what an alibi_rf run shows */
    float rho[256];
    const int L = m ? m->cfg.n_layers : 0, H = m ? m->cfg.n_heads : 0;
    const int has_rho = m && st_model_rf_rho(m, 0, rho);
    FILE *f = pg->metrics;
    char a[40], b[40];
    if (f)
        fprintf(f, "{\"step\": %lld, \"val_loss\": %s, \"val_ppl\": %s%s", (long long)step,
                jnum(a, sizeof a, val_loss, 17), jnum(b, sizeof b, exp(val_loss), 17),
                has_rho ? ", \"rf_rho\": [" : "");
    float lo = INFINITY, hi = -INFINITY;
    for (int l = 0; has_rho && l < L; l++) {   /* "rf_rho": [[rho per head] per layer] */
        st_model_rf_rho(m, l, rho);
        if (f) fputs(l ? ", [" : "[", f);
        for (int h = 0; h < H; h++) {
            if (f) fprintf(f, "%s%s", h ? ", " : "", jnum(a, sizeof a, rho[h], 7));
            lo = rho[h] < lo ? rho[h] : lo;
            hi = rho[h] > hi ? rho[h] : hi;
        }
        if (f) fputc(']', f);
    }
    if (f) {
        fputs(has_rho ? "]}\n" : "}\n", f);
        fflush(f);
    }
    if (pg->quiet) return;
    clear_bar(pg);
    char rf[96] = "";
    if (has_rho) snprintf(rf, sizeof rf, "; learned rho %.3g..%.3g", (double)lo, (double)hi);
    st_log(ST_LOG_INFO, "step %lld: validation loss %.4f, ppl %.3f%s%s", (long long)step, val_loss,
           exp(val_loss), best ? " (best)" : "", rf);
}

void st_progress_note(st_progress *pg, int level, const char *fmt, ...) {
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (pg->quiet && level < ST_LOG_WARN) return;
    clear_bar(pg);
    st_log(level, "%s", msg);
}

void st_progress_close(st_progress *pg) {
    clear_bar(pg);
    if (pg->metrics) fclose(pg->metrics);
    pg->metrics = NULL;
}
