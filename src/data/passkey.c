/* passkey.c - passkey retrieval in real text (Mohtashami & Jaggi 2023, arXiv 2305.16300;
 * the test of PI, arXiv 2306.15595, and YaRN, arXiv 2309.00071), in the run's own
 * tokenizer. An instance of n tokens is text with a needle at depth d and a query at the
 * end, the answer following:
 *     filler[0, a)  needle  filler[a, ...)  query | answer      (n tokens | digits)
 *     needle = PRE key SUF,  query = PRE,  answer = key
 * with PRE = " pass key " and SUF = "." encoded by the tokenizer, and the key `digits`
 * decimal digits, one token each (so a key is as long in every tokenizer that has the
 * digits: byte, BPE, and word level when "0".."9" are words of its vocabulary; the digits
 * are separated by spaces there). The needle starts at a = round(d (n - needle - query)),
 * so d = 0 puts it first and d = 1 right before the query. The format is short on purpose:
 * it fits a 64-byte training window with room for filler (22 + 9 bytes with 5 digits).
 * Retrieving the key needs attention from the query's end back to the needle: an
 * induction-style copy at a distance that the depth and the length set. */
#include "st_data.h"

#include <string.h>

static int encode_piece(const st_tokenizer *t, const char *text, int32_t *out, int cap, const char *what,
                        st_error *e) {
    /* returns the token count, or -1 with *e set */
    int64_t n = st_tokenizer_encode(t, text, (int64_t)strlen(text), out, cap);
    if (n < 1 || n > cap) {
        st_fail(e, ST_ERR_DATA, "data.passkey: the %s \"%s\" takes %lld tokens in this tokenizer (1..%d)", what, text,
                (long long)n, cap);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        if (out[i] < 0) {
            st_fail(e, ST_ERR_DATA, "data.passkey: the %s \"%s\" has a word this vocabulary lacks", what, text);
            return -1;
        }
    return (int)n;
}

int st_passkey_init(st_passkey *pk, const st_tokenizer *t, int digits, st_error *e) {
    memset(pk, 0, sizeof *pk);
    if (digits < 1 || digits > ST_PASSKEY_MAX_DIGITS)
        return st_fail(e, ST_ERR_CONFIG, "data.passkey.digits: %d, must be in [1, %d]", digits, ST_PASSKEY_MAX_DIGITS);
    const int kind = st_tokenizer_kind(t);
    if (kind == ST_TOK_SYNTHETIC || kind == ST_TOK_TASK)
        return st_fail(e, ST_ERR_CONFIG, "data.passkey: needs a text tokenizer (byte, bpe or word), not %s ids",
                       kind == ST_TOK_TASK ? "task" : "synthetic");
    pk->digits = digits;
    int n = encode_piece(t, " pass key ", pk->pre, ST_PASSKEY_MAX_PIECE, "prefix", e);
    if (n < 0) return ST_ERR_DATA;
    pk->n_pre = n;
    n = encode_piece(t, ".", pk->suf, ST_PASSKEY_MAX_PIECE, "suffix", e);
    if (n < 0) return ST_ERR_DATA;
    pk->n_suf = n;
    for (int d = 0; d < 10; d++) {
        char s[2] = {(char)('0' + d), 0};
        int32_t tok[4];
        n = encode_piece(t, s, tok, 4, "digit", e);
        if (n < 0) return ST_ERR_DATA;
        if (n != 1) return st_fail(e, ST_ERR_DATA, "data.passkey: the digit %d is %d tokens, not one", d, n);
        pk->digit[d] = tok[0];
    }
    return ST_OK;
}

int64_t st_passkey_overhead(const st_passkey *pk) {
    return (int64_t)(2 * pk->n_pre + pk->n_suf + 2 * pk->digits);
}

void st_passkey_key(const st_passkey *pk, uint64_t seed, int32_t *key) {
    for (int i = 0; i < pk->digits; i++) key[i] = pk->digit[st_hash64(seed, (uint64_t)i) % 10];
}

/* Token i of the instance (0 <= i < n + digits): the layout of the header comment. */
int32_t st_passkey_token(const st_passkey *pk, const int32_t *filler, int64_t n, double depth, const int32_t *key,
                         int64_t i) {
    const int64_t needle = pk->n_pre + pk->digits + pk->n_suf;
    ST_ASSERT(n >= needle + pk->n_pre && depth >= 0.0 && depth <= 1.0 && i >= 0 && i < n + pk->digits);
    const int64_t nf = n - needle - pk->n_pre;   /* filler tokens: n = filler + needle + query */
    const int64_t a = (int64_t)(depth * (double)nf + 0.5);
    if (i < a) return filler[i];
    i -= a;
    if (i < pk->n_pre) return pk->pre[i];
    if (i < pk->n_pre + pk->digits) return key[i - pk->n_pre];
    if (i < needle) return pk->suf[i - pk->n_pre - pk->digits];
    i -= needle;
    if (i < nf - a) return filler[a + i];
    i -= nf - a;
    if (i < pk->n_pre) return pk->pre[i];
    return key[i - pk->n_pre];
}

int64_t st_passkey_build(const st_passkey *pk, const int32_t *filler, int64_t n, double depth, const int32_t *key,
                         int32_t *out) {
    for (int64_t i = 0; i < n + pk->digits; i++) out[i] = st_passkey_token(pk, filler, n, depth, key, i);
    return n;
}
