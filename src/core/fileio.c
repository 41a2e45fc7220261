/* fileio.c - the one way stretch replaces a file, reads a whole (small) file, mkdir -p,
 * and the path-length rule.
 *
 * Atomic replacement: the content goes to PATH.tmp.PID.NONCE in the same directory (so
 * rename() stays on one file system), the file is flushed and fsync'ed, renamed over PATH,
 * and the directory is fsync'ed so the rename itself survives a power loss. A crash at any
 * point leaves the old file or the new one, never a torn one; a leftover temp file is
 * recognised by its ".tmp.PID" infix (st_rundir_clean_temps removes those of dead PIDs in a
 * run directory; every writer removes those of its own path, see remove_dead_temps).
 * The nonce keeps two writers of one path inside one process (sweep runs side by side)
 * from sharing a temp file. */
#define _GNU_SOURCE
#include "st_common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int st_path_check(const char *path, const char *what, st_error *e) {
    if (!path || !*path) return st_fail(e, ST_ERR_CONFIG, "%s: empty path", what);
    size_t n = strlen(path);
    if (n > ST_PATH_MAX)
        return st_fail(e, ST_ERR_CONFIG, "%s: path is %zu bytes long; stretch accepts paths of up to %d bytes "
                       "(it appends file names to them): %.200s...", what, n, ST_PATH_MAX, path);
    return ST_OK;
}

int st_dir_check(const char *dir, const char *what, st_error *e) {
    if (!dir || !*dir) return st_path_check(dir, what, e);
    size_t n = strlen(dir);
    if (n > ST_PATH_MAX - ST_DIR_ROOM)
        return st_fail(e, ST_ERR_CONFIG, "%s: directory path is %zu bytes long; stretch accepts up to %d bytes for a "
                       "directory it writes into (its %d-byte path limit less %d for the file names it adds): "
                       "%.200s...", what, n, ST_PATH_MAX - ST_DIR_ROOM, ST_PATH_MAX, ST_DIR_ROOM, dir);
    return ST_OK;
}

int st_mkdirs(const char *path, st_error *e) {
    int rc = st_path_check(path, "directory", e);
    if (rc) return rc;
    char *buf = strdup(path);
    if (!buf) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                rc = st_fail(e, ST_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
                break;
            }
            *p = saved;
            if (!saved) break;
        }
    }
    free(buf);
    struct stat st;
    if (!rc && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = st_fail(e, ST_ERR_IO, "%s: not a directory", path);
    return rc;
}

const char *st_shell_word(const char *path, char *buf, size_t n) {
    if (!n) return buf;
    int plain = *path != 0;
    for (const unsigned char *c = (const unsigned char *)path; *c && plain; c++)   /* UTF-8 stays readable */
        plain = isalnum(*c) || *c >= 0x80 || strchr("_./:@%+=,-", *c) != NULL;
    if (plain) { snprintf(buf, n, "%s", path); return buf; }
    size_t k = 0;
    buf[k++] = '\'';
    for (const char *c = path; *c && k + 5 < n; c++) {
        if (*c == '\'') { memcpy(buf + k, "'\\''", 4); k += 4; }
        else buf[k++] = *c;
    }
    if (k + 1 < n) buf[k++] = '\'';
    buf[k < n ? k : n - 1] = 0;
    return buf;
}

/* fsync of the directory holding path: makes the rename durable. */
static void fsync_dir_of(const char *path) {
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *d = dir;
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else d = ".";
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);   /* some file systems refuse fsync on directories: not an error */
        close(fd);
    }
    free(dir);
}

int st_replaceable_check(const char *path, const char *what, st_error *e) {
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) return ST_OK;   /* absent: created; a file: replaced */
    if (S_ISDIR(st.st_mode)) return st_fail(e, ST_ERR_IO, "%s: is a directory", what);
    const int link = S_ISLNK(st.st_mode);
    return st_fail(e, ST_ERR_IO, "%s: not a regular file (%s): stretch writes a new file and renames it over the "
                   "path, which would replace the %s, not write %s; remove it or give a regular file's path", what,
                   link ? "a symbolic link" : "a device, FIFO or socket", link ? "link" : "file",
                   link ? "its target" : "into it");
}

/* The temp files of path (PATH.tmp.PID[.NONCE]) whose writer died: a SIGKILL, or a Ctrl-C
 * before a handler was installed (a token cache or an export being written when the user
 * stopped `stretch data`, `export` or a training still loading its data). Outside a run
 * directory nothing else ever removed them, and each held up to a whole cache's or
 * model's bytes. The next writer of the same path removes them: regular files only, never
 * this process's (sweep runs side by side) nor a live PID's (possibly reused: kept). */
static void remove_dead_temps(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const size_t blen = strlen(base);
    if (!blen) return;   /* "DIR/": no file name to match */
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    DIR *d = dir ? opendir(dir) : NULL;
    int removed = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *n = de->d_name, *p = n + blen + 5;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0 || !isdigit((unsigned char)*p))
            continue;
        char *end;
        errno = 0;
        const long pid = strtol(p, &end, 10);
        if (errno || pid <= 0 || (*end && *end != '.') || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            unlinkat(dirfd(d), n, 0) == 0)
            removed++;
    }
    if (d) closedir(d);
    if (removed) st_log(ST_LOG_INFO, "%s: removed %d temp file(s) left by interrupted writes", path, removed);
    free(dir);
}

FILE *st_atomic_open(st_atomic_file *a, const char *path, st_error *e) {
    memset(a, 0, sizeof *a);
    if (st_path_check(path, "output file", e) || st_replaceable_check(path, path, e)) return NULL;
    remove_dead_temps(path);
    size_t n = strlen(path) + 64;
    a->path = strdup(path);
    a->tmp = malloc(n);
    if (!a->path || !a->tmp) {
        st_atomic_abort(a);
        st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path);
        return NULL;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        uint64_t nonce = st_hash64((uint64_t)(st_time() * 1e9), (uint64_t)(uintptr_t)a + (uint64_t)attempt);
        snprintf(a->tmp, n, "%s.tmp.%ld.%06llx", path, (long)getpid(), (unsigned long long)(nonce & 0xffffff));
        int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) break;
        /* the replacement keeps the permissions of the file it replaces: a run made private
         * (chmod go-rwx) had its config.json, metrics.jsonl and checkpoints rewritten 0644 */
        struct stat old;
        if (stat(path, &old) == 0 && S_ISREG(old.st_mode)) (void)fchmod(fd, old.st_mode & 07777);
        a->f = fdopen(fd, "wb");
        if (!a->f) { close(fd); unlink(a->tmp); break; }
        return a->f;
    }
    /* name the user's path: the temporary name means nothing to them */
    st_fail(e, ST_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    st_atomic_abort(a);
    return NULL;
}

void st_atomic_abort(st_atomic_file *a) {
    if (a->f) { fclose(a->f); a->f = NULL; }
    if (a->tmp && a->path) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
}

int st_atomic_finish(st_atomic_file *a, st_error *e) {
    ST_ASSERT(a->f && a->tmp && a->path);
    int bad = ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0;
    int err = errno;
    if (fclose(a->f) != 0 && !bad) { bad = 1; err = errno; }
    a->f = NULL;
    if (bad) {
        int rc = st_fail(e, ST_ERR_IO, "%s: write failed: %s", a->path, strerror(err ? err : EIO));
        st_atomic_abort(a);
        return rc;
    }
    return ST_OK;
}

int st_atomic_publish(st_atomic_file *a, st_error *e) {
    ST_ASSERT(!a->f && a->tmp && a->path);
    if (rename(a->tmp, a->path) != 0) {
        int rc = st_fail(e, ST_ERR_IO, "%s: cannot replace: %s", a->path, strerror(errno));
        st_atomic_abort(a);
        return rc;
    }
    fsync_dir_of(a->path);
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
    return ST_OK;
}

int st_atomic_commit(st_atomic_file *a, st_error *e) {
    int rc = st_atomic_finish(a, e);
    return rc ? rc : st_atomic_publish(a, e);
}

int st_link_atomic(const char *existing, const char *path, st_error *e) {
    int rc = st_path_check(path, "output file", e);
    if (!rc) rc = st_replaceable_check(path, path, e);
    if (rc) return rc;
    remove_dead_temps(path);
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path);
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    unlink(tmp);
    if (link(existing, tmp) != 0)
        rc = st_fail(e, ST_ERR_IO, "%s: cannot link to %s: %s", tmp, existing, strerror(errno));
    else if (rename(tmp, path) != 0) {
        rc = st_fail(e, ST_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
    } else
        fsync_dir_of(path);
    free(tmp);
    return rc;
}

int st_write_file_atomic(const char *path, const void *data, size_t n, st_error *e) {
    st_atomic_file a;
    st_error local = {0};
    if (!e) e = &local;
    if (!st_atomic_open(&a, path, e)) return e->code;
    if (n && fwrite(data, 1, n, a.f) != n) {
        int rc = st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        st_atomic_abort(&a);
        return rc;
    }
    return st_atomic_commit(&a, e);
}

int st_open_regular(const char *path, int flags, struct stat *st, st_error *e) {
    const int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) { st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    if (fstat(fd, st) != 0) {
        const int err = errno;
        close(fd);
        st_fail(e, ST_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        st_fail(e, ST_ERR_IO, "%s: %s", path, S_ISDIR(st->st_mode) ? "is a directory" : "not a regular file");
        return -1;
    }
    return fd;
}

char *st_read_fd(int fd, const char *path, int64_t size, st_error *e) {
    char *buf = malloc((size_t)size + 1);
    if (!buf) { close(fd); st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path); return NULL; }
    int64_t got = 0;
    while (got < size) {
        const ssize_t r = read(fd, buf + got, (size_t)(size - got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            st_fail(e, ST_ERR_IO, "%s: read error: %s", path, r < 0 ? strerror(errno) : "file shrank");
            return NULL;
        }
        got += r;
    }
    close(fd);
    buf[got] = 0;
    return buf;
}

char *st_read_file(const char *path, size_t *len, size_t max_bytes, st_error *e) {
    struct stat st;
    const int fd = st_open_regular(path, O_RDONLY, &st, e);
    if (fd < 0) return NULL;
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        st_fail(e, ST_ERR_IO, "%s: larger than %zu bytes", path, max_bytes);
        return NULL;
    }
    char *buf = st_read_fd(fd, path, (int64_t)st.st_size, e);
    if (buf && len) *len = (size_t)st.st_size;
    return buf;
}

int st_dir_lock(const char *dir, const char *what, int *fd, st_error *e) {
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) return st_fail(e, ST_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0) return ST_OK;
    const int err = errno;
    close(*fd);
    *fd = -1;
    if (err == EWOULDBLOCK)
        return st_fail(e, ST_ERR_IO, "%s: in use by another stretch process (%s); wait for it to finish or stop it",
                       dir, what);
    return st_fail(e, ST_ERR_IO, "%s: cannot lock: %s", dir, strerror(err));
}
