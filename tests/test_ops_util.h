/* test_ops_util.h - helpers shared by tests/test_ops*.c: a context on its own arena,
 * differentiable leaves in a parameter block, double-reference comparison, a backward
 * seeded with an arbitrary output gradient, the "backward accumulates" check, and the
 * bf16 backend (or a skip) for the bf16 tests.
 * Everything is static inline (each test is its own executable). */
#ifndef ST_TEST_OPS_UTIL_H
#define ST_TEST_OPS_UTIL_H

#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* gradcheck: central differences with step GC_EPS; pass when
 * |analytic - numeric| <= GC_ATOL + GC_RTOL max(|analytic|, |numeric|). */
#define GC_EPS 1e-2
#define GC_ATOL 2e-4
#define GC_RTOL 2e-3

/* ------------------------------------------------------------- helpers ---- */
typedef struct env { st_arena arena; st_ctx ctx; } env;

static inline st_ctx *env_open(env *e, int grad, int train) {
    st_error err = {0};
    ST_ASSERT(st_arena_init(&e->arena, 1 << 20, (size_t)2 << 30, &err) == ST_OK);
    ST_ASSERT(st_ctx_init(&e->ctx, &e->arena, 4096, &err) == ST_OK);
    st_ctx_begin(&e->ctx, grad, train);
    return &e->ctx;
}

static inline void env_close(env *e) {
    st_ctx_free(&e->ctx);
    st_arena_free(&e->arena);
}

/* The bf16 backend for test `name`, or NULL with *rc the test's exit code: 77 (skipped)
 * when the build has no oneDNN, the failure count when the backend cannot be made. */
static inline st_mm *test_bf16_backend(const char *name, int quiet, int *rc) {
    if (!st_precision_available(ST_PREC_BF16)) {
        test_skip(name, "this build has no oneDNN (STRETCH_BF16=OFF or libdnnl-dev missing)");
        *rc = test_finish(name);
        if (!*rc) *rc = 77;
        return NULL;
    }
    st_error e = {0};
    st_mm *bf = NULL;
    const int r = st_mm_create(&bf, ST_PREC_BF16, quiet, &e);
    CHECK_MSG(r == ST_OK, "st_mm_create(bf16): %s", e.msg);
    if (r == ST_OK) return bf;
    *rc = test_finish(name);
    return NULL;
}

/* Differentiable leaves: tensors of a parameter block (so they own grad buffers), values
 * scale * N(0, 1). spec[i] = {ndim, d0, d1, d2, d3}. */
typedef struct leaves { st_params p; st_tensor *t[10]; } leaves;

static inline void leaves_init(leaves *L, uint64_t seed, int n, const int64_t (*spec)[5], float scale) {
    static const char *names[10] = {"leaf0", "leaf1", "leaf2", "leaf3", "leaf4",
                                     "leaf5", "leaf6", "leaf7", "leaf8", "leaf9"};
    st_error err = {0};
    st_params_init(&L->p);
    for (int i = 0; i < n; i++) st_params_add(&L->p, names[i], (int)spec[i][0], &spec[i][1], 0, ST_INIT_NORMAL, scale);
    ST_ASSERT(st_params_finalize(&L->p, &err) == ST_OK);
    st_rng rng;
    st_rng_seed(&rng, seed);
    st_params_init_values(&L->p, &rng);
    for (int i = 0; i < n; i++) L->t[i] = st_param(&L->p, i);
}

static inline void fill_normal(float *x, int64_t n, uint64_t seed, float scale, float shift) {
    st_rng rng;
    st_rng_seed(&rng, seed);
    for (int64_t i = 0; i < n; i++) x[i] = scale * st_rng_normal(&rng) + shift;
}

/* Compare a float result with a double reference. */
static inline int close_ref(const char *what, const float *a, const double *ref, int64_t n, double atol, double rtol) {
    float *r = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) r[i] = (float)ref[i];
    int ok = th_close(what, a, r, n, atol, rtol);
    free(r);
    return ok;
}

/* Seed out->grad with dy and walk the tape backwards (what st_backward does after
 * seeding a scalar loss), for checking backward kernels on large shapes directly. */
static inline void backward_from(st_ctx *ctx, st_tensor *out, const float *dy) {
    float *g = st_grad(ctx, out);
    ST_ASSERT(g);
    memcpy(g, dy, (size_t)st_numel(out) * sizeof(float));
    for (int i = ctx->n_nodes - 1; i >= 0; i--) {
        st_node *nd = &ctx->nodes[i];
        if (!nd->out->grad && !(nd->out->base && nd->out->base->grad)) continue;
        if (!nd->out->grad) st_grad(ctx, nd->out);
        nd->backward(ctx, nd);
    }
}

/* Arguments of the gradcheck build functions. */
typedef struct args {
    st_tensor *a, *b, *c;
    int i0;
    float f0;
    int64_t n0, n1;
    uint64_t u0;
    const int32_t *ids;
} args;

/* ------------------------------------------------------ accumulation ---- */
/* Backward kernels must ADD into gradients (residual fan-out, tied weights, gradient
 * accumulation). For every op: gradients after one backward from zero (g1) and after the
 * same backward starting from 0.25 must differ by exactly 0.25 (up to one rounding). */
static inline void check_accumulates(const char *name, gc_build_fn build, void *user, st_tensor **lv, int n, int train) {
    float *g1[4] = {0};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++)
            for (int64_t j = 0; j < st_numel(lv[i]); j++) lv[i]->grad[j] = pass ? 0.25f : 0.0f;
        env e;
        st_ctx *ctx = env_open(&e, 1, train);
        st_tensor *out = build(ctx, user);
        float *dy = malloc((size_t)st_numel(out) * sizeof(float));
        fill_normal(dy, st_numel(out), 77, 1.0f, 0.0f);
        backward_from(ctx, out, dy);
        free(dy);
        env_close(&e);
        for (int i = 0; i < n; i++) {
            int64_t m = st_numel(lv[i]);
            if (!pass) {
                g1[i] = malloc((size_t)m * sizeof(float));
                for (int64_t j = 0; j < m; j++) g1[i][j] = lv[i]->grad[j] + 0.25f;
            } else {
                char what[96];
                snprintf(what, sizeof what, "%s accumulates into input %d", name, i);
                th_close(what, lv[i]->grad, g1[i], m, 1e-6, 1e-6);
                free(g1[i]);
            }
        }
    }
}

#endif
