/* attention_cope.c - Contextual Position Encoding (Golovneva et al. 2024, arXiv 2405.18719)
 * inside the attention kernels: the row-level forward and backward that attention.c
 * (grad mode) and attention_stream.c (streamed, KV cache) call, and the two products with
 * the position embeddings E (n_pos, D).
 *
 * Per query row i over its visible keys j (causal: j <= i), with s0_ij = scale q_i.k_j +
 * bias_ij (-inf where masked):
 *   g_ij = sigmoid(s0_ij)                          gate: does key j count for query i
 *   P_ij = sum_{t=j..i} g_it                       contextual position, counted backwards
 *   p = min(P_ij, n_pos - 1), f = floor p, c = min(f + 1, n_pos - 1), w = p - f
 *   z_i[m] = scale q_i.e_m                         (Z = scale Q E^T, one sgemm per block)
 *   s_ij = s0_ij + (1 - w) z_i[f] + w z_i[c]
 * The sum runs from the query towards older keys, so a kernel that visits key blocks from
 * the newest to the oldest carries one float per row (csum) and never needs the whole row.
 *
 * Backward, given ds_ij = dL/ds_ij of the row:
 *   dz_i[f] += ds_ij (1 - w),  dz_i[c] += ds_ij w
 *   dP_ij = ds_ij (z_i[c] - z_i[f])      (0 where P_ij is clamped: P >= n_pos - 1)
 *   dg_it = sum_{j <= t} dP_ij            (P_ij contains g_it for every j <= t)
 *   ds0_ij = ds_ij + dg_ij g_ij (1 - g_ij)
 *   dQ += scale dZ E,  dE += scale dZ^T Q
 * and ds0 flows on into dQ, dK (and the bias) like any score gradient. floor/ceil have no
 * gradient; w's derivative in P is 1 (as torch autograd of the same expression). */
#include "attention_internal.h"

#include <cblas.h>
#include <math.h>

static inline float cope_gate(float s) { return 1.0f / (1.0f + expf(-s)); }   /* -inf -> 0 */

void st_cope_z(const st_attn_cope *cp, const float *Q, int64_t rows, int64_t D, float scale, float *Z) {
    /* Z (rows, n_pos) = scale Q (rows, D) E^T (D, n_pos) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cp->n_pos, (int)D, scale, Q, (int)D,
                cp->e, (int)D, 0.0f, Z, (int)cp->n_pos);
}

/* the interpolation of p = min(P, n_pos - 1): floor index f, ceil index c, weight w */
static inline void cope_interp(float P, int64_t npos, int64_t *f, int64_t *c, float *w) {
    const float top = (float)(npos - 1);
    const float p = P < top ? P : top;
    const float fl = floorf(p);
    *f = (int64_t)fl;
    *c = *f + 1 < npos ? *f + 1 : *f;
    *w = p - fl;
}

void st_cope_row_forward(const float *z, int64_t npos, float *s, int64_t n, float *csum, float *gates) {
    float acc = *csum;
    for (int64_t j = n - 1; j >= 0; j--) {
        const float g = cope_gate(s[j]);
        acc += g;
        if (gates) gates[j] = g;
        int64_t f, c;
        float w;
        cope_interp(acc, npos, &f, &c, &w);
        s[j] += (1.0f - w) * z[f] + w * z[c];
    }
    *csum = acc;
}

void st_cope_row_backward(const float *z, int64_t npos, const float *gates, int64_t n, float *ds, float *dz,
                          float *tmp) {
    /* positions again, in the forward's order (so the same floats), and dP into tmp */
    float acc = 0.0f;
    const float top = (float)(npos - 1);
    for (int64_t j = n - 1; j >= 0; j--) {
        acc += gates[j];
        int64_t f, c;
        float w;
        cope_interp(acc, npos, &f, &c, &w);
        dz[f] += ds[j] * (1.0f - w);
        dz[c] += ds[j] * w;
        tmp[j] = acc < top ? ds[j] * (z[c] - z[f]) : 0.0f;
    }
    /* dg_t = sum_{j <= t} dP_j, then through the sigmoid */
    float run = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        run += tmp[t];
        ds[t] += run * gates[t] * (1.0f - gates[t]);
    }
}

void st_cope_z_backward(const st_attn_cope *cp, const float *dZ, const float *Q, int64_t rows, int64_t D,
                        float scale, float *dq, float *de) {
    /* dQ (rows, D) += scale dZ (rows, n_pos) E (n_pos, D) */
    if (dq)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)D, (int)cp->n_pos, scale, dZ,
                    (int)cp->n_pos, cp->e, (int)D, 1.0f, dq, (int)D);
    /* dE (n_pos, D) += scale dZ^T (n_pos, rows) Q (rows, D) */
    if (de)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cp->n_pos, (int)D, (int)rows, scale, dZ,
                    (int)cp->n_pos, Q, (int)D, 1.0f, de, (int)D);
}
