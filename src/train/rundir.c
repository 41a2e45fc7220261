/* rundir.c - the run directory: refusing to clobber another run, step checkpoints with
 * a `latest` pointer and keep-last-N pruning, and trimming metrics.jsonl on resume.
 *
 *   RUN_DIR/config.json, tokenizer.json, metrics.jsonl, init_from.json (train.init_from)
 *   RUN_DIR/checkpoints/step_NNNNNNNN.ckpt, best.ckpt, latest
 * Not here: the checkpoint format (checkpoint.c). */
#define _GNU_SOURCE
#include "train_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void st_rundir_path(const char *dir, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/checkpoints/%s", dir, name);
}

/* Files of a run: the ones st_train writes. --force removes exactly these. */
static const char *const run_files[] = {"config.json", "metrics.jsonl", "tokenizer.json", "init_from.json", NULL};

static int is_step_file(const char *name, int64_t *step) {
    long long s;
    int end = 0;
    if (sscanf(name, "step_%lld.ckpt%n", &s, &end) == 1 && end > 0 && name[end] == 0) {
        if (step) *step = s;
        return 1;
    }
    return 0;
}

static int is_ckpt_artifact(const char *name) {
    return is_step_file(name, NULL) || !strcmp(name, "best.ckpt") || !strcmp(name, "latest") ||
           strstr(name, ".tmp.") != NULL;
}

/* Number of entries in a directory other than . and .. and an empty checkpoints/ left
 * by a run that failed before its first checkpoint (-1 if it cannot be read). */
static int count_entries(const char *dir, char *first, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (!strcmp(de->d_name, "checkpoints")) {
            char sub[ST_PATH_BUF];
            snprintf(sub, sizeof sub, "%s/checkpoints", dir);
            if (count_entries(sub, NULL, 0) == 0) continue;
        }
        if (count == 0 && first) snprintf(first, n, "%s", de->d_name);
        count++;
    }
    closedir(d);
    return count;
}

static int remove_run(const char *dir, st_error *e) {
    char path[ST_PATH_BUF + 256];   /* checkpoints/ + a directory entry name */
    for (int i = 0; run_files[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, run_files[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            return st_fail(e, ST_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    }
    char cdir[ST_PATH_BUF];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    DIR *d = opendir(cdir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!is_ckpt_artifact(de->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", cdir, de->d_name);
            if (unlink(path) != 0 && errno != ENOENT) {
                closedir(d);
                return st_fail(e, ST_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
            }
        }
        closedir(d);
        rmdir(cdir);   /* fails harmlessly if the user keeps other files there */
    }
    return ST_OK;
}

/* How many entries dir holds (0 when it does not exist); refuses an occupied dir unless
 * force, with the caller's advice (NULL: stretch train's flags). Touches nothing. */
static int inspect(const char *dir, int force, const char *advice, int *entries, st_error *e) {
    /* "" would make every derived path absolute ("/config.json"): never a run directory */
    int prc = st_path_check(dir, "run directory (--out)", e);
    if (prc) return prc;
    *entries = 0;
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return st_fail(e, ST_ERR_IO, "%s: exists and is not a directory", dir);
        char first[256] = "";
        int n = count_entries(dir, first, sizeof first);
        if (n < 0) return st_fail(e, ST_ERR_IO, "%s: cannot read directory: %s", dir, strerror(errno));
        if (n > 0 && !force) {
            char cfg[ST_PATH_BUF];
            snprintf(cfg, sizeof cfg, "%s/config.json", dir);
            const int run = access(cfg, F_OK) == 0;
            if (advice) return st_fail(e, ST_ERR_IO, "%s: %s%s%s; %s", dir, run ? "already holds a run" :
                                       "directory is not empty (holds '", run ? "" : first, run ? "" : "')", advice);
            if (run)
                return st_fail(e, ST_ERR_IO, "%s: already holds a run; continue it with --resume %s, "
                               "replace it with --force, or choose another --out", dir, dir);
            return st_fail(e, ST_ERR_IO, "%s: directory is not empty (holds '%s'); use --force to train "
                           "there anyway or choose another --out", dir, first);
        }
        *entries = n;
    }
    return ST_OK;
}

int st_rundir_check(const char *dir, int force, const char *advice, st_error *e) {
    int n;
    return inspect(dir, force, advice, &n, e);
}

int st_rundir_prepare(const char *dir, int force, const char *advice, st_error *e) {
    int n, rc = inspect(dir, force, advice, &n, e);
    if (rc) return rc;
    if (n > 0 && (rc = remove_run(dir, e))) return rc;
    char cdir[ST_PATH_BUF];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    return st_mkdirs(cdir, e);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Delete step checkpoints beyond the newest `keep`. */
static void prune(const char *dir, int keep) {
    char cdir[ST_PATH_BUF], path[ST_PATH_BUF + 32];   /* + step_NNNNNNNN.ckpt */
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    DIR *d = opendir(cdir);
    if (!d) return;
    int64_t steps[4096];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096) {
        int64_t s;
        if (is_step_file(de->d_name, &s)) steps[n++] = s;
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof steps[0], cmp_i64);
    for (int i = 0; i < n - keep; i++) {
        snprintf(path, sizeof path, "%s/step_%08lld.ckpt", cdir, (long long)steps[i]);
        if (unlink(path) != 0)
            st_log(ST_LOG_WARN, "%s: cannot remove old checkpoint: %s", path, strerror(errno));
    }
}

int st_rundir_save_step(const char *dir, const st_run_config *cfg, const st_params *p,
                        const st_train_state *s, int keep, char *written, size_t n, st_error *e) {
    char name[64], path[4200], latest[4200];
    snprintf(name, sizeof name, "step_%08lld.ckpt", (long long)s->step);
    st_rundir_path(dir, name, path, sizeof path);
    int rc = st_checkpoint_save(path, cfg, p, s, e);
    if (rc) return rc;
    char line[80];
    int len = snprintf(line, sizeof line, "%s\n", name);
    st_rundir_path(dir, "latest", latest, sizeof latest);
    if ((rc = st_write_file_atomic(latest, line, (size_t)len, e))) return rc;
    prune(dir, keep);
    if (written) snprintf(written, n, "%s", path);
    return ST_OK;
}

int st_rundir_link_best(const char *dir, const char *step_path, st_error *e) {
    char best[ST_PATH_BUF];
    st_rundir_path(dir, "best.ckpt", best, sizeof best);
    return st_link_atomic(step_path, best, e);
}

void st_rundir_clean_temps(const char *dir) {
    char cdir[ST_PATH_BUF], path[ST_PATH_BUF + 256];   /* + a directory entry name */
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    DIR *d = opendir(cdir);
    if (!d) return;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *t = strstr(de->d_name, ".tmp.");
        if (!t) continue;
        char *end;
        errno = 0;
        long pid = strtol(t + 5, &end, 10);
        /* NAME.tmp.PID.NONCE (st_atomic_open) or NAME.tmp.PID (hard link of best.ckpt) */
        if ((*end && *end != '.') || errno || pid <= 0 || pid == (long)getpid()) continue;
        /* a live PID (possibly reused by another process) or one we may not signal: keep */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(path, sizeof path, "%s/%s", cdir, de->d_name);
        if (unlink(path) == 0) removed++;
    }
    closedir(d);
    if (removed) st_log(ST_LOG_INFO, "%s: removed %d temp file(s) left by interrupted writes", cdir, removed);
}

int st_rundir_trim_metrics(const char *dir, int64_t last_step, st_error *e) {
    char path[ST_PATH_BUF];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (access(path, F_OK) != 0) return ST_OK;
    size_t len = 0;
    char *text = st_read_file(path, &len, (size_t)1 << 30, e);
    if (!text) return e ? e->code : ST_ERR_IO;
    /* keep complete lines whose step is <= last_step (records are {"step": N, ...}) */
    size_t out = 0;
    char *line = text;
    while (line < text + len) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl) break;   /* a partial last line from a killed process */
        long long step = -1;
        const char *k = strstr(line, "\"step\":");
        if (k && k < nl) step = strtoll(k + 7, NULL, 10);
        size_t l = (size_t)(nl - line) + 1;
        if (step >= 0 && step <= last_step) {
            memmove(text + out, line, l);
            out += l;
        }
        line = nl + 1;
    }
    int rc = st_write_file_atomic(path, text, out, e);
    free(text);
    return rc;
}
