/* mpi.c - the MPI transport (built with -DSTRETCH_MPI=ON; OpenMPI or MPICH).
 *
 * Deterministic sum (st_dist_sum_f32/f64): MPI_Allreduce may add the ranks' values in any
 * association (recursive doubling, rings, trees chosen by message size and rank count), so
 * two runs of the same job need not agree in the last bit. Here MPI only moves bytes:
 *   1. reduce-scatter by hand: the buffer is cut into N contiguous chunks, chunk c owned by
 *      rank c; MPI_Alltoallv sends every rank's copy of chunk c to rank c;
 *   2. rank c adds its N copies in rank order, x_0 + x_1 + ... + x_{N-1}, one rounding
 *      per addition;
 *   3. MPI_Allgatherv returns the summed chunks to every rank.
 * Each rank sends and receives 2 (N - 1) / N of the buffer, the same volume as a ring
 * allreduce (docs/distributed.md), and the bits depend only on N and the inputs.
 * Buffers larger than SEGMENT elements go in segments (MPI counts are ints; the scratch
 * stays bounded).
 *
 * Errors: MPI's default handler (MPI_ERRORS_ARE_FATAL) stays: a lost peer ends the whole
 * job through mpirun instead of leaving a rank blocked. */
#include "dist_internal.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define SEGMENT ((size_t)1 << 26)   /* elements per collective round */

typedef struct mpi_impl {
    int rank, size;
    void *scratch;          /* N copies of one chunk */
    size_t scratch_bytes;
    int *counts, *displs, *rcounts, *rdispls;   /* size entries each */
} mpi_impl;

static int grow_scratch(mpi_impl *m, size_t bytes) {
    if (bytes <= m->scratch_bytes) return ST_OK;
    void *p = realloc(m->scratch, bytes);
    if (!p) return ST_ERR_MEMORY;
    m->scratch = p;
    m->scratch_bytes = bytes;
    return ST_OK;
}

/* One segment of n elements of `esize` bytes: chunk c = [c*n/N, (c+1)*n/N). */
static int sum_segment(mpi_impl *m, void *buf, size_t n, size_t esize, MPI_Datatype type,
                       void (*add)(void *acc, const void *x, size_t k)) {
    const int N = m->size, r = m->rank;
    for (int c = 0; c < N; c++) {
        size_t lo = n * (size_t)c / (size_t)N, hi = n * (size_t)(c + 1) / (size_t)N;
        m->counts[c] = (int)(hi - lo);
        m->displs[c] = (int)lo;
    }
    const int mine = m->counts[r];
    if (grow_scratch(m, (size_t)N * (size_t)(mine ? mine : 1) * esize)) return ST_ERR_MEMORY;
    for (int q = 0; q < N; q++) {
        m->rcounts[q] = mine;
        m->rdispls[q] = q * mine;
    }
    if (MPI_Alltoallv(buf, m->counts, m->displs, type, m->scratch, m->rcounts, m->rdispls, type,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        return ST_ERR_GENERIC;
    /* rank order: acc = x_0, then acc += x_1, ..., acc += x_{N-1} */
    char *acc = (char *)buf + (size_t)m->displs[r] * esize;
    memcpy(acc, m->scratch, (size_t)mine * esize);
    for (int q = 1; q < N; q++) add(acc, (char *)m->scratch + (size_t)q * (size_t)mine * esize, (size_t)mine);
    if (MPI_Allgatherv(MPI_IN_PLACE, 0, type, buf, m->counts, m->displs, type, MPI_COMM_WORLD) != MPI_SUCCESS)
        return ST_ERR_GENERIC;
    return ST_OK;
}

static void add_f32(void *acc, const void *x, size_t k) {
    float *a = acc;
    const float *b = x;
    for (size_t i = 0; i < k; i++) a[i] += b[i];
}

static void add_f64(void *acc, const void *x, size_t k) {
    double *a = acc;
    const double *b = x;
    for (size_t i = 0; i < k; i++) a[i] += b[i];
}

static int sum_any(void *impl, void *buf, size_t n, size_t esize, MPI_Datatype type,
                   void (*add)(void *, const void *, size_t)) {
    for (size_t off = 0; off < n; off += SEGMENT) {
        size_t k = n - off < SEGMENT ? n - off : SEGMENT;
        int rc = sum_segment(impl, (char *)buf + off * esize, k, esize, type, add);
        if (rc) return rc;
    }
    return ST_OK;
}

static int mpi_sum_f32(void *impl, float *buf, size_t n) { return sum_any(impl, buf, n, sizeof *buf, MPI_FLOAT, add_f32); }
static int mpi_sum_f64(void *impl, double *buf, size_t n) { return sum_any(impl, buf, n, sizeof *buf, MPI_DOUBLE, add_f64); }

static int mpi_max_i32(void *impl, int32_t *buf, size_t n) {
    (void)impl;
    for (size_t off = 0; off < n; off += SEGMENT) {
        int k = (int)(n - off < SEGMENT ? n - off : SEGMENT);
        if (MPI_Allreduce(MPI_IN_PLACE, buf + off, k, MPI_INT32_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
            return ST_ERR_GENERIC;
    }
    return ST_OK;
}

/* size_t counts/displs (floats) to MPI's ints, in m->counts / m->displs */
static int to_int_counts(mpi_impl *m, const size_t *counts, const size_t *displs) {
    for (int q = 0; q < m->size; q++) {
        if (counts[q] > INT_MAX || displs[q] > INT_MAX) return ST_ERR_MEMORY;
        m->counts[q] = (int)counts[q];
        m->displs[q] = (int)displs[q];
    }
    return ST_OK;
}

static int mpi_allgather(void *impl, float *buf, const size_t *counts, const size_t *displs) {
    mpi_impl *m = impl;
    if (to_int_counts(m, counts, displs)) return ST_ERR_MEMORY;
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, m->counts, m->displs, MPI_FLOAT, MPI_COMM_WORLD) ==
           MPI_SUCCESS ? ST_OK : ST_ERR_GENERIC;
}

static int mpi_gather(void *impl, const float *mine, float *buf, const size_t *counts, const size_t *displs, int root) {
    mpi_impl *m = impl;
    if (to_int_counts(m, counts, displs)) return ST_ERR_MEMORY;
    return MPI_Gatherv(mine, m->counts[m->rank], MPI_FLOAT, buf, m->counts, m->displs, MPI_FLOAT, root,
                       MPI_COMM_WORLD) == MPI_SUCCESS ? ST_OK : ST_ERR_GENERIC;
}

static int mpi_bcast(void *impl, void *buf, size_t bytes, int root) {
    (void)impl;
    for (size_t off = 0; off < bytes; off += SEGMENT) {
        int k = (int)(bytes - off < SEGMENT ? bytes - off : SEGMENT);
        if (MPI_Bcast((char *)buf + off, k, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS) return ST_ERR_GENERIC;
    }
    return ST_OK;
}

static int mpi_barrier(void *impl) {
    (void)impl;
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? ST_OK : ST_ERR_GENERIC;
}

static void mpi_abort(void *impl, int code) {
    (void)impl;
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);   /* not reached */
}

static void mpi_finalize(void *impl) {
    mpi_impl *m = impl;
    if (!m) return;
    MPI_Finalize();
    free(m->scratch);
    free(m->counts);
    free(m);
}

static const st_dist_ops mpi_ops = {
    "mpi", mpi_sum_f32, mpi_sum_f64, mpi_max_i32, mpi_allgather, mpi_gather, mpi_bcast, mpi_barrier, mpi_abort, mpi_finalize,
};

int st_dist_mpi_open(st_dist *d, int *argc, char ***argv, st_error *e) {
    /* FUNNELED: OpenMP threads compute, only the main thread calls MPI */
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return st_fail(e, ST_ERR_GENERIC, "MPI_Init_thread failed");
    mpi_impl *m = calloc(1, sizeof *m);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (m) m->counts = calloc((size_t)size * 4, sizeof *m->counts);
    if (!m || !m->counts) MPI_Abort(MPI_COMM_WORLD, ST_ERR_MEMORY);   /* does not return */
    m->displs = m->counts + size;
    m->rcounts = m->displs + size;
    m->rdispls = m->rcounts + size;
    m->rank = rank;
    m->size = size;
    d->ops = &mpi_ops;
    d->impl = m;
    d->rank = rank;
    d->size = size;
    return ST_OK;
}
