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
 * and, when a resume changed train keys, {"step": 200, "resumed_from": CKPT, "changed": ...}
 * Losses are written with 17 significant digits so traces compare bit for bit. */
#define _GNU_SOURCE
#include "train_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int st_progress_open(st_progress *pg, const char *run_dir, int64_t first_step,
                     int64_t total_steps, double elapsed0, int quiet, st_error *e) {
    memset(pg, 0, sizeof *pg);
    pg->metrics = -1;
    if (run_dir) {   /* NULL: no metrics file (the ranks > 0 of a data-parallel run) */
        snprintf(pg->metrics_path, sizeof pg->metrics_path, "%s/metrics.jsonl", run_dir);
        const char *path = pg->metrics_path;
        struct stat st;   /* a FIFO in its place must not block open() (or the run) */
        if ((pg->metrics = st_open_regular(path, O_WRONLY | O_APPEND | O_CREAT, &st, e)) < 0)
            return e ? e->code : ST_ERR_IO;
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

/* Append one record (a whole line) to metrics.jsonl. A short or failed write is cut back
 * off (ftruncate to the size before it), so the file only ever holds whole records and a
 * resume's trim reads every line it keeps. */
static int append_record(st_progress *pg, const char *line, size_t n, st_error *e) {
    struct stat st;
    if (fstat(pg->metrics, &st) != 0)
        return st_fail(e, ST_ERR_IO, "%s: cannot stat: %s", pg->metrics_path, strerror(errno));
    size_t done = 0;
    while (done < n) {
        const ssize_t w = write(pg->metrics, line + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int err = w < 0 ? errno : EIO;
            if (done && ftruncate(pg->metrics, st.st_size) != 0)
                st_log(ST_LOG_WARN, "%s: cannot remove a partial record: %s", pg->metrics_path, strerror(errno));
            return st_fail(e, ST_ERR_IO, "%s: write failed: %s", pg->metrics_path, strerror(err));
        }
        done += (size_t)w;
    }
    return ST_OK;
}

int st_progress_step(st_progress *pg, int64_t step, double loss, double lr, double gnorm,
                     double tokens_per_s, int log_now, st_error *e) {
    double now = st_time();
    double session = now - pg->t_start;
    int64_t done = step - pg->first_step;
    double eta = done > 0 ? session / (double)done * (double)(pg->total_steps - step) : NAN;
    int rc = ST_OK;
    if (log_now && pg->metrics >= 0) {
        char a[40], b[40], c[40], line[512];
        const int n = snprintf(line, sizeof line,
                               "{\"step\": %lld, \"loss\": %s, \"ppl\": %s, \"lr\": %.9g, \"grad_norm\": %s, "
                               "\"tokens_per_s\": %.1f, \"elapsed\": %.3f}\n",
                               (long long)step, jnum(a, sizeof a, loss, 17), jnum(b, sizeof b, exp(loss), 17), lr,
                               jnum(c, sizeof c, gnorm, 9), tokens_per_s, pg->elapsed0 + session);
        rc = append_record(pg, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, e);
    }
    if (pg->quiet) return rc;
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
    return rc;
}

/* "[[rho per head] per layer]" of an alibi_rf model into buf (cap bytes, always ended);
 * *lo / *hi: the range, for the log line. */
static void rho_json(const st_model *m, char *buf, size_t cap, float *lo, float *hi) {
    float rho[256];
    char a[40];
    size_t k = 0;
    buf[0] = 0;
#define PUT(...) do { if (k < cap) k += (size_t)snprintf(buf + k, cap - k, __VA_ARGS__); } while (0)
    PUT("[");
    for (int l = 0; l < m->cfg.n_layers; l++) {
        st_model_rf_rho(m, l, rho);
        PUT("%s[", l ? ", " : "");
        for (int h = 0; h < m->cfg.n_heads; h++) {
            PUT("%s%s", h ? ", " : "", jnum(a, sizeof a, rho[h], 7));
            *lo = rho[h] < *lo ? rho[h] : *lo;
            *hi = rho[h] > *hi ? rho[h] : *hi;
        }
        PUT("]");
    }
    PUT("]");
#undef PUT
}

int st_progress_val(st_progress *pg, int64_t step, double val_loss, int best, const st_model *m, st_error *e) {
    /* learned receptive fields: their trajectory is part of what an alibi_rf run shows */
    float rho[256], lo = INFINITY, hi = -INFINITY;
    const int has_rho = m && st_model_rf_rho(m, 0, rho);
    /* up to 7 significant digits, sign, exponent and ", " a head: 24 bytes */
    const size_t cap = has_rho ? (size_t)m->cfg.n_layers * ((size_t)m->cfg.n_heads * 24 + 4) + 8 : 1;
    char *rj = malloc(cap);
    if (!rj) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", pg->metrics_path);
    rj[0] = 0;
    if (has_rho) rho_json(m, rj, cap, &lo, &hi);
    int rc = ST_OK;
    if (pg->metrics >= 0) {
        char a[40], b[40];
        const size_t n = strlen(rj) + 160;
        char *line = malloc(n);
        if (!line) rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", pg->metrics_path);
        else {
            const int k = snprintf(line, n, "{\"step\": %lld, \"val_loss\": %s, \"val_ppl\": %s%s%s}\n", (long long)step,
                                   jnum(a, sizeof a, val_loss, 17), jnum(b, sizeof b, exp(val_loss), 17),
                                   has_rho ? ", \"rf_rho\": " : "", rj);
            rc = append_record(pg, line, (size_t)k < n ? (size_t)k : n - 1, e);
            free(line);
        }
    }
    free(rj);
    if (pg->quiet) return rc;
    clear_bar(pg);
    char rf[96] = "";
    if (has_rho) snprintf(rf, sizeof rf, "; learned rho %.3g..%.3g", (double)lo, (double)hi);
    st_log(ST_LOG_INFO, "step %lld: validation loss %.4f, ppl %.3f%s%s", (long long)step, val_loss,
           exp(val_loss), best ? " (best)" : "", rf);
    return rc;
}

int st_progress_resume(st_progress *pg, int64_t step, const char *ckpt, const char *changed, st_error *e) {
    if (pg->metrics < 0) return ST_OK;
    cJSON *a = cJSON_CreateString(ckpt), *b = cJSON_CreateString(changed);
    char *sa = a ? cJSON_PrintUnformatted(a) : NULL, *sb = b ? cJSON_PrintUnformatted(b) : NULL;
    const size_t n = (sa ? strlen(sa) : 0) + (sb ? strlen(sb) : 0) + 96;
    char *line = sa && sb ? malloc(n) : NULL;
    int rc = ST_OK;
    if (!line) rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", pg->metrics_path);
    else {
        const int k = snprintf(line, n, "{\"step\": %lld, \"resumed_from\": %s, \"changed\": %s}\n", (long long)step,
                               sa, sb);
        rc = append_record(pg, line, (size_t)k < n ? (size_t)k : n - 1, e);
    }
    free(line);
    cJSON_free(sa);
    cJSON_free(sb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    return rc;
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
    if (pg->metrics >= 0) close(pg->metrics);
    pg->metrics = -1;
}
