/* cmd_export.c - `stretch export RUN_DIR|CHECKPOINT --out DIR [--force]`:
 * DIR/model.safetensors (F32, PyTorch [out,in] layout, names in docs/model-format.md),
 * DIR/config.json (the run's resolved config) and DIR/tokenizer.json (when the run has one).
 * Existing files in DIR are not replaced without --force; DIR and its missing parents are
 * made; a run directory is refused even with --force. */
#include "cli/cli.h"
#include "st_train.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int copy_file(const char *src, const char *dst, st_error *e) {
    FILE *in = fopen(src, "rb");
    if (!in) return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    st_atomic_file a;
    FILE *out = st_atomic_open(&a, dst, e);
    if (!out) { fclose(in); return e->code; }
    char buf[1 << 16];
    size_t n;
    int ok = 1;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    fclose(in);
    if (!ok) {
        st_atomic_abort(&a);
        return st_fail(e, ST_ERR_IO, "%s: copy from %s failed", dst, src);
    }
    return st_atomic_commit(&a, e);
}

static int exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

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
    char st_path[ST_PATH_BUF], cfg_path[ST_PATH_BUF], tok_path[ST_PATH_BUF], tok_src[ST_PATH_BUF];
    if (cli_load_trained(src, &m, &cfg, &ts, tok_src, sizeof tok_src, &e)) return cli_report(&e);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", out);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", out);
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", out);
    int rc = ST_OK;
    /* refuse to bundle a tokenizer.json that is not the checkpoint's (e.g. copied from
     * another run): check it before writing anything */
    cli_warn_missing_tokenizer("export", &cfg, tok_src, "the export has no tokenizer.json");
    if (exists(tok_src)) {
        st_tokenizer *tok = st_tokenizer_load_expect(tok_src, ts.tok_hash, m.cfg.vocab_size, &e);
        if (!tok) rc = e.code;
        st_tokenizer_free(tok);
    }
    struct stat os;
    /* --out and its missing parents are made (as train --out does); a file there is refused */
    if (!rc && stat(out, &os) == 0 && !S_ISDIR(os.st_mode))
        rc = st_fail(&e, ST_ERR_IO, "--out %s: exists and is not a directory", out);
    /* a run directory (its own or another's) is never an export's: --force would replace
     * the run's config.json, which its checkpoints are checked against on resume */
    char ck_dir[ST_PATH_BUF + 16];
    snprintf(ck_dir, sizeof ck_dir, "%s/checkpoints", out);
    if (!rc && exists(ck_dir))
        rc = st_fail(&e, ST_ERR_IO, "--out %s: is a run directory (it has checkpoints/); an export there would "
                     "replace the run's config.json: choose another directory", out);
    if (!rc) rc = st_mkdirs(out, &e);
    /* every file the export writes, whether or not this run has a tokenizer: an existing
     * one is the user's until --force says otherwise */
    const char *const mine[3] = {st_path, cfg_path, tok_path};
    for (int i = 0; i < 3 && !rc && !force; i++)
        if (exists(mine[i])) rc = st_fail(&e, ST_ERR_IO, "%s: already exists (use --force to replace it)", mine[i]);
    if (!rc) rc = st_model_save_safetensors(&m, st_path, &e);
    /* the keys whose stored value is a rule get what the tensors have (docs/model-format.md) */
    cfg.model.d_ff = st_model_d_ff(&cfg.model);
    cfg.model.n_kv_heads = st_model_kv_heads(&cfg.model);
    if (!rc) rc = st_run_config_save(&cfg, cfg_path, &e);
    if (!rc && exists(tok_src)) rc = copy_file(tok_src, tok_path, &e);
    if (!rc) printf("exported %zu parameters (%s positions) to %s\n", st_model_num_params(&m), st_pos_name(m.cfg.pos), out);
    st_model_free(&m);
    return rc ? cli_report(&e) : ST_OK;
}
