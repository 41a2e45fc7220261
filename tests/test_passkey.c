/* test_passkey.c - passkey retrieval in real text (src/data/passkey.c, the loader's
 * insertion, src/eval/passkey_eval.c):
 *   - the pieces in the byte tokenizer; refused: digits 0 or 17, a synthetic tokenizer;
 *   - an instance's layout, exact: the needle starts at round(d (n - needle - query)) for
 *     d = 0, 0.5, 1, the query ends the prompt, the answer (the key) follows it, the filler
 *     is the text in order around the needle; st_passkey_token equals st_passkey_build;
 *     keys are reproducible by seed and differ between seeds;
 *   - the loader at rate 1: every window is an instance over its own text (y = x shifted,
 *     the needle's key is the window's last digits), the same batch for the same draws;
 *     at rate 0.5 about half the windows (binomial bound);
 *   - the evaluation through the KV cache: one trial's answer loss equals the mean of the
 *     full forward's per-token losses at the answer positions, and it is counted correct
 *     exactly when the full forward's argmax is the answer at each of them. */
#include "harness.h"
#include "test_model_util.h"
#include "st_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_pieces(st_passkey *pk, st_tokenizer *byte) {
    st_error e = {0};
    CHECK(st_passkey_init(pk, byte, 5, &e) == ST_OK);
    CHECK(pk->n_pre == 10 && pk->n_suf == 1 && pk->digits == 5);
    CHECK(pk->pre[0] == ' ' && pk->pre[1] == 'p' && pk->pre[9] == ' ' && pk->suf[0] == '.');
    CHECK(pk->digit[0] == '0' && pk->digit[9] == '9');
    CHECK(st_passkey_overhead(pk) == 10 + 5 + 1 + 10 + 5);
    st_passkey bad;
    CHECK(st_passkey_init(&bad, byte, 0, &e) == ST_ERR_CONFIG && strstr(e.msg, "data.passkey.digits"));
    CHECK(st_passkey_init(&bad, byte, 17, &e) == ST_ERR_CONFIG);
}

static void test_layout(const st_passkey *pk) {
    const int64_t n = 100;
    const int64_t needle = pk->n_pre + pk->digits + pk->n_suf, nf = n - needle - pk->n_pre;
    int32_t filler[200], out[200], key[5], key2[5];
    for (int i = 0; i < 200; i++) filler[i] = 1000 + i;   /* ids no piece uses */
    st_passkey_key(pk, 7, key);
    st_passkey_key(pk, 7, key2);
    CHECK(memcmp(key, key2, sizeof key) == 0);
    st_passkey_key(pk, 8, key2);
    CHECK_MSG(memcmp(key, key2, sizeof key) != 0, "seeds 7 and 8 give the same key");
    const double depths[3] = {0.0, 0.5, 1.0};
    const int64_t starts[3] = {0, (int64_t)(0.5 * (double)nf + 0.5), nf};
    for (int k = 0; k < 3; k++) {
        CHECK(st_passkey_build(pk, filler, n, depths[k], key, out) == n);
        const int64_t a = starts[k];
        int ok = 1;
        for (int64_t i = 0; i < a; i++) ok &= out[i] == filler[i];
        ok &= memcmp(out + a, pk->pre, (size_t)pk->n_pre * sizeof(int32_t)) == 0;
        ok &= memcmp(out + a + pk->n_pre, key, sizeof key) == 0;
        ok &= out[a + pk->n_pre + 5] == pk->suf[0];
        for (int64_t i = 0; i < nf - a; i++) ok &= out[a + needle + i] == filler[a + i];
        ok &= memcmp(out + n - pk->n_pre, pk->pre, (size_t)pk->n_pre * sizeof(int32_t)) == 0;
        ok &= memcmp(out + n, key, sizeof key) == 0;
        CHECK_MSG(ok, "layout at depth %.1f (needle at %lld)", depths[k], (long long)a);
        int same = 1;
        for (int64_t i = 0; i < n + 5; i++) same &= st_passkey_token(pk, filler, n, depths[k], key, i) == out[i];
        CHECK_MSG(same, "st_passkey_token differs from st_passkey_build at depth %.1f", depths[k]);
    }
}

static void test_loader(const st_passkey *pk) {
    const int64_t N = 5000, B = 64, T = 48;
    int32_t *text = malloc((size_t)N * sizeof(int32_t));
    for (int64_t i = 0; i < N; i++) text[i] = 'a' + (int32_t)(i % 26);   /* no piece tokens */
    int32_t *x = malloc((size_t)(B * T) * sizeof(int32_t)), *y = malloc((size_t)(B * T) * sizeof(int32_t));
    int32_t *x2 = malloc((size_t)(B * T) * sizeof(int32_t));
    st_loader l;
    st_loader_init(&l, text, N, 3);
    l.pk = pk;
    l.pk_rate = 1.0;
    st_loader_next(&l, B, T, x, y);
    int shifted = 1, keyed = 1;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *xb = x + b * T, *yb = y + b * T;
        for (int64_t t = 0; t + 1 < T; t++) shifted &= yb[t] == xb[t + 1];
        /* the needle: the first " pass key " in x; its key = the window's last 5 targets */
        int64_t at = -1;
        for (int64_t t = 0; t + pk->n_pre <= T && at < 0; t++)
            if (memcmp(xb + t, pk->pre, (size_t)pk->n_pre * sizeof(int32_t)) == 0) at = t;
        keyed &= at >= 0 && memcmp(xb + at + pk->n_pre, yb + T - 5, 5 * sizeof(int32_t)) == 0;
    }
    CHECK_MSG(shifted, "y is not x shifted by one in passkey windows");
    CHECK_MSG(keyed, "a window's answer is not the key of its needle");
    l.draws = 0;
    st_loader_next(&l, B, T, x2, y);
    CHECK_MSG(memcmp(x, x2, (size_t)(B * T) * sizeof(int32_t)) == 0, "same draws, another batch");
    /* rate 0.5 over 4096 windows: count those holding " pass key "; sd = 32 */
    l.pk_rate = 0.5;
    l.draws = 0;
    int64_t with = 0;
    for (int r = 0; r < 64; r++) {
        st_loader_next(&l, B, T, x, y);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t + pk->n_pre <= T; t++)
                if (memcmp(x + b * T + t, pk->pre, (size_t)pk->n_pre * sizeof(int32_t)) == 0) { with++; break; }
    }
    CHECK_MSG(llabs(with - 2048) < 6 * 32, "rate 0.5: %lld of 4096 windows have a passkey", (long long)with);
    free(text); free(x); free(y); free(x2);
}

/* The cache path against the full forward on the same instance. */
static void test_eval_matches_forward(const st_passkey *pk) {
    const int64_t n = 40;
    st_model_config c;
    base_cfg(&c, ST_POS_ALIBI);
    c.vocab_size = 256; c.d_model = 16; c.n_heads = 2; c.n_layers = 2; c.max_len = 128;
    st_model m;
    make_model_cfg(&m, &c, 5);
    int32_t text[300];
    for (int i = 0; i < 300; i++) text[i] = 'a' + (i * 7) % 26;
    const double depth = 0.25;
    st_passkey_cell cell;
    st_error e = {0};
    CHECK(st_passkey_eval(&m, NULL, pk, text, 300, &n, 1, &depth, 1, 1, 9, &cell, &e) == ST_OK);
    CHECK(cell.trials == 1 && cell.status == ST_OK);
    /* no trials is refused, so a cell's ST_OK status alone means it was evaluated */
    st_error ze = {0};
    st_passkey_cell none;
    CHECK(st_passkey_eval(&m, NULL, pk, text, 300, &n, 1, &depth, 1, 0, 9, &none, &ze) == ST_ERR_CONFIG);
    CHECK_MSG(strstr(ze.msg, "0 trials per cell") != NULL, "%s", ze.msg);
    int32_t inst[64], tg[64];
    float tok[64];
    st_passkey_eval_instance(pk, text, 300, n, 0, depth, 0, 9, inst);
    for (int64_t t = 0; t < n + 4; t++) tg[t] = t >= n - 1 ? inst[t + 1] : -1;   /* the answer's targets */
    st_arena ar; st_ctx ctx;
    st_arena_init(&ar, 1 << 20, (size_t)1 << 30, &e);
    st_ctx_init(&ctx, &ar, 4096, &e);
    st_ctx_begin(&ctx, 0, 0);
    st_tensor *loss = st_model_loss(&m, &ctx, inst, tg, 1, n + 4, 0, tok, &e);
    st_tensor *lg = st_model_logits(&m, &ctx, inst, 1, n + 4, 0, &e);
    CHECK(loss && lg);
    if (loss && lg) {
        CHECK_MSG(fabs((double)loss->data[0] - cell.loss) <= 1e-4 * fabs(cell.loss),
                  "cached answer loss %.6f vs full forward %.6f", cell.loss, loss->data[0]);
        int all = 1;
        for (int64_t t = n - 1; t < n + 4; t++) {
            const float *z = lg->data + t * 256;
            int am = 0;
            for (int v = 1; v < 256; v++) if (z[v] > z[am]) am = v;
            all &= am == inst[t + 1];
        }
        CHECK_MSG(all == cell.correct, "cache says %d correct, the full forward's argmax says %d", cell.correct, all);
    }
    st_ctx_free(&ctx); st_arena_free(&ar);
    st_model_free(&m);
}

int main(void) {
    st_set_threads(2);
    st_error e = {0};
    st_tokenizer *byte = st_tokenizer_new_byte(&e);
    CHECK(byte != NULL);
    st_passkey pk;
    test_pieces(&pk, byte);
    test_layout(&pk);
    test_loader(&pk);
    test_eval_matches_forward(&pk);
    st_tokenizer_free(byte);
    return test_finish("test_passkey");
}
