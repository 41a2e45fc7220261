/* attention_internal.h - what attention.c and attention_batched.c (grad-mode kernels,
 * the st_attention entry; attention_grad.h is theirs alone), attention_stream.c
 * (streamed online-softmax forward, double reference) and attention_cached.c (new
 * queries against a KV cache) share: the per-head bias tables, the problem description
 * and the streamed kernel driver.
 * Not a public header: nothing outside src/ops/attention*.c includes it.
 *
 * Legend: B batch, H heads, T time (query rows), Tk keys, D head size; q, out are
 * (B,H,T,D) contiguous. */
#ifndef ST_ATTENTION_INTERNAL_H
#define ST_ATTENTION_INTERNAL_H

#include "st_matmul.h"
#include "st_ops.h"
#include "ops_internal.h"

#include <math.h>

/* Query rows per block in grad mode (QBLOCK) and in the streamed kernel (SQBLOCK), and
 * the default keys per streamed block. 64 query rows x 256 keys of scores is 64 KiB: the
 * score block, the (64,D) accumulator and a key/value block stay in L2 while sgemm
 * streams over them. (Streamed 64/128/256 rows x 128/256/512 keys measured within noise
 * of each other at T=8192, D=64; 512 keys was ~10% slower.) */
#define ST_ATTN_QBLOCK 64
#define ST_ATTN_SQBLOCK 64
/* The streamed kernel's block-major (bf16) schedule: query blocks of up to 256 rows, 64,
 * 128 or 256 by the number of (b,h) pairs, all dividing 256 (attention_stream.c says why). */
#define ST_ATTN_SQBLOCK_BATCHED 256
#define ST_ATTN_KBLOCK 256

/* One attention call, with the bias already turned into tables. Self-attention (every
 * caller but the KV cache) has Tk = T, kv_stride = T*D, koff = 0, window = 0,
 * rtab_len = st_attn_bias_len(T, causal), rtab_top = T - 1; st_attn_self() sets that up.
 * New queries against cached keys (attention_cached.c) have T < Tk: query row i sits at
 * key position i + koff, so causal row i sees keys j <= i + koff. Only the streamed
 * kernel reads Tk, kv_stride, koff, window and block; the grad-mode kernels need
 * self-attention. */
typedef struct st_attn_problem {
    const float *q, *k, *v;   /* q (B,H,T,D); k, v: pair bh starts at bh * kv_stride, Tk rows of D */
    const uint16_t *kh, *vh, *k2h; /* streamed kernel, per-task schedule: bf16 k, v (k2) instead
                               * of k, v (k2) (a bf16 KV cache); widened per key block */
    float *out;               /* (B,H,T,D) */
    int64_t B, H, T, D;
    int64_t Tk;               /* keys per (b,h) pair */
    int64_t kv_stride;        /* floats from one pair's keys to the next's */
    int64_t kv_group;         /* > 1: grouped-query keys, pair (b, h) reads key/value head
                               * h / kv_group of H / kv_group (KV cache only); 0, 1: h */
    int64_t koff;             /* key position of query row 0 */
    int64_t window;           /* > 0: row i also sees no key j <= i + koff - window */
    int64_t sinks;            /* with a window: keys j < sinks stay visible (attention sinks) */
    int64_t block;            /* > 0: blockwise causal attention (xPos's BCA): the query at
                               * absolute position P = i + koff + kpos sees no key before
                               * the start of the block preceding its own, (floor(P/block)-1)
                               * block (st_attn_block_lo); 0: none */
    const float *q2, *k2;     /* clipped relative positions (ReRoPE): keys at distance >= clip
                               * score scale * q2_i.k2_j instead (q2 like q, k2 like k); NULL: none */
    int64_t clip;
    const float *sink_bias;   /* NULL, or (H, R, sinks): the bias of query row i on sink key j
                               * (a KV cache whose dropped keys put the sinks further away
                               * than their row distance; sinks at cache positions), R =
                               * sink_rows, or T when 0; rows >= R use row R - 1 (past the
                               * cache cap every row sees the sinks alike); NULL: rtab /
                               * gbias by row */
    int64_t sink_rows;
    float *stats;             /* NULL, or (B,H,T,ST_ATTN_NSTATS): per query row, statistics of its
                               * attention distribution (st_ops.h; streamed kernel only) */
    int64_t stats_far;        /* the distance from which keys count as far (the stats' last) */
    const float *rtab;        /* (H, rtab_len) reversed bias tables, NULL: no distance bias */
    const st_attn_bias *gbias;/* general-form bias (streamed kernel: tiles), NULL: none */
    const float *gtab;        /* grad-mode kernels: gbias materialised (H,T,T), NULL: none */
    const st_attn_cope *cope; /* CoPE term (attention_cope.c), NULL: none */
    const float *gate;        /* FoX's gate term (st_attn_gate): s_ij += c_i - c_j with pair bh's
                               * c of key row p at gate[bh * gate_stride + p]; NULL: none */
    int64_t gate_stride;
    float *cope_z;            /* grad mode: z = scale Q E^T (B,H,T,n_pos), kept for backward */
    float *cope_g;            /* grad mode: gates (B,H,T,T) in P's layout, kept for backward */
    int64_t kpos;             /* absolute position of key row 0 (gbias only) */
    st_mm *mm;                /* streamed kernel: the context's backend; the block-major
                               * schedule when st_attn_batched(mm), else per task */
    const int32_t *doc;       /* NULL, or (B,T): row i of batch row b sees no key j <
                               * doc[b T + i] (per-instance mask; self-attention, causal) */
    int64_t rtab_len;         /* floats per head in rtab */
    int64_t rtab_top;         /* rtab[h*rtab_len + m] = bias(h, rtab_top - m) */
    int causal;
    float scale;              /* resolved, > 0 */
    float p_drop;             /* attention dropout on the probabilities; 0: none */
    uint64_t seed;            /* dropout mask seed */
} st_attn_problem;

/* How a provider's bias reaches the kernels, decided here for every entry point (grad
 * mode, streamed, window, KV cache) so no path can call a hook the provider lacks:
 *   TABLE  distance form (fill): reversed tables of bias(h, i - j)
 *   TILES  general form (fill_block): tiles of bias(h, i, j)
 *   NONE   no bias term, or a provider that is only a content term (st_attn_bias.cope:
 *          CoPE has neither fill function; its term goes through pb.cope; FoX's gate
 *          through pb.gate)
 * A provider with none of fill, fill_block, cope and gate is a method-table defect: the position
 * table is checked when a model config is validated (st_pos_table_check, from
 * st_model_config_validate), and asserted here. */
enum { ST_ATTN_ROUTE_NONE = 0, ST_ATTN_ROUTE_TABLE, ST_ATTN_ROUTE_TILES };
static inline int st_attn_bias_route(const st_attn_bias *b) {
    if (!b) return ST_ATTN_ROUTE_NONE;
    ST_ASSERT(b->fill || b->fill_block || b->cope || b->gate);
    return b->fill ? ST_ATTN_ROUTE_TABLE : b->fill_block ? ST_ATTN_ROUTE_TILES : ST_ATTN_ROUTE_NONE;
}

/* FoX's gate term of provider b (st_attn_bias.gate) into pb: its c and stride, or none. */
static inline void st_attn_take_gate(st_attn_problem *pb, const st_attn_bias *b) {
    pb->gate = b && b->gate ? b->gate->c : NULL;
    pb->gate_stride = b && b->gate ? b->gate->stride : 0;
}

/* Distances a call needs: causal d = i - j in [0, T) (T values), bidirectional
 * d in [-(T-1), T-1] (2T-1 values). The lowest distance is st_attn_bias_d0. */
static inline int64_t st_attn_bias_len(int64_t T, int causal) { return causal ? T : 2 * T - 1; }
static inline int64_t st_attn_bias_d0(int64_t T, int causal) { return causal ? 0 : -(T - 1); }

/* Fill rtab (H, n) with each head's bias in REVERSED distance order,
 *   rtab[h*n + m] = bias(h, d) with d = (T-1) - m,
 * so that for query i the keys j = 0, 1, ... read consecutive entries:
 *   bias(h, i - j) = st_attn_bias_row(rtab_h, T, i)[j].
 * One fill() call per head, from the calling thread. */
void st_attn_bias_tables(const st_attn_bias *bias, int64_t H, int64_t T, int causal, float *rtab);
static inline const float *st_attn_bias_row(const float *rtab_h, int64_t T, int64_t i) {
    return rtab_h + (T - 1 - i);
}

/* The first key row the query at key row p (= i + koff) may see under the problem's
 * blockwise mask (st_attention_block_lo at its absolute position p + kpos, as a row); 0
 * without a mask. Nondecreasing in p, so a query block's first row bounds the whole
 * block's keys. */
static inline int64_t st_attn_block_lo(const st_attn_problem *pb, int64_t p) {
    if (pb->block <= 0) return 0;
    const int64_t lo = st_attention_block_lo(pb->block, p + pb->kpos) - pb->kpos;
    return lo > 0 ? lo : 0;
}

/* The problem of self-attention over (B,H,T,D) inputs: keys are the queries' own rows. */
static inline st_attn_problem st_attn_self(const float *q, const float *k, const float *v, float *out,
                                           int64_t B, int64_t H, int64_t T, int64_t D,
                                           const float *rtab, int causal, float scale,
                                           float p_drop, uint64_t seed) {
    st_attn_problem pb = {
        .q = q, .k = k, .v = v, .out = out, .B = B, .H = H, .T = T, .D = D,
        .Tk = T, .kv_stride = T * D, .koff = 0, .window = 0,
        .rtab = rtab, .rtab_len = st_attn_bias_len(T, causal), .rtab_top = T - 1,
        .causal = causal, .scale = scale > 0.0f ? scale : 1.0f / sqrtf((float)D),
        .p_drop = p_drop, .seed = seed,
    };
    return pb;
}

/* Dropout keep factor for probability p: 1/(1-p); p >= 1 drops everything (factor 0). */
static inline float st_attn_keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }
/* Dropout decision for element (b,h,i,j): dropped when st_hash_uniform(seed, index) < p
 * with index the flat (B,H,T,T) position, so the mask is the same in every kernel and
 * thread layout (st_hash64 is inline, so the mask loops vectorise). */
static inline int st_attn_dropped(uint64_t seed, int64_t bh, int64_t T, int64_t i, int64_t j, float p) {
    const uint64_t idx = ((uint64_t)bh * (uint64_t)T + (uint64_t)i) * (uint64_t)T + (uint64_t)j;
    return (float)(st_hash64(seed, idx) >> 40) * (1.0f / 16777216.0f) < p;
}

/* exp(x) for the softmax (every argument <= 0: a score minus its row max): ops_expf,
 * the vectorisable Cephes expf shared by all ops (src/ops/ops_internal.h). */
static inline float st_attn_exp(float x) { return ops_expf(x); }

/* Row reductions with 16 independent partial results, combined in a fixed order: the
 * compiler turns the lanes into one vector register (a single running max or sum is a
 * serial dependency chain), and the result is the same on every run and thread count. */
#define ST_ATTN_LANES 16
/* The row max; NaN scores are skipped (-inf when every score is NaN or -inf): a NaN
 * next to a finite max still makes the row NaN through exp(NaN - max), and the rare
 * max of -inf is told apart from a fully masked row by st_attn_has_nan. */
static inline float st_attn_max(const float *x, int64_t n) {
    float m[ST_ATTN_LANES];
    for (int k = 0; k < ST_ATTN_LANES; k++) m[k] = -INFINITY;
    int64_t j = 0;
    for (; j + ST_ATTN_LANES <= n; j += ST_ATTN_LANES)
        for (int k = 0; k < ST_ATTN_LANES; k++) m[k] = x[j + k] > m[k] ? x[j + k] : m[k];
    for (int k = 0; j < n; j++, k++) m[k] = x[j] > m[k] ? x[j] : m[k];
    float r = m[0];
    for (int k = 1; k < ST_ATTN_LANES; k++) r = m[k] > r ? m[k] : r;
    return r;
}
/* Any NaN in x[0, n): a row whose max is -inf is fully masked only without one; with
 * one it is NaN, as in PyTorch (zeros would give a broken model a finite loss). Called
 * on the max = -inf path alone, so the hot path pays nothing. */
static inline int st_attn_has_nan(const float *x, int64_t n) {
    int any = 0;
    for (int64_t j = 0; j < n; j++) any |= x[j] != x[j];
    return any;
}
/* x[j] = exp(x[j] - mx) for j < n; returns the sum of the new values. mx >= every x[j]. */
static inline float st_attn_exp_sum(float *x, int64_t n, float mx) {
    float s[ST_ATTN_LANES] = {0};
    int64_t j = 0;
    for (; j + ST_ATTN_LANES <= n; j += ST_ATTN_LANES)
        for (int k = 0; k < ST_ATTN_LANES; k++) {
            x[j + k] = st_attn_exp(x[j + k] - mx);
            s[k] += x[j + k];
        }
    for (int k = 0; j < n; j++, k++) {
        x[j] = st_attn_exp(x[j] - mx);
        s[k] += x[j];
    }
    float r = 0.0f;
    for (int k = 0; k < ST_ATTN_LANES; k++) r += s[k];
    return r;
}
static inline float st_attn_dot(const float *a, const float *b, int64_t n) {
    float s[ST_ATTN_LANES] = {0};
    int64_t j = 0;
    for (; j + ST_ATTN_LANES <= n; j += ST_ATTN_LANES)
        for (int k = 0; k < ST_ATTN_LANES; k++) s[k] += a[j + k] * b[j + k];
    for (int k = 0; j < n; j++, k++) s[k] += a[j] * b[j];
    float r = 0.0f;
    for (int k = 0; k < ST_ATTN_LANES; k++) r += s[k];
    return r;
}

/* The block-major schedule with batched products through the backend: a backend that
 * must run its products outside parallel regions and that attention kernel `kernel`
 * (ST_MM_ATTN_GRAD: the grad-mode forward and backward, which must agree; ST_MM_ATTN_STREAM:
 * the streamed kernel) should use (st_mm_attention); otherwise per pair / per task with
 * cblas_sgemm (fp32, and under a bf16 backend wherever that is the faster of the two). */
static inline int st_attn_batched(const st_mm *mm, int kernel) {
    return !st_mm_parallel_safe(mm) && (st_mm_attention(mm) & kernel);
}

/* Floats of one scratch slot (a thread's, or a (b,h) pair's) the streamed kernel needs for
 * problem pb with key blocks of kblock, from the fields that size it: D, a general bias
 * or clipped scores (gbias, q2: one more (QBLOCK, kblock) tile), CoPE (its z rows and gate
 * sums), bf16 keys (kh, k2h: the widened tiles). Set those before asking. */
size_t st_attn_stream_scratch_floats(const st_attn_problem *pb, int64_t kblock);

/* ---- CoPE (attention_cope.c); notation of st_attn_bias in include/st_ops.h ---- */
/* Z (rows, n_pos) = scale Q (rows, D) E^T: each query's term at the integer positions. */
void st_cope_z(const st_attn_cope *cp, const float *Q, int64_t rows, int64_t D, float scale, float *Z);
/* Keys s[0..n) of one query row, the newest last, hold s0 (scale q.k + bias; -inf where
 * masked). From s[n-1] down to s[0]: *csum += sigmoid(s0_j) (the gate; the running sum of
 * the keys newer than this segment comes in through *csum), then s_j += the interpolated
 * z at p = min(*csum, n_pos - 1). gates: NULL or n floats receiving the gates. */
void st_cope_row_forward(const float *z, int64_t npos, float *s, int64_t n, float *csum, float *gates);
/* Backward of one row (all its keys, the newest last): ds (n) holds dL/ds on entry and
 * dL/ds0 (both paths: the softmax logit and the gate) on return; dz (n_pos) accumulates
 * dL/dz; tmp: n floats of scratch. */
void st_cope_row_backward(const float *z, int64_t npos, const float *gates, int64_t n, float *ds, float *dz,
                          float *tmp);
/* dQ (rows, D) += scale dZ E;  dE (n_pos, D) += scale dZ^T Q. */
void st_cope_z_backward(const st_attn_cope *cp, const float *dZ, const float *Q, int64_t rows, int64_t D,
                        float scale, float *dq, float *de);
/* Streamed forward over all (b, h, query block) tasks with `nthreads` OpenMP threads;
 * scratch holds st_attn_stream_slots(pb, nthreads) * st_attn_stream_scratch_floats(pb,
 * kblock) floats: one block per thread (per-task schedule), or one per (b,h) pair
 * (block-major schedule of a bf16 backend, pb->mm). */
int64_t st_attn_stream_slots(const st_attn_problem *pb, int nthreads);
void st_attn_stream_run(const st_attn_problem *pb, int64_t kblock, float *scratch, int nthreads);

#endif
