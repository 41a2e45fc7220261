/* sweep_io.c - the few file operations a sweep needs: read a text file,
 * existence tests (writing goes through st_write_file_atomic, mkdir -p through st_mkdirs). */
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
    const int err = ferror(f) ? errno : 0;   /* EISDIR: fopen opens a directory, fread fails */
    fclose(f);
    if (!buf) return NULL;
    if (err) {
        free(buf);
        if (err == EISDIR) st_fail(e, ST_ERR_IO, "%s: is a directory", path);
        else st_fail(e, ST_ERR_IO, "%s: read error: %s", path, strerror(err));
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int sweep_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int sweep_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
