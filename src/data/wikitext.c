/* wikitext.c - word-level tokenization, the standard WikiText protocol (fairseq,
 * PyTorch word_language_model): every line's whitespace-separated words followed by
 * <eos>; the vocabulary is built from the train split, ids in order of first appearance
 * (so <eos> gets its id at the end of the first line). A last line without "\n" still
 * gets its <eos>, as Python's `for line in f` sees it.
 *
 * The file is streamed in 16 MiB blocks and tokenized in place: words are hashed while
 * they are scanned and looked up in an open-addressing table; no per-line or per-word
 * objects are ever built, so WikiText-103 (540 MB) costs its token array plus a block. */
#include "data/data_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct word_state {
    st_tokenizer *t;
    sd_vec *out;
    const char *path;
    int build;              /* 1: add new words; 0: refuse them; SD_WORD_UNK: map to <unk> */
    int64_t line;           /* 1-based number of the line being scanned */
    sd_unk_count *unk;      /* SD_WORD_UNK: what was mapped */
} word_state;

/* Record an unknown word (hash h) in the distinct-word set; -1 on memory failure. The set
 * holds 64-bit FNV hashes (0 = empty slot; a word hashing to 0 is stored as 1): two
 * distinct unknown words collide with probability ~n^2 / 2^65, so the count is exact in
 * practice. */
static int unk_note(sd_unk_count *u, uint64_t h) {
    u->tokens++;
    if (h == 0) h = 1;
    if (2 * (u->distinct + 1) > (int64_t)u->cap) {
        uint64_t cap = u->cap ? u->cap * 2 : 1024, *nt = calloc(cap, sizeof *nt);
        if (!nt) return -1;
        for (uint64_t i = 0; i < u->cap; i++)
            if (u->set[i]) {
                uint64_t j = u->set[i] & (cap - 1);
                while (nt[j]) j = (j + 1) & (cap - 1);
                nt[j] = u->set[i];
            }
        free(u->set);
        u->set = nt;
        u->cap = cap;
    }
    uint64_t j = h & (u->cap - 1);
    while (u->set[j] && u->set[j] != h) j = (j + 1) & (u->cap - 1);
    if (!u->set[j]) { u->set[j] = h; u->distinct++; }
    return 0;
}

/* a word for an error message: at most 60 bytes, printable */
static void word_excerpt(char *dst, size_t cap, const unsigned char *s, int64_t n) {
    size_t k = 0;
    for (int64_t i = 0; i < n && k + 5 < cap && i < 60; i++)
        k += (size_t)snprintf(dst + k, cap - k, s[i] >= 0x20 && s[i] != 0x7f ? "%c" : "\\x%02x", s[i]);
    if (n > 60 && k + 4 < cap) k += (size_t)snprintf(dst + k, cap - k, "...");
    dst[k] = 0;
}

static int word_block(void *user, const char *buf, int64_t len, int64_t at, int final, int64_t *used, st_error *e) {
    word_state *ws = user;
    st_tokenizer *t = ws->t;
    const unsigned char *s = (const unsigned char *)buf;
    int64_t cut = final ? len : st_sd_safe_cut(buf, len);
    /* every token takes at least one byte (a word, or the "\n" of an <eos>), plus the <eos>
     * of an unterminated last line: reserve once per block */
    if (st_sd_vec_grow(ws->out, ws->out->n + cut + 1))
        return st_fail(e, ST_ERR_MEMORY, "%s: out of memory for %lld tokens", ws->path, (long long)(ws->out->n + cut + 1));
    int32_t *o = ws->out->v;
    int64_t n = ws->out->n;
    for (int64_t i = 0; i < cut;) {
        unsigned char c = s[i];
        if (c == '\n') {
            if (t->eos < 0) {
                if (ws->build != 1) return st_fail(e, ST_ERR_DATA, "%s: the vocabulary has no <eos>", ws->path);
                if (st_sd_word_intern(t, "<eos>", 5, st_fnv1a(ST_FNV_OFFSET, "<eos>", 5), e) < 0) return e->code;
            }
            o[n++] = t->eos;
            ws->line++;
            i++;
            continue;
        }
        if (st_sd_is_space[c]) { i++; continue; }
        int64_t j = i;
        uint64_t h = ST_FNV_OFFSET;
        while (i < cut && !st_sd_is_space[s[i]]) { h ^= s[i]; h *= ST_FNV_PRIME; i++; }
        int32_t id = st_sd_word_find(t, buf + j, i - j, h);
        if (id < 0 && ws->build == SD_WORD_UNK) {
            if (t->unk < 0) {
                char w[300];
                word_excerpt(w, sizeof w, s + j, i - j);
                return st_fail(e, ST_ERR_DATA, "%s: line %lld: word \"%s\" is not in the run's vocabulary, which has "
                               "no <unk> to map it to", ws->path, (long long)ws->line, w);
            }
            if (unk_note(ws->unk, h)) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory counting unknown words", ws->path);
            id = t->unk;
        }
        if (id < 0) {
            if (!ws->build) {
                char w[300];
                word_excerpt(w, sizeof w, s + j, i - j);
                return st_fail(e, ST_ERR_DATA, "%s: line %lld: word \"%s\" is not in the training vocabulary "
                               "(valid/test words must occur in train; WikiText marks rare words <unk>)",
                               ws->path, (long long)ws->line, w);
            }
            if ((id = st_sd_word_intern(t, buf + j, i - j, h, e)) < 0) return e->code;
        }
        o[n++] = id;
    }
    if (final && cut > 0 && s[cut - 1] != '\n') {   /* unterminated last line */
        if (t->eos < 0) {
            if (ws->build != 1) return st_fail(e, ST_ERR_DATA, "%s: the vocabulary has no <eos>", ws->path);
            if (st_sd_word_intern(t, "<eos>", 5, st_fnv1a(ST_FNV_OFFSET, "<eos>", 5), e) < 0) return e->code;
        }
        o[n++] = t->eos;
    }
    ws->out->n = n;
    *used = cut;
    (void)at;
    return ST_OK;
}

int st_sd_word_tokenize_file(st_tokenizer *t, const char *path, int64_t begin, int64_t end, int build, sd_vec *out,
                          st_error *e) {
    ST_ASSERT(t->kind == ST_TOK_WORD);
    ST_ASSERT(build != SD_WORD_UNK);
    word_state ws = {t, out, path, build, 1 + (build || begin == 0 ? 0 : st_sd_lines_before(path, begin)), NULL};
    /* English text averages ~5 bytes per word token: reserve bytes / 4 up front so a large
     * corpus is not copied by regrowth (pages never touched are never resident). */
    if (st_sd_vec_grow(out, out->n + (end - begin) / 4 + 16))
        return st_fail(e, ST_ERR_MEMORY, "%s: out of memory for ~%lld tokens", path, (long long)((end - begin) / 4));
    int rc = st_sd_stream(path, begin, end, word_block, &ws, e);
    if (rc == ST_OK && build) st_sd_tok_rehash(t);
    return rc;
}

int st_sd_word_tokenize_unk(const st_tokenizer *t, const char *path, int64_t size, sd_vec *out, sd_unk_count *unk,
                         st_error *e) {
    ST_ASSERT(t->kind == ST_TOK_WORD);
    /* the lookups never add a word in this mode, so the tokenizer is only read */
    word_state ws = {(st_tokenizer *)t, out, path, SD_WORD_UNK, 1, unk};
    if (st_sd_vec_grow(out, out->n + size / 4 + 16))
        return st_fail(e, ST_ERR_MEMORY, "%s: out of memory for ~%lld tokens", path, (long long)(size / 4));
    return st_sd_stream(path, 0, size, word_block, &ws, e);
}
