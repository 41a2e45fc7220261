/* passkey_eval.c - passkey retrieval accuracy by length and depth through the KV cache
 * (include/st_eval.h). Each instance: prefill the prompt (filler, needle at the depth,
 * query), then feed the true answer one token at a time and compare each token with the
 * argmax of the logits before it. */
#include "st_eval.h"
#include "st_matmul.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED_OFFSET 0x6f6666ull   /* "off": where an instance's filler starts */
#define SEED_KEY    0x6b6579ull   /* "key" */

void st_passkey_eval_instance(const st_passkey *pk, const int32_t *text, int64_t n_text, int64_t n, int depth_index,
                              double depth, int trial, uint64_t seed, int32_t *out) {
    const int64_t filler = n + pk->digits - st_passkey_overhead(pk);
    const uint64_t idx = ((uint64_t)n << 32) ^ ((uint64_t)depth_index << 20) ^ (uint64_t)trial;
    const int64_t off = (int64_t)(st_hash64(seed ^ SEED_OFFSET, idx) % (uint64_t)(n_text - filler + 1));
    int32_t key[ST_PASSKEY_MAX_DIGITS];
    st_passkey_key(pk, st_hash64(seed ^ SEED_KEY, idx), key);
    st_passkey_build(pk, text + off, n, depth, key, out);
}

/* One length: every depth x trial through one cache of n + digits keys. */
static int eval_length(st_model *m, const st_passkey *pk, const int32_t *text, int64_t n_text, int64_t n,
                       const double *depths, int n_depth, int trials, uint64_t seed, st_passkey_cell *row,
                       int32_t *inst, float *logits, st_ctx *ctx, st_error *e) {
    const int V = m->cfg.vocab_size, dg = pk->digits;
    if (m->xf) m->xf->n = n;   /* a transform's scale for this length (s = max(1, n / L)) */
    st_kv_cache c;
    memset(&c, 0, sizeof c);
    int rc = st_kv_cache_init(&c, m, n + dg, st_mm_precision(ctx->mm), e);
    for (int di = 0; di < n_depth && !rc; di++) {
        st_passkey_cell *cell = &row[di];
        cell->len = n;
        cell->depth = depths[di];
        double loss = 0;
        for (int tr = 0; tr < trials && !rc; tr++) {
            st_passkey_eval_instance(pk, text, n_text, n, di, depths[di], tr, seed, inst);
            st_kv_cache_reset(&c);
            st_ctx_begin(ctx, 0, 0);
            rc = st_model_decode(m, &c, ctx, inst, n, logits, e);
            int all = 1;
            for (int k = 0; k < dg && !rc; k++) {
                int hit;
                loss += st_answer_nll(logits, V, inst[n + k], &hit);
                all &= hit;
                cell->digits_correct += hit;
                if (k + 1 < dg) rc = st_model_decode(m, &c, ctx, inst + n + k, 1, logits, e);
            }
            cell->correct += all;
            cell->trials++;
        }
        cell->loss = cell->trials ? loss / ((double)cell->trials * dg) : NAN;
    }
    st_kv_cache_free(&c);
    return rc;
}

int st_passkey_eval(st_model *m, st_mm *mm, const st_passkey *pk, const int32_t *text, int64_t n_text, const int64_t *lengths,
                    int n_len, const double *depths, int n_depth, int trials, uint64_t seed, st_passkey_cell *cells,
                    st_error *e) {
    memset(cells, 0, (size_t)n_len * (size_t)n_depth * sizeof *cells);
    if (trials < 1) return st_fail(e, ST_ERR_CONFIG, "passkey: %d trials per cell; at least 1", trials);
    int64_t longest = 0;
    for (int i = 0; i < n_len; i++) longest = lengths[i] > longest ? lengths[i] : longest;
    const int64_t need = longest + pk->digits - st_passkey_overhead(pk);
    if (need > n_text)
        return st_fail(e, ST_ERR_DATA, "passkey: the text has %lld tokens, a %lld-token instance needs %lld of filler",
                       (long long)n_text, (long long)longest, (long long)need);
    st_arena ar;
    st_ctx ctx;
    int32_t *inst = st_malloc((size_t)(longest + pk->digits) * sizeof(int32_t), e);
    float *logits = inst ? st_malloc((size_t)m->cfg.vocab_size * sizeof(float), e) : NULL;
    int rc = logits ? st_arena_init(&ar, (size_t)16 << 20, (size_t)-1, e) : ST_ERR_MEMORY;
    const int have_arena = !rc;
    if (!rc) rc = st_ctx_init(&ctx, &ar, 1 << 14, e);
    if (!rc) ctx.mm = mm;
    const int have_ctx = !rc;
    for (int li = 0; li < n_len && !rc; li++) {
        st_passkey_cell *row = cells + (size_t)li * (size_t)n_depth;
        const int64_t n = lengths[li];
        const int64_t max_len = st_pos_max_len(&m->cfg);
        if (n < st_passkey_overhead(pk) - pk->digits || (max_len > 0 && n + pk->digits > max_len)) {
            /* too short for the format, or past what the positions represent: a row of its own */
            for (int di = 0; di < n_depth; di++) {
                row[di] = (st_passkey_cell){.len = n, .depth = depths[di], .trials = 0, .loss = NAN,
                                            .status = ST_ERR_CONFIG};
            }
            continue;
        }
        st_error le = {0};
        int lrc = eval_length(m, pk, text, n_text, n, depths, n_depth, trials, seed, row, inst, logits, &ctx, &le);
        if (lrc == ST_ERR_MEMORY) { rc = lrc; *e = le; }
        else if (lrc) for (int di = 0; di < n_depth; di++) row[di].status = lrc;
    }
    if (have_ctx) st_ctx_free(&ctx);
    if (have_arena) st_arena_free(&ar);
    free(logits);
    free(inst);
    return rc;
}

int st_passkey_eval_text(st_model *m, st_mm *mm, const st_tokenizer *tok, const st_data_config *data, const char *cfg_file,
                         int split, const int64_t *lengths, int n_len, const double *depths, int n_depth, int trials,
                         uint64_t seed, st_passkey_cell *cells, int *digits, st_error *e) {
    st_passkey pk;
    int rc = st_passkey_init(&pk, tok, data->pk_digits, e);
    if (rc) return rc;
    *digits = pk.digits;
    st_dataset ds;
    memset(&ds, 0, sizeof ds);
    if (!(rc = st_dataset_load(data, cfg_file, &ds, e)))
        rc = st_passkey_eval(m, mm, &pk, ds.tokens[split], ds.n[split], lengths, n_len, depths, n_depth, trials, seed,
                             cells, e);
    st_dataset_free(&ds);
    return rc;
}
