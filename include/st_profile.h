/* st_profile.h - where a training step goes, per op (`stretch bench --profile`): forward
 * time of each op name (the wall time since the previous op was recorded on the tape, so
 * an op's own work and any untaped work before it), backward time of each op's backward
 * function, and every st_mm_gemm call's flops and time by phase with the backend's
 * implementation, so a user sees achieved GFLOPS without perf or ONEDNN_VERBOSE.
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

typedef struct st_profile {
    st_prof_op ops[ST_PROF_MAX_OPS];
    int n_ops;
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
/* One st_mm_gemm(_batched) call: flops (2 M N K per product) in s seconds. */
void st_profile_gemm(st_profile *p, double flops, double s, const char *impl);
/* The table, ops by total time, per step averages, then the matmul summary. */
void st_profile_print(const st_profile *p, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
