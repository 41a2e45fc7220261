/* test_config.c - run configs: a table of bad configs (each must fail with ST_ERR_CONFIG
 * and name the key path), --set parsing and errors, defaults and derived values, path
 * expansion, the canonical JSON round trip, diffs, and every shipped config in configs/. */
#include "harness.h"
#include "st_train.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE_MODEL "\"n_layers\": 2, \"d_model\": 32, \"n_heads\": 4, \"pos\": \"alibi\""
#define BASE_TRAIN "\"batch_size\": 4, \"seq_len\": 16, \"steps\": 10, \"schedule\": {\"warmup\": 2}"
#define BASE "{\"model\": {" BASE_MODEL "}, \"data\": {\"source\": \"synthetic\"}, \"train\": {" BASE_TRAIN "}}"

static int parse(const char *json, const char *const *sets, int n_sets, st_run_config *c, st_error *e) {
    st_error_clear(e);
    return st_run_config_parse(json, strlen(json), "cfg/x.json", sets, n_sets, c, e);
}

typedef struct bad_case { const char *json; const char *expect; } bad_case;

static const bad_case bad_cases[] = {
    /* malformed JSON: file, line, byte offset */
    {"{\"model\": {\"n_layers\": 2,}}", "cfg/x.json: invalid JSON at line 1, column 27 (byte 26)"},
    {"{\n  \"model\": {\n    \"n_layers\": 2\n", "cfg/x.json: invalid JSON: unexpected end of file at line 4"},
    {"{\n  \"train\": {\"steps\": 10}\n} extra", "invalid JSON at line 3, column 3 (byte 29), near 'extra'"},
    {"", "cfg/x.json: invalid JSON: unexpected end of file at line 1"},
    {"[1, 2]", "cfg/x.json: expected a JSON object"},
    /* unknown keys at every level */
    {"{\"optimizer\": {}}", "cfg/x.json: optimizer: unknown key"},
    {"{\"model\": {\"n_head\": 4}}", "cfg/x.json: model.n_head: unknown key (did you mean \"model.n_heads\"?)"},
    {"{\"model\": {\"rf\": {\"rhoo\": 4}}}", "cfg/x.json: model.rf.rhoo: unknown key"},
    {"{\"data\": {\"synthetic\": {\"vocabulary\": 4}}}", "cfg/x.json: data.synthetic.vocabulary: unknown key"},
    {"{\"data\": {\"file\": \"x\"}}", "cfg/x.json: data.file: unknown key"},
    {"{\"train\": {\"optimizer\": {\"betas\": [0.9, 0.95]}}}", "cfg/x.json: train.optimizer.betas: unknown key"},
    {"{\"train\": {\"schedule\": {\"warmup_steps\": 5}}}", "cfg/x.json: train.schedule.warmup_steps: unknown key"},
    {"{\"train\": {\"lr\": 0.1}}", "cfg/x.json: train.lr: unknown key"},
    {"{\"eval\": {\"length\": [64]}}", "cfg/x.json: eval.length: unknown key"},
    {"{\"model\": {\"n_layers\": 2, \"n_layers\": 3}}", "cfg/x.json: model.n_layers: duplicate key"},
    /* wrong types */
    {"{\"model\": 3}", "cfg/x.json: model: expected an object, got 3"},
    {"{\"model\": {\"n_layers\": \"2\"}}", "cfg/x.json: model.n_layers: expected an integer, got \"2\""},
    {"{\"model\": {\"d_model\": 32.5}}", "cfg/x.json: model.d_model: expected an integer, got 32.5"},
    {"{\"model\": {\"tie_embeddings\": 1}}", "cfg/x.json: model.tie_embeddings: expected true or false, got 1"},
    {"{\"model\": {\"pos\": 1}}", "cfg/x.json: model.pos: expected one of"},
    {"{\"model\": {\"rf\": \"exp\"}}", "cfg/x.json: model.rf: expected an object"},
    {"{\"train\": {\"optimizer\": {\"lr\": \"0.1\"}}}", "cfg/x.json: train.optimizer.lr: expected a number"},
    {"{\"train\": {\"seed\": null}}", "cfg/x.json: train.seed: expected an integer, got null"},
    {"{\"eval\": {\"lengths\": 64}}", "cfg/x.json: eval.lengths: expected an array of integers"},
    {"{\"eval\": {\"lengths\": [64, \"128\"]}}", "cfg/x.json: eval.lengths[1]: expected an integer"},
    {"{\"data\": {\"path\": 5}}", "cfg/x.json: data.path: expected a string"},
    {"{\"data\": {\"synthetic\": {\"tokens\": [1000, 100]}}}", "cfg/x.json: data.synthetic.tokens: expected 3 integers"},
    {"{\"train\": {\"optimizer\": {\"no_decay\": \"bias\"}}}", "cfg/x.json: train.optimizer.no_decay: expected an array"},
    /* out of range: negative / zero sizes */
    {"{\"train\": {\"batch_size\": -4}}", "cfg/x.json: train.batch_size: must be in [1, 1048576], got -4"},
    {"{\"train\": {\"seq_len\": 0}}", "cfg/x.json: train.seq_len: must be in [1,"},
    /* issue 14 item 7: the schema's range is the one enforced (the model validator said 256,
     * the schema 1024; the data validator 20, the schema 64) */
    {"{\"model\": {\"n_layers\": 300}}", "cfg/x.json: model.n_layers: must be in [1, 256], got 300"},
    {"{\"data\": {\"synthetic\": {\"order\": 30}}}", "cfg/x.json: data.synthetic.order: must be in [1, 20], got 30"},
    {"{\"train\": {\"steps\": -1}}", "cfg/x.json: train.steps: must be in [0, 1e12], got -1"},
    /* issue 14 item 9: the upper bound stays in the message, in a readable form */
    {"{\"train\": {\"steps\": 1.23e29}}", "cfg/x.json: train.steps: must be in [0, 1e12], got 1.23e29"},
    {"{\"eval\": {\"max_tokens\": 2e13}}", "cfg/x.json: eval.max_tokens: must be in [0, 1e12], got 2e13"},
    {"{\"train\": {\"grad_accum\": 0}}", "cfg/x.json: train.grad_accum"},
    {"{\"model\": {\"n_layers\": 0}}", "cfg/x.json: model.n_layers: must be in [1, 256], got 0"},
    {"{\"model\": {\"d_model\": -8}}", "cfg/x.json: model.d_model"},
    {"{\"model\": {\"dropout_attn\": 1.5}}", "cfg/x.json: model.dropout_attn: must be in [0, 0.99], got 1.5"},
    {"{\"model\": {\"ln_eps\": 0}}", "cfg/x.json: model.ln_eps: must be in (0, 1], got 0"},
    {"{\"train\": {\"optimizer\": {\"lr\": 0}}}", "cfg/x.json: train.optimizer.lr: must be in (0, 100], got 0"},
    {"{\"train\": {\"optimizer\": {\"beta1\": 1}}}", "cfg/x.json: train.optimizer.beta1"},
    {"{\"train\": {\"optimizer\": {\"weight_decay\": -0.1}}}", "cfg/x.json: train.optimizer.weight_decay"},
    {"{\"train\": {\"threads\": -1}}", "cfg/x.json: train.threads"},
    {"{\"train\": {\"keep_last\": 0}}", "cfg/x.json: train.keep_last"},
    {"{\"train\": {\"max_seconds\": -1}}", "cfg/x.json: train.max_seconds: must be in [0, 1000000000], got -1"},
    {"{\"eval\": {\"lengths\": [64, 0]}}", "cfg/x.json: eval.lengths[1]: must be in [1,"},
    {"{\"train\": {\"seed\": 1e300}}", "cfg/x.json: train.seed: must be in [0, 2^53 - 1], got 1e300"},
    /* issue 14 item 9: [] is not "the defaults" */
    {"{\"eval\": {\"lengths\": []}}", "cfg/x.json: eval.lengths: expected at least one entry, got []"},
    /* bad names */
    {"{\"model\": {\"pos\": \"alibii\"}}", "cfg/x.json: model.pos: unknown value \"alibii\" (expected \"none\", \"alibi\""},
    {"{\"model\": {\"gelu\": \"exact\"}}", "cfg/x.json: model.gelu: unknown value \"exact\""},
    {"{\"model\": {\"rf\": {\"kind\": \"linear\"}}}", "cfg/x.json: model.rf.kind: unknown value \"linear\""},
    {"{\"model\": {\"rf\": {\"scope\": \"block\"}}}", "cfg/x.json: model.rf.scope: unknown value \"block\""},
    {"{\"model\": {\"rf\": {\"param\": \"sqrt\"}}}", "cfg/x.json: model.rf.param: unknown value \"sqrt\" (expected \"softplus\" or \"log\")"},
    {"{\"data\": {\"source\": \"wikipedia\"}}", "cfg/x.json: data.source: unknown value \"wikipedia\""},
    {"{\"data\": {\"tokenizer\": \"sentencepiece\"}}", "cfg/x.json: data.tokenizer: unknown value"},
    {"{\"train\": {\"optimizer\": {\"name\": \"adam\"}}}", "cfg/x.json: train.optimizer.name: unknown value \"adam\" (expected \"adamw\" or \"sgd\")"},
    {"{\"train\": {\"optimizer\": {\"no_decay\": [\"bias\", \"weights\"]}}}", "cfg/x.json: train.optimizer.no_decay[1]: unknown value \"weights\""},
    {"{\"train\": {\"schedule\": {\"kind\": \"step\"}}}", "cfg/x.json: train.schedule.kind: unknown value \"step\""},
    {"{\"train\": {\"steps\": 100, \"schedule\": {\"kind\": \"wsd\", \"warmup\": 90, \"decay_frac\": 0.15}}}",
     "cfg/x.json: train.schedule.decay_frac: the decay's 15 steps (0.15 x 100) and train.schedule.warmup's 90 exceed train.steps (100)"},
    {"{\"train\": {\"steps\": 100, \"schedule\": {\"kind\": \"linear\", \"warmup\": 101}}}",
     "cfg/x.json: train.schedule.warmup: 101 exceeds train.steps (100)"},
    {"{\"train\": {\"schedule\": {\"decay_frac\": 1.5}}}", "cfg/x.json: train.schedule.decay_frac: must be in [0, 1], got 1.5"},
    {"{\"train\": {\"nonfinite\": \"ignore\"}}", "cfg/x.json: train.nonfinite: unknown value"},
    {"{\"eval\": {\"split\": \"train\"}}", "cfg/x.json: eval.split: unknown value \"train\""},
    {"{\"eval\": {\"mode\": \"overlapping\"}}", "cfg/x.json: eval.mode: unknown value"},
    /* cross-key rules */
    {"{\"model\": {\"d_model\": 32, \"n_heads\": 5}}", "cfg/x.json: model.n_heads: must divide model.d_model (32 % 5 != 0)"},
    {"{\"model\": {\"pos\": \"learned\", \"max_len\": 64}, \"train\": {\"seq_len\": 128}}", "cfg/x.json: train.seq_len: 128 exceeds the 64 tokens learned positions represent; model.max_len"},
    {"{\"train\": {\"schedule\": {\"kind\": \"inv_sqrt\", \"warmup\": 0}}}", "cfg/x.json: train.schedule.warmup: must be >= 1"},
    {"{\"train\": {\"steps\": 10, \"schedule\": {\"warmup\": 20}}}", "cfg/x.json: train.schedule.warmup: 20 exceeds train.steps"},
    {"{\"eval\": {\"mode\": \"sliding\", \"stride\": 100, \"lengths\": [64]}}", "cfg/x.json: eval.stride: 100 exceeds eval.lengths[0]"},
    {"{\"eval\": {\"mode\": \"nonoverlapping\", \"stride\": 100, \"lengths\": [256, 64]}}", "cfg/x.json: eval.stride: 100 exceeds eval.lengths[1] = 64"},
    {"{\"data\": {\"source\": \"wikitext\"}}", "cfg/x.json: data.path"},
    {"{\"data\": {\"synthetic\": {\"vocab\": 8, \"branch\": 9}}}", "cfg/x.json: data.synthetic.branch: must be in [1, syn"},
};

static void test_bad_table(void) {
    int n = (int)(sizeof bad_cases / sizeof bad_cases[0]);
    for (int i = 0; i < n; i++) {
        st_run_config c;
        st_error e;
        int rc = parse(bad_cases[i].json, NULL, 0, &c, &e);
        CHECK_MSG(rc == ST_ERR_CONFIG && e.code == ST_ERR_CONFIG, "case %d (%s): rc %d", i, bad_cases[i].json, rc);
        CHECK_MSG(strstr(e.msg, bad_cases[i].expect) != NULL, "case %d: message\n  got:    %s\n  expect: %s",
                  i, e.msg, bad_cases[i].expect);
    }
}

typedef struct bad_set { const char *set; const char *expect; } bad_set;
static const bad_set bad_sets[] = {
    {"model.n_head=4", "--set model.n_head: unknown key (did you mean \"model.n_heads\"?)"},
    {"modle.n_heads=4", "--set modle.n_heads: unknown key"},
    {"train.steps=abc", "--set train.steps: expected an integer, got \"abc\""},
    {"train.steps=1.5", "--set train.steps: expected an integer, got 1.5"},
    {"train.batch_size=-1", "--set train.batch_size: must be in [1, 1048576], got -1"},
    /* issue 14 item 7: a value the module validator used to refuse as the config file's
     * error ("cfg/x.json: model.n_layers") is the --set's */
    {"model.n_layers=300", "--set model.n_layers: must be in [1, 256], got 300"},
    {"data.synthetic.order=30", "--set data.synthetic.order: must be in [1, 20], got 30"},
    {"data.synthetic.vocab=100000", "--set data.synthetic.vocab: must be in [2, 65536], got 100000"},
    {"model.pos=bogus", "--set model.pos: unknown value \"bogus\""},
    {"model.tie_embeddings=yes", "--set model.tie_embeddings: expected true or false, got \"yes\""},
    {"model=3", "--set model: is an object"},
    {"model.rf={\"kind\":\"exp\"}", "--set model.rf: is an object"},
    {"noequals", "--set noequals: expected section.key=value"},
    {"=5", "expected section.key=value"},
    {"eval.lengths=[64,-1]", "--set eval.lengths[1]: must be in [1,"},
    {"model.n_heads=5", "cfg/x.json: model.n_heads: must divide model.d_model (32 % 5 != 0)"},
};

static void test_bad_sets(void) {
    int n = (int)(sizeof bad_sets / sizeof bad_sets[0]);
    for (int i = 0; i < n; i++) {
        st_run_config c;
        st_error e;
        const char *sets[1] = {bad_sets[i].set};
        int rc = parse(BASE, sets, 1, &c, &e);
        CHECK_MSG(rc == ST_ERR_CONFIG, "set %s: rc %d", bad_sets[i].set, rc);
        CHECK_MSG(strstr(e.msg, bad_sets[i].expect) != NULL, "set %s: message\n  got:    %s\n  expect: %s",
                  bad_sets[i].set, e.msg, bad_sets[i].expect);
    }
}

static void test_good(void) {
    st_run_config c;
    st_error e;
    CHECK_MSG(parse(BASE, NULL, 0, &c, &e) == ST_OK, "%s", e.msg);
    CHECK(c.model.n_layers == 2 && c.model.d_model == 32 && c.model.n_heads == 4 && c.model.pos == ST_POS_ALIBI);
    CHECK(c.model.vocab_size == 0);                    /* from the dataset */
    CHECK(c.train.batch_size == 4 && c.train.seq_len == 16 && c.train.steps == 10);
    CHECK(c.train.sched.kind == ST_SCHED_COSINE && c.train.sched.warmup == 2);
    CHECK(c.train.optim.no_decay == (ST_NODECAY_BIAS | ST_NODECAY_NORM));
    /* derived: eval lengths T, 2T, 4T, 8T */
    CHECK(c.eval.n_lengths == 4 && c.eval.lengths[0] == 16 && c.eval.lengths[3] == 128);
    CHECK(strcmp(c.file, "cfg/x.json") == 0);

    const char *sets[] = {"model.pos=rope", "train.optimizer.lr=0.01", "model.tie_embeddings=false",
                          "eval.lengths=[8,16]", "data.source=\"synthetic\"", "train.optimizer.name=sgd",
                          "train.optimizer.no_decay=[\"embedding\"]", "train.seed=12345678901", "train.max_seconds=2.5",
                          "model.rf.kind=gaussian", "model.gelu=erf"};
    int ns = (int)(sizeof sets / sizeof sets[0]);
    CHECK_MSG(parse(BASE, sets, ns, &c, &e) == ST_OK, "%s", e.msg);
    CHECK(c.model.pos == ST_POS_ROPE);
    CHECK(c.train.optim.lr == 0.01f);
    CHECK(c.model.tie_embeddings == 0);
    CHECK(c.eval.n_lengths == 2 && c.eval.lengths[0] == 8 && c.eval.lengths[1] == 16);
    CHECK(c.train.optim.name == ST_OPT_SGD);
    CHECK(c.train.optim.no_decay == ST_NODECAY_EMBEDDING);
    CHECK(c.train.seed == 12345678901ull);
    CHECK(c.train.max_seconds == 2.5);
    CHECK(c.model.rf_kind == ST_RF_GAUSSIAN && c.model.gelu_exact == 1);

    /* the defaults alone are valid */
    st_run_config d;
    st_run_config_default(&d);
    st_error_clear(&e);
    CHECK_MSG(st_run_config_validate(&d, &e) == ST_OK, "%s", e.msg);
    /* a value set in code is range-checked too */
    d.train.batch_size = 0;
    CHECK(st_run_config_validate(&d, &e) == ST_ERR_CONFIG && strstr(e.msg, "train.batch_size"));
}

static void test_round_trip(void) {
    st_run_config a, b;
    st_error e;
    const char *sets[] = {"train.optimizer.lr=3e-4", "model.dropout_attn=0.1", "train.max_seconds=0.1",
                          "data.path=some/rel/dir", "train.optimizer.no_decay=[\"bias\",\"norm\",\"embedding\"]"};
    CHECK_MSG(parse(BASE, sets, 5, &a, &e) == ST_OK, "%s", e.msg);
    char *ja = st_run_config_to_json(&a, NULL);
    CHECK(ja != NULL);
    CHECK_MSG(strstr(ja, "\"lr\": 0.0003,") != NULL, "lr not in shortest form:\n%s", ja);
    CHECK(strstr(ja, "\"dropout_attn\": 0.1,") != NULL);
    CHECK(strstr(ja, "\"no_decay\": [\"bias\", \"norm\", \"embedding\"]") != NULL);
    CHECK(strstr(ja, "\"lengths\": [16, 32, 64, 128]") != NULL);
    CHECK_MSG(parse(ja, NULL, 0, &b, &e) == ST_OK, "%s", e.msg);
    char *jb = st_run_config_to_json(&b, NULL);
    CHECK_MSG(jb && strcmp(ja, jb) == 0, "round trip differs:\n%s\n---\n%s", ja, jb ? jb : "(null)");
    CHECK(st_run_config_hash(&a) == st_run_config_hash(&b));
    char diff[256];
    CHECK(st_run_config_diff(&a, &b, NULL, diff, sizeof diff) == 0);
    CHECK(a.train.optim.lr == b.train.optim.lr && a.model.dropout_attn == b.model.dropout_attn);
    CHECK(a.train.max_seconds == b.train.max_seconds);
    b.model.d_model = 64;
    CHECK(st_run_config_diff(&a, &b, "model", diff, sizeof diff) == 1);
    CHECK_MSG(strcmp(diff, "model.d_model: 32 vs 64") == 0, "diff: %s", diff);
    CHECK(st_run_config_diff(&a, &b, "train", diff, sizeof diff) == 0);
    CHECK(st_run_config_hash(&a) != st_run_config_hash(&b));
    /* one section */
    char *jm = st_run_config_to_json(&a, "model");
    CHECK(jm && jm[0] == '{' && strstr(jm, "\"n_heads\": 4") && !strstr(jm, "batch_size"));
    free(ja); free(jb); free(jm);

    /* save + load from a file gives the same canonical text */
    char dir[256], path[512];
    CHECK(test_tmpdir(dir, sizeof dir) != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(st_run_config_save(&a, path, &e) == ST_OK);
    CHECK_MSG(st_run_config_load(path, NULL, 0, &b, &e) == ST_OK, "%s", e.msg);
    CHECK(st_run_config_diff(&a, &b, NULL, diff, sizeof diff) == 0);
    CHECK(strcmp(b.file, path) == 0);
    unlink(path);
    rmdir(dir);
    /* missing file: I/O error naming it */
    CHECK(st_run_config_load("/nonexistent/x.json", NULL, 0, &b, &e) == ST_ERR_IO && strstr(e.msg, "/nonexistent/x.json"));
}

static void test_paths(void) {
    char out[4096], cwd[2048];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    const char *old = getenv("STRETCH_DATA_DIR");
    char saved[2048] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    setenv("STRETCH_DATA_DIR", "/data/shared", 1);
    CHECK(st_resolve_path("$STRETCH_DATA_DIR/wikitext-2", out, sizeof out) == ST_OK && !strcmp(out, "/data/shared/wikitext-2"));
    CHECK(st_resolve_path("${STRETCH_DATA_DIR}/tinyshakespeare/input.txt", out, sizeof out) == ST_OK &&
          !strcmp(out, "/data/shared/tinyshakespeare/input.txt"));
    CHECK(st_resolve_path("$STRETCH_DATA_DIRX/a", out, sizeof out) == ST_OK && strstr(out, "/$STRETCH_DATA_DIRX/a"));
    CHECK(st_resolve_path("/a/./b/../c//d/", out, sizeof out) == ST_OK && !strcmp(out, "/a/c/d"));
    unsetenv("STRETCH_DATA_DIR");
    char want[4096];
    st_resolve_path("..", want, sizeof want);      /* parent of cwd */
    CHECK(st_resolve_path("$STRETCH_DATA_DIR/wikitext-2", out, sizeof out) == ST_OK);
    char expect[4200];
    snprintf(expect, sizeof expect, "%s/shared/data/wikitext-2", strcmp(want, "/") ? want : "");
    CHECK_MSG(!strcmp(out, expect), "%s vs %s", out, expect);
    CHECK(st_resolve_path("rel/x", out, sizeof out) == ST_OK);
    snprintf(expect, sizeof expect, "%s/rel/x", cwd);
    CHECK_MSG(!strcmp(out, expect), "%s vs %s", out, expect);
    if (old) setenv("STRETCH_DATA_DIR", saved, 1);

    /* data.path in a config is expanded and made absolute, and stays so on reload */
    st_run_config c;
    st_error e;
    setenv("STRETCH_DATA_DIR", "/data/shared", 1);
    const char *json = "{\"data\": {\"source\": \"text\", \"path\": \"$STRETCH_DATA_DIR/tinyshakespeare/input.txt\"}}";
    CHECK_MSG(parse(json, NULL, 0, &c, &e) == ST_OK, "%s", e.msg);
    CHECK(!strcmp(c.data.path, "/data/shared/tinyshakespeare/input.txt"));
    if (old) setenv("STRETCH_DATA_DIR", saved, 1); else unsetenv("STRETCH_DATA_DIR");
}

/* Every shipped run config parses and validates. */
static void test_shipped_configs(void) {
    const char *src = getenv("STRETCH_SOURCE_DIR");
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/configs", src && *src ? src : "..");
    DIR *d = opendir(dir);
    if (!d) { test_skip("configs/*.json", "configs directory not found (set STRETCH_SOURCE_DIR)"); return; }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0) continue;
        if (strncmp(de->d_name, "sweep", 5) == 0) continue;   /* sweep files have their own schema */
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        st_run_config c;
        st_error e = {0};
        CHECK_MSG(st_run_config_load(path, NULL, 0, &c, &e) == ST_OK, "%s", e.msg);
        n++;
    }
    closedir(d);
    CHECK_MSG(n >= 1, "no configs found in %s", dir);
}

/* Fixtures used by tests/cli_train.sh fail in the library too. */
static void test_fixtures(void) {
    const char *src = getenv("STRETCH_SOURCE_DIR");
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/tests/configs", src && *src ? src : "..");
    DIR *d = opendir(dir);
    if (!d) { test_skip("tests/configs", "fixture directory not found"); return; }
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "bad_", 4) != 0) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        st_run_config c;
        st_error e = {0};
        int rc = st_run_config_load(path, NULL, 0, &c, &e);
        CHECK_MSG(rc == ST_ERR_CONFIG && strstr(e.msg, path), "%s: rc %d: %s", de->d_name, rc, e.msg);
        n++;
    }
    closedir(d);
    CHECK(n >= 5);
}

int main(void) {
    test_bad_table();
    test_bad_sets();
    test_good();
    test_round_trip();
    test_paths();
    test_shipped_configs();
    test_fixtures();
    return test_finish("test_config");
}
