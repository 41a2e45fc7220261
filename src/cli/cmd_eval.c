/* cmd_eval.c - `stretch eval RUN_DIR|CHECKPOINT --lengths ...`: perplexity of a trained
 * model at several evaluation lengths (docs/evaluation.md). Prints a table and writes a
 * JSON report. Exit 0 when at least one length was evaluated (lengths that could not be,
 * e.g. beyond a learned-position table, are error rows), 2 on bad arguments, 3 for a
 * missing run dir, 5 for a bad checkpoint. */
#include "cli/cli.h"
#include "st_eval.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *usage_text =
    "eval RUN_DIR|CHECKPOINT [--lengths 64,128,...|64..16384] [--split valid|test]\n"
    "        [--mode nonoverlapping|sliding] [--stride S] [--max-tokens N] [--batch-tokens N]\n"
    "        [--buckets N] [--bucket-scale linear|log2] [--json OUT.json] [--threads N] [--quiet]\n"
    "        [--transform pi|ntk|dynamic_ntk|yarn|rerope|alibi_interp|none] [--scale S] [--clip W]\n"
    "        [--sinks K --window W]\n"
    "  defaults come from the run's eval config section; --lengths A..B = powers of two from A to B;\n"
    "  JSON default: RUN_DIR/eval_<split>_<mode>.json (CHECKPOINT: ..._<checkpoint name>.json;\n"
    "  a transform adds its label, e.g. eval_valid_nonoverlapping_yarn.json);\n"
    "  --transform: inference-time position transform (rope: pi, ntk, dynamic_ntk, yarn, rerope; alibi:\n"
    "  alibi_interp), --scale S (default max(1, L / train.seq_len) per length), --clip W (rerope, default\n"
    "  train.seq_len / 2), --sinks/--window: attention sinks + window";

static int parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return 0;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

/* "64,128,256" or "64..16384" (doubling). */
static int parse_lengths(const char *s, st_eval_plan *p) {
    const char *dots = strstr(s, "..");
    if (dots) {
        char a[32];
        size_t n = (size_t)(dots - s);
        if (n == 0 || n >= sizeof a) return 0;
        memcpy(a, s, n);
        a[n] = 0;
        int64_t lo, hi;
        if (!parse_i64(a, &lo) || !parse_i64(dots + 2, &hi) || lo < 1 || hi < lo) return 0;
        p->n_lengths = 0;
        for (int64_t L = lo;; L *= 2) {
            if (p->n_lengths == ST_EVAL_MAX_LENGTHS) return 0;
            p->lengths[p->n_lengths++] = L;
            if (L > hi / 2) break;   /* 2L > hi; testing before doubling cannot overflow */
        }
        return 1;
    }
    char buf[1024];
    if (strlen(s) >= sizeof buf) return 0;
    strcpy(buf, s);
    p->n_lengths = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int64_t L;
        if (!parse_i64(tok, &L) || L < 1 || p->n_lengths == ST_EVAL_MAX_LENGTHS) return 0;
        p->lengths[p->n_lengths++] = L;
    }
    return p->n_lengths > 0;
}

/* Default report path: RUN_DIR/eval_<split>_<mode>.json for a run dir; for a checkpoint
 * file, the same name with its stem appended, in its run dir (parent of checkpoints/). */
static void default_json_path(const char *src, int is_dir, const st_eval_report *rep, char *out, size_t n) {
    char dir[1024];
    char stem[1040] = "";
    if (is_dir) {
        snprintf(dir, sizeof dir, "%s", src);
    } else {
        snprintf(dir, sizeof dir, "%s", rep->checkpoint);
        char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : dir;
        snprintf(stem, sizeof stem, "_%s", base);
        char *dot = strrchr(stem, '.');
        if (dot && strcmp(dot, ".ckpt") == 0) *dot = 0;
        if (slash) *slash = 0; else strcpy(dir, ".");
        size_t dl = strlen(dir);
        if (dl >= 11 && strcmp(dir + dl - 11, "checkpoints") == 0 && (dl == 11 || dir[dl - 12] == '/')) {
            if (dl == 11) strcpy(dir, "."); else dir[dl - 12] = 0;
        }
    }
    /* a transformed evaluation must not overwrite the plain one: its label joins the name */
    char tag[160] = "";
    if (st_transform_active(&rep->xf)) {
        tag[0] = '_';
        st_transform_label(&rep->xf, tag + 1, sizeof tag - 1);
        for (char *p = tag + 1; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') *p = '_';
    }
    snprintf(out, n, "%s/eval_%s_%s%s%s.json", dir, st_eval_split_name(rep->split), st_eval_mode_name(rep->mode), tag,
             stem);
}

int cmd_eval(int argc, char **argv) {
    const char *src = NULL, *json = NULL;
    int threads = -1, quiet = 0;
    st_eval_plan plan;
    st_eval_plan_default(&plan);
    /* transform options: given ones override the run's eval.* keys, the rest stay -1 */
    st_transform xf = {.kind = -1, .scale = -1, .sinks = -1, .window = -1, .clip = -1};
    int xf_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { printf("usage: stretch %s\n", usage_text); return 0; }
        if (!strcmp(a, "--quiet")) { quiet = 1; continue; }
        if (a[0] != '-' || a[1] == 0) {
            if (src) return cli_usage("eval", "unexpected argument '%s' (one RUN_DIR or CHECKPOINT)", a);
            src = a;
            continue;
        }
        if (!v) return cli_usage("eval", "%s needs a value", a);
        i++;
        int xrc;
        if (cli_transform_arg("eval", a, v, &xf, &xrc)) {
            if (xrc) return xrc;
            xf_given = 1;
            continue;
        }
        if (!strcmp(a, "--lengths")) {
            if (!parse_lengths(v, &plan))
                return cli_usage("eval", "--lengths '%s': expected positive integers 'A,B,...' or a doubling range 'A..B' "
                                 "(at most %d lengths)", v, ST_EVAL_MAX_LENGTHS);
        } else if (!strcmp(a, "--split")) {
            if (!strcmp(v, "valid")) plan.split = ST_SPLIT_VALID;
            else if (!strcmp(v, "test")) plan.split = ST_SPLIT_TEST;
            else return cli_usage("eval", "--split '%s': expected valid or test", v);
        } else if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "nonoverlapping")) plan.mode = ST_EVAL_NONOVERLAPPING;
            else if (!strcmp(v, "sliding")) plan.mode = ST_EVAL_SLIDING;
            else return cli_usage("eval", "--mode '%s': expected nonoverlapping or sliding", v);
        } else if (!strcmp(a, "--stride")) {
            if (!parse_i64(v, &x) || x < 1) return cli_usage("eval", "--stride '%s': expected an integer >= 1", v);
            plan.stride = x;
        } else if (!strcmp(a, "--max-tokens")) {
            if (!parse_i64(v, &x) || x < 0) return cli_usage("eval", "--max-tokens '%s': expected an integer >= 0 (0 = all)", v);
            plan.max_tokens = x;
        } else if (!strcmp(a, "--batch-tokens")) {
            if (!parse_i64(v, &x) || x < 1) return cli_usage("eval", "--batch-tokens '%s': expected an integer >= 1", v);
            plan.opts.batch_tokens = x;
        } else if (!strcmp(a, "--buckets")) {
            if (!parse_i64(v, &x) || x < 0 || x > 1 << 20) return cli_usage("eval", "--buckets '%s': expected an integer in [0, 1048576]", v);
            plan.buckets = (int)x;
        } else if (!strcmp(a, "--bucket-scale")) {
            if (!strcmp(v, "linear")) plan.opts.bucket_scale = ST_BUCKETS_LINEAR;
            else if (!strcmp(v, "log2")) plan.opts.bucket_scale = ST_BUCKETS_LOG2;
            else return cli_usage("eval", "--bucket-scale '%s': expected linear or log2", v);
        } else if (!strcmp(a, "--json")) {
            json = v;
        } else if (!strcmp(a, "--threads")) {
            if (!parse_i64(v, &x) || x < 0 || x > 4096) return cli_usage("eval", "--threads '%s': expected an integer >= 0 (0 = all cores)", v);
            threads = (int)x;
        } else {
            return cli_usage("eval", "unknown option '%s'", a);
        }
    }
    if (!src) return cli_usage("eval", "missing RUN_DIR or CHECKPOINT");
    if (xf_given) {
        plan.transform = xf.kind;
        plan.transform_scale = xf.scale;
        plan.sinks = xf.sinks;
        plan.window = xf.window;
        plan.clip = xf.clip;
    }
    /* a stride only makes sense for sliding windows: reject it up front when the user
     * also chose nonoverlapping (when the mode comes from the config, the plan check does) */
    if (plan.stride > 0 && plan.mode == ST_EVAL_NONOVERLAPPING)
        return cli_usage("eval", "--stride applies to --mode sliding only");
    if (plan.stride > 0 && plan.mode < 0) plan.mode = ST_EVAL_SLIDING;
    struct stat st;
    st_error e = {0};
    if (stat(src, &st) != 0) {
        st_fail(&e, ST_ERR_IO, "%s: no such run directory or checkpoint", src);
        return cli_report(&e);
    }
    if (threads >= 0) st_set_threads(threads);
    if (!quiet) plan.opts.progress_every = 30.0;

    st_eval_report *rep = calloc(1, sizeof *rep);
    if (!rep) { st_fail(&e, ST_ERR_MEMORY, "eval: out of memory"); return cli_report(&e); }
    int rc = st_eval_checkpoint(src, &plan, rep, &e);
    if (rep->n > 0) st_eval_report_print(rep, stdout);
    fflush(stdout);
    if (rc) {
        st_eval_report_free(rep);
        free(rep);
        return cli_report(&e);
    }
    char path[1200];
    if (json) snprintf(path, sizeof path, "%s", json);
    else default_json_path(src, S_ISDIR(st.st_mode), rep, path, sizeof path);
    rc = st_eval_report_save(rep, path, &e);
    if (!rc && !quiet) fprintf(stderr, "stretch eval: wrote %s\n", path);
    int failed_rows = 0;
    for (int i = 0; i < rep->n; i++) failed_rows += rep->rows[i].status != ST_OK;
    if (!rc && failed_rows)
        fprintf(stderr, "stretch eval: %d of %d lengths could not be evaluated (see the error rows)\n", failed_rows, rep->n);
    st_eval_report_free(rep);
    free(rep);
    return rc ? cli_report(&e) : 0;
}
