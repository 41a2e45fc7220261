/* fileio.c - whole-file reads for src/train (atomic writes and mkdir -p are the shared
 * helpers of src/core/fileio.c). Errors are ST_ERR_IO naming the path and the reason. */
#define _GNU_SOURCE
#include "train_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *st_read_file(const char *path, size_t *len, size_t max_bytes, st_error *e) {
    /* O_NONBLOCK: a FIFO in place of the file (a run directory's config.json or `latest`)
     * must not block open() waiting for a writer; it is refused below, as data files,
     * checkpoints and tokenizers are. The flag changes nothing for regular files. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        st_fail(e, ST_ERR_IO, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
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
            /* fopen opens a directory; reading it fails with EISDIR */
            if (ferror(f)) {
                if (errno == EISDIR) st_fail(e, ST_ERR_IO, "%s: is a directory", path);
                else st_fail(e, ST_ERR_IO, "%s: read error: %s", path, strerror(errno));
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    if (!buf && e && !e->code) st_fail(e, ST_ERR_MEMORY, "%s: out of memory reading the file", path);
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = n; }
    return buf;
}
