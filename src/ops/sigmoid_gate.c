/* sigmoid_gate.c - y = a * sigmoid(z) with one gate for each group of a's values: a
 * (N, C), z (N, G), G dividing C, value c of row r taking gate z[r, c / (C/G)]. The
 * attention output gate (model.out_gate) uses it per value (G = C) and per head (G = H).
 *   forward:  y[r,c] = a[r,c] s[r,g],  s = sigmoid(z) = 1 / (1 + e^-z),  g = c / (C/G)
 *   backward: da[r,c] = dy[r,c] s[r,g]
 *             dz[r,g] = s (1 - s) sum_{c in group g} dy[r,c] a[r,c]
 * s is recomputed from the saved z (G values a row; nothing else is stored). The
 * forward writes y's bf16 copy with the bf16 backend, as the output projection reads it. */
#include "ops_internal.h"

static void sigmoid_gate_backward(st_ctx *ctx, st_node *n) {
    const st_tensor *a = n->in[0], *z = n->in[1];
    const int64_t N = ops_rows(a), C = ops_cols(a), G = ops_cols(z), per = C / G;
    const int need_a = n->in[0]->requires_grad, need_z = n->in[1]->requires_grad;
    int fresh_a = 0, fresh_z = 0;
    float *da = need_a ? ops_grad_out(ctx, n->in[0], &fresh_a) : NULL;
    float *dz = need_z ? ops_grad_out(ctx, n->in[1], &fresh_z) : NULL;
    if ((need_a && !da) || (need_z && !dz)) return;
    const float *dy = n->out->grad;
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++)
        for (int64_t g = 0; g < G; g++) {
            const float s = ops_sigmoid(z->data[r * G + g]);
            const int64_t c0 = r * C + g * per;
            float acc = 0.0f;   /* sum dy a over the group, in one fixed order */
            for (int64_t c = c0; c < c0 + per; c++) {
                acc += dy[c] * a->data[c];
                if (da) da[c] = (fresh_a ? 0.0f : da[c]) + dy[c] * s;
            }
            if (dz) dz[r * G + g] = (fresh_z ? 0.0f : dz[r * G + g]) + acc * s * (1.0f - s);
        }
}

st_tensor *st_sigmoid_gate(st_ctx *ctx, st_tensor *a, st_tensor *z) {
    if (!a || !z) return NULL;
    ST_ASSERT(st_is_contiguous(a) && st_is_contiguous(z) && ops_rows(a) == ops_rows(z) &&
              ops_cols(z) > 0 && ops_cols(a) % ops_cols(z) == 0);
    const int64_t N = ops_rows(a), C = ops_cols(a), G = ops_cols(z), per = C / G;
    st_tensor *out = st_new(ctx, a->ndim, a->shape);
    if (!out) return NULL;
    int fail;
    uint16_t *outh = ops_bf16_out(ctx, out, &fail);
    if (fail) return NULL;
    #pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        for (int64_t g = 0; g < G; g++) {
            const float s = ops_sigmoid(z->data[r * G + g]);
            for (int64_t c = r * C + g * per; c < r * C + (g + 1) * per; c++) out->data[c] = a->data[c] * s;
        }
        if (outh) ops_round_row(outh + r * C, out->data + r * C, C);
    }
    if (st_needs_grad(ctx, a, z, NULL, NULL) &&
        !st_record(ctx, "sigmoid_gate", sigmoid_gate_backward, out, a, z, NULL, NULL, NULL))
        return NULL;
    return out;
}
