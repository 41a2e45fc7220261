/* fire.c - FIRE, functional interpolation for relative positions (Li et al. 2023,
 * "Functional Interpolation for Relative Positions Improves Long Context Transformers",
 * arXiv 2310.04418), per layer:
 *   b_h(i, j) = f(x),  x = psi(i - j) / psi(max(L, i)),  psi(z) = log(c z + 1)
 *   f(x)_h = sum_k W2[h, k] relu(w1_k x + b1_k),  k < model.fire.hidden (32)
 * Progressive interpolation: for i <= L the normaliser is psi(L), so x depends on the
 * distance only; beyond L it is psi(i), so x stays in [0, 1] at any length and the MLP only
 * ever sees inputs it was trained on. The bias depends on the query position i as well as
 * the distance: the general (i, j) form of st_attn_bias.
 *
 * Parameters (blocks.<l>.attn.fire.*): w1 (K, 1), b1 (K), w2 (H, K), log_c (1), log_thr (1)
 * with c = exp(log_c) (init model.fire.c = 0.1) and L = exp(log_thr) (init
 * model.fire.threshold = 512). Both are learned as logarithms: dL/dlog_thr = L dL/dL, so an
 * AdamW step moves L by a factor ~(1 + lr) whatever its size (learning L itself gives it a
 * gradient of ~1e-6 per unit, too small to move; the reproduction learns a multiplier on a
 * fixed L for the same reason). The MLP's output bias is left out: a constant per head adds
 * the same amount to every score of a row and cancels in the softmax. Init as nn.Linear's
 * scale: w1, b1 ~ N(0, 1/3), w2 ~ N(0, 1/(3K)).
 *
 * Gradient, with G = dL/db_h(i, j), pre_k = w1_k x + b1_k, u_k = relu(pre_k), M = max(L, i):
 *   dW2[h,k] += G u_k;  du_k = G W2[h,k] [pre_k > 0];  dw1_k += du_k x;  db1_k += du_k
 *   dx = sum_k du_k w1_k
 *   dx/dc = ( d/(c d + 1) psi(M) - psi(d) M/(c M + 1) ) / psi(M)^2
 *   dx/dL = -psi(d) c / ((c L + 1) psi(L)^2)   when L > i, else 0
 * then dlog_c = c dx/dc dx-chain, dlog_thr = L dx/dL chain. */
#include "pos.h"

enum { FIRE_W1 = 0, FIRE_B1, FIRE_W2, FIRE_LOGC, FIRE_LOGTHR, FIRE_NPARAM };

typedef struct fire_row { double c, thr, psi_m, m; } fire_row;

/* The position of row r: randomized in training (pb->positions), else r itself. */
static inline int64_t fire_pos(const st_pos_bias *pb, int64_t r) { return pb->positions ? pb->positions[r] : r; }

/* Per query position i: M = max(L, i) and psi(M). */
static fire_row fire_row_of(const st_pos_bias *pb, int64_t i) {
    fire_row r;
    r.c = exp((double)pb->p[FIRE_LOGC][0]);
    r.thr = exp((double)pb->p[FIRE_LOGTHR][0]);
    r.m = (double)i > r.thr ? (double)i : r.thr;
    r.psi_m = log1p(r.c * r.m);
    return r;
}

static void fire_fill(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj,
                      float *out, int64_t ld) {
    const st_pos_bias *pb = self->state;
    const int K = pb->cfg->fire_hidden;
    const float *w1 = pb->p[FIRE_W1], *b1 = pb->p[FIRE_B1], *w2 = pb->p[FIRE_W2] + (size_t)h * K;
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = fire_pos(pb, i0 + r);
        const fire_row fr = fire_row_of(pb, i);
        for (int64_t cc = 0; cc < nj; cc++) {
            const int64_t d = i - fire_pos(pb, j0 + cc), ad = d < 0 ? -d : d;
            const double x = log1p(fr.c * (double)ad) / fr.psi_m;
            double b = 0;
            for (int k = 0; k < K; k++) {
                const double pre = (double)w1[k] * x + (double)b1[k];
                if (pre > 0) b += (double)w2[k] * pre;
            }
            out[r * ld + cc] = (float)b;
        }
    }
}

static void fire_grad(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj,
                      const float *g, int64_t ld) {
    const st_pos_bias *pb = self->state;
    const int K = pb->cfg->fire_hidden;
    const float *w1 = pb->p[FIRE_W1], *b1 = pb->p[FIRE_B1], *w2 = pb->p[FIRE_W2] + (size_t)h * K;
    double gw1[ST_FIRE_MAX_HIDDEN] = {0}, gb1[ST_FIRE_MAX_HIDDEN] = {0}, gw2[ST_FIRE_MAX_HIDDEN] = {0};
    double glogc = 0, glogthr = 0;
    ST_ASSERT(K <= ST_FIRE_MAX_HIDDEN);   /* the schema's range of model.fire.hidden */
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = fire_pos(pb, i0 + r);
        const fire_row fr = fire_row_of(pb, i);
        const int thr_active = fr.thr > (double)i;
        for (int64_t cc = 0; cc < nj; cc++) {
            const double G = g[r * ld + cc];
            if (G == 0) continue;
            const int64_t d = i - fire_pos(pb, j0 + cc), ad = d < 0 ? -d : d;
            const double psi_d = log1p(fr.c * (double)ad), x = psi_d / fr.psi_m;
            double dx = 0;
            for (int k = 0; k < K; k++) {
                const double pre = (double)w1[k] * x + (double)b1[k];
                if (pre <= 0) continue;
                gw2[k] += G * pre;
                const double du = G * (double)w2[k];
                gw1[k] += du * x;
                gb1[k] += du;
                dx += du * (double)w1[k];
            }
            const double pm2 = fr.psi_m * fr.psi_m;
            const double dxdc = ((double)ad / (fr.c * ad + 1) * fr.psi_m - psi_d * fr.m / (fr.c * fr.m + 1)) / pm2;
            glogc += dx * dxdc * fr.c;
            if (thr_active) glogthr += dx * (-psi_d * fr.c / ((fr.c * fr.thr + 1) * pm2)) * fr.thr;
        }
    }
    float *Gw1 = pb->g[FIRE_W1], *Gb1 = pb->g[FIRE_B1], *Gw2 = pb->g[FIRE_W2] + (size_t)h * K;
    for (int k = 0; k < K; k++) {
        Gw1[k] += (float)gw1[k];
        Gb1[k] += (float)gb1[k];
        Gw2[k] += (float)gw2[k];
    }
    pb->g[FIRE_LOGC][0] += (float)glogc;
    pb->g[FIRE_LOGTHR][0] += (float)glogthr;
}

static void fire_bias_init(st_pos_bias *pb) {
    pb->iface.fill_block = fire_fill;
    pb->iface.state = pb;
    pb->iface.grad_block = pb->g[0] ? fire_grad : NULL;
}

static int fire_params(const st_model_config *c, int layer, st_pos_decl *out) {
    if (layer < 0) return 0;
    const int K = c->fire_hidden;
    out[FIRE_W1] = (st_pos_decl){"attn.fire.w1", 2, K, 1, 1, ST_INIT_NORMAL, (float)sqrt(1.0 / 3.0), 0};
    out[FIRE_B1] = (st_pos_decl){"attn.fire.b1", 1, K, 1, 0, ST_INIT_NORMAL, (float)sqrt(1.0 / 3.0), 0};
    out[FIRE_W2] = (st_pos_decl){"attn.fire.w2", 2, c->n_heads, K, 1, ST_INIT_NORMAL, (float)sqrt(1.0 / (3.0 * K)), 0};
    out[FIRE_LOGC] = (st_pos_decl){"attn.fire.log_c", 1, 1, 1, 0, ST_INIT_CONST, (float)log(c->fire_c), 0};
    out[FIRE_LOGTHR] = (st_pos_decl){"attn.fire.log_thr", 1, 1, 1, 0, ST_INIT_CONST, (float)log(c->fire_threshold), 0};
    return FIRE_NPARAM;
}

const st_pos_method st_pos_fire = {
    .name = "fire",
    .abs_indices = 1,
    .bias_form = ST_POS_BIAS_GENERAL,
    /* the bias depends on the absolute query position: a slid cache would see positions
     * no forward over the window ever uses; generate re-prefills the last window */
    .slides = 0,
    .params = fire_params,
    .bias_init = fire_bias_init,
};
