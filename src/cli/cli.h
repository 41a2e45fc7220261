/* cli.h - the `stretch` subcommands. Each lives in src/cli/cmd_<name>.c, parses its own
 * arguments and returns a process exit code (st_status). Only the CLI calls exit(). */
#ifndef ST_CLI_H
#define ST_CLI_H

#include "stretch.h"
#include "st_train.h"

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_selfcheck(int argc, char **argv);
int cmd_data(int argc, char **argv);

/* Model, config and training state from RUN_DIR or a checkpoint, and the path of the
 * run's tokenizer.json (it may not exist: synthetic runs have none). */
int cli_load_trained(const char *src, st_model *m, st_run_config *cfg, st_train_state *ts,
                     char *tok_path, size_t n, st_error *e);
/* Print "stretch: error: <msg>" to stderr and return the code. */
int cli_report(const st_error *e);
/* One of the transform options (--transform, --scale, --clip, --sinks, --window; src/cli/
 * cli_transform.c) with value v into xf: returns 1 when `a` is one (*rc = ST_OK, or the
 * usage error's exit code already reported), 0 when it is not. */
struct st_transform;
int cli_transform_arg(const char *cmd, const char *a, const char *v, struct st_transform *xf, int *rc);
/* Usage error (exit 2). */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
