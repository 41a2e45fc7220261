/* cmd_extend.c - `stretch extend RUN --to N`: context extension by fine-tuning
 * (docs/extension.md). A new run that starts from RUN's latest weights (train.init_from),
 * trains at train.seq_len N with its own steps, warmup and learning rate, and, with
 * --transform, a trained position scaling (model.scaling.*: PI, NTK, YaRN or ALiBi
 * interpolation at s = N / L, L = the base run's training length). The new run is an
 * ordinary run directory: `stretch train --resume OUT` continues it bit for bit, and
 * OUT/init_from.json records the checkpoint it came from.
 *
 * The command only writes overrides onto RUN's config (flags first, then --set), so every
 * value is checked by the config table and a bad one is named by its key, and by the flag
 * it came from (blame_flags). */
#include "cli/cli.h"
#include "st_train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS 256
#define SET_LEN (ST_PATH_BUF + 64)

static void help(void) {
    printf("usage: stretch extend RUN_DIR --to N (--steps K | --budget F) [--transform NAME] [--scale S]\n"
           "                      [--batch B] [--lr X] [--warmup W] [--out DIR] [--force] [--set k=v ...]\n\n"
           "Fine-tune RUN_DIR's latest weights at train.seq_len N (context extension, docs/extension.md).\n"
           "  --to N          the new training length; longer than RUN_DIR's train.seq_len\n"
           "  --steps K       fine-tuning steps (0: the base weights under the new keys, a baseline), or\n"
           "  --budget F      a fraction of RUN_DIR's training tokens (0.05 = 5%%; those of the steps its\n"
           "                  latest checkpoint trained): K = F x its tokens /\n"
           "                  (B x grad_accum x N x ranks), at least 1\n"
           "  --transform T   none (plain fine-tuning, default), pi, ntk, yarn (model.pos rope) or alibi_interp\n"
           "                  (model.pos alibi): stored as model.scaling.*, applied in training and evaluation\n"
           "  --scale S       the scaling factor (default N / L, L = the base run's training length)\n"
           "  --batch B       sequences per micro-batch (default: RUN_DIR's batch_size x seq_len / N, at\n"
           "                  least 1; its grad_accum stays, so an update holds about its tokens)\n"
           "  --lr X          peak learning rate (default RUN_DIR's train.optimizer.lr)\n"
           "  --warmup W      warmup steps (default K / 10; at least 1 with schedule inv_sqrt)\n"
           "  --out DIR       run directory (default RUN_DIR-to<N>[-<transform>] beside RUN_DIR; required\n"
           "                  when RUN_DIR ends in . or ..)\n"
           "  --force, --quiet, --stop-after N, --set k=v: as for stretch train\n"
           "Resume with: stretch train --resume DIR. Exit codes as stretch train.\n");
}

typedef struct extend_args {
    const char *run, *out, *transform;
    int64_t to, steps, batch, warmup;
    double budget, scale, lr;
    int grad_accum;       /* 0: RUN's; set when a --set changes it (--budget counts it) */
    int64_t base_steps, base_ranks;   /* what RUN's latest checkpoint trained (base_checkpoint) */
    const char *sets[MAX_SETS];
    int n_sets;
    st_train_opts opts;
} extend_args;

/* The flags that take a value. */
static const char *const valued[] = {"--to", "--steps", "--budget", "--scale", "--batch", "--lr", "--warmup",
                                     "--transform", "--stop-after", "--out", "-o", "--set", NULL};

/* The user's --set that assigns the key of assignment `set` ("train.seq_len" or
 * "train.seq_len=..."), NULL when none does. */
static const char *user_set(const extend_args *a, const char *set) {
    const size_t n = strcspn(set, "=");
    for (int i = 0; i < a->n_sets; i++)
        if (strcspn(a->sets[i], "=") == n && !strncmp(a->sets[i], set, n)) return a->sets[i];
    return NULL;
}

/* A range error states the whole range: "--batch 2000000: integer >= 1 expected" named a
 * rule the value keeps (the bound is train.batch_size's 2^20). */
static int parse(int argc, char **argv, extend_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { help(); return -1; }
        if (!strcmp(f, "--force")) { a->opts.force = 1; continue; }
        if (!strcmp(f, "--quiet") || !strcmp(f, "-q")) { a->opts.quiet = 1; continue; }
        if (f[0] != '-') {
            if (a->run) return cli_usage("extend", "unexpected argument '%s'", f);
            a->run = f;
            if (cli_path_arg("extend", "RUN_DIR", f)) return ST_ERR_CONFIG;
            continue;
        }
        int rc = cli_flag_value("extend", valued, argc, argv, &i, &v);
        if (rc) return rc;
        if (!v) return cli_usage("extend", "unknown option '%s'", f);
        if (!strcmp(f, "--to")) { if (!cli_int_arg(v, 1, 1 << 24, &a->to)) return cli_usage("extend", "--to '%s': integer in [1, 16777216] expected", v); }
        else if (!strcmp(f, "--steps")) { if (!cli_int_arg(v, 0, (int64_t)1e12, &a->steps)) return cli_usage("extend", "--steps '%s': integer in [0, 1e12] expected (as train.steps)", v); }
        else if (!strcmp(f, "--budget")) { if (!cli_num_arg(v, 1e-9, 1e6, &a->budget)) return cli_usage("extend", "--budget '%s': a fraction in (0, 1e6] of the base run's tokens expected", v); }
        else if (!strcmp(f, "--scale")) { if (!cli_num_arg(v, 1.0, 1e6, &a->scale)) return cli_usage("extend", "--scale '%s': a number in [1, 1e6] expected", v); }
        else if (!strcmp(f, "--batch")) { if (!cli_int_arg(v, 1, 1 << 20, &a->batch)) return cli_usage("extend", "--batch '%s': integer in [1, 1048576] expected (as train.batch_size)", v); }
        else if (!strcmp(f, "--lr")) { if ((rc = cli_key_arg("extend", f, v, "train.optimizer.lr", NULL, &a->lr))) return rc; }
        else if (!strcmp(f, "--warmup")) { if (!cli_int_arg(v, 0, (int64_t)1e12, &a->warmup)) return cli_usage("extend", "--warmup '%s': integer in [0, 1e12] expected (as train.schedule.warmup)", v); }
        else if (!strcmp(f, "--transform")) a->transform = v;
        else if (!strcmp(f, "--stop-after")) { if (!cli_int_arg(v, 1, INT64_MAX, &a->opts.stop_after)) return cli_usage("extend", "--stop-after needs a step number >= 1"); }
        else if (!strcmp(f, "--out") || !strcmp(f, "-o")) { a->out = v; if ((rc = cli_out_dir_arg("extend", f, v))) return rc; }
        else if (!strcmp(f, "--set")) {
            if (a->n_sets == MAX_SETS) return cli_usage("extend", "too many --set options (max %d)", MAX_SETS);
            a->sets[a->n_sets++] = v;
        } else return cli_usage("extend", "unknown option '%s'", f);
    }
    /* the new run's length is what extend is for: --to sets it, and a --set of it would
     * train another length than the one the plan (scale, steps, log) was made for */
    const char *len_set = user_set(a, "train.seq_len");
    if (len_set) return cli_usage("extend", "--set %s: the extended run's train.seq_len is --to N", len_set);
    /* likewise the scaling: --transform and --scale set its three keys together (a --set
     * of one would leave the others at the plan's values, e.g. pi at scale 1); YaRN's
     * ramp keys have no flag and stay --set's */
    static const char *const scaling_keys[] = {"model.scaling.transform", "model.scaling.scale", "model.scaling.train_len"};
    for (int k = 0; k < 3; k++) {
        const char *sc = user_set(a, scaling_keys[k]);
        if (sc) return cli_usage("extend", "--set %s: the extended run's scaling is --transform NAME [--scale S]", sc);
    }
    if (!a->run) return cli_usage("extend", "needs the base run directory");
    if (a->to == 0) return cli_usage("extend", "needs --to N (the new training length)");
    if ((a->steps >= 0) == (a->budget > 0)) return cli_usage("extend", "give one of --steps K or --budget F");
    if (a->scale > 0 && (!a->transform || !strcmp(a->transform, "none")))
        return cli_usage("extend", "--scale needs --transform (pi, ntk, yarn or alibi_interp)");
    return ST_OK;
}

/* The assignments the flags make on RUN's config, each with the flag it comes from (NULL:
 * implied), so that an error in one names that flag rather than "--set" or RUN's file. */
typedef struct overrides {
    char set[16][SET_LEN];
    const char *by[16];
    int n;
    int64_t L;            /* the length the base model was first trained at */
    const char *xf;       /* --transform; "none" by default */
    int scaled;           /* xf is not "none" */
    double base_tokens;   /* the base run's training tokens (--budget's unit) */
    int64_t B;            /* the planned train.batch_size */
    int grad_accum;       /* the train.grad_accum the budget divided by */
} overrides;

static void add(overrides *o, const char *by, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(overrides *o, const char *by, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->set[o->n], SET_LEN, fmt, ap);
    va_end(ap);
    o->by[o->n++] = by;
}

/* RUN's latest checkpoint, read once. What it trained: its step (a->base_steps) on its
 * ranks (a->base_ranks); its tokens were steps x batch x seq_len x grad_accum x ranks, so a
 * run stopped short of its train.steps counts the steps it did. Unreadable (train.init_from
 * then says why): train.steps on 1 rank. Its config: the weights come from it, the plan
 * from RUN's config.json, so a checkpoint whose model or data differ (a file copied in from
 * another run, an extension's) would be extended under the wrong plan (its length, its
 * scaling); it is refused as `train --resume` refuses it. */
static int base_checkpoint(extend_args *a, const char *path, const st_run_config *base, st_error *e) {
    char ckpt[ST_PATH_BUF], diff[1200];
    st_error le = {0};
    st_train_state st;
    a->base_steps = base->train.steps;
    a->base_ranks = 1;
    st_run_config *ck = malloc(sizeof *ck);
    if (!ck) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    int rc = ST_OK;
    if (!st_checkpoint_resolve(a->run, ckpt, sizeof ckpt, &le) && !st_checkpoint_load(ckpt, ck, NULL, 0, &st, &le)) {
        a->base_steps = st.step;
        a->base_ranks = st.world_size > 1 ? st.world_size : 1;
        if (st_run_config_diff(ck, base, "model", diff, sizeof diff) || st_run_config_diff(ck, base, "data", diff, sizeof diff))
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: checkpoint does not match the run config (%s): %s (checkpoint vs "
                         "config)", ckpt, path, diff);
    }
    free(ck);
    return rc;
}

/* The extended run's schedule is inv_sqrt (RUN's kind after the user's --sets, applied in
 * order by the config's own parser, as the load will: the config with a warmup of 0 would
 * not load to tell), whose lr divides by warmup. A --set that does not parse leaves the
 * kind as it was here; the load reports it. */
static int inv_sqrt(const extend_args *a, const st_run_config *base) {
    st_run_config *c = malloc(sizeof *c);   /* large: paths */
    if (!c) st_oom_exit("extend's schedule", sizeof *c);
    *c = *base;
    for (int i = 0; i < a->n_sets; i++) {
        st_error ignored = {0};
        st_run_config_set(c, a->sets[i], &ignored);
    }
    const int yes = c->train.sched.kind == ST_SCHED_INV_SQRT;
    free(c);
    return yes;
}

/* The flags' assignments on RUN's config `base` (its train section: bt); the new run
 * trains on `ranks` ranks (each step: batch x ranks sequences). */
static void plan(const extend_args *a, const st_run_config *base, int64_t ranks, overrides *o) {
    const st_train_config *bt = &base->train;
    /* L: the length the model was first trained at (a scaled base keeps its own; one
     * trained with a scaling from the start, train_len 0, was first trained at seq_len) */
    o->L = base->model.scaling && base->model.scaling_len > 0 ? base->model.scaling_len : bt->seq_len;
    const int64_t per_step = (int64_t)bt->batch_size * bt->seq_len / a->to;
    const int64_t B = a->batch > 0 ? a->batch : (per_step > 0 ? per_step : 1);
    o->base_tokens = (double)a->base_steps * bt->batch_size * bt->seq_len * bt->grad_accum * (double)a->base_ranks;
    int64_t K = a->steps;   /* 0: the base weights with the scaling, as checkpoint step 0 */
    o->B = B;
    o->grad_accum = a->grad_accum > 0 ? a->grad_accum : bt->grad_accum;
    if (a->budget > 0) {
        K = (int64_t)llround(a->budget * o->base_tokens / ((double)B * (double)a->to * o->grad_accum * (double)ranks));
        if (K < 1) K = 1;
    }
    const char *by_steps = a->budget > 0 ? "--budget" : "--steps";
    o->xf = a->transform ? a->transform : "none";
    o->scaled = strcmp(o->xf, "none") != 0;
    const double s = a->scale > 0 ? a->scale : (double)a->to / (double)o->L;
    o->n = 0;
    add(o, NULL, "train.init_from=%s", a->run);
    add(o, "--to", "train.seq_len=%lld", (long long)a->to);
    add(o, a->batch > 0 ? "--batch" : "--to", "train.batch_size=%lld", (long long)B);
    add(o, by_steps, "train.steps=%lld", (long long)K);
    /* the default: a tenth of the steps, at least 1 for inv_sqrt (its lr divides by it) */
    int64_t warm = K / 10;
    if (warm < 1 && inv_sqrt(a, base)) warm = 1;
    add(o, a->warmup >= 0 ? "--warmup" : "--warmup (default: steps / 10)", "train.schedule.warmup=%lld",
        (long long)(a->warmup >= 0 ? a->warmup : warm));
    if (a->lr > 0) add(o, "--lr", "train.optimizer.lr=%.17g", a->lr);
    add(o, "--transform", "model.scaling.transform=%s", o->xf);
    add(o, a->scale > 0 ? "--scale" : "--to", "model.scaling.scale=%.17g", o->scaled ? s : 1.0);
    add(o, NULL, "model.scaling.train_len=%lld", o->scaled ? (long long)o->L : 0LL);
}


/* A config error of the extended run (e, from loading or training). The loader places it
 * at "--set KEY" or at RUN/config.json, neither of which the user wrote when the value
 * came from a flag: an error that names keys the flags assigned (and no --set of the
 * user's did) is told as theirs, e.g. "--steps, --warmup: train.schedule.warmup: 5
 * exceeds train.steps (2)", and so is one naming a key of the user's own --set
 * ("--set train.seq_len=16: ..."; st_config_blame) unless RUN's config with the flags
 * alone gives the same error. Other errors stay as they are. */
static void blame_flags(const extend_args *a, const char *path, const overrides *o, st_error *e) {
    char flags[160] = "";
    int named[16];
    for (int i = 0; i < o->n; i++) {
        named[i] = o->by[i] && st_config_names_key(e->msg, o->set[i]) && !user_set(a, o->set[i]);
        for (int j = 0; j < i && named[i]; j++) named[i] = !(named[j] && !strcmp(o->by[j], o->by[i]));   /* once */
        if (named[i]) snprintf(flags + strlen(flags), sizeof flags - strlen(flags), "%s%s", flags[0] ? ", " : "", o->by[i]);
    }
    /* and the user's own --set values, unless the flags alone give the same error */
    const char *flag_sets[16];
    for (int i = 0; i < o->n; i++) flag_sets[i] = o->set[i];
    st_error alone = {0};
    if (a->n_sets > 0) st_run_config_error(path, NULL, flag_sets, o->n, &alone);
    st_config_blame(e, path, a->sets, a->n_sets, "--set ", flags, &alone);
}

/* RUN-to<N>[-<transform>] beside RUN. Trailing slashes are dropped: "run/" must not put
 * the new run inside the base one, named "-to<N>". A RUN whose last component is "." or
 * ".." (or "/") names no directory to put it beside: --out is required then. */
static int default_out(const extend_args *a, const overrides *o, char *dir, size_t n) {
    size_t len = strlen(a->run);
    while (len > 1 && a->run[len - 1] == '/') len--;
    const char *name = a->run + len;
    while (name > a->run && name[-1] != '/') name--;
    const size_t nl = (size_t)(a->run + len - name);
    if (nl == 0 || (nl == 1 && name[0] == '.') || (nl == 2 && !strncmp(name, "..", 2)))
        return cli_usage("extend", "RUN_DIR '%s' has no name to derive the new run's from (RUN_DIR-to%lld); give "
                         "--out DIR", a->run, (long long)a->to);
    snprintf(dir, n, "%.*s-to%lld%s%s", (int)len, a->run, (long long)a->to, o->scaled ? "-" : "",
             o->scaled ? o->xf : "");
    return ST_OK;
}

int cmd_extend(int argc, char **argv, st_dist *dist) {
    extend_args a = {.warmup = -1, .steps = -1};
    a.opts.dist = dist;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    st_error e = {0};
    char path[ST_PATH_BUF], dir[ST_PATH_BUF];
    snprintf(path, sizeof path, "%s/config.json", a.run);
    st_run_config *base = malloc(sizeof *base), *cfg = malloc(sizeof *cfg);
    overrides *o = malloc(sizeof *o);
    const char **sets = calloc(MAX_SETS + 16, sizeof *sets);
    if (!base || !cfg || !o || !sets) { rc = st_fail(&e, ST_ERR_MEMORY, "out of memory"); goto out; }
    /* an export's config.json loads like a run's; its weights are no checkpoint to extend
     * (the init_from message would advise naming its model.safetensors, which extend cannot) */
    if (st_rundir_is_export(a.run)) {
        rc = st_fail(&e, ST_ERR_IO, "%s: an export (model.safetensors, no checkpoints/), not a run: extend fine-tunes "
                     "a run directory's latest checkpoint (from an export's weights: stretch train CONFIG --set "
                     "train.init_from=%s/model.safetensors --set train.seq_len=N)", a.run, a.run);
        goto out;
    }
    if ((rc = st_run_config_load(path, NULL, 0, base, &e))) {
        if (rc == ST_ERR_IO) st_fail(&e, ST_ERR_IO, "%s: not a run directory (no readable config.json)", a.run);
        goto out;
    }
    if (a.to <= base->train.seq_len) {
        rc = cli_usage("extend", "--to %lld: must be longer than the base run's train.seq_len %d (%s)", (long long)a.to,
                       base->train.seq_len, path);
        goto out;
    }
    if ((rc = base_checkpoint(&a, path, base, &e))) goto out;
    const int64_t ranks = st_dist_size(dist);
    plan(&a, base, ranks, o);
    if (a.out) snprintf(dir, sizeof dir, "%s", a.out);
    else if ((rc = default_out(&a, o, dir, sizeof dir)) ||
             (rc = cli_dir_arg("extend", "--out (not given: RUN_DIR-to<N>)", dir)))
        goto out;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < o->n; i++) sets[i] = o->set[i];
        for (int i = 0; i < a.n_sets; i++) sets[o->n + i] = a.sets[i];
        if ((rc = st_run_config_load(path, sets, o->n + a.n_sets, cfg, &e))) {
            if (rc == ST_ERR_CONFIG) blame_flags(&a, path, o, &e);
            goto out;
        }
        /* --budget counts tokens: a --set of the batch or of grad_accum changes the tokens
         * per step, so the steps are planned again with the values the run will have */
        if (pass || a.budget <= 0 || (cfg->train.batch_size == o->B && cfg->train.grad_accum == o->grad_accum)) break;
        a.batch = cfg->train.batch_size;
        a.grad_accum = cfg->train.grad_accum;
        plan(&a, base, ranks, o);
    }
    if (a.budget > 0 && a.base_steps < base->train.steps && st_dist_rank(dist) == 0)
        st_log(ST_LOG_WARN, "%s stopped at step %lld of its train.steps %lld: --budget %g counts the tokens of the "
               "steps it trained", a.run, (long long)a.base_steps, (long long)base->train.steps, a.budget);
    /* a base trained with a scaling: the extension replaces it with --transform's (none by
     * default), which changes the model's function even at step 0; say so */
    if (base->model.scaling != ST_XF_NONE && cfg->model.scaling != base->model.scaling && st_dist_rank(dist) == 0)
        st_log(ST_LOG_WARN, "%s was trained with model.scaling.transform %s (scale %g); this extension uses %s%s: "
               "give --transform %s to keep it", a.run, st_transform_name(base->model.scaling),
               base->model.scaling_scale, st_transform_name(cfg->model.scaling),
               cfg->model.scaling == ST_XF_NONE ? " (plain fine-tuning, the scaling dropped)" : "",
               st_transform_name(base->model.scaling));
    if (!a.opts.quiet && st_dist_rank(dist) == 0) {
        char per_rank[32] = "", accum[32] = "";
        if (ranks > 1) snprintf(per_rank, sizeof per_rank, " x %lld ranks", (long long)ranks);
        if (cfg->train.grad_accum > 1) snprintf(accum, sizeof accum, " x %d", cfg->train.grad_accum);
        st_log(ST_LOG_INFO, "extending %s (L = %lld) to %lld tokens: %s%s, %lld steps of %lld%s x %lld tokens%s (%.1f%% "
               "of the base run's tokens) -> %s", a.run, (long long)o->L, (long long)a.to, o->xf,
               o->scaled ? " scaling" : " (plain fine-tuning)", (long long)cfg->train.steps,
               (long long)cfg->train.batch_size, accum, (long long)a.to, per_rank,
               100.0 * (double)cfg->train.steps * cfg->train.batch_size * a.to * cfg->train.grad_accum * (double)ranks /
                   o->base_tokens, dir);
    }
    rc = st_train(cfg, dir, &a.opts, NULL, &e);
    /* e.g. --to longer than the data; a step too large for memory names its keys, which
     * --to and --batch set ("train.batch_size 1 x train.seq_len 32768 ... needs 40 GiB") */
    if (rc == ST_ERR_CONFIG || rc == ST_ERR_MEMORY) blame_flags(&a, path, o, &e);
    /* extend sets train.init_from itself: a base checkpoint that cannot be read is the base
     * run's, not a key of RUN/config.json (which has none) */
    char prefix[ST_PATH_BUF + 32];
    snprintf(prefix, sizeof prefix, "%s: train.init_from: ", path);
    if (rc && rc != ST_ERR_CONFIG && !strncmp(e.msg, prefix, strlen(prefix))) {
        char why[sizeof e.msg];
        snprintf(why, sizeof why, "%s", e.msg + strlen(prefix));
        st_fail(&e, rc, "%s: the base run's checkpoint: %s", a.run, why);
    }
    if (rc == ST_ERR_INTERRUPTED) {
        if (st_dist_rank(dist) == 0) cli_report("extend", &e);
        goto done;
    }
out:
    if (rc && e.code) rc = cli_report("extend", &e);
done:
    free(base);
    free(cfg);
    free(o);
    free(sets);
    return rc;
}
