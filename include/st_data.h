/* st_data.h - corpora, tokenizers, token caches and loaders.
 *
 * Sources:
 *   synthetic : a seeded sparse Markov source built in (offline quickstart and tests);
 *               its entropy rate is computed exactly, so the ideal perplexity is known.
 *   wikitext  : WikiText-2/103 word level (train.txt|wiki.train.tokens, ...): each line's
 *               whitespace tokens then <eos>; vocabulary from the train split.
 *   text      : any UTF-8 text file (e.g. tinyshakespeare), split by byte fraction into
 *               train / valid / test, tokenized by bytes or by a BPE trained on train.
 * Token streams are int32. Tokenized splits are cached as zlib-compressed files with a
 * header (magic, version, tokenizer hash, token count, CRC32), rebuilt when the source or
 * tokenizer changes or the cache is corrupt. */
#ifndef ST_DATA_H
#define ST_DATA_H

#include "st_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ST_SPLIT_TRAIN = 0, ST_SPLIT_VALID = 1, ST_SPLIT_TEST = 2 };
enum { ST_TOK_WORD = 0, ST_TOK_BYTE, ST_TOK_BPE, ST_TOK_SYNTHETIC };
/* What a "token" is when reporting perplexity. */
enum { ST_UNIT_WORD = 0, ST_UNIT_BYTE, ST_UNIT_TOKEN };

typedef struct st_data_config {
    char source[16];        /* "synthetic" | "wikitext" | "text" */
    char path[1024];        /* wikitext: directory; text: file; synthetic: unused */
    char tokenizer[16];     /* "word" (wikitext) | "byte" | "bpe" | "synthetic" */
    int bpe_vocab;          /* BPE: target vocabulary size incl. the 256 bytes (>= 257) */
    char cache_dir[1024];   /* token caches; "" -> "<path dir>/.stretch-cache" or "data/cache" */
    float valid_frac;       /* text: fraction of bytes for valid (default 0.05) */
    float test_frac;        /* text: fraction for test (default 0.05) */
    /* synthetic source */
    uint64_t syn_seed;      /* 1234 */
    int syn_vocab;          /* 64 */
    int syn_order;          /* 2: next token depends on the previous `order` tokens */
    int syn_branch;         /* 4: successors per context (sparsity) */
    int64_t syn_tokens[3];  /* tokens per split: 1,000,000 / 100,000 / 100,000 */
} st_data_config;

void st_data_config_default(st_data_config *c);
/* Range checks; messages name "data.<key>" and the config file. */
int st_data_config_validate(const st_data_config *c, const char *file, st_error *e);

typedef struct st_tokenizer st_tokenizer;   /* opaque */

typedef struct st_dataset {
    int32_t *tokens[3];     /* train / valid / test streams */
    int64_t n[3];
    int64_t bytes[3];       /* UTF-8 bytes of each split's text (0 for synthetic) */
    int vocab_size;
    int unit;               /* ST_UNIT_* */
    st_tokenizer *tok;
    uint64_t tok_hash;      /* identifies the tokenizer (vocab/merges) */
    double entropy_rate;    /* synthetic: true entropy rate in nats/token; else 0 */
} st_dataset;

/* Load (or build and cache) all three splits. cfg_file names the config for messages. */
int st_dataset_load(const st_data_config *cfg, const char *cfg_file, st_dataset *ds, st_error *e);
void st_dataset_free(st_dataset *ds);

/* Tokenizer files: written next to a run / export ("tokenizer.json"), read back by eval
 * and generate. Loading a tokenizer whose hash differs from a checkpoint's is an error. */
int st_tokenizer_save(const st_tokenizer *t, const char *path, st_error *e);
st_tokenizer *st_tokenizer_load(const char *path, st_error *e);
void st_tokenizer_free(st_tokenizer *t);
int st_tokenizer_vocab_size(const st_tokenizer *t);
uint64_t st_tokenizer_hash(const st_tokenizer *t);
int st_tokenizer_kind(const st_tokenizer *t);
/* Encode UTF-8 text; returns the number of tokens (out may be NULL to count). */
int64_t st_tokenizer_encode(const st_tokenizer *t, const char *text, int64_t len,
                            int32_t *out, int64_t cap);
/* Decode tokens to text; returns bytes written (excluding NUL), -1 on a bad id. */
int64_t st_tokenizer_decode(const st_tokenizer *t, const int32_t *ids, int64_t n,
                            char *out, int64_t cap);

/* ---- training batches: random contiguous windows of T+1 tokens ---- */
typedef struct st_loader {
    const int32_t *tokens;
    int64_t n;
    uint64_t seed;
    uint64_t draws;         /* windows drawn so far: the whole resumable state */
} st_loader;
void st_loader_init(st_loader *l, const int32_t *tokens, int64_t n, uint64_t seed);
/* Fill x, y (B*T each): window w starts at st_hash64(seed, draws + w) mod (n - T); y is x
 * shifted by one. Deterministic and resumable from `draws`. */
void st_loader_next(st_loader *l, int64_t B, int64_t T, int32_t *x, int32_t *y);

/* ---- evaluation partitions ----
 * A stream of n tokens has n - 1 targets (token t+1 given tokens <= t). A window feeds
 * inputs [start, start + len) and scores the targets at window positions >= score_from
 * (position p predicts token start + p + 1).
 *   stride == L (nonoverlapping): windows at 0, L, 2L, ...; each scores everything.
 *   stride  < L (sliding): windows at 0, S, 2S, ...; the first scores all positions,
 *   the others only their last S positions; the last window is clipped to the stream.
 * Every target is scored exactly once in both modes. */
typedef struct st_eval_window { int64_t start; int64_t len; int64_t score_from; } st_eval_window;
/* Returns the number of windows; writes them to out when out != NULL (cap entries). */
int64_t st_eval_windows(int64_t n_tokens, int64_t L, int64_t stride, st_eval_window *out, int64_t cap);

#ifdef __cplusplus
}
#endif
#endif
