/* cache.c - token caches: a tokenized split (or a trained vocabulary) stored as a
 * fixed header and zlib data, written atomically, verified completely on read.
 *
 * Header, 128 bytes, little-endian (data/README.md documents it too):
 *     0  magic "STRCACHE"            8  u32 version (2)      12 u32 type (1 tokens, 2 vocab)
 *    16  u64 tokenizer hash         24  u64 source size     32 i64 source mtime (ns)
 *    40  u64 source checksums (CRC32 of the whole file << 32 | its Adler-32)
 *    48  i64 range begin            56  i64 range end       64 i64 count (tokens | payload bytes)
 *    72  i64 text bytes             80  u32 vocab size      84 u32 payload CRC32 (see below)
 *    88  char[16] tokenizer spec   104  u64 payload size    112 u32 byte planes (type 1)
 *   116  u32 ids per block (type 1) 120 u32 reserved (0)    124 u32 CRC32 of bytes 0..123
 *   128  payload
 * type 1 (token ids): the ids are cut into blocks of 2^20; each block is stored as its
 *   `planes` little-endian byte planes (all low bytes of the block, then all second
 *   bytes, ...; planes = bytes needed for vocab - 1, so 2 for a 33k vocabulary) and
 *   compressed as its own zlib stream (level 1, Z_RLE: the high planes are long runs).
 *   Payload = block table (per block: u32 compressed size, u32 CRC32 of its planes), then
 *   the streams in order; the header CRC is over the table. Independent blocks let
 *   reading and writing run on all cores (OpenMP) with output independent of threads.
 * type 2 (vocabulary): one zlib stream of the tokenizer JSON; the CRC is over the JSON.
 * A reader accepts the file only if every key field matches, every CRC matches, the
 * streams inflate to exactly the sizes they should and every id is < vocab size.
 * Anything else is a miss, logged with the reason, and the caller rebuilds. */
#include "data/data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC "STRCACHE"
#define VERSION 2   /* 2: the source checksums cover the whole file */
#define HDR 128
#define BLOCK_IDS ((int64_t)1 << 20)

typedef struct header {
    uint32_t version, type;
    uint64_t tok_hash, size, sample;
    int64_t mtime, begin, end, count, bytes;
    uint32_t vocab, crc;
    char spec[16];
    uint64_t zsize;
    uint32_t planes, block;
} header;

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i); }
static uint32_t get32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static void header_pack(const header *h, unsigned char *b) {
    memset(b, 0, HDR);
    memcpy(b, MAGIC, 8);
    put32(b + 8, h->version);
    put32(b + 12, h->type);
    put64(b + 16, h->tok_hash);
    put64(b + 24, h->size);
    put64(b + 32, (uint64_t)h->mtime);
    put64(b + 40, h->sample);
    put64(b + 48, (uint64_t)h->begin);
    put64(b + 56, (uint64_t)h->end);
    put64(b + 64, (uint64_t)h->count);
    put64(b + 72, (uint64_t)h->bytes);
    put32(b + 80, h->vocab);
    put32(b + 84, h->crc);
    memcpy(b + 88, h->spec, 16);
    put64(b + 104, h->zsize);
    put32(b + 112, h->planes);
    put32(b + 116, h->block);
    put32(b + 124, st_crc32(0, b, 124));
}

/* NULL when fine, else the reason the header is unusable */
static const char *header_unpack(const unsigned char *b, header *h) {
    if (memcmp(b, MAGIC, 8) != 0) return "bad magic (not a stretch cache file)";
    if (get32(b + 124) != st_crc32(0, b, 124)) return "header checksum mismatch (corrupt)";
    h->version = get32(b + 8);
    if (h->version != VERSION) return "written by another cache format version";
    h->type = get32(b + 12);
    h->tok_hash = get64(b + 16);
    h->size = get64(b + 24);
    h->mtime = (int64_t)get64(b + 32);
    h->sample = get64(b + 40);
    h->begin = (int64_t)get64(b + 48);
    h->end = (int64_t)get64(b + 56);
    h->count = (int64_t)get64(b + 64);
    h->bytes = (int64_t)get64(b + 72);
    h->vocab = get32(b + 80);
    h->crc = get32(b + 84);
    memcpy(h->spec, b + 88, 16);
    h->spec[15] = 0;
    h->zsize = get64(b + 104);
    h->planes = get32(b + 112);
    h->block = get32(b + 116);
    return NULL;
}

static void header_from_key(header *h, const sd_cache_key *k, uint32_t type) {
    memset(h, 0, sizeof *h);
    h->version = VERSION;
    h->type = type;
    h->tok_hash = k->tok_hash;
    h->size = k->src.size;
    h->mtime = k->src.mtime_ns;
    h->sample = k->src.sample;
    h->begin = k->begin;
    h->end = k->end;
    h->vocab = (uint32_t)k->vocab_size;
    snprintf(h->spec, sizeof h->spec, "%s", k->spec);
}

static const char *key_mismatch(const header *h, const sd_cache_key *k, uint32_t type) {
    if (h->type != type) return "wrong cache type";
    if (h->size != k->src.size || h->mtime != k->src.mtime_ns || h->sample != k->src.sample)
        return "the source file changed (size, mtime or content)";
    if (h->begin != k->begin || h->end != k->end) return "the split's byte range changed";
    if (strncmp(h->spec, k->spec, 15) != 0) return "made with another tokenizer setting";
    if (type == 1 && (h->tok_hash != k->tok_hash || h->vocab != (uint32_t)k->vocab_size))
        return "made with a different tokenizer (hash mismatch)";
    return NULL;
}

/* ---- writing ---- */

/* The file goes through st_atomic_open (temp file beside path); this writes the header and
 * the block table `pre` over the placeholder at the start, then commits (fsync + rename). */
static int commit_temp(st_atomic_file *a, const header *h, const void *pre, size_t npre, st_error *e) {
    unsigned char hb[HDR];
    header_pack(h, hb);
    FILE *f = a->f;
    if (fseek(f, 0, SEEK_SET) != 0 || fwrite(hb, 1, HDR, f) != HDR || (npre && fwrite(pre, 1, npre, f) != npre)) {
        int rc = st_fail(e, ST_ERR_IO, "%s: write failed: %s", a->path, strerror(errno));
        st_atomic_abort(a);
        return rc;
    }
    return st_atomic_commit(a, e);
}

static uint32_t planes_for(int32_t vocab) {
    uint32_t p = 1;
    while (p < 4 && (uint64_t)(vocab - 1) >> (8 * p)) p++;
    return p;
}

/* ids[0..m) -> planes (m * np bytes) */
static void shuffle(const int32_t *ids, int64_t m, uint32_t np, unsigned char *out) {
    for (uint32_t b = 0; b < np; b++)
        for (int64_t i = 0; i < m; i++) out[b * m + i] = (unsigned char)((uint32_t)ids[i] >> (8 * b));
}

static int deflate_rle(const unsigned char *in, size_t n, unsigned char *out, size_t cap, size_t *zn) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15, 8, Z_RLE) != Z_OK) return -1;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    *zn = z.total_out;
    deflateEnd(&z);
    return r == Z_STREAM_END ? 0 : -1;
}

int st_sd_cache_write_tokens(const char *path, const sd_cache_key *key, const int32_t *tokens, int64_t n, int64_t bytes,
                          st_error *e) {
    header h;
    header_from_key(&h, key, 1);
    h.count = n;
    h.bytes = bytes;
    h.planes = planes_for(key->vocab_size);
    h.block = (uint32_t)BLOCK_IDS;
    int64_t nblk = (n + BLOCK_IDS - 1) / BLOCK_IDS;
    int R = omp_get_max_threads();
    size_t pcap = (size_t)BLOCK_IDS * h.planes, zcap = compressBound((uLong)pcap);
    unsigned char *table = calloc((size_t)(nblk ? nblk : 1), 8);
    unsigned char **pb = calloc((size_t)R, sizeof *pb), **zb = calloc((size_t)R, sizeof *zb);
    size_t *zn = calloc((size_t)R, sizeof *zn);
    int rc = ST_OK, fail = 0;
    st_atomic_file out = {0};
    FILE *f = NULL;
    if (!table || !pb || !zb || !zn) { rc = st_fail(e, ST_ERR_MEMORY, "out of memory"); goto out; }
    for (int k = 0; k < R; k++)
        if (!(pb[k] = malloc(pcap)) || !(zb[k] = malloc(zcap))) { rc = st_fail(e, ST_ERR_MEMORY, "out of memory"); goto out; }
    if (!(f = st_atomic_open(&out, path, e))) { rc = e ? e->code : ST_ERR_IO; goto out; }
    unsigned char zero[HDR] = {0};
    if (fwrite(zero, 1, HDR, f) != HDR || (nblk && fwrite(table, 1, (size_t)nblk * 8, f) != (size_t)nblk * 8)) fail = 1;
    uint64_t total = (uint64_t)nblk * 8;
    /* rounds of R blocks: compress in parallel, write in order */
    for (int64_t b0 = 0; b0 < nblk && !fail; b0 += R) {
        int nb = (int)(nblk - b0 < R ? nblk - b0 : R);
        int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
        for (int k = 0; k < nb; k++) {
            int64_t o = (b0 + k) * BLOCK_IDS, m = n - o < BLOCK_IDS ? n - o : BLOCK_IDS;
            shuffle(tokens + o, m, h.planes, pb[k]);
            put32(table + (b0 + k) * 8 + 4, st_crc32(0, pb[k], (size_t)m * h.planes));
            bad |= deflate_rle(pb[k], (size_t)m * h.planes, zb[k], zcap, &zn[k]) != 0;
        }
        if (bad) { rc = st_fail(e, ST_ERR_IO, "%s: zlib deflate failed", path); break; }
        for (int k = 0; k < nb && !fail; k++) {
            put32(table + (b0 + k) * 8, (uint32_t)zn[k]);
            fail = fwrite(zb[k], 1, zn[k], f) != zn[k];
            total += zn[k];
        }
    }
    if (rc == ST_OK && fail) rc = st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (rc == ST_OK) {
        h.zsize = total;
        h.crc = st_crc32(0, table, (size_t)nblk * 8);
        rc = commit_temp(&out, &h, table, (size_t)nblk * 8, e);
        f = NULL;
    }
out:
    if (f) st_atomic_abort(&out);
    for (int k = 0; pb && k < R; k++) free(pb[k]);
    for (int k = 0; zb && k < R; k++) free(zb[k]);
    free(pb);
    free(zb);
    free(zn);
    free(table);
    return rc;
}

int st_sd_cache_write_tokenizer(const char *path, const sd_cache_key *key, const st_tokenizer *t, st_error *e) {
    char *txt = st_sd_tok_to_json(t, e);
    if (!txt) return e ? e->code : ST_ERR_MEMORY;
    header h;
    header_from_key(&h, key, 2);
    h.tok_hash = t->hash;
    h.vocab = (uint32_t)t->vocab_size;
    h.count = (int64_t)strlen(txt);
    h.crc = st_crc32(0, txt, (size_t)h.count);
    uLongf zn = compressBound((uLong)h.count);
    unsigned char *z = malloc(zn);
    st_atomic_file out;
    FILE *f = NULL;
    int rc = ST_OK;
    if (!z) rc = st_fail(e, ST_ERR_MEMORY, "out of memory");
    else if (compress2(z, &zn, (const Bytef *)txt, (uLong)h.count, 6) != Z_OK) rc = st_fail(e, ST_ERR_IO, "%s: zlib failed", path);
    else if (!(f = st_atomic_open(&out, path, e))) rc = e ? e->code : ST_ERR_IO;
    else {
        unsigned char zero[HDR] = {0};
        if (fwrite(zero, 1, HDR, f) != HDR || fwrite(z, 1, zn, f) != zn) {
            rc = st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            st_atomic_abort(&out);
        } else {
            h.zsize = zn;
            rc = commit_temp(&out, &h, NULL, 0, e);
        }
    }
    free(z);
    free(txt);
    return rc;
}

/* ---- reading ---- */

/* 0 and the header when the file has one; -1 when absent (silent), -2 when shorter than a header */
static int read_header(int fd, header *h, const char **why, int64_t *size) {
    unsigned char hb[HDR];
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    *size = st.st_size;
    if (st.st_size < HDR || pread(fd, hb, HDR, 0) != HDR) return -2;
    *why = header_unpack(hb, h);
    return 0;
}

static int read_exact(int fd, void *buf, size_t n, int64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* inflate exactly n bytes from one complete zlib stream of zn bytes */
static const char *inflate_exact(const unsigned char *z, size_t zn, unsigned char *out, size_t n) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit(&s) != Z_OK) return "zlib init failed";
    unsigned char spill[64];
    s.next_in = (Bytef *)z;
    s.avail_in = (uInt)zn;
    s.next_out = out;
    s.avail_out = (uInt)n;
    int r = inflate(&s, Z_FINISH);
    const char *why = NULL;
    if (r == Z_BUF_ERROR && s.avail_out == 0 && s.avail_in > 0) {
        s.next_out = spill;   /* more output than the header promised? */
        s.avail_out = sizeof spill;
        r = inflate(&s, Z_FINISH);
        if (s.avail_out != sizeof spill) why = "holds more data than the header says (corrupt)";
    }
    if (!why && r != Z_STREAM_END)
        why = r == Z_BUF_ERROR || r == Z_OK ? "truncated (a compressed stream ends early)" : "corrupt compressed data";
    if (!why && (s.total_out != n || s.avail_in != 0)) why = "compressed sizes do not match the header (corrupt)";
    inflateEnd(&s);
    return why;
}

static void log_miss(const char *path, const char *why) {
    /* a stale cache (source or tokenizer changed) is routine; corruption is not */
    int routine = strstr(why, "changed") || strstr(why, "another") || strstr(why, "different");
    st_log(routine ? ST_LOG_INFO : ST_LOG_WARN, "cache %s: %s; rebuilding", path, why);
}

/* Open a cache file and read its header: the fd (>= 0), or -1 when there is no usable file
 * to even look at. *why is set when the header is truncated or does not match `key` for
 * this kind of payload (1 tokens, 2 tokenizer): the caller then logs and rebuilds. */
static int open_cache(const char *path, const sd_cache_key *key, int kind, header *h,
                      const char **why, int64_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    memset(h, 0, sizeof *h);
    *why = NULL;
    *size = 0;
    int hr = read_header(fd, h, why, size);
    if (hr == -1) { close(fd); return -1; }
    if (hr == -2) *why = "truncated header";
    if (!*why) *why = key_mismatch(h, key, kind);
    return fd;
}

int st_sd_cache_read_tokens(const char *path, const sd_cache_key *key, int32_t **tokens, int64_t *n, int64_t *bytes) {
    header h;
    const char *why;
    int64_t size;
    int fd = open_cache(path, key, 1, &h, &why, &size);
    if (fd < 0) return 0;
    if (!why && (h.count < 0 || h.count > ((int64_t)1 << 40) || h.block != (uint32_t)BLOCK_IDS || h.planes < 1 ||
                 h.planes > 4 || h.planes < planes_for(key->vocab_size)))
        why = "implausible counts in the header (corrupt)";
    if (!why && (int64_t)h.zsize != size - HDR) why = "truncated or has trailing bytes (size does not match the header)";
    int64_t nblk = why ? 0 : (h.count + BLOCK_IDS - 1) / BLOCK_IDS;
    if (!why && nblk * 8 > (int64_t)h.zsize) why = "truncated (block table cut short)";
    unsigned char *table = NULL;
    int64_t *off = NULL;
    int32_t *v = NULL;
    size_t zmax = 0, pcap = (size_t)BLOCK_IDS * h.planes;
    if (!why) {
        table = malloc((size_t)(nblk ? nblk * 8 : 1));
        off = malloc((size_t)(nblk + 1) * sizeof *off);
        if (!table || !off) why = "out of memory";
        else if (nblk && read_exact(fd, table, (size_t)nblk * 8, HDR)) why = "truncated (block table)";
        else if (st_crc32(0, table, (size_t)nblk * 8) != h.crc) why = "block table CRC32 mismatch (corrupt)";
    }
    if (!why) {
        off[0] = HDR + nblk * 8;
        for (int64_t b = 0; b < nblk; b++) {
            size_t zs = get32(table + b * 8);
            int64_t m = h.count - b * BLOCK_IDS < BLOCK_IDS ? h.count - b * BLOCK_IDS : BLOCK_IDS;
            /* deflate expands at most ~1032:1, so a block cannot hold more plane bytes than
             * that: a header claiming more is corrupt (and must not size an allocation) */
            if (zs > compressBound((uLong)pcap) || (uint64_t)m * h.planes > (uint64_t)zs * 1100 + 64) {
                why = "implausible block size (corrupt)";
                break;
            }
            zmax = zs > zmax ? zs : zmax;
            off[b + 1] = off[b] + (int64_t)zs;
        }
        if (!why && off[nblk] != size) why = "block sizes do not add up to the file size (corrupt)";
    }
    /* the ids are allocated only now that the table accounts for every byte of the file */
    if (!why && !(v = malloc((size_t)(h.count ? h.count : 1) * sizeof *v))) why = "out of memory";
    if (!why && nblk) {
        const char **err = calloc((size_t)nblk, sizeof *err);
        if (!err) why = "out of memory";
#pragma omp parallel if (nblk > 1 && err)
        {
            unsigned char *zb = err ? malloc(zmax ? zmax : 1) : NULL, *pb = err ? malloc(pcap) : NULL;
#pragma omp for schedule(static)
            for (int64_t b = 0; b < nblk; b++) {
                if (!err) continue;
                int64_t o = b * BLOCK_IDS, m = h.count - o < BLOCK_IDS ? h.count - o : BLOCK_IDS;
                size_t zs = (size_t)(off[b + 1] - off[b]), pn = (size_t)m * h.planes;
                const char *w = !zb || !pb ? "out of memory" : NULL;
                if (!w && read_exact(fd, zb, zs, off[b])) w = "read error";
                if (!w) w = inflate_exact(zb, zs, pb, pn);
                if (!w && st_crc32(0, pb, pn) != get32(table + b * 8 + 4)) w = "CRC32 mismatch (corrupt)";
                for (int64_t i = 0; !w && i < m; i++) {
                    uint32_t x = 0;
                    for (uint32_t q = 0; q < h.planes; q++) x |= (uint32_t)pb[q * m + i] << (8 * q);
                    if (x >= (uint32_t)key->vocab_size) w = "token id out of range (corrupt)";
                    v[o + i] = (int32_t)x;
                }
                err[b] = w;
            }
            free(zb);
            free(pb);
        }
        for (int64_t b = 0; err && b < nblk && !why; b++) why = err[b];   /* first failure in file order */
        free(err);
    }
    close(fd);
    free(table);
    free(off);
    if (why) {
        log_miss(path, why);
        free(v);
        return 0;
    }
    *tokens = v;
    *n = h.count;
    *bytes = h.bytes;
    return 1;
}

int st_sd_cache_read_tokenizer(const char *path, const sd_cache_key *key, st_tokenizer **t) {
    header h;
    const char *why;
    int64_t size;
    int fd = open_cache(path, key, 2, &h, &why, &size);
    if (fd < 0) return 0;
    if (!why && (h.count <= 0 || h.count > ((int64_t)1 << 31))) why = "implausible size (corrupt)";
    if (!why && (int64_t)h.zsize != size - HDR) why = "truncated or has trailing bytes (size does not match the header)";
    /* deflate expands at most ~1032:1: a larger claim is corrupt and must not size a buffer */
    if (!why && (uint64_t)h.count > h.zsize * 1100 + 64) why = "implausible size (corrupt)";
    unsigned char *z = NULL;
    char *txt = NULL;
    if (!why && (!(z = malloc(h.zsize ? h.zsize : 1)) || !(txt = malloc((size_t)h.count + 1)))) why = "out of memory";
    if (!why && read_exact(fd, z, h.zsize, HDR)) why = "read error";
    if (!why) why = inflate_exact(z, h.zsize, (unsigned char *)txt, (size_t)h.count);
    if (!why && st_crc32(0, txt, (size_t)h.count) != h.crc) why = "CRC32 mismatch (corrupt)";
    close(fd);
    free(z);
    st_tokenizer *tok = NULL;
    if (!why) {
        st_error e = {0};
        tok = st_sd_tok_from_json(txt, h.count, path, &e);
        if (!tok) why = "the stored tokenizer does not load";
        else if (tok->hash != h.tok_hash || tok->vocab_size != (int)h.vocab) why = "tokenizer hash mismatch (corrupt)";
    }
    free(txt);
    if (why) {
        log_miss(path, why);
        st_tokenizer_free(tok);
        return 0;
    }
    *t = tok;
    return 1;
}
