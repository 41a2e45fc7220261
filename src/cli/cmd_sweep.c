/* cmd_sweep.c - `stretch sweep SWEEP.json [--out DIR]`: train and evaluate a grid of runs
 * and write results.{csv,json,md} (file format: docs/evaluation.md). Re-running the same
 * command skips finished runs and resumes interrupted ones. */
#include "cli/cli.h"
#include "st_eval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "sweep SWEEP.json [--out DIR] [--threads N] [--jobs N] [--quiet] [--dry-run]\n"
    "  --out overrides the file's \"out\"; --dry-run lists the runs and their overrides;\n"
    "  --jobs N runs N points side by side (default: the file's \"jobs\", else 1), each with\n"
    "  cores/N threads unless --threads; under mpirun each rank runs its share (point i: rank i mod N)";

int cmd_sweep(int argc, char **argv, st_dist *dist) {
    st_sweep_opts o = {0};
    o.dist = dist;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { printf("usage: stretch %s\n", usage_text); return 0; }
        if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
        if (!strcmp(a, "--dry-run")) { o.dry_run = 1; continue; }
        static const char *const valued[] = {"--jobs", "--out", "--threads", NULL};
        const char *v;
        int rc = cli_flag_value("sweep", valued, argc, argv, &i, &v);
        if (rc) return rc;
        if (v) {
            int64_t n;
            if (!strcmp(a, "--jobs")) {
                if (!cli_int_arg(v, 1, 1024, &n)) return cli_usage("sweep", "--jobs '%s': expected an integer in [1, 1024]", v);
                o.jobs = (int)n;
            } else if (!strcmp(a, "--out")) {
                if (cli_path_arg("sweep", "--out", v)) return ST_ERR_CONFIG;
                if ((rc = cli_outside_checkpoints("sweep", "--out", v))) return rc;
                o.out = v;
            } else {
                if (!cli_int_arg(v, 0, 4096, &n))
                    return cli_usage("sweep", "--threads '%s': expected an integer in [0, 4096] (0 = the runs' "
                                     "train.threads)", v);
                o.threads = (int)n;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) return cli_usage("sweep", "unknown option '%s'", a);
        if (file) return cli_usage("sweep", "unexpected argument '%s' (one SWEEP.json)", a);
        file = a;
        if (cli_path_arg("sweep", "SWEEP.json", file)) return ST_ERR_CONFIG;
    }
    if (!file) return cli_usage("sweep", "missing SWEEP.json");
    st_error e = {0};
    int rc = st_sweep_run(file, &o, &e);
    return rc ? cli_report("sweep", &e) : 0;
}
