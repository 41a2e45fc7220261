/* arena.c - chunked bump allocator for per-step activations.
 * Why chunks: the first step of a new (B,T) does not know its size in advance; extra
 * chunks absorb it, and reset() then consolidates to a single chunk of the high-water
 * size, so steady-state steps never call malloc. */
#include "st_tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_arena_chunk {
    st_arena_chunk *next;
    size_t size, used;
    unsigned char *mem;
};

#define ALIGN 64

static st_arena_chunk *chunk_new(size_t size) {
    st_arena_chunk *c = malloc(sizeof *c);
    if (!c) return NULL;
    c->mem = st_aligned_alloc(size, NULL);
    if (!c->mem) { free(c); return NULL; }
    c->size = size; c->used = 0; c->next = NULL;
    return c;
}

int st_arena_init(st_arena *a, size_t capacity, size_t limit, st_error *e) {
    memset(a, 0, sizeof *a);
    if (capacity < 4096) capacity = 4096;
    if (limit < capacity) limit = capacity;
    a->capacity = capacity;
    a->limit = limit;
    a->head = chunk_new(capacity);
    if (!a->head) return st_fail(e, ST_ERR_MEMORY, "arena: cannot allocate %zu bytes", capacity);
    a->total = capacity;
    return ST_OK;
}

void *st_arena_alloc(st_arena *a, size_t bytes) {
    size_t need = (bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (need == 0) need = ALIGN;
    st_arena_chunk *c = a->head;
    if (c && c->size - c->used >= need) {
        void *p = c->mem + c->used;
        c->used += need;
        a->used += need;
        if (a->used > a->high_water) a->high_water = a->used;
        return p;
    }
    /* New chunk: at least half the first chunk's size so growth is geometric-ish. */
    size_t size = need > a->capacity / 2 ? need : a->capacity / 2;
    if (a->total + size > a->limit) {
        if (a->total + need > a->limit) {
            a->overflowed = 1;
            a->fail_need = a->used + need;
            a->fail_avail = a->limit;
            return NULL;
        }
        size = need;
    }
    st_arena_chunk *n = chunk_new(size);
    if (!n) {
        a->overflowed = 1;
        a->fail_need = a->used + need;
        a->fail_avail = a->total;
        return NULL;
    }
    n->next = a->head;
    a->head = n;
    a->total += size;
    n->used = need;
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return n->mem;
}

void st_arena_reset(st_arena *a) {
    /* Consolidate into one chunk big enough for the high-water mark: when there are extra
     * chunks, and also when a rewind already freed them (one chunk left, but smaller than
     * the peak), else the same overflow would allocate a chunk again on every step. */
    size_t want = a->high_water > a->capacity ? a->high_water : a->capacity;
    if (want > a->limit) want = a->limit;
    if (a->head && (a->head->next || a->head->size < want)) {
        st_arena_chunk *c = a->head;
        while (c) { st_arena_chunk *nx = c->next; st_aligned_free(c->mem); free(c); c = nx; }
        a->head = chunk_new(want);
        a->capacity = want;
        a->total = a->head ? want : 0;
    }
    if (a->head) a->head->used = 0;
    a->used = 0;
    a->overflowed = 0;
    a->fail_need = a->fail_avail = 0;
}

void st_arena_free(st_arena *a) {
    st_arena_chunk *c = a->head;
    while (c) { st_arena_chunk *nx = c->next; st_aligned_free(c->mem); free(c); c = nx; }
    memset(a, 0, sizeof *a);
}

void st_arena_overflow_msg(const st_arena *a, char *buf, size_t n) {
    if (a->limit == (size_t)-1)   /* no limit set: the allocation itself failed */
        snprintf(buf, n, "arena overflow: needed %zu bytes, available %zu bytes (no limit set)", a->fail_need,
                 a->fail_avail);
    else
        snprintf(buf, n, "arena overflow: needed %zu bytes, available %zu bytes (limit %zu)", a->fail_need,
                 a->fail_avail, a->limit);
}

int st_arena_chunks(const st_arena *a) {
    int n = 0;
    for (const st_arena_chunk *c = a->head; c; c = c->next) n++;
    return n;
}

st_arena_mark st_arena_mark_get(const st_arena *a) {
    st_arena_mark m = {a->head, a->head ? a->head->used : 0, a->used};
    return m;
}

void st_arena_rewind(st_arena *a, st_arena_mark m) {
    /* chunks made after the mark are freed; the high-water mark keeps their size, so the
     * next reset consolidates to a chunk that fits without further growth */
    while (a->head && a->head != m.chunk) {
        st_arena_chunk *c = a->head;
        a->head = c->next;
        a->total -= c->size;
        st_aligned_free(c->mem);
        free(c);
    }
    if (a->head) a->head->used = m.chunk_used;
    a->used = m.used;
}
