/* fuzz_targets.h - the one-input bodies of the libFuzzer harnesses (tests/fuzz/fuzz_*.c),
 * shared with tests/test_fuzz_regressions.c, which replays the seed corpus and every
 * regression file through the normal (non-fuzz) build's loaders.
 *
 * Each fz_<name>(data, size) feeds one input to a loader and checks properties that must
 * hold for ANY input; a violation calls fz_fail(), which aborts (libFuzzer reports it as
 * a crash, the regression test as a failed test). Structure-aware modes (first byte) let
 * the fuzzer get past checksums: the harness recomputes a CRC or compresses a payload the
 * way the writer would, so mutations reach the parsers behind the checks.
 *   config       st_run_config_parse (+ up to 4 `--set` assignments after \x01 bytes);
 *                an accepted config round-trips through st_run_config_to_json (same hash)
 *   checkpoint   st_checkpoint_load from a temp file: raw bytes, or a payload wrapped in a
 *                valid header (sizes, step, config hash, CRC) and zlib-compressed
 *   safetensors  st_model_load_safetensors into a small fixed model: raw file, or header
 *                JSON with the length prefix and an 8 KiB data region added
 *   cache        the token-cache readers (st_sd_cache_read_tokens / _tokenizer): raw file,
 *                header and block-table CRCs repaired, or a payload compressed and framed
 *   tokenizer    st_tokenizer_load of tokenizer JSON; a loaded tokenizer round-trips through
 *                save/load (same hash); encode/decode of arbitrary bytes: ids in range,
 *                decode(encode(x)) == x for byte and BPE (also with a fixed trained BPE)
 *   sweep        st_sweep_load of a sweep file (dry run: nothing is written) beside a fixed
 *                synthetic base config "base.json"; an accepted sweep has distinct point
 *                directories and every point's config passes validation again
 * Persistent state (the fixed model, the fixed BPE) lives in function-local statics: a
 * fuzzer runs millions of inputs in one process. Not thread-safe; neither is libFuzzer. */
#ifndef ST_FUZZ_TARGETS_H
#define ST_FUZZ_TARGETS_H

#include "st_train.h"
#include "data/data_internal.h"
#include "eval/sweep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static inline void fz_fail(const char *what) {
    fprintf(stderr, "fuzz property violated: %s\n", what);
    abort();
}

/* A per-process temp file (tmpfs when there is one: the fuzzer writes it per input). */
static inline const char *fz_tmp_path(const char *tag) {
    static char path[512];
    const char *dir = getenv("STRETCH_FUZZ_TMP");
    if (!dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!dir) dir = "/tmp";
    snprintf(path, sizeof path, "%s/stretch-fuzz-%s-%ld", dir, tag, (long)getpid());
    return path;
}

static inline int fz_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = (n == 0 || fwrite(data, 1, n, f) == n);
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static inline void fz_put32(unsigned char *p, uint32_t x) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i)); }
static inline void fz_put64(unsigned char *p, uint64_t x) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i)); }
static inline uint32_t fz_get32(const unsigned char *p) { uint32_t x = 0; for (int i = 3; i >= 0; i--) x = (x << 8) | p[i]; return x; }
static inline uint64_t fz_get64(const unsigned char *p) { uint64_t x = 0; for (int i = 7; i >= 0; i--) x = (x << 8) | p[i]; return x; }

/* ================================================================= config ==== */
static inline int fz_config(const uint8_t *data, size_t size) {
    /* text, then optional "\x01section.key=value" assignments */
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    size_t json_len = size;
    const char *sets[4];
    int n_sets = 0;
    char *mark = memchr(buf, 1, size);
    if (mark) {
        json_len = (size_t)(mark - buf);
        char *p = mark;
        while (p && n_sets < 4) {
            *p = 0;
            sets[n_sets++] = p + 1;
            p = memchr(p + 1, 1, size - (size_t)(p + 1 - buf));
        }
        if (p) *p = 0;
    }
    st_run_config c;
    st_error e = {0};
    int rc = st_run_config_parse(buf, json_len, "fuzz.json", sets, n_sets, &c, &e);
    if (rc != ST_OK && (e.code != rc || !e.msg[0])) fz_fail("config: an error without a message or with another code");
    if (rc == ST_OK) {
        /* the canonical JSON of an accepted config loads back to the same config */
        char *json = st_run_config_to_json(&c, NULL);
        if (!json) fz_fail("config: to_json failed");
        st_run_config c2;
        st_error e2 = {0};
        if (st_run_config_parse(json, strlen(json), "fuzz-roundtrip.json", NULL, 0, &c2, &e2) != ST_OK) {
            fprintf(stderr, "%s\n%s\n", e2.msg, json);
            fz_fail("config: the canonical JSON of an accepted config does not parse");
        }
        char diff[512];
        if (st_run_config_hash(&c) != st_run_config_hash(&c2) || st_run_config_diff(&c, &c2, NULL, diff, sizeof diff))
            fz_fail("config: round trip through to_json changed the config");
        free(json);
    }
    free(buf);
    return 0;
}

/* ============================================================= checkpoint ==== */
/* The model every structured checkpoint input is checked against (also the model of the
 * seed checkpoints, see tests/fuzz/README.md). */
static inline void fz_small_model_config(st_model_config *c) {
    st_model_config_default(c);
    c->vocab_size = 16;
    c->n_layers = 1;
    c->d_model = 16;
    c->n_heads = 2;
    c->pos = ST_POS_ALIBI;
}

static inline st_model *fz_small_model(void) {
    static st_model m;
    static int ready;
    if (!ready) {
        st_model_config c;
        fz_small_model_config(&c);
        st_error e = {0};
        if (st_model_init(&m, &c, 1, &e)) fz_fail("cannot build the fixed model");
        ready = 1;
    }
    return &m;
}

static inline uint64_t fz_fnv1a(const unsigned char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 0x100000001b3ull; }
    return h;
}

/* Wrap a raw payload like st_checkpoint_save: 64-byte header + zlib stream. The header's
 * step, config hash and float count are read leniently from the payload so the loader's
 * consistency checks can pass; the CRC is always right. */
static inline unsigned char *fz_ckpt_wrap(const uint8_t *pl, size_t n, size_t *out_n) {
    uLongf zn = compressBound((uLong)n);
    unsigned char *f = malloc(64 + zn);
    if (!f) return NULL;
    if (compress2(f + 64, &zn, pl, (uLong)n, 1) != Z_OK) { free(f); return NULL; }
    uint64_t step = 0, hash = 0, nfl = 0;
    size_t at = 0;
    if (n >= 4) {
        uint32_t jl = fz_get32(pl);
        if ((uint64_t)jl + 4 <= n) {
            hash = fz_fnv1a(pl + 4, jl);
            at = 4 + (size_t)jl;
            if (at + 128 <= n) step = fz_get64(pl + at);
            at += 128;   /* the state of a version-2 checkpoint (the header says 2) */
            if (at + 4 <= n) {
                uint32_t np = fz_get32(pl + at);
                at += 4;
                for (uint32_t i = 0; i < np && at + 4 <= n; i++) at += 4 + (size_t)fz_get32(pl + at) + 52;
                if (at + 8 <= n) nfl = fz_get64(pl + at);
            }
        }
    }
    memset(f, 0, 64);
    memcpy(f, "STCKPT\0\0", 8);
    fz_put32(f + 8, 2);   /* the payloads (and the seed corpus) are of version 2, still read */
    fz_put32(f + 12, 64);
    fz_put64(f + 16, n);
    fz_put64(f + 24, zn);
    fz_put64(f + 32, step);
    fz_put64(f + 40, hash);
    fz_put64(f + 48, nfl);
    fz_put32(f + 56, st_crc32(st_crc32(0, f + 64, zn), f, 56));
    *out_n = 64 + zn;
    return f;
}

static inline int fz_checkpoint(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *path = fz_tmp_path("ckpt");
    int rc = -1;
    if (data[0] & 1) {   /* structured: the rest is the uncompressed payload */
        size_t n = 0;
        unsigned char *f = fz_ckpt_wrap(data + 1, size - 1, &n);
        if (!f) return 0;
        rc = fz_write(path, f, n);
        free(f);
    } else {
        rc = fz_write(path, data + 1, size - 1);
    }
    if (rc) return 0;
    st_model *m = fz_small_model();
    st_run_config c;
    st_train_state s;
    st_error e = {0};
    int r1 = st_checkpoint_load(path, &c, NULL, 0, &s, &e);
    if (r1 != ST_OK && (e.code != r1 || !strstr(e.msg, path))) fz_fail("checkpoint: error does not name the file");
    if (r1 == ST_OK) {
        st_error e2 = {0};
        int r2 = st_checkpoint_load(path, NULL, &m->params, 1, NULL, &e2);
        if (r2 != ST_OK && !strstr(e2.msg, path)) fz_fail("checkpoint: error does not name the file");
    }
    unlink(path);
    return 0;
}

/* ============================================================ safetensors ==== */
static inline int fz_safetensors(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *path = fz_tmp_path("st");
    int rc;
    if (data[0] & 1) {   /* structured: the rest is the header JSON */
        size_t jl = size - 1, dl = 8192;
        unsigned char *f = calloc(8 + jl + dl, 1);
        if (!f) return 0;
        fz_put64(f, jl);
        memcpy(f + 8, data + 1, jl);
        rc = fz_write(path, f, 8 + jl + dl);
        free(f);
    } else {
        rc = fz_write(path, data + 1, size - 1);
    }
    if (rc) return 0;
    st_model *m = fz_small_model();
    st_error e = {0};
    int r = st_model_load_safetensors(m, path, &e);
    if (r != ST_OK && (e.code != r || !strstr(e.msg, path))) fz_fail("safetensors: error does not name the file");
    unlink(path);
    return 0;
}

/* ================================================================== cache ==== */
/* The key a reader is asked with: taken from the file's own header (when it has one) so
 * that inputs reach the checks behind the key comparison. */
static inline void fz_cache_key(const unsigned char *h, size_t n, sd_cache_key *k) {
    memset(k, 0, sizeof *k);
    k->vocab_size = 256;
    snprintf(k->spec, sizeof k->spec, "byte");
    if (n < 128) return;
    k->tok_hash = fz_get64(h + 16);
    k->src.size = fz_get64(h + 24);
    k->src.mtime_ns = (int64_t)fz_get64(h + 32);
    k->src.sample = fz_get64(h + 40);
    k->begin = (int64_t)fz_get64(h + 48);
    k->end = (int64_t)fz_get64(h + 56);
    uint32_t v = fz_get32(h + 80);
    k->vocab_size = v >= 2 && v <= (1u << 24) ? (int32_t)v : 256;
    memcpy(k->spec, h + 88, 15);
    k->spec[15] = 0;
}

static inline void fz_cache_fix_crcs(unsigned char *f, size_t n) {
    if (n < 128) return;
    /* block table CRC (type 1): the table follows the header, 8 bytes per block */
    int64_t count = (int64_t)fz_get64(f + 64);
    if (fz_get32(f + 12) == 1 && count >= 0 && count < ((int64_t)1 << 40)) {
        uint64_t nblk = ((uint64_t)count + (1u << 20) - 1) >> 20;
        if (nblk * 8 <= n - 128) fz_put32(f + 84, st_crc32(0, f + 128, (size_t)nblk * 8));
    }
    fz_put64(f + 104, n - 128);
    fz_put32(f + 124, st_crc32(0, f, 124));
}

/* structured: header (128 bytes, fields as given) + a raw payload that is compressed and
 * framed here. type 1: the payload is one block of byte planes; type 2: tokenizer JSON. */
static inline unsigned char *fz_cache_frame(const uint8_t *d, size_t n, size_t *out_n) {
    if (n < 128) return NULL;
    unsigned char hdr[128];
    memcpy(hdr, d, 128);
    const uint8_t *pl = d + 128;
    size_t pn = n - 128;
    uint32_t type = fz_get32(hdr + 12);
    uLongf zn = compressBound((uLong)pn);
    unsigned char *f = malloc(128 + 8 + zn);
    if (!f) return NULL;
    memcpy(hdr, "STRCACHE", 8);
    fz_put32(hdr + 8, 1);
    size_t off = 128;
    if (type == 1) {
        uint32_t planes = fz_get32(hdr + 112);
        if (planes < 1 || planes > 4) planes = 1;
        size_t count = pn / planes;
        if (count > (1u << 20)) count = 1u << 20;
        pn = count * planes;
        fz_put32(hdr + 112, planes);
        fz_put32(hdr + 116, 1u << 20);
        fz_put64(hdr + 64, count);
        if (count > 0) {
            if (compress2(f + 136, &zn, pl, (uLong)pn, 1) != Z_OK) { free(f); return NULL; }
            fz_put32(f + 128, (uint32_t)zn);
            fz_put32(f + 132, st_crc32(0, pl, pn));
            fz_put32(hdr + 84, st_crc32(0, f + 128, 8));
            off = 136 + zn;
        } else {
            fz_put32(hdr + 84, 0);
        }
    } else {
        fz_put32(hdr + 12, 2);
        if (compress2(f + 128, &zn, pl, (uLong)pn, 6) != Z_OK) { free(f); return NULL; }
        fz_put64(hdr + 64, pn);
        fz_put32(hdr + 84, st_crc32(0, pl, pn));
        off = 128 + zn;
    }
    fz_put64(hdr + 104, off - 128);
    fz_put32(hdr + 124, st_crc32(0, hdr, 124));
    memcpy(f, hdr, 128);
    *out_n = off;
    return f;
}

static inline int fz_cache(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *path = fz_tmp_path("cache");
    unsigned char *f = NULL;
    size_t n = size - 1;
    int mode = data[0] % 3;
    if (mode == 2) {
        f = fz_cache_frame(data + 1, size - 1, &n);
    } else {
        f = malloc(n ? n : 1);
        if (f) memcpy(f, data + 1, n);
        if (f && mode == 1) fz_cache_fix_crcs(f, n);
    }
    if (!f) return 0;
    sd_cache_key k;
    fz_cache_key(f, n, &k);
    int rc = fz_write(path, f, n);
    free(f);
    if (rc) return 0;
    int32_t *tok = NULL;
    int64_t count = 0, bytes = 0;
    if (st_sd_cache_read_tokens(path, &k, &tok, &count, &bytes)) {
        if (count < 0) fz_fail("cache: negative token count");
        for (int64_t i = 0; i < count; i++)
            if (tok[i] < 0 || tok[i] >= k.vocab_size) fz_fail("cache: token id out of range accepted");
        free(tok);
    }
    st_tokenizer *t = NULL;
    if (st_sd_cache_read_tokenizer(path, &k, &t)) {
        if (st_tokenizer_vocab_size(t) < 2) fz_fail("cache: tokenizer with < 2 symbols accepted");
        st_tokenizer_free(t);
    }
    unlink(path);
    return 0;
}

/* ============================================================== tokenizer ==== */
/* encode -> ids in range; byte and BPE: decode(encode(x)) == x */
static inline void fz_roundtrip(const st_tokenizer *t, const uint8_t *text, size_t n) {
    int64_t cnt = st_tokenizer_encode(t, (const char *)text, (int64_t)n, NULL, 0);
    int kind = st_tokenizer_kind(t), V = st_tokenizer_vocab_size(t);
    if (cnt < 0) {
        if (kind == ST_TOK_BYTE || kind == ST_TOK_BPE) fz_fail("tokenizer: byte/BPE encode refused bytes");
        return;
    }
    if (cnt > (int64_t)n) fz_fail("tokenizer: more tokens than bytes");
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(cnt + 1));
    if (!ids) return;
    if (st_tokenizer_encode(t, (const char *)text, (int64_t)n, ids, cnt) != cnt) fz_fail("tokenizer: encode count changed");
    for (int64_t i = 0; i < cnt; i++)
        if (ids[i] < 0 || ids[i] >= V) fz_fail("tokenizer: id out of range");
    int64_t len = st_tokenizer_decode(t, ids, cnt, NULL, 0);
    if (len < 0) fz_fail("tokenizer: decode refused its own ids");
    char *out = malloc((size_t)len + 1);
    if (out) {
        if (st_tokenizer_decode(t, ids, cnt, out, len + 1) != len) fz_fail("tokenizer: decode length changed");
        if ((kind == ST_TOK_BYTE || kind == ST_TOK_BPE) && (len != (int64_t)n || memcmp(out, text, n) != 0))
            fz_fail("tokenizer: decode(encode(x)) != x");
        /* a short buffer is filled snprintf-style and still NUL-terminated */
        char small[8];
        if (st_tokenizer_decode(t, ids, cnt, small, sizeof small) != len || small[len < 7 ? len : 7] != 0)
            fz_fail("tokenizer: truncated decode");
        free(out);
    }
    free(ids);
}

static inline const st_tokenizer *fz_fixed_bpe(void) {
    static st_tokenizer *t;
    if (!t) {
        static const char text[] =
            "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
            "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n"
            "  indented\tlines \t with\r\n tabs and 12345 digits, UTF-8: \xc3\xa9t\xc3\xa9 \xe2\x80\x94 ok!!\n";
        st_error e = {0};
        t = st_tokenizer_train_bpe(text, (int64_t)sizeof text - 1, 300, &e);
        if (!t) fz_fail("cannot train the fixed BPE");
    }
    return t;
}

static inline int fz_tokenizer(const uint8_t *data, size_t size) {
    /* tokenizer JSON up to the first NUL; the text to encode after it (or the whole input) */
    const uint8_t *nul = memchr(data, 0, size);
    size_t jn = nul ? (size_t)(nul - data) : size;
    const uint8_t *text = nul ? nul + 1 : data;
    size_t tn = nul ? size - jn - 1 : size;
    fz_roundtrip(fz_fixed_bpe(), text, tn);
    const char *path = fz_tmp_path("tok");
    if (fz_write(path, data, jn)) return 0;
    st_error e = {0};
    st_tokenizer *t = st_tokenizer_load(path, &e);
    if (!t && (!e.code || !strstr(e.msg, path))) fz_fail("tokenizer: error does not name the file");
    if (t) {
        /* save and load back: same identity */
        st_error e2 = {0};
        if (st_tokenizer_save(t, path, &e2)) fz_fail("tokenizer: cannot save a loaded tokenizer");
        st_tokenizer *t2 = st_tokenizer_load(path, &e2);
        if (!t2 || st_tokenizer_hash(t2) != st_tokenizer_hash(t) ||
            st_tokenizer_vocab_size(t2) != st_tokenizer_vocab_size(t))
            fz_fail("tokenizer: save/load round trip changed it");
        st_tokenizer_free(t2);
        fz_roundtrip(t, text, tn);
        st_tokenizer_free(t);
    }
    unlink(path);
    return 0;
}

/* ================================================================== sweep ==== */
/* A per-process directory holding the sweep file and the base config it may name. */
static inline const char *fz_sweep_dir(void) {
    static char dir[600];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", fz_tmp_path("sweep"));
        if (mkdir(dir, 0700) && errno != EEXIST) fz_fail("cannot make the sweep temp dir");
        char base[700];
        snprintf(base, sizeof base, "%s/base.json", dir);
        static const char cfg[] =
            "{\"model\": {\"n_layers\": 1, \"d_model\": 16, \"n_heads\": 2, \"pos\": \"alibi\"},\n"
            " \"data\": {\"source\": \"synthetic\", \"synthetic\": {\"vocab\": 16, \"tokens\": [2000, 500, 500]}},\n"
            " \"train\": {\"batch_size\": 2, \"seq_len\": 8, \"steps\": 4000, \"threads\": 1}}\n";
        if (fz_write(base, cfg, sizeof cfg - 1)) fz_fail("cannot write the sweep base config");
    }
    return dir;
}

/* Remove that directory (the regression test, at its end; a fuzzer leaves it). */
static inline void fz_sweep_cleanup(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/base.json", fz_sweep_dir());
    unlink(path);
    rmdir(fz_sweep_dir());
}

static inline int fz_sweep(const uint8_t *data, size_t size) {
    const char *dir = fz_sweep_dir();
    char path[700], out[700];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    if (fz_write(path, data, size)) return 0;
    st_sweep_opts opts = {0};
    opts.dry_run = 1;
    opts.out = out;
    sweep s;
    st_error e = {0};
    int rc = st_sweep_load(&s, path, &opts, &e);
    if (rc != ST_OK && (e.code != rc || !strstr(e.msg, path)))
        fz_fail("sweep: an error without the file's name or with another code");
    if (rc == ST_OK) {
        if (s.n_points < 1) fz_fail("sweep: accepted with no points");
        for (int i = 0; i < s.n_points; i++) {
            const sweep_point *pt = &s.points[i];
            if (!pt->name[0] || strchr(pt->name, '/')) fz_fail("sweep: a point name that is not one directory");
            for (int j = 0; j < i; j++)
                if (!strcmp(pt->dir, s.points[j].dir)) fz_fail("sweep: two points share a run directory");
            st_run_config c = pt->cfg;
            st_error e2 = {0};
            if (st_run_config_validate(&c, &e2) != ST_OK) fz_fail("sweep: a point's config fails validation");
        }
    }
    st_sweep_free(&s);
    unlink(path);
    return 0;
}

#endif
