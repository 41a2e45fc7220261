/* test_train.c - the training loop end to end on tiny models and the built-in synthetic
 * corpus: two runs give the same loss trace bit for bit; N/2 steps + resume gives the
 * same trace and the same final parameters/moments as N straight; the loss falls;
 * k accumulated micro-batches equal one k-times larger batch; an occupied run dir is
 * refused and left untouched; non-finite steps stop (or skip) without ever writing a
 * checkpoint of non-finite parameters; init_from, vocabulary checks, the resolved
 * config.json, and st_checkpoint_load_model. */
#include "harness.h"
#include "st_train.h"
#include "train/train_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

/* The tiny run used throughout; extra JSON for the train section is appended. */
static int tiny_config(st_run_config *c, const char *const *sets, int n_sets) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"n_layers\": 2, \"d_model\": 32, \"n_heads\": 4, \"pos\": \"alibi\","
             "  \"dropout_attn\": 0.1, \"dropout_resid\": 0.1},"
             " \"data\": {\"source\": \"synthetic\", \"cache_dir\": \"%s/cache\","
             "  \"synthetic\": {\"vocab\": 32, \"tokens\": [40000, 4000, 4000]}},"
             " \"train\": {\"seed\": 3, \"batch_size\": 8, \"seq_len\": 16, \"steps\": 20, \"log_every\": 1,"
             "  \"eval_every\": 5, \"eval_batches\": 2, \"checkpoint_every\": 5, \"keep_last\": 2, \"threads\": 2,"
             "  \"optimizer\": {\"lr\": 0.01}, \"schedule\": {\"warmup\": 3}}}", g_tmp);
    st_error e = {0};
    int rc = st_run_config_parse(json, strlen(json), "tiny.json", sets, n_sets, c, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    return rc;
}

static void run_dir(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_tmp, name); }

static int train(const st_run_config *c, const char *dir, int resume, int force, int64_t stop_after,
                 st_train_result *res, st_error *e) {
    st_train_opts o = {0};
    o.resume = resume;
    o.force = force;
    o.stop_after = stop_after;
    o.quiet = 1;
    st_error_clear(e);
    return st_train(c, dir, &o, res, e);
}

/* "step -> loss" text of every training record in metrics.jsonl, one per line. */
static char *loss_trace(const char *dir, int *n_records) {
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    st_error e = {0};
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap), line[1024];
    out[0] = 0;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\": "), *l = strstr(line, "\"loss\": ");
        if (!s || !l) continue;
        long long step = strtoll(s + 8, NULL, 10);
        const char *end = strchr(l + 8, ',');
        int k = snprintf(out + len, cap - len, "%lld %.*s\n", step, end ? (int)(end - l - 8) : 0, l + 8);
        if (k > 0 && len + (size_t)k < cap) len += (size_t)k;
        n++;
    }
    fclose(f);
    (void)e;
    if (n_records) *n_records = n;
    return out;
}

static double nth_loss(const char *trace, int idx) {
    const char *p = trace;
    for (int i = 0; i < idx && p; i++) { p = strchr(p, '\n'); if (p) p++; }
    if (!p || !*p) return NAN;
    const char *sp = strchr(p, ' ');
    return sp ? strtod(sp + 1, NULL) : NAN;
}

/* Model + full optimizer state from a checkpoint. */
static int load_full(const char *ckpt, st_model *m, st_train_state *s) {
    st_error e = {0};
    st_run_config c;
    if (st_checkpoint_load(ckpt, &c, NULL, 0, NULL, &e)) { CHECK_MSG(0, "%s", e.msg); return 1; }
    if (st_model_init(m, &c.model, c.train.seed, &e)) { CHECK_MSG(0, "%s", e.msg); return 1; }
    if (st_checkpoint_load(ckpt, NULL, &m->params, 1, s, &e)) { CHECK_MSG(0, "%s", e.msg); return 1; }
    return 0;
}

static char *slurp(const char *path) {
    st_error e = {0};
    size_t len;
    return st_read_file(path, &len, (size_t)1 << 30, &e);
}

static void test_determinism_resume(void) {
    st_run_config c;
    if (tiny_config(&c, NULL, 0)) return;
    char a[512], b[512], r[512];
    run_dir(a, sizeof a, "A");
    run_dir(b, sizeof b, "B");
    run_dir(r, sizeof r, "R");
    st_error e;
    st_train_result ra, rb, rr;
    CHECK_MSG(train(&c, a, 0, 0, 0, &ra, &e) == ST_OK, "%s", e.msg);
    CHECK_MSG(train(&c, b, 0, 0, 0, &rb, &e) == ST_OK, "%s", e.msg);
    CHECK(ra.step == 20 && ra.stopped == 0 && isfinite(ra.loss) && isfinite(ra.val_loss));
    /* one arena sized up front: no step needed more (steady state allocates nothing) */
    CHECK_MSG(!ra.arena_grew && ra.arena_high_water > 0 && ra.arena_high_water <= ra.arena_bytes,
              "arena grew: capacity %zu, high water %zu", ra.arena_bytes, ra.arena_high_water);
    int na = 0, nb = 0, nr = 0;
    char *ta = loss_trace(a, &na), *tb = loss_trace(b, &nb);
    CHECK(na == 20 && nb == 20);
    CHECK_MSG(ta && tb && strcmp(ta, tb) == 0, "two runs differ:\n%s---\n%s", ta, tb);

    /* 9 steps, stop (checkpoint), resume to 20: same trace and same final state */
    CHECK_MSG(train(&c, r, 0, 0, 9, &rr, &e) == ST_OK, "%s", e.msg);
    CHECK(rr.step == 9 && rr.stopped == 2);
    CHECK_MSG(train(NULL, r, 1, 0, 0, &rr, &e) == ST_OK, "%s", e.msg);
    CHECK(rr.step == 20 && rr.stopped == 0);
    char *tr = loss_trace(r, &nr);
    CHECK(nr == 20);
    CHECK_MSG(ta && tr && strcmp(ta, tr) == 0, "resumed run differs:\n%s---\n%s", ta, tr);
    CHECK(ra.val_loss == rr.val_loss && ra.best_val == rr.best_val);

    char ca[600], cr[600];
    st_error e2 = {0};
    CHECK(st_checkpoint_resolve(a, ca, sizeof ca, &e2) == ST_OK && st_checkpoint_resolve(r, cr, sizeof cr, &e2) == ST_OK);
    CHECK(strstr(ca, "step_00000020.ckpt") != NULL);
    st_model ma, mr;
    st_train_state sa, sr;
    if (!load_full(ca, &ma, &sa) && !load_full(cr, &mr, &sr)) {
        size_t n = ma.params.n;
        CHECK(n == mr.params.n);
        CHECK(memcmp(ma.params.data, mr.params.data, n * sizeof(float)) == 0);
        CHECK(memcmp(ma.params.m, mr.params.m, n * sizeof(float)) == 0);
        CHECK(memcmp(ma.params.v, mr.params.v, n * sizeof(float)) == 0);
        CHECK(sa.step == sr.step && sa.opt_t == sr.opt_t && sa.loader_draws == sr.loader_draws);
        CHECK(memcmp(&sa.rng, &sr.rng, sizeof sa.rng) == 0 && sa.best_val == sr.best_val);
        CHECK(sa.tokens == 20 * 8 * 16);
        /* st_checkpoint_load_model on the run dir gives the same parameters */
        st_model ml;
        st_run_config cl;
        CHECK_MSG(st_checkpoint_load_model(a, &ml, &cl, &e2) == ST_OK, "%s", e2.msg);
        CHECK(ml.params.n == n && memcmp(ml.params.data, ma.params.data, n * sizeof(float)) == 0);
        CHECK(cl.model.vocab_size == 32 && cl.model.d_model == 32);
        st_model_free(&ml);
        st_model_free(&ma);
        st_model_free(&mr);
    }
    /* the run dir's config.json is the resolved config and loads back to itself */
    char cpath[600];
    snprintf(cpath, sizeof cpath, "%s/config.json", a);
    st_run_config back;
    CHECK_MSG(st_run_config_load(cpath, NULL, 0, &back, &e2) == ST_OK, "%s", e2.msg);
    CHECK(back.model.vocab_size == 32);               /* filled in from the dataset */
    char *saved = slurp(cpath), *again = st_run_config_to_json(&back, NULL);
    CHECK_MSG(saved && again && strcmp(saved, again) == 0, "config.json does not reload to itself");
    free(saved); free(again);
    char tpath[600];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", a);
    struct stat st;
    CHECK(stat(tpath, &st) == 0);
    snprintf(tpath, sizeof tpath, "%s/checkpoints/best.ckpt", a);
    CHECK(stat(tpath, &st) == 0);

    /* resuming a finished run does nothing */
    CHECK_MSG(train(NULL, a, 1, 0, 0, &ra, &e) == ST_OK, "%s", e.msg);
    char *ta2 = loss_trace(a, &na);
    CHECK(na == 20 && strcmp(ta, ta2) == 0);
    free(ta); free(tb); free(tr); free(ta2);
}

static void test_loss_decreases(void) {
    /* order 1: a bigram source the tiny model can learn in a few dozen steps */
    const char *sets[] = {"train.steps=60", "train.eval_every=60", "train.eval_batches=8", "train.checkpoint_every=0",
                          "model.dropout_attn=0", "model.dropout_resid=0", "data.synthetic.order=1"};
    st_run_config c;
    if (tiny_config(&c, sets, 7)) return;
    char d[512];
    run_dir(d, sizeof d, "L");
    st_error e;
    st_train_result res;
    CHECK_MSG(train(&c, d, 0, 0, 0, &res, &e) == ST_OK, "%s", e.msg);
    int n = 0;
    char *t = loss_trace(d, &n);
    CHECK(n == 60);
    double first = 0, last = 0;
    for (int i = 0; i < 5; i++) { first += nth_loss(t, i) / 5; last += nth_loss(t, n - 5 + i) / 5; }
    /* uniform guessing is ln 32 = 3.47 nats; 4 successors per token: at most ln 4 = 1.39 */
    CHECK_MSG(first > 2.5 && last < first - 1.0, "loss did not fall: first %.4f last %.4f", first, last);
    CHECK_MSG(res.val_loss < 1.8, "validation loss %.4f (first training loss %.4f)", res.val_loss, first);
    printf("loss decreases: first-5 mean %.4f, last-5 mean %.4f, val %.4f (uniform %.4f)\n", first, last,
           res.val_loss, log(32.0));
    free(t);
}

/* One batch of 8 vs two accumulated micro-batches of 4 (dropout off, SGD, no clipping). */
static void test_accumulation(void) {
    const char *common[] = {"model.dropout_attn=0", "model.dropout_resid=0", "train.steps=1",
                            "train.eval_batches=0", "train.optimizer.name=sgd", "train.optimizer.lr=0.5",
                            "train.clip_norm=0", "train.schedule.kind=constant", "train.schedule.warmup=0",
                            "train.batch_size=8", "train.grad_accum=1"};
    st_run_config c1, c2;
    if (tiny_config(&c1, common, 11)) return;
    const char *acc[] = {"model.dropout_attn=0", "model.dropout_resid=0", "train.steps=1",
                         "train.eval_batches=0", "train.optimizer.name=sgd", "train.optimizer.lr=0.5",
                         "train.clip_norm=0", "train.schedule.kind=constant", "train.schedule.warmup=0",
                         "train.batch_size=4", "train.grad_accum=2"};
    if (tiny_config(&c2, acc, 11)) return;
    char d1[512], d2[512];
    run_dir(d1, sizeof d1, "G1");
    run_dir(d2, sizeof d2, "G2");
    st_error e;
    st_train_result r1, r2;
    CHECK_MSG(train(&c1, d1, 0, 0, 0, &r1, &e) == ST_OK, "%s", e.msg);
    CHECK_MSG(train(&c2, d2, 0, 0, 0, &r2, &e) == ST_OK, "%s", e.msg);
    CHECK_NEAR(r1.loss, r2.loss, 1e-6);
    st_model m1, m2;
    st_error e2 = {0};
    if (st_checkpoint_load_model(d1, &m1, NULL, &e2) || st_checkpoint_load_model(d2, &m2, NULL, &e2)) {
        CHECK_MSG(0, "%s", e2.msg);
        return;
    }
    /* w1 = w0 - lr g: parameter differences are lr times gradient differences */
    CHECK(th_close("accumulated vs single-batch params", m1.params.data, m2.params.data, (int64_t)m1.params.n, 2e-6, 1e-5));
    st_model_free(&m1);
    st_model_free(&m2);
}

/* crc32 of every file of a run dir (names + contents), to see it untouched. */
static uint32_t dir_crc(const char *dir) {
    const char *names[] = {"config.json", "metrics.jsonl", "tokenizer.json", "checkpoints/latest",
                           "checkpoints/best.ckpt", "checkpoints/step_00000015.ckpt", "checkpoints/step_00000020.ckpt"};
    uint32_t crc = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *t = slurp(path);
        crc = st_crc32(crc, names[i], strlen(names[i]));
        if (t) { crc = st_crc32(crc, t, strlen(t)); free(t); }
    }
    return crc;
}

static uint32_t file_crc(const char *path) {
    st_error e = {0};
    size_t len = 0;
    char *t = st_read_file(path, &len, (size_t)1 << 30, &e);
    uint32_t c = t ? st_crc32(0, t, len) : 0;
    free(t);
    return c;
}

static void test_occupied(void) {
    st_run_config c;
    if (tiny_config(&c, NULL, 0)) return;
    char a[512];
    run_dir(a, sizeof a, "A");   /* trained by test_determinism_resume */
    uint32_t before = dir_crc(a);
    st_error e;
    CHECK(train(&c, a, 0, 0, 0, NULL, &e) == ST_ERR_IO);
    CHECK_MSG(strstr(e.msg, a) && strstr(e.msg, "--force") && strstr(e.msg, "--resume"), "%s", e.msg);
    CHECK(dir_crc(a) == before);
    /* vocabulary must match the data */
    const char *sets[] = {"model.vocab_size=100"};
    st_run_config cv;
    if (tiny_config(&cv, sets, 1)) return;
    char v[512];
    run_dir(v, sizeof v, "V");
    CHECK(train(&cv, v, 0, 0, 0, NULL, &e) == ST_ERR_CONFIG);
    CHECK_MSG(strstr(e.msg, "tiny.json: model.vocab_size: 100 does not match the dataset's vocabulary (32)"), "%s", e.msg);
    /* resume of a directory without a run (no config.json): not a run, before any training */
    char none[512];
    run_dir(none, sizeof none, "nothing");
    mkdir(none, 0755);
    CHECK(train(&c, none, 1, 0, 0, NULL, &e) == ST_ERR_IO);
}

/* Poison the AdamW second moments of a good checkpoint: the next update makes every
 * parameter NaN, the step after has a NaN loss. */
static void test_nonfinite(void) {
    const char *sets[] = {"model.dropout_attn=0", "model.dropout_resid=0"};
    st_run_config c;
    if (tiny_config(&c, sets, 2)) return;
    char d[512], ck[700], latest[700];
    run_dir(d, sizeof d, "N");
    st_error e;
    CHECK_MSG(train(&c, d, 0, 0, 10, NULL, &e) == ST_OK, "%s", e.msg);
    snprintf(ck, sizeof ck, "%s/checkpoints/step_00000010.ckpt", d);
    snprintf(latest, sizeof latest, "%s/checkpoints/latest", d);
    st_model m;
    st_train_state s;
    if (load_full(ck, &m, &s)) return;
    for (size_t i = 0; i < m.params.n; i++) m.params.v[i] = NAN;
    st_run_config ckc;
    CHECK(st_checkpoint_load(ck, &ckc, NULL, 0, NULL, &e) == ST_OK);
    CHECK(st_checkpoint_save(ck, &ckc, &m.params, &s, &e) == ST_OK);
    st_model_free(&m);
    uint32_t crc = file_crc(ck), lcrc = file_crc(latest);

    CHECK(train(NULL, d, 1, 0, 0, NULL, &e) == ST_ERR_NUMERIC);
    CHECK_MSG(strstr(e.msg, "step 12: non-finite loss") && strstr(e.msg, "step_00000010.ckpt"), "%s", e.msg);
    CHECK(file_crc(ck) == crc && file_crc(latest) == lcrc);

    /* skip mode: the NaN steps are skipped, but the checkpoint at step 15 is refused */
    st_run_config cs;
    char cpath[700];
    const char *skip[] = {"train.nonfinite=skip"};
    snprintf(cpath, sizeof cpath, "%s/config.json", d);
    CHECK(st_run_config_load(cpath, skip, 1, &cs, &e) == ST_OK);
    st_train_result res;
    CHECK(train(&cs, d, 1, 0, 0, &res, &e) == ST_ERR_NUMERIC);
    CHECK_MSG(strstr(e.msg, "step 15: parameters are not finite; not saving") != NULL, "%s", e.msg);
    CHECK(file_crc(ck) == crc && file_crc(latest) == lcrc);
    char s15[700];
    snprintf(s15, sizeof s15, "%s/checkpoints/step_00000015.ckpt", d);
    CHECK(access(s15, F_OK) != 0);
    int n = 0;
    char *t = loss_trace(d, &n);
    CHECK_MSG(n == 15 && strstr(t, "12 null\n") && strstr(t, "15 null\n"), "%d records:\n%s", n, t);
    free(t);
}

static void test_init_from(void) {
    const char *sets[] = {"train.steps=1", "train.eval_batches=0", "train.optimizer.name=sgd",
                          "train.optimizer.lr=1e-30", "train.schedule.kind=constant", "train.schedule.warmup=0"};
    st_run_config c;
    if (tiny_config(&c, sets, 6)) return;
    c.model.vocab_size = 32;
    st_model src;
    st_error e = {0};
    if (st_model_init(&src, &c.model, 777, &e)) { CHECK_MSG(0, "%s", e.msg); return; }
    char st_path[600], d[512];
    snprintf(st_path, sizeof st_path, "%s/init.safetensors", g_tmp);
    CHECK_MSG(st_model_save_safetensors(&src, st_path, &e) == ST_OK, "%s", e.msg);
    snprintf(c.train.init_from, sizeof c.train.init_from, "%s", st_path);
    run_dir(d, sizeof d, "I");
    CHECK_MSG(train(&c, d, 0, 0, 0, NULL, &e) == ST_OK, "%s", e.msg);
    st_model m;
    if (st_checkpoint_load_model(d, &m, NULL, &e)) { CHECK_MSG(0, "%s", e.msg); st_model_free(&src); return; }
    CHECK(th_close("init_from params", m.params.data, src.params.data, (int64_t)src.params.n, 1e-6, 0));
    st_model_free(&m);
    st_model_free(&src);
}

/* train.max_seconds: stop cleanly with a checkpoint; --resume continues. */
static void test_time_limit(void) {
    const char *sets[] = {"train.max_seconds=1e-9", "train.steps=4", "train.eval_batches=0"};
    st_run_config c;
    if (tiny_config(&c, sets, 3)) return;
    char d[512];
    run_dir(d, sizeof d, "T");
    st_error e;
    st_train_result res;
    CHECK_MSG(train(&c, d, 0, 0, 0, &res, &e) == ST_OK, "%s", e.msg);
    CHECK(res.stopped == 1 && res.step == 1);
    char ck[700];
    snprintf(ck, sizeof ck, "%s/checkpoints/step_00000001.ckpt", d);
    CHECK(access(ck, F_OK) == 0);
    const char *more[] = {"train.max_seconds=0"};
    st_run_config c2;
    char cpath[700];
    snprintf(cpath, sizeof cpath, "%s/config.json", d);
    CHECK(st_run_config_load(cpath, more, 1, &c2, &e) == ST_OK);
    CHECK_MSG(train(&c2, d, 1, 0, 0, &res, &e) == ST_OK, "%s", e.msg);
    CHECK(res.stopped == 0 && res.step == 4);
}

int main(void) {
    if (!test_tmpdir(g_tmp, sizeof g_tmp)) { CHECK(0); return test_finish("test_train"); }
    st_log(ST_LOG_INFO, "test_train: runs under %s", g_tmp);
    test_determinism_resume();
    test_loss_decreases();
    test_accumulation();
    test_occupied();
    test_nonfinite();
    test_init_from();
    test_time_limit();
    int rc = test_finish("test_train");
    if (rc == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    return rc;
}
