/* st_task.h - algorithmic and retrieval tasks (data.source "task"): a registry of
 * generators, one file each in src/data/task/, as src/model/pos/ is for position methods.
 *
 * Every task writes instances in one shared vocabulary (the "task" tokenizer): the
 * specials below, the ten digits, then `symbols` abstract symbols named a, b, ..., z, aa,
 * ab, ... An instance is a token sequence with a flag per token: 1 for an answer token
 * (scored by the loss under data.task.loss "answer", and produced by the model at
 * evaluation), 0 for a prompt token (given). Exact match: every answer token of the
 * instance is the argmax of the model's prediction, which is what greedy decoding of the
 * answer produces (prompt tokens between answers, e.g. MQAR's queries, are given).
 * Each task's answer is a function of its prompt, so token equality is the check. */
#ifndef ST_TASK_H
#define ST_TASK_H

#include "st_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ids of the shared vocabulary */
enum {
    ST_TT_PAD = 0,      /* "<pad>": fills a training row after its instances (target ignored) */
    ST_TT_SEP,          /* "=": ends a prompt (copy, reverse, sort, addition, selective copy, counting, parity) */
    ST_TT_END,          /* ".": ends an answer whose length the model must know */
    ST_TT_PLUS,         /* "+": addition */
    ST_TT_BAR,          /* "|": MQAR, between the key-value pairs and the queries */
    ST_TT_QUERY,        /* "?": the question (passkey, multikey, counting, vartrack) */
    ST_TT_BLANK,        /* "_": selective copy, a blank */
    ST_TT_WRITE,        /* "W": flip-flop instructions */
    ST_TT_IGNORE,       /* "I" */
    ST_TT_READ,         /* "R" */
    ST_TT_KEY,          /* "K": a needle's marker (passkey, multikey), an assignment's (vartrack) */
    ST_TT_DIGIT0,       /* "0" .. "9": ids 11 .. 20 */
    ST_TT_SYMBOL0 = ST_TT_DIGIT0 + 10   /* symbol j: id 21 + j */
};
#define ST_TASK_MAX_SYMBOLS 4096
#define ST_TASK_MAX_DIGITS 16
#define ST_TASK_MAX_SIZE ((int64_t)1 << 20)   /* data.task.max_size's bound, and eval --sizes' */
/* vocabulary size for `symbols` symbols */
static inline int st_task_vocab(int symbols) { return ST_TT_SYMBOL0 + symbols; }

/* The task-specific config keys (data.task.*) a task reads; a key set to a non-default
 * value for a task that does not read it is refused, naming the key. */
enum {
    ST_TASK_KEY_SYMBOLS = 1 << 0,   /* data.task.symbols */
    ST_TASK_KEY_FORMAT = 1 << 1,    /* data.task.format: addition */
    ST_TASK_KEY_DIGITS = 1 << 2,    /* data.task.digits: passkey */
    ST_TASK_KEY_IGNORE = 1 << 3,    /* data.task.ignore_prob: flip-flop */
    ST_TASK_KEY_BLANK = 1 << 4,     /* data.task.blank_prob: selective copy */
    ST_TASK_KEY_QUERIES = 1 << 5,   /* data.task.queries: MQAR */
    ST_TASK_KEY_NEEDLES = 1 << 6,   /* data.task.needles: multikey */
    ST_TASK_KEY_HOPS = 1 << 7,      /* data.task.hops: vartrack */
    ST_TASK_KEY_CHAINS = 1 << 8,    /* data.task.chains: vartrack */
    ST_TASK_KEY_MAX_COUNT = 1 << 9, /* data.task.max_count: counting */
};
#define ST_TASK_MAX_NEEDLES 64      /* data.task.needles' bound (multikey keeps them on its stack) */
#define ST_TASK_MAX_HOPS 16         /* data.task.hops' and chains' bounds (vartrack keeps hops x chains */
#define ST_TASK_MAX_CHAINS 16       /* variables on its stack) */

typedef struct st_task_params {
    int symbols;            /* alphabet size: ids ST_TT_SYMBOL0 .. ST_TT_SYMBOL0 + symbols - 1 */
    int reversed;           /* addition: operands and sum least-significant digit first */
    int random_queries;     /* MQAR: each query a uniform draw of the keys (with replacement) */
    int digits;             /* passkey: digits of a key, in [1, ST_TASK_MAX_DIGITS] */
    double ignore_prob;     /* flip-flop: P(ignore) of an instruction between the first and last */
    double blank_prob;      /* selective copy: P(blank) of a prompt position */
    int needles;            /* multikey: needles in the filler (one asked for), in [2, ST_TASK_MAX_NEEDLES] */
    int hops;               /* vartrack: variables per chain, in [1, ST_TASK_MAX_HOPS] */
    int chains;             /* vartrack: chains (one asked for), in [1, ST_TASK_MAX_CHAINS] */
    int64_t max_count;      /* counting: 0, or the asked symbol occurs 1..max_count times */
    const st_markov *filler;/* needle tasks: the filler source, a chain over the symbols (vocab = symbols) */
    double depth;           /* needle tasks: the (asked-for) needle's depth in [0, 1]; < 0: drawn from the seed */
} st_task_params;

typedef struct st_task {
    const char *name;       /* data.task.name */
    const char *cite;       /* where the format comes from (docs/tasks.md) */
    const char *size_unit;  /* what `size` counts, e.g. "symbols", "digits", "pairs" */
    int64_t min_size;       /* smallest meaningful size */
    uint32_t keys;          /* ST_TASK_KEY_* read */
    int has_depth;          /* a needle task: its filler is the Markov source, evaluation takes a depth grid */
    /* smallest size the parameters allow (passkey: the needle and the query); NULL: min_size.
     * min_rule: that size in the keys' terms, for the messages ("data.task.digits + 2") */
    int64_t (*min_size_of)(const st_task_params *p);
    const char *min_rule;
    /* largest size the parameters allow (MQAR: symbols, its keys are distinct); INT64_MAX when none */
    int64_t (*max_size)(const st_task_params *p);
    /* NULL, or the rule between keys the task needs (multikey: needles <= symbols; vartrack:
     * hops x chains <= symbols, chains <= 10^digits): 0 when
     * the parameters make instances, else nonzero and msg says why, naming the keys */
    int (*check)(const st_task_params *p, char *msg, size_t n);
    /* tokens of an instance of that size; an upper bound when it varies (addition's carry) */
    int64_t (*length)(const st_task_params *p, int64_t size);
    /* Write one instance: tok[0, n), ans[0, n) (1: answer token). Returns n <= length().
     * A pure function of (p, size, seed). size in [min_size, max_size(p)]. */
    int64_t (*generate)(const st_task_params *p, int64_t size, uint64_t seed, int32_t *tok, uint8_t *ans);
} st_task;

/* ---- the registry (src/data/task/registry.c) ---- */
#define ST_TASK_COUNT 12    /* entries of the registry (checked there at compile time) */
/* index of a name, -1 when unknown; the name at an index (config key tables) */
int st_task_index(const char *name);
const char *st_task_name_at(int i);
int st_task_count(void);
const st_task *st_task_at(int i);
const st_task *st_task_find(const char *name);   /* NULL when unknown */
/* "copy", "reverse", ... joined by ", " (for messages): the tasks that read every key bit
 * of `keys` (ST_TASK_KEY_*; 0: any) and, with needle, only those with a depth grid */
void st_task_list(char *buf, size_t n, uint32_t keys, int needle);

/* ---- a run's task data: the registry entry, its parameters and sizes ---- */
struct st_task_data {
    const st_task *task;
    st_task_params p;
    st_markov filler;       /* passkey: owned */
    int have_filler;
    int64_t min_size, max_size;   /* training sizes, uniform on [min, max] */
    int loss_all;           /* data.task.loss "all": every next token is a target (but padding) */
    int pack;               /* data.task.pack: several instances per training row */
};
/* The sizes a task makes with these parameters, [*lo, *hi]: its min_size (or min_size_of(p):
 * passkey at least digits + 2, the needle and the query) to its max_size(p), at most
 * ST_TASK_MAX_SIZE. */
void st_task_size_range(const st_task *t, const st_task_params *p, int64_t *lo, int64_t *hi);
/* The data.task.* rules relating keys (each key's own range is the config schema's):
 * the sizes against the task, keys the task does not read left at their defaults, task
 * keys on another source refused. Messages name the config file and the key. */
int st_task_config_validate(const st_data_config *c, const char *file, st_error *e);
/* From the data config (data.task.*): validates the task's keys against the registry
 * (messages name the config file and key) and builds the filler chain. */
int st_task_data_init(st_task_data *td, const st_data_config *c, const char *cfg_file, st_error *e);
void st_task_data_free(st_task_data *td);
/* Longest instance of a training size (for train.seq_len checks). */
int64_t st_task_data_max_len(const st_task_data *td);
/* One training row of T + 1 tokens from the seed: instances of sizes drawn from
 * [min_size, max_size] (one, or with pack as many as fit), then padding. x = the first
 * T tokens, y = the next T with -1 where no loss is taken (prompt tokens under loss
 * "answer", padding always). doc: NULL, or (T) the row index where each token's instance
 * starts (the padding after the last instance is one more span), for the per-instance
 * attention mask (data.task.doc_mask). */
void st_task_row(const st_task_data *td, uint64_t seed, int64_t T, int32_t *x, int32_t *y, int32_t *doc);
/* The same row as n = T + 1 whole tokens: tok[0, n), scored[i] = 1 when the loss takes
 * token i as a target (st_task_row's y[i - 1] != -1), start (optional) each token's
 * instance start (the padding one more span). Returns the tokens before the padding. */
int64_t st_task_row_tokens(const st_task_data *td, uint64_t seed, int64_t n, int32_t *tok, uint8_t *scored,
                           int32_t *start);
/* A stream of n tokens: instances back to back (perplexity evaluation of a task run). */
void st_task_stream(const st_task_data *td, uint64_t seed, int32_t *out, int64_t n);

/* symbol / special names of the task vocabulary (id < vocab): writes a NUL-terminated name */
void st_task_token_name(int32_t id, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
