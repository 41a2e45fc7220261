/* positions.c - randomized positions for training (train.random_positions; Ruoss et al.
 * 2023, "Randomized Positional Encodings Boost Length Generalization of Transformers",
 * arXiv 2305.16843): a training window of T tokens takes a sorted random subset of
 * [0, N), N > T, as its positions, so the positions a long test input has were already
 * seen in training. */
#include "st_model.h"

/* Algorithm S (Knuth, TAOCP 3.4.2): visit 0..N-1 and keep position i with probability
 * (T - kept) / (N - i). Every T-subset is equally likely, the output is sorted, and
 * exactly T positions are kept (when the remaining needed equals the remaining
 * candidates the probability is 1). u is 24-bit uniform from the hash of (seed, i). */
void st_positions_sample(uint64_t seed, int64_t N, int64_t T, int64_t *out) {
    ST_ASSERT(T >= 0 && T <= N);
    int64_t kept = 0;
    for (int64_t i = 0; i < N && kept < T; i++) {
        const double u = (double)(st_hash64(seed, (uint64_t)i) >> 11) * (1.0 / 9007199254740992.0);
        if ((double)(N - i) * u < (double)(T - kept)) out[kept++] = i;
    }
    ST_ASSERT(kept == T);
}
