/* sweep_run.c - `stretch sweep`: train and evaluate every point of a sweep, skipping the
 * finished ones and resuming interrupted trainings, then write the result tables.
 *
 * Per point, in OUT/<name>/ (a normal run dir, so `stretch eval` and `stretch train
 * --resume` work on it too):
 *   sweep_done.json      the marker, written last: {"config_hash", "eval_plan", "train":
 *                        {...}, "checkpoint": {"file", "step", "crc32"}, "report": <the
 *                        eval report>}. A point whose marker matches the point's config
 *                        hash and the sweep's eval plan, and whose run still holds the
 *                        checkpoint it names (sweep_io.c), is skipped.
 *   checkpoints/latest   training state: if present and short of train.steps, training
 *                        resumes from it (st_train with resume); if complete, only the
 *                        evaluation runs. config.json without a checkpoint (a run that
 *                        died first) restarts from step 0 through the same resume path.
 *   eval_<split>_<mode>.json   the evaluation report (same as `stretch eval`). */
#include "sweep_internal.h"
#include "st_dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void path_join(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

/* Compare the run dir's config with the point's, up to derived vocab size, threads and the
 * time budget. Returns 1 (same), 0 (differs: diff names the first key) or -1 (unreadable:
 * diff has the reason). A semantic comparison, so a key added to the schema since the run
 * (saved configs lack it and load with its default) does not make an old run "different". */
static int same_config(const sweep_point *pt, char *diff, size_t n) {
    char path[ST_PATH_BUF];
    path_join(path, sizeof path, pt->dir, "config.json");
    st_run_config *saved = malloc(sizeof *saved), *mine = malloc(sizeof *mine);
    int same = -1;
    st_error le = {0};
    if (!saved || !mine) snprintf(diff, n, "out of memory");
    else if (st_run_config_load(path, NULL, 0, saved, &le)) snprintf(diff, n, "%.900s", le.msg);   /* a summary line */
    else {
        *mine = pt->cfg;
        if (mine->model.vocab_size == 0) mine->model.vocab_size = saved->model.vocab_size;
        mine->train.threads = saved->train.threads;
        mine->train.max_seconds = saved->train.max_seconds;
        static const char *const sections[] = {"model", "data", "train"};
        same = 1;
        for (int i = 0; i < 3 && same; i++)
            if (st_run_config_diff(saved, mine, sections[i], diff, n)) same = 0;
    }
    free(saved);
    free(mine);
    return same;
}

/* The run dir's config must be the point's; anything else means OUT holds some other
 * experiment. */
static int check_same_run(const sweep *s, const sweep_point *pt, st_error *e) {
    char diff[1100];
    int same = same_config(pt, diff, sizeof diff);
    if (same < 0)
        return st_fail(e, ST_ERR_IO, "%s: point %s: %s holds an unreadable run (%s); delete it or choose another out",
                       s->file, pt->name, pt->dir, diff);
    /* a run trained again with other keys after the sweep evaluated it: say so, its
     * marker is why the user may think it is the sweep's */
    if (!same)
        return st_fail(e, ST_ERR_CONFIG, "%s: point %s: %s holds a run of a different config (%s: run vs sweep)%s%s; "
                       "delete it or choose another out", s->file, pt->name, pt->dir, diff,
                       pt->changed[0] ? "; " : "", pt->changed);
    return ST_OK;
}

/* The point's eval plan: the sweep's "eval" section over the runs' own eval keys, and over
 * both a variant's or grid's eval.* keys (the more specific setting wins: a sweep can
 * evaluate "alibi" nonoverlapping and "alibi-sliding" sliding). The transform keys come
 * from the point's config (the eval section has none: its variant's or grid's eval.*
 * keys are in that config); the others left -1 here (the plan as signed) eval_point
 * resolves from the point's config too. */
static void point_plan(const sweep *s, const sweep_point *pt, st_eval_plan *plan) {
    const st_eval_config *c = &pt->cfg.eval;
    *plan = s->plan;
    for (const cJSON *o = pt->overrides ? pt->overrides->child : NULL; o; o = o->next) {
        const char *k = o->string;
        if (!strcmp(k, "eval.lengths")) {
            plan->n_lengths = c->n_lengths;
            memcpy(plan->lengths, c->lengths, sizeof plan->lengths);
        }
        else if (!strcmp(k, "eval.split")) plan->split = c->split;
        else if (!strcmp(k, "eval.mode")) plan->mode = c->mode;
        else if (!strcmp(k, "eval.stride")) plan->stride = c->stride;
        else if (!strcmp(k, "eval.max_tokens")) plan->max_tokens = c->max_tokens;
        else if (!strcmp(k, "eval.buckets")) plan->buckets = c->buckets;
    }
    /* a stride means nothing to a point evaluated nonoverlapping, whether its mode is the
     * plan's or the run's own: a variant's eval.stride alone is, as in a run's config, the
     * stride a sliding evaluation of it would take (configs/README.md) */
    const int mode = plan->mode >= 0 ? plan->mode : c->mode;
    if (mode == ST_EVAL_NONOVERLAPPING && plan->stride > 0) plan->stride = 0;
    st_eval_plan_resolve_transform(plan, c);
    plan->from_config = 1;   /* the transform keys are the point's config's, not flags */
    /* attention statistics: the sweep's, else the point's or its run's eval.attn_stats (over
     * the scored rows, in either protocol) */
    if (!plan->opts.attn_stats) plan->opts.attn_stats = c->attn_stats;
}

/* What the plan leaves to the run's own eval section (set by the sweep's base config or
 * its "set") and that differs from the defaults: those keys decide the evaluation too
 * (suite.c resolves them), so they join the signature; a sweep whose runs keep the
 * default eval keys signs as before. */
static void run_eval_sig(const st_eval_plan *p, const st_eval_config *c, char *out, size_t n) {
    st_run_config *d = malloc(sizeof *d);
    if (!d) return;
    st_run_config_default(d);
    const st_eval_config *c0 = &d->eval;
    int o = 0;
#define RUN_KEY(cond, ...) \
    if ((cond) && o < (int)n) o += snprintf(out + o, n - (size_t)o, __VA_ARGS__)
    if (p->n_lengths == 0 && (c->n_lengths != c0->n_lengths || memcmp(c->lengths, c0->lengths, sizeof c->lengths))) {
        RUN_KEY(1, ";run lengths=");
        for (int i = 0; i < c->n_lengths; i++) RUN_KEY(1, "%s%lld", i ? "," : "", (long long)c->lengths[i]);
    }
    RUN_KEY(p->split < 0 && c->split != c0->split, ";run split=%d", c->split);
    RUN_KEY(p->mode < 0 && c->mode != c0->mode, ";run mode=%d", c->mode);
    RUN_KEY(p->stride < 0 && c->stride != c0->stride, ";run stride=%lld", (long long)c->stride);
    RUN_KEY(p->max_tokens < 0 && c->max_tokens != c0->max_tokens, ";run max_tokens=%lld", (long long)c->max_tokens);
    RUN_KEY(p->buckets < 0 && c->buckets != c0->buckets, ";run buckets=%d", c->buckets);
#undef RUN_KEY
    free(d);
}

/* The eval plan's signature for this point: the sweep's plan text, plus what the point
 * changes in it (its own eval.* keys: lengths, protocol, ..., inference-time transform),
 * so a changed plan evaluates again. Points that change nothing keep the sweep's text. */
static void point_plan_sig(const sweep *s, const sweep_point *pt, char *out, size_t n) {
    st_eval_plan p;
    point_plan(s, pt, &p);
    const st_eval_plan *q = &s->plan;
    int o = snprintf(out, n, "%s", s->plan_sig);
    if (p.n_lengths != q->n_lengths || memcmp(p.lengths, q->lengths, sizeof p.lengths) != 0) {
        o += snprintf(out + o, n - (size_t)o, ";point lengths=");
        for (int i = 0; i < p.n_lengths && o < (int)n; i++)
            o += snprintf(out + o, n - (size_t)o, "%s%lld", i ? "," : "", (long long)p.lengths[i]);
    }
    if (o < (int)n && (p.split != q->split || p.mode != q->mode || p.stride != q->stride ||
                       p.max_tokens != q->max_tokens || p.buckets != q->buckets))
        o += snprintf(out + o, n - (size_t)o, ";point split=%d;mode=%d;stride=%lld;max_tokens=%lld;buckets=%d",
                      p.split, p.mode, (long long)p.stride, (long long)p.max_tokens, p.buckets);
    if (o < (int)n && (p.transform != 0 || p.window != 0))
        o += snprintf(out + o, n - (size_t)o, ";transform=%d;scale=%.17g;sinks=%lld;window=%lld;clip=%lld",
                      p.transform, p.transform_scale, (long long)p.sinks, (long long)p.window, (long long)p.clip);
    if (o < (int)n && p.positions == ST_SINK_POS_CACHE)   /* only when set: older markers stay valid */
        o += snprintf(out + o, n - (size_t)o, ";positions=cache");
    if (o < (int)n && p.block > 0) o += snprintf(out + o, n - (size_t)o, ";blockwise=%lld", (long long)p.block);
    if (o < (int)n && p.opts.attn_stats) o += snprintf(out + o, n - (size_t)o, ";attn_stats=1");
    if (o < (int)n) run_eval_sig(&p, &pt->cfg.eval, out + o, n - (size_t)o);
}

/* Marker of a finished point: matches when the eval plan does and the config is the
 * point's (same hash, or, for a marker written before a schema change altered the
 * canonical JSON, the same values key by key). Returns the parsed marker (caller owns) or
 * NULL. */
static cJSON *read_marker(const sweep *s, const sweep_point *pt, int *plan_differs) {
    char path[ST_PATH_BUF];
    path_join(path, sizeof path, pt->dir, "sweep_done.json");
    *plan_differs = 0;
    if (!st_sweep_exists(path)) return NULL;
    char *text = st_read_file(path, NULL, SWEEP_TEXT_MAX, NULL);
    cJSON *m = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(m, "config_hash");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "eval_plan");
    char diff[1100];
    if (!cJSON_IsString(h) || !cJSON_IsString(p) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "report")) ||
        (strcmp(h->valuestring, pt->config_hash) != 0 && same_config(pt, diff, sizeof diff) != 1)) {
        cJSON_Delete(m);
        return NULL;
    }
    char sig[sizeof s->plan_sig + 1280];
    point_plan_sig(s, pt, sig, sizeof sig);
    if (strcmp(p->valuestring, sig) != 0) { *plan_differs = 1; cJSON_Delete(m); return NULL; }
    return m;
}

static cJSON *train_summary(const st_train_state *st, const st_run_config *cfg) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)st->step);
    cJSON_AddNumberToObject(o, "steps", (double)cfg->train.steps);
    cJSON_AddNumberToObject(o, "seq_len", cfg->train.seq_len);
    cJSON_AddNumberToObject(o, "tokens", (double)st->tokens);
    cJSON_AddNumberToObject(o, "seconds", st->elapsed);
    if (isfinite(st->last_val)) cJSON_AddNumberToObject(o, "val_loss", st->last_val);
    else cJSON_AddNullToObject(o, "val_loss");
    if (isfinite(st->best_val)) cJSON_AddNumberToObject(o, "best_val", st->best_val);
    else cJSON_AddNullToObject(o, "best_val");
    return o;
}

/* Whether a training session that returned rc stopped before train.steps with its state
 * saved: train.max_seconds (rc ST_OK) or SIGINT/SIGTERM (ST_ERR_INTERRUPTED, a checkpoint
 * written): the point is incomplete, not failed; *at = its last step. */
static int stopped_early(int rc, const st_train_result *res, int64_t *at) {
    const int early = (!rc && res->stopped == 1) || (rc == ST_ERR_INTERRUPTED && res->stopped == 3);
    if (early) *at = res->step;
    return early;
}

/* Train (fresh or resumed) until train.steps. Returns ST_OK when training is complete,
 * with *incomplete set (and *at its last step) when it stopped early on train.max_seconds,
 * or ST_ERR_INTERRUPTED with *incomplete set after a signal that left a checkpoint. */
static int train_point(const sweep *s, sweep_point *pt, const st_sweep_opts *opts, int *incomplete, int64_t *at,
                       st_error *e) {
    char latest[ST_PATH_BUF], ckpt[ST_PATH_BUF], cfgp[ST_PATH_BUF];
    path_join(latest, sizeof latest, pt->dir, "checkpoints/latest");
    path_join(cfgp, sizeof cfgp, pt->dir, "config.json");
    *incomplete = 0;
    st_train_opts to = {0};
    to.quiet = opts && opts->quiet;
    /* sweep has no --force (a point's run is its to resume, not to replace) */
    to.occupied_advice = "a sweep point trains there: move or remove what it holds, or give the sweep another --out";
    st_run_config cfg = pt->cfg;
    if (s->threads > 0) cfg.train.threads = s->threads;
    int rc;
    /* a run with a checkpoint resumes; one that died before its first starts again from
     * step 0 the way `train --resume` does (the trainer's restart: the same init_from
     * checkpoint as its first start, RUN/init_from.json) */
    if (st_sweep_exists(latest) || st_sweep_exists(cfgp)) {
        if ((rc = check_same_run(s, pt, e))) return rc;
        if (st_sweep_exists(latest)) {
            st_train_state st;
            if ((rc = st_checkpoint_resolve(pt->dir, ckpt, sizeof ckpt, e))) return rc;
            if ((rc = st_checkpoint_load(ckpt, NULL, NULL, 0, &st, e))) return rc;
            if (st.step >= pt->cfg.train.steps) return ST_OK;
            st_log(ST_LOG_INFO, "sweep: %s: resuming training at step %lld of %lld", pt->name, (long long)st.step,
                   (long long)pt->cfg.train.steps);
        } else {
            st_log(ST_LOG_INFO, "sweep: %s: its run stopped before its first checkpoint: training it again from "
                   "step 0", pt->name);
        }
        to.resume = 1;
        /* the run dir's config.json (with the derived vocabulary size) drives the resume;
         * the thread count and the time budget are the sweep's (not part of the run's
         * identity) */
        st_run_config *saved = malloc(sizeof *saved);
        if (!saved) return st_fail(e, ST_ERR_MEMORY, "out of memory");
        if ((rc = st_run_config_load(cfgp, NULL, 0, saved, e))) { free(saved); return rc; }
        saved->train.threads = s->threads > 0 ? s->threads : pt->cfg.train.threads;
        saved->train.max_seconds = pt->cfg.train.max_seconds;
        st_train_result res = {0};
        rc = st_train(saved, pt->dir, &to, &res, e);
        free(saved);
        *incomplete = stopped_early(rc, &res, at);
        return rc;
    }
    st_log(ST_LOG_INFO, "sweep: %s: training %lld steps at L=%d", pt->name, (long long)pt->cfg.train.steps,
           pt->cfg.train.seq_len);
    st_train_result res = {0};
    rc = st_train(&cfg, pt->dir, &to, &res, e);
    *incomplete = stopped_early(rc, &res, at);
    return rc;
}

/* Points i and j train the same model: equal model, data and train sections (threads and
 * max_seconds are not part of a run's identity), so they differ in eval.* only. */
int st_sweep_same_model(const sweep *s, int i, int j) {
    st_run_config *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    static const char *const sections[] = {"model", "data", "train"};
    int same = a && b;
    if (same) {
        *a = s->points[j].cfg;
        *b = s->points[i].cfg;
        b->train.threads = a->train.threads;
        b->train.max_seconds = a->train.max_seconds;
    }
    for (int k = 0; k < 3 && same; k++) same = !st_run_config_diff(a, b, sections[k], NULL, 0);
    free(a);
    free(b);
    return same;
}

/* An earlier finished point whose model, data and train sections equal this one's (the
 * points differ in eval.* only, e.g. inference-time transforms): its run is evaluated
 * instead of training an identical copy. NULL: none. */
static const sweep_point *trained_twin(const sweep *s, int i) {
    for (int j = 0; j < i; j++) {
        const sweep_point *o = &s->points[j];
        if ((o->state == PT_DONE || o->state == PT_SKIPPED) && st_sweep_same_model(s, i, j)) return o;
    }
    return NULL;
}

static int eval_point(const sweep *s, sweep_point *pt, st_error *e) {
    st_eval_report *rep = calloc(1, sizeof *rep);
    if (!rep) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    if (s->threads > 0) st_set_threads(s->threads);
    else st_set_threads(pt->cfg.train.threads);
    int rc = strcmp(pt->train_dir, pt->dir) != 0 ? st_mkdirs(pt->dir, e) : ST_OK;
    /* the point's own plan (its eval.* keys), also when a twin's run is evaluated */
    st_eval_plan plan;
    point_plan(s, pt, &plan);
    /* the keys left to the run's eval section come from the point's config (base + set +
     * variant), not from the config saved in its run dir, the one it was trained with:
     * eval keys edited since then are the ones to evaluate with */
    if (!rc) rc = st_eval_plan_resolve(&plan, &pt->cfg, pt->dir, e);
    if (!rc) rc = st_eval_checkpoint(pt->train_dir, &plan, rep, e);
    if (rc && rep->n > 0) {
        /* the run is fine but no length applies to it (e.g. all beyond a learned-position
         * table): its rows say why; the tables show n/a */
        st_log(ST_LOG_WARN, "sweep: %s: no length could be evaluated: %s", pt->name, e ? e->msg : "");
        rc = ST_OK;
    }
    if (rc) { st_eval_report_free(rep); free(rep); return rc; }
    st_eval_report_print(rep, stdout);
    fflush(stdout);
    char path[ST_PATH_BUF], name[128];
    snprintf(name, sizeof name, "eval_%s_%s.json", st_eval_split_name(rep->split), st_eval_mode_name(rep->mode));
    path_join(path, sizeof path, pt->dir, name);
    rc = st_eval_report_save(rep, path, e);
    char *rj = rc ? NULL : st_eval_report_json(rep);
    st_train_state st;
    char ckpt[ST_PATH_BUF];
    if (!rc) rc = st_checkpoint_resolve(pt->train_dir, ckpt, sizeof ckpt, e);
    if (!rc) rc = st_checkpoint_load(ckpt, NULL, NULL, 0, &st, e);
    cJSON *m = NULL;
    if (!rc) {
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "name", pt->name);
        cJSON_AddStringToObject(m, "config_hash", pt->config_hash);
        if (strcmp(pt->train_dir, pt->dir) != 0) cJSON_AddStringToObject(m, "trained_in", pt->train_dir);
        char sig[sizeof s->plan_sig + 1280];
        point_plan_sig(s, pt, sig, sizeof sig);
        cJSON_AddStringToObject(m, "eval_plan", sig);
        cJSON_AddItemToObject(m, "train", train_summary(&st, &rep->cfg));
        /* which checkpoint this evaluated: a re-run trusts the marker only while the run
         * still holds it (sweep_io.c) */
        cJSON *id = st_sweep_ckpt_id(pt->train_dir, st.step);
        if (id) cJSON_AddItemToObject(m, "checkpoint", id);
        cJSON_AddItemToObject(m, "report", rj ? cJSON_Parse(rj) : cJSON_CreateNull());
        cJSON *task = NULL;
        if (!strcmp(pt->cfg.data.source, "task"))   /* task runs: accuracy by size too */
            rc = st_sweep_eval_task(s, pt, &plan, &task, e);
        else if (pt->cfg.data.pk_rate > 0)   /* text runs trained with passkeys: retrieval */
            rc = st_sweep_eval_passkey_text(s, pt, &plan, &task, e);
        if (task) cJSON_AddItemToObject(m, "task", task);
    }
    if (!rc) {
        char *text = st_json_print_exact(m, 1);
        path_join(path, sizeof path, pt->dir, "sweep_done.json");
        rc = text ? st_write_file_atomic(path, text, strlen(text), e) : st_fail(e, ST_ERR_MEMORY, "out of memory");
        free(text);
        if (!rc) { cJSON_Delete(pt->record); pt->record = m; m = NULL; }
    }
    cJSON_Delete(m);
    free(rj);
    st_eval_report_free(rep);
    free(rep);
    return rc;
}

/* Read point pt's marker into pt->record (NULL: not finished) and take the run it was
 * evaluated on ("trained_in": an earlier point's run, else its own). A marker whose
 * checkpoint that run no longer holds (trained again or further since) is no record:
 * pt->changed says why. */
static cJSON *load_record(const sweep *s, sweep_point *pt, int *plan_differs) {
    cJSON *m = read_marker(s, pt, plan_differs);
    const cJSON *ti = m ? cJSON_GetObjectItemCaseSensitive(m, "trained_in") : NULL;
    snprintf(pt->train_dir, sizeof pt->train_dir, "%s", cJSON_IsString(ti) ? ti->valuestring : pt->dir);
    char path[ST_PATH_BUF];
    path_join(path, sizeof path, pt->dir, "sweep_done.json");
    pt->changed[0] = 0;
    if (m && !st_sweep_same_ckpt(m, path, pt->train_dir, pt->changed, sizeof pt->changed)) {
        cJSON_Delete(m);
        m = NULL;
        snprintf(pt->train_dir, sizeof pt->train_dir, "%s", pt->dir);
    }
    return pt->record = m;
}

/* Point i: skipped when its marker matches, else trained (or resumed) and evaluated. The
 * outcome goes into the point (state, status, error, record); returns its status. */
int st_sweep_run_point(sweep *s, int i, const st_sweep_opts *opts) {
    sweep_point *pt = &s->points[i];
    int plan_differs = 0;
    if (load_record(s, pt, &plan_differs)) {
        pt->state = PT_SKIPPED;
        st_log(ST_LOG_INFO, "sweep: [%d/%d] %s: finished earlier, skipped", i + 1, s->n_points, pt->name);
        return ST_OK;
    }
    st_log(ST_LOG_INFO, "sweep: [%d/%d] %s%s%s", i + 1, s->n_points, pt->name,
           plan_differs ? ": the eval plan changed, evaluating again" : pt->changed[0] ? ": " : "", pt->changed);
    st_error pe = {0};
    int incomplete = 0;
    /* a point that differs from a finished one in eval.* only evaluates that run (a twin
     * still running in another process is not finished here: sweep_sched.c holds such a
     * point back until the twin is done, so it does not train a copy) */
    char own_cfg[ST_PATH_BUF];
    path_join(own_cfg, sizeof own_cfg, pt->dir, "config.json");
    const sweep_point *twin = st_sweep_exists(own_cfg) ? NULL : trained_twin(s, i);
    snprintf(pt->train_dir, sizeof pt->train_dir, "%s", twin ? twin->train_dir : pt->dir);
    if (twin) st_log(ST_LOG_INFO, "sweep: %s: same model as %s (differs in eval.* only): evaluating that run",
                     pt->name, twin->name);
    int64_t at = 0;
    int prc = twin ? ST_OK : train_point(s, pt, opts, &incomplete, &at, &pe);
    if (incomplete) {   /* stopped with its state saved: the next run of the sweep resumes it */
        pt->state = PT_INCOMPLETE;
        pt->status = prc;   /* ST_ERR_INTERRUPTED stops the sweep (exit 130) */
        snprintf(pt->error, sizeof pt->error, "%s at step %lld of %lld; run the sweep again to resume",
                 prc ? "interrupted" : "train.max_seconds reached", (long long)at, (long long)pt->cfg.train.steps);
        if (prc) st_log(ST_LOG_WARN, "sweep: %s: %s", pt->name, pt->error);
        return prc;
    } else if (!prc) {
        prc = eval_point(s, pt, &pe);
    }
    if (prc) {
        pt->state = PT_FAILED;
        pt->status = prc;
        snprintf(pt->error, sizeof pt->error, "%s", pe.msg);
        st_log(ST_LOG_ERROR, "sweep: %s: %s", pt->name, pe.msg);
    } else {
        pt->state = PT_DONE;
    }
    return prc;
}

/* The marker of a point another process finished (st_sweep_schedule): its record. */
int st_sweep_reload_point(sweep *s, int i) {
    int plan_differs = 0;
    sweep_point *pt = &s->points[i];
    cJSON_Delete(pt->record);
    return load_record(s, pt, &plan_differs) != NULL;
}

int st_sweep_run(const char *file, const st_sweep_opts *opts, st_error *e) {
    sweep *s = calloc(1, sizeof *s);
    if (!s) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    st_dist *dist = opts ? opts->dist : NULL;
    int rc = st_sweep_load(s, file, opts, e), lock_fd = -1;
    if (!rc && !(opts && opts->dry_run)) rc = st_sweep_check_out(s, e);
    if (!rc && !(opts && opts->dry_run)) rc = st_mkdirs(s->out, e);
    /* one sweep at a time in OUT (rank 0 holds the lock; forked --jobs children share it) */
    if (!rc && !(opts && opts->dry_run) && st_dist_rank(dist) == 0)
        rc = st_dir_lock(s->out, "a sweep is writing it", &lock_fd, e);
    rc = st_dist_agree(dist, rc, e);   /* every rank read the same file: fail together */
    if (rc) { if (lock_fd >= 0) close(lock_fd); st_sweep_free(s); free(s); return rc; }
    st_log(ST_LOG_INFO, "sweep %s: %d runs in %s", file, s->n_points, s->out);
    if (opts && opts->dry_run) {
        for (int i = 0; i < s->n_points; i++) {
            printf("%s", s->points[i].dir);
            for (int j = 0; j < s->points[i].n_sets; j++) printf(" %s", s->points[i].sets[j]);
            printf("\n");
        }
        st_sweep_free(s);
        free(s);
        return ST_OK;
    }
    /* evaluation progress: the live line on a terminal (training has its own) */
    if (!(opts && opts->quiet)) s->plan.opts.progress_every = 30.0;
    int sched_rc = st_sweep_schedule(s, opts, e);
    if (st_dist_rank(dist) > 0) {   /* rank 0 writes the tables */
        st_sweep_free(s);
        free(s);
        return sched_rc;
    }
    int first_rc = ST_OK, n_incomplete = 0;
    st_error first = {0};
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        n_incomplete += pt->state == PT_INCOMPLETE;
        if (pt->state == PT_FAILED && !first_rc) {
            first_rc = pt->status;
            st_fail(&first, pt->status, "%s", pt->error);
        }
    }
    if (sched_rc == ST_ERR_INTERRUPTED && !first_rc) { first_rc = sched_rc; st_fail(&first, sched_rc, "%s", e ? e->msg : ""); }
    /* a point no process ran (a job that could not start, on this rank or another) is not
     * a finished sweep: its seed means would silently cover fewer seeds */
    int n_pending = 0;
    for (int i = 0; i < s->n_points; i++) n_pending += s->points[i].state == PT_PENDING;
    if (!first_rc && sched_rc && sched_rc != ST_ERR_INTERRUPTED) {
        first_rc = sched_rc;
        st_fail(&first, sched_rc, "%s", e ? e->msg : "sweep: a job process could not start");
    }
    if (!first_rc && n_pending && sched_rc != ST_ERR_INTERRUPTED)
        first_rc = st_fail(&first, ST_ERR_GENERIC, "%s: %d runs were not started (see the errors above); run the "
                           "sweep again to run them", file, n_pending);
    st_error we = {0};
    const int wrc = st_sweep_write_results(s, &we);
    if (wrc && !first_rc) { first_rc = wrc; first = we; }
    int n_done = 0;
    for (int i = 0; i < s->n_points; i++) n_done += s->points[i].state == PT_DONE || s->points[i].state == PT_SKIPPED;
    /* name the tables only when they were written (a full disk fails them) */
    if (wrc) st_log(ST_LOG_ERROR, "sweep %s: %d of %d runs finished; the result tables were not all written: %s", file,
                    n_done, s->n_points, we.msg);
    else st_log(ST_LOG_INFO, "sweep %s: %d of %d runs finished; results in %s/results.{csv,json,md}", file, n_done,
                s->n_points, s->out);
    if (first_rc) {
        if (e) *e = first;
        rc = first_rc;
    } else if (n_incomplete) {
        rc = st_fail(e, ST_ERR_GENERIC, "%s: %d runs stopped at train.max_seconds before train.steps; run the sweep "
                     "again to resume them", file, n_incomplete);
    } else {
        rc = ST_OK;
    }
    if (lock_fd >= 0) close(lock_fd);
    st_sweep_free(s);
    free(s);
    return rc;
}
