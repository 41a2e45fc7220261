/* abacus.c - Abacus embeddings (McLeish et al. 2024, "Transformers Can Do Arithmetic with
 * the Right Embeddings", arXiv 2405.17399; model.abacus.*): a learned table
 * abacus_emb.weight (A, C) added to the embeddings, read at each token's place within its
 * run of digits, whatever the position method (the paper pairs it with NoPE or FIRE).
 *
 * For a row of tokens x_0..x_{T-1}, with digit(x) = digit0 <= x < digit0 + 10:
 *   r_t = r_{t-1} + 1 if digit(x_t), else 0          (r_{-1} = run0: a cache's carry)
 *   a_t = r_t + k     if digit(x_t), else 0          (row 0: every non-digit token)
 *   x_t += abacus_emb[a_t]                           (B,T,C)
 * so the i-th digit of every number reads the same row: in the reversed format the digits
 * of one significance share it, which is what lets the model line up the operands'
 * digits. k is 0 except in training, where train.abacus_max_k = K draws k from {0..K}
 * per micro-batch (the paper's max_k): the rows of numbers longer than those of training
 * have been trained too. The backward is the embedding's (gradients scatter-add into the
 * rows read). */
#include "model_internal.h"

/* r_t from r_{t-1} and the token x_t (see above) */
static int64_t run_after(const st_model_config *c, int64_t r, int32_t id) {
    return id >= c->abacus_digit0 && id < c->abacus_digit0 + 10 ? r + 1 : 0;
}

/* a_t of the B rows of T tokens (see above) into idx; a row past the table fails naming
 * the key. run0 continues row 0's first run (decoding, B = 1). */
static int abacus_index(const st_model_config *c, const int32_t *ids, int64_t B, int64_t T, int64_t run0,
                        int64_t k, int32_t *idx, st_error *e) {
    for (int64_t b = 0; b < B; b++) {
        int64_t r = b == 0 ? run0 : 0;
        for (int64_t t = 0; t < T; t++) {
            r = run_after(c, r, ids[b * T + t]);
            const int64_t a = r > 0 ? r + k : 0;
            if (a >= c->abacus_rows)
                return st_fail(e, ST_ERR_CONFIG, "model.abacus.rows: a run of %lld digits%s needs row %lld, the "
                               "table has %d rows (its digits cannot be placed; train with more rows)",
                               (long long)r, k ? " at the training offset" : "", (long long)a, c->abacus_rows);
            idx[b * T + t] = (int32_t)a;
        }
    }
    return ST_OK;
}

st_tensor *st_abacus_embed(st_model *m, st_ctx *ctx, st_tensor *x, const int32_t *ids, int64_t B, int64_t T,
                           st_error *e) {
    if (!x || m->cfg.abacus_rows == 0) return x;
    int32_t *idx = st_ctx_alloc(ctx, (size_t)(B * T) * sizeof(int32_t), 0);
    if (!idx) return NULL;
    if (abacus_index(&m->cfg, ids, B, T, m->abacus_run0, m->abacus_k, idx, e)) return NULL;
    return st_add(ctx, x, st_embedding(ctx, idx, B, T, st_param(&m->params, m->p_abacus)));
}

int64_t st_abacus_run_end(const st_model_config *c, const int32_t *ids, int64_t n, int64_t run0) {
    if (c->abacus_rows == 0) return 0;
    int64_t r = run0;
    for (int64_t t = 0; t < n; t++) r = run_after(c, r, ids[t]);
    return r;
}
