/* test_data_wikitext.c - WikiText-2 at word level, the standard protocol: exactly
 * 33,278 types and 2,088,628 / 217,646 / 245,569 tokens (train / valid / test), ids in
 * order of first appearance; the cached load is identical; streaming with tiny blocks
 * gives the same tokens. Skipped (with a SKIP line) when the data is not there. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static int equal(const st_dataset *a, const st_dataset *b) {
    int ok = a->tok_hash == b->tok_hash && a->vocab_size == b->vocab_size;
    for (int i = 0; i < 3; i++)
        ok &= a->n[i] == b->n[i] && !memcmp(a->tokens[i], b->tokens[i], (size_t)a->n[i] * sizeof(int32_t));
    return ok;
}

int main(void) {
    char path[900], tmp[512];
    if (!test_data_path("wikitext-2/train.txt", path, sizeof path)) return test_finish("test_data_wikitext");
    if (!test_tmpdir(tmp, sizeof tmp)) { printf("cannot create a temporary directory\n"); return 1; }
    *strrchr(path, '/') = 0;
    st_data_config c;
    st_data_config_default(&c);
    strcpy(c.source, "wikitext");
    snprintf(c.path, sizeof c.path, "%s", path);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache", tmp);
    st_dataset cold, warm, small;
    st_error e = {0};
    int rc = st_dataset_load(&c, "test", &cold, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc) return test_finish("test_data_wikitext");
    CHECK(cold.vocab_size == 33278);
    CHECK(cold.n[0] == 2088628);
    CHECK(cold.n[1] == 217646);
    CHECK(cold.n[2] == 245569);
    CHECK(cold.bytes[0] == 10797148 && cold.bytes[1] == 1121681 && cold.bytes[2] == 1256449);
    CHECK(cold.unit == ST_UNIT_WORD && st_tokenizer_kind(cold.tok) == ST_TOK_WORD && cold.cache_hits == 0);
    /* the file opens " \n = Valkyria Chronicles III = \n": <eos> is id 0, then first appearances */
    const int32_t want[] = {0, 1, 2, 3, 4, 1, 0, 0};
    CHECK(!memcmp(cold.tokens[0], want, sizeof want));
    char text[128];
    CHECK(st_tokenizer_decode(cold.tok, cold.tokens[0], 7, text, sizeof text) == 29 &&
          !strcmp(text, "\n= Valkyria Chronicles III =\n"));
    int32_t ids[4];
    CHECK(st_tokenizer_encode(cold.tok, "<unk> Valkyria\n", 15, ids, 4) == 3 && ids[1] == 2 && ids[2] == 0);
    int ok = 1;
    for (int i = 0; i < 3; i++)
        for (int64_t t = 0; t < cold.n[i]; t++) ok &= cold.tokens[i][t] >= 0 && cold.tokens[i][t] < 33278;
    CHECK(ok);

    rc = st_dataset_load(&c, "test", &warm, &e);
    CHECK_MSG(rc == ST_OK && warm.cache_hits == 3 && equal(&cold, &warm), "%s", e.msg);
    printf("  WikiText-2 word level: cold %.3f s (tokenize + write caches), cached %.3f s\n", cold.load_seconds,
           warm.load_seconds);

    /* 64 KiB blocks instead of 16 MiB: same tokens, same vocabulary */
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache2", tmp);
    setenv("STRETCH_DATA_BLOCK", "65536", 1);
    rc = st_dataset_load(&c, "test", &small, &e);
    unsetenv("STRETCH_DATA_BLOCK");
    CHECK_MSG(rc == ST_OK && small.cache_hits == 0 && equal(&cold, &small), "%s", e.msg);

    /* the saved tokenizer reproduces the ids */
    char tp[1100];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", tmp);
    CHECK(st_tokenizer_save(cold.tok, tp, &e) == ST_OK);
    st_tokenizer *t = st_tokenizer_load_expect(tp, cold.tok_hash, 33278, &e);
    CHECK_MSG(t != NULL, "%s", e.msg);
    if (t) {
        int64_t n = st_tokenizer_encode(t, " = Valkyria Chronicles III = \n", 30, ids, 4);
        CHECK(n == 6 && ids[0] == 1 && ids[3] == 4);
        st_tokenizer_free(t);
    }
    st_dataset_free(&cold);
    st_dataset_free(&warm);
    st_dataset_free(&small);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("could not remove %s\n", tmp);
    return test_finish("test_data_wikitext");
}
