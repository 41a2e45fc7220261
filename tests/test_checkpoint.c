/* test_checkpoint.c - checkpoint files on a hand-built parameter block: exact round trip
 * of parameters, moments, training state and config; header-only reads; layout
 * mismatch; corruption (truncation, a flipped payload byte, a flipped header byte, wrong
 * magic, wrong version, a tiny file, a set bit in the reserved header bytes) ->
 * ST_ERR_CHECKPOINT naming the file; every differing config key named; atomic writes
 * leave no temp files; the run directory (keep-last pruning, `latest`, refusing to
 * overwrite a run without force, metrics trimming). */
#include "harness.h"
#include "st_train.h"
#include "train/train_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* st_rundir_prepare, releasing the directory's lock at once (each call is a new "run") */
static int prepare(const char *dir, int force, st_error *e) {
    int fd = -1;
    const int rc = st_rundir_prepare(dir, force, NULL, &fd, e);
    if (fd >= 0) close(fd);
    return rc;
}

static void make_params(st_params *p, int64_t rows, uint64_t seed) {
    st_params_init(p);
    int64_t sw[2] = {rows, 33}, sb[1] = {33};
    st_params_add(p, "blocks.0.attn.qkv.weight", 2, sw, 1, ST_INIT_NORMAL, 1.0f);
    st_params_add(p, "blocks.0.attn.qkv.bias", 1, sb, 0, ST_INIT_NORMAL, 1.0f);
    st_error e = {0};
    ST_ASSERT(st_params_finalize(p, &e) == ST_OK);
    st_rng r;
    st_rng_seed(&r, seed);
    st_params_init_values(p, &r);
    for (size_t i = 0; i < p->n; i++) { p->m[i] = st_rng_normal(&r); p->v[i] = (float)st_rng_uniform(&r); }
}

static void make_state(st_train_state *s) {
    memset(s, 0, sizeof *s);
    s->step = 1234;
    s->opt_t = 1200;
    s->loader_draws = 98765;
    st_rng_seed(&s->rng, 42);
    st_rng_u64(&s->rng);
    s->best_val = 2.25;
    s->best_step = 1000;
    s->last_val = 2.5;
    s->tokens = 1234 * 512;
    s->elapsed = 61.5;
    s->skipped = 3;
    s->tok_hash = 0xfeedfacecafebeefull;
    s->data_hash = 0x0123456789abcdefull;
    s->threads = 3;
    snprintf(s->compute, sizeof s->compute, "fp32 (OpenBLAS Haswell)");
}

static void make_config(st_run_config *c) {
    const char *json = "{\"model\": {\"vocab_size\": 64, \"n_layers\": 2, \"d_model\": 32, \"n_heads\": 4},"
                       " \"train\": {\"steps\": 2000, \"optimizer\": {\"lr\": 0.0003}}}";
    st_error e = {0};
    int rc = st_run_config_parse(json, strlen(json), "test.json", NULL, 0, c, &e);
    ST_ASSERT(rc == ST_OK);
}

static int copy_prefix(const char *src, const char *dst, long keep, long flip_at, int flip_mask) {
    size_t len = 0;
    st_error e = {0};
    char *buf = st_read_file(src, &len, (size_t)1 << 30, &e);
    if (!buf) return -1;
    if (keep >= 0 && (size_t)keep < len) len = (size_t)keep;
    if (flip_at >= 0 && (size_t)flip_at < len) buf[flip_at] ^= (char)flip_mask;
    FILE *f = fopen(dst, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    free(buf);
    return (int)len;
}

static int count_tmp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) if (strstr(de->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void expect_corrupt(const char *path, const st_params *layout, const char *what, const char *expect) {
    st_params q;
    make_params(&q, 40, 99);
    (void)layout;
    st_error e = {0};
    int rc = st_checkpoint_load(path, NULL, &q, 1, NULL, &e);
    CHECK_MSG(rc == ST_ERR_CHECKPOINT, "%s: rc %d (%s)", what, rc, e.msg);
    CHECK_MSG(strstr(e.msg, path) != NULL, "%s: message does not name the file: %s", what, e.msg);
    CHECK_MSG(strstr(e.msg, expect) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, expect);
    st_params_free(&q);
}

static void test_round_trip(const char *dir) {
    st_params p, q;
    make_params(&p, 40, 1);
    make_params(&q, 40, 2);
    st_train_state s, s2;
    make_state(&s);
    st_run_config c, c2;
    make_config(&c);
    char path[512];
    snprintf(path, sizeof path, "%s/a.ckpt", dir);
    st_error e = {0};
    CHECK_MSG(st_checkpoint_save(path, &c, &p, &s, &e) == ST_OK, "%s", e.msg);
    CHECK(count_tmp_files(dir) == 0);
    CHECK_MSG(st_checkpoint_load(path, &c2, &q, 1, &s2, &e) == ST_OK, "%s", e.msg);
    CHECK(memcmp(p.data, q.data, p.n * sizeof(float)) == 0);
    CHECK(memcmp(p.m, q.m, p.n * sizeof(float)) == 0);
    CHECK(memcmp(p.v, q.v, p.n * sizeof(float)) == 0);
    CHECK(s2.step == s.step && s2.opt_t == s.opt_t && s2.loader_draws == s.loader_draws);
    CHECK(memcmp(&s2.rng, &s.rng, sizeof s.rng) == 0);
    CHECK(s2.best_val == s.best_val && s2.best_step == s.best_step && s2.last_val == s.last_val);
    CHECK(s2.tokens == s.tokens && s2.elapsed == s.elapsed && s2.skipped == s.skipped && s2.tok_hash == s.tok_hash);
    CHECK(s2.data_hash == s.data_hash);
    CHECK_MSG(s2.threads == 3 && !strcmp(s2.compute, s.compute), "%lld '%s'", (long long)s2.threads, s2.compute);
    char diff[256];
    CHECK_MSG(st_run_config_diff(&c, &c2, NULL, diff, sizeof diff) == 0, "%s", diff);
    CHECK(c2.train.optim.lr == 0.0003f && c2.model.vocab_size == 64);
    /* every key that differs, not the first alone; a full buffer says how many it left out */
    c2.train.seed = 5;
    c2.train.optim.lr = 0.001f;
    CHECK(st_run_config_diff(&c, &c2, "train", diff, sizeof diff) == 1);
    CHECK_MSG(!strcmp(diff, "train.seed: 1 vs 5, train.optimizer.lr: 0.0003 vs 0.001"), "%s", diff);
    CHECK(st_run_config_diff(&c, &c2, "train", diff, 48) == 1);
    CHECK_MSG(!strcmp(diff, "train.seed: 1 vs 5, and 1 more"), "%s", diff);
    c2 = c;

    /* parameters only: moments untouched */
    st_params_free(&q);
    make_params(&q, 40, 3);
    float m0 = q.m[0];
    CHECK(st_checkpoint_load(path, NULL, &q, 0, NULL, &e) == ST_OK);
    CHECK(memcmp(p.data, q.data, p.n * sizeof(float)) == 0 && q.m[0] == m0);
    /* header / config / state only */
    memset(&s2, 0, sizeof s2);
    CHECK(st_checkpoint_load(path, &c2, NULL, 0, &s2, &e) == ST_OK && s2.step == 1234);
    /* a different layout is refused, naming the parameter */
    st_params r;
    make_params(&r, 41, 1);
    CHECK(st_checkpoint_load(path, NULL, &r, 1, NULL, &e) == ST_ERR_CHECKPOINT);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, "floats"), "%s", e.msg);
    st_params_free(&r);
    /* missing file: I/O error */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none.ckpt", dir);
    CHECK(st_checkpoint_load(missing, NULL, NULL, 0, NULL, &e) == ST_ERR_IO && strstr(e.msg, missing));

    /* corruption */
    char bad[600];
    size_t len = 0;
    char *orig = st_read_file(path, &len, (size_t)1 << 30, &e);
    CHECK(orig && len > 200);
    free(orig);
    snprintf(bad, sizeof bad, "%s/trunc.ckpt", dir);
    copy_prefix(path, bad, (long)len - 17, -1, 0);
    expect_corrupt(bad, &p, "truncated", "truncated");
    snprintf(bad, sizeof bad, "%s/tiny.ckpt", dir);
    copy_prefix(path, bad, 10, -1, 0);
    expect_corrupt(bad, &p, "tiny", "smaller than the 64-byte header");
    snprintf(bad, sizeof bad, "%s/flip.ckpt", dir);
    copy_prefix(path, bad, -1, (long)len / 2, 0x10);
    expect_corrupt(bad, &p, "payload byte flipped", "CRC32 mismatch");
    snprintf(bad, sizeof bad, "%s/flip_hdr.ckpt", dir);
    copy_prefix(path, bad, -1, 33, 0x01);   /* the step field */
    expect_corrupt(bad, &p, "header byte flipped", "CRC32 mismatch");
    snprintf(bad, sizeof bad, "%s/magic.ckpt", dir);
    copy_prefix(path, bad, -1, 0, 0x20);
    expect_corrupt(bad, &p, "wrong magic", "not a stretch checkpoint");
    snprintf(bad, sizeof bad, "%s/version.ckpt", dir);
    copy_prefix(path, bad, -1, 8, 0x04);
    expect_corrupt(bad, &p, "wrong version", "version 7, this build reads versions 1 to 3");
    snprintf(bad, sizeof bad, "%s/reserved.ckpt", dir);   /* no CRC covers them: checked to be zero */
    copy_prefix(path, bad, -1, 61, 0x01);
    expect_corrupt(bad, &p, "reserved header byte set", "header bytes 60-63 (reserved) are 00000100");
    snprintf(bad, sizeof bad, "%s/config.json", dir);
    CHECK(st_run_config_save(&c, bad, &e) == ST_OK);
    expect_corrupt(bad, &p, "not a checkpoint", "not a stretch checkpoint");
    st_params_free(&p);
    st_params_free(&q);
}

static int file_exists(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void test_rundir(const char *base) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/run", base);
    st_error e = {0};
    CHECK_MSG(prepare(dir, 0, &e) == ST_OK, "%s", e.msg);
    st_params p;
    make_params(&p, 8, 5);
    st_train_state s;
    make_state(&s);
    st_run_config c;
    make_config(&c);
    char written[1024], cdir[600];
    snprintf(cdir, sizeof cdir, "%s/checkpoints", dir);
    for (int step = 10; step <= 50; step += 10) {
        s.step = step;
        CHECK(st_rundir_save_step(dir, &c, &p, &s, 2, written, sizeof written, &e) == ST_OK);
    }
    CHECK(strstr(written, "checkpoints/step_00000050.ckpt") != NULL);
    CHECK(!file_exists(cdir, "step_00000010.ckpt") && !file_exists(cdir, "step_00000030.ckpt"));
    CHECK(file_exists(cdir, "step_00000040.ckpt") && file_exists(cdir, "step_00000050.ckpt"));
    CHECK(count_tmp_files(cdir) == 0);
    char resolved[1024];
    CHECK(st_checkpoint_resolve(dir, resolved, sizeof resolved, &e) == ST_OK);
    CHECK_MSG(strstr(resolved, "step_00000050.ckpt") != NULL, "%s", resolved);
    st_train_state s2;
    CHECK(st_checkpoint_load(resolved, NULL, NULL, 0, &s2, &e) == ST_OK && s2.step == 50);

    /* a run dir holding a run is refused without force and left as it was */
    char cfgp[700];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    CHECK(st_run_config_save(&c, cfgp, &e) == ST_OK);
    CHECK(prepare(dir, 0, &e) == ST_ERR_IO);
    CHECK_MSG(strstr(e.msg, dir) && strstr(e.msg, "--force"), "%s", e.msg);
    CHECK(file_exists(dir, "config.json") && file_exists(cdir, "step_00000050.ckpt"));
    /* a non-empty directory that is not a run is refused too */
    char other[600];
    snprintf(other, sizeof other, "%s/other", base);
    mkdir(other, 0755);
    FILE *f = fopen(strcat(strcpy(cfgp, other), "/notes.txt"), "w");
    fputs("mine\n", f);
    fclose(f);
    CHECK(prepare(other, 0, &e) == ST_ERR_IO && strstr(e.msg, "not empty"));
    /* latest as an editor may leave it (CRLF, spaces) names the same step */
    char lp[700];
    snprintf(lp, sizeof lp, "%s/latest", cdir);
    f = fopen(lp, "w");
    fputs(" step_00000050.ckpt \r\n", f);
    fclose(f);
    CHECK(st_run_latest_step(dir) == 50);
    CHECK(st_checkpoint_resolve(dir, resolved, sizeof resolved, &e) == ST_OK && strstr(resolved, "/step_00000050.ckpt"));
    /* a directory left by a run that failed before its first checkpoint is reusable */
    char failed[600], fc[700];
    snprintf(failed, sizeof failed, "%s/failed", base);
    snprintf(fc, sizeof fc, "%s/checkpoints", failed);
    CHECK(st_mkdirs(fc, &e) == ST_OK);
    CHECK_MSG(prepare(failed, 0, &e) == ST_OK, "%s", e.msg);
    /* --force removes the run's files only */
    CHECK(prepare(other, 1, &e) == ST_OK && file_exists(other, "notes.txt"));
    CHECK(prepare(dir, 1, &e) == ST_OK);
    CHECK(!file_exists(dir, "config.json") && !file_exists(cdir, "step_00000050.ckpt") && !file_exists(cdir, "latest"));
    CHECK(st_checkpoint_resolve(dir, resolved, sizeof resolved, &e) == ST_ERR_IO);

    /* metrics.jsonl trimmed to a checkpoint's step (drops later records and a torn line) */
    char mpath[700];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", dir);
    f = fopen(mpath, "w");
    fputs("{\"step\": 1, \"loss\": 4}\n{\"step\": 2, \"loss\": 3.5}\n{\"step\": 2, \"val_loss\": 3.6}\n"
          "{\"step\": 3, \"loss\": 3}\n{\"step\": 4, \"lo", f);
    fclose(f);
    CHECK(st_rundir_trim_metrics(dir, 2, &e) == ST_OK);
    size_t len = 0;
    char *text = st_read_file(mpath, &len, 1 << 20, &e);
    CHECK_MSG(text && !strcmp(text, "{\"step\": 1, \"loss\": 4}\n{\"step\": 2, \"loss\": 3.5}\n{\"step\": 2, \"val_loss\": 3.6}\n"),
              "%s", text ? text : "(null)");
    free(text);
    st_params_free(&p);
}

/* A checkpoint whose CRC is valid but whose embedded config implies a far larger model
 * than the parameters it stores: refused before the model is built (no allocation of the
 * implied size), naming the file. */
static void test_config_size_mismatch(const char *dir) {
    st_run_config c;
    make_config(&c);
    st_model m;
    st_error e = {0};
    CHECK(st_model_init(&m, &c.model, 1, &e) == ST_OK);
    st_train_state s;
    make_state(&s);
    char path[512];
    snprintf(path, sizeof path, "%s/liar.ckpt", dir);
    st_run_config big = c;
    big.model.n_layers = 8;
    big.model.d_model = 256;       /* 6.3M floats against the 27k stored */
    CHECK(st_checkpoint_save(path, &big, &m.params, &s, &e) == ST_OK);
    st_model out;
    st_error e2 = {0};
    CHECK(st_checkpoint_load_model(path, &out, NULL, &e2) == ST_ERR_CHECKPOINT);
    CHECK_MSG(strstr(e2.msg, path) && strstr(e2.msg, "implies"), "message: %s", e2.msg);
    /* a config implying more than the machine's memory: refused with the size it needs */
    big.model.n_layers = 256;
    big.model.d_model = 8192;
    CHECK(st_checkpoint_save(path, &big, &m.params, &s, &e) == ST_OK);
    CHECK(st_checkpoint_load_model(path, &out, NULL, &e2) == ST_ERR_CHECKPOINT);
    CHECK_MSG(strstr(e2.msg, path) && strstr(e2.msg, "GiB"), "message: %s", e2.msg);
    /* the honest checkpoint of the same model loads */
    CHECK(st_checkpoint_save(path, &c, &m.params, &s, &e) == ST_OK);
    CHECK_MSG(st_checkpoint_load_model(path, &out, NULL, &e2) == ST_OK, "%s", e2.msg);
    /* issue 14 item 12: a loaded model (eval, generate, export) holds the weights only,
     * and its no-grad forward equals the training model's */
    CHECK(out.params.data && !out.params.grad && !out.params.m && !out.params.v && out.params.weights_only);
    CHECK(memcmp(out.params.data, m.params.data, m.params.n * sizeof(float)) == 0);
    st_arena ar;
    st_ctx ctx;
    CHECK(st_arena_init(&ar, (size_t)8 << 20, (size_t)-1, &e) == ST_OK && st_ctx_init(&ctx, &ar, 4096, &e) == ST_OK);
    int32_t ids[2 * 16];
    for (int i = 0; i < 32; i++) ids[i] = (i * 7) % c.model.vocab_size;
    float loss[2];
    st_model *models[2] = {&m, &out};
    for (int k = 0; k < 2; k++) {
        st_ctx_begin(&ctx, 0, 0);
        st_tensor *l = st_model_loss(models[k], &ctx, ids, ids + 1, 2, 15, 0, NULL, &e);
        CHECK(l != NULL);
        loss[k] = l ? l->data[0] : NAN;
    }
    CHECK(loss[0] == loss[1] && isfinite(loss[0]));
    st_ctx_free(&ctx);
    st_arena_free(&ar);
    st_model_free(&out);
    st_model_free(&m);
}

/* A version-1 file (written before data_hash; tests/fixtures/ckpt_v1.ckpt, the fuzz seed
 * checkpoint of that time: the fixed model of tests/fuzz/fuzz_targets.h at step 2) still
 * loads, its data_hash 0 (unknown). */
static void test_version1(void) {
    const char *src = getenv("STRETCH_SOURCE_DIR");
    if (!src) { fprintf(stderr, "test_version1: STRETCH_SOURCE_DIR unset, not checked\n"); return; }
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/ckpt_v1.ckpt", src);
    st_run_config c;
    st_train_state s;
    memset(&s, 0xff, sizeof s);
    st_error e = {0};
    CHECK(st_checkpoint_load(path, &c, NULL, 0, &s, &e) == ST_OK);
    if (e.code) fprintf(stderr, "%s\n", e.msg);
    CHECK(s.step == 2 && s.data_hash == 0 && s.tok_hash != 0 && s.threads == 0 && !s.compute[0]);
}

int main(void) {
    char dir[256];
    if (!test_tmpdir(dir, sizeof dir)) { CHECK(0); return test_finish("test_checkpoint"); }
    test_round_trip(dir);
    test_rundir(dir);
    test_config_size_mismatch(dir);
    test_version1();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_checkpoint");
}
