/* test_data_cache.c - token caches and bad input:
 *   hit after a build; rebuilt when the source is touched or edited, when the
 *   tokenizer setting changes, or when the cached vocabulary is a different tokenizer;
 *   a flipped byte, a truncation, trailing bytes or an out-of-range id is detected and
 *   rebuilt with identical results; no temp files left behind; default cache location
 *   and the fallback for a read-only data directory;
 *   missing / empty / binary / too-small files, a missing split, an unknown valid word:
 *   the right st_status and the file name in the message. */
#define _GNU_SOURCE
#include "harness.h"
#include "data/data_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* Whole lines of pseudo-words (syllable strings, Zipf-like choice among the first
 * `vocab` of them) with " ." / " ," as separate tokens, WikiText style; about n bytes. */
static char *make_corpus(int64_t n, int vocab, uint64_t seed, int64_t *len) {
    static const char *syl[] = {"ka", "to", "ri", "ne", "mo", "sa", "lu", "vi", "de", "po", "an", "el", "or", "us",
                                "th", "qu", "ie", "ba", "zo", "gi"};
    st_rng r;
    st_rng_seed(&r, seed);
    char *s = malloc((size_t)n + 256);
    int64_t k = 0;
    while (k < n) {
        int words = 3 + (int)st_rng_below(&r, 12);
        for (int w = 0; w < words; w++) {
            double u = st_rng_uniform(&r);
            uint64_t id = (uint64_t)((double)vocab * u * u);
            int nsyl = 1 + (int)(st_hash64(7, id) % 3);
            s[k++] = ' ';
            for (int q = 0; q < nsyl; q++) k += sprintf(s + k, "%s", syl[st_hash64(id, (uint64_t)q) % 20]);
            if (st_rng_uniform(&r) < 0.05) k += sprintf(s + k, " ,");
        }
        k += sprintf(s + k, " .\n");
    }
    s[k] = 0;
    *len = k;
    return s;
}

typedef struct snap { int64_t n[3], bytes[3]; int32_t *t[3]; uint64_t hash; } snap;

static void take(snap *s, const st_dataset *ds) {
    for (int i = 0; i < 3; i++) {
        s->n[i] = ds->n[i];
        s->bytes[i] = ds->bytes[i];
        s->t[i] = malloc((size_t)ds->n[i] * 4);
        memcpy(s->t[i], ds->tokens[i], (size_t)ds->n[i] * 4);
    }
    s->hash = ds->tok_hash;
}

static int same(const snap *s, const st_dataset *ds) {
    int ok = s->hash == ds->tok_hash;
    for (int i = 0; i < 3; i++) ok &= s->n[i] == ds->n[i] && !memcmp(s->t[i], ds->tokens[i], (size_t)ds->n[i] * 4);
    return ok;
}

static void drop(snap *s) { for (int i = 0; i < 3; i++) free(s->t[i]); }

/* load and return cache_hits (-1 on error) */
static int load_hits(const st_data_config *c, st_dataset *ds) {
    st_error e = {0};
    if (st_dataset_load(c, "t.json", ds, &e)) { printf("  load failed: %s\n", e.msg); return -1; }
    return ds->cache_hits;
}

static void flip_byte(const char *path, long off) {
    int fd = open(path, O_RDWR);
    unsigned char b;
    if (off < 0) off += lseek(fd, 0, SEEK_END);
    pread(fd, &b, 1, off);
    b ^= 0x5a;
    pwrite(fd, &b, 1, off);
    close(fd);
}

static int no_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 1;
    struct dirent *x;
    int ok = 1;
    while ((x = readdir(d))) ok &= strstr(x->d_name, ".tmp.") == NULL;
    closedir(d);
    return ok;
}

/* The caches of test_invalidation's corpus damaged in every way: each damage is detected,
 * the cache rebuilt, the data identical (c: its config, ref: the data, key: the vocabulary
 * cache's key). */
static void test_corruption(st_data_config *cfg, const snap *ref, const char *path, const char *train_cache,
                            const char *vocab_cache, sd_cache_key *key) {
    st_data_config c = *cfg;
    st_dataset ds;
    st_error e = {0};
    /* corruption of the train cache: detected, rebuilt, identical */
    struct { const char *what; int kind; } cases[] = {
        {"payload byte flipped", 0}, {"header byte flipped", 1}, {"last byte flipped", 2},
        {"truncated to half", 3}, {"truncated inside the header", 4}, {"trailing garbage", 5}, {"emptied", 6}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct stat st;
        stat(train_cache, &st);
        switch (cases[k].kind) {
        case 0: flip_byte(train_cache, 128 + (st.st_size - 128) / 2); break;
        case 1: flip_byte(train_cache, 70); break;
        case 2: flip_byte(train_cache, -1); break;
        case 3: truncate(train_cache, st.st_size / 2); break;
        case 4: truncate(train_cache, 60); break;
        case 5: { FILE *f = fopen(train_cache, "ab"); fputs("garbage", f); fclose(f); break; }
        case 6: truncate(train_cache, 0); break;
        }
        int h = load_hits(&c, &ds);
        CHECK_MSG(h == 2 && same(ref, &ds), "%s: %d hits", cases[k].what, h);
        st_dataset_free(&ds);
        CHECK_MSG(load_hits(&c, &ds) == 3, "%s: cache rewritten", cases[k].what);
        st_dataset_free(&ds);
    }
    /* a well-formed cache (valid CRCs) holding an id >= vocab: refused */
    CHECK(load_hits(&c, &ds) == 3);
    sd_cache_key tk;
    memset(&tk, 0, sizeof tk);
    st_sd_identity_of(path, &tk.src, &e);
    tk.end = ds.bytes[0];
    tk.tok_hash = ds.tok_hash;
    tk.vocab_size = ds.vocab_size;
    snprintf(tk.spec, sizeof tk.spec, "bpe300");
    int32_t *bad = malloc((size_t)ds.n[0] * 4);
    memcpy(bad, ds.tokens[0], (size_t)ds.n[0] * 4);
    bad[ds.n[0] / 2] = 100000;
    CHECK(st_sd_cache_write_tokens(train_cache, &tk, bad, ds.n[0], ds.bytes[0], &e) == ST_OK);
    free(bad);
    int64_t rn, rb;
    int32_t *rt = NULL;
    CHECK(st_sd_cache_read_tokens(train_cache, &tk, &rt, &rn, &rb) == 0 && rt == NULL);
    st_dataset_free(&ds);
    CHECK(load_hits(&c, &ds) == 2 && same(ref, &ds));
    st_dataset_free(&ds);
    /* a corrupt vocabulary cache: retrained, identical tokenizer, so the splits stay valid */
    flip_byte(vocab_cache, 200);
    CHECK(load_hits(&c, &ds) == 3 && same(ref, &ds));
    st_dataset_free(&ds);
    key->tok_hash = 0;
    st_tokenizer *vt = NULL;
    CHECK(st_sd_cache_read_tokenizer(vocab_cache, key, &vt) == 1 && vt && st_tokenizer_hash(vt) == ref->hash);
    st_tokenizer_free(vt);
}

static void test_invalidation(const char *tmp) {
    char path[900], cdir[900];
    snprintf(path, sizeof path, "%s/corpus.txt", tmp);
    snprintf(cdir, sizeof cdir, "%s/cache", tmp);
    int64_t tlen;
    char *text = make_corpus(200000, 400, 11, &tlen);
    write_file(path, text, (size_t)tlen);
    st_data_config c;
    st_data_config_default(&c);
    strcpy(c.source, "text");
    strcpy(c.tokenizer, "bpe");
    c.bpe_vocab = 300;
    snprintf(c.path, sizeof c.path, "%s", path);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s", cdir);
    st_dataset ds;
    snap ref;
    CHECK(load_hits(&c, &ds) == 0);
    CHECK(ds.unit == ST_UNIT_BYTE && ds.vocab_size == 300 && ds.bytes[0] + ds.bytes[1] + ds.bytes[2] == tlen);
    CHECK(ds.n[0] < ds.bytes[0] && ds.n[1] > 0 && ds.n[2] > 0);
    CHECK(strncmp(ds.cache_file[0], cdir, strlen(cdir)) == 0 && access(ds.cache_file[0], F_OK) == 0 &&
          access(ds.vocab_file, F_OK) == 0);
    take(&ref, &ds);
    char train_cache[ST_PATH_BUF], vocab_cache[ST_PATH_BUF];
    snprintf(train_cache, sizeof train_cache, "%s", ds.cache_file[0]);
    snprintf(vocab_cache, sizeof vocab_cache, "%s", ds.vocab_file);
    st_dataset_free(&ds);
    /* hit, identical */
    CHECK(load_hits(&c, &ds) == 3 && same(&ref, &ds));
    st_dataset_free(&ds);
    /* touch: new mtime, same bytes -> rebuilt (identical result) */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1700000000, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
    CHECK(load_hits(&c, &ds) == 0 && same(&ref, &ds));
    st_dataset_free(&ds);
    CHECK(load_hits(&c, &ds) == 3);
    st_dataset_free(&ds);
    /* same size and mtime but different bytes (copy with preserved time): caught by the sample CRC */
    char orig = text[10];
    text[10] = orig == 'x' ? 'y' : 'x';
    write_file(path, text, (size_t)tlen);
    utimensat(AT_FDCWD, path, ts, 0);
    CHECK(load_hits(&c, &ds) == 0 && !same(&ref, &ds));
    st_dataset_free(&ds);
    text[10] = orig;
    write_file(path, text, (size_t)tlen);
    CHECK(load_hits(&c, &ds) == 0 && same(&ref, &ds));
    st_dataset_free(&ds);
    /* another tokenizer setting: its own caches */
    c.bpe_vocab = 320;
    CHECK(load_hits(&c, &ds) == 0 && ds.vocab_size == 320 && ds.tok_hash != ref.hash);
    st_dataset_free(&ds);
    strcpy(c.tokenizer, "byte");
    CHECK(load_hits(&c, &ds) == 0 && ds.vocab_size == 256 && ds.n[0] == ds.bytes[0]);
    st_dataset_free(&ds);
    CHECK(load_hits(&c, &ds) == 3);
    st_dataset_free(&ds);
    strcpy(c.tokenizer, "bpe");
    c.bpe_vocab = 300;
    CHECK(load_hits(&c, &ds) == 3 && same(&ref, &ds));
    st_dataset_free(&ds);
    /* different split fractions: different ranges, rebuilt */
    c.valid_frac = 0.1f;
    CHECK(load_hits(&c, &ds) == 0 && ds.bytes[1] > ref.bytes[1]);
    st_dataset_free(&ds);
    c.valid_frac = 0.05f;
    CHECK(load_hits(&c, &ds) == 0 && same(&ref, &ds));
    st_dataset_free(&ds);

    /* the cached vocabulary replaced by another tokenizer (same key): the token caches
     * were made by the old one and must not be used with it */
    st_error e = {0};
    st_tokenizer *other = st_tokenizer_train_bpe("zzz yyy zzz yyy xxx", 19, 260, &e);
    sd_cache_key key;
    memset(&key, 0, sizeof key);
    CHECK(st_sd_identity_of(path, &key.src, &e) == ST_OK);
    key.begin = 0;
    CHECK(load_hits(&c, &ds) == 3);
    key.end = ds.bytes[0];
    st_dataset_free(&ds);
    snprintf(key.spec, sizeof key.spec, "bpe300");
    CHECK(st_sd_cache_write_tokenizer(vocab_cache, &key, other, &e) == ST_OK);
    CHECK(load_hits(&c, &ds) == 0 && ds.tok_hash == st_tokenizer_hash(other) && ds.vocab_size == 260);
    int64_t want = st_tokenizer_encode(other, text, ds.bytes[0], NULL, 0);
    CHECK(ds.n[0] == want);
    st_dataset_free(&ds);
    st_tokenizer_free(other);
    unlink(vocab_cache);   /* back to the real tokenizer */
    CHECK(load_hits(&c, &ds) == 0 && same(&ref, &ds));
    st_dataset_free(&ds);

    test_corruption(&c, &ref, path, train_cache, vocab_cache, &key);
    CHECK(no_temp_files(cdir));
    drop(&ref);
    free(text);
}

static void test_word_cache(const char *tmp) {
    char dir[700], p[900];
    snprintf(dir, sizeof dir, "%s/wt", tmp);
    mkdir(dir, 0755);
    int64_t ln, l1, l2, l3;
    char *text = make_corpus(100000, 40, 1, &ln), *v1 = make_corpus(5000, 40, 2, &l1), *v2 = make_corpus(5000, 40, 3, &l2),
         *t1 = make_corpus(5000, 40, 4, &l3);
    snprintf(p, sizeof p, "%s/wiki.train.tokens", dir); write_file(p, text, (size_t)ln);
    snprintf(p, sizeof p, "%s/wiki.valid.tokens", dir); write_file(p, v1, (size_t)l1);
    snprintf(p, sizeof p, "%s/wiki.test.tokens", dir); write_file(p, t1, (size_t)l3);
    st_data_config c;
    st_data_config_default(&c);
    strcpy(c.source, "wikitext");
    snprintf(c.path, sizeof c.path, "%s", dir);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/wcache", tmp);
    st_dataset ds;
    snap ref;
    /* vocabulary: the distinct pseudo-words + "," + "." + <eos>, counted independently */
    int distinct = 0;
    {
        char seen[200][32];
        for (char *q = text; *q;) {
            while (*q == ' ' || *q == '\n') q++;
            if (!*q) break;
            char wbuf[32];
            int m = 0;
            while (*q && *q != ' ' && *q != '\n' && m < 31) wbuf[m++] = *q++;
            wbuf[m] = 0;
            int found = 0;
            for (int i = 0; i < distinct && !found; i++) found = !strcmp(seen[i], wbuf);
            if (!found && distinct < 200) strcpy(seen[distinct++], wbuf);
        }
    }
    int hits0 = load_hits(&c, &ds);
    CHECK_MSG(hits0 == 0 && ds.unit == ST_UNIT_WORD && ds.vocab_size == distinct + 1, "vocab %d, distinct words %d",
              ds.vocab_size, distinct);
    take(&ref, &ds);
    st_dataset_free(&ds);
    CHECK(load_hits(&c, &ds) == 3 && same(&ref, &ds));
    st_dataset_free(&ds);
    /* a changed valid file: only valid is rebuilt */
    snprintf(p, sizeof p, "%s/wiki.valid.tokens", dir);
    write_file(p, v2, (size_t)l2);
    CHECK(load_hits(&c, &ds) == 2);
    st_dataset_free(&ds);
    /* train cache lost but vocabulary cached: rebuilt from train, same ids */
    CHECK(load_hits(&c, &ds) == 3);
    unlink(ds.cache_file[0]);
    st_dataset_free(&ds);
    CHECK(load_hits(&c, &ds) == 2 && ds.tok_hash == ref.hash && !memcmp(ds.tokens[0], ref.t[0], (size_t)ref.n[0] * 4));
    st_dataset_free(&ds);
    /* a valid word missing from train: error naming the file and line */
    snprintf(p, sizeof p, "%s/wiki.test.tokens", dir);
    {   /* two lines of train, then a line with an unseen word */
        char *nl = strchr(strchr(text, '\n') + 1, '\n') + 1;
        size_t head = (size_t)(nl - text);
        char *bad = malloc(head + 32);
        memcpy(bad, text, head);
        strcpy(bad + head, " . dragon .\n");
        write_file(p, bad, strlen(bad));
        free(bad);
    }
    st_error e = {0};
    CHECK(st_dataset_load(&c, "t.json", &ds, &e) == ST_ERR_DATA);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "line 3") && strstr(e.msg, "\"dragon\""), "%s", e.msg);
    drop(&ref);
    free(text);
    free(v1);
    free(v2);
    free(t1);
}

static void expect_error(const st_data_config *c, int code, const char *name, const char *what) {
    st_dataset ds;
    st_error e = {0};
    int rc = st_dataset_load(c, "t.json", &ds, &e);
    CHECK_MSG(rc == code && strstr(e.msg, name) && (!what || strstr(e.msg, what)),
              "expected %s (%d) naming %s%s%s, got %d: %s", st_status_name(code), code, name, what ? " and " : "",
              what ? what : "", rc, e.msg);
    if (rc == ST_OK) st_dataset_free(&ds);
}

static void test_bad_input(const char *tmp) {
    st_data_config c;
    char p[900], d[800];
    st_data_config_default(&c);
    strcpy(c.source, "text");
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/bcache", tmp);
    snprintf(p, sizeof p, "%s/nope.txt", tmp);
    snprintf(c.path, sizeof c.path, "%s", p);
    expect_error(&c, ST_ERR_IO, p, "No such file");
    snprintf(p, sizeof p, "%s/empty.txt", tmp);
    write_file(p, "", 0);
    snprintf(c.path, sizeof c.path, "%s", p);
    expect_error(&c, ST_ERR_DATA, p, "empty");
    /* binary: a NUL byte on line 3 */
    snprintf(p, sizeof p, "%s/binary.bin", tmp);
    char bin[4096];
    for (int i = 0; i < 4096; i++) bin[i] = (char)(i % 50 + 40);
    bin[10] = bin[20] = '\n';
    bin[3000] = 0;
    write_file(p, bin, sizeof bin);
    snprintf(c.path, sizeof c.path, "%s", p);
    expect_error(&c, ST_ERR_DATA, p, "NUL byte");
    strcpy(c.tokenizer, "bpe");
    expect_error(&c, ST_ERR_DATA, p, "binary");
    /* the NUL in a later split: the line number counts from the file start */
    bin[3000] = 'x';
    bin[4000] = 0;
    write_file(p, bin, sizeof bin);
    strcpy(c.tokenizer, "byte");
    expect_error(&c, ST_ERR_DATA, p, "line 3:");
    snprintf(p, sizeof p, "%s/tiny.txt", tmp);
    write_file(p, "ab", 2);
    snprintf(c.path, sizeof c.path, "%s", p);
    expect_error(&c, ST_ERR_DATA, p, "too small");
    snprintf(c.path, sizeof c.path, "%s", tmp);
    expect_error(&c, ST_ERR_IO, tmp, "directory");
    /* an unwritable explicit cache dir */
    snprintf(p, sizeof p, "%s/afile", tmp);
    write_file(p, "x", 1);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/sub", p);
    snprintf(c.path, sizeof c.path, "%s/binary.bin", tmp);
    expect_error(&c, ST_ERR_IO, "t.json: data.cache_dir", p);
    /* wikitext: missing directory, missing split */
    st_data_config_default(&c);
    strcpy(c.source, "wikitext");
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/bcache", tmp);
    snprintf(d, sizeof d, "%s/nowiki", tmp);
    snprintf(c.path, sizeof c.path, "%s", d);
    expect_error(&c, ST_ERR_IO, d, NULL);
    mkdir(d, 0755);
    snprintf(p, sizeof p, "%s/train.txt", d); write_file(p, "a b\n", 4);
    snprintf(p, sizeof p, "%s/valid.txt", d); write_file(p, "a\n", 2);
    expect_error(&c, ST_ERR_IO, d, "test.txt");
    snprintf(p, sizeof p, "%s/test.txt", d); write_file(p, "", 0);
    expect_error(&c, ST_ERR_DATA, p, "empty");
    write_file(p, "b", 1);   /* an unterminated last line still gets its <eos> */
    st_dataset ds;
    st_error e = {0};
    CHECK(st_dataset_load(&c, "t.json", &ds, &e) == ST_OK && ds.n[2] == 2 && ds.n[0] == 3);
    st_dataset_free(&ds);
    /* densest input: one token per byte ("a\n\n" = a <eos> <eos>), across many small blocks */
    char *dense = malloc(300001);
    for (int i = 0; i < 300000; i += 3) memcpy(dense + i, i % 7 ? "a\n\n" : "b \n", 3);
    snprintf(p, sizeof p, "%s/train.txt", d);
    write_file(p, dense, 300000);
    setenv("STRETCH_DATA_BLOCK", "4096", 1);
    CHECK(st_dataset_load(&c, "t.json", &ds, &e) == ST_OK && ds.n[0] == 300000 - 100000 / 7 - 1);
    unsetenv("STRETCH_DATA_BLOCK");
    int ok = ds.tokens[0] != NULL;
    for (int64_t i = 0; ok && i < 6; i++) ok &= ds.tokens[0][i] == (int32_t[]){0, 1, 2, 1, 1, 2}[i];
    CHECK(ok);
    st_dataset_free(&ds);
    free(dense);
}

static void test_cache_location(const char *tmp) {
    char d[700], p[900], alt[700];
    snprintf(d, sizeof d, "%s/data", tmp);
    mkdir(d, 0755);
    snprintf(p, sizeof p, "%s/corpus.txt", d);
    int64_t tlen;
    char *text = make_corpus(20000, 100, 11, &tlen);
    write_file(p, text, (size_t)tlen);
    free(text);
    st_data_config c;
    st_data_config_default(&c);
    strcpy(c.source, "text");
    snprintf(c.path, sizeof c.path, "%s", p);
    st_dataset ds;
    CHECK(load_hits(&c, &ds) == 0);
    char want[1300];
    snprintf(want, sizeof want, "%s/.stretch-cache/", d);
    CHECK_MSG(!strncmp(ds.cache_file[1], want, strlen(want)), "cache at %s", ds.cache_file[1]);
    st_dataset_free(&ds);
    /* a data directory without write bits is left alone: $TMPDIR/stretch-cache */
    snprintf(d, sizeof d, "%s/ro", tmp);
    mkdir(d, 0755);
    snprintf(p, sizeof p, "%s/corpus.txt", d);
    write_file(p, "one two three\nfour five six\nseven eight\nnine ten\n", 49);
    chmod(d, 0555);
    snprintf(alt, sizeof alt, "%s/alt-tmp", tmp);
    mkdir(alt, 0755);
    char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", alt, 1);
    snprintf(c.path, sizeof c.path, "%s", p);
    c.valid_frac = c.test_frac = 0.25f;
    CHECK(load_hits(&c, &ds) == 0);
    snprintf(want, sizeof want, "%s/stretch-cache/", alt);
    CHECK_MSG(!strncmp(ds.cache_file[0], want, strlen(want)), "cache at %s", ds.cache_file[0]);
    snprintf(want, sizeof want, "%s/.stretch-cache", d);
    CHECK(access(want, F_OK) != 0);
    st_dataset_free(&ds);
    CHECK(load_hits(&c, &ds) == 3);
    st_dataset_free(&ds);
    if (old) { setenv("TMPDIR", old, 1); free(old); }
    else unsetenv("TMPDIR");
    chmod(d, 0755);
}

int main(void) {
    char tmp[512];
    if (!test_tmpdir(tmp, sizeof tmp)) { printf("cannot create a temporary directory\n"); return 1; }
    test_invalidation(tmp);
    test_word_cache(tmp);
    test_bad_input(tmp);
    test_cache_location(tmp);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("could not remove %s\n", tmp);
    return test_finish("test_data_cache");
}
