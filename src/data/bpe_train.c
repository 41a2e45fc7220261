/* bpe_train.c - training a byte-level BPE (Sennrich et al. 2016, on bytes as GPT-2).
 *
 * 1. The training text is pre-split into chunks (bpe.c) and the distinct chunks are
 *    counted ("words" with a frequency f_w), streaming the file block by block.
 * 2. Pair counts c(a,b) = sum_w f_w * #{i : w_i = a, w_{i+1} = b}, kept incrementally:
 *    merging (a,b) -> z only touches the words that contain (a,b) (each pair keeps the
 *    list of words it was seen in); for those, the word's old pairs are subtracted and
 *    its new pairs added. Only pairs containing z can grow, so a max-heap with lazy
 *    entries (an entry's count is >= the pair's true count; stale ones are re-pushed
 *    with the true count when popped) always yields the true best pair.
 * 3. Ties go to the smallest (a, b), so training is deterministic.
 * Merges never cross chunks, and a merged pair never reappears (new adjacencies always
 * involve the new symbol), so each pair is merged at most once. */
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- distinct chunks with counts ---- */

typedef struct centry { uint64_t h; int64_t str; int64_t count; int32_t len; } centry;
typedef struct counter {
    centry *slots; uint64_t mask; int64_t used;
    unsigned char *str; int64_t str_len, str_cap;
} counter;

static int counter_grow(counter *c) {
    uint64_t cap = c->slots ? (c->mask + 1) * 2 : 1 << 14;
    centry *ns = calloc((size_t)cap, sizeof *ns);
    if (!ns) return -1;
    for (uint64_t i = 0; c->slots && i <= c->mask; i++) {
        if (!c->slots[i].len) continue;
        uint64_t s = c->slots[i].h & (cap - 1);
        while (ns[s].len) s = (s + 1) & (cap - 1);
        ns[s] = c->slots[i];
    }
    free(c->slots);
    c->slots = ns;
    c->mask = cap - 1;
    return 0;
}

static int counter_add(counter *c, const unsigned char *s, int len) {
    uint64_t h = st_fnv1a(ST_FNV_OFFSET, s, (size_t)len);
    uint64_t slot = h & c->mask;
    for (; c->slots[slot].len; slot = (slot + 1) & c->mask) {
        centry *x = &c->slots[slot];
        if (x->h == h && x->len == len && !memcmp(c->str + x->str, s, (size_t)len)) { x->count++; return 0; }
    }
    if (c->str_len + len > c->str_cap) {
        int64_t cap = c->str_cap ? c->str_cap * 2 : 1 << 20;
        unsigned char *p = realloc(c->str, (size_t)cap);
        if (!p) return -1;
        c->str = p;
        c->str_cap = cap;
    }
    memcpy(c->str + c->str_len, s, (size_t)len);
    c->slots[slot] = (centry){h, c->str_len, 1, len};
    c->str_len += len;
    if (++c->used * 2 > (int64_t)(c->mask + 1)) return counter_grow(c);
    return 0;
}

static int counter_text(counter *c, const unsigned char *s, int64_t len) {
    for (int64_t i = 0; i < len;) {
        int64_t j = st_sd_bpe_chunk_end(s, len, i);
        if (counter_add(c, s + i, (int)(j - i))) return -1;
        i = j;
    }
    return 0;
}

static void counter_free(counter *c) {
    free(c->slots);
    free(c->str);
}

/* ---- the trainer ---- */

typedef struct pair { int64_t count; int32_t a, b; int32_t *w; int32_t wn, wcap; int32_t mark; } pair;
typedef struct hitem { int64_t count; int32_t pid; } hitem;

typedef struct trainer {
    int64_t n_words;
    int64_t *wcount, *woff;
    int32_t *wlen, *sym;
    uint32_t *seen;
    pair *pairs; int64_t n_pairs, pairs_cap;
    uint64_t *pkey; int32_t *pid; uint64_t pmask;
    hitem *heap; int64_t hn, hcap;
    int32_t *touched; int64_t n_touched, touched_cap;
} trainer;

static inline uint64_t pkey_of(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }
static inline uint64_t pslot(uint64_t key, uint64_t mask) { return (key * 0x9E3779B97F4A7C15ull >> 17) & mask; }

static int pmap_grow(trainer *tr) {
    uint64_t cap = tr->pkey ? (tr->pmask + 1) * 2 : 1 << 16;
    uint64_t *nk = malloc((size_t)cap * sizeof *nk);
    int32_t *np = malloc((size_t)cap * sizeof *np);
    if (!nk || !np) { free(nk); free(np); return -1; }
    memset(nk, 0xff, (size_t)cap * sizeof *nk);
    for (int64_t p = 0; p < tr->n_pairs; p++) {
        uint64_t k = pkey_of(tr->pairs[p].a, tr->pairs[p].b), s = pslot(k, cap - 1);
        while (nk[s] != UINT64_MAX) s = (s + 1) & (cap - 1);
        nk[s] = k;
        np[s] = (int32_t)p;
    }
    free(tr->pkey);
    free(tr->pid);
    tr->pkey = nk;
    tr->pid = np;
    tr->pmask = cap - 1;
    return 0;
}

/* id of pair (a, b), created with count 0 when new; -1 on memory failure */
static int32_t pair_get(trainer *tr, int32_t a, int32_t b) {
    uint64_t k = pkey_of(a, b), s = pslot(k, tr->pmask);
    for (; tr->pkey[s] != UINT64_MAX; s = (s + 1) & tr->pmask)
        if (tr->pkey[s] == k) return tr->pid[s];
    if (tr->n_pairs == tr->pairs_cap) {
        int64_t cap = tr->pairs_cap ? tr->pairs_cap * 2 : 1 << 14;
        pair *np = realloc(tr->pairs, (size_t)cap * sizeof *np);
        if (!np) return -1;
        tr->pairs = np;
        tr->pairs_cap = cap;
    }
    int32_t id = (int32_t)tr->n_pairs++;
    tr->pairs[id] = (pair){0, a, b, NULL, 0, 0, -1};
    tr->pkey[s] = k;
    tr->pid[s] = id;
    if ((uint64_t)tr->n_pairs * 2 > tr->pmask + 1 && pmap_grow(tr)) return -1;
    return id;
}

static int pair_note_word(pair *p, int32_t w) {
    if (p->wn && p->w[p->wn - 1] == w) return 0;
    if (p->wn == p->wcap) {
        int32_t cap = p->wcap ? p->wcap * 2 : 4;
        int32_t *nw = realloc(p->w, (size_t)cap * sizeof *nw);
        if (!nw) return -1;
        p->w = nw;
        p->wcap = cap;
    }
    p->w[p->wn++] = w;
    return 0;
}

/* heap order: larger count first, then smaller (a, b) */
static inline int better(const trainer *tr, hitem x, hitem y) {
    if (x.count != y.count) return x.count > y.count;
    const pair *p = &tr->pairs[x.pid], *q = &tr->pairs[y.pid];
    if (p->a != q->a) return p->a < q->a;
    return p->b < q->b;
}

static int heap_push(trainer *tr, hitem it) {
    if (tr->hn == tr->hcap) {
        int64_t cap = tr->hcap ? tr->hcap * 2 : 1 << 14;
        hitem *nh = realloc(tr->heap, (size_t)cap * sizeof *nh);
        if (!nh) return -1;
        tr->heap = nh;
        tr->hcap = cap;
    }
    int64_t i = tr->hn++;
    while (i > 0 && better(tr, it, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = it;
    return 0;
}

static hitem heap_pop(trainer *tr) {
    hitem top = tr->heap[0], last = tr->heap[--tr->hn];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= tr->hn) break;
        if (c + 1 < tr->hn && better(tr, tr->heap[c + 1], tr->heap[c])) c++;
        if (!better(tr, tr->heap[c], last)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (tr->hn > 0) tr->heap[i] = last;
    return top;
}

static void trainer_free(trainer *tr) {
    for (int64_t p = 0; p < tr->n_pairs; p++) free(tr->pairs[p].w);
    free(tr->pairs);
    free(tr->pkey);
    free(tr->pid);
    free(tr->heap);
    free(tr->touched);
    free(tr->wcount);
    free(tr->woff);
    free(tr->wlen);
    free(tr->sym);
    free(tr->seen);
}

static int trainer_init(trainer *tr, const counter *c) {
    memset(tr, 0, sizeof *tr);
    tr->n_words = c->used;
    int64_t n = tr->n_words ? tr->n_words : 1;
    tr->wcount = malloc((size_t)n * sizeof *tr->wcount);
    tr->woff = malloc((size_t)n * sizeof *tr->woff);
    tr->wlen = malloc((size_t)n * sizeof *tr->wlen);
    tr->seen = calloc((size_t)n, sizeof *tr->seen);
    tr->sym = malloc((size_t)(c->str_len ? c->str_len : 1) * sizeof *tr->sym);
    if (!tr->wcount || !tr->woff || !tr->wlen || !tr->seen || !tr->sym || pmap_grow(tr)) return -1;
    int64_t w = 0;
    for (uint64_t s = 0; s <= c->mask; s++) {
        const centry *x = &c->slots[s];
        if (!x->len) continue;
        tr->wcount[w] = x->count;
        tr->woff[w] = x->str;
        tr->wlen[w] = x->len;
        for (int i = 0; i < x->len; i++) tr->sym[x->str + i] = c->str[x->str + i];
        w++;
    }
    for (w = 0; w < tr->n_words; w++) {
        const int32_t *s = tr->sym + tr->woff[w];
        for (int i = 0; i + 1 < tr->wlen[w]; i++) {
            int32_t p = pair_get(tr, s[i], s[i + 1]);
            if (p < 0 || pair_note_word(&tr->pairs[p], (int32_t)w)) return -1;
            tr->pairs[p].count += tr->wcount[w];
        }
    }
    for (int64_t p = 0; p < tr->n_pairs; p++)
        if (heap_push(tr, (hitem){tr->pairs[p].count, (int32_t)p})) return -1;
    return 0;
}

/* Merge pair `best` into symbol z in every word that holds it; push the new pairs. */
static int trainer_merge(trainer *tr, int32_t best, int32_t z, int32_t step) {
    int32_t a = tr->pairs[best].a, b = tr->pairs[best].b;
    int32_t *list = tr->pairs[best].w, nlist = tr->pairs[best].wn;
    tr->pairs[best].w = NULL;
    tr->pairs[best].wn = tr->pairs[best].wcap = 0;
    tr->n_touched = 0;
    int rc = 0;
    for (int32_t k = 0; k < nlist && !rc; k++) {
        int32_t w = list[k];
        if (tr->seen[w] == (uint32_t)step + 1) continue;
        tr->seen[w] = (uint32_t)step + 1;
        int32_t *s = tr->sym + tr->woff[w];
        int L = tr->wlen[w], has = 0;
        for (int i = 0; i + 1 < L && !has; i++) has = s[i] == a && s[i + 1] == b;
        if (!has) continue;   /* stale entry: an earlier merge consumed the pair here */
        int64_t f = tr->wcount[w];
        for (int i = 0; i + 1 < L; i++) {
            int32_t p = pair_get(tr, s[i], s[i + 1]);   /* exists: counted when the word was */
            ST_ASSERT(p >= 0);
            tr->pairs[p].count -= f;
        }
        int n = 0;
        for (int i = 0; i < L; i++) {
            if (i + 1 < L && s[i] == a && s[i + 1] == b) { s[n++] = z; i++; }
            else s[n++] = s[i];
        }
        tr->wlen[w] = n;
        for (int i = 0; i + 1 < n; i++) {
            int32_t p = pair_get(tr, s[i], s[i + 1]);
            if (p < 0) { rc = -1; break; }
            tr->pairs[p].count += f;
            if (s[i] != z && s[i + 1] != z) continue;
            if (pair_note_word(&tr->pairs[p], w)) { rc = -1; break; }
            if (tr->pairs[p].mark != step) {
                tr->pairs[p].mark = step;
                if (tr->n_touched == tr->touched_cap) {
                    int64_t cap = tr->touched_cap ? tr->touched_cap * 2 : 1024;
                    int32_t *nt = realloc(tr->touched, (size_t)cap * sizeof *nt);
                    if (!nt) { rc = -1; break; }
                    tr->touched = nt;
                    tr->touched_cap = cap;
                }
                tr->touched[tr->n_touched++] = p;
            }
        }
    }
    free(list);
    for (int64_t k = 0; k < tr->n_touched && !rc; k++)
        rc = heap_push(tr, (hitem){tr->pairs[tr->touched[k]].count, tr->touched[k]});
    return rc;
}

static st_tokenizer *train_from_counts(const counter *c, int vocab, st_error *e) {
    trainer tr;
    st_tokenizer *t = NULL;
    if (trainer_init(&tr, c)) { st_fail(e, ST_ERR_MEMORY, "out of memory preparing BPE training"); goto fail; }
    t = st_sd_tok_new(ST_TOK_BPE, e);
    if (!t) goto fail;
    int want = vocab - 256;
    t->merges = malloc((size_t)(want > 0 ? want : 1) * sizeof *t->merges);
    if (!t->merges) { st_fail(e, ST_ERR_MEMORY, "out of memory"); goto fail; }
    while (t->n_merges < want && tr.hn > 0) {
        hitem top = heap_pop(&tr);
        int64_t now = tr.pairs[top.pid].count;
        if (now != top.count) {  /* stale: re-queue with the true count */
            if (now > 0 && heap_push(&tr, (hitem){now, top.pid})) { st_fail(e, ST_ERR_MEMORY, "out of memory"); goto fail; }
            continue;
        }
        if (now <= 0) continue;
        int32_t r = t->n_merges;
        t->merges[r][0] = tr.pairs[top.pid].a;
        t->merges[r][1] = tr.pairs[top.pid].b;
        if (trainer_merge(&tr, top.pid, 256 + r, r)) { st_fail(e, ST_ERR_MEMORY, "out of memory during BPE training"); goto fail; }
        t->n_merges++;
    }
    if (t->n_merges < want)
        st_log(ST_LOG_WARN, "BPE: the training text ran out of pairs after %d merges; vocabulary is %d, not %d",
               t->n_merges, 256 + t->n_merges, vocab);
    if (st_sd_bpe_index(t, e)) goto fail;
    st_sd_tok_rehash(t);
    trainer_free(&tr);
    return t;
fail:
    trainer_free(&tr);
    st_tokenizer_free(t);
    return NULL;
}

st_tokenizer *st_tokenizer_train_bpe(const char *text, int64_t len, int vocab, st_error *e) {
    if (vocab < 257) { st_fail(e, ST_ERR_CONFIG, "BPE vocabulary must be >= 257, got %d", vocab); return NULL; }
    counter c = {0};
    st_tokenizer *t = NULL;
    if (counter_grow(&c) || counter_text(&c, (const unsigned char *)text, len))
        st_fail(e, ST_ERR_MEMORY, "out of memory counting BPE chunks");
    else
        t = train_from_counts(&c, vocab, e);
    counter_free(&c);
    return t;
}

typedef struct file_count { counter *c; const char *path; } file_count;

static int count_block(void *user, const char *buf, int64_t len, int64_t at, int final, int64_t *used, st_error *e) {
    file_count *fc = user;
    int64_t cut = final ? len : st_sd_safe_cut(buf, len);
    if (counter_text(fc->c, (const unsigned char *)buf, cut))
        return st_fail(e, ST_ERR_MEMORY, "%s: out of memory counting BPE chunks (at byte %lld)", fc->path, (long long)at);
    *used = cut;
    return ST_OK;
}

st_tokenizer *st_sd_bpe_train_file(const char *path, int64_t begin, int64_t end, int vocab, st_error *e) {
    counter c = {0};
    st_tokenizer *t = NULL;
    file_count fc = {&c, path};
    if (counter_grow(&c)) st_fail(e, ST_ERR_MEMORY, "out of memory");
    else if (st_sd_stream(path, begin, end, count_block, &fc, e) == ST_OK)
        t = train_from_counts(&c, vocab, e);
    counter_free(&c);
    return t;
}
