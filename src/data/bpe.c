/* bpe.c - byte-level BPE encoding: the pre-split into chunks, the merge loop on one
 * chunk, and the streaming encoder for corpus files (byte and BPE tokenizers).
 * Training lives in bpe_train.c.
 *
 * Pre-split (roughly GPT-2's, on bytes): a chunk is
 *   - an optional single leading ' ' and then a run of one class: letters ([A-Za-z] and
 *     every byte >= 0x80, so UTF-8 sequences stay together), digits, or other
 *     non-space bytes (punctuation);
 *   - or whitespace up to and including a run of newlines ("  \n\n"), or a run of
 *     spaces/tabs (minus a last ' ' that starts the next word).
 * Chunks are cut every SD_BPE_MAX_CHUNK bytes. Merges never cross chunks, so encoding is
 * the concatenation of per-chunk encodings, and decode(encode(x)) == x for any bytes. */
#include "data/data_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { C_LETTER, C_DIGIT, C_SPACE, C_OTHER };

static inline int byte_class(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return C_LETTER;
    if (c >= '0' && c <= '9') return C_DIGIT;
    if (st_sd_is_space[c]) return C_SPACE;
    return C_OTHER;
}

static inline int is_newline(unsigned char c) { return c == '\n' || c == '\r'; }

int64_t st_sd_bpe_chunk_end(const unsigned char *s, int64_t len, int64_t i) {
    int64_t lim = len - i > SD_BPE_MAX_CHUNK ? i + SD_BPE_MAX_CHUNK : len;
    int64_t k = i;
    if (st_sd_is_space[s[i]] && !(s[i] == ' ' && i + 1 < len && !st_sd_is_space[s[i + 1]])) {
        while (k < len && st_sd_is_space[s[k]]) {
            if (is_newline(s[k])) {
                while (k < len && is_newline(s[k])) k++;
                return k < lim ? k : lim;
            }
            k++;
        }
        /* spaces/tabs followed by a word: the last ' ' belongs to the word */
        if (k < len && s[k - 1] == ' ' && k - 1 > i) k--;
        return k < lim ? k : lim;
    }
    if (s[k] == ' ') k++;
    int cls = byte_class(s[k]);
    while (k < lim && byte_class(s[k]) == cls) k++;
    return k;
}

/* ---- pair -> rank table ---- */

#define NO_PAIR UINT64_MAX

static inline uint64_t pair_slot(uint64_t key, uint64_t mask) {
    return (key * 0x9E3779B97F4A7C15ull >> 17) & mask;
}

static inline int32_t pair_rank(const st_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t s = pair_slot(key, t->pair_mask);; s = (s + 1) & t->pair_mask) {
        if (t->pair_key[s] == key) return t->pair_rank[s];
        if (t->pair_key[s] == NO_PAIR) return -1;
    }
}

int st_sd_bpe_index(st_tokenizer *t, st_error *e) {
    uint64_t cap = 1024;
    while (cap < (uint64_t)t->n_merges * 2 + 2) cap *= 2;
    free(t->pair_key);
    free(t->pair_rank);
    t->pair_key = malloc((size_t)cap * sizeof *t->pair_key);
    t->pair_rank = malloc((size_t)cap * sizeof *t->pair_rank);
    if (!t->pair_key || !t->pair_rank) return st_fail(e, ST_ERR_MEMORY, "out of memory for the BPE merge table");
    memset(t->pair_key, 0xff, (size_t)cap * sizeof *t->pair_key);
    t->pair_mask = cap - 1;
    /* token strings: bytes, then each merge's concatenation */
    t->vocab_size = 0;
    t->pool_len = 0;
    for (int c = 0; c < 256; c++) {
        char b = (char)c;
        if (st_sd_tok_append(t, &b, 1, e) < 0) return e ? e->code : ST_ERR_MEMORY;
    }
    for (int r = 0; r < t->n_merges; r++) {
        int32_t a = t->merges[r][0], b = t->merges[r][1];
        ST_ASSERT(a >= 0 && b >= 0 && a < 256 + r && b < 256 + r);
        int64_t la = t->off[a + 1] - t->off[a], lb = t->off[b + 1] - t->off[b];
        char tmp[2 * SD_BPE_MAX_CHUNK + 2];
        if (la + lb > (int64_t)sizeof tmp)
            return st_fail(e, ST_ERR_DATA, "BPE merge %d builds a token longer than %d bytes", r, SD_BPE_MAX_CHUNK);
        memcpy(tmp, t->pool + t->off[a], (size_t)la);
        memcpy(tmp + la, t->pool + t->off[b], (size_t)lb);
        if (st_sd_tok_append(t, tmp, la + lb, e) < 0) return e ? e->code : ST_ERR_MEMORY;
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint64_t s = pair_slot(key, t->pair_mask);
        while (t->pair_key[s] != NO_PAIR) {
            if (t->pair_key[s] == key) return st_fail(e, ST_ERR_DATA, "BPE merge %d repeats the pair (%d, %d)", r, a, b);
            s = (s + 1) & t->pair_mask;
        }
        t->pair_key[s] = key;
        t->pair_rank[s] = r;
    }
    return ST_OK;
}

/* Apply merges in rank order, as training did: repeatedly find the lowest-ranked
 * adjacent pair and merge all its occurrences left to right. O(len^2) per chunk, with
 * len <= 64. */
int st_sd_bpe_encode_chunk(const st_tokenizer *t, const unsigned char *s, int len, int32_t *out) {
    int n = len;
    for (int i = 0; i < n; i++) out[i] = s[i];
    while (n >= 2) {
        int32_t best = INT32_MAX;
        for (int i = 0; i + 1 < n; i++) {
            int32_t r = pair_rank(t, out[i], out[i + 1]);
            if (r >= 0 && r < best) best = r;
        }
        if (best == INT32_MAX) break;
        int32_t a = t->merges[best][0], b = t->merges[best][1], c = 256 + best;
        int w = 0;
        for (int i = 0; i < n; i++) {
            if (i + 1 < n && out[i] == a && out[i + 1] == b) { out[w++] = c; i++; }
            else out[w++] = out[i];
        }
        n = w;
    }
    return n;
}

/* ---- streaming file encoder with a chunk cache ----
 * Natural text repeats the same chunks ("the", " of", ...), so each distinct chunk is
 * encoded once and looked up afterwards: one hash probe per chunk instead of the merge
 * loop. The cache stops growing at CACHE_MAX entries (memory bound on odd corpora). */

#define CACHE_MAX (1 << 22)

typedef struct chunk_entry { uint64_t h; int64_t str; int64_t tok; int32_t len, ntok; } chunk_entry;

typedef struct enc_state {
    const st_tokenizer *t;
    sd_vec *out;
    chunk_entry *slots; uint64_t mask; int64_t used;
    char *str; int64_t str_len, str_cap;
    sd_vec toks;
    const char *path;
} enc_state;

static int cache_grow(enc_state *st) {
    uint64_t cap = st->slots ? (st->mask + 1) * 2 : 1 << 16;
    chunk_entry *ns = calloc((size_t)cap, sizeof *ns);
    if (!ns) return -1;
    for (uint64_t i = 0; st->slots && i <= st->mask; i++) {
        if (!st->slots[i].len) continue;
        uint64_t s = st->slots[i].h & (cap - 1);
        while (ns[s].len) s = (s + 1) & (cap - 1);
        ns[s] = st->slots[i];
    }
    free(st->slots);
    st->slots = ns;
    st->mask = cap - 1;
    return 0;
}

static int encode_chunk_cached(enc_state *st, const unsigned char *s, int len) {
    uint64_t h = st_fnv1a(ST_FNV_OFFSET, s, (size_t)len);
    uint64_t slot = h & st->mask;
    for (; st->slots[slot].len; slot = (slot + 1) & st->mask) {
        chunk_entry *c = &st->slots[slot];
        if (c->h == h && c->len == len && !memcmp(st->str + c->str, s, (size_t)len)) {
            if (st_sd_vec_grow(st->out, st->out->n + c->ntok)) return -1;
            memcpy(st->out->v + st->out->n, st->toks.v + c->tok, (size_t)c->ntok * sizeof(int32_t));
            st->out->n += c->ntok;
            return 0;
        }
    }
    int32_t buf[SD_BPE_MAX_CHUNK];
    int k = st_sd_bpe_encode_chunk(st->t, s, len, buf);
    if (st_sd_vec_grow(st->out, st->out->n + k)) return -1;
    memcpy(st->out->v + st->out->n, buf, (size_t)k * sizeof(int32_t));
    st->out->n += k;
    if (st->used >= CACHE_MAX) return 0;
    if (st->str_len + len > st->str_cap) {
        int64_t cap = st->str_cap ? st->str_cap * 2 : 1 << 20;
        char *p = realloc(st->str, (size_t)cap);
        if (!p) return -1;
        st->str = p;
        st->str_cap = cap;
    }
    if (st_sd_vec_grow(&st->toks, st->toks.n + k)) return -1;
    chunk_entry *c = &st->slots[slot];
    c->h = h;
    c->len = len;
    c->ntok = k;
    c->str = st->str_len;
    c->tok = st->toks.n;
    memcpy(st->str + st->str_len, s, (size_t)len);
    st->str_len += len;
    memcpy(st->toks.v + st->toks.n, buf, (size_t)k * sizeof(int32_t));
    st->toks.n += k;
    if (++st->used * 2 > (int64_t)(st->mask + 1) && cache_grow(st)) return -1;
    return 0;
}

static int encode_block(void *user, const char *buf, int64_t len, int64_t at, int final, int64_t *used, st_error *e) {
    enc_state *st = user;
    const unsigned char *s = (const unsigned char *)buf;
    if (st->t->kind == ST_TOK_BYTE) {
        if (st_sd_vec_grow(st->out, st->out->n + len)) goto oom;
        for (int64_t i = 0; i < len; i++) st->out->v[st->out->n + i] = s[i];
        st->out->n += len;
        *used = len;
        return ST_OK;
    }
    int64_t cut = final ? len : st_sd_safe_cut(buf, len);
    for (int64_t i = 0; i < cut;) {
        int64_t j = st_sd_bpe_chunk_end(s, cut, i);
        if (encode_chunk_cached(st, s + i, (int)(j - i))) goto oom;
        i = j;
    }
    *used = cut;
    return ST_OK;
oom:
    return st_fail(e, ST_ERR_MEMORY, "%s: out of memory encoding (at byte %lld)", st->path, (long long)at);
}

int st_sd_encode_file(const st_tokenizer *t, const char *path, int64_t begin, int64_t end, sd_vec *out, st_error *e) {
    ST_ASSERT(t->kind == ST_TOK_BYTE || t->kind == ST_TOK_BPE);
    enc_state st = {.t = t, .out = out, .path = path};
    int64_t guess = t->kind == ST_TOK_BYTE ? end - begin : (end - begin) / 2 + 16;   /* BPE: ~2+ bytes/token */
    if (st_sd_vec_grow(out, out->n + guess))
        return st_fail(e, ST_ERR_MEMORY, "%s: out of memory for %lld tokens", path, (long long)guess);
    if (t->kind == ST_TOK_BPE && cache_grow(&st)) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    int rc = st_sd_stream(path, begin, end, encode_block, &st, e);
    free(st.slots);
    free(st.str);
    st_sd_vec_free(&st.toks);
    return rc;
}
