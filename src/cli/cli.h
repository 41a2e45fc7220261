/* cli.h - the `stretch` subcommands. Each lives in src/cli/cmd_<name>.c, parses its own
 * arguments and returns a process exit code (st_status). Only the CLI calls exit(). */
#ifndef ST_CLI_H
#define ST_CLI_H

#include "stretch.h"
#include "st_train.h"
#include "st_dist.h"

/* train, extend, eval and sweep run on every rank of an MPI job (dist: the transport) */
int cmd_train(int argc, char **argv, st_dist *dist);
int cmd_eval(int argc, char **argv, st_dist *dist);
int cmd_sweep(int argc, char **argv, st_dist *dist);
/* `stretch extend RUN --to N`: a fine-tuning run from RUN's weights at a longer length */
int cmd_extend(int argc, char **argv, st_dist *dist);
int cmd_generate(int argc, char **argv);
int cmd_export(int argc, char **argv);
/* `stretch eval RUN --task NAME`: task evaluation (cmd_eval_task.c); cmd_eval hands over
 * when --task is among its arguments */
int cmd_eval_task(int argc, char **argv);
/* Print `stretch eval`'s usage to stdout (--help, with or without --task). */
void cli_eval_usage(void);
int cmd_bench(int argc, char **argv);
int cmd_selfcheck(int argc, char **argv);
int cmd_data(int argc, char **argv);

/* Model, config and training state from RUN_DIR or a checkpoint, and the path of the
 * run's tokenizer.json (it may not exist: synthetic runs have none). */
int cli_load_trained(const char *src, st_model *m, st_run_config *cfg, st_train_state *ts,
                     char *tok_path, size_t n, st_error *e);
/* RUN_DIR/tokenizer.json for a checkpoint RUN_DIR/checkpoints/X.ckpt; DIR/tokenizer.json
 * for a checkpoint DIR/X.ckpt kept elsewhere. */
void cli_tokenizer_path(const char *ckpt, char *tok_path, size_t n);
/* The directory a checkpoint file's run keeps its files in (RUN_DIR for
 * RUN_DIR/checkpoints/X.ckpt, DIR for DIR/X.ckpt, "" for the root, so that DIR "/" NAME is
 * the path) and, when stem is not NULL, "_X": the name reports of that checkpoint carry. */
void cli_checkpoint_dir(const char *ckpt, char *dir, size_t n, char *stem, size_t sn);
/* A run trained on text or a task has a tokenizer.json (a synthetic run has none): when
 * tok_path is missing for such a run, warn that `cmd` goes on without it (what it does
 * instead: `without`). */
void cli_warn_missing_tokenizer(const char *cmd, const st_run_config *cfg, const char *tok_path, const char *without);
/* A config error of `path` loaded with the user's --set assignments: told as the --set's
 * when it names its key, unless (check_alone) the file alone gives the same error (train,
 * data). */
void cli_blame_sets(const char *path, const char *const *sets, int n_sets, int check_alone, st_error *e);
/* `stretch data --config` of a task run (cmd_data_task.c): the task, its vocabulary and
 * sizes, then `show` training rows as the trainer draws them (size 0), or `show` instances
 * of one size (seeds from train.seed). A config error the trainer would give (a row too
 * short for the longest instance) is left in e, before anything is printed, for the caller
 * to blame on a --set; other errors are reported here. */
int cli_data_task_show(const st_run_config *cfg, const st_dataset *ds, int64_t show, int64_t size, st_error *e);
/* The command's own lines on stderr: "stretch CMD: error: MSG" (error != 0) or "stretch
 * CMD: MSG"; "stretch: ..." when cmd is NULL (before a command runs). One prefix for the
 * usage errors, the reported errors and the notes of every command, so a script or a log
 * reader finds each error the same way. */
void cli_line(const char *cmd, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* cli_line of e's message (an interruption without "error:"); returns the code. */
int cli_report(const char *cmd, const st_error *e);
/* ---- flag values (args.c): 1 when s is entirely a value in [lo, hi], else 0 ---- */
int cli_int_arg(const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_u64_arg(const char *s, uint64_t *out);                 /* digits only */
int cli_num_arg(const char *s, double lo, double hi, double *out);   /* finite */
int cli_split_arg(const char *s, int *out);                    /* valid | test */
/* "A,B,C" into out[0..cap): the count, or 0 when an item is empty, bad or out of range. */
int cli_list_arg(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap);
/* A flag whose value is a config key's (st_config_range): ST_OK with *out, or the usage
 * error (exit 2) naming the flag, the key and its range, then note (may be NULL). */
int cli_key_arg(const char *cmd, const char *flag, const char *v, const char *key, const char *note, double *out);
/* The upper end of a config key's range, for a flag whose lower end differs from the key's
 * (--stride >= 1 implies sliding where eval.stride 0 means L/2). */
int64_t cli_key_max(const char *key);
/* ST_OK when the n values of a list flag differ, else the usage error naming the flag and
 * the value given twice (a length evaluated twice would be two rows of one figure). */
int cli_distinct(const char *cmd, const char *flag, const double *v, int n);
int cli_distinct_i64(const char *cmd, const char *flag, const int64_t *v, int n);
/* A length list: "A,B,..." (cli_list_arg) or the doubling range "A..B" = A, 2A, 4A, ... <= B,
 * each in [lo, hi], at most max. The count, 0 when malformed. */
int cli_lengths_arg(const char *s, int64_t lo, int64_t hi, int64_t *out, int max);
/* argv[*i], a flag of a command whose flags with a value are `valued` (NULL-terminated):
 * ST_OK with *v = its value (argv[*i + 1], *i advanced) when it is one of them, ST_OK with
 * *v = NULL when it is not (the caller's flags without a value, else an unknown option),
 * or the usage error "FLAG needs a value" (exit 2) when it is one but comes last. One
 * helper, so that every command tells a flag missing its value from an unknown flag, and
 * neither from a stray argument. */
int cli_flag_value(const char *cmd, const char *const *valued, int argc, char **argv, int *i, const char **v);
/* The transform options that take a value (cli_transform_arg), for a `valued` list. */
#define CLI_TRANSFORM_FLAGS "--transform", "--scale", "--clip", "--sinks", "--window", "--positions", "--blockwise"
/* A path flag or argument: ST_OK, or the usage error (exit 2) when it is empty or too
 * long (st_path_check). */
int cli_path_arg(const char *cmd, const char *flag, const char *v);
/* A directory stretch writes into (--out, --resume): the same, and also refused when it
 * leaves no room for the file names stretch adds (st_dir_check), before any work. */
int cli_dir_arg(const char *cmd, const char *flag, const char *dir);
/* ST_OK, or exit 3 naming flag, when path (a file or directory stretch would write, or
 * anything below it) lies in a run's checkpoints/ directory (one beside a config.json):
 * stretch train manages it, and an eval report written over a step_N.ckpt broke --resume. */
int cli_outside_checkpoints(const char *cmd, const char *flag, const char *path);
/* An output directory (--out of train, extend, export, sweep): cli_dir_arg, then
 * cli_outside_checkpoints. */
int cli_out_dir_arg(const char *cmd, const char *flag, const char *dir);
/* An output file named by `flag` (--json, --save-tokenizer): refused (exit 3, naming the
 * flag) when `path` is a directory, or an existing file while `force` is not set, so a
 * report never replaces a run's config.json or a user's file by mistake. A missing parent
 * directory is created (as train --out does), and one that cannot be (a file in the way,
 * no permission) is refused. Checked before the work that produces the file, so an hour
 * of evaluation never ends in "cannot create". Refused in a run's checkpoints/ too
 * (cli_outside_checkpoints). */
int cli_output_file(const char *cmd, const char *flag, const char *path, int force);
/* The writer's temp file beside path made and removed now (st_atomic_open, st_atomic_abort),
 * so that a report the file system refuses (a read-only mount, where root passes access())
 * is refused before the command's work, not after it: ST_OK, or e set (ST_ERR_IO). */
int cli_writable_probe(const char *path, st_error *e);
/* cli_writable_probe of a command's default report (no --json): ST_OK, or the refusal
 * reported ("nothing was evaluated; name a report with --json OUT.json") and its code. */
int cli_default_report_writable(const char *cmd, const char *path);
/* One of the transform options (--transform, --scale, --clip, --sinks, --window; src/cli/
 * cli_transform.c) with value v into xf: returns 1 when `a` is one (*rc = ST_OK, or the
 * usage error's exit code already reported), 0 when it is not. */
struct st_transform;
int cli_transform_arg(const char *cmd, const char *a, const char *v, struct st_transform *xf, int *rc);
/* "_<label>" of an active transform for report file names (only [A-Za-z0-9._-] kept),
 * "" when none: a transformed report never overwrites the plain one. */
void cli_transform_tag(const struct st_transform *xf, char *tag, size_t n);
/* "_bf16" / "_fp32" when an evaluation's products ran in another precision than the run's
 * train.precision, "" when the same: an eval --precision never overwrites the default
 * report (cli_transform.c). At most 5 characters. */
void cli_precision_tag(int precision, int train_precision, char *tag, size_t n);
/* The options cli_transform_arg read into `given` (initialised by cli_transform_unset: a
 * field still -1 was not given) as an eval plan's transform fields (-1: the run's eval
 * section decides, st_eval_merge_transform / st_eval_plan_resolve). */
void cli_transform_unset(struct st_transform *given);
void cli_transform_plan(const struct st_transform *given, st_eval_plan *plan);
/* `stretch CMD ... --help` for a command whose usage is its line of the command table:
 * print it to stdout and return -1, which the command's parser hands back for exit 0. */
int cli_help(const char *cmd);
/* Usage error (exit 2): "stretch CMD: error: <msg>", then the command's usage line. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
