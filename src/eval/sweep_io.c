/* sweep_io.c - the few file operations a sweep needs: read a text file, write one
 * atomically (temp file + rename), mkdir -p, existence tests. */
#include "sweep_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *sweep_read_text(const char *path, size_t *len, st_error *e) {
    FILE *f = fopen(path, "rb");
    if (!f) { st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (n < cap) break;
        if (cap >= ((size_t)64 << 20)) { free(buf); buf = NULL; st_fail(e, ST_ERR_IO, "%s: larger than 64 MiB", path); break; }
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) { free(buf); buf = NULL; st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path); break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return NULL;
    if (err) { free(buf); st_fail(e, ST_ERR_IO, "%s: read error", path); return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int sweep_write_text(const char *path, const char *text, st_error *e) {
    char tmp[2200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return st_fail(e, ST_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    int bad = fputs(text, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return st_fail(e, ST_ERR_IO, "%s: cannot write", path);
    }
    return ST_OK;
}

int sweep_mkdirs(const char *path, st_error *e) {
    char buf[2048];
    if (strlen(path) >= sizeof buf) return st_fail(e, ST_ERR_IO, "%s: path too long", path);
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return st_fail(e, ST_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
            if (!sweep_is_dir(buf)) return st_fail(e, ST_ERR_IO, "%s: exists and is not a directory", buf);
            *p = c;
            if (c == 0) break;
        }
    }
    return ST_OK;
}

int sweep_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int sweep_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
