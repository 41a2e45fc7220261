/* dropout.c - inverted dropout:
 *   y_i = x_i / (1 - p)  if u_i >= p,  else 0,    u_i = hash(seed, i) in [0, 1)
 *   dx_i += dy_i / (1 - p) where kept
 * The mask is a pure function of (seed, element index), so it is the same for any
 * thread count and the backward regenerates it instead of storing it (saves N bytes,
 * costs one cheap hash per element). */
#include "ops_internal.h"

typedef struct dropout_saved { float p; uint64_t seed; } dropout_saved;

/* out = x * keep(i) / (1 - p) (accumulate: out += ...): the forward and the backward are
 * the same masked scaling. */
static void dropout_kernel(float *restrict out, const float *restrict x, int64_t n, float p,
                           uint64_t seed, int accumulate) {
    float scale = 1.0f / (1.0f - p);
    if (accumulate) {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] += ops_hash_uniform(seed, (uint64_t)i) < p ? 0.0f : x[i] * scale;
    } else {
        #pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            out[i] = ops_hash_uniform(seed, (uint64_t)i) < p ? 0.0f : x[i] * scale;
    }
}

static void dropout_backward(st_ctx *ctx, st_node *n) {
    const dropout_saved *sv = n->saved;
    int fresh;
    float *dx = ops_grad_out(ctx, n->in[0], &fresh);
    if (!dx) return;
    dropout_kernel(dx, n->out->grad, st_numel(n->out), sv->p, sv->seed, !fresh);
}

st_tensor *st_dropout(st_ctx *ctx, st_tensor *x, float p, uint64_t seed) {
    if (!x) return NULL;
    ST_ASSERT(p >= 0.0f && p < 1.0f);
    if (p == 0.0f || !ctx->train) return x;
    ST_ASSERT(st_is_contiguous(x));
    st_tensor *out = st_new(ctx, x->ndim, x->shape);
    if (!out) return NULL;
    dropout_kernel(out->data, x->data, st_numel(x), p, seed, 0);
    if (st_needs_grad(ctx, x, NULL, NULL, NULL)) {
        dropout_saved *sv = st_ctx_alloc(ctx, sizeof *sv, 1);
        if (!sv) return NULL;
        sv->p = p;
        sv->seed = seed;
        if (!st_record(ctx, "dropout", dropout_backward, out, x, NULL, NULL, NULL, sv)) return NULL;
    }
    return out;
}
