/* embedding.c - token embedding lookup out[i] = table[ids[i]] and its scatter-add backward
 *   dtable[ids[i], :] += dout[i, :]
 * Repeated ids make the backward a reduction. To keep it parallel, race-free and
 * independent of the thread count, each thread owns a slice of the channels and walks
 * all rows in order: every element of dtable is summed in the same order whatever the
 * number of threads. */
#include "ops_internal.h"

#include <omp.h>

typedef struct embedding_saved { int32_t *ids; } embedding_saved;

static void embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C) {
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t i = 0; i < N; i++)
        memcpy(out + i * C, table + (int64_t)ids[i] * C, (size_t)C * sizeof(float));
}

static void embedding_backward_kernel(float *dtable, const float *dout, const int32_t *ids,
                                      int64_t N, int64_t C) {
    #pragma omp parallel if (N * C > OPS_PAR_MIN)
    {
        /* channel slice of this thread, in multiples of 16 floats (one cache line) */
        int nt = omp_get_num_threads(), tid = omp_get_thread_num();
        int64_t lines = (C + 15) / 16;
        int64_t c0 = lines * tid / nt * 16, c1 = lines * (tid + 1) / nt * 16;
        if (c1 > C) c1 = C;
        if (c0 < c1) {
            for (int64_t i = 0; i < N; i++) {
                float *restrict d = dtable + (int64_t)ids[i] * C;
                const float *restrict g = dout + i * C;
                for (int64_t c = c0; c < c1; c++) d[c] += g[c];
            }
        }
    }
}

static void embedding_backward(st_ctx *ctx, st_node *n) {
    const embedding_saved *sv = n->saved;
    st_tensor *table = n->in[0];
    float *dt = st_grad(ctx, table);
    if (!dt) return;
    int64_t C = table->shape[1];
    embedding_backward_kernel(dt, n->out->grad, sv->ids, st_numel(n->out) / C, C);
}

st_tensor *st_embedding(st_ctx *ctx, const int32_t *ids, int64_t B, int64_t T, st_tensor *table) {
    if (!ids || !table) return NULL;
    ST_ASSERT(table->ndim == 2 && st_is_contiguous(table) && B > 0 && T > 0);
    int64_t V = table->shape[0], C = table->shape[1], N = B * T;
    for (int64_t i = 0; i < N; i++) ST_ASSERT(ids[i] >= 0 && ids[i] < V);
    st_tensor *out = st_new3(ctx, B, T, C);
    if (!out) return NULL;
    embedding_forward(out->data, ids, table->data, N, C);
    if (st_needs_grad(ctx, table, NULL, NULL, NULL)) {
        /* the ids belong to the caller's batch buffer: keep a copy for the backward */
        embedding_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        int32_t *cp = sv ? st_ctx_alloc(ctx, (size_t)N * sizeof(int32_t), 1) : NULL;
        if (!cp) return NULL;
        memcpy(cp, ids, (size_t)N * sizeof(int32_t));
        sv->ids = cp;
        if (!st_record(ctx, "embedding", embedding_backward, out, table, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
