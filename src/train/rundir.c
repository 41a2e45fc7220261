/* rundir.c - the run directory: refusing to clobber another run, step checkpoints with
 * a `latest` pointer and keep-last-N pruning, and trimming metrics.jsonl on resume.
 *
 *   RUN_DIR/config.json, tokenizer.json, metrics.jsonl, init_from.json (train.init_from)
 *   RUN_DIR/checkpoints/step_NNNNNNNN.ckpt, best.ckpt, latest
 * and which checkpoint file a run directory names (st_checkpoint_resolve).
 * Not here: the checkpoint format (checkpoint.c). */
#define _GNU_SOURCE
#include "train_internal.h"

#include <cjson/cJSON.h>

#include <ctype.h>
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

/* NAME.tmp.PID[.NONCE] (st_atomic_open; NAME.tmp.PID: the hard link of best.ckpt): the
 * writer's PID, or 0 when name is no temp file. */
static long temp_pid(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    char *end;
    errno = 0;
    const long pid = strtol(t + 5, &end, 10);
    return (*end && *end != '.') || errno || pid <= 0 ? 0 : pid;
}

/* A temp file of one of the run's own files in RUN_DIR (config.json.tmp.PID.NONCE, ...,
 * eval_*.json.tmp...): what resume and --force may remove there; a user's file never. */
static int is_run_temp(const char *name) {
    if (!temp_pid(name)) return 0;
    const size_t stem = (size_t)(strstr(name, ".tmp.") - name);
    for (int i = 0; run_files[i]; i++)
        if (strlen(run_files[i]) == stem && !strncmp(name, run_files[i], stem)) return 1;
    return !strncmp(name, "eval_", 5) && stem > 10 && !strncmp(name + stem - 5, ".json", 5);
}

/* A temp file whose writer is dead (PID no longer running), of any file (checkpoints/) or
 * of the run's own files only (RUN_DIR: a user's files are never touched). */
static int dead_temp(const char *name, int run_files_only) {
    const long pid = temp_pid(name);
    if (!pid || pid == (long)getpid() || (run_files_only && !is_run_temp(name))) return 0;
    /* a live PID (possibly reused by another process) or one we may not signal: alive */
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* RUN/init_from.json beside no config.json: the pin of a start (extend, train.init_from)
 * that failed or was killed before it wrote config.json (a full disk, a Ctrl-C during its
 * setup). Without config.json no --resume can use it, and it made the same command again
 * refused ("not empty (holds 'init_from.json')"), --resume advising that very command. */
static int stale_pin(const char *dir) {
    char path[ST_PATH_BUF + 32];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, F_OK) == 0) return 0;
    snprintf(path, sizeof path, "%s/init_from.json", dir);
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Number of entries in a directory other than . and .. and what a run that failed before
 * its first checkpoint left: an empty checkpoints/, temp files of dead writers (a run
 * killed while it wrote config.json) and a stale init_from.json (stale_pin); -1 if the
 * directory cannot be read. */
static int count_entries(const char *dir, int top, char *first, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    const int pin = top && stale_pin(dir);
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || dead_temp(de->d_name, top)) continue;
        if (pin && !strcmp(de->d_name, "init_from.json")) continue;
        if (!strcmp(de->d_name, "checkpoints")) {
            char sub[ST_PATH_BUF];
            snprintf(sub, sizeof sub, "%s/checkpoints", dir);
            if (count_entries(sub, 0, NULL, 0) == 0) continue;
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
    DIR *top = opendir(dir);   /* the run files' temp files (the lock keeps their writers out) */
    if (top) {
        struct dirent *de;
        while ((de = readdir(top)))
            if (is_run_temp(de->d_name) && strncmp(de->d_name, "eval_", 5) != 0) {
                snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
                unlink(path);
            }
        closedir(top);
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

int st_rundir_is_export(const char *dir) {
    char path[ST_PATH_BUF + 32];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, F_OK) != 0) return 0;
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    return access(path, F_OK) != 0;
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
        int n = count_entries(dir, 1, first, sizeof first);
        if (n < 0) return st_fail(e, ST_ERR_IO, "%s: cannot read directory: %s", dir, strerror(errno));
        /* an export's config.json reads as a run's, and --force would replace it and its
         * tokenizer.json beside the model.safetensors they describe: refused even then, as
         * stretch export refuses a run directory */
        if (st_rundir_is_export(dir))
            return st_fail(e, ST_ERR_IO, "%s: holds an export (model.safetensors, no checkpoints/), not a run: "
                           "a run there would replace the export's config.json; choose another --out", dir);
        if (n > 0 && !force) {
            char cfg[ST_PATH_BUF];
            snprintf(cfg, sizeof cfg, "%s/config.json", dir);
            const int run = access(cfg, F_OK) == 0;
            if (advice) return st_fail(e, ST_ERR_IO, "%s: %s%s%s; %s", dir, run ? "already holds a run" :
                                       "directory is not empty (holds '", run ? "" : first, run ? "" : "')", advice);
            /* the command named in full: extend, which shares this check, has no --resume */
            char word[2 * ST_PATH_BUF];
            if (run)
                return st_fail(e, ST_ERR_IO, "%s: already holds a run; continue it with stretch train --resume %s, "
                               "replace it with --force, or choose another --out", dir,
                               st_shell_word(dir, word, sizeof word));
            return st_fail(e, ST_ERR_IO, "%s: directory is not empty (holds '%s'); use --force to train "
                           "there anyway or choose another --out", dir, first);
        }
        /* a checkpoints/ that is no directory cannot be made one: refused before --force
         * removes any of the run's files (they were lost, and the training failed after) */
        char cdir[ST_PATH_BUF + 16];
        snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
        if (lstat(cdir, &st) == 0 && !S_ISDIR(st.st_mode))
            return st_fail(e, ST_ERR_IO, "%s: exists and is not a directory (a run keeps its checkpoints there); "
                           "nothing was removed", cdir);
        *entries = n;
    }
    return ST_OK;
}

int st_rundir_check(const char *dir, int force, const char *advice, st_error *e) {
    int n;
    return inspect(dir, force, advice, &n, e);
}

int st_rundir_prepare(const char *dir, int force, const char *advice, int *lock_fd, st_error *e) {
    /* the directory first, so it can be locked before it is inspected: of two fresh runs
     * into one directory, the second finds it locked, or holding the first's files */
    int n, rc = inspect(dir, force, advice, &n, e);
    if (rc || (rc = st_mkdirs(dir, e)) || (rc = st_dir_lock(dir, "a run is writing it", lock_fd, e))) return rc;
    if ((rc = inspect(dir, force, advice, &n, e))) return rc;
    if (n > 0 && (rc = remove_run(dir, e))) return rc;
    if (n == 0) {   /* what count_entries passed over */
        st_rundir_clean_temps(dir);
        char pin[ST_PATH_BUF + 32];
        snprintf(pin, sizeof pin, "%s/init_from.json", dir);
        if (stale_pin(dir) && unlink(pin) == 0)
            st_log(ST_LOG_INFO, "%s: removed init_from.json of a start that wrote no config.json", dir);
    }
    char cdir[ST_PATH_BUF];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    return st_mkdirs(cdir, e);
}

int st_rundir_has_checkpoint(const char *dir) {
    char path[ST_PATH_BUF + 256];
    snprintf(path, sizeof path, "%s/checkpoints/latest", dir);
    if (access(path, F_OK) == 0) return 1;
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    int any = 0;
    struct dirent *de;
    while (!any && (de = readdir(d))) any = is_step_file(de->d_name, NULL) || !strcmp(de->d_name, "best.ckpt");
    closedir(d);
    return any;
}

int64_t st_rundir_newest_step(const char *dir) {
    char cdir[ST_PATH_BUF + 16];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    DIR *d = opendir(cdir);
    if (!d) return -1;
    int64_t best = -1, s;
    struct dirent *de;
    while ((de = readdir(d)))
        if (is_step_file(de->d_name, &s) && s > best) best = s;
    closedir(d);
    return best;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Delete step checkpoints beyond the newest `keep`. Every step file is read (a growing
 * array: train.keep_last goes to 2^20, and a fixed array would leave anything past it
 * unread, never pruned); out of memory, nothing is deleted this time. */
static void prune(const char *dir, int keep) {
    char cdir[ST_PATH_BUF], path[ST_PATH_BUF + 32];   /* + step_NNNNNNNN.ckpt */
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    DIR *d = opendir(cdir);
    if (!d) return;
    int64_t *steps = NULL;
    size_t n = 0, cap = 0;
    int oom = 0;
    struct dirent *de;
    while (!oom && (de = readdir(d))) {
        int64_t s;
        if (!is_step_file(de->d_name, &s)) continue;
        if (n == cap) {
            int64_t *grown = realloc(steps, (cap ? 2 * cap : 64) * sizeof *steps);
            if (!grown) { oom = 1; break; }
            steps = grown;
            cap = cap ? 2 * cap : 64;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (!oom && n > 0) {   /* (qsort's array must not be NULL, even empty) */
        qsort(steps, n, sizeof *steps, cmp_i64);
        for (size_t i = 0; i + (size_t)keep < n; i++) {
            snprintf(path, sizeof path, "%s/step_%08lld.ckpt", cdir, (long long)steps[i]);
            if (unlink(path) != 0)
                st_log(ST_LOG_WARN, "%s: cannot remove old checkpoint: %s", path, strerror(errno));
        }
    }
    free(steps);
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

/* Temp files of dead writers in dir (all of them, or only the run's own: is_run_temp). */
static int clean_dir(const char *dir, int run_files_only) {
    char path[ST_PATH_BUF + 256];   /* + a directory entry name */
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!dead_temp(de->d_name, run_files_only)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) == 0) removed++;
    }
    closedir(d);
    return removed;
}

void st_rundir_clean_temps(const char *dir) {
    char cdir[ST_PATH_BUF];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    const int removed = clean_dir(cdir, 0) + clean_dir(dir, 1);
    if (removed) st_log(ST_LOG_INFO, "%s: removed %d temp file(s) left by interrupted writes", dir, removed);
}

int st_rundir_trim_metrics(const char *dir, int64_t last_step, st_error *e) {
    char path[ST_PATH_BUF];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (access(path, F_OK) != 0) return ST_OK;
    size_t len = 0;
    char *text = st_read_file(path, &len, (size_t)1 << 30, e);
    if (!text) return e ? e->code : ST_ERR_IO;
    /* keep complete records whose step is <= last_step (records are {"step": N, ...});
     * a line that is not one JSON object (a partial last line from a killed process, or
     * a record torn by a full disk before writes were checked) is dropped */
    size_t out = 0;
    char *line = text;
    while (line < text + len) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl) break;
        long long step = -1;
        cJSON *rec = cJSON_ParseWithLength(line, (size_t)(nl - line));
        const cJSON *sv = cJSON_GetObjectItemCaseSensitive(rec, "step");
        if (cJSON_IsObject(rec) && cJSON_IsNumber(sv)) step = (long long)sv->valuedouble;
        cJSON_Delete(rec);
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

/* ------------------------------------------------- the checkpoint a source names ---- */

/* A directory without checkpoints/latest: a run whose pointer was deleted (its newest step
 * file, with a warning), a run killed after a validation wrote best.ckpt but before its
 * first step checkpoint (best.ckpt: a whole training state like a step file), a run's
 * checkpoints/ directory or an export named instead of the run (said so), or a run with
 * no checkpoint yet. */
static int resolve_without_latest(const char *dir, const char *latest, char *out, size_t n, st_error *e) {
    const int64_t step = st_rundir_newest_step(dir);
    if (step >= 0) {
        char name[64];
        snprintf(name, sizeof name, "step_%08lld.ckpt", (long long)step);
        st_rundir_path(dir, name, out, n);
        st_log(ST_LOG_WARN, "%s missing: taking the newest step checkpoint, %s", latest, out);
        return ST_OK;
    }
    st_rundir_path(dir, "best.ckpt", out, n);
    if (access(out, F_OK) == 0) {
        st_log(ST_LOG_WARN, "%s missing and no step checkpoint: taking %s (the state at the run's best validation)",
               latest, out);
        return ST_OK;
    }
    char probe[ST_PATH_BUF + 32];
    const size_t len = strlen(dir);
    snprintf(probe, sizeof probe, "%s/latest", dir);
    if (len >= 11 && !strcmp(dir + len - 11, "checkpoints") && (len == 11 || dir[len - 12] == '/') &&
        access(probe, F_OK) == 0)
        return st_fail(e, ST_ERR_IO, "%s: a run's checkpoints directory: give the run directory (%.*s) or one of its "
                       ".ckpt files", dir, len > 12 ? (int)(len - 12) : 1, len > 12 ? dir : ".");
    snprintf(probe, sizeof probe, "%s/model.safetensors", dir);
    if (access(probe, F_OK) == 0)
        return st_fail(e, ST_ERR_IO, "%s: an export (model.safetensors), not a run: give the run directory or a "
                       "checkpoint (an export is for other tools, and train.init_from reads its model.safetensors)", dir);
    return st_fail(e, ST_ERR_IO, "%s: no checkpoint yet (%s missing)", dir, latest);
}

/* The file name `latest` holds into name (cap bytes); *found 0 when latest does not
 * exist. White space around the name is ignored (the newline, a CR an editor adds,
 * spaces); a control character inside would be invisible in a message, so it is named. */
static int read_latest(const char *latest, char *name, size_t cap, int *found, st_error *e) {
    size_t len = 0;
    st_error tmp = {0};
    /* a pointer past 4 KiB is readable but damaged, as is one with a slash: exit 5 with
     * the others, not st_read_file's size refusal (exit 3, for a missing or unreadable file) */
    struct stat sb;
    if (stat(latest, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 4096) {
        *found = 1;
        return st_fail(e, ST_ERR_CHECKPOINT, "%s: malformed checkpoint pointer: %lld bytes, where it holds one file "
                       "name", latest, (long long)sb.st_size);
    }
    char *text = st_read_file(latest, &len, 4096, &tmp);
    *found = text != NULL || access(latest, F_OK) == 0;
    if (!text) return *found ? st_fail(e, tmp.code, "%s", tmp.msg) : ST_OK;   /* there, unreadable */
    size_t a = 0;
    while (len > 0 && isspace((unsigned char)text[len - 1])) len--;
    while (a < len && isspace((unsigned char)text[a])) a++;
    int rc = len == a || len - a >= cap || memchr(text + a, '/', len - a)
                 ? st_fail(e, ST_ERR_CHECKPOINT, "%s: malformed checkpoint pointer", latest) : ST_OK;
    for (size_t i = a; !rc && i < len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: malformed checkpoint pointer: byte %zu is the control character "
                         "0x%02x", latest, i, (unsigned)(unsigned char)text[i]);
    if (!rc) snprintf(name, cap, "%.*s", (int)(len - a), text + a);
    free(text);
    return rc;
}

int64_t st_run_latest_step(const char *dir) {
    char latest[ST_PATH_BUF], name[256];
    st_rundir_path(dir, "latest", latest, sizeof latest);
    int found;
    int64_t step = -1;
    return !read_latest(latest, name, sizeof name, &found, NULL) && found && is_step_file(name, &step) ? step : -1;
}

int st_checkpoint_resolve(const char *path_or_run_dir, char *out, size_t n, st_error *e) {
    struct stat st;
    if (stat(path_or_run_dir, &st) != 0)
        return st_fail(e, ST_ERR_IO, "%s: no such checkpoint or run directory", path_or_run_dir);
    if (!S_ISDIR(st.st_mode)) {
        snprintf(out, n, "%s", path_or_run_dir);
        return ST_OK;
    }
    char latest[ST_PATH_BUF], name[256];
    st_rundir_path(path_or_run_dir, "latest", latest, sizeof latest);
    /* A training beside a reader writes a step, points latest at it, then keep_last
     * deletes the oldest: a name read just before that can be gone a moment later, and
     * latest names the new file by then (or soon, on a slow disk: 10 reads over 0.5 s). */
    for (int attempt = 0; attempt < 10; attempt++) {
        if (attempt) usleep(50000);
        int found, rc = read_latest(latest, name, sizeof name, &found, e);
        if (rc) return rc;
        if (!found) return resolve_without_latest(path_or_run_dir, latest, out, n, e);
        st_rundir_path(path_or_run_dir, name, out, n);
        if (access(out, F_OK) == 0) return ST_OK;
    }
    return st_fail(e, ST_ERR_IO, "%s names %s, which does not exist (read 10 times over 0.5 s)", latest, name);
}
