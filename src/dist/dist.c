/* dist.c - choosing the transport at start-up, and the wrappers every caller uses.
 *
 * The only place that knows which transports this build has (ST_HAVE_MPI, set by CMake's
 * STRETCH_MPI option); the rest of stretch sees an st_dist and its table of functions. */
#include "dist_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_dist_have_mpi(void) {
#ifdef ST_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

void st_dist_init_none(st_dist *d) {
    memset(d, 0, sizeof *d);
    d->ops = &st_dist_none_ops;
    d->rank = 0;
    d->size = 1;
}

/* World size announced by an MPI launcher (OpenMPI, MPICH/Hydra, PMIx), 0 when none, -1
 * when the variable is not a positive integer (*var names it). */
static int launcher_size(const char **var) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        *var = vars[i];
        char *end;
        errno = 0;
        const long n = strtol(v, &end, 10);
        return *end || errno || n < 1 || n > INT32_MAX ? -1 : (int)n;
    }
    *var = "PMIX_RANK";
    return getenv("PMIX_RANK") ? 1 : 0;
}

#ifdef ST_HAVE_MPI
/* A launcher's world size that MPI did not give this process: the variable set by hand,
 * or a launcher of another MPI than the one linked (each process then initialises as a
 * world of its own, a singleton). The processes would train as independent copies, so
 * refuse. Only the variables that are the world size count: MPI_LOCALNRANKS is one
 * node's share, and SLURM_NTASKS is set in a whole allocation, where one process is a
 * legitimate job. */
static int check_world(st_dist *d, const char *var, int launched, st_error *e) {
    if (launched <= 0 || d->size == launched || (strcmp(var, "OMPI_COMM_WORLD_SIZE") && strcmp(var, "PMI_SIZE")))
        return ST_OK;
    st_dist_finalize(d);
    st_dist_init_none(d);
    return st_fail(e, ST_ERR_CONFIG, "%s=%d says this is one of %d MPI processes, but MPI made it a world of %d: "
                   "the processes would train as independent copies. Start it with the launcher of the MPI this "
                   "stretch is built with (mpirun -np %d ...), or unset %s", var, launched, launched, d->size,
                   launched, var);
}
#endif

int st_dist_init(st_dist *d, int *argc, char ***argv, st_error *e) {
    st_dist_init_none(d);
    const char *var = NULL;
    const int launched = launcher_size(&var);
    if (!launched) return ST_OK;
#ifdef ST_HAVE_MPI
    int rc = st_dist_mpi_open(d, argc, argv, e);
    return rc ? rc : check_world(d, var, launched, e);
#else
    (void)argc; (void)argv;
    if (launched == 1) return ST_OK;   /* mpirun -np 1: one process is exactly that */
    if (launched < 0)
        return st_fail(e, ST_ERR_CONFIG, "started by an MPI launcher (%s='%s', not a process count) but this stretch "
                       "was built without MPI; rebuild with -DSTRETCH_MPI=ON or run without mpirun", var, getenv(var));
    return st_fail(e, ST_ERR_CONFIG, "this stretch was built without MPI (STRETCH_MPI=OFF or no MPI found at "
                   "configure time) but was started by an MPI launcher with %d processes: they would run %d "
                   "independent copies. Rebuild with -DSTRETCH_MPI=ON (Debian: apt-get install libopenmpi-dev "
                   "openmpi-bin), or run without mpirun", launched, launched);
#endif
}

void st_dist_finalize(st_dist *d) {
    if (d && d->ops) d->ops->finalize(d->impl);
}

int st_dist_exit(st_dist *d, int rc) {
    if (rc && d && d->size > 1 && !d->agreed) {
        fflush(stdout);
        fflush(stderr);
        d->ops->abort(d->impl, rc);
    }
    st_dist_finalize(d);
    return rc;
}

int st_dist_sum_f32(st_dist *d, float *buf, size_t n) {
    if (!d || d->size == 1) return ST_OK;
    double t0 = st_time();
    int rc = d->ops->sum_f32(d->impl, buf, n);
    d->comm_seconds += st_time() - t0;
    d->comm_calls++;
    d->comm_bytes += (int64_t)(n * sizeof *buf);
    return rc;
}

int st_dist_sum_f64(st_dist *d, double *buf, size_t n) {
    return !d || d->size == 1 ? ST_OK : d->ops->sum_f64(d->impl, buf, n);
}

int st_dist_max_i32(st_dist *d, int32_t *buf, size_t n) {
    return !d || d->size == 1 ? ST_OK : d->ops->max_i32(d->impl, buf, n);
}

int st_dist_allgather_f32(st_dist *d, float *buf, const size_t *counts, const size_t *displs) {
    return !d || d->size == 1 ? ST_OK : d->ops->allgather_f32(d->impl, buf, counts, displs);
}

int st_dist_gather_f32(st_dist *d, const float *mine, float *buf, const size_t *counts, const size_t *displs,
                       int root) {
    if (!d || d->size == 1) return st_dist_none_ops.gather_f32(NULL, mine, buf, counts, displs, root);
    return d->ops->gather_f32(d->impl, mine, buf, counts, displs, root);
}

int st_dist_bcast(st_dist *d, void *buf, size_t bytes, int root) {
    return !d || d->size == 1 ? ST_OK : d->ops->bcast(d->impl, buf, bytes, root);
}

int st_dist_barrier(st_dist *d) {
    return !d || d->size == 1 ? ST_OK : d->ops->barrier(d->impl);
}

int st_dist_agree(st_dist *d, int rc, st_error *e) {
    if (!d || d->size == 1) return rc;
    /* slot 0: the largest error code; slot 1: the lowest failing rank (as -rank, so the
     * maximum picks the lowest) */
    int32_t v[2] = {rc, rc ? -d->rank : -d->size};
    if (st_dist_max_i32(d, v, 2)) return st_fail(e, ST_ERR_GENERIC, "rank %d: the transport failed", d->rank);
    if (v[0] == ST_OK) return ST_OK;
    d->agreed = 1;
    if (rc == ST_OK)
        st_fail(e, v[0], "stopped because rank %d failed (exit %d; its message is in its output)", -v[1], v[0]);
    return rc ? rc : v[0];
}
