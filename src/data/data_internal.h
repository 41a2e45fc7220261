/* data_internal.h - private to src/data: the tokenizer struct and the helpers shared by
 * the files of the data module (streaming reader, file identity, hashing, atomic writes,
 * token caches, the word and BPE tokenizers). Nothing here is public API; tests may use
 * it through "data/data_internal.h" to reach internals they check directly. */
#ifndef ST_DATA_INTERNAL_H
#define ST_DATA_INTERNAL_H

#include "st_data.h"

#include <stdint.h>
#include <stddef.h>

/* ---- growable int32 vector (token streams) ---- */
typedef struct sd_vec { int32_t *v; int64_t n, cap; } sd_vec;
int st_sd_vec_grow(sd_vec *a, int64_t need);           /* 0 ok, -1 out of memory */
static inline int sd_vec_push(sd_vec *a, int32_t x) {
    if (a->n == a->cap && st_sd_vec_grow(a, a->n + 1)) return -1;
    a->v[a->n++] = x;
    return 0;
}
void st_sd_vec_free(sd_vec *a);

/* hashing: FNV-1a 64 (st_fnv1a), stable across platforms, identifies vocabularies; a
 * 64-bit value enters as its 8 little-endian bytes */
static inline uint64_t sd_fnv_u64(uint64_t h, uint64_t x) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(x >> (8 * i));
    return st_fnv1a(h, b, 8);
}

/* ASCII whitespace as Python's bytes.split() sees it: space \t \n \v \f \r. */
extern const unsigned char st_sd_is_space[256];

/* ---- the tokenizer ----
 * word : token i is the string pool[off[i] .. off[i+1]); `table` maps strings to ids
 *        (open addressing, slot = id + 1, 0 = empty); eos = id of "<eos>".
 * bpe  : ids 0..255 are bytes; merge r joins (merges[r][0], merges[r][1]) into 256 + r;
 *        token strings live in pool/off like words (for decoding); pair_* maps a pair
 *        (a << 32 | b) to its rank.
 * byte : 256 ids, no tables. synthetic: ids are abstract symbols, printed as numbers. */
struct st_tokenizer {
    int kind;
    int vocab_size;
    uint64_t hash;
    char *pool; int64_t pool_len, pool_cap;
    int64_t *off; int64_t off_cap;       /* off[0..vocab_size] */
    uint32_t *whash;                     /* (vocab) low 32 bits of each string's hash */
    uint32_t *table; uint64_t table_mask;
    int32_t eos, unk;
    int32_t (*merges)[2]; int n_merges;
    uint64_t *pair_key; int32_t *pair_rank; uint64_t pair_mask;
    uint64_t syn_seed; int syn_order, syn_branch;
};

st_tokenizer *st_sd_tok_new(int kind, st_error *e);
/* Append token string s as the next id (word / bpe). Returns the id or -1 (memory). */
int32_t st_sd_tok_append(st_tokenizer *t, const char *s, int64_t len, st_error *e);
/* word: the id of s (hash h = st_fnv1a(ST_FNV_OFFSET, s, len)) or -1. */
int32_t st_sd_word_find(const st_tokenizer *t, const char *s, int64_t len, uint64_t h);
/* word: the id of s, adding it when new. -1 on memory failure. */
int32_t st_sd_word_intern(st_tokenizer *t, const char *s, int64_t len, uint64_t h, st_error *e);
/* Recompute t->hash from the content (call after building or loading). */
void st_sd_tok_rehash(st_tokenizer *t);
const char *st_sd_tok_kind_name(int kind);
st_tokenizer *st_sd_tok_new_synthetic(int vocab, uint64_t seed, int order, int branch, st_error *e);
/* the task vocabulary (include/st_task.h) of `vocab` ids */
st_tokenizer *st_sd_tok_new_task(int vocab, st_error *e);

/* BPE. Pre-split: text is cut into chunks that merges never cross (see bpe.c); */
int64_t st_sd_bpe_chunk_end(const unsigned char *s, int64_t len, int64_t i);
/* Build pair->rank table and token strings from t->merges (after training / loading). */
int st_sd_bpe_index(st_tokenizer *t, st_error *e);
/* Encode one chunk (len <= SD_BPE_MAX_CHUNK) into out (capacity >= len); returns count. */
#define SD_BPE_MAX_CHUNK 64
int st_sd_bpe_encode_chunk(const st_tokenizer *t, const unsigned char *s, int len, int32_t *out);
/* Train on the byte range [begin, end) of a file (streamed). */
st_tokenizer *st_sd_bpe_train_file(const char *path, int64_t begin, int64_t end, int vocab, st_error *e);

/* ---- files ---- */
/* Stream the byte range [begin, end) of a file in large blocks. fn is called with the
 * unconsumed bytes buf[0..len) (buf[0] at file offset `at`); it sets *used to the prefix it
 * consumed, the rest is handed to it again with more data. On the final call (final = 1)
 * it must consume everything. A NUL byte anywhere is refused as binary (ST_ERR_DATA).
 * Blocks are 16 MiB; the environment variable STRETCH_DATA_BLOCK overrides that (tests). */
typedef int (*sd_block_fn)(void *user, const char *buf, int64_t len, int64_t at, int final,
                           int64_t *used, st_error *e);
int st_sd_stream(const char *path, int64_t begin, int64_t end, sd_block_fn fn, void *user, st_error *e);
/* Largest p in (0, len) where a new line starts that is not itself blank-line material:
 * buf[p-1] == '\n' and buf[p] is neither '\n' nor '\r'; 0 when there is none. Word
 * tokens, BPE chunks and lines never straddle such a cut, so blocks cut there tokenize
 * exactly like the whole text. */
int64_t st_sd_safe_cut(const char *buf, int64_t len);
/* Number of '\n' in the first `off` bytes of a file (line numbers of split ranges). */
int64_t st_sd_lines_before(const char *path, int64_t off);

/* What identifies a source file: size, mtime, and the whole file's checksums (sample:
 * CRC32 << 32 | Adler-32; crc32 alone is what reports show). */
typedef struct sd_identity { uint64_t size; int64_t mtime_ns; uint64_t sample; uint32_t crc32; } sd_identity;
int st_sd_identity_of(const char *path, sd_identity *id, st_error *e);

/* Read a whole (small) file; *n gets its size. NUL-terminated for convenience. */
char *st_sd_read_file(const char *path, int64_t *n, int64_t max_bytes, st_error *e);
/* 1 if dir exists (or can be created) and a file can be created in it. */
int st_sd_dir_writable(const char *dir);

/* ---- token caches (cache.c) ---- */
typedef struct sd_cache_key {
    sd_identity src;        /* the source file */
    int64_t begin, end;     /* byte range of the split within it */
    uint64_t tok_hash;      /* tokens: the tokenizer that produced them (0 for a vocab file) */
    int32_t vocab_size;     /* tokens: every id must be below this */
    char spec[16];          /* tokenizer spec ("word", "byte", "bpe512") */
} sd_cache_key;
/* 1 = hit (tokens returned, caller frees), 0 = miss; a stale or corrupt file is logged
 * as a warning naming the file and the reason, and reported as a miss. */
int st_sd_cache_read_tokens(const char *path, const sd_cache_key *key, int32_t **tokens, int64_t *n,
                         int64_t *bytes);
int st_sd_cache_write_tokens(const char *path, const sd_cache_key *key, const int32_t *tokens, int64_t n,
                          int64_t bytes, st_error *e);
int st_sd_cache_read_tokenizer(const char *path, const sd_cache_key *key, st_tokenizer **t);
int st_sd_cache_write_tokenizer(const char *path, const sd_cache_key *key, const st_tokenizer *t, st_error *e);

/* ---- tokenizer serialisation (tokenizer_io.c) ---- */
char *st_sd_tok_to_json(const st_tokenizer *t, st_error *e);              /* malloc'd text */
st_tokenizer *st_sd_tok_from_json(const char *text, int64_t len, const char *name, st_error *e);

/* ---- word level (wikitext.c) ----
 * Tokenize [begin, end) of a file: each line's whitespace-separated words, then <eos>.
 * build = 1 adds new words to t (train); build = 0 refuses words not in t, naming
 * the file and line (valid / test). */
int st_sd_word_tokenize_file(st_tokenizer *t, const char *path, int64_t begin, int64_t end, int build,
                          sd_vec *out, st_error *e);
/* The file of split `split` in a WikiText directory: <dir>/<split>.txt, else
 * <dir>/wiki.<split>.tokens (ST_ERR_IO naming both when neither exists). */
int st_sd_wikitext_split_file(const char *dir, int split, char *out, size_t n, st_error *e);
/* Evaluation on outside text: the whole file [0, size), unknown words mapped to <unk> and
 * counted (ST_ERR_DATA when the vocabulary has no <unk>). `unk` starts zeroed; the caller
 * frees unk->set. */
#define SD_WORD_UNK 2
typedef struct sd_unk_count { int64_t tokens, distinct; uint64_t *set; uint64_t cap; } sd_unk_count;
int st_sd_word_tokenize_unk(const st_tokenizer *t, const char *path, int64_t size, sd_vec *out, sd_unk_count *unk,
                         st_error *e);
/* BPE / byte encoding of a file range (bpe.c). */
int st_sd_encode_file(const st_tokenizer *t, const char *path, int64_t begin, int64_t end, sd_vec *out,
                   st_error *e);

#endif
