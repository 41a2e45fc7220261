/* none.c - the single-process transport: every collective of one rank is the identity. */
#include "dist_internal.h"

#include <stdlib.h>
#include <string.h>

static int none_sum_f32(void *impl, float *buf, size_t n) { (void)impl; (void)buf; (void)n; return ST_OK; }
static int none_sum_f64(void *impl, double *buf, size_t n) { (void)impl; (void)buf; (void)n; return ST_OK; }
static int none_max_i32(void *impl, int32_t *buf, size_t n) { (void)impl; (void)buf; (void)n; return ST_OK; }
static int none_allgather(void *impl, float *buf, const size_t *counts, const size_t *displs) {
    (void)impl; (void)buf; (void)counts; (void)displs;
    return ST_OK;
}
static int none_gather(void *impl, const float *mine, float *buf, const size_t *counts, const size_t *displs, int root) {
    (void)impl; (void)root;
    if (buf && buf + displs[0] != mine) memmove(buf + displs[0], mine, counts[0] * sizeof *buf);
    return ST_OK;
}
static int none_bcast(void *impl, void *buf, size_t bytes, int root) { (void)impl; (void)buf; (void)bytes; (void)root; return ST_OK; }
static int none_barrier(void *impl) { (void)impl; return ST_OK; }
static void none_abort(void *impl, int code) { (void)impl; exit(code); }
static void none_finalize(void *impl) { (void)impl; }

const st_dist_ops st_dist_none_ops = {
    "none", none_sum_f32, none_sum_f64, none_max_i32, none_allgather, none_gather, none_bcast, none_barrier, none_abort, none_finalize,
};
