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
 * variance: w1, b1 normal of variance 1/3, w2 of variance 1/(3K) (not standard deviations,
 * which init_std gives the other matrices).
 *
 * Gradient, with G = dL/db_h(i, j), pre_k = w1_k x + b1_k, u_k = relu(pre_k), M = max(L, i):
 *   dW2[h,k] += G u_k;  du_k = G W2[h,k] [pre_k > 0];  dw1_k += du_k x;  db1_k += du_k
 *   dx = sum_k du_k w1_k
 *   dx/dc = ( d/(c d + 1) psi(M) - psi(d) M/(c M + 1) ) / psi(M)^2
 *   dx/dL = -psi(d) c / ((c L + 1) psi(L)^2)   when L > i, else 0
 * then dlog_c = c dx/dc dx-chain, dlog_thr = L dx/dL chain. */
#include "pos.h"

enum { FIRE_W1 = 0, FIRE_B1, FIRE_W2, FIRE_LOGC, FIRE_LOGTHR, FIRE_NPARAM };

/* The constants of one provider call: c, L = thr and psi(L) (read once, not per row). */
typedef struct fire_consts { double c, thr, psi_thr; } fire_consts;

static fire_consts fire_consts_of(const st_pos_bias *pb) {
    fire_consts k;
    k.c = exp((double)pb->p[FIRE_LOGC][0]);
    k.thr = exp((double)pb->p[FIRE_LOGTHR][0]);
    k.psi_thr = log1p(k.c * k.thr);
    return k;
}

/* The position of row r: randomized in training (pb->positions), else r itself. */
static inline int64_t fire_pos(const st_pos_bias *pb, int64_t r) { return pb->positions ? pb->positions[r] : r; }

/* Why the fill is blocked this way (issue 22 item 3): the per-pair cost was one log1p and
 * a K-term MLP per head (47 ns a pair-head; FIRE's sliding evaluation at n = 2048 took
 * 12x ALiBi's). Within a tile of FIRE_RN rows x FIRE_CN columns at consecutive positions
 * the distances |i - j| span at most FIRE_RN + FIRE_CN values, so psi(|i - j|) is a
 * table of that many log1p; rows with i <= L share the normaliser psi(L), so their bias
 * is a function of the distance alone and is a table too; the remaining rows (i > L, only
 * past the threshold at evaluation) run the MLP over a whole row at once, a loop the
 * compiler vectorizes. Every value is computed by the same expressions in the same order
 * as the per-pair formula, so the bias is bit-identical to it (tests/test_pos_fire.c). */
enum { FIRE_RN = 64, FIRE_CN = 448, FIRE_TAB = FIRE_RN + FIRE_CN };

/* out[t] = f(x[t])_h = sum_k w2[k] relu(w1_k x + b1_k), t < n, k in order. The loop
 * over t is innermost so it vectorizes (a tile row is <= FIRE_CN doubles, in L1). */
static void fire_mlp(const double *x, int64_t n, const float *w1, const float *b1, const float *w2, int K,
                     double *out) {
    for (int64_t t = 0; t < n; t++) out[t] = 0;
    for (int k = 0; k < K; k++) {
        const double a = w1[k], bb = b1[k], w = w2[k];
        for (int64_t t = 0; t < n; t++) {
            const double pre = a * x[t] + bb;
            out[t] = pre > 0 ? out[t] + w * pre : out[t];
        }
    }
}

/* The distance range of the tile rows [i0, i0+ni) x columns [j0, j0+nj) at consecutive
 * positions: |i - j| in [*lo, *lo + return). */
static int64_t fire_dist_range(int64_t i0, int64_t ni, int64_t j0, int64_t nj, int64_t *lo) {
    const int64_t dmin = i0 - (j0 + nj - 1), dmax = i0 + ni - 1 - j0;
    if (dmin <= 0 && dmax >= 0) {
        *lo = 0;
        return (-dmin > dmax ? -dmin : dmax) + 1;
    }
    const int64_t a = dmin < 0 ? -dmax : dmin, b = dmin < 0 ? -dmin : dmax;
    *lo = a;
    return b - a + 1;
}

/* One tile at consecutive positions (ni <= FIRE_RN, nj <= FIRE_CN). */
static void fire_fill_tile(const st_pos_bias *pb, const fire_consts *fc, const float *w2, int64_t i0, int64_t ni,
                           int64_t j0, int64_t nj, float *out, int64_t ld) {
    const int K = pb->cfg->fire_hidden;
    const float *w1 = pb->p[FIRE_W1], *b1 = pb->p[FIRE_B1];
    double psi[FIRE_TAB], near[FIRE_TAB], x[FIRE_CN], b[FIRE_CN];
    int64_t lo;
    const int64_t nd = fire_dist_range(i0, ni, j0, nj, &lo);
    for (int64_t t = 0; t < nd; t++) psi[t] = log1p(fc->c * (double)(lo + t));
    int have_near = 0;
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = i0 + r;
        float *o = out + r * ld;
        if ((double)i > fc->thr) {   /* M = i: the row's own normaliser */
            const double psi_m = log1p(fc->c * (double)i);
            for (int64_t cc = 0; cc < nj; cc++) {
                const int64_t d = i - (j0 + cc), ad = d < 0 ? -d : d;
                x[cc] = psi[ad - lo] / psi_m;
            }
            fire_mlp(x, nj, w1, b1, w2, K, b);
            for (int64_t cc = 0; cc < nj; cc++) o[cc] = (float)b[cc];
            continue;
        }
        if (!have_near) {   /* M = L: the bias of every distance of the tile, once */
            double xs[FIRE_TAB];
            for (int64_t t = 0; t < nd; t++) xs[t] = psi[t] / fc->psi_thr;
            fire_mlp(xs, nd, w1, b1, w2, K, near);
            have_near = 1;
        }
        for (int64_t cc = 0; cc < nj; cc++) {
            const int64_t d = i - (j0 + cc), ad = d < 0 ? -d : d;
            o[cc] = (float)near[ad - lo];
        }
    }
}

/* Randomized training positions: no distance structure to share; per pair. */
static void fire_fill_scattered(const st_pos_bias *pb, const fire_consts *fc, const float *w2, int64_t i0,
                                int64_t ni, int64_t j0, int64_t nj, float *out, int64_t ld) {
    const int K = pb->cfg->fire_hidden;
    const float *w1 = pb->p[FIRE_W1], *b1 = pb->p[FIRE_B1];
    double x[FIRE_CN], b[FIRE_CN];
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = fire_pos(pb, i0 + r);
        const double m = (double)i > fc->thr ? (double)i : fc->thr, psi_m = log1p(fc->c * m);
        for (int64_t c0 = 0; c0 < nj; c0 += FIRE_CN) {
            const int64_t n = nj - c0 < FIRE_CN ? nj - c0 : FIRE_CN;
            for (int64_t t = 0; t < n; t++) {
                const int64_t d = i - fire_pos(pb, j0 + c0 + t), ad = d < 0 ? -d : d;
                x[t] = log1p(fc->c * (double)ad) / psi_m;
            }
            fire_mlp(x, n, w1, b1, w2, K, b);
            for (int64_t t = 0; t < n; t++) out[r * ld + c0 + t] = (float)b[t];
        }
    }
}

static void fire_fill(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj,
                      float *out, int64_t ld) {
    const st_pos_bias *pb = self->state;
    const fire_consts fc = fire_consts_of(pb);
    const float *w2 = pb->p[FIRE_W2] + (size_t)h * pb->cfg->fire_hidden;
    if (pb->positions) {
        fire_fill_scattered(pb, &fc, w2, i0, ni, j0, nj, out, ld);
        return;
    }
    for (int64_t r0 = 0; r0 < ni; r0 += FIRE_RN)
        for (int64_t c0 = 0; c0 < nj; c0 += FIRE_CN)
            fire_fill_tile(pb, &fc, w2, i0 + r0, ni - r0 < FIRE_RN ? ni - r0 : FIRE_RN, j0 + c0,
                           nj - c0 < FIRE_CN ? nj - c0 : FIRE_CN, out + r0 * ld + c0, ld);
}

static void fire_grad(const st_attn_bias *self, int h, int64_t i0, int64_t ni, int64_t j0, int64_t nj,
                      const float *g, int64_t ld) {
    const st_pos_bias *pb = self->state;
    const int K = pb->cfg->fire_hidden;
    const float *w1 = pb->p[FIRE_W1], *b1 = pb->p[FIRE_B1], *w2 = pb->p[FIRE_W2] + (size_t)h * K;
    double gw1[ST_FIRE_MAX_HIDDEN] = {0}, gb1[ST_FIRE_MAX_HIDDEN] = {0}, gw2[ST_FIRE_MAX_HIDDEN] = {0};
    double glogc = 0, glogthr = 0;
    ST_ASSERT(K <= ST_FIRE_MAX_HIDDEN);   /* the schema's range of model.fire.hidden */
    const fire_consts fc = fire_consts_of(pb);
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = fire_pos(pb, i0 + r);
        const double m = (double)i > fc.thr ? (double)i : fc.thr, psi_m = log1p(fc.c * m);
        const int thr_active = fc.thr > (double)i;
        for (int64_t cc = 0; cc < nj; cc++) {
            const double G = g[r * ld + cc];
            if (G == 0) continue;
            const int64_t d = i - fire_pos(pb, j0 + cc), ad = d < 0 ? -d : d;
            const double psi_d = log1p(fc.c * (double)ad), x = psi_d / psi_m;
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
            const double pm2 = psi_m * psi_m;
            const double dxdc = ((double)ad / (fc.c * ad + 1) * psi_m - psi_d * m / (fc.c * m + 1)) / pm2;
            glogc += dx * dxdc * fc.c;
            if (thr_active) glogthr += dx * (-psi_d * fc.c / ((fc.c * fc.thr + 1) * pm2)) * fc.thr;
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
    .keys = "model.fire",
    .abs_indices = 1,
    .bias_form = ST_POS_BIAS_GENERAL,
    /* the bias depends on the absolute query position: a slid cache would see positions
     * no forward over the window ever uses; generate re-prefills the last window */
    .slides = 0,
    .params = fire_params,
    .bias_init = fire_bias_init,
    .no_cache_positions = "its bias normalises each distance by the query's own position, so moving the query "
                          "changes every key's bias, not only the sinks' (not implemented)",
};
