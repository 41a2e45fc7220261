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
        if (!strcmp(a, "--jobs")) {
            char *end;
            long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !argv[i + 1][0] || *end || n < 1 || n > 1024)
                return cli_usage("sweep", "--jobs needs an integer in [1, 1024]");
            o.jobs = (int)n;
            i++;
            continue;
        }
        if (!strcmp(a, "--out") || !strcmp(a, "--threads")) {
            if (i + 1 >= argc) return cli_usage("sweep", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--out")) {
                if (cli_path_arg("sweep", "--out", v)) return ST_ERR_CONFIG;
                o.out = v;
            } else {
                int64_t n;
                if (!cli_int_arg(v, 0, 4096, &n))
                    return cli_usage("sweep", "--threads '%s': expected an integer >= 0 (0 = the runs' train.threads)", v);
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
    return rc ? cli_report(&e) : 0;
}
