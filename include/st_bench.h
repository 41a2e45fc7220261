/* st_bench.h - the speed and memory benchmark behind `stretch bench`.
 *
 * One run measures, in this order and in one process:
 *   1. a GEMM peak in the run's precision (fp32: OpenBLAS sgemm; bf16: oneDNN's bf16 x
 *      bf16 -> fp32 matmul on operands rounded once up front):
 *      C = A B with square matrices (default 2048^3), repeated, and
 *      once more after every timed training step; the best rate of all is the MFU
 *      denominator ("what this BLAS can do on these threads now"), the median of the
 *      interleaved runs a second one that saw the same machine load as the steps;
 *   2. training: warmup steps, then timed steps, each split into forward (st_model_loss),
 *      backward (st_backward) and optimiser (grad norm, clip and AdamW via st_optim_*, then
 *      zero-grad). tokens/s = B*T / median step time;
 *      MFU = (6N + 6 L T d) * tokens/s / sgemm peak  (N = parameter count);
 *   3. evaluation in inference mode (st_model_loss, no tape) at several lengths L with
 *      batch B_eval: tokens/s and the peak RSS of that phase.
 * Peak RSS per phase: VmHWM is reset (/proc/self/clear_refs, "5") before each phase, so
 * each figure is the high-water mark of that phase alone (weights stay resident).
 * Inputs are uniform random token ids from the seed: speed does not depend on the text.
 *
 * BLAS kernels: OpenBLAS reads OPENBLAS_CORETYPE once, when the library loads, so the
 * benchmark cannot change it in-process; `stretch bench --coretype NAME` re-executes the
 * binary with the variable set (src/cli/cmd_bench.c). The result records the core name
 * OpenBLAS actually chose and the thread counts. */
#ifndef ST_BENCH_H
#define ST_BENCH_H

#include "st_common.h"
#include "st_profile.h"
#include "st_model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_BENCH_MAX_EVAL 8

typedef struct st_bench_config {
    char preset[16];        /* tiny | S | M | G (informational once resolved) */
    st_model_config model;  /* vocab_size, n_layers, d_model, n_heads, pos, ... */
    int64_t B, T;           /* training batch and length */
    int steps, warmup;      /* timed and untimed training steps (steps 0: no training) */
    float lr, clip_norm;    /* AdamW lr (constant), global-norm clip (0: none) */
    int n_eval;             /* evaluation lengths (0: no evaluation) */
    int64_t eval_lengths[ST_BENCH_MAX_EVAL];
    int64_t eval_B;         /* sequences per evaluation forward */
    int eval_reps;          /* timed forwards per length (after one untimed) */
    int sgemm_n, sgemm_reps;/* peak measurement (sgemm_reps 0: skip, MFU not reported) */
    int threads;            /* OpenMP + BLAS threads, 0 = all cores */
    int precision;          /* ST_PREC_* of the model's matmuls and of the GEMM peak */
    uint64_t seed;
    int profile;            /* 1: per-op table of the timed steps (st_profile.h) */
    int decode_tokens;      /* KV-cache decoding: tokens timed one by one (0: no decode bench) */
    int64_t decode_context; /* ... after a prefill of this many tokens (0: T) */
} st_bench_config;

typedef struct st_bench_eval {
    int64_t L, B;
    double seconds;         /* median forward time */
    double tokens_per_s;
    double loss;            /* mean NLL of the random tokens (sanity: ~log V) */
    size_t peak_rss;        /* bytes, this phase */
    size_t arena_bytes;     /* arena high-water of one forward */
} st_bench_eval;

typedef struct st_bench_result {
    st_blas_info blas;
    char coretype_env[64];  /* OPENBLAS_CORETYPE as set ("" = unset) */
    char wait_policy[32];   /* OMP_WAIT_POLICY as set ("" = unset) */
    char matmul[192];       /* the precision backend (st_mm_describe): ISA, native or not */
    char gemm_impl[96];     /* the kernel of the GEMM peak (cblas_sgemm, oneDNN's name) */
    /* GEMM n^3 of the run's precision (named sgemm for fp32 and in the JSON):
     * sgemm_reps runs up front, and one after every timed training step
     * ("interleaved": the same machine load as the steps) */
    double sgemm_gflops;        /* best of every run: the MFU denominator */
    double sgemm_gflops_median; /* median of the up-front runs */
    double sgemm_inter_gflops;  /* median of the interleaved runs (0: none) */
    double sgemm_cpu_gflops;    /* best flops per CPU-second (CPU time of all threads) */
    size_t n_params;
    double flops_per_token; /* 6N + 6 L T d */
    /* training, medians over the timed steps (seconds per step) */
    double fwd_s, bwd_s, opt_s, step_s;
    double step_mean_s;
    double step_cpu_s;      /* median CPU seconds (all threads) per step */
    double tokens_per_s;
    double mfu;             /* flops_per_token * tokens/s / sgemm_gflops */
    double mfu_inter;       /* ... / sgemm_inter_gflops (same load as the steps) */
    double cpu_eff;         /* model flops per CPU-second / sgemm flops per CPU-second:
                             * the fraction of the BLAS limit per unit of CPU time, which
                             * other processes on the machine disturb least */
    double loss_first, loss_last;
    size_t train_peak_rss;  /* bytes, training phase */
    size_t train_arena;     /* arena high-water of one step */
    int n_eval;
    st_bench_eval eval[ST_BENCH_MAX_EVAL];
    st_profile profile;     /* config profile = 1: the timed steps, op by op */
    /* KV-cache decoding (st_model_decode, as generate runs it): one prefill of
     * decode_context tokens, then decode_tokens single-token steps */
    int64_t decode_context;
    int decode_tokens;
    double prefill_s, decode_tokens_per_s;
    size_t decode_cache_bytes;
} st_bench_result;

/* Fill c from a preset name (tiny, S, M, G); ST_ERR_CONFIG for an unknown name. The
 * presets are the configurations of issue #7 (docs/performance.md). */
int st_bench_preset(const char *name, st_bench_config *c, st_error *e);
/* Model FLOPs per training token: 6 N + 6 L T d. */
double st_bench_flops_per_token(size_t n_params, const st_model_config *m, int64_t T);
/* Run the benchmark; progress lines go to st_log. */
int st_bench_run(const st_bench_config *c, st_bench_result *r, st_error *e);
/* Human-readable table on f. */
void st_bench_print(const st_bench_config *c, const st_bench_result *r, void *file);
/* JSON object with the config and every figure. */
int st_bench_write_json(const st_bench_config *c, const st_bench_result *r, const char *path,
                        st_error *e);

#ifdef __cplusplus
}
#endif
#endif
