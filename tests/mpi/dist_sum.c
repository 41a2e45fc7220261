/* dist_sum.c - the MPI transport's collectives, run under `mpirun -np N` (ctest: N = 3,
 * so chunks are uneven and, for tiny buffers, empty).
 *
 * st_dist_sum_f32/f64 must give, on every rank, exactly the rank-ordered sum
 * ((x_0 + x_1) + x_2) + ..., for any buffer length. Every rank can generate every rank's
 * input (seeded by rank), so each computes that sum itself and compares bits. The inputs
 * mix magnitudes over 2^-20 .. 2^20 with both signs, so a different association gives a
 * different result for most elements (checked too: the reversed order differs somewhere,
 * i.e. the test would notice an order change). Also: max_i32, bcast, agree, repeated
 * calls (scratch reuse). */
#include "harness.h"
#include "st_dist.h"

#include <stdlib.h>
#include <string.h>

static float value_f32(int rank, size_t i) {
    uint64_t h = st_hash64(0x5eed + (uint64_t)rank, i);
    float mant = 1.0f + (float)(h & 0xffffff) / 16777216.0f;
    int ex = (int)((h >> 24) % 41) - 20;
    return ((h >> 40) & 1 ? -1.0f : 1.0f) * ldexpf(mant, ex);
}

/* x * 1.000000119 in double, rounded on its own (volatile: no fused multiply-add with a
 * following addition, which -ffp-contract=fast would otherwise form) */
static double scaled(float x) {
    volatile double p = (double)x * 1.000000119;
    return p;
}

static int check_sum(st_dist *d, size_t n) {
    const int N = d->size;
    float *buf = malloc((n ? n : 1) * sizeof *buf), *want = malloc((n ? n : 1) * sizeof *want);
    double *dbuf = malloc((n ? n : 1) * sizeof *dbuf), *dwant = malloc((n ? n : 1) * sizeof *dwant);
    int differs_reversed = 0, ok = 1;
    for (size_t i = 0; i < n; i++) {
        buf[i] = value_f32(d->rank, i);
        dbuf[i] = scaled(buf[i]);   /* sums of doubles too */
        float acc = value_f32(0, i), rev = value_f32(N - 1, i);
        double dacc = scaled(value_f32(0, i));
        for (int q = 1; q < N; q++) {
            acc += value_f32(q, i);
            dacc += scaled(value_f32(q, i));
        }
        for (int q = N - 2; q >= 0; q--) rev += value_f32(q, i);
        want[i] = acc;
        dwant[i] = dacc;
        differs_reversed |= memcmp(&acc, &rev, sizeof acc) != 0;
    }
    CHECK(st_dist_sum_f32(d, buf, n) == ST_OK);
    CHECK(st_dist_sum_f64(d, dbuf, n) == ST_OK);
    for (size_t i = 0; i < n && ok; i++)
        if (memcmp(&buf[i], &want[i], sizeof *buf) || memcmp(&dbuf[i], &dwant[i], sizeof *dbuf)) {
            CHECK_MSG(0, "rank %d, n %zu: element %zu is %.9g / %.17g, rank-ordered sum %.9g / %.17g", d->rank, n, i,
                      buf[i], dbuf[i], want[i], dwant[i]);
            ok = 0;
        }
    if (ok) CHECK(1);
    if (n >= 1000 && N > 2) CHECK_MSG(differs_reversed, "n %zu: the order of the sum never matters: weak inputs", n);
    free(buf); free(want); free(dbuf); free(dwant);
    return ok;
}

int main(int argc, char **argv) {
    st_dist d;
    st_error e = {0};
    if (st_dist_init(&d, &argc, &argv, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    if (d.size < 2) {
        printf("dist_sum: run it under mpirun -np N >= 2 (got %d rank); skipped\n", d.size);
        st_dist_finalize(&d);
        return 77;
    }
    static const size_t sizes[] = {0, 1, 2, 5, 1000, 65537, 1000003, 5};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) check_sum(&d, sizes[k]);

    int32_t v[3] = {d.rank, -d.rank, 7};
    CHECK(st_dist_max_i32(&d, v, 3) == ST_OK);
    CHECK(v[0] == d.size - 1 && v[1] == 0 && v[2] == 7);
    char msg[64] = "";
    if (d.rank == 0) snprintf(msg, sizeof msg, "from rank 0");
    CHECK(st_dist_bcast(&d, msg, sizeof msg, 0) == ST_OK);
    CHECK(strcmp(msg, "from rank 0") == 0);
    CHECK(st_dist_barrier(&d) == ST_OK);
    /* agree: nobody failed; then the last rank fails with 4, every rank learns it */
    CHECK(st_dist_agree(&d, ST_OK, &e) == ST_OK);
    st_error ae = {0};
    int rc = st_dist_agree(&d, d.rank == d.size - 1 ? ST_ERR_DATA : ST_OK, &ae);
    CHECK(rc == ST_ERR_DATA && d.agreed == 1);
    if (d.rank != d.size - 1) CHECK(strstr(ae.msg, "because rank") != NULL);
    char suite[32];
    snprintf(suite, sizeof suite, "dist_sum rank %d", d.rank);
    int ret = test_finish(suite);
    st_dist_finalize(&d);
    return ret;
}
