/* eval_windows.c - how an evaluation covers a stream with windows of at most L inputs.
 * n tokens give n - 1 targets: input position i (0 <= i <= n - 2) predicts token i + 1.
 *   stride == L, nonoverlapping: windows start at 0, L, 2L, ...; each scores all of its
 *     positions (score_from = 0); the last one is clipped to end at input n - 2.
 *   stride S < L, sliding: window j starts at jS. Window 0 scores all its positions;
 *     window j >= 1 scores its last S positions (score_from = L - S), i.e. the targets
 *     jS + L - S + 1 .. jS + L, right after those of window j - 1, each predicted with
 *     L - S tokens or more of context. A window is clipped to the stream; windows stop
 *     once one reaches the end.
 * So every target 1 .. n - 1 is scored exactly once in both modes. */
#include "st_data.h"

int64_t st_eval_windows(int64_t n_tokens, int64_t L, int64_t stride, st_eval_window *out, int64_t cap) {
    ST_ASSERT(L >= 1 && stride >= 1 && stride <= L);
    int64_t inputs = n_tokens - 1;   /* positions 0 .. n - 2 */
    int64_t count = 0;
    for (int64_t start = 0; start < inputs; start += stride) {
        int64_t len = inputs - start < L ? inputs - start : L;
        int64_t from = start == 0 ? 0 : L - stride;
        if (from >= len) break;       /* everything this window would score is scored */
        if (out && count < cap) out[count] = (st_eval_window){start, len, from};
        count++;
        if (start + len == inputs) break;
    }
    return count;
}
