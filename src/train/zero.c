/* zero.c - ZeRO-1 (Rajbhandari et al. 2020, stage 1): each of the N data-parallel ranks
 * keeps the optimizer moments of 1/N of the parameters and updates only those.
 *
 * Per step, after the gradient sum (every rank holds the full summed gradient, so the
 * global norm and the clip are computed as without sharding):
 *   rank r applies AdamW/SGD to its optimizer items [item_lo, item_hi), floats [lo, hi),
 *   with its own moments; then the updated parameter shards are all-gathered.
 * The update is element-wise, so the parameters are bit-identical to the unsharded run
 * (tests/mpi_train.sh compares the traces). Memory: the moments take 8 bytes x params / N
 * per rank instead of 8 bytes x params; the all-gather adds (N-1)/N x 4 bytes x params
 * received per step. Checkpoints keep the full format: rank 0 gathers the moments into
 * temporary full blocks while it writes (transient, rank 0 only), and a resumed run
 * shards the moments again, so a checkpoint does not depend on the sharding. */
#define _GNU_SOURCE
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

void st_zero_free(st_zero *z) {
    st_aligned_free(z->m);
    st_aligned_free(z->v);
    free(z->counts);
    memset(z, 0, sizeof *z);
}

int st_zero_init(st_zero *z, st_dist *d, const st_optim *o, st_params *p, st_error *e) {
    memset(z, 0, sizeof *z);
    const int N = st_dist_size(d), r = st_dist_rank(d);
    z->counts = calloc((size_t)N * 2, sizeof *z->counts);
    if (!z->counts) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    z->displs = z->counts + N;
    /* contiguous runs of optimizer items: the shards tile the whole parameter block */
    for (int q = 0; q < N; q++) {
        int64_t a = o->n_items * q / N, b = o->n_items * (q + 1) / N;
        size_t lo = q == 0 ? 0 : (a < o->n_items ? o->items[a].offset : p->n);
        size_t hi = q == N - 1 ? p->n : (b < o->n_items ? o->items[b].offset : p->n);
        z->displs[q] = lo;
        z->counts[q] = hi - lo;
        if (q == r) { z->item_lo = a; z->item_hi = b; z->lo = lo; z->hi = hi; }
    }
    size_t n = z->hi - z->lo, bytes = (n ? n : 1) * sizeof(float);
    z->m = st_aligned_alloc(bytes, e);
    z->v = z->m ? st_aligned_alloc(bytes, e) : NULL;
    if (!z->v) { st_zero_free(z); return ST_ERR_MEMORY; }
    /* this rank's part of the (initial or resumed) full moments, then drop the full blocks */
    memcpy(z->m, p->m + z->lo, n * sizeof(float));
    memcpy(z->v, p->v + z->lo, n * sizeof(float));
    st_aligned_free(p->m);
    st_aligned_free(p->v);
    p->m = p->v = NULL;
    z->on = 1;
    return ST_OK;
}

int st_zero_step(st_zero *z, st_dist *d, st_optim *o, st_params *p, float lr, int64_t t, float gscale) {
    st_optim_step_items(o, p, lr, t, gscale, z->item_lo, z->item_hi, z->m, z->v, z->lo);
    return st_dist_allgather_f32(d, p->data, z->counts, z->displs);
}

int st_zero_gather(st_zero *z, st_dist *d, st_params *p, st_error *e) {
    int rc = ST_OK;
    if (st_dist_rank(d) == 0) {
        p->m = st_aligned_alloc(p->n * sizeof(float), e);
        p->v = p->m ? st_aligned_alloc(p->n * sizeof(float), e) : NULL;
        if (!p->v) rc = ST_ERR_MEMORY;
    }
    if ((rc = st_dist_agree(d, rc, e))) { st_zero_release(z, d, p); return rc; }
    if (st_dist_gather_f32(d, z->m, p->m, z->counts, z->displs, 0) ||
        st_dist_gather_f32(d, z->v, p->v, z->counts, z->displs, 0)) {
        st_zero_release(z, d, p);
        return st_fail(e, ST_ERR_GENERIC, "gathering the optimizer moments failed");
    }
    return ST_OK;
}

void st_zero_release(st_zero *z, st_dist *d, st_params *p) {
    (void)z; (void)d;
    st_aligned_free(p->m);
    st_aligned_free(p->v);
    p->m = p->v = NULL;
}
