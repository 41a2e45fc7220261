/* st_eval.h - perplexity evaluation at arbitrary lengths ("train short, test long") and
 * sweeps of training + evaluation runs (`stretch eval`, `stretch sweep`).
 *
 * Protocol (docs/evaluation.md has the details):
 *   A stream of n tokens has n - 1 targets. st_eval_windows() (st_data.h) cuts it into
 *   windows of at most L inputs; nonoverlapping = stride L (every window scores all its
 *   positions), sliding = stride S < L (after the first window, only the last S positions
 *   of each window are scored, so they see >= L - S tokens of context). Every target is
 *   scored exactly once. Unscored positions get target -1 (the loss op's ignore index).
 *   The model runs in inference mode: no tape, no backward buffers, attention streamed
 *   over key blocks, so memory grows linearly in L.
 *
 *   loss = (sum of per-token NLL in nats) / tokens,  ppl = exp(loss),
 *   bpb  = (sum NLL) / ln 2 / (UTF-8 bytes of the scored target tokens).
 *
 * Per-position buckets: the mean loss of the scored targets by their position p within
 * the window (p = tokens of context - 1). Linear: `buckets` equal-width buckets over
 * [0, L), bucket b = floor(p * buckets / L). Log2: bucket 0 = {0}, bucket k = [2^(k-1), 2^k)
 * (clipped to L). Token counts and NLL sums of the buckets add up to the totals exactly. */
#ifndef ST_EVAL_H
#define ST_EVAL_H

#include <stdio.h>
#include "st_common.h"
#include "st_model.h"
#include "st_data.h"
#include "st_train.h"
#include "st_transform.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ST_BUCKETS_LINEAR = 0, ST_BUCKETS_LOG2 = 1 };

#define ST_EVAL_DEFAULT_BATCH_TOKENS 8192

typedef struct st_eval_opts {
    int64_t batch_tokens;       /* windows of the full length L go B = max(1, batch_tokens / L)
                                 * per forward; 0 -> ST_EVAL_DEFAULT_BATCH_TOKENS */
    int buckets;                /* linear: number of buckets (0 = none, capped at L);
                                 * log2: any value > 0 turns them on */
    int bucket_scale;           /* ST_BUCKETS_LINEAR | ST_BUCKETS_LOG2 */
    const double *token_bytes;  /* optional: UTF-8 bytes of each token id (vocab_size
                                 * entries): exact bits per byte */
    double bytes_per_token;     /* else, when > 0: average bytes per token for bpb */
    size_t arena_limit;         /* activation memory cap, 0 -> 80% of physical memory */
    int reset_peak_rss;         /* reset the kernel's peak-RSS mark first (Linux
                                 * /proc/self/clear_refs), so peak_rss is this run's */
    double progress_every;      /* > 0: progress; on a terminal the live line (st_live),
                                 * else a log line every progress_every seconds; 0: none */
    struct st_mm *mm;           /* matmul precision backend (st_matmul.h), not owned; NULL:
                                 * fp32. For bf16 the model's bf16 shadow must be enabled */
    struct st_dist *dist;       /* ranks sharing the windows (st_dist.h); NULL: one
                                 * process. Forward batch k runs on rank k mod N; the
                                 * per-token losses are then summed in the one-process
                                 * order, so every figure is the one-process figure */
    int attn_stats;             /* 1: each layer's and head's attention statistics over every
                                 * query row (st_eval_result.attn; nonoverlapping windows) */
    int64_t attn_far;           /* keys at distance >= attn_far count as far (the training length) */
} st_eval_opts;

void st_eval_opts_default(st_eval_opts *o);

typedef struct st_eval_bucket {
    int64_t lo, hi;             /* window positions [lo, hi) */
    int64_t tokens;             /* targets scored at those positions */
    double nll;                 /* their summed loss (nats) */
} st_eval_bucket;

typedef struct st_eval_result {
    int64_t length;             /* L */
    int64_t stride;             /* S (== L: nonoverlapping) */
    int64_t windows;            /* windows evaluated */
    int64_t batch;              /* windows per forward */
    int64_t tokens;             /* targets scored (n - 1 for the whole stream) */
    int64_t forward_tokens;     /* inputs run through the model (> tokens when sliding) */
    double nll;                 /* summed loss, nats */
    double loss;                /* nll / tokens */
    double ppl;                 /* exp(loss) */
    double bytes;               /* UTF-8 bytes of the scored targets (0: unknown) */
    double bpb;                 /* nll / ln2 / bytes; NAN when bytes are unknown */
    double seconds;
    double tokens_per_s;        /* scored tokens per second */
    size_t peak_rss;            /* bytes (VmHWM) */
    size_t arena_bytes;         /* activation arena high water */
    int n_buckets;
    st_eval_bucket *buckets;    /* malloc'd (NULL when n_buckets == 0) */
    /* opts.attn_stats: (attn_layers, attn_heads, ST_ATTN_NSTATS) means over the query rows
     * of every window (st_ops.h: mean key distance, entropy, first-key mass, far mass) */
    int attn_layers, attn_heads;
    int64_t attn_far;
    double *attn;               /* malloc'd, NULL: none */
} st_eval_result;

/* Evaluate `tokens` (n) with windows of length L and stride `stride` (L: nonoverlapping;
 * 1 <= stride < L: sliding). Errors: ST_ERR_CONFIG for bad L/stride or a learned-position
 * model asked for windows longer than model.max_len, ST_ERR_DATA for fewer than 2 tokens
 * or a token id outside the vocabulary, ST_ERR_MEMORY when the activations of one forward
 * exceed the arena limit, ST_ERR_NUMERIC for a non-finite token loss. */
int st_eval_run(st_model *m, const int32_t *tokens, int64_t n, int64_t L, int64_t stride,
                const st_eval_opts *opts, st_eval_result *res, st_error *e);
void st_eval_result_free(st_eval_result *r);

/* Bucket layout for length L (same rule as st_eval_run); returns the count and writes
 * lo/hi (zeroed counts) to out when out != NULL. */
int st_eval_bucket_layout(int64_t L, int buckets, int scale, st_eval_bucket *out);

/* ---------------------------------------------------- a checkpoint at many lengths ---- */
/* What to evaluate. Fields left at -1 (n_lengths 0) take the run config's eval section. */
typedef struct st_eval_plan {
    int n_lengths;              /* 0 -> cfg.eval.lengths */
    int64_t lengths[ST_EVAL_MAX_LENGTHS];
    int split;                  /* ST_SPLIT_VALID | ST_SPLIT_TEST, -1 -> cfg */
    int mode;                   /* ST_EVAL_NONOVERLAPPING | ST_EVAL_SLIDING, -1 -> cfg */
    int64_t stride;             /* sliding: scored tokens per window; 0 -> L/2; -1 -> cfg */
    int64_t max_tokens;         /* tokens of the split used (0 = all), -1 -> cfg */
    int buckets;                /* -1 -> cfg */
    int precision;              /* ST_PREC_* of the matmuls, -1 -> cfg train.precision */
    /* inference-time transform (st_transform.h); -1 -> cfg's eval.transform, ... */
    int transform;
    double transform_scale;
    int64_t sinks, window, clip, block;
    int positions;              /* ST_SINK_POS_*, -1 -> cfg */
    int from_config;            /* 1: the transform fields are a config's keys (a sweep point),
                                 * not a command line's flags: messages name the keys */
    st_eval_opts opts;          /* batch_tokens, bucket_scale, arena_limit, progress */
    /* Outside data (`stretch eval --data`): NULL = the run's own split. A text file is
     * tokenized whole; a WikiText directory gives the file of `split`. The run's
     * tokenizer comes from tokenizer_path (byte-level runs need none). */
    const char *data_path;
    const char *tokenizer_path;
} st_eval_plan;

void st_eval_plan_default(st_eval_plan *p);
/* Fill the plan's -1 fields from the run's eval section (cfg) and check it (ST_ERR_CONFIG
 * naming src). st_eval_checkpoint does this itself; `stretch eval` also calls it up front
 * to know the default report's name before evaluating. */
int st_eval_plan_resolve(st_eval_plan *p, const st_run_config *cfg, const char *src, st_error *e);
/* The transform fields the plan leaves at -1 from a run's eval section (part of
 * st_eval_plan_resolve). A transform given in the plan other than the config's brings its
 * own defaults: the config's scale and clip were set for the config's transform. */
void st_eval_plan_resolve_transform(st_eval_plan *p, const st_eval_config *c);
/* The inference-time transform of a resolved plan, for a run trained at train_len. */
st_transform st_eval_plan_transform(const st_eval_plan *p, int64_t train_len);
/* The transform a command's options (the transform fields >= 0 of `given`, the rest -1)
 * and a run's eval section give together, as st_eval_plan_resolve merges them; its cli
 * marks the fields the options gave (for st_transform_check's messages). */
st_transform st_eval_merge_transform(const st_eval_plan *given, const st_run_config *cfg);

/* One evaluation length: its result, or why it could not be evaluated. */
typedef struct st_eval_row {
    int status;                 /* ST_OK or the error code */
    char error[ST_PATH_BUF + 1024];
    double xf_scale;            /* the transform's scale s at this length (1: none) */
    st_eval_result r;
} st_eval_row;

typedef struct st_eval_report {
    char source[ST_PATH_MAX + 1];      /* what the user named (run dir or checkpoint) */
    char checkpoint[ST_PATH_BUF];      /* the checkpoint file evaluated */
    int64_t step;               /* its training step */
    st_run_config cfg;          /* the run's config */
    size_t n_params;
    int split, mode, unit;      /* resolved plan, dataset unit (ST_UNIT_*) */
    int64_t stride_arg;         /* sliding stride as requested (0 = L/2) */
    int64_t split_tokens;       /* tokens of the split evaluated (after max_tokens) */
    int64_t split_total;        /* tokens of the whole split (more than split_tokens when
                                 * max_tokens cut it short) */
    int bytes_exact;            /* bpb from per-token byte lengths (1) or an average (0) */
    double bytes_per_token;     /* average over the split (byte units) */
    double entropy_rate;        /* synthetic corpus: ideal loss (nats/token), else 0 */
    int threads;
    int precision;              /* ST_PREC_* the matmuls ran in */
    char matmul[256];           /* the backend that ran them (st_mm_describe: native or emulated bf16) */
    int buckets, bucket_scale;
    /* plan.data_path given: what was evaluated instead of the run's split */
    uint64_t data_hash;         /* the run's own dataset: st_dataset_hash now (0: --data) */
    int data_changed;           /* 1: differs from the hash the checkpoint recorded, 0: the same,
                                 * -1: no record (checkpoints before format 2, --data) */
    int external;               /* 1 when the tokens came from --data */
    st_text_data data;          /* its path, size, CRC32 and <unk> counts (tokens freed) */
    st_transform xf;            /* the inference-time transform applied (kind none, window 0: none) */
    int n;                      /* rows */
    st_eval_row rows[ST_EVAL_MAX_LENGTHS];
} st_eval_report;

/* Load the model and dataset of a run dir or checkpoint and evaluate every length of the
 * plan. A length that cannot be evaluated (e.g. beyond a learned-position table, or out of
 * memory) gets an error row and the rest go on. Returns ST_OK when at least one length was
 * evaluated; otherwise the first row's code (or the load error: ST_ERR_IO / ST_ERR_CHECKPOINT
 * naming the path, ST_ERR_CONFIG for a bad plan). */
int st_eval_checkpoint(const char *path_or_run_dir, const st_eval_plan *plan,
                       st_eval_report *rep, st_error *e);
void st_eval_report_free(st_eval_report *rep);
const char *st_eval_mode_name(int mode);     /* "nonoverlapping" | "sliding" */
const char *st_eval_split_name(int split);   /* "train" | "valid" | "test" */
const char *st_unit_name(int unit);          /* "word" | "byte" | "token" */
/* The table printed by `stretch eval`. */
void st_eval_report_print(const st_eval_report *rep, FILE *f);
/* JSON of the whole report (malloc'd string), and a file writer (atomic rename). */
char *st_eval_report_json(const st_eval_report *rep);
/* The report's "model" object of a run's config: pos, its variant, attn_scale, the trained
 * scaling ("yarn4"), the block keys that differ from the GPT-2 block (st_block_departures),
 * sizes and parameter count; every
 * report that names a model (eval, eval --task, passkey) carries the same one. */
struct cJSON *st_eval_model_json(const st_run_config *c, size_t n_params);
int st_eval_report_save(const st_eval_report *rep, const char *path, st_error *e);

/* ------------------------------------------------------------------- sweeps ---- */
/* Sweep file (strict; every error names the file and key path, ST_ERR_CONFIG):
 *   {"base": "configs/x.json" | {inline config},
 *    "grid": {"model.pos": ["alibi", "sinusoidal"], "train.seed": [1, 2], ...},
 *    "eval": {"lengths": [...], "split": "valid", "mode": "nonoverlapping", "stride": 0,
 *             "max_tokens": 0, "batch_tokens": 8192, "buckets": 16, "bucket_scale": "linear"},
 *    "out": "runs/sweep_x"}
 * The grid's cartesian product (first key slowest) gives one run per point, in
 * OUT/<name> with the name built from the override values. */
typedef struct st_sweep_opts {
    const char *out;            /* overrides the file's "out" (NULL: keep) */
    int threads;                /* 0: the runs' train.threads */
    int quiet;                  /* no training progress output */
    int dry_run;                /* expand and validate only: list the runs */
    int jobs;                   /* runs side by side on this machine (0: the file's "jobs",
                                 * else 1); with jobs > 1 and no threads, each run gets
                                 * cores / jobs threads */
    struct st_dist *dist;       /* MPI ranks (st_dist.h): point i runs on rank i mod N;
                                 * rank 0 writes the tables. NULL: one process */
} st_sweep_opts;

/* Run (or resume) every point, evaluate it, and write OUT/results.{csv,json,md}. Finished
 * points (OUT/<name>/sweep_done.json matching the point's config and eval plan) are
 * skipped; interrupted trainings resume from their latest checkpoint. Returns ST_OK when
 * every point finished; ST_ERR_INTERRUPTED after a signal; else the first error. */
int st_sweep_run(const char *sweep_file, const st_sweep_opts *opts, st_error *e);

/* ---- passkey retrieval at long lengths (src/eval/passkey_eval.c) ----
 * For each length n and depth d, `trials` instances (st_passkey_build over the text's
 * tokens at random offsets, a random key each) go through the model's KV cache: the n
 * prompt tokens as one prefill, then the answer with teacher forcing. A trial is correct
 * when every answer token is the argmax of its logits (what greedy decoding would
 * produce: the two coincide until the first miss); loss is the mean -log p of the answer
 * tokens. The model's inference transform (m->xf) applies, its scale set per length. */
typedef struct st_passkey_cell {
    int64_t len;            /* prompt tokens n */
    double depth;
    int trials, correct;    /* correct <= trials; -1 trials: not evaluated (status) */
    int64_t digits_correct; /* answer tokens that were the argmax (teacher forced), of trials x digits */
    double loss;            /* mean nats per answer token */
    int status;             /* ST_OK, or why the length could not be run (e.g. max_len) */
} st_passkey_cell;
/* cells: n_len * n_depth, row-major by length. Fails (ST_ERR_DATA) when the text is
 * shorter than the longest instance's filler, ST_ERR_CONFIG for trials < 1 (so a cell with
 * status ST_OK ran its trials: the status alone says which cells were evaluated). mm: the products' backend (NULL: fp32; a
 * bf16 one also keeps the KV cache in bf16, the model's bf16 shadow enabled by the caller). */
/* The instance of (length n, depth index and value, trial) that st_passkey_eval runs:
 * out[0, n + digits), the filler at an offset and the key both functions of (seed, n,
 * depth index, trial). */
void st_passkey_eval_instance(const st_passkey *pk, const int32_t *text, int64_t n_text, int64_t n, int depth_index,
                              double depth, int trial, uint64_t seed, int32_t *out);
int st_passkey_eval(st_model *m, struct st_mm *mm, const st_passkey *pk, const int32_t *text, int64_t n_text, const int64_t *lengths,
                    int n_len, const double *depths, int n_depth, int trials, uint64_t seed, st_passkey_cell *cells,
                    st_error *e);

/* st_passkey_eval on a run's own text: the passkey pieces encoded by the run's tokenizer
 * (data->pk_digits digits), the instances cut from split `split` of the run's data
 * (st_dataset_load of data, cfg_file naming it in messages). *digits: the key's length. */
int st_passkey_eval_text(st_model *m, struct st_mm *mm, const st_tokenizer *tok, const st_data_config *data, const char *cfg_file,
                         int split, const int64_t *lengths, int n_len, const double *depths, int n_depth, int trials,
                         uint64_t seed, st_passkey_cell *cells, int *digits, st_error *e);

/* -log softmax(z)[t] over V logits, and *hit = whether t is the argmax (ties: the lowest
 * index wins, as greedy decoding picks). */
double st_answer_nll(const float *z, int V, int t, int *hit);

/* The task evaluation's defaults, for `eval --task` and a sweep's eval section alike
 * (docs/tasks.md): multiples of the largest training size, needle depths by quarters, and
 * instances per cell. Initializers, so each use is `const double x[] = ST_TASK_EVAL_SCALES`. */
#define ST_TASK_EVAL_SCALES {1, 2, 4, 8, 16, 32}
#define ST_TASK_EVAL_DEPTHS {0.0, 0.25, 0.5, 0.75, 1.0}
#define ST_TASK_EVAL_TRIALS 50

/* ---- task accuracy by size (src/eval/task_eval.c, docs/tasks.md) ----
 * For each size s (and depth d for needle tasks), `trials` instances of the run's task
 * go through the KV cache: the prompt up to the first answer token as one prefill, then
 * token by token with the true tokens fed (teacher forcing). An instance is correct when
 * every answer token is the argmax of the logits before it (greedy decoding's verdict);
 * loss is the mean -log p per answer token. Instances are functions of (seed, size, depth
 * index, trial). The model's inference transform (m->xf) applies, its scale set from the
 * longest instance of the size. A size past the method's max_len is a row with status
 * ST_ERR_CONFIG. */
typedef struct st_task_cell {
    int64_t size;           /* instance size (the task's unit) */
    double depth;           /* needle depth; -1: drawn per instance (tasks without a depth grid) */
    int64_t tokens;         /* tokens of the longest instance run */
    int trials, correct;    /* exact matches */
    int64_t ans_tokens, ans_correct;   /* answer tokens scored, and right */
    double loss;            /* mean nats per answer token */
    int status;             /* ST_OK, or why the size could not be run */
} st_task_cell;
/* cells: n_sizes * n_depth, row-major by size (n_depth = 1, depth ignored, for tasks
 * without a depth grid). Fails only on memory; a size that cannot run is its rows' status.
 * show (NULL: none): the first n_show instances of each cell are written to it, a line
 * each: the prompt, the expected answer and the model's argmax at each answer position
 * (teacher-forced, as the accuracy counts it: equal to greedy decoding up to the first
 * wrong token, marked "*"), exact or wrong, with the answer tokens right. */
int st_task_eval(st_model *m, struct st_mm *mm, const st_task_data *td, const int64_t *sizes, int n_sizes, const double *depths,
                 int n_depth, int trials, uint64_t seed, st_task_cell *cells, int n_show, FILE *show, st_error *e);
/* The instance st_task_eval runs for (size, depth index and value, trial): tok, ans of
 * the task's length(size); returns its token count. */
int64_t st_task_eval_instance(const st_task_data *td, int64_t size, int depth_index, double depth, int trial,
                              uint64_t seed, int32_t *tok, uint8_t *ans);

#ifdef __cplusplus
}
#endif
#endif
