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
 * tokenizer changes or the cache is corrupt (format: data/README.md). The synthetic
 * source is generated on the fly (faster than reading a cache) and never cached. */
#ifndef ST_DATA_H
#define ST_DATA_H

#include "st_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ST_SPLIT_TRAIN = 0, ST_SPLIT_VALID = 1, ST_SPLIT_TEST = 2 };
enum { ST_TOK_WORD = 0, ST_TOK_BYTE, ST_TOK_BPE, ST_TOK_SYNTHETIC, ST_TOK_TASK, ST_TOK_COUNT };
/* What a "token" is when reporting perplexity. */
enum { ST_UNIT_WORD = 0, ST_UNIT_BYTE, ST_UNIT_TOKEN };

typedef struct st_data_config {
    char source[16];        /* "synthetic" | "wikitext" | "text" | "task" */
    char path[ST_PATH_MAX + 1];    /* wikitext: directory; text: file; synthetic: unused */
    char tokenizer[16];     /* "auto" (default: synthetic -> "synthetic", wikitext -> "word",
                               text -> "byte", task -> "task") | "word" | "byte" | "bpe" | "synthetic" | "task" */
    int bpe_vocab;          /* BPE: target vocabulary size incl. the 256 bytes (>= 257; 512) */
    char cache_dir[ST_PATH_MAX + 1]; /* token caches; "" -> "<data dir>/.stretch-cache" when writable,
                               else "$TMPDIR/stretch-cache" (/tmp when TMPDIR is unset) */
    float valid_frac;       /* text: fraction of bytes for valid (default 0.05) */
    float test_frac;        /* text: fraction for test (default 0.05) */
    /* synthetic source */
    /* JSON keys data.synthetic.{seed,vocab,order,branch,tokens} */
    uint64_t syn_seed;      /* 1234 */
    int syn_vocab;          /* 64 */
    int syn_order;          /* 2: next token depends on the previous `order` tokens */
    int syn_branch;         /* 4: successors per context (sparsity) */
    int64_t syn_tokens[3];  /* tokens per split: 1,000,000 / 100,000 / 100,000 */
    char syn_mode[16];      /* "markov" (default) | "copy": add recall segments (st_copy) */
    /* JSON keys data.passkey.{rate,digits}: passkey insertion into training windows */
    double pk_rate;         /* 0: off; else the fraction of training windows with a passkey */
    int pk_digits;          /* 5: digits of a key */
    /* JSON keys data.task.*: source "task" (include/st_task.h, docs/tasks.md) */
    char task_name[24];     /* "copy": a registry name */
    int64_t task_min_size;  /* 1: training instance sizes, uniform on [min_size, max_size] */
    int64_t task_max_size;  /* 16 */
    int task_symbols;       /* 16: alphabet size */
    char task_loss[8];      /* "answer" (default): loss on answer tokens only | "all" */
    int task_pack;          /* 0: one instance per training row, padded; 1: as many as fit */
    int task_doc_mask;      /* 1: with pack, a token attends only to its own instance */
    char task_format[16];   /* addition: "plain" (default) | "reversed" */
    char task_queries[8];   /* mqar: "each" (default: every key once) | "random" (drawn with replacement) */
    int task_digits;        /* passkey: 5 digits per key */
    double task_ignore_prob;/* flip-flop: 0.8 */
    double task_blank_prob; /* selective copy: 0.75 */
    int task_needles;       /* multikey: 4 needles, one asked for */
    int task_hops;          /* vartrack: 4 variables per chain */
    int task_chains;        /* vartrack: 2 chains, one asked for */
    int task_max_count;     /* counting: 0 (uniform prompt), or the asked symbol 1..max_count times */
    /* JSON keys data.synthetic.copy.{len,min_dist,max_dist,decay,rate} (mode "copy") */
    int copy_len;           /* 8: tokens per copied segment */
    int copy_min_dist;      /* 9: copy distances d in [min_dist, max_dist], min_dist > len */
    int copy_max_dist;      /* 24 */
    double copy_decay;      /* 0.1: P(d) ~ exp(-decay (d - min_dist)), recency-biased */
    double copy_rate;       /* 0.25: chance per free step that a copy starts */
    int quiet;              /* not a config key: st_dataset_load logs no info lines (--quiet,
                               the ranks after the first) */
} st_data_config;

/* Defaults for every field: the data rows of the config key table
 * (src/train/config_schema.c). */
void st_data_config_default(st_data_config *c);
/* Range checks; messages name "data.<key>" and the config file. */
int st_data_config_validate(const st_data_config *c, const char *file, st_error *e);
/* The tokenizer the config means ("auto" resolved for its source). */
const char *st_data_tokenizer_name(const st_data_config *c);

typedef struct st_tokenizer st_tokenizer;   /* opaque */
typedef struct st_task_data st_task_data;   /* include/st_task.h */

typedef struct st_dataset {
    int32_t *tokens[3];     /* train / valid / test streams */
    int64_t n[3];
    int64_t bytes[3];       /* UTF-8 bytes of each split's text (0 for synthetic) */
    int vocab_size;
    int unit;               /* ST_UNIT_* */
    st_tokenizer *tok;
    uint64_t tok_hash;      /* identifies the tokenizer (vocab/merges) */
    double entropy_rate;    /* synthetic: true entropy rate in nats/token; else 0.
                               The ideal perplexity is exp(entropy_rate). */
    /* provenance, filled by st_dataset_load (for logs and `stretch data`) */
    st_task_data *task;     /* source "task": the generator the loader draws rows from (owned);
                               the streams are instances back to back (for perplexity) */
    char cache_file[3][ST_PATH_BUF];/* each split's token cache ("" when not cached) */
    char vocab_file[ST_PATH_BUF];  /* cached vocabulary / BPE merges ("" when none) */
    int cache_hits;         /* splits read from cache (0..3) */
    double load_seconds;    /* wall time of st_dataset_load */
} st_dataset;

/* Load (or build and cache) all three splits. cfg_file names the config for messages. */
int st_dataset_load(const st_data_config *cfg, const char *cfg_file, st_dataset *ds, st_error *e);
void st_dataset_free(st_dataset *ds);
/* What the splits hold: CRC32 and length of each split's token ids, folded into 64 bits
 * (never 0). A checkpoint records it, so a resume notices a corpus that changed under a
 * tokenizer that did not (a byte-level run's tokenizer hash is the same for any text). */
uint64_t st_dataset_hash(const st_dataset *ds);
/* The id of the token "0" when "0".."9" are ten single tokens with consecutive ids (byte,
 * BPE, task vocabularies: model.abacus.digit0), else -1 (a word vocabulary, whose
 * numbers are words). */
int32_t st_dataset_digit0(const st_dataset *ds);

/* Tokenizer files: written next to a run / export ("tokenizer.json"), read back by eval
 * and generate. Loading a tokenizer whose hash differs from a checkpoint's is an error.
 * Format (JSON, data/README.md): {"format": "stretch-tokenizer", "version": 1, "kind",
 * "vocab_size", "hash" (16 hex digits), then "tokens" (word), "merges" (bpe) or
 * "synthetic"}. Loading re-derives the hash from the content and refuses a mismatch. */
int st_tokenizer_save(const st_tokenizer *t, const char *path, st_error *e);
st_tokenizer *st_tokenizer_load(const char *path, st_error *e);
/* Load and require the given hash and vocabulary size (e.g. a checkpoint's): a mismatch
 * is ST_ERR_DATA naming the file and both values. */
st_tokenizer *st_tokenizer_load_expect(const char *path, uint64_t hash, int vocab_size, st_error *e);
/* The 256-symbol byte tokenizer. */
st_tokenizer *st_tokenizer_new_byte(st_error *e);
/* Train a byte-level BPE of vocab_size (>= 257) on a text in memory (any bytes). Text is
 * pre-split into chunks (see data/README.md) that merges never cross. The result may have
 * fewer tokens when the text runs out of pairs (logged). */
st_tokenizer *st_tokenizer_train_bpe(const char *text, int64_t len, int vocab_size, st_error *e);
void st_tokenizer_free(st_tokenizer *t);
int st_tokenizer_vocab_size(const st_tokenizer *t);
uint64_t st_tokenizer_hash(const st_tokenizer *t);
int st_tokenizer_kind(const st_tokenizer *t);
/* The id of <eos> in a word-level vocabulary (ids follow first appearance, so it is 0
 * only when the train split starts with a blank line, as WikiText does); -1 for others. */
int32_t st_tokenizer_eos(const st_tokenizer *t);
/* Encode UTF-8 text; returns the number of tokens (out may be NULL to count). At most
 * cap ids are written; the return value is the full count either way.
 *   word: whitespace-split words, "\n" -> <eos> (no <eos> after an unterminated last
 *         line); an unknown word maps to <unk> when the vocabulary has it, else -1.
 *   synthetic: whitespace-separated decimal ids; -1 on anything else.
 *   task: whitespace-separated names of the task vocabulary (st_task_token_name: "=",
 *         "7", "a", ...); -1 on an unknown name. */
int64_t st_tokenizer_encode(const st_tokenizer *t, const char *text, int64_t len,
                            int32_t *out, int64_t cap);
/* Decode tokens to text; returns bytes written (excluding NUL), -1 on a bad id.
 * Like snprintf: writes at most cap - 1 bytes plus a NUL (out may be NULL with cap 0) and
 * returns the full length. word: words joined by spaces, <eos> -> "\n"; synthetic:
 * decimal ids joined by spaces; task: names joined by spaces. */
int64_t st_tokenizer_decode(const st_tokenizer *t, const int32_t *ids, int64_t n,
                            char *out, int64_t cap);
/* The bytes token id adds after a text whose last token is prev (-1: id comes first), as
 * st_tokenizer_decode (same return and cap rules): decoding ids one by one with this
 * gives exactly the bytes of decoding them whole (streamed output). */
int64_t st_tokenizer_decode_next(const st_tokenizer *t, int32_t prev, int32_t id, char *out, int64_t cap);

/* ---- outside text for evaluation (`stretch eval --data`) ----
 * path: a text file (tokenized whole), or a WikiText directory (the file of `split`:
 * <split>.txt or wiki.<split>.tokens). The tokenizer is used as is: byte / BPE encode any
 * bytes; word level maps words not in the vocabulary to <unk> and counts them. Errors:
 * ST_ERR_IO (missing, unreadable), ST_ERR_DATA (empty, binary (a NUL byte), fewer than 2
 * tokens, unseen words and no <unk> in the vocabulary, a synthetic tokenizer). */
typedef struct st_text_data {
    int32_t *tokens;
    int64_t n;
    char path[ST_PATH_BUF];  /* the file read (for a directory, its split file) */
    int is_dir;             /* path named a directory */
    int64_t bytes;          /* file size */
    uint32_t crc32;         /* of the whole file (zlib polynomial) */
    int64_t unk_tokens;     /* word level: tokens not in the vocabulary, mapped to <unk> */
    int64_t unk_distinct;   /* ... as distinct words */
    int64_t unk_literal;    /* word level: "<unk>" already in the text (WikiText marks rare words) */
} st_text_data;
int st_text_data_load(const st_tokenizer *t, const char *path, int split, st_text_data *d, st_error *e);
void st_text_data_free(st_text_data *d);   /* frees tokens; keeps n, path, counts */

/* ---- passkey retrieval in real text (src/data/passkey.c) ----
 * An instance of n tokens: filler[0, a) + needle + filler[a, ..) + query, then the answer:
 *   needle = PRE key SUF, query = PRE, answer = key;  PRE = " pass key ", SUF = "."
 * in the run's tokenizer, the key `digits` decimal digits of one token each, a =
 * round(depth (n - needle - query)) filler tokens before the needle. */
#define ST_PASSKEY_MAX_DIGITS 16
#define ST_PASSKEY_MAX_PIECE 16
typedef struct st_passkey {
    int32_t pre[ST_PASSKEY_MAX_PIECE], suf[ST_PASSKEY_MAX_PIECE], digit[10];
    int n_pre, n_suf, digits;
} st_passkey;
/* Encode the pieces. ST_ERR_CONFIG for digits outside [1, 16] or a synthetic tokenizer,
 * ST_ERR_DATA when a piece has a word the vocabulary lacks or a digit is not one token;
 * messages name data.passkey. */
int st_passkey_init(st_passkey *pk, const st_tokenizer *t, int digits, st_error *e);
/* Tokens of an instance besides the filler: needle + query + answer. */
int64_t st_passkey_overhead(const st_passkey *pk);
/* The key of a seed: `digits` digit tokens. */
void st_passkey_key(const st_passkey *pk, uint64_t seed, int32_t *key);
/* out[0, n + digits): the instance of n input tokens (filler, needle, query; n >=
 * overhead - digits) from filler[0, n + digits - overhead) with the needle at depth in
 * [0, 1], then the answer. Returns the answer's first index (= n). */
int64_t st_passkey_build(const st_passkey *pk, const int32_t *filler, int64_t n, double depth, const int32_t *key,
                         int32_t *out);
/* Token i of that instance, without building it (the loader's windows). */
int32_t st_passkey_token(const st_passkey *pk, const int32_t *filler, int64_t n, double depth, const int32_t *key,
                         int64_t i);

/* ---- training batches: random contiguous windows of T+1 tokens ---- */
typedef struct st_loader {
    const int32_t *tokens;
    int64_t n;
    uint64_t seed;
    uint64_t draws;         /* windows drawn so far: the whole resumable state */
    const st_passkey *pk;   /* data.passkey.rate > 0: passkeys inserted (set after init) */
    const st_task_data *task; /* source "task": rows are task instances (st_task_row), not windows */
    double pk_rate;         /* the fraction of windows that get one */
    int32_t *doc;           /* NULL, or (B*T): st_loader_next writes where each token's task
                             * instance starts in its row (data.task.doc_mask) */
} st_loader;
void st_loader_init(st_loader *l, const int32_t *tokens, int64_t n, uint64_t seed);
/* Fill x, y (B*T each): window w starts at st_hash64(seed, draws + w) mod (n - T); y is x
 * shifted by one. Deterministic and resumable from `draws`. With a passkey (pk, pk_rate),
 * window w is, with probability pk_rate, a passkey instance of T + 1 tokens whose filler
 * is the window's own text, depth uniform in [0, 1], key and depth functions of (seed,
 * draws + w) too. With a task (source "task"), row w is st_task_row(task, st_hash64(seed,
 * draws + w)): instances, padding, and y = -1 where no loss is taken; with l->doc set, also
 * each token's instance start (a task source only). */
void st_loader_next(st_loader *l, int64_t B, int64_t T, int32_t *x, int32_t *y);
/* The hash row b of the next batch is drawn from: st_hash64(seed, draws + b) (a window's
 * start, a task row's seed). */
uint64_t st_loader_row_seed(const st_loader *l, uint64_t b);

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

/* ---- the synthetic source: a sparse random Markov chain of order k ----
 * Contexts are the V^k tuples of the last k tokens, s = sum_i x_i V^(k-1-i) (oldest
 * token most significant); the next context is (s * V + y) mod V^k. Each context has
 * `branch` successors: one along a de Bruijn cycle through all contexts (so the chain is
 * irreducible) and branch - 1 distinct random others, with Dirichlet(1) probabilities.
 * pi is the stationary distribution (power iteration on the lazy chain (I + P) / 2), and
 * the entropy rate H = sum_s pi(s) H(P(.|s)) in nats/token. */
typedef struct st_markov {
    int vocab, order, branch;
    int64_t n_ctx;          /* V^k */
    int32_t *next;          /* (n_ctx, branch) successor tokens */
    double *prob;           /* (n_ctx, branch) P(next | context), rows sum to 1 */
    double *pi;             /* (n_ctx) stationary distribution */
    double entropy_rate;    /* nats / token */
    int iterations;         /* power iterations used */
    double residual;        /* L1 change of pi in the last iteration */
} st_markov;
/* Limits: 2 <= V <= 65536, 1 <= k, 1 <= branch <= V, V^k <= 2^20, V^k * branch <= 2^24. */
int st_markov_init(st_markov *m, uint64_t seed, int vocab, int order, int branch, st_error *e);
void st_markov_free(st_markov *m);
/* Context index of the k tokens ctx[0..k) (oldest first). */
int64_t st_markov_context(const st_markov *m, const int32_t *ctx);
/* Draw n tokens: the first k are a context drawn from pi, the rest follow the chain. */
void st_markov_sample(const st_markov *m, uint64_t seed, int32_t *out, int64_t n);

/* ---- copy mode: the Markov stream with recall segments (synthetic_copy.c) ----
 * Cycle: `gap` = max_dist - len refractory Markov tokens; then free steps, each emitting
 * the marker (id = vocab of the chain) with probability `rate`, else a Markov token; after
 * the marker, `len` tokens copied from distance d, x[t] = x[t - d], d ~ D(d) proportional
 * to exp(-decay (d - min_dist)) on [min_dist, max_dist]. The chain then continues from
 * the last `order` copied tokens. min_dist > len keeps the marker out of the copied span
 * and gap = max_dist - len keeps earlier markers and copies of copies out of reach.
 * Predicting a copy needs attention back by a distance drawn from a recency-biased law.
 * Entropy rate (renewal-reward over one cycle; derivation in data/README.md):
 *   H = [(gap + (1-q)/q) Hm + h(q)/q + H(D)] / (gap + 1/q + len)
 * with Hm the chain's entropy rate, h(q) the binary entropy of rate q and H(D) the entropy
 * of the distance law. It neglects coincident candidate segments (then the copy reveals
 * less than H(D)); tests/test_data_copy.c measures the exact Bayes predictor against it. */
typedef struct st_copy {
    int len, min_dist, max_dist, gap;
    double decay, rate;
    double *dist_p;         /* (max_dist - min_dist + 1) P(d = min_dist + i) */
    double dist_entropy;    /* H(D), nats */
    double entropy_rate;    /* H above, nats / token */
} st_copy;
/* Validates against the chain (order <= len < min_dist <= max_dist, 0 < rate <= 1,
 * decay >= 0) and fills the law of d and the entropy rate. */
int st_copy_init(st_copy *c, const st_markov *m, int len, int min_dist, int max_dist, double decay, double rate,
                 st_error *e);
void st_copy_free(st_copy *c);
/* Draw n tokens (ids 0..vocab, vocab = marker); starts with a context from pi and a
 * refractory gap of max_dist tokens, so every copy has its full source. */
void st_copy_sample(const st_copy *c, const st_markov *m, uint64_t seed, int32_t *out, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
