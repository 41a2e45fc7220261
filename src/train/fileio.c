/* fileio.c - small checked file helpers for src/train: whole-file reads, mkdir -p, and
 * atomic replacement (write a temp file in the same directory, fsync it, rename it over
 * the target, fsync the directory), so a crash leaves the old or the new file, never a
 * torn one. Errors are ST_ERR_IO naming the path and the system's reason. */
#define _GNU_SOURCE
#include "train_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int st_mkdirs(const char *path, st_error *e) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return st_fail(e, ST_ERR_IO, "%s: path too long", path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return st_fail(e, ST_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return st_fail(e, ST_ERR_IO, "%s: not a directory", path);
    return ST_OK;
}

char *st_read_file(const char *path, size_t *len, size_t max_bytes, st_error *e) {
    FILE *f = fopen(path, "rb");
    if (!f) { st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > max_bytes) {
                st_fail(e, ST_ERR_IO, "%s: larger than %zu bytes", path, max_bytes);
                free(buf); buf = NULL; break;
            }
            char *q = realloc(buf, cap * 2);
            if (!q) { free(buf); buf = NULL; break; }
            buf = q;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) { st_fail(e, ST_ERR_IO, "%s: read error", path); free(buf); buf = NULL; }
            break;
        }
    }
    if (!buf && e && !e->code) st_fail(e, ST_ERR_MEMORY, "%s: out of memory reading the file", path);
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = n; }
    return buf;
}

static int fsync_dir_of(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int st_tmp_commit(FILE *f, const char *tmp, const char *path, st_error *e) {
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        unlink(tmp);
        return st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return st_fail(e, ST_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(err));
    }
    fsync_dir_of(path);
    return ST_OK;
}

FILE *st_tmp_open(const char *path, char *tmp, size_t n, st_error *e) {
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) st_fail(e, ST_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    return f;
}

int st_write_file_atomic(const char *path, const void *data, size_t n, st_error *e) {
    char tmp[4200];
    FILE *f = st_tmp_open(path, tmp, sizeof tmp, e);
    if (!f) return ST_ERR_IO;
    if (n && fwrite(data, 1, n, f) != n) {
        fclose(f);
        unlink(tmp);
        return st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return st_tmp_commit(f, tmp, path, e);
}
