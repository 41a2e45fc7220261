/* cmd_data.c - `stretch data`: tokenize and cache a corpus (or build the synthetic one)
 * and print its statistics: tokens and bytes per split, vocabulary, cache files, and for
 * the synthetic source the ideal perplexity exp(entropy rate).
 * Takes flags (a config file's "data" section maps one to one onto them), or a run config
 * (--config, with --set); a task run's config shows its instances (cmd_data_task.c). */
#include "cli/cli.h"
#include "st_task.h"

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
    "       [--syn-mode markov|copy]  (copy: the data.synthetic.copy defaults; set others in a run config)\n"
    "       (--path, --cache-dir: text and wikitext; --valid-frac, --test-frac: text; --seed, --syn-*:\n"
    "       synthetic; --bpe-vocab: --tokenizer bpe; a flag the source does not read is refused)\n"
    "       stretch data --config RUN.json [--set section.key=value ...] [--show N] [--size S]\n"
    "       [--save-tokenizer FILE [--force]]\n"
    "       (a run config's data section; a task run: its task, sizes and the first N training rows, or\n"
    "       N instances of size S)";

/* Every flag but --help takes a value. */
static const char *const valued[] = {"--source", "--path", "--tokenizer", "--cache-dir", "--bpe-vocab", "--valid-frac",
                                     "--test-frac", "--seed", "--syn-vocab", "--syn-order", "--syn-branch", "--syn-mode",
                                     "--syn-tokens", "--save-tokenizer", "--config", "--set", "--show", "--size", NULL};

static int bad(const char *flag, const char *val, const char *want) {
    return cli_usage("data", "%s: expected %s, got \"%s\"", flag, want, val);
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

#define MAX_SETS 64

/* What the command line asks for: the data flags (c), or a run config (--config, --set). */
typedef struct data_args {
    st_data_config c;
    int have_source, n_flags, force;
    const char *given[32];  /* the data flags given, checked against what the source reads */
    int n_given;
    const char *save, *config;
    const char *sets[MAX_SETS];
    int n_sets;
    int64_t show, size;   /* --show N (0: not given), --size S (0: training rows) */
} data_args;

/* One data flag with its value into a->c. */
static int data_flag(data_args *a, const char *f, const char *v) {
    st_data_config *c = &a->c;
    a->n_flags++;
    if (a->n_given < (int)(sizeof a->given / sizeof a->given[0])) a->given[a->n_given++] = f;
    if (!strcmp(f, "--source")) {
        if (copy_str(c->source, sizeof c->source, v)) return bad(f, v, "synthetic, wikitext or text");
        /* a task's instances come from a run config's data.task keys, batch by batch:
         * there is no corpus to tokenize or cache, and no flags here for those keys */
        if (!strcmp(v, "task"))
            return cli_usage("data", "--source task: task instances are generated per batch from a run config's "
                             "data.task keys: `stretch data --config RUN.json` shows them (docs/tasks.md)");
        a->have_source = 1;
    } else if (!strcmp(f, "--path")) {
        if (cli_path_arg("data", f, v) || copy_str(c->path, sizeof c->path, v)) return ST_ERR_CONFIG;
    } else if (!strcmp(f, "--tokenizer")) {
        /* the flag's values; data.tokenizer also takes the ones a source sets itself
         * (synthetic, task), which the config check would list */
        static const char *const flag_values[] = {"auto", "word", "byte", "bpe", NULL};
        int known = 0;
        for (int i = 0; flag_values[i]; i++) known |= !strcmp(v, flag_values[i]);
        if (!known || copy_str(c->tokenizer, sizeof c->tokenizer, v)) return bad(f, v, "auto, word, byte or bpe");
    } else if (!strcmp(f, "--cache-dir")) {
        if (cli_path_arg("data", f, v) || copy_str(c->cache_dir, sizeof c->cache_dir, v)) return ST_ERR_CONFIG;
    } else if (!strcmp(f, "--bpe-vocab")) {
        if (parse_int(v, &c->bpe_vocab)) return bad(f, v, "an integer");
    } else if (!strcmp(f, "--valid-frac")) {
        if (parse_float(v, &c->valid_frac)) return bad(f, v, "a number");
    } else if (!strcmp(f, "--test-frac")) {
        if (parse_float(v, &c->test_frac)) return bad(f, v, "a number");
    } else if (!strcmp(f, "--seed")) {
        if (!cli_u64_arg(v, &c->syn_seed)) return bad(f, v, "a non-negative integer");
    } else if (!strcmp(f, "--syn-vocab")) {
        if (parse_int(v, &c->syn_vocab)) return bad(f, v, "an integer");
    } else if (!strcmp(f, "--syn-order")) {
        if (parse_int(v, &c->syn_order)) return bad(f, v, "an integer");
    } else if (!strcmp(f, "--syn-branch")) {
        if (parse_int(v, &c->syn_branch)) return bad(f, v, "an integer");
    } else if (!strcmp(f, "--syn-mode")) {
        if (copy_str(c->syn_mode, sizeof c->syn_mode, v)) return bad(f, v, "markov or copy");
    } else if (!strcmp(f, "--syn-tokens")) {
        int64_t t[4];
        if (cli_list_arg(v, 0, INT64_MAX, t, 4) != 3) return bad(f, v, "three integers TRAIN,VALID,TEST");
        memcpy(c->syn_tokens, t, sizeof c->syn_tokens);
    } else {
        return cli_usage("data", "unknown option '%s'", f);
    }
    return ST_OK;
}

/* The sources that read a data flag (text, wikitext, synthetic): any other ignores it,
 * and a flag ignored in silence is a setting the user believes in (probe 28, review 41). */
enum { SRC_TEXT = 1, SRC_WIKI = 2, SRC_SYN = 4 };
static const struct { const char *flag; int sources; } flag_sources[] = {
    {"--valid-frac", SRC_TEXT}, {"--test-frac", SRC_TEXT}, {"--cache-dir", SRC_TEXT | SRC_WIKI},
    {"--seed", SRC_SYN}, {"--syn-vocab", SRC_SYN}, {"--syn-order", SRC_SYN}, {"--syn-branch", SRC_SYN},
    {"--syn-mode", SRC_SYN}, {"--syn-tokens", SRC_SYN},
};

static int check_flag_sources(const data_args *a) {
    const char *src = a->c.source;
    const int mine = !strcmp(src, "text") ? SRC_TEXT : !strcmp(src, "wikitext") ? SRC_WIKI
                   : !strcmp(src, "synthetic") ? SRC_SYN : 0;
    if (!mine) return ST_OK;   /* an unknown source is the data layer's error */
    if (mine == SRC_SYN && a->c.path[0])   /* only --path sets it */
        return cli_usage("data", "--path: the synthetic source is generated, it reads no file (--source text or wikitext)");
    for (int g = 0; g < a->n_given; g++)
        for (size_t i = 0; i < sizeof flag_sources / sizeof flag_sources[0]; i++) {
            if (strcmp(a->given[g], flag_sources[i].flag) || (flag_sources[i].sources & mine)) continue;
            const int s = flag_sources[i].sources;
            return cli_usage("data", "%s: applies to --source %s%s%s%s%s, not %s", a->given[g],
                             s & SRC_TEXT ? "text" : "", (s & SRC_TEXT) && (s & ~SRC_TEXT) ? " or " : "",
                             s & SRC_WIKI ? "wikitext" : "", (s & SRC_WIKI) && (s & SRC_SYN) ? " or " : "",
                             s & SRC_SYN ? "synthetic" : "", src);
        }
    /* --bpe-vocab sizes a BPE vocabulary: auto is byte for text and word for WikiText */
    for (int g = 0; g < a->n_given; g++)
        if (!strcmp(a->given[g], "--bpe-vocab") && strcmp(a->c.tokenizer, "bpe") != 0)
            return cli_usage("data", "--bpe-vocab: applies to --tokenizer bpe, not %s", a->c.tokenizer[0] ? a->c.tokenizer : "auto");
    return ST_OK;
}

/* ST_OK, a usage error, or -1 after printing the usage for --help (exit 0). */
static int parse_args(int argc, char **argv, data_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            printf("usage: stretch %s\n", usage_text);
            return -1;
        }
        if (!strcmp(f, "--force")) { a->force = 1; continue; }
        if (strncmp(f, "--", 2) != 0)
            return cli_usage("data", "unexpected argument \"%s\" (a run config is read with --config FILE)", f);
        const char *v;
        int rc = cli_flag_value("data", valued, argc, argv, &i, &v);
        if (rc) return rc;
        if (!v) return cli_usage("data", "unknown option '%s'", f);
        if (!strcmp(f, "--save-tokenizer")) {
            a->save = v;
            if (cli_path_arg("data", f, v)) return ST_ERR_CONFIG;
        } else if (!strcmp(f, "--config")) {
            a->config = v;
            if (cli_path_arg("data", f, v)) return ST_ERR_CONFIG;
        } else if (!strcmp(f, "--set")) {
            if (a->n_sets == MAX_SETS) return cli_usage("data", "too many --set options (max %d)", MAX_SETS);
            a->sets[a->n_sets++] = v;
        } else if (!strcmp(f, "--show")) {
            if (!cli_int_arg(v, 1, 10000, &a->show)) return bad(f, v, "an integer in [1, 10000]");
        } else if (!strcmp(f, "--size")) {
            if (!cli_int_arg(v, 1, ST_TASK_MAX_SIZE, &a->size)) return bad(f, v, "an integer in [1, 2^20]");
        } else if ((rc = data_flag(a, f, v))) {
            return rc;
        }
    }
    if (a->config && a->n_flags)
        return cli_usage("data", "--config reads the data settings from the file: give other values as --set "
                         "data.KEY=VALUE, not as data flags");
    if (!a->config && a->n_sets) return cli_usage("data", "--set needs --config (a run config to change)");
    if (!a->config && (a->show || a->size)) return cli_usage("data", "--show and --size need --config (a task run's config)");
    if (!a->config && !a->have_source) return cli_usage("data", "--source (or --config) is required");
    return a->have_source ? check_flag_sources(a) : ST_OK;
}

/* The statistics of a loaded corpus, and its tokenizer saved to `save`. */
static int print_stats(const st_data_config *c, const st_dataset *ds, const char *save) {
    static const char *names[3] = {"train", "valid", "test"};
    static const char *units[3] = {"word", "byte", "token"};
    char hash[24];
    snprintf(hash, sizeof hash, "%016" PRIx64, ds->tok_hash);
    printf("source      %s%s%s\n", c->source, c->path[0] ? "  " : "", c->path);
    printf("tokenizer   %s  vocab %d  hash %s  (perplexity unit: %s)\n", st_data_tokenizer_name(c), ds->vocab_size, hash,
           units[ds->unit]);
    printf("%-6s %14s %14s  %s\n", "split", "tokens", "bytes", "cache");
    for (int i = 0; i < 3; i++) {
        char nt[32], nb[32];
        fmt_int(nt, sizeof nt, ds->n[i]);
        fmt_int(nb, sizeof nb, ds->bytes[i]);
        printf("%-6s %14s %14s  %s\n", names[i], nt, nb, ds->cache_file[i][0] ? ds->cache_file[i] : "-");
    }
    if (ds->vocab_file[0]) printf("vocab cache %s\n", ds->vocab_file);
    if (ds->unit == ST_UNIT_BYTE && ds->n[0] > 0)
        printf("compression %.3f bytes/token (train)\n", (double)ds->bytes[0] / (double)ds->n[0]);
    if (!strcmp(c->source, "synthetic"))
        printf("entropy     %.6f nats/token; ideal perplexity exp(H) = %.4f\n", ds->entropy_rate, exp(ds->entropy_rate));
    printf("loaded in %.3f s (%d/3 splits from cache)\n", ds->load_seconds, ds->cache_hits);
    if (save) {
        st_error e = {0};
        if (st_tokenizer_save(ds->tok, save, &e)) return cli_report("data", &e);
        printf("tokenizer saved to %s\n", save);
    }
    return ST_OK;
}

int cmd_data(int argc, char **argv) {
    data_args a;
    memset(&a, 0, sizeof a);
    st_data_config_default(&a.c);
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (a.save && (rc = cli_output_file("data", "--save-tokenizer", a.save, a.force))) return rc;

    st_error e = {0};
    st_run_config run;
    if (a.config) {
        if (st_run_config_load(a.config, a.sets, a.n_sets, &run, &e)) {
            if (e.code == ST_ERR_CONFIG) cli_blame_sets(a.config, a.sets, a.n_sets, 1, &e);
            return cli_report("data", &e);
        }
        const int task = !strcmp(run.data.source, "task");
        if (!task && (a.show || a.size))
            return cli_usage("data", "--show and --size show a task run's instances; %s has data.source \"%s\"",
                             a.config, run.data.source);
        if (task && a.save)
            return cli_usage("data", "--save-tokenizer: a task run's tokenizer is its task vocabulary, written to its "
                             "run directory by `stretch train`");
    } else {
        /* the flags' values pass the same key table as a config's data section (one source
         * of truth for ranges): "command line: data.synthetic.vocab: must be in ..." */
        st_run_config_default(&run);
        run.data = a.c;
        snprintf(run.file, sizeof run.file, "command line");
        if (st_run_config_validate(&run, &e)) return cli_report("data", &e);
    }
    st_dataset ds;
    if (st_dataset_load(&run.data, run.file, &ds, &e)) return cli_report("data", &e);
    if (ds.task) {
        rc = cli_data_task_show(&run, &ds, a.show ? a.show : 4, a.size, &e);
        if (rc && e.code) {   /* the trainer's own check: a --set may be the cause */
            if (e.code == ST_ERR_CONFIG) cli_blame_sets(a.config, a.sets, a.n_sets, 1, &e);
            rc = cli_report("data", &e);
        }
    } else {
        rc = print_stats(&run.data, &ds, a.save);
    }
    st_dataset_free(&ds);
    return rc;
}
