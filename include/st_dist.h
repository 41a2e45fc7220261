/* st_dist.h - the process-group transport behind data-parallel training, sharded
 * evaluation and sweeps spread over ranks (docs/distributed.md).
 *
 * A transport is a table of functions (st_dist_ops) chosen once at start-up by
 * st_dist_init: "none" (one process: every collective is the identity) or "mpi" (built
 * with -DSTRETCH_MPI=ON and launched by mpirun). Training, evaluation and sweeps call the
 * st_dist_* wrappers below and never test which transport they run on.
 *
 * Determinism: st_dist_sum_f32/f64 add the ranks' buffers in rank order,
 *   out[i] = ((x_0[i] + x_1[i]) + x_2[i]) + ... + x_{N-1}[i]
 * with one rounding per addition, on every rank the same bits, whatever the network,
 * message sizes or MPI's choice of collective algorithm (MPI_Allreduce guarantees none of
 * this, so the mpi transport moves bytes with MPI and does the arithmetic itself). */
#ifndef ST_DIST_H
#define ST_DIST_H

#include "st_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct st_dist_ops {
    const char *name;                                       /* "none" | "mpi" */
    /* element-wise sum over ranks in rank order, result on every rank (in place) */
    int (*sum_f32)(void *impl, float *buf, size_t n);
    int (*sum_f64)(void *impl, double *buf, size_t n);
    /* element-wise maximum over ranks (exact in any order), in place */
    int (*max_i32)(void *impl, int32_t *buf, size_t n);
    /* buf holds N consecutive pieces, piece q = [displs[q], displs[q] + counts[q]) floats,
     * rank q owning piece q. allgather: every rank gets every piece (in place). gather:
     * only root does (buf may be NULL on the others, which send `mine`) */
    int (*allgather_f32)(void *impl, float *buf, const size_t *counts, const size_t *displs);
    int (*gather_f32)(void *impl, const float *mine, float *buf, const size_t *counts, const size_t *displs,
                      int root);
    /* copy `bytes` of root's buffer to every rank */
    int (*bcast)(void *impl, void *buf, size_t bytes, int root);
    int (*barrier)(void *impl);
    /* kill every rank now (a failure the others cannot learn about): exit code `code` */
    void (*abort)(void *impl, int code);   /* does not return */
    void (*finalize)(void *impl);
} st_dist_ops;

typedef struct st_dist {
    const st_dist_ops *ops;
    void *impl;                 /* the transport's own state */
    int rank, size;
    double comm_seconds;        /* wall time spent inside st_dist_sum_f32 (gradients) */
    int64_t comm_calls;
    int64_t comm_bytes;         /* bytes of the buffers summed by st_dist_sum_f32 */
    int agreed;                 /* an error was agreed by every rank (st_dist_agree) */
} st_dist;

/* Choose the transport: "mpi" when an MPI launcher started this process (it sets
 * OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK) and this build has MPI; "none" otherwise.
 * A build without MPI started by mpirun with more than one process is an error
 * (ST_ERR_CONFIG): silently running N independent copies would write the same run
 * directory N times. */
int st_dist_init(st_dist *d, int *argc, char ***argv, st_error *e);
/* The single-process transport (no MPI, no environment inspection). */
void st_dist_init_none(st_dist *d);
/* 1 if this build has the mpi transport. */
int st_dist_have_mpi(void);
void st_dist_finalize(st_dist *d);

/* Wrappers (d may be NULL: one process). Return ST_OK or ST_ERR_GENERIC on a transport
 * failure (the mpi transport aborts the job on communication errors instead). */
int st_dist_sum_f32(st_dist *d, float *buf, size_t n);
int st_dist_sum_f64(st_dist *d, double *buf, size_t n);
int st_dist_max_i32(st_dist *d, int32_t *buf, size_t n);
int st_dist_allgather_f32(st_dist *d, float *buf, const size_t *counts, const size_t *displs);
int st_dist_gather_f32(st_dist *d, const float *mine, float *buf, const size_t *counts, const size_t *displs,
                       int root);
int st_dist_bcast(st_dist *d, void *buf, size_t bytes, int root);
int st_dist_barrier(st_dist *d);
static inline int st_dist_rank(const st_dist *d) { return d ? d->rank : 0; }
static inline int st_dist_size(const st_dist *d) { return d ? d->size : 1; }

/* Agree on a status: every rank passes its own rc (ST_OK or an error) and gets the
 * largest one of any rank, so all ranks leave a collective loop together instead of one
 * rank waiting forever for a partner that returned early. When another rank failed and
 * this one did not, e gets "rank R stopped ..." (R unknown: "another rank"). */
int st_dist_agree(st_dist *d, int rc, st_error *e);

/* End of a command on this rank: finalize the transport and return rc. An error the
 * ranks did not agree on (d->agreed == 0: this rank failed alone, e.g. a config file
 * missing on its machine) aborts every rank with exit code rc instead, rather than leave
 * the others blocked in their next collective. */
int st_dist_exit(st_dist *d, int rc);

#ifdef __cplusplus
}
#endif
#endif
