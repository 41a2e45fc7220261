/* live.c - one live status line for people at a terminal: train, eval and sweep show
 * their progress (step or window, tokens/s, ETA) in a single line that is rewritten in
 * place ("\r" + erase-line) at most ten times a second. When stderr is not a terminal
 * (logs, CI, pipes) or the command runs --quiet, the line is never drawn and callers
 * write their plain log lines instead, so captured output stays line-based. */
#define _GNU_SOURCE
#include "st_common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LIVE_MIN_INTERVAL 0.1   /* seconds between redraws */

void st_live_init(st_live *l, int quiet) {
    memset(l, 0, sizeof *l);
    l->on = !quiet && isatty(STDERR_FILENO);
}

int st_live_show(st_live *l, int force, const char *fmt, ...) {
    if (!l->on) return 0;
    double now = st_time();
    if (!force && l->shown && now - l->t_last < LIVE_MIN_INTERVAL) return 0;
    l->t_last = now;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    l->shown = 1;
    return 1;
}

void st_live_clear(st_live *l) {
    if (!l->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    l->shown = 0;
}

void st_fmt_duration(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) { snprintf(buf, n, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

void st_fmt_rate(char *buf, size_t n, double r) {
    if (!isfinite(r) || r < 0) snprintf(buf, n, "?");
    else if (r >= 1e6) snprintf(buf, n, "%.2fM", r / 1e6);
    else if (r >= 1e3) snprintf(buf, n, "%.1fk", r / 1e3);
    else snprintf(buf, n, "%.0f", r);
}

void st_fmt_bar(char *buf, size_t width, int64_t done, int64_t total) {
    size_t fill = total > 0 && done > 0 ? (size_t)((double)width * (double)(done < total ? done : total) / (double)total) : 0;
    for (size_t i = 0; i < width; i++) buf[i] = i < fill ? '#' : '.';
    buf[width] = 0;
}
