/* cmd_data.c - `stretch data`: tokenize and cache a corpus (or build the synthetic one)
 * and print its statistics: tokens and bytes per split, vocabulary, cache files, and for
 * the synthetic source the ideal perplexity exp(entropy rate).
 * Takes flags (a config file's "data" section maps one to one onto them). */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "data --source synthetic|wikitext|text [--path P] [--tokenizer auto|word|byte|bpe] [--bpe-vocab N]\n"
    "       [--cache-dir D] [--valid-frac F] [--test-frac F] [--save-tokenizer FILE [--force]]\n"
    "       [--seed S] [--syn-vocab V] [--syn-order K] [--syn-branch B] [--syn-tokens TRAIN,VALID,TEST]\n"
    "       [--syn-mode markov|copy]  (copy: the data.synthetic.copy defaults; set others in a run config)";

/* Every flag but --help takes a value. */
static const char *const valued[] = {"--source", "--path", "--tokenizer", "--cache-dir", "--bpe-vocab", "--valid-frac",
                                     "--test-frac", "--seed", "--syn-vocab", "--syn-order", "--syn-branch", "--syn-mode",
                                     "--syn-tokens", "--save-tokenizer", NULL};

static int bad(const char *flag, const char *val, const char *want) {
    st_error e = {0};
    st_fail(&e, ST_ERR_CONFIG, "data: %s: expected %s, got \"%s\"\nusage: stretch %s", flag, want, val, usage_text);
    return cli_report(&e);
}

static int parse_int(const char *s, int *v) {
    int64_t x;
    if (!cli_int_arg(s, INT32_MIN, INT32_MAX, &x)) return -1;
    *v = (int)x;
    return 0;
}

static int parse_float(const char *s, float *v) {
    double x;
    if (!cli_num_arg(s, -FLT_MAX, FLT_MAX, &x)) return -1;
    *v = (float)x;
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *src) {
    if (strlen(src) >= cap) return -1;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

static void fmt_int(char *out, size_t cap, int64_t v) {   /* 2088628 -> 2,088,628 */
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? -v : v)), k = 0;
    if (v < 0 && (size_t)k + 1 < cap) out[k++] = '-';
    for (int i = 0; i < n && (size_t)k + 2 < cap; i++) {
        out[k++] = raw[i];
        if ((n - i - 1) % 3 == 0 && i != n - 1) out[k++] = ',';
    }
    out[k] = 0;
}

int cmd_data(int argc, char **argv) {
    st_data_config c;
    st_data_config_default(&c);
    const char *save = NULL;
    int have_source = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: stretch %s\n", usage_text);
            return 0;
        }
        if (!strcmp(a, "--force")) { force = 1; continue; }
        if (strncmp(a, "--", 2) != 0)
            return cli_usage("data", "unexpected argument \"%s\" (config files are read by `stretch train`; "
                             "give the data settings as flags here)", a);
        const char *v;
        int rc = cli_flag_value("data", valued, argc, argv, &i, &v);
        if (rc) return rc;
        if (!v) return cli_usage("data", "unknown option '%s'", a);
        if (!strcmp(a, "--source")) {
            if (copy_str(c.source, sizeof c.source, v)) return bad(a, v, "synthetic, wikitext or text");
            /* a task's instances come from a run config's data.task keys, batch by batch:
             * there is no corpus to tokenize or cache, and no flags here for those keys */
            if (!strcmp(v, "task"))
                return cli_usage("data", "--source task: task instances are generated per batch from a run config's "
                                 "data.task keys; docs/tasks.md shows each task's format, and `stretch generate RUN "
                                 "--prompt ... --temperature 0` runs one through a trained model");
            have_source = 1;
        } else if (!strcmp(a, "--path")) {
            if (cli_path_arg("data", a, v) || copy_str(c.path, sizeof c.path, v)) return ST_ERR_CONFIG;
        } else if (!strcmp(a, "--tokenizer")) {
            if (copy_str(c.tokenizer, sizeof c.tokenizer, v)) return bad(a, v, "auto, word, byte or bpe");
        } else if (!strcmp(a, "--cache-dir")) {
            if (cli_path_arg("data", a, v) || copy_str(c.cache_dir, sizeof c.cache_dir, v)) return ST_ERR_CONFIG;
        } else if (!strcmp(a, "--bpe-vocab")) {
            if (parse_int(v, &c.bpe_vocab)) return bad(a, v, "an integer");
        } else if (!strcmp(a, "--valid-frac")) {
            if (parse_float(v, &c.valid_frac)) return bad(a, v, "a number");
        } else if (!strcmp(a, "--test-frac")) {
            if (parse_float(v, &c.test_frac)) return bad(a, v, "a number");
        } else if (!strcmp(a, "--seed")) {
            if (!cli_u64_arg(v, &c.syn_seed)) return bad(a, v, "a non-negative integer");
        } else if (!strcmp(a, "--syn-vocab")) {
            if (parse_int(v, &c.syn_vocab)) return bad(a, v, "an integer");
        } else if (!strcmp(a, "--syn-order")) {
            if (parse_int(v, &c.syn_order)) return bad(a, v, "an integer");
        } else if (!strcmp(a, "--syn-branch")) {
            if (parse_int(v, &c.syn_branch)) return bad(a, v, "an integer");
        } else if (!strcmp(a, "--syn-mode")) {
            if (copy_str(c.syn_mode, sizeof c.syn_mode, v)) return bad(a, v, "markov or copy");
        } else if (!strcmp(a, "--syn-tokens")) {
            int64_t t[4];
            if (cli_list_arg(v, 0, INT64_MAX, t, 4) != 3) return bad(a, v, "three integers TRAIN,VALID,TEST");
            memcpy(c.syn_tokens, t, sizeof c.syn_tokens);
        } else if (!strcmp(a, "--save-tokenizer")) {
            save = v;
            if (cli_path_arg("data", a, save)) return ST_ERR_CONFIG;
        } else {
            return cli_usage("data", "unknown option '%s'", a);
        }
    }
    if (!have_source) return cli_usage("data", "--source is required");
    int rc = save ? cli_output_file("data", "--save-tokenizer", save, force) : ST_OK;
    if (rc) return rc;

    st_error e = {0};
    /* the flags' values pass the same key table as a config's data section (one source
     * of truth for ranges): "command line: data.synthetic.vocab: must be in ..." */
    st_run_config run;
    st_run_config_default(&run);
    run.data = c;
    snprintf(run.file, sizeof run.file, "command line");
    if (st_run_config_validate(&run, &e)) return cli_report(&e);
    c = run.data;
    st_dataset ds;
    if (st_dataset_load(&c, "command line", &ds, &e)) return cli_report(&e);

    static const char *names[3] = {"train", "valid", "test"};
    static const char *units[3] = {"word", "byte", "token"};
    char hash[24];
    snprintf(hash, sizeof hash, "%016" PRIx64, ds.tok_hash);
    printf("source      %s%s%s\n", c.source, c.path[0] ? "  " : "", c.path);
    printf("tokenizer   %s  vocab %d  hash %s  (perplexity unit: %s)\n", st_data_tokenizer_name(&c), ds.vocab_size, hash,
           units[ds.unit]);
    printf("%-6s %14s %14s  %s\n", "split", "tokens", "bytes", "cache");
    for (int i = 0; i < 3; i++) {
        char nt[32], nb[32];
        fmt_int(nt, sizeof nt, ds.n[i]);
        fmt_int(nb, sizeof nb, ds.bytes[i]);
        printf("%-6s %14s %14s  %s\n", names[i], nt, nb, ds.cache_file[i][0] ? ds.cache_file[i] : "-");
    }
    if (ds.vocab_file[0]) printf("vocab cache %s\n", ds.vocab_file);
    if (ds.unit == ST_UNIT_BYTE && ds.n[0] > 0)
        printf("compression %.3f bytes/token (train)\n", (double)ds.bytes[0] / (double)ds.n[0]);
    if (!strcmp(c.source, "synthetic"))
        printf("entropy     %.6f nats/token; ideal perplexity exp(H) = %.4f\n", ds.entropy_rate, exp(ds.entropy_rate));
    printf("loaded in %.3f s (%d/3 splits from cache)\n", ds.load_seconds, ds.cache_hits);
    if (save) {
        if (st_tokenizer_save(ds.tok, save, &e)) rc = cli_report(&e);
        else printf("tokenizer saved to %s\n", save);
    }
    st_dataset_free(&ds);
    return rc;
}
