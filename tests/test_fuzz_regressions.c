/* test_fuzz_regressions.c - replays, through the normal build's loaders, every input in
 * tests/fuzz/regressions/<target>/ (each one crashed a libFuzzer harness before its bug
 * was fixed) and every seed in tests/fuzz/corpus/<target>/, with the harness bodies of
 * tests/fuzz/fuzz_targets.h (same properties: a violation aborts, so the test fails).
 * Also checks that the valid seeds really are accepted (a harness whose seeds all fail
 * early would fuzz nothing but the first check). */
#include "harness.h"
#include "fuzz/fuzz_targets.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fz_fn)(const uint8_t *, size_t);

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    unsigned char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            b = nb;
        }
    }
    fclose(f);
    *n = len;
    return b;
}

/* Replay every file of dir through fn; returns the number replayed. */
static int replay_dir(const char *dir, fz_fn fn) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t n = 0;
        unsigned char *b = slurp(path, &n);
        if (!b) continue;
        fn(b, n);   /* aborts on a violated property or a crash */
        free(b);
        count++;
    }
    closedir(d);
    return count;
}

/* The valid seeds load (the harness is not stuck at the first check). */
static void seeds_accepted(const char *src) {
    char path[4096];
    size_t n = 0;
    unsigned char *b;
    st_error e = {0};
    /* checkpoint seed "raw": mode byte + a real checkpoint of the fixed model */
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/checkpoint/raw", src);
    if ((b = slurp(path, &n)) && n > 1) {
        const char *tmp = fz_tmp_path("seedck");
        CHECK(fz_write(tmp, b + 1, n - 1) == 0);
        int rc = st_checkpoint_load(tmp, NULL, &fz_small_model()->params, 1, NULL, &e);
        CHECK_MSG(rc == ST_OK, "checkpoint seed does not load into the fixed model: %s", e.msg);
        unlink(tmp);
    } else CHECK_MSG(0, "missing %s", path);
    free(b);
    /* checkpoint seed "payload": framed by the harness, it loads too */
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/checkpoint/payload", src);
    if ((b = slurp(path, &n)) && n > 1) {
        size_t fn = 0;
        unsigned char *f = fz_ckpt_wrap(b + 1, n - 1, &fn);
        const char *tmp = fz_tmp_path("seedck");
        CHECK(f && fz_write(tmp, f, fn) == 0);
        int rc = st_checkpoint_load(tmp, NULL, &fz_small_model()->params, 1, NULL, &e);
        CHECK_MSG(rc == ST_OK, "framed checkpoint payload seed does not load: %s", e.msg);
        free(f);
        unlink(tmp);
    } else CHECK_MSG(0, "missing %s", path);
    free(b);
    /* safetensors seed "raw" */
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/safetensors/raw", src);
    if ((b = slurp(path, &n)) && n > 1) {
        const char *tmp = fz_tmp_path("seedst");
        CHECK(fz_write(tmp, b + 1, n - 1) == 0);
        int rc = st_model_load_safetensors(fz_small_model(), tmp, &e);
        CHECK_MSG(rc == ST_OK, "safetensors seed does not load into the fixed model: %s", e.msg);
        unlink(tmp);
    } else CHECK_MSG(0, "missing %s", path);
    free(b);
    /* tokenizer seeds of every kind */
    const char *kinds[4] = {"byte", "bpe", "word", "syn"};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/tokenizer/%s.json", src, kinds[k]);
        st_tokenizer *t = st_tokenizer_load(path, &e);
        CHECK_MSG(t != NULL, "tokenizer seed %s: %s", path, e.msg);
        st_tokenizer_free(t);
    }
    /* cache seeds: at least one token cache and one vocabulary are hits with their own key */
    int hits = 0, vocab_hits = 0;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/cache", src);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "raw_", 4) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!(b = slurp(path, &n)) || n < 129) { free(b); continue; }
        const char *tmp = fz_tmp_path("seedcache");
        sd_cache_key key;
        fz_cache_key(b + 1, n - 1, &key);
        if (fz_write(tmp, b + 1, n - 1) == 0) {
            int32_t *tok = NULL;
            int64_t cnt = 0, bytes = 0;
            st_tokenizer *t = NULL;
            if (st_sd_cache_read_tokens(tmp, &key, &tok, &cnt, &bytes)) { hits++; free(tok); }
            if (st_sd_cache_read_tokenizer(tmp, &key, &t)) { vocab_hits++; st_tokenizer_free(t); }
            unlink(tmp);
        }
        free(b);
    }
    if (d) closedir(d);
    CHECK_MSG(hits >= 1 && vocab_hits >= 1, "cache seeds: %d token caches and %d vocabularies read back", hits, vocab_hits);
    /* sweep seeds: the repo's sweep files (seed_*) load beside the harness's synthetic
     * base, except those of task runs, and so does the inline grid */
    int sweeps = 0;
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/sweep", src);
    d = opendir(dir);
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "seed_", 5) != 0 && strcmp(de->d_name, "grid") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!(b = slurp(path, &n))) continue;
        char file[700];
        snprintf(file, sizeof file, "%s/sweep.json", fz_sweep_dir());
        CHECK(fz_write(file, b, n) == 0);
        st_sweep_opts opts = {0};
        opts.dry_run = 1;
        opts.out = "fuzz-sweep-out";   /* the grid seed has no "out" */
        sweep s;
        st_error se = {0};
        int rc = st_sweep_load(&s, file, &opts, &se);
        /* the task sweeps set data.task.* keys, which the synthetic base refuses */
        if (rc != ST_OK) printf("  sweep seed %s: %s\n", de->d_name, se.msg);
        CHECK_MSG(rc == ST_OK || strcmp(de->d_name, "grid") != 0, "the inline sweep seed does not load: %s", se.msg);
        sweeps += rc == ST_OK;
        st_sweep_free(&s);
        unlink(file);
        free(b);
    }
    if (d) closedir(d);
    CHECK_MSG(sweeps >= 10, "only %d sweep seeds load", sweeps);
    fz_sweep_cleanup();
}

int main(void) {
    const char *src = getenv("STRETCH_SOURCE_DIR");
    if (!src) src = "..";
    static const struct { const char *name; fz_fn fn; } targets[] = {
        {"config", fz_config}, {"checkpoint", fz_checkpoint}, {"safetensors", fz_safetensors},
        {"cache", fz_cache}, {"tokenizer", fz_tokenizer}, {"sweep", fz_sweep}};
    int total_reg = 0, total_seed = 0;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/tests/fuzz/regressions/%s", src, targets[i].name);
        int r = replay_dir(dir, targets[i].fn);
        snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", src, targets[i].name);
        int s = replay_dir(dir, targets[i].fn);
        printf("  %-12s %3d regression inputs, %3d seeds replayed\n", targets[i].name, r, s);
        CHECK_MSG(s > 0, "no seed corpus for %s in %s", targets[i].name, dir);
        total_reg += r;
        total_seed += s;
    }
    CHECK(total_reg > 0);
    seeds_accepted(src);
    printf("  %d regression inputs and %d seeds replayed without a crash\n", total_reg, total_seed);
    return test_finish("test_fuzz_regressions");
}
