/* cmd_bench.c - `stretch bench`: sgemm peak, training step split (forward / backward /
 * optimiser), tokens/s, MFU, evaluation speed and peak memory (src/eval/bench.c).
 *
 * OPENBLAS_CORETYPE and OMP_WAIT_POLICY are read once, when OpenBLAS and libgomp load,
 * before main() runs. So --coretype / --omp-wait cannot take effect in this process: when
 * they differ from the environment, the command sets the variables and re-executes
 * itself (/proc/self/exe) with the same arguments; the child finds them already set and
 * runs the benchmark. The report shows the core OpenBLAS actually chose. OpenBLAS takes
 * an unknown name without a word and runs its probe's core, so --coretype is checked
 * against its names first (st_blas_core_known) and refused with exit 2.
 *
 * OMP_WAIT_POLICY defaults to PASSIVE here when the environment leaves it unset: with
 * libgomp's default spinning, an idle thread of ours keeps its core busy between
 * parallel regions, and on a machine where anything else runs the two fight for the
 * cores (measured: a tiny model step 80x slower under a load of 6 on 2 cores). */
#include "cli/cli.h"
#include "st_bench.h"
#include "st_matmul.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* "1024,4096,16384" or "none" */
static int parse_lengths(const char *s, st_bench_config *c) {
    c->n_eval = 0;
    if (strcmp(s, "none") == 0) return 1;
    int64_t v[ST_BENCH_MAX_EVAL];
    int n = cli_list_arg(s, 1, 1 << 24, v, ST_BENCH_MAX_EVAL);
    for (int i = 0; i < n; i++) c->eval_lengths[i] = v[i];
    c->n_eval = n;
    return n > 0;
}

/* Re-exec with env var `name` = value when it differs; returns only when no re-exec is
 * needed (or it failed, which is reported). */
static int reexec_needed(const char *name, const char *value) {
    if (!value) return 0;
    const char *cur = getenv(name);
    return !cur || strcmp(cur, value) != 0;
}

static const char *USAGE =
    "bench [--preset tiny|S|M|G] [--vocab V] [--layers L] [--d D] [--heads H] [--batch B] [--seq T]\n"
    "       [--pos alibi|sinusoidal|...] [--steps N] [--warmup N] [--eval L1,L2,..|none] [--eval-batch B]\n"
    "       [--eval-reps N] [--sgemm N] [--sgemm-reps N] [--threads N] [--seed S] [--precision fp32|bf16]\n"
    "       [--coretype NAME] [--omp-wait passive|active] [--json FILE [--force]] [--no-train] [--no-eval] [--profile]\n"
    "       [--block gpt2|llama] [--decode N [--decode-context C]]\n"
    "--decode N: KV-cache decoding as generate runs it, N tokens one by one after a prefill of C (default T)\n"
    "--block llama: RMSNorm, SwiGLU with d_ff = 3 d, no biases, n_heads / 2 key/value heads (the\n"
    "GPT-2 block's matrix parameters; configs/block_llama.json); gpt2: the default block\n"
    "--profile: a per-op table of the timed training steps (forward, backward, share) and the\n"
    "matmuls' implementation and GFLOPS by phase\n"
    "--coretype / --omp-wait re-execute the command with OPENBLAS_CORETYPE / OMP_WAIT_POLICY set\n"
    "(both are read when the libraries load); OMP_WAIT_POLICY defaults to PASSIVE when unset.\n"
    "--coretype: an OpenBLAS core name (Haswell, SkylakeX, ...; any case); an unknown one or one whose\n"
    "kernels this CPU lacks is refused; the log warns when OpenBLAS runs another core instead.";

/* The flags that take a value (--no-train, --no-eval, --profile and --help take none). */
static const char *const valued[] = {"--preset", "--vocab", "--layers", "--d", "--heads", "--batch", "--seq", "--steps",
                                     "--warmup", "--eval-batch", "--eval-reps", "--sgemm", "--sgemm-reps", "--threads",
                                     "--seed", "--pos", "--block", "--eval", "--precision", "--json", "--coretype",
                                     "--omp-wait", "--decode", "--decode-context", NULL};

/* --coretype NAME: a core OpenBLAS knows (else it would run another without a word) whose
 * kernels this CPU runs (else the first product stops on an illegal instruction). */
static int coretype_arg(const char *v) {
    if (!st_blas_core_known(v)) {
        char names[512];
        st_blas_core_names(names, sizeof names);
        return cli_usage("bench", "--coretype '%s': not a core OpenBLAS knows (it would run another one "
                         "without a word); expected one of %s", v, names);
    }
    const char *lacks = st_blas_core_unsupported(v);
    if (lacks) {
        const char *best = st_blas_best_core();
        return cli_usage("bench", "--coretype %s: its kernels need %s, which this CPU lacks%s%s", v, lacks,
                         best ? "; the best core it runs is " : "", best ? best : "");
    }
    return ST_OK;
}

/* What the flags ask to measure must be measurable: --profile needs training steps, and
 * a header with no figure is no benchmark (exit 0 would say it ran). */
static int check_plan(const st_bench_config *c) {
    if (c->profile && c->steps == 0)
        return cli_usage("bench", "--profile profiles the training steps; --no-train (or --steps 0) leaves none");
    if (c->steps == 0 && c->n_eval == 0 && c->sgemm_n == 0 && c->decode_tokens == 0)
        return cli_usage("bench", "nothing to measure: --no-train (or --steps 0), --no-eval (or --eval none) and "
                         "--sgemm 0 leave no figure; keep one of them or add --decode N");
    return ST_OK;
}

int cmd_bench(int argc, char **argv) {
    st_error e = {0};
    st_bench_config c;
    const char *preset = "S", *json = NULL, *coretype = NULL, *ompwait = NULL;
    int llama = 0, force = 0;
    /* the preset first, so the other flags override it whatever their order */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--preset") == 0) preset = argv[i + 1];
    if (st_bench_preset(preset, &c, &e)) return cli_report("bench", &e);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { printf("usage: stretch %s\n", USAGE); return 0; }
        if (!strcmp(a, "--no-train")) { c.steps = 0; continue; }
        if (!strcmp(a, "--no-eval")) { c.n_eval = 0; continue; }
        if (!strcmp(a, "--profile")) { c.profile = 1; continue; }
        if (!strcmp(a, "--force")) { force = 1; continue; }
        if (a[0] != '-') return cli_usage("bench", "unexpected argument '%s' (bench takes flags only)", a);
        const char *v;
        int rc = cli_flag_value("bench", valued, argc, argv, &i, &v);
        if (rc) return rc;
        if (!v) return cli_usage("bench", "unknown option '%s'", a);
        int64_t x = 0;
#define INTARG(flag, lo, hi, dst) \
        if (!strcmp(a, flag)) { if (!cli_int_arg(v, lo, hi, &x)) \
                                    return cli_usage("bench", "%s '%s': expected an integer in [%lld, %lld]", flag, v, \
                                                     (long long)(lo), (long long)(hi)); \
                                dst = x; continue; }
        if (!strcmp(a, "--preset")) continue;
        INTARG("--vocab", 2, 1 << 24, c.model.vocab_size)
        INTARG("--layers", 1, 1024, c.model.n_layers)
        INTARG("--d", 1, 1 << 16, c.model.d_model)
        INTARG("--heads", 1, 256, c.model.n_heads)
        INTARG("--batch", 1, 1 << 20, c.B)
        INTARG("--seq", 1, 1 << 24, c.T)
        INTARG("--steps", 0, 1 << 20, c.steps)
        /* the first step sizes the arena: one warmup step always runs */
        if (!strcmp(a, "--warmup") && cli_int_arg(v, 0, 0, &x))
            return cli_usage("bench", "--warmup 0: at least 1 (the first step sizes the arena and is never timed)");
        INTARG("--warmup", 1, 1 << 20, c.warmup)
        INTARG("--eval-batch", 1, 1 << 20, c.eval_B)
        INTARG("--eval-reps", 1, 1 << 20, c.eval_reps)
        INTARG("--sgemm", 0, 16384, c.sgemm_n)
        INTARG("--sgemm-reps", 0, 1 << 20, c.sgemm_reps)
        INTARG("--threads", 0, 4096, c.threads)
        INTARG("--decode", 0, 1 << 20, c.decode_tokens)
        INTARG("--decode-context", 1, 1 << 24, c.decode_context)
#undef INTARG
        if (!strcmp(a, "--seed")) {
            if (!cli_u64_arg(v, &c.seed)) return cli_usage("bench", "--seed '%s': expected an integer >= 0", v);
        } else if (!strcmp(a, "--pos")) {
            int p = st_pos_from_name(v);
            if (p < 0) return cli_usage("bench", "--pos: unknown position method '%s'", v);
            c.model.pos = p;
        } else if (!strcmp(a, "--block")) {
            if (!strcmp(v, "llama")) llama = 1;
            else if (strcmp(v, "gpt2")) return cli_usage("bench", "--block: gpt2 or llama, not '%s'", v);
        } else if (!strcmp(a, "--eval")) {
            if (!parse_lengths(v, &c)) return cli_usage("bench", "--eval: expected L1,L2,... (at most %d) or none", ST_BENCH_MAX_EVAL);
        } else if (!strcmp(a, "--precision")) {
            if ((c.precision = st_precision_from_name(v)) < 0)
                return cli_usage("bench", "--precision: fp32 or bf16, not '%s'", v);
        } else if (!strcmp(a, "--json")) {
            json = v;
            if (cli_path_arg("bench", a, json)) return ST_ERR_CONFIG;
        } else if (!strcmp(a, "--coretype")) {
            if ((rc = coretype_arg(v))) return rc;
            coretype = v;
        } else if (!strcmp(a, "--omp-wait")) {
            if (strcasecmp(v, "passive") && strcasecmp(v, "active"))
                return cli_usage("bench", "--omp-wait: passive or active, not '%s'", v);
            ompwait = v;
        } else {
            return cli_usage("bench", "unknown option '%s'", a);
        }
    }
    if (st_pos_max_len(&c.model) > 0) {   /* a position table: as long as the longest run */
        int64_t mx = c.T;
        for (int i = 0; i < c.n_eval; i++) if (c.eval_lengths[i] > mx) mx = c.eval_lengths[i];
        c.model.max_len = (int)mx;
    }
    if (c.model.d_model % c.model.n_heads)
        return cli_usage("bench", "--d %d is not a multiple of --heads %d", c.model.d_model, c.model.n_heads);
    if (llama) {   /* after --d and --heads, which it depends on */
        c.model.norm = ST_NORM_RMS;
        c.model.ffn = ST_FFN_SWIGLU;
        c.model.bias = 0;
        c.model.n_kv_heads = c.model.n_heads % 2 == 0 ? c.model.n_heads / 2 : c.model.n_heads;
        c.model.d_ff = 3 * c.model.d_model;
    }

    int rc = check_plan(&c);
    if (rc) return rc;
    rc = json ? cli_output_file("bench", "--json", json, force) : ST_OK;
    if (rc) return rc;
    if (!ompwait && !getenv("OMP_WAIT_POLICY")) ompwait = "PASSIVE";
    if (reexec_needed("OPENBLAS_CORETYPE", coretype) || reexec_needed("OMP_WAIT_POLICY", ompwait)) {
        if (coretype) setenv("OPENBLAS_CORETYPE", coretype, 1);
        if (ompwait) setenv("OMP_WAIT_POLICY", ompwait, 1);
        char **args = calloc((size_t)argc + 2, sizeof *args);
        if (!args) { st_fail(&e, ST_ERR_MEMORY, "out of memory"); return cli_report("bench", &e); }
        args[0] = "stretch";
        for (int i = 0; i < argc; i++) args[i + 1] = argv[i];   /* argv[0] is "bench" */
        fflush(NULL);
        execv("/proc/self/exe", args);
        st_fail(&e, ST_ERR_GENERIC, "cannot re-execute /proc/self/exe to apply OPENBLAS_CORETYPE/"
                "OMP_WAIT_POLICY (%s); set them in the environment instead", strerror(errno));
        free(args);
        return cli_report("bench", &e);
    }

    st_bench_result r;
    rc = st_bench_run(&c, &r, &e);
    st_blas_log();
    if (rc) return cli_report("bench", &e);
    st_bench_print(&c, &r, stdout);
    if (json && st_bench_write_json(&c, &r, json, &e)) return cli_report("bench", &e);
    return 0;
}
