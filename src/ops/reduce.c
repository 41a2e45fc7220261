/* reduce.c - sum and mean of all elements to a scalar (shape (1)).
 *   sum:  y = sum_i x_i      dx_i += dy
 *   mean: y = sum_i x_i / n  dx_i += dy / n
 * The sum runs in double over fixed blocks of REDUCE_BLOCK elements that are then added
 * in block order, so the value does not depend on the thread count. */
#include "ops_internal.h"

#define REDUCE_BLOCK 4096

typedef struct reduce_saved { float factor; } reduce_saved;   /* 1 (sum) or 1/n (mean) */

static double reduce_sum(const float *x, int64_t n) {
    int64_t nblk = (n + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
    double total = 0.0;
    #pragma omp parallel if (n > OPS_PAR_MIN)
    {
        /* ordered blocks: each thread sums whole blocks; the ordered section adds them in
         * block order */
        #pragma omp for ordered schedule(static, 1)
        for (int64_t blk = 0; blk < nblk; blk++) {
            int64_t i1 = (blk + 1) * REDUCE_BLOCK < n ? (blk + 1) * REDUCE_BLOCK : n;
            double s = 0.0;
            #pragma omp simd reduction(+:s)
            for (int64_t i = blk * REDUCE_BLOCK; i < i1; i++) s += (double)x[i];
            #pragma omp ordered
            total += s;
        }
    }
    return total;
}

static void reduce_backward(st_ctx *ctx, st_node *n) {
    const reduce_saved *sv = n->saved;
    int64_t cnt = st_numel(n->in[0]);
    float *restrict dx = st_grad(ctx, n->in[0]);
    if (!dx) return;
    float g = n->out->grad[0] * sv->factor;
    #pragma omp parallel for simd schedule(static) if (cnt > OPS_PAR_MIN)
    for (int64_t i = 0; i < cnt; i++) dx[i] += g;
}

static st_tensor *reduce_op(st_ctx *ctx, st_tensor *x, int mean) {
    if (!x) return NULL;
    ST_ASSERT(st_is_contiguous(x));
    int64_t n = st_numel(x);
    st_tensor *out = ops_scalar(ctx);
    if (!out) return NULL;
    double s = reduce_sum(x->data, n);
    out->data[0] = (float)(mean ? s / (double)n : s);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL)) {
        reduce_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->factor = mean ? 1.0f / (float)n : 1.0f;
        if (!st_record(ctx, mean ? "mean" : "sum", reduce_backward, out, x, NULL, NULL, NULL, sv))
            return NULL;
    }
    return out;
}

st_tensor *st_sum(st_ctx *ctx, st_tensor *x) { return reduce_op(ctx, x, 0); }
st_tensor *st_mean(st_ctx *ctx, st_tensor *x) { return reduce_op(ctx, x, 1); }
