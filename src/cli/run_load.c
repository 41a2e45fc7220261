/* run_load.c - load what a training run left behind, for the commands that use a trained
 * model (export, generate): the model, its config, the training state (it records the
 * tokenizer hash the model was trained with) and where the run's tokenizer.json is; and
 * whom a config error blames, the file or a --set (train, data --config). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cli_load_trained(const char *src, st_model *m, st_run_config *cfg, st_train_state *ts,
                     char *tok_path, size_t n, st_error *e) {
    char ckpt[ST_PATH_BUF];
    /* one read: beside a training, keep_last may delete the file right after */
    int rc = st_checkpoint_read(src, ckpt, sizeof ckpt, m, cfg, ts, e);
    if (rc) return rc;
    cli_tokenizer_path(ckpt, tok_path, n);
    return ST_OK;
}

void cli_checkpoint_dir(const char *ckpt, char *dir, size_t n, char *stem, size_t sn) {
    /* RUN_DIR/checkpoints/X.ckpt -> RUN_DIR; a checkpoint kept anywhere else (DIR/X.ckpt)
     * -> DIR, beside it: never a directory further up, whose files would belong to
     * something else */
    char d[ST_PATH_BUF];
    snprintf(d, sizeof d, "%s", ckpt);
    char *slash = strrchr(d, '/');
    if (stem) {
        snprintf(stem, sn, "_%s", slash ? slash + 1 : d);
        char *dot = strrchr(stem, '.');
        if (dot && !strcmp(dot, ".ckpt")) *dot = 0;
    }
    if (!slash) snprintf(d, sizeof d, ".");
    else *slash = 0;   /* "/X.ckpt": "", the root */
    const char *base = strrchr(d, '/');
    base = base ? base + 1 : d;
    if (!strcmp(base, "checkpoints")) {
        if (base == d) snprintf(d, sizeof d, ".");   /* "checkpoints/X.ckpt" */
        else d[base - d - 1] = 0;                    /* "/checkpoints/X.ckpt": "", the root */
    }
    snprintf(dir, n, "%s", d);
}

void cli_tokenizer_path(const char *ckpt, char *tok_path, size_t n) {
    char d[ST_PATH_BUF];
    cli_checkpoint_dir(ckpt, d, sizeof d, NULL, 0);
    snprintf(tok_path, n, "%s/tokenizer.json", d);
}

void cli_warn_missing_tokenizer(const char *cmd, const st_run_config *cfg, const char *tok_path, const char *without) {
    if (!strcmp(cfg->data.source, "synthetic") || access(tok_path, F_OK) == 0) return;
    st_log(ST_LOG_WARN, "%s: %s not found (this run was trained on %s data with a %s tokenizer): %s; put the run's "
           "tokenizer.json there", cmd, tok_path, cfg->data.source, cfg->data.tokenizer, without);
}

void cli_blame_sets(const char *path, const char *const *sets, int n_sets, int check_alone, st_error *e) {
    st_error alone = {0};
    if (check_alone && n_sets > 0) st_run_config_error(path, NULL, NULL, 0, &alone);
    st_config_blame(e, path, sets, n_sets, "--set ", NULL, &alone);
}
