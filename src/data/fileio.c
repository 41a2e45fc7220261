/* fileio.c - the file plumbing of the data module: a block-streaming reader that never
 * holds a whole corpus (WikiText-103 is 540 MB), the identity of a source file for cache
 * keys, small-file reads, the writable-directory probe, and
 * the growable token vector. */
#define _GNU_SOURCE
#include "data/data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* 16 MiB blocks: large enough that read() cost is negligible, small next to the tokens. */
#define SD_BLOCK ((int64_t)16 << 20)
#define SD_SAMPLE ((int64_t)1 << 20)   /* read size of the identity checksums */

const unsigned char st_sd_is_space[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1,
};

int st_sd_vec_grow(sd_vec *a, int64_t need) {
    if (need <= a->cap) return 0;
    int64_t cap = a->cap ? a->cap : 1024;
    while (cap < need) cap += cap / 2;
    int32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    a->v = v;
    a->cap = cap;
    return 0;
}

void st_sd_vec_free(sd_vec *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

int64_t st_sd_safe_cut(const char *buf, int64_t len) {
    for (int64_t p = len - 1; p > 0; p--)
        if (buf[p - 1] == '\n' && buf[p] != '\n' && buf[p] != '\r') return p;
    return 0;
}

static int64_t count_newlines(const char *s, int64_t n) {
    int64_t c = 0;
    const char *end = s + n;
    while (s < end && (s = memchr(s, '\n', (size_t)(end - s)))) { c++; s++; }
    return c;
}

int64_t st_sd_lines_before(const char *path, int64_t off) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    char buf[1 << 16];
    int64_t lines = 0, pos = 0;
    while (pos < off) {
        ssize_t r = pread(fd, buf, (size_t)(off - pos < (int64_t)sizeof buf ? off - pos : (int64_t)sizeof buf), (off_t)pos);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        lines += count_newlines(buf, r);
        pos += r;
    }
    close(fd);
    return lines;
}

int st_sd_stream(const char *path, int64_t begin, int64_t end, sd_block_fn fn, void *user, st_error *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int rc = ST_OK;
    /* STRETCH_DATA_BLOCK (bytes) shrinks the block so tests can cross block boundaries */
    int64_t block = SD_BLOCK;
    const char *env = getenv("STRETCH_DATA_BLOCK");
    if (env && atoll(env) >= 16) block = atoll(env);
    int64_t cap = end - begin < block ? end - begin + 1 : block;
    char *buf = malloc((size_t)cap);
    if (!buf) { close(fd); return st_fail(e, ST_ERR_MEMORY, "%s: out of memory for a %lld-byte read buffer", path, (long long)cap); }
    int64_t len = 0, at = begin, next = begin, lines = 0;  /* buf[0] is at offset `at` */
    for (;;) {
        while (len < cap && next < end) {
            int64_t want = cap - len < end - next ? cap - len : end - next;
            ssize_t r = pread(fd, buf + len, (size_t)want, (off_t)next);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) { rc = st_fail(e, ST_ERR_IO, "%s: read error at byte %lld: %s", path, (long long)next, strerror(errno)); goto done; }
            if (r == 0) { rc = st_fail(e, ST_ERR_IO, "%s: file shrank while reading (at byte %lld of %lld)", path, (long long)next, (long long)end); goto done; }
            const char *nul = memchr(buf + len, 0, (size_t)r);
            if (nul) {
                int64_t off = next + (nul - (buf + len));
                int64_t line =
                    st_sd_lines_before(path, begin) + lines + count_newlines(buf + len, nul - (buf + len)) + 1;
                rc = st_fail(e, ST_ERR_DATA, "%s: line %lld: NUL byte at offset %lld: this looks like a binary file; only text is supported",
                             path, (long long)line, (long long)off);
                goto done;
            }
            lines += count_newlines(buf + len, r);
            len += r;
            next += r;
        }
        int final = next >= end;
        int64_t used = 0;
        if ((rc = fn(user, buf, len, at, final, &used, e)) != ST_OK) goto done;
        if (final) break;
        ST_ASSERT(used >= 0 && used <= len);
        if (used == 0) {   /* one unit longer than the buffer: grow it */
            char *nb = realloc(buf, (size_t)cap * 2);
            if (!nb) { rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory growing the read buffer to %lld bytes", path, (long long)cap * 2); goto done; }
            buf = nb;
            cap *= 2;
            continue;
        }
        memmove(buf, buf + used, (size_t)(len - used));
        len -= used;
        at += used;
    }
done:
    free(buf);
    close(fd);
    return rc;
}

int st_sd_identity_of(const char *path, sd_identity *id, st_error *e) {
    memset(id, 0, sizeof *id);
    /* read-only opens of this module add O_NONBLOCK (st_open_regular's reason): a FIFO in
     * place of a file must not block open() waiting for a writer */
    struct stat st;
    const int fd = st_open_regular(path, O_RDONLY, &st, e);
    if (fd < 0) return e ? e->code : ST_ERR_IO;
    id->size = (uint64_t)st.st_size;
    id->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    /* CRC32 and Adler-32 of the whole file: an edit that kept size and mtime (an archive
     * packed with a fixed --mtime, a copy with preserved timestamps) anywhere in the file
     * changes them. Reading the file costs ~0.1 s per 100 MB; the tokenization a stale
     * cache would stand for costs far more (sampling the first and last MiB missed
     * edits in between). */
    char *buf = malloc((size_t)SD_SAMPLE);
    if (!buf) { close(fd); return st_fail(e, ST_ERR_MEMORY, "out of memory"); }
    uint32_t crc = 0;
    uLong adler = adler32(0L, Z_NULL, 0);
    int64_t got = 0;
    while (got < (int64_t)st.st_size) {
        const int64_t want = (int64_t)st.st_size - got < SD_SAMPLE ? (int64_t)st.st_size - got : SD_SAMPLE;
        ssize_t r = pread(fd, buf, (size_t)want, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            return st_fail(e, ST_ERR_IO, "%s: read error: %s", path, r < 0 ? strerror(errno) : "short read");
        }
        crc = st_crc32(crc, buf, (size_t)r);
        adler = adler32(adler, (const Bytef *)buf, (uInt)r);
        got += r;
    }
    id->crc32 = crc;
    id->sample = (uint64_t)crc << 32 | (uint32_t)adler;
    free(buf);
    close(fd);
    return ST_OK;
}

char *st_sd_read_file(const char *path, int64_t *n, int64_t max_bytes, st_error *e) {
    struct stat st;
    const int fd = st_open_regular(path, O_RDONLY, &st, e);
    if (fd < 0) return NULL;
    if (st.st_size > max_bytes) {
        close(fd);
        st_fail(e, ST_ERR_DATA, "%s: %lld bytes is larger than the %lld allowed here", path, (long long)st.st_size,
                (long long)max_bytes);
        return NULL;
    }
    char *buf = st_read_fd(fd, path, (int64_t)st.st_size, e);
    if (buf) *n = (int64_t)st.st_size;
    return buf;
}

int st_sd_dir_writable(const char *dir) {
    if (st_mkdirs(dir, NULL) != ST_OK) return 0;
    /* access(W_OK) is not enough on read-only mounts with permissive modes: try it. */
    char probe[ST_PATH_BUF];
    snprintf(probe, sizeof probe, "%s/.probe.%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    close(fd);
    unlink(probe);
    return 1;
}
