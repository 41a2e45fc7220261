/* st_train.h - JSON run configs, optimisers, learning-rate schedules, checkpoints and the
 * training loop (`stretch train`).
 *
 * A run config has four sections: model (st_model_config), data (st_data_config), train
 * and eval. It is read strictly from JSON: unknown keys, wrong types and out-of-range
 * values are errors naming the file and the key path; configs/README.md lists every key.
 *
 * Run directory layout (written by st_train; src/train/rundir.c):
 *   RUN_DIR/config.json          the fully resolved config (loads back to the same config)
 *   RUN_DIR/tokenizer.json       the dataset's tokenizer (when it has one)
 *   RUN_DIR/metrics.jsonl        one JSON object per logged step and per validation
 *   RUN_DIR/checkpoints/step_NNNNNNNN.ckpt   the last train.keep_last checkpoints
 *   RUN_DIR/checkpoints/best.ckpt            lowest validation loss so far
 *   RUN_DIR/checkpoints/latest               one line: file name of the newest checkpoint
 *   RUN_DIR/init_from.json       a run started from another's weights (train.init_from):
 *                                the checkpoint it took, pinned by size and CRC32
 *
 * Checkpoint file (little-endian, fixed-width fields):
 *   header (64 bytes): magic "STCKPT\0\0", u32 version, u32 header bytes, u64 payload bytes
 *   (raw), u64 compressed bytes, u64 step, u64 config hash, u64 param floats, u32 crc32 of
 *   the compressed payload followed by header bytes 0..55, u32 reserved (0);
 *   payload (zlib): resolved config JSON, training state, parameter table, then the
 *   parameter, m and v blocks. Written to a temp file in the same directory, fsync'ed and
 *   renamed, then the directory is fsync'ed. */
#ifndef ST_TRAIN_H
#define ST_TRAIN_H

#include "st_common.h"
#include "st_tensor.h"
#include "st_model.h"
#include "st_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- config ---- */
enum { ST_OPT_ADAMW = 0, ST_OPT_SGD = 1 };
enum { ST_SCHED_CONSTANT = 0, ST_SCHED_COSINE = 1, ST_SCHED_INV_SQRT = 2, ST_SCHED_LINEAR = 3, ST_SCHED_WSD = 4 };
/* train.optimizer.no_decay: bit mask of parameter groups excluded from weight decay */
enum { ST_NODECAY_BIAS = 1, ST_NODECAY_NORM = 2, ST_NODECAY_EMBEDDING = 4 };
enum { ST_NONFINITE_ERROR = 0, ST_NONFINITE_SKIP = 1 };
enum { ST_EVAL_NONOVERLAPPING = 0, ST_EVAL_SLIDING = 1 };
#define ST_EVAL_MAX_LENGTHS 32

typedef struct st_optim_config {
    int name;               /* ST_OPT_* */
    float lr;               /* peak learning rate */
    float beta1, beta2, eps;/* AdamW */
    float weight_decay;     /* decoupled: p -= lr * wd * p (AdamW and SGD) */
    float momentum;         /* SGD: buf = momentum * buf + g; 0 = plain SGD */
    int no_decay;           /* ST_NODECAY_* mask */
} st_optim_config;

typedef struct st_schedule_config {
    int kind;               /* ST_SCHED_* */
    int64_t warmup;         /* linear warmup steps */
    float min_lr_ratio;     /* cosine, linear, wsd: final lr = min_lr_ratio * lr */
    double decay_frac;      /* wsd: the last round(decay_frac * steps) updates decay
                             * (st_lr_wsd_decay; a double, so 0.905 x 100 rounds as typed) */
} st_schedule_config;

typedef struct st_train_config {
    uint64_t seed;          /* model init, dropout stream, batch windows */
    int batch_size;         /* sequences per micro-batch (B) */
    int seq_len;            /* training length (T) */
    int64_t steps;          /* optimizer updates */
    int grad_accum;         /* micro-batches per update */
    int64_t random_positions; /* N > seq_len: each micro-batch's rows take a sorted random
                               * subset of [0, N) as positions (Ruoss et al. 2023), shared by
                               * its batch rows; 0 = off. Methods reading absolute indices
                               * only; evaluation uses the natural positions 0..n-1. */
    int abacus_max_k;       /* model.abacus: each micro-batch's digits take the rows k + 1..
                             * for k drawn from {0..abacus_max_k} (McLeish et al.'s max_k);
                             * 0 = no offset. Evaluation uses k = 0. */
    st_optim_config optim;
    st_schedule_config sched;
    float clip_norm;        /* global gradient-norm clip, 0 = off */
    int64_t eval_every;     /* steps between validations (0: only at the end) */
    int eval_batches;       /* validation batches of (B, T) (0: no validation) */
    int patience;           /* stop once this many validations in a row did not lower the
                             * best validation loss (0: off; counted from the state's
                             * best_step, so a resume counts as the uninterrupted run) */
    int64_t checkpoint_every; /* steps between checkpoints (0: only at the end) */
    int keep_last;          /* step checkpoints kept (best.ckpt is extra) */
    int threads;            /* OpenMP + BLAS threads, 0 = all cores */
    int precision;          /* ST_PREC_* (st_matmul.h): the large matmuls in fp32 or bf16 */
    int nonfinite;          /* ST_NONFINITE_* */
    int nonfinite_limit;    /* skip: stop (exit 7) after this many updates in a row were
                             * skipped, counted from the start or resume; 0 = never */
    int64_t log_every;      /* steps between log lines / metrics records */
    double max_seconds;     /* stop with a checkpoint after this much wall time, 0 = off */
    char init_from[ST_PATH_MAX + 1]; /* safetensors to initialise from ("" = none) */
} st_train_config;

/* Why eval.max_tokens (and eval --max-tokens, a sweep's eval.max_tokens) is never 1, the
 * one value its range [0, 1e13] lets through that no evaluation can use. */
#define ST_EVAL_ONE_TOKEN "1 token has no target to score (0: the whole split, else at least 2)"

typedef struct st_eval_config {
    int n_lengths;
    int64_t lengths[ST_EVAL_MAX_LENGTHS]; /* evaluation lengths L */
    int split;              /* ST_SPLIT_VALID | ST_SPLIT_TEST */
    int mode;               /* ST_EVAL_* */
    int64_t stride;         /* sliding: scored tokens per window, 0 = L/2 */
    int64_t max_tokens;     /* tokens of the split evaluated, 0 = all; never 1 (ST_EVAL_ONE_TOKEN) */
    int buckets;            /* per-position loss buckets (0 = none) */
    /* inference-time transform (include/st_transform.h) */
    int transform;          /* st_xf_kind */
    double transform_scale; /* s, 0 = n / train.seq_len */
    int64_t sinks;          /* attention sinks (needs window) */
    int64_t window;         /* attention window, 0 = none */
    int64_t clip;           /* rerope: clip window w, 0 = train.seq_len / 2 */
    int64_t blockwise;      /* blockwise causal attention: block length, 0 = none */
    int positions;          /* ST_SINK_POS_*: the sinks at their text or cache positions */
    int attn_stats;         /* 1: attention statistics per layer and head (nonoverlapping) */
} st_eval_config;

/* eval.positions: where attention sinks sit (st_transform.cache_positions) */
enum { ST_SINK_POS_TEXT = 0, ST_SINK_POS_CACHE = 1 };

typedef struct st_run_config {
    st_model_config model;  /* model.vocab_size 0 = take the dataset's */
    st_data_config data;    /* data.path is absolute after loading */
    st_train_config train;
    st_eval_config eval;
    char file[ST_PATH_MAX + 1];    /* where the config came from (for messages) */
} st_run_config;

/* Every default: the key table's (src/train/config_schema.c); keys without one are zero
 * or empty, filled from the data or training length when a config is loaded. */
void st_run_config_default(st_run_config *c);
/* Read JSON from `path`, apply `--set`-style assignments ("section.key=value"; value is a
 * JSON scalar/array when it parses as one, else a string), fill derived defaults and
 * validate. Errors (ST_ERR_CONFIG; ST_ERR_IO when unreadable) name the file and key path,
 * or "--set section.key" for an assignment. */
int st_run_config_load(const char *path, const char *const *sets, int n_sets,
                       st_run_config *c, st_error *e);
/* Same from a buffer; `file` names it in messages. */
int st_run_config_parse(const char *json, size_t len, const char *file,
                        const char *const *sets, int n_sets, st_run_config *c, st_error *e);
/* JSON text[0..len) of `file` (a run config, a sweep file) parsed strictly: a BOM is
 * skipped; a NUL byte, what st_json_strict_check refuses and cJSON's syntax errors give
 * NULL and "FILE: invalid JSON at line L, column C (byte B)[: why], near '...'" (or
 * "unexpected end of file at ..."), ST_ERR_CONFIG (ST_ERR_MEMORY when out of memory).
 * Run configs and sweep files read and report alike. */
struct cJSON *st_json_parse_text(const char *file, const char *text, size_t len, st_error *e);
/* Apply one "section.key=value" assignment to a config (not validated across keys). */
int st_run_config_set(st_run_config *c, const char *assignment, st_error *e);
/* Fill derived defaults (eval.lengths from train.seq_len) and check every range and
 * cross-key constraint. */
int st_run_config_validate(st_run_config *c, st_error *e);
/* Keys set away from their defaults that this run does not read: another position
 * method's (model.alibi_heads in a rope run; st_pos_key_reader), and the optimizer's and
 * schedule's that the chosen ones do not (momentum under adamw, betas and eps under sgd,
 * min_lr_ratio under constant and inv_sqrt), as "key value, ..." in buf; returns their
 * number. They are allowed (a sweep over model.pos, optimizer.name or schedule.kind
 * shares one base) and named when a training starts, so a config's reader knows what
 * ran. */
int st_run_config_unread(const st_run_config *c, char *buf, size_t n);
/* Canonical JSON of the whole config (section NULL) or one section ("model", ...):
 * fixed key order, floats in the shortest form that reads back to the same float.
 * malloc'd; NULL on allocation failure. */
char *st_run_config_to_json(const st_run_config *c, const char *section);
int st_run_config_save(const st_run_config *c, const char *path, st_error *e);
/* The same JSON into an open file (path names it in errors): export writes it as one of a set. */
int st_run_config_write(const st_run_config *c, FILE *f, const char *path, st_error *e);
/* 64-bit hash of the canonical JSON. */
uint64_t st_run_config_hash(const st_run_config *c);
/* Compare one section key by key: 0 when equal, else 1 with every key that differs in buf,
 * "train.seed: 1 vs 5, train.optimizer.lr: 0.003 vs 0.001" (", and N more" when buf is
 * full). */
int st_run_config_diff(const st_run_config *a, const st_run_config *b, const char *section,
                       char *buf, size_t n);
/* Which assignment caused a config error. st_config_names_key: 1 when msg names the key
 * path of assignment "KEY=VALUE" as a whole path (not train.steps_x or x.train.steps).
 * st_config_blame: the error of a config loaded from `file` with assignments `sets`,
 * whose message names the keys of some of them: it is told as theirs, "FILE: rest" (or
 * "--set rest") becoming "WHO: rest" with WHO = `flags` (a command's own, may be NULL)
 * and then each named assignment as `label` + "KEY=VALUE" ("--set " for the command line,
 * "" for a sweep point's). `alone`: the error the config gives without `sets` (code 0:
 * none); when it is the same error the assignments did not cause it and stay unnamed.
 * Returns 1 when the message was rewritten. */
int st_config_names_key(const char *msg, const char *assignment);
/* The error of the config at path (or of `text`, named path) with assignments sets into
 * *e (code 0: none): the `alone` of st_config_blame. */
void st_run_config_error(const char *path, const char *text, const char *const *sets, int n_sets, st_error *e);
int st_config_blame(st_error *e, const char *file, const char *const *sets, int n_sets, const char *label,
                    const char *flags, const st_error *alone);
/* Expand a leading "$STRETCH_DATA_DIR" / "${STRETCH_DATA_DIR}" (default "../shared/data")
 * and make a relative path absolute against the current directory. */
int st_resolve_path(const char *in, char *out, size_t n);

/* ---------------------------------------------------------- schedule ---- */
/* Learning rate for update number `step` (1-based):
 *   warmup w: lr * step / w for step <= w (every kind but inv_sqrt);
 *   constant: lr;  cosine: min + (lr - min) * (1 + cos(pi * (step - w) / (steps - w))) / 2;
 *   linear: min + (lr - min) * (1 - (step - w) / (steps - w));
 *   wsd: lr until steps - D, then linear to min at steps (D = st_lr_wsd_decay);
 *   inv_sqrt (fairseq): lr * min(step / w, sqrt(w / step)).
 * min = min_lr_ratio * lr; past steps the decaying kinds stay at min. */
double st_lr_at(const st_train_config *t, int64_t step);
/* wsd: the updates of the final decay, round(decay_frac * steps). */
int64_t st_lr_wsd_decay(const st_train_config *t);

/* --------------------------------------------------------- optimizer ---- */
/* Does weight decay apply to this parameter? For the members of the no_decay groups,
 * exactly when their group is not in the mask (the option decides, whatever info->decay
 * says): bias = 1-d "*.bias", norm = "ln*.weight" (last name component starts with
 * "ln"), embedding = is_embedding (abacus_emb) or a name starting with "tok_emb" / "pos_emb". For
 * every other parameter, info->decay. */
int st_param_decays(const st_param_info *info, int no_decay_mask);

/* Work items: the flat block cut into pieces of at most ST_OPTIM_CHUNK floats, each in
 * one parameter, so updates and norms are parallel loops whose reductions combine in a
 * fixed order (results independent of the thread count). */
#define ST_OPTIM_CHUNK 32768
typedef struct st_optim_item { size_t offset, len; int decay; } st_optim_item;
typedef struct st_optim {
    st_optim_config cfg;
    st_optim_item *items;
    int64_t n_items;
    double *partial;        /* per-item sums for the norm (n_items) */
} st_optim;

int st_optim_init(st_optim *o, const st_optim_config *cfg, const st_params *p, st_error *e);
void st_optim_free(st_optim *o);
/* sqrt(sum g^2) over the gradient block, in double, fixed order. */
double st_grad_norm(st_optim *o, const st_params *p);
/* The clip factor for a gradient of global norm `norm` (PyTorch clip_grad_norm_: max_norm
 * / (norm + 1e-6) when norm > max_norm > 0, else 1). */
float st_clip_factor(double norm, float max_norm);
/* Scale gradients so their global norm is at most max_norm (st_clip_factor). Returns the
 * factor applied. The trainer passes the factor to st_optim_step instead, which reads
 * each gradient scaled: the same values without a pass over the block. */
float st_clip_grad(st_optim *o, st_params *p, double norm, float max_norm);
/* One update with learning rate lr; t = number of this update (1-based, AdamW bias
 * correction); each gradient read as g = fl(grad * gscale) (the clip factor, 1: as it is;
 * bit for bit the update after st_clip_grad). AdamW (Loshchilov & Hutter 2019, PyTorch form):
 *   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * SGD: p *= 1 - lr*wd; buf = momentum*buf + g (buf in m); p -= lr * buf.
 * With a bf16 shadow (st_params_enable_bf16) it is rewritten too and its version bumped:
 * the step is all st_params_refresh_bf16 would do. */
void st_optim_step(st_optim *o, st_params *p, float lr, int64_t t, float gscale);
/* The same update for items [first, end) only, with the moments of those items in m / v
 * at index (parameter offset - base): a ZeRO-1 shard (docs/distributed.md) holds just its
 * items' moments. st_optim_step = all items, p->m / p->v, base 0. Element-wise, so a
 * sharded update gives the bits of the full one. The bf16 shadow is not touched (the
 * caller refreshes it after gathering the shards). */
void st_optim_step_items(st_optim *o, st_params *p, float lr, int64_t t, float gscale, int64_t first,
                         int64_t end, float *m, float *v, size_t base);
/* 1 if every parameter value is finite. */
int st_params_finite(const st_params *p);

/* -------------------------------------------------------- checkpoint ---- */
#define ST_CKPT_VERSION 3   /* 3: + threads and compute; 2: + data_hash; versions 1 and 2 are still read */
typedef struct st_train_state {
    int64_t step;           /* updates done */
    int64_t opt_t;          /* updates applied (skipped non-finite steps excluded) */
    uint64_t loader_draws;  /* training st_loader state */
    st_rng rng;             /* dropout-seed stream */
    double best_val;        /* lowest validation loss (INFINITY: none yet) */
    int64_t best_step;
    double last_val;
    int64_t tokens;         /* training tokens seen */
    double elapsed;         /* training seconds over all sessions */
    int64_t skipped;        /* non-finite steps skipped */
    uint64_t tok_hash;      /* dataset tokenizer hash */
    int64_t world_size;     /* ranks of the run that wrote it (0 in files of older builds
                             * = 1); --resume needs the same count */
    uint64_t data_hash;     /* the training data's tokens (st_dataset_hash) when it was
                             * written; 0 = unknown (version-1 files): a resume on other
                             * data warns */
    /* What the bits of a step depend on beyond the config (version 3; files of older
     * builds read as 0 and "", not recorded): a resume under another count or backend
     * continues, with a warning that the trace is no longer an uninterrupted run's. */
    int64_t threads;        /* OpenMP + OpenBLAS threads in use (st_set_threads), rank 0's */
    char compute[256];      /* the products' backend, e.g. "fp32 (OpenBLAS Haswell)" */
} st_train_state;

/* Write atomically (temp file + fsync + rename + directory fsync). */
int st_checkpoint_save(const char *path, const st_run_config *cfg, const st_params *p,
                       const st_train_state *s, st_error *e);
/* Read and verify a checkpoint (magic, version, sizes, CRC; ST_ERR_CHECKPOINT naming the
 * file). cfg (optional) receives its embedded config. When p is not NULL its layout must
 * match the checkpoint's parameter table and data/m/v are filled (m/v only if with_moments).
 * s is optional. */
int st_checkpoint_load(const char *path, st_run_config *cfg, st_params *p, int with_moments,
                       st_train_state *s, st_error *e);
/* path_or_run_dir: a .ckpt file, or a run dir (its checkpoints/latest, read again while it
 * names a file that does not exist, up to 0.5 s: a training beside deletes old steps; a
 * missing latest gives the newest step file with a warning). Writes the path to out. */
int st_checkpoint_resolve(const char *path_or_run_dir, char *out, size_t n, st_error *e);
/* The training loader of a run at its start (draws 0): the train split, the seed the
 * trainer derives from train.seed, a task's rows, and the check that a task's longest
 * instance fits train.seq_len + 1 (exit 2 naming data.task.max_size). The trainer's loader
 * and the rows `stretch data --config` shows are the same. */
int st_train_loader_init(const st_run_config *c, const st_dataset *ds, st_loader *l, st_error *e);
/* The range of a numeric config key ("eval.buckets"): *lo, *hi, whether lo is exclusive
 * (*xlo) and whether the key takes integers (*integral); 0 when path is no numeric key.
 * Flags that set a key's value use it, so the command line and the config accept the same
 * values (cli_key_arg). */
int st_config_range(const char *path, double *lo, double *hi, int *xlo, int *integral);
/* The step of a run's latest checkpoint (the name checkpoints/latest points to), -1 when
 * it has none: where an interrupted run resumes, without reading the checkpoint. */
int64_t st_run_latest_step(const char *run_dir);
/* 1 when dir holds a `stretch export` (model.safetensors and no checkpoints/): never a
 * run directory, to train into (even with --force), to resume or to extend. */
int st_rundir_is_export(const char *dir);
/* 1 when path is a directory (a run) or a file that starts as a stretch checkpoint, else 0
 * (e.g. a safetensors export): how train.init_from tells its two kinds apart. */
int st_checkpoint_is(const char *path);
/* The CRC32 a checkpoint's header stores (of its contents; every load verifies it): which
 * weights a file holds, read from its first 64 bytes. 0 when path is no checkpoint. */
int st_checkpoint_stored_crc(const char *path, uint32_t *crc);
/* Build the model from a checkpoint's config and load its parameters (for eval, export,
 * generate): the weights only (st_model_init_weights), no gradients or AdamW moments.
 * cfg (optional) receives the run config. Free with st_model_free. */
int st_checkpoint_load_model(const char *path_or_run_dir, st_model *m, st_run_config *cfg,
                             st_error *e);
/* The same, also giving the file read (ckpt, n bytes) and its training state (s); each
 * optional. The file is opened once, so a reader beside a training gets the model, config
 * and state of one checkpoint even when keep_last deletes it meanwhile (a file deleted
 * before the open is looked up again in the run's latest). */
int st_checkpoint_read(const char *path_or_run_dir, char *ckpt, size_t n, st_model *m, st_run_config *cfg,
                       st_train_state *s, st_error *e);

/* ---------------------------------------------------------- training ---- */
typedef struct st_train_opts {
    int resume;             /* continue from RUN_DIR's latest checkpoint */
    int force;              /* replace an existing run in RUN_DIR */
    int64_t stop_after;     /* stop with a checkpoint after this step (0: none); as if
                             * interrupted, but returns ST_OK (tests, staged runs) */
    int quiet;              /* no progress bar / log lines (metrics.jsonl still written) */
    struct st_dist *dist;   /* data-parallel ranks (st_dist.h); NULL: one process.
                             * train.batch_size is per rank: an update sees
                             * batch_size x grad_accum x ranks sequences */
    int zero;               /* ZeRO-1: shard the optimizer moments over the ranks (same
                             * results, 8 bytes x params x (N-1)/N less per rank) */
    const char *occupied_advice; /* what refusing an occupied RUN_DIR tells the user to do;
                             * NULL: stretch train's flags (--resume, --force, --out). A
                             * caller without those flags (a sweep) says what applies */
} st_train_opts;

typedef struct st_train_result {
    int64_t step;           /* last completed step */
    double loss;            /* last step's training loss */
    double val_loss;        /* last validation loss (NAN if none) */
    double best_val;
    double seconds;         /* wall time of this session */
    double tokens_per_s;
    size_t n_params;
    size_t arena_bytes;     /* step arena capacity, sized before the first step */
    size_t arena_high_water;/* most of it any micro-step used */
    int arena_grew;         /* 1 if a step needed more than the initial size */
    int stopped;            /* 0 done, 1 time limit, 2 stop_after, 3 signal, 4 train.patience */
} st_train_result;

/* Train. cfg: a loaded config; may be NULL with resume (RUN_DIR/config.json is used).
 * Returns ST_OK, ST_ERR_INTERRUPTED after SIGINT/SIGTERM (a checkpoint was saved), or an
 * error (ST_ERR_IO for an occupied RUN_DIR without force, ST_ERR_NUMERIC for a non-finite
 * loss or gradient, ...). res is optional. */
int st_train(const st_run_config *cfg, const char *run_dir, const st_train_opts *opts,
             st_train_result *res, st_error *e);

#ifdef __cplusplus
}
#endif
#endif
