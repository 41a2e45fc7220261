/* checkpoint.c - checkpoint files: everything a run needs to continue bit-exactly
 * (parameters, AdamW moments, step, RNG, loader position, best validation loss, the
 * resolved config), zlib-compressed behind a fixed 64-byte header with a CRC32.
 *
 * Layout (little-endian, fixed width; see st_train.h for the header):
 *   payload = u32 config_len, config JSON (canonical, its FNV-1a hash is in the header)
 *             state: i64 step, i64 opt_t, u64 loader_draws, u64 rng[4], f64 best_val,
 *                    i64 best_step, f64 last_val, i64 tokens, f64 elapsed, i64 skipped,
 *                    u64 tok_hash, i64 world_size (ranks; 0 = written before MPI = 1),
 *                    u64 data_hash (version 2; the training data's tokens, st_dataset_hash;
 *                    version-1 files end the state before it and read as 0, unknown),
 *                    i64 threads, u32 compute_len, compute (version 3: the thread count
 *                    and the products' backend that wrote it; older files: 0 and "")
 *             u32 n_params, per param: u32 name_len, name, u32 ndim, i64 shape[4],
 *                    u64 offset, u64 numel
 *             u64 n floats, then the data, m and v blocks (n floats each, IEEE binary32)
 * Header (64 bytes): magic, u32 version, u32 header size, u64 payload size raw and
 * compressed, u64 step, u64 config hash, u64 floats, u32 CRC32 (of the payload, then of
 * header bytes 0-55), 4 reserved bytes, zero (checked: nothing else covers them).
 * Files are written atomically (temp file in the same directory, fsync, rename, fsync of
 * the directory), so a crash leaves either the old or the new checkpoint, never half.
 * Not here: file helpers (fileio.c), the run directory (rundir.c). */
#define _GNU_SOURCE
#include "train_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes float blocks as little-endian memory images"
#endif

#define HEADER_BYTES 64
#define STATE_BYTES 128      /* versions 2 and 3; version 1: 120 (no data_hash) */
#define STATE_BYTES_V1 120
static const char MAGIC[8] = {'S', 'T', 'C', 'K', 'P', 'T', 0, 0};

/* ---------------------------------------------------------- byte packing ---- */
static void put_u32(unsigned char *p, uint32_t x) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i)); }
static void put_u64(unsigned char *p, uint64_t x) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i)); }
static uint32_t get_u32(const unsigned char *p) { uint32_t x = 0; for (int i = 3; i >= 0; i--) x = (x << 8) | p[i]; return x; }
static uint64_t get_u64(const unsigned char *p) { uint64_t x = 0; for (int i = 7; i >= 0; i--) x = (x << 8) | p[i]; return x; }
static uint64_t f64_bits(double d) { uint64_t x; memcpy(&x, &d, 8); return x; }
static double bits_f64(uint64_t x) { double d; memcpy(&d, &x, 8); return d; }

static void pack_state(unsigned char *b, const st_train_state *s) {
    uint64_t v[16] = {(uint64_t)s->step, (uint64_t)s->opt_t, s->loader_draws,
                      s->rng.s[0], s->rng.s[1], s->rng.s[2], s->rng.s[3],
                      f64_bits(s->best_val), (uint64_t)s->best_step, f64_bits(s->last_val),
                      (uint64_t)s->tokens, f64_bits(s->elapsed), (uint64_t)s->skipped, s->tok_hash, (uint64_t)s->world_size,
                      s->data_hash};
    for (int i = 0; i < 16; i++) put_u64(b + 8 * i, v[i]);
}

/* bytes: STATE_BYTES, or STATE_BYTES_V1 for a version-1 file (no data_hash: 0) */
static void unpack_state(const unsigned char *b, size_t bytes, st_train_state *s) {
    uint64_t v[16] = {0};
    for (size_t i = 0; i < bytes / 8; i++) v[i] = get_u64(b + 8 * i);
    s->step = (int64_t)v[0]; s->opt_t = (int64_t)v[1]; s->loader_draws = v[2];
    for (int i = 0; i < 4; i++) s->rng.s[i] = v[3 + i];
    s->best_val = bits_f64(v[7]); s->best_step = (int64_t)v[8]; s->last_val = bits_f64(v[9]);
    s->tokens = (int64_t)v[10]; s->elapsed = bits_f64(v[11]); s->skipped = (int64_t)v[12];
    s->tok_hash = v[13];
    s->world_size = (int64_t)v[14];   /* the slot was reserved (0) before MPI runs */
    s->data_hash = v[15];
}

/* ------------------------------------------------------------- writing ---- */
typedef struct zwriter {
    z_stream z;
    FILE *f;
    uint32_t crc;           /* of the compressed bytes */
    uint64_t raw, comp;
    unsigned char out[1 << 16];
    int failed;
} zwriter;

static void zw_pump(zwriter *w, int flush) {
    int ret;
    do {
        w->z.next_out = w->out;
        w->z.avail_out = sizeof w->out;
        ret = deflate(&w->z, flush);
        if (ret == Z_STREAM_ERROR) { w->failed = 1; return; }
        size_t have = sizeof w->out - w->z.avail_out;
        if (have) {
            if (fwrite(w->out, 1, have, w->f) != have) { w->failed = 1; return; }
            w->crc = st_crc32(w->crc, w->out, have);
            w->comp += have;
        }
    } while (w->z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
}

static void zw_write(zwriter *w, const void *data, size_t n) {
    const unsigned char *p = data;
    w->raw += n;
    while (n > 0 && !w->failed) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        w->z.next_in = (unsigned char *)p;
        w->z.avail_in = chunk;
        zw_pump(w, Z_NO_FLUSH);
        p += chunk;
        n -= chunk;
    }
}

int st_checkpoint_save(const char *path, const st_run_config *cfg, const st_params *p,
                       const st_train_state *s, st_error *e) {
    char *json = st_run_config_to_json(cfg, NULL);
    if (!json) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path);
    size_t jlen = strlen(json);
    zwriter *w = calloc(1, sizeof *w);
    if (!w) { free(json); return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path); }
    st_atomic_file out;
    w->f = st_atomic_open(&out, path, e);
    if (!w->f) { free(json); free(w); return e ? e->code : ST_ERR_IO; }
    /* Huffman coding only: float mantissas do not repeat, so LZ matching costs time for
     * little gain; entropy-coding the exponent bytes keeps most of the saving at ~2x the
     * speed of level 1. */
    if (deflateInit2(&w->z, 1, Z_DEFLATED, 15, 8, Z_HUFFMAN_ONLY) != Z_OK) {
        st_atomic_abort(&out); free(json); free(w);
        return st_fail(e, ST_ERR_MEMORY, "%s: zlib init failed", path);
    }
    unsigned char hdr[HEADER_BYTES] = {0};
    if (fwrite(hdr, 1, HEADER_BYTES, w->f) != HEADER_BYTES) w->failed = 1;

    unsigned char b[256];
    put_u32(b, (uint32_t)jlen);
    zw_write(w, b, 4);
    zw_write(w, json, jlen);
    pack_state(b, s);
    zw_write(w, b, STATE_BYTES);
    const uint32_t clen = (uint32_t)strnlen(s->compute, sizeof s->compute - 1);
    put_u64(b, (uint64_t)s->threads);
    put_u32(b + 8, clen);
    zw_write(w, b, 12);
    zw_write(w, s->compute, clen);
    put_u32(b, (uint32_t)p->count);
    zw_write(w, b, 4);
    for (int i = 0; i < p->count; i++) {
        const st_param_info *in = &p->info[i];
        uint32_t nl = (uint32_t)strlen(in->name);
        put_u32(b, nl);
        zw_write(w, b, 4);
        zw_write(w, in->name, nl);
        put_u32(b, (uint32_t)in->ndim);
        for (int d = 0; d < 4; d++) put_u64(b + 4 + 8 * d, (uint64_t)in->shape[d]);
        put_u64(b + 36, in->offset);
        put_u64(b + 44, in->numel);
        zw_write(w, b, 52);
    }
    put_u64(b, p->n);
    zw_write(w, b, 8);
    zw_write(w, p->data, p->n * sizeof(float));
    zw_write(w, p->m, p->n * sizeof(float));
    zw_write(w, p->v, p->n * sizeof(float));
    if (!w->failed) zw_pump(w, Z_FINISH);
    deflateEnd(&w->z);

    memcpy(hdr, MAGIC, 8);
    put_u32(hdr + 8, ST_CKPT_VERSION);
    put_u32(hdr + 12, HEADER_BYTES);
    put_u64(hdr + 16, w->raw);
    put_u64(hdr + 24, w->comp);
    put_u64(hdr + 32, (uint64_t)s->step);
    put_u64(hdr + 40, st_fnv1a(ST_FNV_OFFSET, json, jlen));
    put_u64(hdr + 48, p->n);
    put_u32(hdr + 56, st_crc32(w->crc, hdr, 56));
    free(json);
    if (!w->failed && (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(hdr, 1, HEADER_BYTES, w->f) != HEADER_BYTES))
        w->failed = 1;
    if (w->failed) {
        int rc = st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        st_atomic_abort(&out);
        free(w);
        return rc;
    }
    free(w);
    return st_atomic_commit(&out, e);
}

/* ------------------------------------------------------------- reading ---- */
typedef struct zreader {
    const char *path;
    unsigned char *comp;    /* whole compressed payload */
    uint64_t comp_len;
    z_stream z;
    int z_open;
    uint64_t raw_total, raw_read;
    uint64_t n_floats;
    st_run_config cfg;
    st_train_state state;
    int n_params;
    st_param_info *table;
    uint32_t version;       /* 1 to ST_CKPT_VERSION */
} zreader;

static int corrupt(const zreader *r, st_error *e, const char *what) {
    return st_fail(e, ST_ERR_CHECKPOINT, "%s: corrupt checkpoint: %s", r->path, what);
}

static int zr_read(zreader *r, void *dst, size_t n, st_error *e) {
    unsigned char *p = dst;
    if (r->raw_read + n > r->raw_total) return corrupt(r, e, "payload shorter than its contents");
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        if (r->z.avail_in == 0) {   /* zlib counts in uInt: feed payloads > 4 GiB in slices */
            uint64_t left = r->comp_len - (uint64_t)(r->z.next_in - r->comp);
            r->z.avail_in = (uInt)(left > UINT32_MAX ? UINT32_MAX : left);
        }
        r->z.next_out = p;
        r->z.avail_out = chunk;
        int ret = inflate(&r->z, Z_NO_FLUSH);
        size_t got = chunk - r->z.avail_out;
        if (ret != Z_OK && !(ret == Z_STREAM_END && got == chunk)) {
            char why[128];
            snprintf(why, sizeof why, "zlib inflate failed (%s)", r->z.msg ? r->z.msg : zError(ret));
            return corrupt(r, e, why);
        }
        p += got;
        n -= got;
        r->raw_read += got;
    }
    return ST_OK;
}

static void zr_close(zreader *r) {
    if (r->z_open) inflateEnd(&r->z);
    free(r->comp);
    free(r->table);
    memset(r, 0, sizeof *r);
}

/* The training state of r->version's layout: 120 bytes in version 1, 128 from version 2,
 * then (version 3) the thread count and the backend that wrote it. */
static int zr_state(zreader *r, st_error *e) {
    unsigned char b[STATE_BYTES];
    const size_t bytes = r->version == 1 ? STATE_BYTES_V1 : STATE_BYTES;
    int rc = zr_read(r, b, bytes, e);
    if (rc) return rc;
    unpack_state(b, bytes, &r->state);
    if (r->version < 3) return ST_OK;   /* not recorded: 0 and "" (zr_open cleared r) */
    if ((rc = zr_read(r, b, 12, e))) return rc;
    r->state.threads = (int64_t)get_u64(b);
    const uint32_t clen = get_u32(b + 8);
    if (clen >= sizeof r->state.compute) return corrupt(r, e, "compute description too long");
    return zr_read(r, r->state.compute, clen, e);
}

/* Open, verify the header and CRC, and read config, state and the parameter table. */
static int zr_open(zreader *r, const char *path, st_error *e) {
    memset(r, 0, sizeof *r);
    r->path = path;
    /* O_NONBLOCK: a FIFO in place of the file must not block open(); refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return st_fail(e, ST_ERR_IO, "%s: cannot open checkpoint: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return st_fail(e, ST_ERR_IO, "%s: not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return st_fail(e, ST_ERR_IO, "%s: cannot open checkpoint: %s", path, strerror(errno)); }
    unsigned char hdr[HEADER_BYTES];
    int rc = ST_OK;
    if (fstat(fileno(f), &st) != 0) rc = st_fail(e, ST_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size < HEADER_BYTES) {
        /* a short file is a cut checkpoint only if it starts as one (a text file is not) */
        const size_t k = (size_t)st.st_size < 8 ? (size_t)st.st_size : 8;
        const int starts = fread(hdr, 1, k, f) == k && memcmp(hdr, MAGIC, k) == 0;
        rc = starts ? st_fail(e, ST_ERR_CHECKPOINT, "%s: truncated checkpoint: %lld bytes, smaller than the %d-byte "
                              "header", path, (long long)st.st_size, HEADER_BYTES)
                    : st_fail(e, ST_ERR_CHECKPOINT, "%s: not a stretch checkpoint (%lld bytes, not starting with "
                              "\"STCKPT\")", path, (long long)st.st_size);
    }
    else if (fread(hdr, 1, HEADER_BYTES, f) != HEADER_BYTES)
        rc = st_fail(e, ST_ERR_IO, "%s: read error", path);
    else if (memcmp(hdr, MAGIC, 8) != 0)
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: not a stretch checkpoint (magic %02x%02x%02x%02x%02x%02x, expected \"STCKPT\")",
                     path, hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5]);
    else if (get_u32(hdr + 8) > ST_CKPT_VERSION || get_u32(hdr + 8) < 1)
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: checkpoint version %u, this build reads versions 1 to %d",
                     path, get_u32(hdr + 8), ST_CKPT_VERSION);
    else if (get_u32(hdr + 12) != HEADER_BYTES)
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: corrupt checkpoint: header size %u, expected %d",
                     path, get_u32(hdr + 12), HEADER_BYTES);
    else if (get_u32(hdr + 60) != 0)   /* every version wrote zeros there; the CRC does not cover them */
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: corrupt checkpoint: header bytes 60-63 (reserved) are %08x, "
                     "expected zero", path, get_u32(hdr + 60));
    uint64_t comp = rc ? 0 : get_u64(hdr + 24);
    if (!rc && (uint64_t)st.st_size != HEADER_BYTES + comp)
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: truncated or padded checkpoint: %lld bytes, header says %llu",
                     path, (long long)st.st_size, (unsigned long long)(HEADER_BYTES + comp));
    if (!rc) {
        r->comp = malloc(comp ? comp : 1);
        if (!r->comp) rc = st_fail(e, ST_ERR_MEMORY, "%s: cannot allocate %llu bytes", path, (unsigned long long)comp);
        else if (fread(r->comp, 1, comp, f) != comp) rc = st_fail(e, ST_ERR_IO, "%s: read error", path);
    }
    fclose(f);
    if (rc) { zr_close(r); return rc; }
    uint32_t crc = st_crc32(st_crc32(0, r->comp, comp), hdr, 56);
    if (crc != get_u32(hdr + 56)) {
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: corrupt checkpoint: CRC32 mismatch (stored %08x, computed %08x)",
                     path, get_u32(hdr + 56), crc);
        zr_close(r);
        return rc;
    }
    r->raw_total = get_u64(hdr + 16);
    r->n_floats = get_u64(hdr + 48);
    if (inflateInit(&r->z) != Z_OK) { zr_close(r); return st_fail(e, ST_ERR_MEMORY, "%s: zlib init failed", path); }
    r->z_open = 1;
    r->z.next_in = r->comp;
    r->comp_len = comp;
    r->z.avail_in = 0;   /* zr_read feeds it */

    unsigned char b[256];
    char *json = NULL;
    if ((rc = zr_read(r, b, 4, e))) goto fail;
    uint32_t jlen = get_u32(b);
    if (jlen > (1u << 24)) { rc = corrupt(r, e, "config length out of range"); goto fail; }
    json = malloc(jlen + 1);
    if (!json) { rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path); goto fail; }
    if ((rc = zr_read(r, json, jlen, e))) goto fail;
    json[jlen] = 0;
    if (st_fnv1a(ST_FNV_OFFSET, json, jlen) != get_u64(hdr + 40)) { rc = corrupt(r, e, "config hash mismatch"); goto fail; }
    char label[ST_PATH_BUF + 32];
    snprintf(label, sizeof label, "%s (embedded config)", path);
    if ((rc = st_run_config_parse(json, jlen, label, NULL, 0, &r->cfg, e))) {
        if (e) e->code = rc = ST_ERR_CHECKPOINT;
        goto fail;
    }
    r->version = get_u32(hdr + 8);
    if ((rc = zr_state(r, e))) goto fail;
    if ((uint64_t)r->state.step != get_u64(hdr + 32)) { rc = corrupt(r, e, "step in header and payload differ"); goto fail; }
    if ((rc = zr_read(r, b, 4, e))) goto fail;
    uint32_t np = get_u32(b);
    if (np > (1u << 20)) { rc = corrupt(r, e, "parameter count out of range"); goto fail; }
    r->n_params = (int)np;
    r->table = calloc(np ? np : 1, sizeof *r->table);
    if (!r->table) { rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path); goto fail; }
    for (uint32_t i = 0; i < np; i++) {
        st_param_info *in = &r->table[i];
        if ((rc = zr_read(r, b, 4, e))) goto fail;
        uint32_t nl = get_u32(b);
        if (nl >= sizeof in->name) { rc = corrupt(r, e, "parameter name too long"); goto fail; }
        if ((rc = zr_read(r, in->name, nl, e))) goto fail;
        in->name[nl] = 0;
        if ((rc = zr_read(r, b, 52, e))) goto fail;
        in->ndim = (int)get_u32(b);
        for (int d = 0; d < 4; d++) in->shape[d] = (int64_t)get_u64(b + 4 + 8 * d);
        in->offset = get_u64(b + 36);
        in->numel = get_u64(b + 44);
    }
    if ((rc = zr_read(r, b, 8, e))) goto fail;
    if (get_u64(b) != r->n_floats) { rc = corrupt(r, e, "parameter size in header and payload differ"); goto fail; }
    if (r->raw_total - r->raw_read != 3 * r->n_floats * sizeof(float)) {
        rc = corrupt(r, e, "payload size does not match the parameter blocks");
        goto fail;
    }
    free(json);
    return ST_OK;
fail:
    free(json);
    zr_close(r);
    return rc;
}

static void fmt_shape(const st_param_info *in, char *buf, size_t n) {
    size_t j = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < in->ndim && d < 4 && j < n; d++)
        j += (size_t)snprintf(buf + j, n - j, "%s%lld", d ? ", " : "", (long long)in->shape[d]);
    if (j < n) snprintf(buf + j, n - j, "]");
}

/* The checkpoint's parameter table must equal the block's (names, shapes, offsets). The
 * message names the first parameter that differs, or the first one only one side has. */
static int check_table(const zreader *r, const st_params *p, st_error *e) {
    char counts[160] = "";
    if (r->n_params != p->count || r->n_floats != p->n)
        snprintf(counts, sizeof counts, "checkpoint has %d parameters (%llu floats), the model %d (%zu floats): ",
                 r->n_params, (unsigned long long)r->n_floats, p->count, p->n);
    const int common = r->n_params < p->count ? r->n_params : p->count;
    char sa[96], sb[96];
    for (int i = 0; i < common; i++) {
        const st_param_info *a = &r->table[i], *b = &p->info[i];
        int same = strcmp(a->name, b->name) == 0 && a->ndim == b->ndim && a->offset == b->offset && a->numel == b->numel;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) {
            fmt_shape(a, sa, sizeof sa);
            fmt_shape(b, sb, sizeof sb);
            return st_fail(e, ST_ERR_CHECKPOINT, "%s: %sparameter %d is %s %s in the checkpoint but %s %s in the model",
                           r->path, counts, i, a->name, sa, b->name, sb);
        }
    }
    if (r->n_params == p->count) return ST_OK;
    const int more_ckpt = r->n_params > p->count;
    const st_param_info *x = more_ckpt ? &r->table[common] : &p->info[common];
    fmt_shape(x, sa, sizeof sa);
    return st_fail(e, ST_ERR_CHECKPOINT, "%s: %sthe first %s %s %s (parameter %d), which the %s lacks", r->path,
                   counts, more_ckpt ? "checkpoint parameter beyond the model's is" : "model parameter beyond the "
                   "checkpoint's is", x->name, sa, common, more_ckpt ? "model" : "checkpoint");
}

static int read_blocks(zreader *r, st_params *p, int with_moments, st_error *e) {
    int rc = zr_read(r, p->data, p->n * sizeof(float), e);
    if (!rc && with_moments) rc = zr_read(r, p->m, p->n * sizeof(float), e);
    if (!rc && with_moments) rc = zr_read(r, p->v, p->n * sizeof(float), e);
    if (!rc && with_moments) {
        unsigned char extra;
        r->z.next_out = &extra;
        r->z.avail_out = 1;
        if (inflate(&r->z, Z_FINISH) != Z_STREAM_END) rc = corrupt(r, e, "trailing data after the parameter blocks");
    }
    return rc;
}

int st_checkpoint_load(const char *path, st_run_config *cfg, st_params *p, int with_moments,
                       st_train_state *s, st_error *e) {
    zreader r;
    int rc = zr_open(&r, path, e);
    if (rc) return rc;
    if (p) {
        rc = check_table(&r, p, e);
        if (!rc) rc = read_blocks(&r, p, with_moments, e);
    }
    if (!rc && cfg) *cfg = r.cfg;
    if (!rc && s) *s = r.state;
    zr_close(&r);
    return rc;
}

int st_checkpoint_is(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) return 1;
    if (!S_ISREG(st.st_mode)) return 0;   /* a FIFO would block the read; the loader refuses it */
    FILE *f = fopen(path, "rb");
    char hdr[8];
    const int is = f && fread(hdr, 1, 8, f) == 8 && memcmp(hdr, MAGIC, 8) == 0;
    if (f) fclose(f);
    return is;
}

int st_checkpoint_stored_crc(const char *path, uint32_t *crc) {
    FILE *f = fopen(path, "rb");
    unsigned char hdr[HEADER_BYTES];
    const int ok = f && fread(hdr, 1, HEADER_BYTES, f) == HEADER_BYTES && memcmp(hdr, MAGIC, 8) == 0;
    if (f) fclose(f);
    if (ok) *crc = get_u32(hdr + 56);
    return ok;
}

/* Resolve src and open the file: one that a training beside deleted (keep_last) between
 * our reading of latest and the open is looked up again, latest naming a newer one by
 * then. path (n bytes) must outlive r. */
static int open_source(zreader *r, const char *src, char *path, size_t n, st_error *e) {
    struct stat st;
    const int run_dir = stat(src, &st) == 0 && S_ISDIR(st.st_mode);
    for (int attempt = 0;; attempt++) {
        int rc = st_checkpoint_resolve(src, path, n, e);
        if (rc) return rc;
        rc = zr_open(r, path, e);
        if (!rc || !run_dir || attempt == 3 || access(path, F_OK) == 0) return rc;
    }
}

int st_checkpoint_load_model(const char *path_or_run_dir, st_model *m, st_run_config *cfg, st_error *e) {
    return st_checkpoint_read(path_or_run_dir, NULL, 0, m, cfg, NULL, e);
}

int st_checkpoint_read(const char *path_or_run_dir, char *ckpt, size_t n, st_model *m, st_run_config *cfg,
                       st_train_state *s, st_error *e) {
    char path[ST_PATH_BUF];
    zreader r;
    int rc = open_source(&r, path_or_run_dir, path, sizeof path, e);
    if (rc) return rc;
    memset(m, 0, sizeof *m);
    /* the embedded config must imply exactly the stored parameter block before anything
     * of its size is allocated (a crafted config could otherwise ask for most of RAM) */
    size_t want = st_model_param_floats(&r.cfg.model, e);
    if (!want) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e && e->code ? e->msg : "?");
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: corrupt checkpoint: embedded model config is invalid (%s)", r.path, why);
    }
    else if (want != r.n_floats)
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: its model config implies %zu parameter floats but it stores %llu",
                     r.path, want, (unsigned long long)r.n_floats);
    /* eval, generate and export only read the weights: no grads, no AdamW moments */
    if (!rc) rc = st_model_init_weights(m, &r.cfg.model, e);
    if (!rc) rc = check_table(&r, &m->params, e);
    if (!rc) rc = read_blocks(&r, &m->params, 0, e);
    if (!rc && cfg) *cfg = r.cfg;
    if (!rc && s) *s = r.state;
    if (!rc && ckpt) snprintf(ckpt, n, "%s", path);
    if (rc) st_model_free(m);
    zr_close(&r);
    return rc;
}
