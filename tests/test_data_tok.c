/* test_data_tok.c - tokenizers: BPE training (determinism, compression), round trips
 * decode(encode(x)) == x on random bytes, NUL-free binary and UTF-8 text, the pre-split
 * (chunks cover the input, never straddle a safe block cut), encode/decode edge cases,
 * tokenizer files (save/load for every kind) and corrupt or mismatched tokenizer files. */
#include "harness.h"
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
    "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who",
    "so", "no", "king", "queen", "lord", "thou", "thee", "sweet", "night", "death", "love", "heaven", "tomorrow",
    "1926", "3.14", "café", "naïve", "Straße", "東京", "смерть", "🙂"};

/* English-like text: Zipf-ish word choice, punctuation, line breaks, blank lines */
static char *make_text(uint64_t seed, int64_t n, int64_t *len) {
    st_rng r;
    st_rng_seed(&r, seed);
    char *s = malloc((size_t)n + 64);
    int64_t k = 0;
    int nw = (int)(sizeof words / sizeof words[0]);
    while (k < n) {
        double u = st_rng_uniform(&r);
        int w = (int)((double)nw * u * u * u);
        const char *x = words[w];
        size_t l = strlen(x);
        if (k > 0 && s[k - 1] != '\n') s[k++] = ' ';
        if (st_rng_uniform(&r) < 0.1 && k + 1 < n) { memcpy(s + k, x, l); s[k] = (char)(s[k] >= 'a' && s[k] <= 'z' ? s[k] - 32 : s[k]); }
        else memcpy(s + k, x, l);
        k += (int64_t)l;
        double p = st_rng_uniform(&r);
        if (p < 0.05) s[k++] = ',';
        else if (p < 0.08) { s[k++] = '.'; s[k++] = '\n'; if (st_rng_uniform(&r) < 0.3) s[k++] = '\n'; }
        else if (p < 0.09) { s[k++] = '\t'; s[k++] = '!'; }
    }
    *len = k;
    s[k] = 0;
    return s;
}

static int roundtrip(const st_tokenizer *t, const char *x, int64_t n, int64_t *ntok) {
    int64_t cnt = st_tokenizer_encode(t, x, n, NULL, 0);
    if (cnt < 0) return 0;
    int32_t *ids = malloc((size_t)(cnt + 1) * sizeof *ids);
    int64_t cnt2 = st_tokenizer_encode(t, x, n, ids, cnt);
    char *back = malloc((size_t)n + 1);
    int64_t m = st_tokenizer_decode(t, ids, cnt, back, n + 1);
    int ok = cnt2 == cnt && m == n && !memcmp(back, x, (size_t)n);
    for (int64_t i = 0; i < cnt; i++) ok &= ids[i] >= 0 && ids[i] < st_tokenizer_vocab_size(t);
    if (ntok) *ntok = cnt;
    free(ids);
    free(back);
    return ok;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static st_tokenizer *train_english(int vocab, char **text, int64_t *len) {
    *text = make_text(1, 300000, len);
    st_error e = {0};
    st_tokenizer *t = st_tokenizer_train_bpe(*text, *len, vocab, &e);
    CHECK_MSG(t != NULL, "train: %s", e.msg);
    return t;
}

static void test_chunks(void) {
    int64_t len;
    char *s = make_text(7, 20000, &len);
    const unsigned char *u = (const unsigned char *)s;
    /* chunks tile the input, are non-empty and at most SD_BPE_MAX_CHUNK long */
    int ok = 1;
    char *is_b = calloc((size_t)len + 1, 1);
    for (int64_t i = 0; i < len;) {
        int64_t j = st_sd_bpe_chunk_end(u, len, i);
        ok &= j > i && j - i <= SD_BPE_MAX_CHUNK;
        is_b[i] = 1;
        i = j;
    }
    is_b[len] = 1;
    CHECK(ok);
    /* every safe cut is a chunk boundary, and the prefix chunks the same way */
    int cuts = 0;
    for (int64_t p = 1; p < len; p++) {
        if (!(s[p - 1] == '\n' && s[p] != '\n' && s[p] != '\r')) continue;
        cuts++;
        ok &= is_b[p];
        if (cuts % 50 == 0)
            for (int64_t i = 0; i < p;) {
                int64_t j = st_sd_bpe_chunk_end(u, p, i);
                ok &= is_b[i] && j <= p;
                i = j;
            }
    }
    CHECK_MSG(ok && cuts > 50, "%d safe cuts checked", cuts);
    CHECK(st_sd_safe_cut("ab\ncd\n\nef", 9) == 7 && st_sd_safe_cut("abc", 3) == 0 && st_sd_safe_cut("a\n\n", 3) == 0);
    /* examples: a space joins the following word; newline runs end a chunk */
    const char *ex = "Hello  world,\n\n  foo123";
    const char *want[] = {"Hello", " ", " world", ",", "\n\n", " ", " foo", "123"};
    int64_t i = 0, k = 0, n = (int64_t)strlen(ex);
    int exok = 1;
    while (i < n && k < 8) {
        int64_t j = st_sd_bpe_chunk_end((const unsigned char *)ex, n, i);
        exok &= (int64_t)strlen(want[k]) == j - i && !memcmp(ex + i, want[k], (size_t)(j - i));
        i = j;
        k++;
    }
    CHECK_MSG(exok && i == n && k == 8, "pre-split of \"Hello  world,\\n\\n  foo123\"");
    free(is_b);
    free(s);
}

static void test_bpe_train(void) {
    char *text;
    int64_t len;
    double t0 = st_time();
    st_tokenizer *t = train_english(600, &text, &len);
    double dt = st_time() - t0;
    if (!t) return;
    CHECK(st_tokenizer_kind(t) == ST_TOK_BPE && st_tokenizer_vocab_size(t) == 600);
    /* deterministic */
    st_error e = {0};
    st_tokenizer *t2 = st_tokenizer_train_bpe(text, len, 600, &e);
    CHECK(t2 && st_tokenizer_hash(t2) == st_tokenizer_hash(t) && !memcmp(t2->merges, t->merges, (size_t)t->n_merges * sizeof *t->merges));
    st_tokenizer_free(t2);
    /* compresses its own text; round trip */
    int64_t ntok = 0;
    CHECK(roundtrip(t, text, len, &ntok));
    CHECK_MSG(ntok < len / 2, "english: %lld tokens for %lld bytes", (long long)ntok, (long long)len);
    printf("  BPE 600 on %lld bytes of text: %.3f s, %.2f bytes/token\n", (long long)len, dt, (double)len / (double)ntok);
    /* the first merge is the most frequent adjacent pair within chunks, ties to the smallest */
    int64_t *cnt = calloc(256 * 256, sizeof *cnt);
    for (int64_t i = 0; i < len;) {
        int64_t j = st_sd_bpe_chunk_end((const unsigned char *)text, len, i);
        for (int64_t q = i; q + 1 < j; q++) cnt[(unsigned char)text[q] * 256 + (unsigned char)text[q + 1]]++;
        i = j;
    }
    int best = 0;
    for (int k = 1; k < 256 * 256; k++) if (cnt[k] > cnt[best]) best = k;
    CHECK_MSG(t->merges[0][0] == best / 256 && t->merges[0][1] == best % 256, "first merge (%d,%d), brute force (%d,%d)",
              t->merges[0][0], t->merges[0][1], best / 256, best % 256);
    free(cnt);
    /* a tiny text runs out of pairs: fewer tokens, still consistent */
    st_tokenizer *small = st_tokenizer_train_bpe("abab", 4, 1000, &e);
    CHECK(small && st_tokenizer_vocab_size(small) == 256 + 2 && roundtrip(small, "ababab", 6, NULL));
    st_tokenizer_free(small);
    CHECK(st_tokenizer_train_bpe("abc", 3, 200, &e) == NULL && e.code == ST_ERR_CONFIG);
    st_tokenizer_free(t);
    free(text);
}

static void test_roundtrips(void) {
    char *text;
    int64_t len;
    st_tokenizer *t = train_english(500, &text, &len);
    if (!t) return;
    st_error e = {0};
    st_tokenizer *byte = st_tokenizer_new_byte(&e);
    st_rng r;
    st_rng_seed(&r, 3);
    int ok_rand = 1, ok_nul_free = 1, ok_utf8 = 1;
    char *buf = malloc(5000);
    for (int trial = 0; trial < 200; trial++) {
        int64_t n = (int64_t)st_rng_below(&r, 3000);
        for (int64_t i = 0; i < n; i++) buf[i] = (char)st_rng_below(&r, 256);          /* any bytes, NUL too */
        ok_rand &= roundtrip(t, buf, n, NULL) && roundtrip(byte, buf, n, NULL);
        for (int64_t i = 0; i < n; i++) buf[i] = (char)(1 + st_rng_below(&r, 255));    /* NUL-free binary */
        ok_nul_free &= roundtrip(t, buf, n, NULL);
        int64_t k = 0;                                                               /* random UTF-8 */
        while (k < n) {
            uint32_t cp = (uint32_t)st_rng_below(&r, 4) == 0 ? (uint32_t)st_rng_below(&r, 0x80)
                                                                : 0x80 + (uint32_t)st_rng_below(&r, 0x10FF80);
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            if (cp < 0x80) buf[k++] = (char)cp;
            else if (cp < 0x800) { buf[k++] = (char)(0xC0 | cp >> 6); buf[k++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) { buf[k++] = (char)(0xE0 | cp >> 12); buf[k++] = (char)(0x80 | (cp >> 6 & 63)); buf[k++] = (char)(0x80 | (cp & 63)); }
            else { buf[k++] = (char)(0xF0 | cp >> 18); buf[k++] = (char)(0x80 | (cp >> 12 & 63)); buf[k++] = (char)(0x80 | (cp >> 6 & 63)); buf[k++] = (char)(0x80 | (cp & 63)); }
        }
        ok_utf8 &= roundtrip(t, buf, k, NULL);
    }
    CHECK(ok_rand);
    CHECK(ok_nul_free);
    CHECK(ok_utf8);
    /* fresh English text from another seed: round trip and real compression */
    int64_t l2, nt;
    char *other = make_text(99, 50000, &l2);
    CHECK(roundtrip(t, other, l2, &nt) && nt < l2 / 2);
    CHECK(roundtrip(t, "", 0, &nt) && nt == 0);
    /* encode into a short buffer: full count returned, only cap written */
    int32_t few[3] = {-7, -7, -7};
    int64_t full = st_tokenizer_encode(t, other, 200, NULL, 0);
    CHECK(st_tokenizer_encode(t, other, 200, few, 2) == full && few[0] >= 0 && few[1] >= 0 && few[2] == -7);
    /* decode: bad ids, snprintf semantics */
    int32_t bad[2] = {5, 500};
    char out[16];
    CHECK(st_tokenizer_decode(t, bad, 2, out, sizeof out) == -1);
    bad[1] = -1;
    CHECK(st_tokenizer_decode(t, bad, 2, out, sizeof out) == -1);
    CHECK(st_tokenizer_decode(byte, bad, 2, out, sizeof out) == -1);
    int32_t hello[5] = {'h', 'e', 'l', 'l', 'o'};
    CHECK(st_tokenizer_decode(byte, hello, 5, out, 3) == 5 && !strcmp(out, "he"));
    CHECK(st_tokenizer_decode(byte, hello, 5, NULL, 0) == 5);
    free(other);
    free(buf);
    st_tokenizer_free(byte);
    st_tokenizer_free(t);
    free(text);
}

static st_tokenizer *load_word_vocab(const char *dir, const char *train, st_error *e) {
    char p[1200];
    snprintf(p, sizeof p, "%s/train.txt", dir); write_file(p, train, strlen(train));
    snprintf(p, sizeof p, "%s/valid.txt", dir); write_file(p, "a b\n", 4);
    snprintf(p, sizeof p, "%s/test.txt", dir); write_file(p, "b a\n", 4);
    st_data_config c;
    st_data_config_default(&c);
    strcpy(c.source, "wikitext");
    snprintf(c.path, sizeof c.path, "%s", dir);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache", dir);
    st_dataset ds;
    if (st_dataset_load(&c, "t.json", &ds, e)) return NULL;
    st_tokenizer *t = ds.tok;
    ds.tok = NULL;
    st_dataset_free(&ds);
    return t;
}

static void test_word_tokenizer(const char *tmp) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/w1", tmp);
    mkdir(dir, 0755);
    st_error e = {0};
    st_tokenizer *t = load_word_vocab(dir, " a b <unk> \n\n c \xff\xfe a\n", &e);
    CHECK_MSG(t != NULL, "%s", e.msg);
    if (!t) return;
    CHECK(st_tokenizer_kind(t) == ST_TOK_WORD && st_tokenizer_vocab_size(t) == 6);
    int32_t ids[16];
    /* ids by first appearance: a=0 b=1 <unk>=2 <eos>=3 c=4 \xff\xfe=5 */
    CHECK(st_tokenizer_encode(t, "a b\nc zzz", 9, ids, 16) == 5 && ids[0] == 0 && ids[1] == 1 && ids[2] == 3 &&
          ids[3] == 4 && ids[4] == 2);
    char out[64];
    int32_t seq[6] = {0, 1, 3, 4, 5, 3};
    CHECK(st_tokenizer_decode(t, seq, 6, out, sizeof out) == 9 && !strcmp(out, "a b\nc \xff\xfe\n"));
    /* save / load keeps ids and hash (the non-UTF-8 word goes through {"hex": ...}) */
    char p[1200];
    snprintf(p, sizeof p, "%s/word.json", tmp);
    CHECK(st_tokenizer_save(t, p, &e) == ST_OK);
    st_tokenizer *u = st_tokenizer_load(p, &e);
    CHECK_MSG(u && st_tokenizer_hash(u) == st_tokenizer_hash(t) && st_tokenizer_vocab_size(u) == 6, "%s", e.msg);
    int64_t blen;
    char *txt = st_sd_read_file(p, &blen, 1 << 20, &e);
    CHECK(txt && strstr(txt, "{\"hex\":\"fffe\"}"));
    free(txt);
    if (u) {
        int32_t ids2[16];
        CHECK(st_tokenizer_encode(u, "a b\nc zzz", 9, ids2, 16) == 5 && !memcmp(ids, ids2, 5 * sizeof *ids));
    }
    st_tokenizer_free(u);
    st_tokenizer_free(t);
    /* without <unk>, an unknown word is an error (-1) */
    snprintf(dir, sizeof dir, "%s/w2", tmp);
    mkdir(dir, 0755);
    t = load_word_vocab(dir, "a b\n", &e);
    CHECK(t && st_tokenizer_encode(t, "a q", 3, ids, 16) == -1 && st_tokenizer_encode(t, "b a", 3, ids, 16) == 2);
    st_tokenizer_free(t);
}

static void expect_load_error(const char *path, int code, const char *what) {
    st_error e = {0};
    st_tokenizer *t = st_tokenizer_load(path, &e);
    CHECK_MSG(!t && e.code == code && strstr(e.msg, path) && (!what || strstr(e.msg, what)),
              "loading %s: expected code %d mentioning \"%s\", got %d: %s", path, code, what ? what : "", e.code, e.msg);
    st_tokenizer_free(t);
}

static void test_tokenizer_files(const char *tmp) {
    char *text;
    int64_t len;
    st_tokenizer *t = train_english(400, &text, &len);
    if (!t) return;
    st_error e = {0};
    char p[1200], q[1200];
    snprintf(p, sizeof p, "%s/bpe.json", tmp);
    CHECK(st_tokenizer_save(t, p, &e) == ST_OK);
    st_tokenizer *u = st_tokenizer_load(p, &e);
    CHECK_MSG(u && st_tokenizer_hash(u) == st_tokenizer_hash(t) && st_tokenizer_kind(u) == ST_TOK_BPE &&
              st_tokenizer_vocab_size(u) == 400, "%s", e.msg);
    if (u) {
        int64_t n1 = st_tokenizer_encode(t, text, 5000, NULL, 0), n2 = st_tokenizer_encode(u, text, 5000, NULL, 0);
        int32_t *a = malloc((size_t)n1 * 4), *b = malloc((size_t)n2 * 4);
        st_tokenizer_encode(t, text, 5000, a, n1);
        st_tokenizer_encode(u, text, 5000, b, n2);
        CHECK(n1 == n2 && !memcmp(a, b, (size_t)n1 * 4));
        free(a);
        free(b);
    }
    st_tokenizer_free(u);
    /* expected hash / vocab */
    u = st_tokenizer_load_expect(p, st_tokenizer_hash(t), 400, &e);
    CHECK(u != NULL);
    st_tokenizer_free(u);
    u = st_tokenizer_load_expect(p, st_tokenizer_hash(t) ^ 1, 400, &e);
    CHECK(!u && e.code == ST_ERR_DATA && strstr(e.msg, p) && strstr(e.msg, "does not match"));
    /* byte and synthetic kinds */
    st_tokenizer *byte = st_tokenizer_new_byte(&e);
    snprintf(q, sizeof q, "%s/byte.json", tmp);
    CHECK(st_tokenizer_save(byte, q, &e) == ST_OK);
    u = st_tokenizer_load(q, &e);
    CHECK(u && st_tokenizer_kind(u) == ST_TOK_BYTE && st_tokenizer_hash(u) == st_tokenizer_hash(byte));
    st_tokenizer_free(u);
    st_tokenizer_free(byte);
    st_tokenizer *syn = st_sd_tok_new_synthetic(64, 1234, 2, 4, &e);
    snprintf(q, sizeof q, "%s/syn.json", tmp);
    CHECK(st_tokenizer_save(syn, q, &e) == ST_OK);
    u = st_tokenizer_load(q, &e);
    CHECK(u && st_tokenizer_kind(u) == ST_TOK_SYNTHETIC && st_tokenizer_hash(u) == st_tokenizer_hash(syn));
    st_tokenizer_free(u);
    st_tokenizer_free(syn);

    /* corrupt and foreign files: ST_ERR_DATA naming the file; missing: ST_ERR_IO */
    int64_t n;
    char *good = st_sd_read_file(p, &n, 1 << 24, &e);
    snprintf(q, sizeof q, "%s/missing.json", tmp);
    expect_load_error(q, ST_ERR_IO, NULL);
    snprintf(q, sizeof q, "%s/empty.json", tmp);
    write_file(q, "", 0);
    expect_load_error(q, ST_ERR_DATA, "empty");
    snprintf(q, sizeof q, "%s/trunc.json", tmp);
    write_file(q, good, (size_t)n / 2);
    expect_load_error(q, ST_ERR_DATA, "JSON");
    snprintf(q, sizeof q, "%s/garbage.json", tmp);
    static const char garbage[] = "\x1f\x8b\x08\x00\xff\xfe binary";
    write_file(q, garbage, sizeof garbage - 1);
    expect_load_error(q, ST_ERR_DATA, NULL);
    snprintf(q, sizeof q, "%s/foreign.json", tmp);
    write_file(q, "{\"model\": {\"type\": \"BPE\"}}", 27);
    expect_load_error(q, ST_ERR_DATA, "format");
    /* content edited consistently (last merge dropped, vocab_size fixed): only the hash disagrees */
    char *ed = malloc((size_t)n + 1);
    memcpy(ed, good, (size_t)n + 1);
    char *m = strstr(ed, "\"vocab_size\":400");
    m[15] = '9';
    m[14] = '9';
    m[13] = '3';
    char *last = strrchr(ed, '[');
    strcpy(last - 1, "]}\n");
    snprintf(q, sizeof q, "%s/edited.json", tmp);
    write_file(q, ed, strlen(ed));
    expect_load_error(q, ST_ERR_DATA, "hash");
    /* vocab_size that disagrees with the merges */
    memcpy(ed, good, (size_t)n + 1);
    m = strstr(ed, "\"vocab_size\":400");
    m[15] = '1';
    snprintf(q, sizeof q, "%s/size.json", tmp);
    write_file(q, ed, (size_t)n);
    expect_load_error(q, ST_ERR_DATA, "vocab_size");
    /* a merge that refers to a token not yet made */
    snprintf(q, sizeof q, "%s/order.json", tmp);
    const char *bad_merge = "{\"format\":\"stretch-tokenizer\",\"version\":1,\"kind\":\"bpe\",\"vocab_size\":257,"
                            "\"hash\":\"0000000000000000\",\"merges\":[[300,1]]}";
    write_file(q, bad_merge, strlen(bad_merge));
    expect_load_error(q, ST_ERR_DATA, "merges[0]");
    snprintf(q, sizeof q, "%s/version.json", tmp);
    const char *bad_version = "{\"format\":\"stretch-tokenizer\",\"version\":7,\"kind\":\"byte\",\"vocab_size\":256,"
                              "\"hash\":\"0000000000000000\"}";
    write_file(q, bad_version, strlen(bad_version));
    expect_load_error(q, ST_ERR_DATA, "version");
    snprintf(q, sizeof q, "%s/dup.json", tmp);
    const char *dup = "{\"format\":\"stretch-tokenizer\",\"version\":1,\"kind\":\"word\",\"vocab_size\":3,"
                      "\"hash\":\"0000000000000000\",\"tokens\":[\"<eos>\",\"a\",\"a\"]}";
    write_file(q, dup, strlen(dup));
    expect_load_error(q, ST_ERR_DATA, "duplicate");
    free(ed);
    free(good);
    st_tokenizer_free(t);
    free(text);
}

static void test_tinyshakespeare(void) {
    char path[1200];
    if (!test_data_path("tinyshakespeare/input.txt", path, sizeof path)) return;
    st_error e = {0};
    int64_t n;
    char *text = st_sd_read_file(path, &n, 1 << 24, &e);
    if (!text) { CHECK_MSG(0, "%s", e.msg); return; }
    double t0 = st_time();
    st_tokenizer *t = st_tokenizer_train_bpe(text, n, 512, &e);
    double dt = st_time() - t0;
    int64_t ntok = 0;
    CHECK(t && roundtrip(t, text, n, &ntok));
    printf("  tinyshakespeare (%lld bytes): BPE 512 trained in %.3f s, %.3f bytes/token\n", (long long)n, dt,
           (double)n / (double)ntok);
    /* streaming file encoder == in-memory encoder, with blocks far smaller than the file */
    sd_vec v = {0};
    setenv("STRETCH_DATA_BLOCK", "4096", 1);
    CHECK(st_sd_encode_file(t, path, 0, n, &v, &e) == ST_OK);
    unsetenv("STRETCH_DATA_BLOCK");
    int32_t *ids = malloc((size_t)ntok * sizeof *ids);
    st_tokenizer_encode(t, text, n, ids, ntok);
    CHECK(v.n == ntok && !memcmp(v.v, ids, (size_t)ntok * sizeof *ids));
    /* and training from the file stream (small blocks) gives the same merges */
    setenv("STRETCH_DATA_BLOCK", "4096", 1);
    st_tokenizer *tf = st_sd_bpe_train_file(path, 0, n, 512, &e);
    unsetenv("STRETCH_DATA_BLOCK");
    CHECK(tf && st_tokenizer_hash(tf) == st_tokenizer_hash(t));
    st_tokenizer_free(tf);
    st_sd_vec_free(&v);
    free(ids);
    st_tokenizer_free(t);
    free(text);
}

int main(void) {
    char tmp[512];
    if (!test_tmpdir(tmp, sizeof tmp)) { printf("cannot create a temporary directory\n"); return 1; }
    test_chunks();
    test_bpe_train();
    test_roundtrips();
    test_word_tokenizer(tmp);
    test_tokenizer_files(tmp);
    test_tinyshakespeare();
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("could not remove %s\n", tmp);
    return test_finish("test_data_tok");
}
