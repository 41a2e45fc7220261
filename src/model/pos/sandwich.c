/* sandwich.c - Sandwich (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via
 * the Lens of Receptive Field Analysis", arXiv 2212.10356): the dot product of two
 * sinusoidal position embeddings, shifted to 0 at d = 0 and scaled per head like ALiBi:
 *   b_h(d) = ( sum_{k=1}^{D'/2} cos(d / 10000^(2k/D')) - D'/2 ) / (8 h / H),  h = 1..H
 * with D' the head size (as NVIDIA NeMo's SandwichRelativePositionEmbedding; the paper's
 * description leaves D' open, see docs/position-methods.md). Parameter-free, distance
 * form (cos is even: bidirectional uses |d|), b_h(d) <= 0 and bounded by -D' H / (8 h). */
#include "pos.h"

static void sandwich_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const st_pos_bias *pb = self->state;
    const int Dp = pb->cfg->d_model / pb->cfg->n_heads, half = Dp / 2;
    const double inv_scale = (double)pb->n_heads / (8.0 * (h + 1)), r = pow(10000.0, -2.0 / Dp);
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k;
        const double ad = (double)(d < 0 ? -d : d);
        double s = 0, w = r;   /* w = 10000^(-2f/D') = r^f */
        for (int f = 1; f <= half; f++, w *= r) s += cos(ad * w);
        out[k] = (float)((s - half) * inv_scale);
    }
}

static void sandwich_bias_init(st_pos_bias *pb) {
    pb->iface.fill = sandwich_fill;
    pb->iface.state = pb;
}

const st_pos_method st_pos_sandwich = {
    .name = "sandwich",
    .bias_form = ST_POS_BIAS_DISTANCE,
    .slides = 1,
    .bias_init = sandwich_bias_init,
};
