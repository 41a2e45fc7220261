/* cmd_export.c - `stretch export RUN_DIR|CHECKPOINT --out DIR [--force]`:
 * DIR/model.safetensors (F32, PyTorch [out,in] layout, names in docs/model-format.md),
 * DIR/config.json (the run's resolved config) and DIR/tokenizer.json (when the run has one).
 * Existing files in DIR are not replaced without --force; DIR and its missing parents are
 * made; a run directory is refused even with --force.
 *
 * The files belong together (a tokenizer of another vocabulary beside the weights is a
 * wrong model), so they are written as a set: each under its temporary name first
 * (st_atomic_open), and only once all are written and synced are they renamed into place.
 * A failure before that (a full disk, a file size limit) removes the temporaries and
 * leaves an earlier export as it was. */
#include "cli/cli.h"
#include "st_train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EX_MODEL, EX_CONFIG, EX_TOKENIZER, EX_N };
static const char *const ex_names[EX_N] = {"model.safetensors", "config.json", "tokenizer.json"};

static int exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

/* src's bytes appended to out (an export temp file standing for dst). */
static int copy_into(FILE *out, const char *src, const char *dst, st_error *e) {
    FILE *in = fopen(src, "rb");
    if (!in) return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    char buf[1 << 16];
    size_t n;
    int rc = ST_OK;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = st_fail(e, ST_ERR_IO, "%s: copy from %s failed: %s", dst, src, strerror(errno));
    if (!rc && ferror(in)) rc = st_fail(e, ST_ERR_IO, "%s: copy from %s failed: cannot read it: %s", dst, src,
                                        strerror(errno));
    fclose(in);
    return rc;
}

/* File i of the export into a[i] (open, written, synced, still under its temporary name). */
static int stage(int i, st_atomic_file *a, const char *path, const st_model *m, const st_run_config *cfg,
                 const char *tok_src, st_error *e) {
    if (!st_atomic_open(a, path, e)) return e->code;
    int rc = ST_OK;
    if (i == EX_MODEL) rc = st_model_write_safetensors(m, a->f, path, e);
    else if (i == EX_TOKENIZER) rc = copy_into(a->f, tok_src, path, e);
    else rc = st_run_config_write(cfg, a->f, path, e);
    return rc ? rc : st_atomic_finish(a, e);
}

/* Every file written under its temporary name, then all renamed into place; any failure
 * before the renames removes the temporaries (what DIR held stays). A run without a
 * tokenizer leaves none in DIR: an earlier export's (only there with --force) is removed,
 * as it belongs to another model. */
static int write_export(char path[EX_N][ST_PATH_BUF], const st_model *m, const st_run_config *cfg,
                        const char *tok_src, st_error *e) {
    st_atomic_file a[EX_N];
    memset(a, 0, sizeof a);
    const int n = exists(tok_src) ? EX_N : EX_TOKENIZER;
    int rc = ST_OK;
    for (int i = 0; i < n && !rc; i++) rc = stage(i, &a[i], path[i], m, cfg, tok_src, e);
    for (int i = 0; i < n && !rc; i++) rc = st_atomic_publish(&a[i], e);
    for (int i = 0; i < n; i++) st_atomic_abort(&a[i]);   /* no-op for a published file */
    if (!rc && n < EX_N && unlink(path[EX_TOKENIZER]) != 0 && errno != ENOENT)
        rc = st_fail(e, ST_ERR_IO, "%s: cannot remove the earlier export's tokenizer: %s", path[EX_TOKENIZER],
                     strerror(errno));
    return rc;
}

/* Where the export may write: --out not a file nor a run directory, made with its
 * parents; each of its files absent, or (with --force) a file the export may replace. */
static int check_out(const char *out, int force, char path[EX_N][ST_PATH_BUF], st_error *e) {
    struct stat os;
    /* --out and its missing parents are made (as train --out does); a file there is refused */
    if (stat(out, &os) == 0 && !S_ISDIR(os.st_mode))
        return st_fail(e, ST_ERR_IO, "--out %s: exists and is not a directory", out);
    /* a run directory (its own or another's) is never an export's: --force would replace
     * the run's config.json, which its checkpoints are checked against on resume */
    char ck_dir[ST_PATH_BUF + 16];
    snprintf(ck_dir, sizeof ck_dir, "%s/checkpoints", out);
    if (exists(ck_dir))
        return st_fail(e, ST_ERR_IO, "--out %s: is a run directory (it has checkpoints/); an export there would "
                       "replace the run's config.json: choose another directory", out);
    int rc = st_mkdirs(out, e);
    /* every file the export writes, whether or not this run has a tokenizer: an existing
     * one is the user's until --force says otherwise; a directory in the way would fail
     * the rename after the others were replaced, so it is refused before anything */
    for (int i = 0; i < EX_N && !rc; i++) {
        snprintf(path[i], ST_PATH_BUF, "%s/%s", out, ex_names[i]);
        if (lstat(path[i], &os) != 0) continue;
        if (S_ISDIR(os.st_mode)) rc = st_fail(e, ST_ERR_IO, "%s: is a directory; the export cannot replace it", path[i]);
        else if (!S_ISREG(os.st_mode)) rc = st_replaceable_check(path[i], path[i], e);
        else if (!force) rc = st_fail(e, ST_ERR_IO, "%s: already exists (use --force to replace it)", path[i]);
    }
    return rc;
}

int cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { cli_help("export"); return ST_OK; }
        if (!strcmp(argv[i], "--out")) {
            static const char *const valued[] = {"--out", NULL};
            int rc = cli_flag_value("export", valued, argc, argv, &i, &out);
            if (rc) return rc;
            if ((rc = cli_out_dir_arg("export", "--out", out))) return rc;
        }
        else if (!strcmp(argv[i], "--force")) force = 1;
        else if (argv[i][0] == '-') return cli_usage("export", "unknown option '%s'", argv[i]);
        else if (!src) { src = argv[i]; if (cli_path_arg("export", "RUN_DIR|CHECKPOINT", src)) return ST_ERR_CONFIG; }
        else return cli_usage("export", "unexpected argument '%s'", argv[i]);
    }
    if (!src || !out) return cli_usage("export", "needs a run directory or checkpoint and --out DIR");
    st_error e = {0};
    st_model m;
    st_run_config cfg;
    st_train_state ts;
    char path[EX_N][ST_PATH_BUF], tok_src[ST_PATH_BUF];
    if (cli_load_trained(src, &m, &cfg, &ts, tok_src, sizeof tok_src, &e)) return cli_report("export", &e);
    int rc = ST_OK;
    /* refuse to bundle a tokenizer.json that is not the checkpoint's (e.g. copied from
     * another run): check it before writing anything */
    cli_warn_missing_tokenizer("export", &cfg, tok_src, "the export has no tokenizer.json");
    if (exists(tok_src)) {
        st_tokenizer *tok = st_tokenizer_load_expect(tok_src, ts.tok_hash, m.cfg.vocab_size, &e);
        if (!tok) rc = e.code;
        st_tokenizer_free(tok);
    }
    if (!rc) rc = check_out(out, force, path, &e);
    /* the keys whose stored value is a rule get what the tensors have (docs/model-format.md) */
    cfg.model.d_ff = st_model_d_ff(&cfg.model);
    cfg.model.n_kv_heads = st_model_kv_heads(&cfg.model);
    if (!rc) rc = write_export(path, &m, &cfg, tok_src, &e);
    if (!rc) printf("exported %zu parameters (%s positions) to %s\n", st_model_num_params(&m), st_pos_name(m.cfg.pos), out);
    st_model_free(&m);
    return rc ? cli_report("export", &e) : ST_OK;
}
