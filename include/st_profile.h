/* st_profile.h - where a training step goes, per op (`stretch bench --profile`): forward
 * time of each op name (the wall time since the previous op was recorded on the tape, so
 * an op's own work and any untaped work before it), backward time of each op's backward
 * function, and every st_mm_gemm call's flops and time by phase with the backend's
 * implementation, so a user sees achieved GFLOPS without perf or ONEDNN_VERBOSE; and the
 * same per (op, phase, shape): which op issued a product (forward: the op recorded next
 * on the tape; backward: the node being run), so each large product's rate can be read
 * against the square GEMM rate of the run.
 * Attached to a context (st_ctx.prof) and a matmul backend (st_mm_set_profile); NULL
 * everywhere else, where it costs one pointer test per op. */
#ifndef ST_PROFILE_H
#define ST_PROFILE_H

#include <stdio.h>
#include "st_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_PROF_MAX_OPS 64
typedef struct st_prof_op {
    const char *name;       /* the op name given to st_record (a string constant) */
    double fwd_s, bwd_s;
    int64_t fwd_calls, bwd_calls;
} st_prof_op;

/* The products of one (op, phase, shape): c (M,N) = op(a) (M,K) op(b) (K,N), count of
 * them per call (a batch). */
#define ST_PROF_MAX_GEMMS 64
#define ST_PROF_PENDING 16
typedef struct st_prof_gemm {
    const char *op;         /* the issuing op's name; NULL: not yet known (forward) */
    int phase;              /* 0 forward, 1 backward */
    int ta, tb;             /* transposed operands */
    int64_t M, N, K, count;
    int64_t calls;
    double s, flops;
    char impl[48];
} st_prof_gemm;

typedef struct st_profile {
    st_prof_op ops[ST_PROF_MAX_OPS];
    int n_ops;
    st_prof_gemm gemms[ST_PROF_MAX_GEMMS];
    int n_gemms;
    st_prof_gemm pending[ST_PROF_PENDING];   /* forward products of the op not yet recorded */
    int n_pending;
    const char *bwd_op;     /* the node whose backward is running */
    double mark;            /* wall time of the last recorded op (or of the step's start) */
    int in_backward;        /* gemm calls now belong to the backward phase */
    double gemm_s[2], gemm_flops[2];   /* [0] forward, [1] backward */
    int64_t gemm_calls[2];
    char gemm_impl[96];     /* the last implementation the backend reported */
    double other_s;         /* time outside forward and backward (optimizer), added by the caller */
    int steps;
} st_profile;

void st_profile_init(st_profile *p);
/* A step's forward starts now. */
void st_profile_step(st_profile *p);
/* The tape recorded op `name`: the time since the mark is its forward. */
void st_profile_fwd(st_profile *p, const char *name);
/* op `name`'s backward took s seconds. */
void st_profile_bwd(st_profile *p, const char *name, double s);
/* One st_mm_gemm(_batched) call: count products of (M,N,K), transposes ta/tb, in s
 * seconds, by implementation impl. */
void st_profile_gemm(st_profile *p, int64_t M, int64_t N, int64_t K, int64_t count, int ta, int tb, double s,
                     const char *impl);
/* The table, ops by total time, per step averages, then the matmul summary and the
 * products by op and shape; ref_gflops (> 0): the square GEMM rate of the same run, each
 * product's rate is also given as a share of it. */
void st_profile_print(const st_profile *p, FILE *f, double ref_gflops);

#ifdef __cplusplus
}
#endif
#endif
