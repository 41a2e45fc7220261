/* suite.c - evaluate one trained checkpoint at a list of lengths: load the model and its
 * dataset, resolve the plan against the run's eval config, run st_eval_run per length and
 * keep a row per length (a result or the reason it could not be evaluated). */
#include "st_eval.h"
#include "st_matmul.h"
#include "st_dist.h"
#include "st_transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void st_eval_plan_default(st_eval_plan *p) {
    memset(p, 0, sizeof *p);
    p->split = p->mode = -1;
    p->stride = p->max_tokens = -1;
    p->buckets = -1;
    p->precision = -1;
    p->transform = -1;
    p->transform_scale = -1;
    p->sinks = p->window = p->clip = p->block = -1;
    p->positions = -1;
    st_eval_opts_default(&p->opts);
}

const char *st_eval_mode_name(int mode) {
    return mode == ST_EVAL_SLIDING ? "sliding" : mode == ST_EVAL_NONOVERLAPPING ? "nonoverlapping" : "?";
}

const char *st_eval_split_name(int split) {
    return split == ST_SPLIT_TRAIN ? "train" : split == ST_SPLIT_VALID ? "valid" : split == ST_SPLIT_TEST ? "test" : "?";
}

const char *st_unit_name(int unit) {
    return unit == ST_UNIT_WORD ? "word" : unit == ST_UNIT_BYTE ? "byte" : "token";
}

void st_eval_report_free(st_eval_report *rep) {
    for (int i = 0; i < rep->n; i++) st_eval_result_free(&rep->rows[i].r);
    rep->n = 0;
}

/* Per-id UTF-8 byte lengths from the tokenizer (exact bits per byte). NULL when a token
 * does not decode on its own (then the split's average bytes per token is used). */
static double *token_byte_table(const st_tokenizer *tok, int V) {
    if (!tok || st_tokenizer_vocab_size(tok) != V) return NULL;
    double *t = malloc((size_t)V * sizeof *t);
    if (!t) return NULL;
    for (int32_t id = 0; id < V; id++) {
        int64_t nb = st_tokenizer_decode(tok, &id, 1, NULL, 0);   /* snprintf-like: full length */
        if (nb < 0) { free(t); return NULL; }
        t[id] = (double)nb;
    }
    return t;
}

void st_eval_plan_resolve_transform(st_eval_plan *p, const st_eval_config *c) {
    const int own_xf = p->transform >= 0 && p->transform != c->transform;
    /* a command that switches the sinks or the window off (0) drops the config's
     * positions too: they only say where the sinks sit */
    const int sinks_off = p->sinks == 0 || p->window == 0;
    /* --window 0 is "no window", the key's default: it switches the config's StreamingLLM
     * transform off, its sinks with it (sinks exist only beside a window; they were left
     * behind, and refused for want of the window just switched off) */
    if (p->window == 0 && p->sinks < 0) p->sinks = 0;
    if (p->transform < 0) p->transform = c->transform;
    if (p->transform_scale < 0) p->transform_scale = own_xf ? 0 : c->transform_scale;
    if (p->sinks < 0) p->sinks = c->sinks;
    if (p->window < 0) p->window = c->window;
    if (p->clip < 0) p->clip = own_xf ? 0 : c->clip;
    if (p->block < 0) p->block = c->blockwise;
    if (p->positions < 0) p->positions = sinks_off ? ST_SINK_POS_TEXT : c->positions;
}

/* ST_XF_CLI_* of the transform fields a command gave (>= 0 in its plan). */
static unsigned given_fields(const st_eval_plan *g) {
    return (g->transform >= 0 ? ST_XF_CLI_KIND : 0u) | (g->transform_scale >= 0 ? ST_XF_CLI_SCALE : 0u) |
           (g->clip >= 0 ? ST_XF_CLI_CLIP : 0u) | (g->sinks >= 0 ? ST_XF_CLI_SINKS : 0u) |
           (g->window >= 0 ? ST_XF_CLI_WINDOW : 0u) | (g->positions >= 0 ? ST_XF_CLI_POSITIONS : 0u) |
           (g->block >= 0 ? ST_XF_CLI_BLOCK : 0u);
}

st_transform st_eval_merge_transform(const st_eval_plan *given, const st_run_config *cfg) {
    st_eval_plan p = *given;
    st_eval_plan_resolve_transform(&p, &cfg->eval);
    st_transform xf = st_eval_plan_transform(&p, cfg->train.seq_len);
    xf.cli = given_fields(given);
    xf.none_given = given->transform == ST_XF_NONE;
    return xf;
}

int st_eval_plan_resolve(st_eval_plan *p, const st_run_config *cfg, const char *src, st_error *e) {
    const st_eval_config *c = &cfg->eval;
    if (p->n_lengths == 0) {
        p->n_lengths = c->n_lengths;
        memcpy(p->lengths, c->lengths, sizeof p->lengths);
    }
    if (p->n_lengths == 0) {
        p->n_lengths = 1;
        p->lengths[0] = cfg->train.seq_len;
    }
    if (p->split < 0) p->split = c->split;
    if (p->mode < 0) p->mode = c->mode;
    if (p->stride < 0) p->stride = p->mode == ST_EVAL_SLIDING ? c->stride : 0;
    if (p->max_tokens < 0) p->max_tokens = c->max_tokens;
    if (p->buckets < 0) p->buckets = c->buckets;
    if (p->precision < 0) p->precision = cfg->train.precision;
    st_eval_plan_resolve_transform(p, c);
    /* the statistics count the scored rows, in either protocol */
    if (!p->opts.attn_stats) p->opts.attn_stats = c->attn_stats;
    if (p->n_lengths > ST_EVAL_MAX_LENGTHS)
        return st_fail(e, ST_ERR_CONFIG, "%s: at most %d evaluation lengths", src, ST_EVAL_MAX_LENGTHS);
    for (int i = 0; i < p->n_lengths; i++)
        if (p->lengths[i] < 1)
            return st_fail(e, ST_ERR_CONFIG, "%s: evaluation length %lld must be >= 1", src, (long long)p->lengths[i]);
    if (p->split != ST_SPLIT_VALID && p->split != ST_SPLIT_TEST && p->split != ST_SPLIT_TRAIN)
        return st_fail(e, ST_ERR_CONFIG, "%s: unknown split %d", src, p->split);
    if (p->mode != ST_EVAL_NONOVERLAPPING && p->mode != ST_EVAL_SLIDING)
        return st_fail(e, ST_ERR_CONFIG, "%s: unknown eval mode %d", src, p->mode);
    if (p->mode == ST_EVAL_NONOVERLAPPING && p->stride != 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: a stride applies to sliding evaluation only (mode is nonoverlapping)", src);
    if (p->stride < 0 || p->max_tokens < 0 || p->buckets < 0 || p->opts.batch_tokens < 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: stride, max_tokens, buckets and batch_tokens must be >= 0", src);
    return ST_OK;
}

/* What one evaluation reads: the run's dataset, or outside text (--data) with the run's
 * tokenizer. */
typedef struct eval_tokens {
    st_dataset ds;
    st_tokenizer *ext_tok;      /* --data: the run's tokenizer (owned) */
    const st_tokenizer *tok;
    const int32_t *toks;
    int64_t n, bytes;
    int vocab, unit;
    uint64_t tok_hash;
} eval_tokens;

static void eval_tokens_free(eval_tokens *t, st_eval_report *rep) {
    st_dataset_free(&t->ds);
    st_tokenizer_free(t->ext_tok);
    st_text_data_free(&rep->data);
}

/* --data: the run's tokenizer (its tokenizer.json, or the byte tokenizer for a byte-level
 * run without one), checked against the checkpoint, then the outside text. Messages name
 * the flag and the file. */
static int load_external(const st_eval_plan *plan, st_eval_report *rep, uint64_t trained_hash, eval_tokens *t,
                         st_error *e) {
    const st_data_config *dc = &rep->cfg.data;
    const char *tname = st_data_tokenizer_name(dc);
    if (!strcmp(dc->source, "synthetic"))
        return st_fail(e, ST_ERR_CONFIG, "--data %s: %s was trained on the built-in synthetic corpus, whose ids have no "
                       "text form; evaluate its own valid/test split instead", plan->data_path, rep->checkpoint);
    if (!strcmp(dc->source, "task"))
        return st_fail(e, ST_ERR_CONFIG, "--data %s: %s was trained on the %s task, whose instances are generated; "
                       "evaluate it with --task (docs/tasks.md)", plan->data_path, rep->checkpoint, dc->task_name);
    const char *tp = plan->tokenizer_path;
    if (tp && access(tp, F_OK) == 0) {
        if (!(t->ext_tok = st_tokenizer_load(tp, e))) return e->code;
    } else if (!strcmp(tname, "byte")) {
        if (!(t->ext_tok = st_tokenizer_new_byte(e))) return e->code;
    } else {
        return st_fail(e, ST_ERR_IO, "--data %s: the run's %s tokenizer is needed and %s does not exist (evaluate a "
                       "run directory, not a loose checkpoint)", plan->data_path, tname, tp ? tp : "tokenizer.json");
    }
    uint64_t h = st_tokenizer_hash(t->ext_tok);
    if (st_tokenizer_vocab_size(t->ext_tok) != rep->cfg.model.vocab_size || (trained_hash && h != trained_hash))
        return st_fail(e, ST_ERR_DATA, "--data %s: tokenizer %s (vocab %d, hash %016llx) is not the one %s was trained "
                       "with (vocab %d, hash %016llx)", plan->data_path, tp ? tp : "(byte)",
                       st_tokenizer_vocab_size(t->ext_tok), (unsigned long long)h, rep->checkpoint,
                       rep->cfg.model.vocab_size, (unsigned long long)trained_hash);
    st_error le = {0};
    if (st_text_data_load(t->ext_tok, plan->data_path, plan->split, &rep->data, &le))
        return st_fail(e, le.code, "--data %s", le.msg);
    rep->external = 1;
    t->tok = t->ext_tok;
    t->toks = rep->data.tokens;
    t->n = rep->data.n;
    t->bytes = rep->data.bytes;
    t->vocab = st_tokenizer_vocab_size(t->ext_tok);
    t->unit = !strcmp(tname, "word") ? ST_UNIT_WORD : ST_UNIT_BYTE;
    t->tok_hash = h;
    st_log(ST_LOG_INFO, "eval --data %s: %lld tokens, %lld bytes%s", rep->data.path, (long long)rep->data.n,
           (long long)rep->data.bytes, t->unit == ST_UNIT_WORD ? "" : " (any bytes encode)");
    if (t->unit == ST_UNIT_WORD)
        st_log(ST_LOG_INFO, "eval --data %s: %lld tokens (%lld distinct words) not in the run's vocabulary, mapped to "
               "<unk>; %lld <unk> already in the text", rep->data.path, (long long)rep->data.unk_tokens,
               (long long)rep->data.unk_distinct, (long long)rep->data.unk_literal);
    return ST_OK;
}

static int load_own(const st_eval_plan *plan, st_eval_report *rep, uint64_t trained_on, eval_tokens *t, st_error *e) {
    int rc = st_dataset_load(&rep->cfg.data, rep->checkpoint, &t->ds, e);
    if (rc) return rc;
    t->tok = t->ds.tok;
    t->toks = t->ds.tokens[plan->split];
    t->n = t->ds.n[plan->split];
    t->bytes = t->ds.bytes[plan->split];
    t->vocab = t->ds.vocab_size;
    t->unit = t->ds.unit;
    t->tok_hash = t->ds.tok_hash;
    rep->entropy_rate = t->ds.entropy_rate;
    rep->data_hash = st_dataset_hash(&t->ds);
    rep->data_changed = trained_on ? trained_on != rep->data_hash : -1;
    /* the same tokenizer on other text (a byte-level run reads any file): the numbers would
     * not be comparable with the run's earlier reports, so say so (and in the report) */
    if (rep->data_changed == 1)
        st_log(ST_LOG_WARN, "%s: the dataset (%s) changed since this checkpoint was trained (its tokens differ; the "
               "tokenizer is the same): these figures are not comparable with reports made before the change",
               rep->checkpoint, rep->cfg.data.path[0] ? rep->cfg.data.path : rep->cfg.data.source);
    return ST_OK;
}

st_transform st_eval_plan_transform(const st_eval_plan *p, int64_t train_len) {
    return (st_transform){.kind = p->transform, .scale = p->transform_scale, .sinks = p->sinks, .window = p->window,
                          .clip = p->clip, .block = p->block, .cache_positions = p->positions == ST_SINK_POS_CACHE,
                          .train_len = train_len};
}

/* Under mpirun every rank loads the checkpoint itself, and beside a training (keep_last) two
 * ranks resolving a run's `latest` moments apart can read different steps: the windows
 * they share out would mix two models. A collective check (all ranks reach it): the
 * maximum of (x, -x) across ranks is (x, -x) only when every rank holds the same x. */
static int same_checkpoint(st_dist *d, const st_eval_report *rep, st_error *e) {
    if (st_dist_size(d) == 1) return ST_OK;
    const uint64_t h = st_fnv1a(ST_FNV_OFFSET, rep->checkpoint, strlen(rep->checkpoint));   /* its path */
    const int32_t id[2] = {(int32_t)(h >> 33), (int32_t)(rep->step % 1000000007)};
    int32_t v[4] = {id[0], -id[0], id[1], -id[1]};
    if (st_dist_max_i32(d, v, 4)) return st_fail(e, ST_ERR_GENERIC, "rank %d: the transport failed", st_dist_rank(d));
    if (v[0] == -v[1] && v[2] == -v[3]) return ST_OK;
    d->agreed = 1;   /* every rank reaches this verdict: a clean exit, not MPI_Abort */
    return st_fail(e, ST_ERR_CHECKPOINT, "%s (step %lld on rank %d): the ranks loaded different checkpoints (a "
                   "training beside wrote a newer one while they read `latest`); evaluate again, or name the "
                   "checkpoint file", rep->checkpoint, (long long)rep->step, st_dist_rank(d));
}

/* The inference-time transform of plan (the command line's, or the run's eval section),
 * checked against the model's method and handed to it; errors name the flag or the key. */
static int use_transform(const st_eval_plan *plan, const st_eval_plan *plan_in, st_eval_report *rep, st_model *m,
                         st_error *e) {
    st_transform *xf = &rep->xf;
    *xf = st_eval_plan_transform(plan, rep->cfg.train.seq_len);
    xf->cli = plan_in->from_config ? 0u : given_fields(plan_in);   /* messages name each field's flag or key */
    xf->none_given = !plan_in->from_config && plan_in->transform == ST_XF_NONE;
    const int from_cli = xf->cli != 0;
    st_error xe = {0};
    int rc = st_transform_check(xf, m->cfg.pos, from_cli ? "--transform" : "eval.transform", &xe);
    /* the checkpoint names the model the values do not fit; the message names each value's
     * flag or key (main adds "stretch: error:") */
    if (rc) return st_fail(e, rc, "%s: %s", rep->checkpoint, xe.msg);
    st_model_set_transform(m, xf, from_cli ? "stretch eval" : rep->checkpoint);
    return ST_OK;
}

/* One row per length of the plan: its result, or why it could not be evaluated. ST_OK
 * when at least one length was evaluated, else the first length's error. */
static int eval_lengths(st_model *m, const st_eval_plan *plan, const int32_t *toks, int64_t n,
                        const st_eval_opts *opts, st_eval_report *rep, st_error *e) {
    int done = 0, first_err = ST_OK;
    st_error first = {0};
    for (int i = 0; i < plan->n_lengths; i++) {
        st_eval_row *row = &rep->rows[rep->n++];
        int64_t L = plan->lengths[i];
        int64_t S = plan->mode == ST_EVAL_SLIDING ? (plan->stride > 0 ? plan->stride : (L / 2 > 0 ? L / 2 : 1)) : L;
        st_error le = {0};
        rep->xf.n = L;   /* s = max(1, L / train.seq_len) unless given */
        row->xf_scale = st_transform_scale(&rep->xf, L);
        if (S > L)   /* S == L is allowed: sliding with S = L is the nonoverlapping protocol */
            row->status = st_fail(&le, ST_ERR_CONFIG, "length %lld: sliding stride %lld (--stride or eval.stride) "
                                  "is longer than the window (targets would be skipped)", (long long)L, (long long)S);
        else
            row->status = st_eval_run(m, toks, n, L, S, opts, &row->r, &le);
        row->r.length = L;
        row->r.stride = S;
        if (row->status) {
            snprintf(row->error, sizeof row->error, "%s", le.msg);
            /* one length: its error is the command's (said once, not as a warning too) */
            if (plan->n_lengths > 1) st_log(ST_LOG_WARN, "eval %s at length %lld: %s", rep->checkpoint, (long long)L, le.msg);
            if (!first_err) { first_err = row->status; first = le; }
        } else {
            done++;
        }
    }
    if (done > 0) return ST_OK;
    if (e) *e = first;
    return first_err ? first_err : st_fail(e, ST_ERR_CONFIG, "%s: no evaluation length", rep->checkpoint);
}

/* *ready: set once this rank loaded everything and agreed with the other ranks (then the
 * lengths run, each agreeing on its own status). */
static int eval_checkpoint(const char *path, const st_eval_plan *plan_in, st_eval_report *rep, int *ready,
                           st_error *e) {
    memset(rep, 0, sizeof *rep);
    snprintf(rep->source, sizeof rep->source, "%s", path);
    st_train_state state;
    st_model m;
    /* one read: beside a training, keep_last may delete the file right after */
    int rc = st_checkpoint_read(path, rep->checkpoint, sizeof rep->checkpoint, &m, &rep->cfg, &state, e);
    if (rc) return rc;
    rep->step = state.step;
    rep->n_params = st_model_num_params(&m);

    st_eval_plan plan = *plan_in;
    eval_tokens et;
    memset(&et, 0, sizeof et);
    double *tbytes = NULL;
    st_mm *mm = NULL;
    rc = st_eval_plan_resolve(&plan, &rep->cfg, rep->checkpoint, e);
    rep->cfg.data.quiet = plan.opts.progress_every <= 0;   /* --quiet, the ranks after the first */
    if (!rc) rc = plan.data_path ? load_external(&plan, rep, state.tok_hash, &et, e)
                                : load_own(&plan, rep, state.data_hash, &et, e);
    if (!rc && et.vocab != m.cfg.vocab_size) {
        rc = st_fail(e, ST_ERR_DATA, "%s: the model has a vocabulary of %d, its dataset (%s) now has %d",
                     rep->checkpoint, m.cfg.vocab_size, rep->cfg.data.path[0] ? rep->cfg.data.path : rep->cfg.data.source,
                     et.vocab);
    } else if (!rc && state.tok_hash && et.tok_hash && state.tok_hash != et.tok_hash) {
        rc = st_fail(e, ST_ERR_DATA, "%s: the dataset's tokenizer (hash %016llx) differs from the one the model was "
                     "trained with (%016llx)", rep->checkpoint, (unsigned long long)et.tok_hash,
                     (unsigned long long)state.tok_hash);
    }
    if (rc) goto out;

    rep->split = plan.split;
    rep->mode = plan.mode;
    rep->unit = et.unit;
    rep->stride_arg = plan.stride;
    rep->buckets = plan.buckets;
    rep->bucket_scale = plan.opts.bucket_scale;
    if ((rc = use_transform(&plan, plan_in, rep, &m, e))) goto out;
    st_blas_info bi;
    st_blas_query(&bi);
    rep->threads = bi.omp_threads;
    int64_t n = et.n;
    if (plan.max_tokens > 0 && plan.max_tokens < n) n = plan.max_tokens;
    if (plan.max_tokens == 1) {   /* one token has no target to score */
        rc = st_fail(e, ST_ERR_CONFIG, "%s: max_tokens: " ST_EVAL_ONE_TOKEN, rep->checkpoint);
        goto out;
    }
    rep->split_tokens = n;
    rep->split_total = et.n;

    st_eval_opts opts = plan.opts;
    opts.buckets = plan.buckets;
    /* precision: the backend, and for bf16 the weights' shadow (rounded once, here) */
    rep->precision = plan.precision;
    if ((rc = st_mm_create_for(&mm, plan.precision, opts.progress_every <= 0, &m.params, e))) goto out;
    snprintf(rep->matmul, sizeof rep->matmul, "%s", st_mm_describe(mm));
    opts.mm = mm;
    opts.reset_peak_rss = 1;
    opts.attn_far = rep->cfg.train.seq_len;   /* attention past the training length counts as far */
    if (et.unit == ST_UNIT_BYTE) {
        /* bits per byte: exact per-token byte lengths when the tokenizer decodes single
         * tokens, else the split's average bytes per token */
        if (et.n > 0 && et.bytes > 0)
            rep->bytes_per_token = (double)et.bytes / (double)et.n;
        else
            rep->bytes_per_token = 1.0;
        tbytes = token_byte_table(et.tok, et.vocab);
        rep->bytes_exact = tbytes != NULL;
        opts.token_bytes = tbytes;
        opts.bytes_per_token = rep->bytes_per_token;
    }

    *ready = 1;
    rc = st_dist_agree(plan.opts.dist, ST_OK, e);   /* another rank could not load */
    if (!rc) rc = same_checkpoint(plan.opts.dist, rep, e);
    if (!rc) rc = eval_lengths(&m, &plan, et.toks, n, &opts, rep, e);
out:
    free(tbytes);
    st_mm_free(mm);
    eval_tokens_free(&et, rep);
    st_model_free(&m);
    return rc;
}

int st_eval_checkpoint(const char *path, const st_eval_plan *plan, st_eval_report *rep, st_error *e) {
    int ready = 0;
    int rc = eval_checkpoint(path, plan, rep, &ready, e);
    /* a rank that failed while loading tells the others, which wait at the agreement */
    return ready ? rc : st_dist_agree(plan->opts.dist, rc, e);
}
