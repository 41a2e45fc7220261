/* run_load.c - load what a training run left behind, for the commands that use a trained
 * model (export, generate): the model, its config, the training state (it records the
 * tokenizer hash the model was trained with) and where the run's tokenizer.json is. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int cli_load_trained(const char *src, st_model *m, st_run_config *cfg, st_train_state *ts,
                     char *tok_path, size_t n, st_error *e) {
    char ckpt[ST_PATH_BUF];
    int rc = st_checkpoint_resolve(src, ckpt, sizeof ckpt, e);
    if (!rc) rc = st_checkpoint_load(ckpt, NULL, NULL, 0, ts, e);
    if (!rc) rc = st_checkpoint_load_model(ckpt, m, cfg, e);
    if (rc) return rc;
    cli_tokenizer_path(ckpt, tok_path, n);
    return ST_OK;
}

void cli_tokenizer_path(const char *ckpt, char *tok_path, size_t n) {
    /* RUN_DIR/checkpoints/X.ckpt -> RUN_DIR (a loose checkpoint file has no tokenizer) */
    char d[ST_PATH_BUF];
    snprintf(d, sizeof d, "%s", ckpt);
    for (int k = 0; k < 2; k++) {
        char *slash = strrchr(d, '/');
        if (slash) *slash = 0; else snprintf(d, sizeof d, ".");
    }
    snprintf(tok_path, n, "%s/tokenizer.json", d[0] ? d : "/");
}
