/* test_attention_doc.c - the per-instance (document) mask of packed rows,
 * st_attention_doc (data.task.doc_mask): row i of batch row b sees keys
 * [doc[b T + i], i] only.
 *   - each instance of a packed row attends exactly as if it were alone: the grad-mode
 *     and the streamed (inference) outputs of every row equal the double reference run
 *     on the instance's own slice (no bias, and a distance bias, which does not care where
 *     the instance starts);
 *   - gradcheck of q, k, v and a learnable distance table through the masked op, across
 *     the 64-row query block, with attention dropout;
 *   - the keys before an instance get no gradient from it: dK, dV of instance 0 are
 *     exactly 0 when the loss weights only later instances' outputs.
 * The whole-model equivalence against PyTorch is in test_pytorch_ref.c (doc cases). */
#include "test_attention_util.h"
#include "test_attn_reference.h"

typedef struct slope_bias { float slope[4]; } slope_bias;

static void slope_fill(const st_attn_bias *self, int h, int64_t d0, int64_t n, float *out) {
    const slope_bias *a = self->state;
    for (int64_t k = 0; k < n; k++) {
        const int64_t d = d0 + k, ad = d < 0 ? -d : d;
        out[k] = -a->slope[h] * (float)ad;
    }
}

/* instance starts of B rows of T tokens: instances of lengths 1..max_len cycling by seed */
static void make_doc(int32_t *doc, int64_t B, int64_t T, int64_t max_len, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0, s = 0, len = 0; t < T; t++) {
            if (t == s + len) { s = t; len = 1 + (int64_t)st_rng_below(&r, (uint64_t)max_len); }
            doc[b * T + t] = (int32_t)s;
        }
}

/* rows [s, e) of pair (b, h) of a (B,H,T,D) array into a (1,H,e-s,D) one, and back */
static void slice_rows(const float *x, float *out, int64_t b, int64_t H, int64_t T, int64_t D, int64_t s, int64_t e) {
    for (int64_t h = 0; h < H; h++)
        memcpy(out + h * (e - s) * D, x + ((b * H + h) * T + s) * D, (size_t)((e - s) * D) * sizeof(float));
}

static void test_instances_alone(void) {
    static const int64_t Ts[] = {9, 64, 150};
    env E;
    env_init(&E);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int64_t T = Ts[ti], B = 2, H = 2, D = 8, n = B * H * T * D;
        qkv s;
        qkv_init(&s, B, H, T, D, 30 + ti, 1.0f);
        int32_t *doc = malloc((size_t)(B * T) * sizeof(int32_t));
        make_doc(doc, B, T, T > 64 ? 40 : 5, 7 + ti);
        slope_bias sb = {{0.5f, 0.0625f}};
        st_attn_bias bs = {.fill = slope_fill, .state = &sb};
        const st_attn_bias *biases[2] = {NULL, &bs};
        float *ref = malloc((size_t)n * sizeof(float)), *sq = malloc((size_t)n * sizeof(float));
        float *sk = malloc((size_t)n * sizeof(float)), *sv = malloc((size_t)n * sizeof(float));
        float *so = malloc((size_t)n * sizeof(float));
        for (int bi = 0; bi < 2; bi++) {
            /* the reference: every instance on its own, rows written back in place */
            for (int64_t b = 0; b < B; b++)
                for (int64_t st = 0; st < T;) {
                    int64_t en = st;
                    while (en < T && doc[b * T + en] == st) en++;
                    slice_rows(s.q->data, sq, b, H, T, D, st, en);
                    slice_rows(s.k->data, sk, b, H, T, D, st, en);
                    slice_rows(s.v->data, sv, b, H, T, D, st, en);
                    ref_attention(sq, sk, sv, so, 1, H, en - st, D, biases[bi], 1, 0.0f);
                    for (int64_t h = 0; h < H; h++)
                        memcpy(ref + ((b * H + h) * T + st) * D, so + h * (en - st) * D,
                               (size_t)((en - st) * D) * sizeof(float));
                    st = en;
                }
            for (int grad = 1; grad >= 0; grad--) {
                char what[96];
                st_ctx_begin(&E.ctx, grad, 0);
                st_tensor *o = st_attention_doc(&E.ctx, s.q, s.k, s.v, biases[bi], 1, 0.0f, 0.0f, 0, doc);
                snprintf(what, sizeof what, "%s T=%lld bias=%d: instances alone", grad ? "grad-mode" : "streamed",
                         (long long)T, bi);
                CHECK_MSG(o && E.ctx.n_nodes == grad, "%s: nodes %d", what, E.ctx.n_nodes);
                if (o) th_close(what, o->data, ref, n, 1e-5, 1e-5);
            }
            /* and the mask matters: without it the outputs differ */
            st_ctx_begin(&E.ctx, 0, 0);
            st_tensor *o = st_attention(&E.ctx, s.q, s.k, s.v, biases[bi], 1, 0.0f, 0.0f, 0);
            double diff = 0;
            for (int64_t x = 0; o && x < n; x++) TH_MAX(diff, fabs((double)o->data[x] - ref[x]));
            CHECK_MSG(diff > 1e-3, "T=%lld bias=%d: the unmasked op equals the per-instance reference (%g)",
                      (long long)T, bi, diff);
        }
        free(ref); free(sq); free(sk); free(sv); free(so); free(doc);
        st_params_free(&s.p);
    }
    env_free(&E);
}

typedef struct doc_case { qkv *s; const st_attn_bias *bias; float p; const int32_t *doc; } doc_case;

static st_tensor *doc_build(st_ctx *ctx, void *user) {
    doc_case *c = user;
    return st_attention_doc(ctx, c->s->q, c->s->k, c->s->v, c->bias, 1, 0.0f, c->p, 77, c->doc);
}

/* gradcheck of q, k, v and a learnable distance table through the masked op: B rows of
 * T tokens in instances of 1..max_len tokens; dropout p (0: none) */
static void gradcheck_doc(const char *name, int64_t B, int64_t T, int64_t D, int64_t max_len, float p, int every) {
    const double eps = 1e-2, atol = 2e-4, rtol = 2e-3;   /* as test_attention.c's gradcheck */
    qkv s;
    qkv_init(&s, B, 2, T, D, (uint64_t)T, 0.7f);
    int32_t *doc = malloc((size_t)(B * T) * sizeof(int32_t));
    make_doc(doc, B, T, max_len, 5);
    table_bias tb = {s.w, T};
    st_attn_bias bt = make_table(&tb);
    st_tensor *leaves[4] = {s.q, s.k, s.v, s.w};
    doc_case c = {&s, &bt, p, doc};
    gradcheck(name, doc_build, &c, leaves, 4, p > 0, eps, atol, rtol, every);
    free(doc);
    st_params_free(&s.p);
}

static void test_gradcheck_doc(void) {
    gradcheck_doc("doc mask, table bias", 2, 9, 4, 4, 0.0f, 0);
    gradcheck_doc("doc mask, table bias, dropout .2", 2, 9, 4, 4, 0.2f, 0);
    gradcheck_doc("doc mask T70", 1, 70, 3, 30, 0.0f, 40);   /* across the 64-row query block */
}

/* the loss weights rows of the second instance on: keys and values of the first get 0 */
static void test_no_leak(void) {
    env E;
    env_init(&E);
    const int64_t B = 1, H = 2, T = 12, D = 4, cut = 5;
    qkv s;
    qkv_init(&s, B, H, T, D, 8, 0.5f);
    int32_t doc[12];
    for (int64_t t = 0; t < T; t++) doc[t] = t < cut ? 0 : (int32_t)cut;
    float r[2 * 12 * 4];
    st_rng rng;
    st_rng_seed(&rng, 2);
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) r[(h * T + t) * D + d] = t < cut ? 0.0f : st_rng_normal(&rng);
    st_params_zero_grad(&s.p);
    st_ctx_begin(&E.ctx, 1, 0);
    st_error e = {0};
    st_tensor *loss = wsum(&E.ctx, st_attention_doc(&E.ctx, s.q, s.k, s.v, NULL, 1, 0.0f, 0.0f, 0, doc), r);
    CHECK(loss && st_backward(&E.ctx, loss, 1.0f, &e) == ST_OK);
    int zero = 1, some = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) {
                const int64_t x = (h * T + t) * D + d;
                if (t < cut) zero &= s.k->grad[x] == 0.0f && s.v->grad[x] == 0.0f && s.q->grad[x] == 0.0f;
                else some |= s.k->grad[x] != 0.0f;
            }
    CHECK_MSG(zero, "the first instance received gradient from the second's loss");
    CHECK(some);
    st_params_free(&s.p);
    env_free(&E);
}

int main(void) {
    test_instances_alone();
    test_gradcheck_doc();
    test_no_leak();
    return test_finish("test_attention_doc");
}
