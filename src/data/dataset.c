/* dataset.c - st_dataset_load: find the split files, load or build the tokenizer and
 * the three token streams, use and refresh the token caches.
 *
 *   synthetic: build the Markov source, compute its entropy rate, sample the splits
 *              (seeds derived from syn_seed per split); never cached.
 *   wikitext : <dir>/{train,valid,test}.txt or wiki.{train,valid,test}.tokens.
 *   text     : one file, split by bytes: train = the first 1 - valid_frac - test_frac,
 *              then valid, then test; each cut moved forward to the next line start
 *              (within 64 KiB) so no line is split.
 * Caches (cache.c) live in <cache dir>/<stem>.<split>.<spec>.tokens and the vocabulary
 * (word / BPE) in <stem>.<spec>.vocab; <stem> is the source's name plus a hash of its
 * absolute path, so one cache dir serves many corpora. */
#define _GNU_SOURCE
#include "data/data_internal.h"
#include "st_task.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *split_name[3] = {"train", "valid", "test"};

typedef struct split_src { char path[ST_PATH_BUF]; int64_t begin, end; sd_identity id; } split_src;

/* ---- sources ---- */

static const char *wikitext_names[3][2] = {{"train.txt", "wiki.train.tokens"},
                                           {"valid.txt", "wiki.valid.tokens"},
                                           {"test.txt", "wiki.test.tokens"}};

int st_sd_wikitext_split_file(const char *dir, int split, char *out, size_t n, st_error *e) {
    struct stat st;
    for (int k = 0; k < 2; k++) {
        snprintf(out, n, "%s/%s", dir, wikitext_names[split][k]);
        if (stat(out, &st) == 0) return ST_OK;
    }
    return st_fail(e, ST_ERR_IO, "%s: no %s or %s (scripts/download_wikitext.sh fetches WikiText)", dir,
                   wikitext_names[split][0], wikitext_names[split][1]);
}

static int resolve_wikitext(const char *dir, split_src s[3], st_error *e) {
    struct stat st;
    if (stat(dir, &st) != 0) return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return st_fail(e, ST_ERR_IO, "%s: not a directory (wikitext wants the directory holding train.txt, valid.txt, "
                       "test.txt or wiki.*.tokens)", dir);
    for (int i = 0; i < 3; i++) {
        if (st_sd_wikitext_split_file(dir, i, s[i].path, sizeof s[i].path, e)) return e->code;
        if (st_sd_identity_of(s[i].path, &s[i].id, e)) return e->code;
        if (s[i].id.size == 0) return st_fail(e, ST_ERR_DATA, "%s: empty file", s[i].path);
        s[i].begin = 0;
        s[i].end = (int64_t)s[i].id.size;
    }
    return ST_OK;
}

/* first offset >= at that starts a line, looking at most 64 KiB ahead; `at` if none */
static int64_t next_line_start(const char *path, int64_t at, int64_t size) {
    if (at <= 0 || at >= size) return at;
    char buf[1 << 16];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return at;
    ssize_t r = pread(fd, buf, sizeof buf, (off_t)(at - 1));
    close(fd);
    for (ssize_t i = 0; i < r; i++)
        if (buf[i] == '\n') return at + i < size ? at + i : at;
    return at;
}

/* st_sd_stream's reader with nothing to do: the stream's own NUL check is the point */
static int skip_block(void *user, const char *buf, int64_t len, int64_t at, int final, int64_t *used, st_error *e) {
    (void)user, (void)buf, (void)at, (void)final, (void)e;
    *used = len;
    return ST_OK;
}

static int resolve_text(const st_data_config *c, split_src s[3], st_error *e) {
    struct stat st;
    if (stat(c->path, &st) == 0 && S_ISDIR(st.st_mode))
        return st_fail(e, ST_ERR_IO, "%s: is a directory (source \"text\" wants one text file; use \"wikitext\" for a "
                       "directory of splits)", c->path);
    sd_identity id;
    if (st_sd_identity_of(c->path, &id, e)) return e->code;
    if (id.size == 0) return st_fail(e, ST_ERR_DATA, "%s: empty file", c->path);
    int64_t size = (int64_t)id.size;
    int64_t n_valid = (int64_t)((double)size * c->valid_frac), n_test = (int64_t)((double)size * c->test_frac);
    /* cuts move to the next line start, unless that would empty the following split */
    int64_t raw1 = size - n_valid - n_test, raw2 = size - n_test;
    int64_t cut1 = next_line_start(c->path, raw1, size), cut2 = next_line_start(c->path, raw2, size);
    if (cut1 >= raw2) cut1 = raw1;
    if (cut2 >= size) cut2 = raw2;
    if (cut2 <= cut1) cut2 = raw2;
    int64_t b[4] = {0, cut1, cut2, size};
    for (int i = 0; i < 3; i++) {
        snprintf(s[i].path, sizeof s[i].path, "%s", c->path);
        s[i].id = id;
        s[i].begin = b[i];
        s[i].end = b[i + 1];
        if (s[i].end > s[i].begin) continue;
        /* a binary file is the more specific error (a 3-byte file with a NUL was "too
         * small"): its first 64 KiB are read here, the rest would be when it is tokenized */
        if (st_sd_stream(c->path, 0, size < (1 << 16) ? size : 1 << 16, skip_block, NULL, e)) return e->code;
        return st_fail(e, ST_ERR_DATA, "%s: too small (%lld byte%s) to split into train / valid / test with "
                       "valid_frac %g and test_frac %g: the %s split is empty", c->path, (long long)size,
                       size == 1 ? "" : "s", (double)c->valid_frac, (double)c->test_frac, split_name[i]);
    }
    return ST_OK;
}

/* ---- cache locations ---- */

static int resolve_cache_dir(const st_data_config *c, const char *cfg_file, const char *data_dir, char *out, size_t cap,
                             st_error *e) {
    out[0] = 0;
    if (c->cache_dir[0]) {
        if (!st_sd_dir_writable(c->cache_dir))
            return st_fail(e, ST_ERR_IO, "%s: data.cache_dir: cannot create or write to %s", cfg_file ? cfg_file : "config",
                           c->cache_dir);
        snprintf(out, cap, "%s", c->cache_dir);
        return ST_OK;
    }
    char cand[ST_PATH_BUF];
    snprintf(cand, sizeof cand, "%.*s/.stretch-cache", ST_PATH_MAX, data_dir);   /* data_dir <= ST_PATH_MAX */
    /* A data directory without any write bit (a shared, read-only copy) is left alone even
     * when the permission check would let us in (root): only use it when it is meant to
     * be written, or when its cache directory already exists. */
    struct stat st;
    int meant = (stat(cand, &st) == 0 && S_ISDIR(st.st_mode)) ||
                (stat(data_dir, &st) == 0 && (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)));
    if (meant && st_sd_dir_writable(cand)) { snprintf(out, cap, "%s", cand); return ST_OK; }
    const char *tmp = getenv("TMPDIR");
    snprintf(cand, sizeof cand, "%s/stretch-cache", tmp && *tmp ? tmp : "/tmp");
    if (st_sd_dir_writable(cand)) {
        st_log(ST_LOG_DEBUG, "%s is not writable; token caches go to %s", data_dir, cand);
        snprintf(out, cap, "%s", cand);
        return ST_OK;
    }
    st_log(ST_LOG_WARN, "no writable cache directory (%s/.stretch-cache, %s); tokenizing without a cache", data_dir, cand);
    return ST_OK;
}

/* "<name>-<8 hex of the absolute path>" */
static void cache_stem(const char *src, char *out, size_t cap) {
    char abs[PATH_MAX], tmp[PATH_MAX];
    const char *p = realpath(src, abs) ? abs : src;
    snprintf(tmp, sizeof tmp, "%s", p);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
    snprintf(out, cap, "%.200s-%08" PRIx32, basename(tmp), (uint32_t)st_fnv1a(ST_FNV_OFFSET, p, strlen(p)));
}

/* ---- synthetic ---- */

static int load_synthetic(const st_data_config *c, const char *cfg_file, st_dataset *ds, st_error *e) {
    /* refuse before allocating: three splits of up to 2^31 tokens could exceed the machine
     * (malloc would overcommit, and filling the streams would wake the OOM killer) */
    double need = 4.0 * ((double)c->syn_tokens[0] + (double)c->syn_tokens[1] + (double)c->syn_tokens[2]);
    double have = (double)st_mem_total();
    if (have > 0 && need > 0.9 * have)
        return st_fail(e, ST_ERR_MEMORY, "%s: data.synthetic.tokens: %.0f tokens need %.2f GiB; this machine has %.2f GiB",
                       cfg_file && *cfg_file ? cfg_file : "config", need / 4, need / 1073741824.0, have / 1073741824.0);
    st_markov m;
    st_copy cp;
    memset(&cp, 0, sizeof cp);
    int copy = !strcmp(c->syn_mode, "copy");
    int rc = st_markov_init(&m, c->syn_seed, c->syn_vocab, c->syn_order, c->syn_branch, e);
    if (rc) return rc;
    if (copy)
        rc = st_copy_init(&cp, &m, c->copy_len, c->copy_min_dist, c->copy_max_dist, c->copy_decay, c->copy_rate, e);
    for (int i = 0; i < 3 && !rc; i++) {
        ds->tokens[i] = st_malloc((size_t)c->syn_tokens[i] * sizeof(int32_t), e);
        if (!ds->tokens[i]) { rc = ST_ERR_MEMORY; break; }
        ds->n[i] = c->syn_tokens[i];
        uint64_t seed = st_hash64(c->syn_seed, 0x5EED0000u + (uint64_t)i);
        if (copy) st_copy_sample(&cp, &m, seed, ds->tokens[i], ds->n[i]);
        else st_markov_sample(&m, seed, ds->tokens[i], ds->n[i]);
    }
    /* copy mode: one more id (the marker), so its tokenizer and hash differ from markov's */
    int vocab = c->syn_vocab + copy;
    if (!rc && !(ds->tok = st_sd_tok_new_synthetic(vocab, c->syn_seed, c->syn_order, c->syn_branch, e)))
        rc = ST_ERR_MEMORY;
    if (!rc) {
        ds->vocab_size = vocab;
        ds->unit = ST_UNIT_TOKEN;
        ds->tok_hash = ds->tok->hash;
        ds->entropy_rate = copy ? cp.entropy_rate : m.entropy_rate;
        if (!c->quiet)
            st_log(ST_LOG_INFO, "data: synthetic Markov source V=%d order %d branch %d seed %" PRIu64
                   ": entropy rate %.6f nats/token, ideal perplexity %.4f", c->syn_vocab, c->syn_order, c->syn_branch,
                   c->syn_seed, m.entropy_rate, exp(m.entropy_rate));
        if (copy && !c->quiet)
            st_log(ST_LOG_INFO, "data: copy mode (len %d, distance %d..%d, decay %g, rate %g, gap %d; H(distance) %.4f): "
                   "entropy rate %.6f nats/token, ideal perplexity %.4f", cp.len, cp.min_dist, cp.max_dist, cp.decay,
                   cp.rate, cp.gap, cp.dist_entropy, cp.entropy_rate, exp(cp.entropy_rate));
    }
    st_copy_free(&cp);
    st_markov_free(&m);
    return rc;
}

/* ---- task: the generator's instances (include/st_task.h) ---- */

/* The loader draws training rows from the generator itself; the three streams (instances
 * back to back, 2^16 tokens each, from per-split seeds) serve perplexity evaluation and
 * the checks that want a stream. */
#define TASK_STREAM_TOKENS ((int64_t)1 << 16)

static int load_task(const st_data_config *c, const char *cfg_file, st_dataset *ds, st_error *e) {
    if (!(ds->task = st_calloc(1, sizeof *ds->task, e))) return ST_ERR_MEMORY;
    int rc = st_task_data_init(ds->task, c, cfg_file, e);
    if (rc) { free(ds->task); ds->task = NULL; return rc; }
    for (int i = 0; i < 3; i++) {
        if (!(ds->tokens[i] = st_malloc((size_t)TASK_STREAM_TOKENS * sizeof(int32_t), e))) return ST_ERR_MEMORY;
        ds->n[i] = TASK_STREAM_TOKENS;
        st_task_stream(ds->task, st_hash64(c->syn_seed, 0x7A5C0000u + (uint64_t)i), ds->tokens[i], ds->n[i]);
    }
    const int vocab = st_task_vocab(c->task_symbols);
    if (!(ds->tok = st_sd_tok_new_task(vocab, e))) return ST_ERR_MEMORY;
    ds->vocab_size = vocab;
    ds->unit = ST_UNIT_TOKEN;
    ds->tok_hash = ds->tok->hash;
    if (!c->quiet)
        st_log(ST_LOG_INFO, "data: task %s, sizes %lld..%lld %s, vocabulary %d (%d symbols), loss on %s tokens%s",
               ds->task->task->name, (long long)c->task_min_size, (long long)c->task_max_size,
               ds->task->task->size_unit, vocab, c->task_symbols, ds->task->loss_all ? "all" : "answer",
               ds->task->pack ? ", packed rows" : "");
    return ST_OK;
}

/* ---- corpora ---- */

static int tokenize_split(st_tokenizer *t, const split_src *s, int build, sd_vec *v, st_error *e) {
    if (t->kind == ST_TOK_WORD) return st_sd_word_tokenize_file(t, s->path, s->begin, s->end, build, v, e);
    return st_sd_encode_file(t, s->path, s->begin, s->end, v, e);
}

/* A corpus being loaded: its splits, their cache keys and the tokens in hand so far. */
typedef struct corpus {
    int kind;                 /* ST_TOK_WORD, ST_TOK_BPE or ST_TOK_BYTE */
    int wiki;                 /* source "wikitext" (a directory), else "text" (one file) */
    char spec[16];            /* the tokenizer's cache spec ("word", "byte", "bpe512") */
    split_src src[3];
    char cdir[ST_PATH_BUF];   /* the cache directory; "": no cache */
    sd_cache_key key[3];
    st_tokenizer *t;
    sd_vec v[3];
    int hit[3];               /* split i came from its cache */
    uint64_t tried[3];        /* tokenizer hash each split's cache was checked against */
    int have_train;           /* v[0] came out of building a word vocabulary */
} corpus;

/* The cache directory, the cache files' names (in ds) and each split's cache key. */
static int plan_cache(const st_data_config *c, const char *cfg_file, corpus *co, st_dataset *ds, st_error *e) {
    char data_dir[ST_PATH_BUF], stem[300];
    snprintf(data_dir, sizeof data_dir, "%s", c->path);
    if (!co->wiki) {
        char tmp[ST_PATH_BUF];
        snprintf(tmp, sizeof tmp, "%s", c->path);
        snprintf(data_dir, sizeof data_dir, "%s", dirname(tmp));
    }
    int rc = resolve_cache_dir(c, cfg_file, data_dir, co->cdir, sizeof co->cdir, e);
    if (rc) return rc;
    cache_stem(c->path, stem, sizeof stem);
    char *cdir = co->cdir;
    if (cdir[0] && strlen(cdir) + strlen(stem) + 40 >= sizeof ds->vocab_file) {
        st_log(ST_LOG_WARN, "cache directory path %s is too long; tokenizing without a cache", cdir);
        cdir[0] = 0;
    }
    if (cdir[0]) {
        for (int i = 0; i < 3; i++)
            snprintf(ds->cache_file[i], sizeof ds->cache_file[i], "%s/%s.%s.%s.tokens", cdir, stem, split_name[i], co->spec);
        if (co->kind != ST_TOK_BYTE) snprintf(ds->vocab_file, sizeof ds->vocab_file, "%s/%s.%s.vocab", cdir, stem, co->spec);
    }
    for (int i = 0; i < 3; i++) {
        memset(&co->key[i], 0, sizeof co->key[i]);
        co->key[i].src = co->src[i].id;
        co->key[i].begin = co->src[i].begin;
        co->key[i].end = co->src[i].end;
        snprintf(co->key[i].spec, sizeof co->key[i].spec, "%s", co->spec);
    }
    return ST_OK;
}

/* Split i's tokens from its cache, when co->t made them: 1 on a hit. */
static int read_split(corpus *co, const st_dataset *ds, int i) {
    int64_t bytes;
    int hit = st_sd_cache_read_tokens(ds->cache_file[i], &co->key[i], &co->v[i].v, &co->v[i].n, &bytes);
    co->v[i].cap = co->v[i].n;
    return hit;
}

static int read_caches(corpus *co, const st_dataset *ds, st_error *e) {
    /* 1. the tokenizer: fixed (byte), or from the vocabulary cache */
    if (co->kind == ST_TOK_BYTE) {
        if (!(co->t = st_tokenizer_new_byte(e))) return e->code;
    } else if (ds->vocab_file[0]) {
        st_sd_cache_read_tokenizer(ds->vocab_file, &co->key[0], &co->t);
    }
    /* 2. cached splits made by that tokenizer */
    for (int i = 0; i < 3 && co->t && co->cdir[0]; i++) {
        co->key[i].tok_hash = co->t->hash;
        co->key[i].vocab_size = co->t->vocab_size;
        co->hit[i] = read_split(co, ds, i);
        co->tried[i] = co->t->hash;
    }
    return ST_OK;
}

/* Word level: the vocabulary comes out of tokenizing train (kept as v[0]); a vocabulary
 * other than the cached one voids the other splits' cached tokens. */
static int build_word_vocab(corpus *co, st_error *e) {
    uint64_t old = co->t ? co->t->hash : 0;
    st_tokenizer_free(co->t);
    st_sd_vec_free(&co->v[0]);
    if (!(co->t = st_sd_tok_new(ST_TOK_WORD, e))) return e->code;
    double t0 = st_time();
    int rc = tokenize_split(co->t, &co->src[0], 1, &co->v[0], e);
    if (rc) return rc;
    st_log(ST_LOG_DEBUG, "data: tokenized %s (%lld words, vocab %d) in %.3f s", co->src[0].path, (long long)co->v[0].n,
           co->t->vocab_size, st_time() - t0);
    co->hit[0] = 0;
    co->have_train = 1;
    if (co->t->hash != old)
        for (int i = 1; i < 3; i++) { st_sd_vec_free(&co->v[i]); co->hit[i] = 0; }
    return ST_OK;
}

/* 3. build what is missing (and cache the vocabulary built) */
static int build_tokenizer(const st_data_config *c, corpus *co, st_dataset *ds, st_error *e) {
    int built = 0, rc;
    if (co->kind == ST_TOK_WORD && (!co->t || !co->hit[0])) {
        if ((rc = build_word_vocab(co, e))) return rc;
        built = 1;
    }
    if (co->kind == ST_TOK_BPE && !co->t) {
        const split_src *s = &co->src[0];
        double t0 = st_time();
        if (!(co->t = st_sd_bpe_train_file(s->path, s->begin, s->end, c->bpe_vocab, e))) return e->code;
        if (!c->quiet)
            st_log(ST_LOG_INFO, "data: trained BPE (%d tokens) on %s in %.2f s", co->t->vocab_size, s->path,
                   st_time() - t0);
        built = 1;
    }
    if (built && ds->vocab_file[0]) {
        st_error we = {0};
        co->key[0].tok_hash = 0;
        if (st_sd_cache_write_tokenizer(ds->vocab_file, &co->key[0], co->t, &we)) {
            st_log(ST_LOG_WARN, "could not write the vocabulary cache: %s", we.msg);
            ds->vocab_file[0] = 0;   /* not cached: `stretch data` lists only what was written */
        }
    }
    return ST_OK;
}

/* 4. every split not in hand: its cache (a rebuilt tokenizer is often the same one),
 * else tokenize it and write the cache */
static int load_splits(corpus *co, st_dataset *ds, st_error *e) {
    const st_tokenizer *t = co->t;
    for (int i = 0; i < 3; i++) {
        const int train_built = i == 0 && co->have_train;
        co->key[i].tok_hash = t->hash;
        co->key[i].vocab_size = t->vocab_size;
        if (!co->hit[i] && !train_built && co->cdir[0] && co->tried[i] != t->hash) co->hit[i] = read_split(co, ds, i);
        int rc;
        if (!co->hit[i] && !train_built)
            if ((rc = tokenize_split(co->t, &co->src[i], 0, &co->v[i], e))) return rc;
        if (!co->hit[i] && co->cdir[0]) {
            st_error we = {0};
            if (st_sd_cache_write_tokens(ds->cache_file[i], &co->key[i], co->v[i].v, co->v[i].n,
                                      co->src[i].end - co->src[i].begin, &we)) {
                st_log(ST_LOG_WARN, "could not write the token cache: %s", we.msg);
                ds->cache_file[i][0] = 0;   /* not cached: `stretch data` lists only what was written */
            }
        }
        if (co->v[i].n < 2)
            return st_fail(e, ST_ERR_DATA, "%s: the %s split has %lld token%s; at least 2 are needed", co->src[i].path,
                           split_name[i], (long long)co->v[i].n, co->v[i].n == 1 ? "" : "s");
    }
    return ST_OK;
}

/* The tokenizer and the three streams become the dataset's. */
static void hand_over(corpus *co, st_dataset *ds) {
    for (int i = 0; i < 3; i++) {
        int32_t *fit = realloc(co->v[i].v, (size_t)co->v[i].n * sizeof(int32_t));   /* drop growth slack */
        ds->tokens[i] = fit ? fit : co->v[i].v;
        ds->n[i] = co->v[i].n;
        ds->bytes[i] = co->src[i].end - co->src[i].begin;
        ds->cache_hits += co->hit[i];
    }
    ds->tok = co->t;
    ds->tok_hash = co->t->hash;
    ds->vocab_size = co->t->vocab_size;
    ds->unit = co->kind == ST_TOK_WORD ? ST_UNIT_WORD : ST_UNIT_BYTE;
}

static int load_corpus(const st_data_config *c, const char *cfg_file, st_dataset *ds, st_error *e) {
    const char *tname = st_data_tokenizer_name(c);
    corpus co;
    memset(&co, 0, sizeof co);
    co.kind = !strcmp(tname, "word") ? ST_TOK_WORD : !strcmp(tname, "bpe") ? ST_TOK_BPE : ST_TOK_BYTE;
    co.wiki = !strcmp(c->source, "wikitext");
    if (co.kind == ST_TOK_BPE) snprintf(co.spec, sizeof co.spec, "bpe%d", c->bpe_vocab);
    else snprintf(co.spec, sizeof co.spec, "%s", tname);
    int rc = co.wiki ? resolve_wikitext(c->path, co.src, e) : resolve_text(c, co.src, e);
    if (rc) return rc;
    if ((rc = plan_cache(c, cfg_file, &co, ds, e))) return rc;
    rc = read_caches(&co, ds, e);
    if (!rc) rc = build_tokenizer(c, &co, ds, e);
    if (!rc) rc = load_splits(&co, ds, e);
    if (rc) {
        for (int i = 0; i < 3; i++) st_sd_vec_free(&co.v[i]);
        st_tokenizer_free(co.t);
        return rc;
    }
    hand_over(&co, ds);
    return ST_OK;
}

int st_dataset_load(const st_data_config *cfg, const char *cfg_file, st_dataset *ds, st_error *e) {
    double t0 = st_time();
    memset(ds, 0, sizeof *ds);
    int rc = st_data_config_validate(cfg, cfg_file, e);
    if (rc) return rc;
    rc = !strcmp(cfg->source, "synthetic") ? load_synthetic(cfg, cfg_file, ds, e)
         : !strcmp(cfg->source, "task")    ? load_task(cfg, cfg_file, ds, e)
                                           : load_corpus(cfg, cfg_file, ds, e);
    if (rc) {
        st_dataset_free(ds);
        return rc;
    }
    ds->load_seconds = st_time() - t0;
    if (strcmp(cfg->source, "synthetic") != 0 && strcmp(cfg->source, "task") != 0 && !cfg->quiet)
        st_log(ST_LOG_INFO, "data: %s %s (%s): vocab %d; train %lld / valid %lld / test %lld tokens; %d/3 splits from "
               "cache; %.2f s", cfg->source, cfg->path, st_data_tokenizer_name(cfg), ds->vocab_size, (long long)ds->n[0],
               (long long)ds->n[1], (long long)ds->n[2], ds->cache_hits, ds->load_seconds);
    return ST_OK;
}

uint64_t st_dataset_hash(const st_dataset *ds) {
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a over (CRC32, length) of the splits */
    for (int i = 0; i < 3; i++) {
        const uint64_t part[2] = {ds->tokens[i] ? st_crc32(0, ds->tokens[i], (size_t)ds->n[i] * sizeof(int32_t)) : 0,
                                  (uint64_t)ds->n[i]};
        for (int k = 0; k < 2; k++) { h ^= part[k]; h *= 0x100000001b3ull; }
    }
    return h ? h : 1;
}

int32_t st_dataset_digit0(const st_dataset *ds) {
    if (!ds->tok) return ds->task ? ST_TT_DIGIT0 : -1;
    int32_t id0 = -1;
    for (int d = 0; d < 10; d++) {   /* each digit one token, and the ten in order */
        const char ch = (char)('0' + d);
        int32_t id[2];
        if (st_tokenizer_encode(ds->tok, &ch, 1, id, 2) != 1 || id[0] < 0) return -1;
        if (d == 0) id0 = id[0];
        else if (id[0] != id0 + d) return -1;
    }
    return id0;
}

void st_dataset_free(st_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < 3; i++) free(ds->tokens[i]);
    st_tokenizer_free(ds->tok);
    if (ds->task) { st_task_data_free(ds->task); free(ds->task); }
    memset(ds, 0, sizeof *ds);
}
