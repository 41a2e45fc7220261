/* st_tensor.h - the tensor core: arena, tensors and views, the autograd tape, and the
 * flat parameter block.
 *
 * Memory owners:
 *   - st_params owns every parameter, its gradient and the optimizer moments, each as one
 *     contiguous float block in the same layout (zero-grad, AdamW, checkpoints are flat loops).
 *   - st_arena owns activations, saved-for-backward buffers, activation gradients and the
 *     tape. It is reset every step; nothing in it is freed singly.
 *
 * Autograd: ops run eagerly. When the context is in grad mode and an input requires a
 * gradient, the op appends a node (its backward function plus what it saved) to the tape.
 * st_backward() seeds d(loss)=1 and walks the tape in reverse. Backward kernels
 * ACCUMULATE (+=) into input gradients. In inference mode (grad off) no node is recorded
 * and no backward buffer is allocated.
 *
 * Shapes: up to 4 dims, row-major, strides in elements. Ops expect contiguous inputs
 * unless they say otherwise; st_contiguous() makes a contiguous copy of a view. */
#ifndef ST_TENSOR_H
#define ST_TENSOR_H

#include "st_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- arena ---- */
/* A bump allocator made of chunks. The first chunk has `capacity` bytes; when it is full
 * further chunks are malloc'd while the total stays under `limit`. On reset, if more than
 * one chunk was used, the arena is rebuilt as one chunk of the high-water size, so after
 * the first step a training loop allocates nothing. An allocation that would pass `limit`
 * fails and records the bytes needed and available (st_arena_overflow_msg). */
typedef struct st_arena_chunk st_arena_chunk;
typedef struct st_arena {
    st_arena_chunk *head;   /* current chunk (list, newest first) */
    size_t capacity;        /* size of the first chunk */
    size_t limit;           /* hard cap on the sum of chunk sizes */
    size_t used;            /* bytes handed out since the last reset (incl. alignment) */
    size_t high_water;      /* max of used over the arena's life */
    size_t total;           /* bytes currently held in chunks */
    size_t fail_need;       /* bytes the failing request needed (0: no failure) */
    size_t fail_avail;      /* bytes that were available then */
    int overflowed;         /* an allocation failed since the last reset */
} st_arena;

int st_arena_init(st_arena *a, size_t capacity, size_t limit, st_error *e);
void *st_arena_alloc(st_arena *a, size_t bytes);        /* 64-byte aligned, NULL on overflow */
void st_arena_reset(st_arena *a);
void st_arena_free(st_arena *a);
int st_arena_chunks(const st_arena *a);                 /* chunks held (1 in steady state) */
/* Marks: st_arena_rewind(a, m) frees everything allocated after st_arena_mark_get(a)
 * returned m (inference forwards reuse one layer's worth of memory this way). */
typedef struct st_arena_mark { st_arena_chunk *chunk; size_t chunk_used, used; } st_arena_mark;
st_arena_mark st_arena_mark_get(const st_arena *a);
void st_arena_rewind(st_arena *a, st_arena_mark m);
/* "arena overflow: needed N bytes, available M bytes (limit L)" */
void st_arena_overflow_msg(const st_arena *a, char *buf, size_t n);

/* --------------------------------------------------------------- tensor ---- */
typedef struct st_tensor st_tensor;
struct st_tensor {
    float *data;
    float *grad;            /* NULL until a gradient is accumulated (or param grad block) */
    int ndim;
    int64_t shape[4];
    int64_t stride[4];      /* in elements */
    int requires_grad;      /* gradients flow into this tensor */
    st_tensor *base;        /* views: the tensor that owns data/grad; NULL if owner */
    int64_t offset;         /* views: element offset of data within base */
    const char *name;       /* parameters and debugging */
    const uint16_t *bf16;   /* data rounded to bf16, else NULL: a parameter's shadow
                             * (st_params_enable_bf16, refreshed once per update), or with
                             * the bf16 backend the copy an op wrote with its output for the
                             * linear it feeds (LayerNorm, RMSNorm, GELU/GLU, merge_heads);
                             * reshapes (st_view) share it, strided views drop it */
    const uint64_t *bf16_ver; /* with a shadow: its version, bumped by every refresh (the
                             * bf16 backend re-packs a weight when it changes); else NULL */
};

int64_t st_numel(const st_tensor *t);
int st_is_contiguous(const st_tensor *t);
int st_same_shape(const st_tensor *a, const st_tensor *b);
/* Fill shape/stride for a contiguous tensor. */
void st_set_shape(st_tensor *t, int ndim, const int64_t *shape);

/* ----------------------------------------------------------- tape / ctx ---- */
typedef struct st_ctx st_ctx;
typedef struct st_node st_node;
typedef void (*st_backward_fn)(st_ctx *ctx, st_node *node);

#define ST_MAX_INPUTS 4
struct st_node {
    const char *op;                 /* op name, for errors and profiles */
    st_backward_fn backward;
    st_tensor *out;
    st_tensor *in[ST_MAX_INPUTS];   /* NULL-padded */
    void *saved;                    /* op-specific struct in the arena */
};

struct st_ctx {
    st_arena *arena;
    int grad;               /* 1: grad mode (record tape), 0: inference mode */
    int train;              /* 1: dropout active */
    st_node *nodes;
    int n_nodes, cap_nodes;
    int failed;             /* an allocation failed; ops return NULL from then on */
    size_t backward_bytes;  /* bytes allocated for backward (saved state + grads) */
    struct st_mm *mm;   /* matmul precision backend (st_matmul.h), not owned; NULL: fp32 */
    struct st_profile *prof;  /* per-op timing (st_profile.h), not owned; NULL: off */
    /* inference: when set, the next attention calls (st_attention, st_attention_clipped)
     * also write per query row the ST_ATTN_NSTATS statistics of its attention (st_ops.h)
     * into attn_stats, (B,H,Tq,ST_ATTN_NSTATS); keys at distance >= attn_far count as far.
     * The caller sets and clears it around one call; not owned. */
    float *attn_stats;
    int64_t attn_far;
};

/* ctx does not own the arena. cap_nodes: max tape length per step. */
int st_ctx_init(st_ctx *ctx, st_arena *arena, int cap_nodes, st_error *e);
void st_ctx_free(st_ctx *ctx);
/* Start a new step: reset the arena, clear the tape, set modes. */
void st_ctx_begin(st_ctx *ctx, int grad, int train);
/* Report the failure (arena overflow / tape full) into e; returns its code or ST_OK. */
int st_ctx_check(st_ctx *ctx, st_error *e);

/* New contiguous tensor from the arena (uninitialised / zeroed). NULL on overflow (and
 * ctx->failed is set). */
st_tensor *st_new(st_ctx *ctx, int ndim, const int64_t *shape);
st_tensor *st_zeros(st_ctx *ctx, int ndim, const int64_t *shape);
st_tensor *st_new2(st_ctx *ctx, int64_t d0, int64_t d1);
st_tensor *st_new3(st_ctx *ctx, int64_t d0, int64_t d1, int64_t d2);
st_tensor *st_new4(st_ctx *ctx, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
/* Wrap external memory (no grad). */
st_tensor *st_wrap(st_ctx *ctx, float *data, int ndim, const int64_t *shape);
/* Scratch memory from the arena for an op's saved state; counted in backward_bytes when
 * `for_backward` is set. NULL on overflow. */
void *st_ctx_alloc(st_ctx *ctx, size_t bytes, int for_backward);

/* Views (no copy). reshape requires a contiguous input; transpose swaps two dims. The
 * view shares data and gradient with its base. */
st_tensor *st_view(st_ctx *ctx, st_tensor *t, int ndim, const int64_t *shape);
st_tensor *st_transpose(st_ctx *ctx, st_tensor *t, int d0, int d1);
/* Contiguous copy (an op with backward); returns t itself if already contiguous. */
st_tensor *st_contiguous(st_ctx *ctx, st_tensor *t);

/* The gradient buffer of t, allocated zeroed from the arena on first use (for a view, the
 * base's buffer at the view's offset). Only valid for contiguous t. */
float *st_grad(st_ctx *ctx, st_tensor *t);

/* Should an op with these inputs record a node? (grad mode and any input requires grad) */
int st_needs_grad(const st_ctx *ctx, st_tensor *a, st_tensor *b, st_tensor *c, st_tensor *d);
/* Append a node; marks out->requires_grad. Returns the node (NULL if the tape is full). */
st_node *st_record(st_ctx *ctx, const char *op, st_backward_fn fn, st_tensor *out,
                   st_tensor *a, st_tensor *b, st_tensor *c, st_tensor *d, void *saved);

/* Seed d(loss)/d(loss) = seed (usually 1) on a scalar and run the tape in reverse. */
int st_backward(st_ctx *ctx, st_tensor *loss, float seed, st_error *e);

/* ------------------------------------------------------- parameter block ---- */
enum { ST_INIT_ZERO = 0, ST_INIT_ONE, ST_INIT_NORMAL, ST_INIT_CONST };

typedef struct st_param_info {
    char name[96];          /* PyTorch-style name, e.g. "blocks.0.attn.qkv.weight" */
    int ndim;
    int64_t shape[4];
    size_t offset;          /* element offset into the blocks */
    size_t numel;
    int decay;              /* weight decay outside the train.optimizer.no_decay groups
                               (st_param_decays: for biases, norms, embeddings the option decides) */
    int is_embedding;       /* embeddings (decay exclusion can target them) */
    int init;               /* ST_INIT_* */
    float init_value;       /* std for NORMAL, value for CONST */
} st_param_info;

typedef struct st_params {
    float *data, *grad, *m, *v;   /* four blocks of n floats, same layout; grad, m and v are
                                     NULL when weights_only (inference: eval, generate, export) */
    uint16_t *bf16;               /* NULL, or n bf16 values: data rounded (precision bf16) */
    uint64_t *bf16_ver;           /* with bf16: the shadow's version, + 1 per refresh */
    int weights_only;             /* set before finalize: allocate data only */
    size_t n;
    st_param_info *info;
    st_tensor *tensors;           /* tensors[i] views data/grad of info[i] */
    int count, cap;
    int finalized;
} st_params;

void st_params_init(st_params *p);
/* Declare a parameter (before finalize). Returns its index. */
int st_params_add(st_params *p, const char *name, int ndim, const int64_t *shape,
                  int decay, int init, float init_value);
/* Allocate the blocks and point the tensors into them (all zeroed): data, grad, m, v, or
 * data alone when weights_only (then the tensors have no grad and no requires_grad). A
 * further per-parameter block (a bf16 shadow, ...) belongs here too, with its owner flag. */
int st_params_finalize(st_params *p, st_error *e);
/* Initialise values by each param's rule, drawing from rng in declaration order. */
void st_params_init_values(st_params *p, st_rng *rng);
st_tensor *st_param(st_params *p, int index);
int st_params_find(const st_params *p, const char *name);   /* -1 if absent */
void st_params_zero_grad(st_params *p);
/* Precision bf16: a shadow block holding data rounded to bf16, in the same layout, which
 * the matmuls read instead of rounding a weight at every use. Enable allocates it (2 bytes
 * per parameter), points every tensor's bf16 at its slice and fills it; refresh re-rounds
 * it and must follow every change of data (optimizer step, checkpoint or weight load),
 * and bumps the shadow's version (tensors' bf16_ver), by which the bf16 backend knows a
 * weight it keeps packed in its own layout has changed. Refresh is a no-op when no shadow
 * is enabled. */
int st_params_enable_bf16(st_params *p, st_error *e);
void st_params_refresh_bf16(st_params *p);
void st_params_free(st_params *p);

#ifdef __cplusplus
}
#endif
#endif
