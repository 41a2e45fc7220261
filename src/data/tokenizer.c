/* tokenizer.c - the tokenizer object: construction, the word hash table, the identity
 * hash, and encode / decode for every kind (the BPE merge loop itself is in bpe.c).
 * Not here: file formats (tokenizer_io.c), training (bpe_train.c, wikitext.c). */
#include "data/data_internal.h"
#include "st_task.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *st_sd_tok_kind_name(int kind) {
    switch (kind) {
    case ST_TOK_WORD: return "word";
    case ST_TOK_BYTE: return "byte";
    case ST_TOK_BPE: return "bpe";
    case ST_TOK_SYNTHETIC: return "synthetic";
    case ST_TOK_TASK: return "task";
    default: return "?";
    }
}

st_tokenizer *st_sd_tok_new(int kind, st_error *e) {
    st_tokenizer *t = st_calloc(1, sizeof *t, e);
    if (!t) return NULL;
    t->kind = kind;
    t->eos = t->unk = -1;
    if (kind == ST_TOK_BYTE) t->vocab_size = 256;
    if (kind == ST_TOK_WORD || kind == ST_TOK_BPE) {
        t->off_cap = 1024;
        t->off = malloc((size_t)t->off_cap * sizeof *t->off);
        t->whash = malloc((size_t)t->off_cap * sizeof *t->whash);
        t->pool_cap = 1 << 16;
        t->pool = malloc((size_t)t->pool_cap);
        if (!t->off || !t->whash || !t->pool) {
            st_tokenizer_free(t);
            st_fail(e, ST_ERR_MEMORY, "out of memory for a tokenizer");
            return NULL;
        }
        t->off[0] = 0;
    }
    st_sd_tok_rehash(t);
    return t;
}

st_tokenizer *st_tokenizer_new_byte(st_error *e) { return st_sd_tok_new(ST_TOK_BYTE, e); }

st_tokenizer *st_sd_tok_new_synthetic(int vocab, uint64_t seed, int order, int branch, st_error *e) {
    st_tokenizer *t = st_sd_tok_new(ST_TOK_SYNTHETIC, e);
    if (!t) return NULL;
    t->vocab_size = vocab;
    t->syn_seed = seed;
    t->syn_order = order;
    t->syn_branch = branch;
    st_sd_tok_rehash(t);
    return t;
}

st_tokenizer *st_sd_tok_new_task(int vocab, st_error *e) {
    st_tokenizer *t = st_sd_tok_new(ST_TOK_TASK, e);
    if (!t) return NULL;
    t->vocab_size = vocab;   /* the layout is fixed (include/st_task.h): the size says it all */
    st_sd_tok_rehash(t);
    return t;
}

void st_tokenizer_free(st_tokenizer *t) {
    if (!t) return;
    free(t->pool);
    free(t->off);
    free(t->whash);
    free(t->table);
    free(t->merges);
    free(t->pair_key);
    free(t->pair_rank);
    free(t);
}

int st_tokenizer_vocab_size(const st_tokenizer *t) { return t->vocab_size; }
uint64_t st_tokenizer_hash(const st_tokenizer *t) { return t->hash; }
int st_tokenizer_kind(const st_tokenizer *t) { return t->kind; }
int32_t st_tokenizer_eos(const st_tokenizer *t) { return t->eos; }

/* The hash covers everything that changes what an id means: kind, size and content. */
void st_sd_tok_rehash(st_tokenizer *t) {
    uint64_t h = st_fnv1a(ST_FNV_OFFSET, "stretch-tokenizer-v1", 20);
    h = sd_fnv_u64(h, (uint64_t)t->kind);
    h = sd_fnv_u64(h, (uint64_t)t->vocab_size);
    if (t->kind == ST_TOK_WORD) {
        for (int i = 0; i < t->vocab_size; i++) {
            h = sd_fnv_u64(h, (uint64_t)(t->off[i + 1] - t->off[i]));
            h = st_fnv1a(h, t->pool + t->off[i], (size_t)(t->off[i + 1] - t->off[i]));
        }
    } else if (t->kind == ST_TOK_BPE) {
        for (int r = 0; r < t->n_merges; r++)
            h = sd_fnv_u64(h, (uint64_t)(uint32_t)t->merges[r][0] << 32 | (uint32_t)t->merges[r][1]);
    } else if (t->kind == ST_TOK_SYNTHETIC) {
        h = sd_fnv_u64(h, t->syn_seed);
        h = sd_fnv_u64(h, (uint64_t)t->syn_order);
        h = sd_fnv_u64(h, (uint64_t)t->syn_branch);
    }
    t->hash = h;
}

int32_t st_sd_tok_append(st_tokenizer *t, const char *s, int64_t len, st_error *e) {
    if (t->vocab_size >= INT32_MAX - 1) { st_fail(e, ST_ERR_DATA, "vocabulary exceeds 2^31 entries"); return -1; }
    if (t->vocab_size + 2 > t->off_cap) {
        int64_t cap = t->off_cap * 2;
        int64_t *off = realloc(t->off, (size_t)cap * sizeof *off);
        if (off) t->off = off;
        uint32_t *wh = realloc(t->whash, (size_t)cap * sizeof *wh);
        if (wh) t->whash = wh;
        if (!off || !wh) { st_fail(e, ST_ERR_MEMORY, "out of memory growing the vocabulary"); return -1; }
        t->off_cap = cap;
    }
    if (t->pool_len + len > t->pool_cap) {
        int64_t cap = t->pool_cap * 2;
        while (cap < t->pool_len + len) cap *= 2;
        char *p = realloc(t->pool, (size_t)cap);
        if (!p) { st_fail(e, ST_ERR_MEMORY, "out of memory growing the vocabulary strings"); return -1; }
        t->pool = p;
        t->pool_cap = cap;
    }
    memcpy(t->pool + t->pool_len, s, (size_t)len);
    t->pool_len += len;
    int32_t id = t->vocab_size++;
    t->off[id + 1] = t->pool_len;
    t->whash[id] = (uint32_t)st_fnv1a(ST_FNV_OFFSET, s, (size_t)len);
    return id;
}

/* ---- word table: open addressing, linear probing, load <= 1/2 ---- */

int32_t st_sd_word_find(const st_tokenizer *t, const char *s, int64_t len, uint64_t h) {
    if (!t->table) return -1;
    uint32_t h32 = (uint32_t)h;
    for (uint64_t slot = h & t->table_mask;; slot = (slot + 1) & t->table_mask) {
        uint32_t v = t->table[slot];
        if (!v) return -1;
        int32_t id = (int32_t)v - 1;
        if (t->whash[id] == h32 && t->off[id + 1] - t->off[id] == len && !memcmp(t->pool + t->off[id], s, (size_t)len))
            return id;
    }
}

static int table_resize(st_tokenizer *t, uint64_t cap, st_error *e) {
    uint32_t *tab = calloc((size_t)cap, sizeof *tab);
    if (!tab) return st_fail(e, ST_ERR_MEMORY, "out of memory for a %llu-slot vocabulary table", (unsigned long long)cap);
    uint64_t mask = cap - 1;
    for (int32_t id = 0; id < t->vocab_size; id++) {
        /* whash holds only 32 bits: the slot comes from the full hash, recomputed */
        uint64_t h = st_fnv1a(ST_FNV_OFFSET, t->pool + t->off[id], (size_t)(t->off[id + 1] - t->off[id]));
        uint64_t slot = h & mask;
        while (tab[slot]) slot = (slot + 1) & mask;
        tab[slot] = (uint32_t)id + 1;
    }
    free(t->table);
    t->table = tab;
    t->table_mask = mask;
    return ST_OK;
}

int32_t st_sd_word_intern(st_tokenizer *t, const char *s, int64_t len, uint64_t h, st_error *e) {
    int32_t id = st_sd_word_find(t, s, len, h);
    if (id >= 0) return id;
    if (!t->table || (uint64_t)(t->vocab_size + 1) * 2 > t->table_mask + 1)
        if (table_resize(t, t->table ? (t->table_mask + 1) * 2 : 1 << 16, e)) return -1;
    id = st_sd_tok_append(t, s, len, e);
    if (id < 0) return -1;
    uint64_t slot = h & t->table_mask;
    while (t->table[slot]) slot = (slot + 1) & t->table_mask;
    t->table[slot] = (uint32_t)id + 1;
    if (len == 5 && !memcmp(s, "<eos>", 5)) t->eos = id;
    if (len == 5 && !memcmp(s, "<unk>", 5)) t->unk = id;
    return id;
}

/* ---- encode ---- */

static void put(int32_t *out, int64_t cap, int64_t i, int32_t id) {
    if (out && i < cap) out[i] = id;
}

static int64_t encode_word(const st_tokenizer *t, const unsigned char *s, int64_t len, int32_t *out, int64_t cap) {
    int64_t n = 0, i = 0;
    while (i < len) {
        if (s[i] == '\n') {
            if (t->eos < 0) return -1;
            put(out, cap, n++, t->eos);
            i++;
            continue;
        }
        if (st_sd_is_space[s[i]]) { i++; continue; }
        int64_t j = i;
        uint64_t h = ST_FNV_OFFSET;
        while (i < len && !st_sd_is_space[s[i]]) { h ^= s[i]; h *= ST_FNV_PRIME; i++; }
        int32_t id = st_sd_word_find(t, (const char *)s + j, i - j, h);
        if (id < 0) id = t->unk;
        if (id < 0) return -1;
        put(out, cap, n++, id);
    }
    return n;
}

static int64_t encode_bpe(const st_tokenizer *t, const unsigned char *s, int64_t len, int32_t *out, int64_t cap) {
    int32_t buf[SD_BPE_MAX_CHUNK];
    int64_t n = 0;
    for (int64_t i = 0; i < len;) {
        int64_t j = st_sd_bpe_chunk_end(s, len, i);
        int k = st_sd_bpe_encode_chunk(t, s + i, (int)(j - i), buf);
        for (int q = 0; q < k; q++) put(out, cap, n++, buf[q]);
        i = j;
    }
    return n;
}

static int64_t encode_synthetic(const st_tokenizer *t, const unsigned char *s, int64_t len, int32_t *out, int64_t cap) {
    int64_t n = 0, i = 0;
    while (i < len) {
        if (st_sd_is_space[s[i]]) { i++; continue; }
        int64_t v = 0;
        int64_t j = i;
        while (i < len && s[i] >= '0' && s[i] <= '9' && i - j < 10) v = v * 10 + (s[i++] - '0');
        if (i == j || (i < len && !st_sd_is_space[s[i]]) || v >= t->vocab_size) return -1;
        put(out, cap, n++, (int32_t)v);
    }
    return n;
}

/* task names: specials, digits, symbols a..z, aa.. (st_task_token_name) */
static int64_t encode_task(const st_tokenizer *t, const unsigned char *s, int64_t len, int32_t *out, int64_t cap) {
    int64_t n = 0, i = 0;
    while (i < len) {
        if (st_sd_is_space[s[i]]) { i++; continue; }
        int64_t j = i;
        while (i < len && !st_sd_is_space[s[i]]) i++;
        int32_t id = -1;
        char name[16];
        if (i - j < 16) {
            if (s[j] >= 'a' && s[j] <= 'z') {   /* bijective base 26 */
                int64_t v = 0;
                for (int64_t q = j; q < i && v >= 0; q++)
                    v = s[q] >= 'a' && s[q] <= 'z' && v < INT32_MAX / 27 ? v * 26 + (s[q] - 'a' + 1) : -1;
                if (v > 0 && v <= (int64_t)t->vocab_size - ST_TT_SYMBOL0) id = (int32_t)(ST_TT_SYMBOL0 + v - 1);
            } else {
                for (int32_t c = 0; c < ST_TT_SYMBOL0 && c < t->vocab_size && id < 0; c++) {
                    st_task_token_name(c, name, sizeof name);
                    if ((int64_t)strlen(name) == i - j && !memcmp(name, s + j, (size_t)(i - j))) id = c;
                }
            }
        }
        if (id < 0) return -1;
        put(out, cap, n++, id);
    }
    return n;
}

int64_t st_tokenizer_encode(const st_tokenizer *t, const char *text, int64_t len, int32_t *out, int64_t cap) {
    const unsigned char *s = (const unsigned char *)text;
    if (len < 0) return -1;
    switch (t->kind) {
    case ST_TOK_BYTE:
        for (int64_t i = 0; i < len; i++) put(out, cap, i, s[i]);
        return len;
    case ST_TOK_WORD: return encode_word(t, s, len, out, cap);
    case ST_TOK_BPE: return encode_bpe(t, s, len, out, cap);
    case ST_TOK_SYNTHETIC: return encode_synthetic(t, s, len, out, cap);
    case ST_TOK_TASK: return encode_task(t, s, len, out, cap);
    default: return -1;
    }
}

/* ---- decode: snprintf-like, returns the full length ---- */

typedef struct sink { char *out; int64_t cap, n; } sink;

static void emit(sink *k, const char *s, int64_t len) {
    if (k->out && k->n < k->cap - 1) {
        int64_t room = k->cap - 1 - k->n;
        memcpy(k->out + k->n, s, (size_t)(len < room ? len : room));
    }
    k->n += len;
}

/* The bytes of token id after a text whose last token is prev (-1: none): the separator
 * a word, synthetic id or task name takes after its predecessor, then the token. The one
 * place that knows how tokens join, so decoding a text whole or token by token (stretch
 * generate streams) gives the same bytes. */
static void emit_token(sink *k, const st_tokenizer *t, int32_t prev, int32_t id) {
    switch (t->kind) {
    case ST_TOK_BYTE: {
        char c = (char)(unsigned char)id;
        emit(k, &c, 1);
        break;
    }
    case ST_TOK_BPE:
        emit(k, t->pool + t->off[id], t->off[id + 1] - t->off[id]);
        break;
    case ST_TOK_WORD:
        if (id == t->eos) { emit(k, "\n", 1); break; }
        if (prev >= 0 && prev != t->eos) emit(k, " ", 1);
        emit(k, t->pool + t->off[id], t->off[id + 1] - t->off[id]);
        break;
    case ST_TOK_TASK: {
        char name[24];
        if (prev >= 0) emit(k, " ", 1);
        st_task_token_name(id, name, sizeof name);
        emit(k, name, (int64_t)strlen(name));
        break;
    }
    default: {
        char num[16];
        int m = snprintf(num, sizeof num, "%s%d", prev >= 0 ? " " : "", id);
        emit(k, num, m);
    }
    }
}

int64_t st_tokenizer_decode(const st_tokenizer *t, const int32_t *ids, int64_t n, char *out, int64_t cap) {
    sink k = {out, out ? cap : 0, 0};
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size) {
            if (out && cap > 0) out[0] = 0;
            return -1;
        }
    for (int64_t i = 0; i < n; i++) emit_token(&k, t, i > 0 ? ids[i - 1] : -1, ids[i]);
    if (out && cap > 0) out[k.n < cap - 1 ? k.n : cap - 1] = 0;
    return k.n;
}

int64_t st_tokenizer_decode_next(const st_tokenizer *t, int32_t prev, int32_t id, char *out, int64_t cap) {
    sink k = {out, out ? cap : 0, 0};
    if (id < 0 || id >= t->vocab_size || prev < -1 || prev >= t->vocab_size) {
        if (out && cap > 0) out[0] = 0;
        return -1;
    }
    emit_token(&k, t, prev, id);
    if (out && cap > 0) out[k.n < cap - 1 ? k.n : cap - 1] = 0;
    return k.n;
}
