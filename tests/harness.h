/* harness.h - the minimal test harness shared by tests/test_*.c.
 * CHECK-style macros print file:line on failure and count; test_finish() prints the
 * closing "N passed, N failed" line and returns the exit code (non-zero on any failure).
 * gradcheck() compares the tape's gradients with central finite differences. */
#ifndef ST_TEST_HARNESS_H
#define ST_TEST_HARNESS_H

#include <stdio.h>
#include <math.h>
#include "stretch.h"

extern int th_passed, th_failed;

#define CHECK(cond) th_check((cond) != 0, __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, ...) th_checkf((cond) != 0, __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_NEAR(a, b, tol) th_near((double)(a), (double)(b), (double)(tol), __FILE__, __LINE__, #a, #b)
int th_check(int ok, const char *file, int line, const char *expr);
int th_checkf(int ok, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int th_near(double a, double b, double tol, const char *file, int line, const char *ea, const char *eb);
/* Max |a-b| over n floats; prints the first mismatch beyond tol. Returns 1 if all within.
 * A non-finite element matches only the same infinity (NaN never). */
int th_close(const char *what, const float *a, const float *b, int64_t n, double atol, double rtol);
/* max |a_i - b_i|, INFINITY when a pair is non-finite and not the same infinity (fmax and
 * `d > m` both skip a NaN, which would let a NaN output pass a max-difference check) */
double th_max_diff(const float *a, const float *b, int64_t n);
/* m = max(m, d) where a NaN d makes m INFINITY (for hand-written max-error loops) */
#define TH_MAX(m, d) ((m) = th_max_nan((m), (d)))
static inline double th_max_nan(double m, double d) { return isnan(d) ? INFINITY : (d > m ? d : m); }
int test_finish(const char *suite);
/* Skip line for a part whose inputs (../shared/data, PyTorch, ...) are missing; the test
 * then ends with TEST_SKIPPED, which ctest reports as skipped. */
#define TEST_SKIPPED 77
void test_skip(const char *what, const char *why);
/* Path of a shared data file ("wikitext-2/train.txt"), or NULL with a skip line. */
const char *test_data_path(const char *rel, char *buf, size_t n);
/* A fresh empty temporary directory (mkdtemp under $TMPDIR or /tmp). */
const char *test_tmpdir(char *buf, size_t n);
/* 1 when DIR/verdict reads "ok" (the verdict a scripts/torch_*ref.py check writes per case
 * directory; a missing file, e.g. python died, is 0). verdict (optional, n bytes): its
 * first line without the newline, "" when there is none. */
int test_verdict_ok(const char *dir, char *verdict, size_t n);

/* ---- finite-difference gradient check ----
 * build(ctx, user) runs a forward that reads the leaves and returns any output tensor.
 * The checked scalar is L = sum_k r_k * out_k (r fixed random, accumulated in double).
 * Analytic gradients come from the tape; numeric ones from (L(x+eps) - L(x-eps)) / 2eps
 * evaluated on up to max_per_leaf elements of each leaf (all if 0). Passes when
 * |a - n| <= atol + rtol * max(|a|, |n|) for every checked element. */
typedef st_tensor *(*gc_build_fn)(st_ctx *ctx, void *user);
typedef struct gc_leaf { st_tensor *t; } gc_leaf;
int gradcheck(const char *name, gc_build_fn build, void *user, st_tensor **leaves, int n_leaves,
              int train, double eps, double atol, double rtol, int max_per_leaf);

/* A whole model's mean loss over (B,T) ids/targets as a (1) tensor, dropout seed 7: the
 * gc_build_fn of whole-model gradient checks (user: a th_fwd). */
typedef struct th_fwd { st_model *m; const int32_t *ids, *tg; int64_t B, T; } th_fwd;
st_tensor *th_model_loss(st_ctx *ctx, void *user);

#endif
