/* cmd_eval.c - `stretch eval RUN_DIR|CHECKPOINT --lengths ...`: perplexity of a trained
 * model at several evaluation lengths (docs/evaluation.md). Prints a table and writes a
 * JSON report. Exit 0 when at least one length was evaluated (lengths that could not be,
 * e.g. beyond a learned-position table, are error rows), 2 on bad arguments, 3 for a
 * missing run dir or --data file, 4 for --data that cannot be evaluated (empty, binary, unseen
 * words and no <unk>), 5 for a bad checkpoint. */
#include "cli/cli.h"
#include "st_eval.h"
#include "st_matmul.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *usage_text =
    "eval RUN_DIR|CHECKPOINT [--lengths 64,128,...|64..16384] [--split valid|test]\n"
    "        [--mode nonoverlapping|sliding] [--stride S] [--max-tokens N] [--batch-tokens N]\n"
    "        [--buckets N] [--bucket-scale linear|log2] [--precision fp32|bf16] [--json OUT.json [--force]]\n"
    "        [--threads N] [--quiet] [--data FILE|WIKITEXT_DIR] [--attn-stats]\n"
    "        [--transform pi|ntk|dynamic_ntk|yarn|rerope|alibi_interp|none] [--scale S] [--clip W]\n"
    "        [--sinks K --window W [--positions text|cache] | --blockwise B]\n"
    "   or: eval RUN_DIR|CHECKPOINT --task [NAME] [--scales 1,2,4,...|--sizes A,B,...] [--depths 0,0.5,1]\n"
    "        [--trials N] [--show N] [--seed S] [--precision fp32|bf16] [--threads N] [--json OUT.json [--force]]\n"
    "        [--quiet] [transform options]: a task\n"
    "        run's exact-match accuracy at multiples of its largest training size (docs/tasks.md; default scales 1,2,4,8,16,32);\n"
    "        --show N prints each cell's first N instances with the model's answer\n"
    "   or: eval RUN_DIR|CHECKPOINT --task passkey [--lengths ...] [--depths 0,0.5,1] [--trials N] [--seed S]\n"
    "        [--split valid|test] [--precision fp32|bf16] [--threads N] [--json OUT.json [--force]] [--quiet]\n"
    "        [transform options]: retrieval accuracy\n"
    "        of a text run\n"
    "  defaults come from the run's eval config section as its checkpoint stores it (edits to RUN/config.json\n"
    "  do not change them: give the flags; --precision: its train.precision);\n"
    "  --lengths A..B = A, 2A, 4A, ... up to B;\n"
    "  --attn-stats: per layer and head, the attention's mean key distance, entropy, mass on the first key\n"
    "  and mass beyond the training length, over the scored query rows (the report's \"attention\");\n"
    "  --data: evaluate on other text with the run's tokenizer (a file whole, or a WikiText directory's\n"
    "  --split); a word-level run maps unseen words to <unk> and reports how many;\n"
    "  JSON default: RUN_DIR/eval_<split>_<mode>.json (CHECKPOINT: ..._<checkpoint name>.json),\n"
    "  with --data: RUN_DIR/eval_data-<name>[_<split>]_<mode>.json; a transform adds its label,\n"
    "  e.g. eval_valid_nonoverlapping_yarn.json; an existing --json file is replaced only with --force;\n"
    "  --transform: inference-time position transform (rope: pi, ntk, dynamic_ntk, yarn, rerope; alibi:\n"
    "  alibi_interp), --scale S (default max(1, L / train.seq_len) per length), --clip W (rerope, default\n"
    "  train.seq_len / 2), --sinks/--window: attention sinks + window, the sinks at their positions in the\n"
    "  text or, with --positions cache, in a cache holding the sinks then the window (StreamingLLM);\n"
    "  --window 0 (eval.window's default): no window, which switches off the run's eval.window and its\n"
    "  eval.sinks; --sinks 0 keeps the window without sinks; --blockwise B: blockwise causal attention\n"
    "  (xPos's inference setup): each window is cut into blocks of B tokens and a query sees its own block\n"
    "  and the previous one (the paper: B = train.seq_len / 2); --blockwise 0 switches off the run's\n"
    "  eval.blockwise";

/* "64,128,256" or "64..16384" (doubling). */
/* Default report path: RUN_DIR/eval_<split>_<mode>.json for a run dir; for a checkpoint
 * file, the same name with its stem appended, in its run dir (parent of checkpoints/). */
static void default_json_path(const char *src, int is_dir, const st_eval_report *rep, const char *data_arg, char *out,
                              size_t n) {
    char dir[ST_PATH_BUF];
    char stem[ST_PATH_BUF + 1] = "";
    if (is_dir) {
        snprintf(dir, sizeof dir, "%s", src);
    } else {
        cli_checkpoint_dir(rep->checkpoint, dir, sizeof dir, stem, sizeof stem);
    }
    /* a transformed evaluation must not overwrite the plain one: its label joins the name */
    char tag[160], ptag[8];
    cli_transform_tag(&rep->xf, tag, sizeof tag);
    cli_precision_tag(rep->precision, rep->cfg.train.precision, ptag, sizeof ptag);
    strncat(tag, ptag, sizeof tag - strlen(tag) - 1);
    int written;
    if (rep->external) {
        /* never the run's own report name: eval_data-<file or dir name>[_<split>]_<mode> */
        char name[256], tmp[ST_PATH_BUF];
        snprintf(tmp, sizeof tmp, "%s", data_arg);
        size_t tl = strlen(tmp);
        while (tl > 1 && tmp[tl - 1] == '/') tmp[--tl] = 0;
        const char *slash = strrchr(tmp, '/');
        snprintf(name, sizeof name, "%s", slash ? slash + 1 : tmp);
        for (char *c = name; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_') *c = '_';
        written = snprintf(out, n, "%s/eval_data-%s%s%s_%s%s%s.json", dir, name, rep->data.is_dir ? "_" : "",
                           rep->data.is_dir ? st_eval_split_name(rep->split) : "", st_eval_mode_name(rep->mode), tag,
                           stem);
    } else {
        written = snprintf(out, n, "%s/eval_%s_%s%s%s.json", dir, st_eval_split_name(rep->split),
                           st_eval_mode_name(rep->mode), tag, stem);
    }
    /* a name past n is cut here; check_report_path refuses a source whose name would not fit */
    if (written < 0 || (size_t)written >= n) out[n - 1] = 0;
}

/* What the command line asks for. */
typedef struct eval_args {
    const char *src, *json;
    int threads, quiet, split_given, help, force;
    st_eval_plan plan;
    /* transform options: given ones override the run's eval.* keys, the rest stay -1 */
    st_transform xf;
    int xf_given;
    char tok_path[ST_PATH_BUF];   /* --data: the run's tokenizer (plan.tokenizer_path) */
} eval_args;

/* One option with a value (not a transform option). */
static int parse_option(eval_args *a, const char *opt, const char *v) {
    st_eval_plan *plan = &a->plan;
    int64_t x;
    int rc;
    if (!strcmp(opt, "--lengths")) {
        const int64_t hi = cli_key_max("eval.lengths");
        if ((plan->n_lengths = cli_lengths_arg(v, 1, hi, plan->lengths, ST_EVAL_MAX_LENGTHS)) <= 0)
            return cli_usage("eval", "--lengths '%s': expected integers in [1, %lld] 'A,B,...' or a doubling range "
                             "'A..B' (at most %d lengths; as eval.lengths)", v, (long long)hi, ST_EVAL_MAX_LENGTHS);
        if ((rc = cli_distinct_i64("eval", opt, plan->lengths, plan->n_lengths))) return rc;
    } else if (!strcmp(opt, "--data")) {
        if (cli_path_arg("eval", opt, v)) return ST_ERR_CONFIG;
        plan->data_path = v;
    } else if (!strcmp(opt, "--split")) {
        a->split_given = 1;
        if (!cli_split_arg(v, &plan->split)) return cli_usage("eval", "--split '%s': expected valid or test", v);
    } else if (!strcmp(opt, "--mode")) {
        if (!strcmp(v, "nonoverlapping")) plan->mode = ST_EVAL_NONOVERLAPPING;
        else if (!strcmp(v, "sliding")) plan->mode = ST_EVAL_SLIDING;
        else return cli_usage("eval", "--mode '%s': expected nonoverlapping or sliding", v);
    } else if (!strcmp(opt, "--stride")) {
        const int64_t hi = cli_key_max("eval.stride");
        if (!cli_int_arg(v, 1, hi, &x))
            return cli_usage("eval", "--stride '%s': expected an integer in [1, %lld] (eval.stride's upper bound; the "
                             "flag implies --mode sliding, and --mode sliding alone takes eval.stride's 0: L / 2)", v,
                             (long long)hi);
        plan->stride = x;
    } else if (!strcmp(opt, "--max-tokens")) {
        double d;
        if ((rc = cli_key_arg("eval", opt, v, "eval.max_tokens", "0 = all", &d))) return rc;
        x = (int64_t)d;
        if (x == 1) return cli_usage("eval", "--max-tokens '%s': " ST_EVAL_ONE_TOKEN, v);
        plan->max_tokens = x;
    } else if (!strcmp(opt, "--batch-tokens")) {
        if (!cli_int_arg(v, 1, INT64_MAX, &x)) return cli_usage("eval", "--batch-tokens '%s': expected an integer >= 1", v);
        plan->opts.batch_tokens = x;
    } else if (!strcmp(opt, "--buckets")) {
        double d = 0;
        if ((rc = cli_key_arg("eval", opt, v, "eval.buckets", NULL, &d))) return rc;
        plan->buckets = (int)d;
    } else if (!strcmp(opt, "--bucket-scale")) {
        if (!strcmp(v, "linear")) plan->opts.bucket_scale = ST_BUCKETS_LINEAR;
        else if (!strcmp(v, "log2")) plan->opts.bucket_scale = ST_BUCKETS_LOG2;
        else return cli_usage("eval", "--bucket-scale '%s': expected linear or log2", v);
    } else if (!strcmp(opt, "--precision")) {
        if ((plan->precision = st_precision_from_name(v)) < 0)
            return cli_usage("eval", "--precision '%s': expected fp32 or bf16", v);
    } else if (!strcmp(opt, "--json")) {
        a->json = v;
        if (cli_path_arg("eval", opt, a->json)) return ST_ERR_CONFIG;
    } else if (!strcmp(opt, "--threads")) {
        double d = 0;
        if ((rc = cli_key_arg("eval", opt, v, "train.threads", "0: all cores", &d))) return rc;
        a->threads = (int)d;
    } else {
        return cli_usage("eval", "unknown option '%s'", opt);
    }
    return ST_OK;
}

/* The flags that take a value (parse_option's and the transform options). */
static const char *const valued[] = {"--lengths", "--data", "--split", "--mode", "--stride", "--max-tokens",
                                     "--batch-tokens", "--buckets", "--bucket-scale", "--precision", "--json",
                                     "--threads", CLI_TRANSFORM_FLAGS, NULL};

void cli_eval_usage(void) { printf("usage: stretch %s\n", usage_text); }

/* The arguments in order; -h prints the usage and sets a->help. */
static int parse_args(int argc, char **argv, eval_args *a) {
    memset(a, 0, sizeof *a);
    a->threads = -1;
    st_eval_plan_default(&a->plan);
    cli_transform_unset(&a->xf);
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *v;
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) { cli_eval_usage(); a->help = 1; return 0; }
        if (!strcmp(opt, "--quiet")) { a->quiet = 1; continue; }
        if (!strcmp(opt, "--force")) { a->force = 1; continue; }
        if (!strcmp(opt, "--attn-stats")) { a->plan.opts.attn_stats = 1; continue; }
        if (opt[0] != '-' || opt[1] == 0) {
            if (a->src) return cli_usage("eval", "unexpected argument '%s' (one RUN_DIR or CHECKPOINT)", opt);
            a->src = opt;
            if (cli_path_arg("eval", "RUN_DIR|CHECKPOINT", a->src)) return ST_ERR_CONFIG;
            continue;
        }
        int rc = cli_flag_value("eval", valued, argc, argv, &i, &v);
        if (rc) return rc;
        if (!v) return cli_usage("eval", "unknown option '%s'", opt);
        int xrc;
        if (cli_transform_arg("eval", opt, v, &a->xf, &xrc)) {
            if (xrc) return xrc;
            a->xf_given = 1;
            continue;
        }
        if ((rc = parse_option(a, opt, v))) return rc;
    }
    return ST_OK;
}

/* The options that depend on each other, once all are read. */
static int finish_plan(eval_args *a) {
    st_eval_plan *plan = &a->plan;
    if (!a->src) return cli_usage("eval", "missing RUN_DIR or CHECKPOINT");
    if (a->xf_given) cli_transform_plan(&a->xf, plan);
    /* a stride only makes sense for sliding windows: reject it up front when the user
     * also chose nonoverlapping (when the mode comes from the config, the plan check does) */
    if (plan->stride > 0 && plan->mode == ST_EVAL_NONOVERLAPPING)
        return cli_usage("eval", "--stride applies to --mode sliding only");
    if (plan->stride > 0 && plan->mode < 0) plan->mode = ST_EVAL_SLIDING;
    return ST_OK;
}

/* --data: the text must exist, --split needs a WikiText directory, and the text is read
 * with the run's tokenizer. */
static int use_data(eval_args *a, st_error *e) {
    struct stat ds;
    if (stat(a->plan.data_path, &ds) != 0) {
        st_fail(e, ST_ERR_IO, "--data %s: cannot open: %s", a->plan.data_path, strerror(errno));
        return cli_report("eval", e);
    }
    if (a->split_given && !S_ISDIR(ds.st_mode))
        return cli_usage("eval", "--split chooses a file of a WikiText directory; --data %s is a file (it is "
                         "evaluated whole)", a->plan.data_path);
    char ckpt[ST_PATH_BUF];
    if (st_checkpoint_resolve(a->src, ckpt, sizeof ckpt, e)) return cli_report("eval", e);
    cli_tokenizer_path(ckpt, a->tok_path, sizeof a->tok_path);
    a->plan.tokenizer_path = a->tok_path;
    return ST_OK;
}

/* The default report's name depends on the run's eval section (split, mode, transform),
 * so a report that cannot be written (a source near the path limit, a symbolic link or a
 * FIFO at the name, a run on a read-only mount) would be refused after the evaluation:
 * read the checkpoint's config (its header, not the weights) and refuse the source before
 * evaluating. probe: this rank writes the report (the temp file is tried). */
static int check_report_path(const eval_args *a, int is_dir, int probe) {
    if (a->json) return ST_OK;   /* cli_output_file checked it */
    st_eval_report *rep = calloc(1, sizeof *rep);
    if (!rep) return ST_OK;   /* the evaluation reports the shortage */
    st_error e = {0};
    st_eval_plan plan = a->plan;
    char path[ST_PATH_BUF];
    size_t n = 0;
    int rc = st_checkpoint_resolve(a->src, rep->checkpoint, sizeof rep->checkpoint, &e);
    if (!rc) rc = st_checkpoint_load(rep->checkpoint, &rep->cfg, NULL, 0, NULL, &e);
    if (!rc) rc = st_eval_plan_resolve(&plan, &rep->cfg, rep->checkpoint, &e);
    if (!rc) {   /* the fields default_json_path reads, as st_eval_checkpoint sets them */
        struct stat ds;
        rep->split = plan.split;
        rep->mode = plan.mode;
        rep->xf = st_eval_plan_transform(&plan, 0);
        rep->external = plan.data_path != NULL;
        rep->data.is_dir = rep->external && stat(plan.data_path, &ds) == 0 && S_ISDIR(ds.st_mode);
        default_json_path(a->src, is_dir, rep, plan.data_path, path, sizeof path);
        n = strlen(path);
    }
    free(rep);
    if (rc) return ST_OK;   /* a load error: the evaluation reports it */
    if (n <= ST_PATH_MAX) {
        if (st_replaceable_check(path, path, &e)) return cli_report("eval", &e);
        return probe ? cli_default_report_writable("eval", path) : ST_OK;
    }
    return cli_usage("eval", "RUN_DIR|CHECKPOINT %.200s...: its default report would be %zu bytes long, and stretch "
                     "accepts paths of up to %d bytes: name the report with --json OUT.json or use a shorter path "
                     "(report: %.200s...)", a->src, n, ST_PATH_MAX, path);
}

/* Rank 0's JSON report (--json or the default name) and what it says about failed rows. */
static int save_report(const eval_args *a, int is_dir, const st_eval_report *rep, st_error *e) {
    char path[ST_PATH_BUF];
    if (a->json) snprintf(path, sizeof path, "%s", a->json);
    else default_json_path(a->src, is_dir, rep, a->plan.data_path, path, sizeof path);
    int rc = st_eval_report_save(rep, path, e);
    if (!rc && !a->quiet) cli_line("eval", 0, "wrote %s", path);
    int failed_rows = 0;
    for (int i = 0; i < rep->n; i++) failed_rows += rep->rows[i].status != ST_OK;
    if (!rc && failed_rows)
        cli_line("eval", 0, "%d of %d lengths could not be evaluated (see the error rows)", failed_rows, rep->n);
    return rc;
}

/* Evaluate, print the table and save the report (rank 0 alone). */
static int evaluate(const eval_args *a, int is_dir, int rank, st_error *e) {
    st_eval_report *rep = calloc(1, sizeof *rep);
    if (!rep) { st_fail(e, ST_ERR_MEMORY, "out of memory"); return cli_report("eval", e); }
    int rc = st_eval_checkpoint(a->src, &a->plan, rep, e);
    if (rep->n > 0 && rank == 0) st_eval_report_print(rep, stdout);
    fflush(stdout);
    /* no length evaluated (error rows alone): --json writes them, as eval --task does; the
     * default report is left as it was, not replaced by one of errors */
    if (rank == 0 && rc && rep->n > 0 && !a->json) {
        char path[ST_PATH_BUF];
        default_json_path(a->src, is_dir, rep, a->plan.data_path, path, sizeof path);
        cli_line("eval", 0, "no length evaluated: %s not written (an earlier report stays; --json FILE writes one "
                 "with each length's reason)", path);
    } else if (rank == 0 && (!rc || rep->n > 0)) {
        st_error se = {0};
        const int src = save_report(a, is_dir, rep, &se);
        if (src && !rc) { rc = src; *e = se; }
        else if (src) st_log(ST_LOG_WARN, "%s", se.msg);
    }
    st_eval_report_free(rep);
    free(rep);
    return rc ? cli_report("eval", e) : 0;
}

int cmd_eval(int argc, char **argv, st_dist *dist) {
    for (int i = 1; i < argc; i++)   /* task evaluation: its own options (cmd_eval_task.c) */
        if (!strcmp(argv[i], "--task")) {
            if (st_dist_size(dist) > 1)
                return cli_usage("eval", "--task runs in one process (not under mpirun -np %d)", st_dist_size(dist));
            return cmd_eval_task(argc, argv);
        }
    eval_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc || a.help) return rc;
    if ((rc = finish_plan(&a))) return rc;
    struct stat st;
    st_error e = {0};
    if (a.json) {   /* rank 0 alone writes the report; every rank stops with its refusal */
        rc = st_dist_rank(dist) == 0 ? cli_output_file("eval", "--json", a.json, a.force) : ST_OK;
        if ((rc = st_dist_agree(dist, rc, &e))) return rc;
    }
    if (stat(a.src, &st) != 0) {
        st_fail(&e, ST_ERR_IO, "%s: no such run directory or checkpoint", a.src);
        return cli_report("eval", &e);
    }
    rc = check_report_path(&a, S_ISDIR(st.st_mode), st_dist_rank(dist) == 0);
    if ((rc = st_dist_agree(dist, rc, &e))) return rc;
    if (a.plan.data_path && (rc = use_data(&a, &e))) return rc;
    if (a.threads >= 0) st_set_threads(a.threads);
    const int rank = st_dist_rank(dist);
    if (!a.quiet && rank == 0) a.plan.opts.progress_every = 30.0;
    a.plan.opts.dist = dist;   /* mpirun -np N: the windows are shared out, the figures unchanged */
    return evaluate(&a, S_ISDIR(st.st_mode), rank, &e);
}
