/* cmd_train.c - `stretch train`: parse arguments, load the config, run st_train.
 *
 *   stretch train CONFIG.json [--set section.key=value ...] [--out RUN_DIR] [--force]
 *   stretch train --resume RUN_DIR [--set ...]
 * Options: --zero (ZeRO-1 under mpirun), --quiet (no progress output), --stop-after N (stop with a checkpoint after step
 * N, exit 0: staged runs and resume tests). Default RUN_DIR: runs/<config name>. */
#include "cli/cli.h"
#include "st_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SETS 256

static void help(void) {
    printf("usage: stretch train CONFIG.json [--set section.key=value ...] [--out RUN_DIR] [--force]\n"
           "       stretch train --resume RUN_DIR [--set section.key=value ...]\n\n"
           "  --set k=v      override a config key (value parsed as JSON when it is, else a string; also --set=k=v),\n"
           "                 e.g. --set model.pos=rope --set train.steps=2000 --set eval.lengths=[64,128]\n"
           "  --out DIR, -o  run directory (default runs/<config name>)\n"
           "  --force        replace an existing run in DIR\n"
           "  --resume DIR   continue DIR from its latest checkpoint (bit-identical to an uninterrupted run)\n"
           "  --stop-after N stop with a checkpoint after step N (resume later with --resume)\n"
           "  --quiet, -q    no progress bar or log lines (metrics.jsonl is still written)\n"
           "  --zero         under mpirun: shard the AdamW moments over the ranks (ZeRO-1, same results)\n"
           "Under mpirun -np N: data parallel, train.batch_size per rank, same N to resume\n"
           "(docs/distributed.md).\n"
           "Config keys: configs/README.md. Exit codes: 2 config, 3 I/O or occupied RUN_DIR, 4 data,\n"
           "5 checkpoint, 6 memory, 7 non-finite loss, 130 interrupted (checkpoint saved).\n");
}

/* "runs/<basename of config without .json>" */
static void default_out(const char *config, char *out, size_t n) {
    const char *base = strrchr(config, '/');
    base = base ? base + 1 : config;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".json") == 0) len -= 5;
    snprintf(out, n, "runs/%.*s", (int)len, base);
}

/* --resume DIR without DIR/config.json: how a run stopped before it wrote one starts again
 * (an extension, whose init_from.json was written first, has no CONFIG to give). */
static void no_config(const char *resume, st_error *e) {
    char pin[ST_PATH_BUF + 32], word[2 * ST_PATH_BUF];
    snprintf(pin, sizeof pin, "%s/init_from.json", resume);
    st_fail(e, ST_ERR_IO, "%s: not a run directory (no config.json to resume from; a run stopped before it wrote "
            "config.json starts again with: stretch train CONFIG --out %s%s)", resume,
            st_shell_word(resume, word, sizeof word),
            access(pin, F_OK) == 0 ? ", or the stretch extend command that made it, with the same --out" : "");
}

int cmd_train(int argc, char **argv, st_dist *dist) {
    const char *sets[MAX_SETS];
    int n_sets = 0;
    const char *config = NULL, *out = NULL, *resume = NULL;
    st_train_opts opts = {0};
    opts.dist = dist;   /* mpirun -np N: data parallel (docs/distributed.md) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(); return 0; }
        if (!strcmp(a, "--set") || !strncmp(a, "--set=", 6)) {
            const char *v = a[5] == '=' ? a + 6 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) return cli_usage("train", "--set needs section.key=value");
            if (n_sets == MAX_SETS) return cli_usage("train", "too many --set options (max %d)", MAX_SETS);
            sets[n_sets++] = v;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o") || !strcmp(a, "--resume") || !strcmp(a, "--stop-after")) {
            /* one helper for every flag with a value: a missing value, a flag as the value
             * and a flag given twice are said the same way in every command */
            static const char *const valued[] = {"--out", "-o", "--resume", "--stop-after", NULL};
            const char *v;
            int rc = cli_flag_value("train", valued, argc, argv, &i, &v);
            if (rc) return rc;
            if (!strcmp(a, "--stop-after")) {
                int64_t n;
                if (!cli_int_arg(v, 1, INT64_MAX, &n)) return cli_usage("train", "--stop-after needs a step number >= 1");
                opts.stop_after = n;
            } else if (!strcmp(a, "--resume")) {
                if (cli_dir_arg("train", a, v)) return ST_ERR_CONFIG;
                resume = v;
            } else {
                if ((rc = cli_out_dir_arg("train", a, v))) return rc;
                out = v;
            }
        } else if (!strcmp(a, "--force")) {
            opts.force = 1;
        } else if (!strcmp(a, "--zero")) {
            opts.zero = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            opts.quiet = 1;
        } else if (a[0] == '-') {
            return cli_usage("train", "unknown option '%s'", a);
        } else if (!config) {
            config = a;
            if (cli_path_arg("train", "CONFIG", config)) return ST_ERR_CONFIG;
        } else {
            return cli_usage("train", "unexpected argument '%s'", a);
        }
    }
    if (resume && (config || out))
        return cli_usage("train", "--resume RUN_DIR takes the config from RUN_DIR/config.json; drop %s",
                         config ? "the CONFIG argument" : "--out");
    /* --force replaces a run, --resume continues it: taken together one would be ignored */
    char word[2 * ST_PATH_BUF];   /* a path in a command to paste: quoted when the shell needs it */
    if (resume && opts.force)
        return cli_usage("train", "--resume RUN_DIR continues the run there and --force would replace it; drop "
                         "--force (or, to start over, give the CONFIG with --out %s --force)",
                         st_shell_word(resume, word, sizeof word));
    if (!resume && !config) return cli_usage("train", "missing CONFIG.json");

    st_error e = {0};
    st_run_config cfg;
    char dir[ST_PATH_BUF];
    if (resume) {
        char path[ST_PATH_BUF];
        snprintf(dir, sizeof dir, "%s", resume);
        snprintf(path, sizeof path, "%s/config.json", resume);
        opts.resume = 1;
        if (st_run_config_load(path, sets, n_sets, &cfg, &e)) {
            /* a rank on another machine need not see the run dir: rank 0 sends the config */
            if (e.code == ST_ERR_IO && st_dist_rank(dist) > 0) {
                int rc = st_train(NULL, dir, &opts, NULL, &e);
                return rc ? cli_report("train", &e) : 0;
            }
            if (e.code == ST_ERR_IO && access(path, F_OK) != 0) no_config(resume, &e);
            if (e.code == ST_ERR_CONFIG) cli_blame_sets(path, sets, n_sets, 1, &e);
            return cli_report("train", &e);
        }
    } else {
        if (out) snprintf(dir, sizeof dir, "%s", out);
        else {
            default_out(config, dir, sizeof dir);
            if (cli_dir_arg("train", "--out (not given: runs/<CONFIG name>)", dir)) return ST_ERR_CONFIG;
        }
        if (st_run_config_load(config, sets, n_sets, &cfg, &e)) {
            if (e.code == ST_ERR_CONFIG) cli_blame_sets(config, sets, n_sets, 1, &e);
            return cli_report("train", &e);
        }
        /* the run writes OUT/config.json (the resolved config): a user's config that is
         * that very file would be replaced, and the directory reads as a run already */
        char own[ST_PATH_BUF + 16];
        struct stat a, b;
        snprintf(own, sizeof own, "%s/config.json", dir);
        if (stat(config, &a) == 0 && stat(own, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return cli_usage("train", "%s is the config.json of the run directory %s, which the run writes (the resolved "
                             "config): keep the experiment's config outside it, or choose another --out", config, dir);
    }
    if (!opts.quiet) st_log(ST_LOG_INFO, "%s %s -> %s", resume ? "resuming" : "training", resume ? resume : config, dir);
    int rc = st_train(&cfg, dir, &opts, NULL, &e);
    if (rc == ST_ERR_INTERRUPTED) {
        return st_dist_rank(dist) == 0 ? cli_report("train", &e) : rc;
    }
    if (rc == ST_ERR_CONFIG) cli_blame_sets(cfg.file, sets, n_sets, 0, &e);   /* e.g. init_from vs a --set */
    /* a --set of a model or data key on resume: the user's value, not the checkpoint, is
     * what does not fit (probe 28: exit 5 blaming config.json) */
    for (int i = 0; rc == ST_ERR_CHECKPOINT && resume && i < n_sets; i++)
        if (st_config_names_key(e.msg, sets[i])) {
            char why[sizeof e.msg];
            snprintf(why, sizeof why, "%s", e.msg);
            rc = st_fail(&e, ST_ERR_CONFIG, "--set %s: a resumed run keeps its checkpoint's model and data sections "
                         "(train a new run with --out to change them): %s", sets[i], why);
        }
    if (rc) return cli_report("train", &e);
    return 0;
}
