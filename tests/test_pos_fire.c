/* test_pos_fire.c - FIRE's bias provider (src/model/pos/fire.c) against a transcription
 * of its formula, one (query, key) pair at a time:
 *   b_h(i, j) = sum_k W2[h,k] relu(w1_k x + b1_k),  x = psi(|i - j|) / psi(max(L, i)),
 *   psi(z) = log(1 + c z)
 * The provider shares log1p over a tile's distances, tabulates the rows below the
 * threshold by distance and runs the MLP over whole rows (issue 22 item 3); every value is
 * still computed by the same expressions in the same order, so the test asks for the same
 * float, not a tolerance: the sweeps' fp32 results must not move.
 * Covered: tiles below, across and above the threshold, causal (j <= i) and two-sided
 * (j > i, the bidirectional form), a single decode row against thousands of keys (several
 * column chunks), blocks taller than one row chunk, tiles at an offset (the KV cache's
 * absolute positions), randomized training positions, and the gradient hook against the
 * finite difference of the filled bias. */
#include "harness.h"
#include "model/pos/pos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { H = 3, K = 32 };

typedef struct fire_set {
    st_model_config cfg;
    float w1[K], b1[K], w2[H * K], log_c, log_thr;
    float gw1[K], gb1[K], gw2[H * K], glog_c, glog_thr;
    st_pos_bias pb;
} fire_set;

static void fire_setup(fire_set *f, double thr, uint64_t seed, const int64_t *positions) {
    memset(f, 0, sizeof *f);
    st_model_config_default(&f->cfg);
    f->cfg.pos = st_pos_from_name("fire");
    f->cfg.n_heads = H;
    f->cfg.fire_hidden = K;
    st_rng r;
    st_rng_seed(&r, seed);
    for (int k = 0; k < K; k++) {
        f->w1[k] = 0.6f * st_rng_normal(&r);
        f->b1[k] = 0.6f * st_rng_normal(&r);
    }
    for (int k = 0; k < H * K; k++) f->w2[k] = 0.2f * st_rng_normal(&r);
    f->log_c = (float)log(0.1);
    f->log_thr = (float)log(thr);
    st_pos_bias *pb = &f->pb;
    pb->kind = f->cfg.pos;
    pb->n_heads = H;
    pb->cfg = &f->cfg;
    const float *p[5] = {f->w1, f->b1, f->w2, &f->log_c, &f->log_thr};
    float *g[5] = {f->gw1, f->gb1, f->gw2, &f->glog_c, &f->glog_thr};
    for (int k = 0; k < 5; k++) { pb->p[k] = p[k]; pb->g[k] = g[k]; }
    pb->params = pb->p[0];
    pb->grads = pb->g[0];
    pb->positions = positions;
    st_pos_method_of(f->cfg.pos)->bias_init(pb);
}

/* The formula, pair by pair (the provider before issue 22). */
static float fire_ref(const fire_set *f, int h, int64_t i, int64_t j) {
    const double c = exp((double)f->log_c), thr = exp((double)f->log_thr);
    const double m = (double)i > thr ? (double)i : thr, psi_m = log1p(c * m);
    const int64_t ad = i > j ? i - j : j - i;
    const double x = log1p(c * (double)ad) / psi_m;
    double b = 0;
    for (int k = 0; k < K; k++) {
        const double pre = (double)f->w1[k] * x + (double)f->b1[k];
        if (pre > 0) b += (double)f->w2[h * K + k] * pre;
    }
    return (float)b;
}

static int64_t pos_of(const fire_set *f, int64_t r) { return f->pb.positions ? f->pb.positions[r] : r; }

/* fill_block(h, i0, ni, j0, nj) == the formula at every pair: returns the mismatches */
static int64_t check_tile(const fire_set *f, int64_t i0, int64_t ni, int64_t j0, int64_t nj) {
    const int64_t ld = nj + 3;   /* a stride wider than the tile */
    float *out = malloc((size_t)(ni * ld) * sizeof(float));
    int64_t bad = 0;
    for (int h = 0; h < H; h++) {
        for (int64_t x = 0; x < ni * ld; x++) out[x] = 12345.0f;
        f->pb.iface.fill_block(&f->pb.iface, h, i0, ni, j0, nj, out, ld);
        for (int64_t r = 0; r < ni; r++) {
            for (int64_t c = 0; c < nj; c++) {
                const float want = fire_ref(f, h, pos_of(f, i0 + r), pos_of(f, j0 + c));
                if (memcmp(&out[r * ld + c], &want, sizeof want) != 0 && bad++ < 3)
                    fprintf(stderr, "  h %d (%lld, %lld): %.9g, formula %.9g\n", h, (long long)(i0 + r),
                            (long long)(j0 + c), out[r * ld + c], want);
            }
            for (int64_t c = nj; c < ld; c++) bad += out[r * ld + c] != 12345.0f;   /* past the tile */
        }
    }
    free(out);
    return bad;
}

static void test_fill_exact(void) {
    static const struct { double thr; int64_t i0, ni, j0, nj; const char *what; } cases[] = {
        {512, 0, 64, 0, 64, "causal block below the threshold"},
        {40, 0, 64, 0, 64, "a block across the threshold"},
        {40, 960, 64, 768, 256, "a streamed tile above it"},
        {40, 2047, 1, 0, 2048, "one decode row, 2048 keys (5 column chunks)"},
        {100, 0, 200, 0, 200, "taller than a row chunk, across the threshold"},
        {100, 30, 20, 10, 100, "keys on both sides (bidirectional)"},
        {100, 5, 7, 500, 30, "every key after every query"},
        {16, 4096 + 17, 33, 4096, 600, "at an offset (KV-cache positions)"},
        {1e6, 0, 64, 0, 64, "threshold far above every position"},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        fire_set f;
        fire_setup(&f, cases[t].thr, 11 + t, NULL);
        const int64_t bad = check_tile(&f, cases[t].i0, cases[t].ni, cases[t].j0, cases[t].nj);
        CHECK_MSG(bad == 0, "%s: %lld values differ from the formula", cases[t].what, (long long)bad);
    }
}

static void test_fill_random_positions(void) {
    /* sorted distinct positions in [0, 1024), as train.random_positions draws them */
    int64_t pos[96];
    st_rng r;
    st_rng_seed(&r, 5);
    for (int64_t i = 0, p = 0; i < 96; i++) {
        p += 1 + (int64_t)(st_rng_uniform(&r) * 9);
        pos[i] = p;
    }
    fire_set f;
    fire_setup(&f, 300, 3, pos);
    CHECK_MSG(check_tile(&f, 0, 96, 0, 96) == 0, "randomized positions: values differ from the formula");
    CHECK_MSG(check_tile(&f, 64, 32, 0, 96) == 0, "randomized positions, second row block");
}

/* grad_block accumulates d(sum_ij G_ij b(h,i,j))/dtheta: compare with central differences
 * of the filled bias (in double over the float parameters' perturbation). */
static double tile_dot(fire_set *f, const float *G, int64_t i0, int64_t ni, int64_t nj) {
    float *out = malloc((size_t)(ni * nj) * sizeof(float));
    double s = 0;
    for (int h = 0; h < H; h++) {
        f->pb.iface.fill_block(&f->pb.iface, h, i0, ni, 0, nj, out, nj);
        for (int64_t x = 0; x < ni * nj; x++) s += (double)G[h * ni * nj + x] * out[x];
    }
    free(out);
    return s;
}

static void test_grad(void) {
    const int64_t i0 = 40, ni = 48, nj = 88;   /* rows on both sides of L = 64.5 */
    fire_set f;
    fire_setup(&f, 64.5, 21, NULL);   /* L moved by eps stays between 64 and 65: no row changes regime */
    float *G = malloc((size_t)(H * ni * nj) * sizeof(float));
    st_rng r;
    st_rng_seed(&r, 9);
    for (int64_t x = 0; x < H * ni * nj; x++) G[x] = st_rng_normal(&r);
    for (int h = 0; h < H; h++) f.pb.iface.grad_block(&f.pb.iface, h, i0, ni, 0, nj, G + h * ni * nj, nj);
    float *params[] = {&f.w1[3], &f.b1[7], &f.w2[K + 5], &f.log_c, &f.log_thr};
    float *grads[] = {&f.gw1[3], &f.gb1[7], &f.gw2[K + 5], &f.glog_c, &f.glog_thr};
    const char *names[] = {"w1[3]", "b1[7]", "w2[1,5]", "log_c", "log_thr"};
    for (int k = 0; k < 5; k++) {
        const float keep = *params[k], eps = 5e-3f;
        *params[k] = keep + eps;
        const double up = tile_dot(&f, G, i0, ni, nj);
        *params[k] = keep - eps;
        const double dn = tile_dot(&f, G, i0, ni, nj);
        *params[k] = keep;
        const double fd = (up - dn) / (double)((keep + eps) - (keep - eps));
        CHECK_MSG(fabs(fd - *grads[k]) <= 2e-2 * (1 + fabs(fd)), "grad %s: hook %.6g, finite difference %.6g",
                  names[k], *grads[k], fd);
    }
    free(G);
}

int main(void) {
    test_fill_exact();
    test_fill_random_positions();
    test_grad();
    return test_finish("test_pos_fire");
}
