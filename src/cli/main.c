/* main.c - `stretch <command> [args]`: dispatch to the subcommands. */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* own_help: the command prints a fuller --help itself; dist_fn: the command runs on every
 * rank of an MPI job (docs/distributed.md), the others refuse more than one rank */
static const struct {
    const char *name; int (*fn)(int, char **); const char *help; int own_help;
    int (*dist_fn)(int, char **, st_dist *);
} commands[] = {
    {"train",     NULL,          "train CONFIG.json [--set k=v ...] [--out DIR] | --resume DIR", 1, cmd_train},
    {"extend",    NULL,          "extend RUN_DIR --to N (--steps K | --budget F) [--transform none|pi|ntk|yarn|alibi_interp] [--scale S] [--lr X] [--warmup W] [--batch B] [--out DIR] [--force] [--stop-after N] [--set k=v ...]: context extension by fine-tuning", 1, cmd_extend},
    {"eval",      NULL,          "eval RUN_DIR|CHECKPOINT [--lengths 64,128,...|64..16384] [--split valid|test] [--mode nonoverlapping|sliding --stride S] [--precision fp32|bf16] [--transform NAME] | --task [passkey] ...: perplexity, or task / passkey accuracy (eval --help)", 1, cmd_eval},
    {"sweep",     NULL,          "sweep SWEEP.json [--out DIR] [--jobs N] [--threads N] [--quiet] [--dry-run]: grid of runs, trained and evaluated, with tables", 1, cmd_sweep},
    {"generate",  cmd_generate,  "generate RUN_DIR|CHECKPOINT [--prompt TEXT | --prompt-file FILE|-] [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--seed S] [--context N] [--no-cache] [--precision fp32|bf16] [--transform NAME] [--scale S] [--clip W] [--sinks K --window W [--positions text|cache] | --blockwise B] (generate --help)", 1, NULL},
    {"export",    cmd_export,    "export RUN_DIR|CHECKPOINT --out DIR [--force]: model.safetensors + config.json + tokenizer (--force replaces an earlier export's files)", 0, NULL},
    {"bench",     cmd_bench,     "bench [--preset S|M|G|tiny] [--precision fp32|bf16] ...: step time split, tokens/s, MFU, eval memory", 1, NULL},
    {"data",      cmd_data,      "data --source wikitext|text|synthetic [--path P] [--tokenizer auto|word|byte|bpe] | --config RUN.json [--show N] [--size S]: tokenize, cache, print statistics; a task run's rows (data --help)", 1, NULL},
    {"selfcheck", cmd_selfcheck, "selfcheck: BLAS/threads report, a tiny model forward/backward check per method, bf16 and MPI support", 0, NULL},
};

static void cli_vline(const char *cmd, int error, const char *fmt, va_list ap) {
    char prefix[96];
    snprintf(prefix, sizeof prefix, "stretch%s%.40s: %s", cmd ? " " : "", cmd ? cmd : "", error ? "error: " : "");
    st_vlog_line(prefix, fmt, ap);
}

void cli_line(const char *cmd, int error, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vline(cmd, error, fmt, ap);
    va_end(ap);
}

int cli_report(const char *cmd, const st_error *e) {
    /* an interruption is the user's doing, not an error: its line says where the run
     * stopped and how to continue it */
    const char *msg = e->msg[0] ? e->msg : st_status_name(e->code);
    /* a library message that names the command ("eval: length must be >= 1") after the
     * prefix that names it already */
    const size_t k = cmd ? strlen(cmd) : 0;
    if (k && !strncmp(msg, cmd, k) && !strncmp(msg + k, ": ", 2)) msg += k + 2;
    cli_line(cmd, e->code != ST_ERR_INTERRUPTED, "%s", msg);
    return e->code ? e->code : ST_ERR_GENERIC;
}

int cli_usage(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vline(cmd, 1, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, cmd) == 0) fprintf(stderr, "usage: stretch %s\n", commands[i].help);
    return ST_ERR_CONFIG;
}

int cli_help(const char *cmd) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, cmd) == 0) printf("usage: stretch %s\n", commands[i].help);
    return -1;
}

static void usage(FILE *f) {
    fprintf(f, "stretch %s - train short, test long: decoder-only transformers with ALiBi\n\nusage:\n", ST_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  stretch %s\n", commands[i].help);
    fprintf(f, "\nexit codes: 0 ok, 1 error, 2 config/usage, 3 I/O, 4 data, 5 checkpoint, 6 memory, 7 non-finite, 130 interrupted\n");
}

/* Two libraries read their settings from the environment when they load, before main(),
 * so the defaults we want need a re-execution (once: the second run finds them set):
 * - libgomp's OMP_WAIT_POLICY: its default lets idle threads spin; on a shared 2-core
 *   machine a spinning thread steals the core its partner needs (a tiny model's step
 *   measured 80x slower under load). We set PASSIVE.
 * - OpenBLAS's OPENBLAS_CORETYPE: its CPU probe may not know a newer CPU and fall back to
 *   old kernels (Prescott's SSE3 on a Xeon of family 6 model 207: sgemm 4.6x slower than
 *   the AVX-512 kernels). We set the best core the CPU supports (st_blas_better_core)
 *   and record the probe's choice in STRETCH_BLAS_PROBED for the start-up log.
 * An explicit setting of either is respected, except a core whose kernels this CPU cannot
 * run (SkylakeX on an AVX2 CPU): OpenBLAS does not check, and its first product would stop
 * with an illegal instruction. That one is replaced by the best core the CPU runs, and
 * the log warns (STRETCH_BLAS_REFUSED holds the refused name). */
static void default_runtime_env(char **argv) {
    int changed = 0;
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        changed = 1;
    }
    const char *core = getenv("OPENBLAS_CORETYPE");
    if (core && st_blas_core_unsupported(core)) {
        /* a core the CPU cannot run (a script written for an AVX-512 machine run on an
         * AVX2 one): OpenBLAS would die of SIGILL at the first product */
        setenv("STRETCH_BLAS_REFUSED", core, 1);
        const char *best = st_blas_best_core();
        if (best) setenv("OPENBLAS_CORETYPE", best, 1);
        else unsetenv("OPENBLAS_CORETYPE");
        changed = 1;
    }
    const char *better = core ? NULL : st_blas_better_core();
    if (better) {
        st_blas_info bi;
        st_blas_query(&bi);
        setenv("STRETCH_BLAS_PROBED", bi.corename, 1);
        setenv("OPENBLAS_CORETYPE", better, 1);
        changed = 1;
    }
    if (changed) execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with the libraries' defaults */
}

static int dispatch(int argc, char **argv, st_dist *dist) {
    /* until a distributed command runs, every rank does the same thing with the same
     * arguments: an error here is every rank's (no abort needed) */
    dist->agreed = 1;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? ST_ERR_CONFIG : 0;
    }
    if (!strcmp(argv[1], "--version")) { printf("stretch %s\n", ST_VERSION); return 0; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(commands[i].name, argv[1]) != 0) continue;
        /* `stretch CMD --help` for the commands without a longer help of their own */
        if (argc == 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) && !commands[i].own_help) {
            cli_help(commands[i].name);
            return 0;
        }
        if (commands[i].dist_fn) {
            dist->agreed = 0;
            return commands[i].dist_fn(argc - 1, argv + 1, dist);
        }
        if (dist->size > 1) {
            cli_line(commands[i].name, 1, "runs in one process; start it without mpirun (%d ranks). Under MPI: train, extend, "
                     "eval and sweep", dist->size);
            return ST_ERR_CONFIG;
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
    cli_line(NULL, 1, "unknown command '%s'\n", argv[1]);
    usage(stderr);
    return ST_ERR_CONFIG;
}

/* A command that succeeded but whose standard output could not be written (a full disk,
 * a closed descriptor) lost what it was run for: generate's text, eval's table, data's
 * rows. The buffered tail is flushed here, where its failure can still change the exit
 * code (exit() would flush it and ignore the error). A reader that went away (EPIPE) is
 * SIGPIPE's business, which ends generate and eval and stops a training. */
static int check_stdout(int argc, char **argv, int rc) {
    errno = 0;
    const int failed = fflush(stdout) == EOF || ferror(stdout);
    const int err = errno;
    if (rc != 0 || !failed || err == EPIPE) return rc;
    cli_line(argc > 1 && argv[1][0] != '-' ? argv[1] : NULL, 1, "standard output: write error%s%s (the output is incomplete)",
             err ? ": " : "", err ? strerror(err) : "");
    return ST_ERR_IO;
}

int main(int argc, char **argv) {
    /* past a file-size limit (ulimit -f) a write fails with EFBIG, which every writer
     * reports (exit 3, naming the file) and cleans up after; the default action of
     * SIGXFSZ would kill the process and leave its temporary file behind */
    signal(SIGXFSZ, SIG_IGN);
    default_runtime_env(argv);
    /* the transport is chosen once, here: "mpi" under an MPI launcher, else "none" */
    st_dist dist;
    st_error e = {0};
    if (st_dist_init(&dist, &argc, &argv, &e)) return cli_report(NULL, &e);
    return st_dist_exit(&dist, check_stdout(argc, argv, dispatch(argc, argv, &dist)));
}
