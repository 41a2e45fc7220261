/* eval.c - perplexity of a token stream at evaluation length L (nonoverlapping or
 * sliding windows), with per-position loss buckets.
 *
 * Each window w (st_eval_windows) feeds inputs tokens[start, start + len) and scores the
 * targets tokens[start + p + 1] for window positions p >= score_from; the other targets
 * are -1, which the loss op ignores (tok_loss = 0 there). Windows of the full length L are
 * stacked B = max(1, batch_tokens / L) per forward; a shorter (clipped) window runs alone.
 *
 * Sums are accumulated in double in window order and, within a window, position order,
 * so a result does not depend on the thread count beyond the float forward itself.
 * With N ranks (opts->dist), forward batch k runs on rank k mod N, which stores the
 * scored token losses in a stream-ordered buffer (n - 1 floats, zero elsewhere); after
 * the rank-ordered sum each slot holds exactly one rank's value, and every rank adds
 * them up in the one-process order: the same figures, bit for bit.
 *
 * Memory: inference mode keeps no tape and no backward buffers, and attention streams over
 * key blocks, so one forward needs O(B * L * (d_model + d_ff)) floats - linear in L. The
 * arena starts small, grows by chunks during the first forward and is then consolidated
 * (st_arena_reset) into one block of the measured high water, which every later forward
 * reuses. */
#include "st_eval.h"
#include "st_dist.h"

#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_eval_opts_default(st_eval_opts *o) {
    memset(o, 0, sizeof *o);
    o->batch_tokens = ST_EVAL_DEFAULT_BATCH_TOKENS;
    o->bucket_scale = ST_BUCKETS_LINEAR;
}

void st_eval_result_free(st_eval_result *r) {
    free(r->buckets);
    r->buckets = NULL;
    r->n_buckets = 0;
    free(r->attn);
    r->attn = NULL;
}

int st_eval_bucket_layout(int64_t L, int buckets, int scale, st_eval_bucket *out) {
    if (buckets <= 0 || L <= 0) return 0;
    if (scale == ST_BUCKETS_LOG2) {
        /* {0}, [1,2), [2,4), ..., [2^(k-1), L) */
        int nb = 1;
        while (((uint64_t)1 << (nb - 1)) < (uint64_t)L) nb++;   /* unsigned: L may exceed 2^62 */
        if (out) {
            for (int b = 0; b < nb; b++) {
                int64_t lo = b == 0 ? 0 : (int64_t)((uint64_t)1 << (b - 1));
                int64_t hi = b >= 63 ? L : (int64_t)1 << b;
                out[b] = (st_eval_bucket){lo, hi < L ? hi : L, 0, 0.0};
            }
        }
        return nb;
    }
    /* linear: bucket(p) = floor(p * nb / L), so bucket b starts at ceil(b * L / nb) */
    int64_t nb = buckets < L ? buckets : L;
    /* ceil(b L / nb) = b q + ceil(b r / nb) with L = q nb + r: no b*L product, which
     * overflows int64 for absurd lengths (e.g. --lengths 2^62) */
    const int64_t q = L / nb, r = L % nb;
    if (out)
        for (int64_t b = 0; b < nb; b++)
            out[b] = (st_eval_bucket){b * q + (b * r + nb - 1) / nb, (b + 1) * q + ((b + 1) * r + nb - 1) / nb, 0, 0.0};
    return (int)nb;
}

/* Bucket of window position p (inverse of the layout above). */
static int bucket_of(int64_t p, int64_t L, int nb, int scale) {
    if (scale == ST_BUCKETS_LOG2) {
        int b = 0;
        while (p > 0) { p >>= 1; b++; }
        return b < nb ? b : nb - 1;
    }
    return (int)(p * nb / L);
}

/* Reset VmHWM so the peak reported is this evaluation's (Linux >= 4.0; "5" = reset the
 * peak RSS). Freed heap memory is returned first (glibc keeps freed blocks below its mmap
 * threshold resident, which would otherwise count towards every later peak). Best effort:
 * without it the process-wide peak is reported. */
static void release_heap(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static void reset_peak_rss(void) {
    release_heap();
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

typedef struct eval_state {
    st_model *m;
    const int32_t *tokens;
    const st_eval_opts *o;
    int64_t L;
    int32_t *ids, *tgt;     /* (B, T) */
    float *tok_loss;        /* (B, T) */
    st_arena arena;
    st_ctx ctx;
    st_eval_result *r;
    const st_eval_window *win0; /* all windows */
    int64_t nw, B;          /* windows, full-length windows per forward */
    st_dist *dist;
    int rank, ranks;
    int have_arena, have_ctx;
    float *scored;          /* ranks > 1: losses of the scored targets in stream order */
    int64_t *scored_at;     /* (windows) offset of window w's first scored target */
    int64_t n_scored;       /* scored targets of all windows */
} eval_state;

/* Add window win[b]'s scored losses l[0 .. len - score_from) to the result, in position
 * order. */
static int accumulate(eval_state *s, const st_eval_window *w, const float *l, st_error *e) {
    st_eval_result *r = s->r;
    for (int64_t p = w->score_from; p < w->len; p++) {
        double x = l[p - w->score_from];
        if (!isfinite(x))
            return st_fail(e, ST_ERR_NUMERIC, "eval at length %lld: non-finite loss at token %lld",
                           (long long)s->L, (long long)(w->start + p + 1));
        r->nll += x;
        r->tokens++;
        if (s->o->token_bytes) r->bytes += s->o->token_bytes[s->tokens[w->start + p + 1]];
        if (r->n_buckets) {
            st_eval_bucket *bk = &r->buckets[bucket_of(p, s->L, r->n_buckets, s->o->bucket_scale)];
            bk->tokens++;
            bk->nll += x;
        }
    }
    return ST_OK;
}

/* Run windows win[0..nb) (all of length T) as one (nb, T) batch and add their scored
 * targets to the result. */
static int eval_batch(eval_state *s, const st_eval_window *win, int64_t nb, int64_t T, st_error *e) {
    const int V = s->m->cfg.vocab_size;
    for (int64_t b = 0; b < nb; b++) {
        const int32_t *src = s->tokens + win[b].start;
        int32_t *ids = s->ids + b * T, *tgt = s->tgt + b * T;
        for (int64_t p = 0; p < T; p++) {
            ids[p] = src[p];
            tgt[p] = p >= win[b].score_from ? src[p + 1] : -1;
        }
        /* the last target is read one past the inputs */
        for (int64_t p = 0; p <= T; p++)
            if (src[p] < 0 || src[p] >= V)
                return st_fail(e, ST_ERR_DATA, "eval: token %lld has id %d, outside the model's vocabulary [0, %d)",
                               (long long)(win[b].start + p), src[p], V);
    }
    st_ctx_begin(&s->ctx, 0, 0);
    st_error me = {0};
    /* the attention statistics count the rows this forward scores (a sliding window's
     * last S, all rows of a nonoverlapping one): each text position once */
    if (s->m->attn_acc) s->m->attn_acc->tgt = s->tgt;
    st_tensor *loss = st_model_loss(s->m, &s->ctx, s->ids, s->tgt, nb, T, 0, s->tok_loss, &me);
    if (s->m->attn_acc) s->m->attn_acc->tgt = NULL;
    if (me.code) return st_fail(e, me.code, "%s", me.msg);
    if (!loss) {
        st_ctx_check(&s->ctx, &me);
        return st_fail(e, me.code ? me.code : ST_ERR_MEMORY,
                       "eval at length %lld (%lld windows per forward): %s; lower --batch-tokens or the length",
                       (long long)s->L, (long long)nb, me.msg[0] ? me.msg : "forward failed");
    }
    for (int64_t b = 0; b < nb; b++) {
        const float *tl = s->tok_loss + b * T + win[b].score_from;
        if (s->scored) {   /* added up later, after the ranks' sum */
            memcpy(s->scored + s->scored_at[&win[b] - s->win0], tl, (size_t)(T - win[b].score_from) * sizeof *tl);
            continue;
        }
        int rc = accumulate(s, &win[b], tl, e);
        if (rc) return rc;
    }
    return ST_OK;
}

/* Windows in the forward starting at window i: up to B of the full length L stacked, a
 * shorter (clipped) window alone. */
static int64_t batch_at(const st_eval_window *win, int64_t nw, int64_t i, int64_t B, int64_t L) {
    int64_t nb = 1;
    if (win[i].len == L)
        while (nb < B && i + nb < nw && win[i + nb].len == L) nb++;
    return nb;
}

static int64_t default_limit(void) {
    size_t mem = st_mem_total();
    return mem ? (int64_t)(mem / 10 * 8) : (int64_t)8 << 30;
}

/* The arguments, and a length the model's positions can represent. */
static int check_run(const st_model *m, int64_t n, int64_t L, int64_t stride, const st_eval_opts *opts, st_error *e) {
    if (L < 1) return st_fail(e, ST_ERR_CONFIG, "eval: length must be >= 1 (got %lld)", (long long)L);
    if (stride < 1 || stride > L)
        return st_fail(e, ST_ERR_CONFIG, "eval: stride must be in [1, L = %lld] (got %lld)", (long long)L, (long long)stride);
    if (n < 2) return st_fail(e, ST_ERR_DATA, "eval: the stream has %lld tokens, at least 2 are needed", (long long)n);
    if (opts->bucket_scale != ST_BUCKETS_LINEAR && opts->bucket_scale != ST_BUCKETS_LOG2)
        return st_fail(e, ST_ERR_CONFIG, "eval: unknown bucket scale %d", opts->bucket_scale);
    int64_t longest = L < n - 1 ? L : n - 1;
    const int64_t max_len = st_pos_max_len(&m->cfg);
    if (max_len > 0 && longest > max_len)
        return st_fail(e, ST_ERR_CONFIG, "eval at length %lld: %s positions represent at most %lld tokens; %s",
                       (long long)L, st_pos_name(m->cfg.pos), (long long)max_len, st_pos_limit_why(m->cfg.pos));
    return ST_OK;
}

/* opts->attn_stats: the model adds each forward's statistics to acc (m->attn_acc). */
static int attn_begin(st_model *m, const st_eval_opts *opts, st_attn_acc *acc, st_error *e) {
    const size_t lh = (size_t)m->cfg.n_layers * (size_t)m->cfg.n_heads;
    *acc = (st_attn_acc){.n_layers = m->cfg.n_layers, .n_heads = m->cfg.n_heads, .far = opts->attn_far};
    acc->sum = st_calloc(lh * ST_ATTN_NSTATS, sizeof(double), e);
    acc->rows = acc->sum ? st_calloc(lh, sizeof(double), e) : NULL;
    if (!acc->rows) { free(acc->sum); return ST_ERR_MEMORY; }
    m->attn_acc = acc;
    return ST_OK;
}

/* The means into res->attn (when rc is ST_OK, the same on every rank); returns rc or an
 * error. With N ranks each summed its own windows' rows: the sums are added in rank order
 * (st_dist_sum_f64), so the means are the same for a fixed rank count (and within float
 * rounding of one process's). */
static int attn_end(st_model *m, st_attn_acc *acc, struct st_dist *dist, st_eval_result *res, int rc, st_error *e) {
    m->attn_acc = NULL;
    const size_t lh = (size_t)acc->n_layers * (size_t)acc->n_heads;
    if (!rc && (st_dist_sum_f64(dist, acc->sum, lh * ST_ATTN_NSTATS) || st_dist_sum_f64(dist, acc->rows, lh)))
        rc = st_fail(e, ST_ERR_GENERIC, "eval: the ranks' attention statistics could not be added up");
    if (!rc && acc->sum && (res->attn = st_malloc(lh * ST_ATTN_NSTATS * sizeof(double), e)) == NULL) rc = ST_ERR_MEMORY;
    for (size_t i = 0; !rc && i < lh; i++)
        for (int x = 0; x < ST_ATTN_NSTATS; x++)
            res->attn[i * ST_ATTN_NSTATS + x] = acc->rows[i] > 0 ? acc->sum[i * ST_ATTN_NSTATS + x] / acc->rows[i] : NAN;
    if (!rc) {
        res->attn_layers = acc->n_layers;
        res->attn_heads = acc->n_heads;
        res->attn_far = acc->far;
    }
    free(acc->sum);
    free(acc->rows);
    return rc;
}

/* Windows of the full length L per forward: batch_tokens / L, at least 1, at most all of
 * them. */
static int64_t batch_windows(const st_eval_window *win, int64_t nw, int64_t L, const st_eval_opts *opts) {
    int64_t bt = opts->batch_tokens > 0 ? opts->batch_tokens : ST_EVAL_DEFAULT_BATCH_TOKENS;
    int64_t B = bt / L > 1 ? bt / L : 1;
    int64_t full = 0;
    for (int64_t i = 0; i < nw; i++) full += win[i].len == L;
    if (B > full) B = full > 0 ? full : 1;
    return B;
}

/* The result's settings and its empty loss buckets. */
static int init_result(st_eval_result *res, int64_t L, int64_t stride, int64_t B, const st_eval_opts *opts,
                       st_error *e) {
    res->length = L;
    res->stride = stride;
    res->batch = B;
    res->n_buckets = st_eval_bucket_layout(L, opts->buckets, opts->bucket_scale, NULL);
    if (res->n_buckets) {
        res->buckets = st_calloc((size_t)res->n_buckets, sizeof *res->buckets, e);
        if (!res->buckets) return ST_ERR_MEMORY;
        st_eval_bucket_layout(L, opts->buckets, opts->bucket_scale, res->buckets);
    }
    return ST_OK;
}

/* ranks > 1: where each window's scored losses go in the stream-ordered buffer */
static int init_scored(eval_state *s, st_error *e) {
    s->scored_at = st_malloc((size_t)s->nw * sizeof *s->scored_at, e);
    for (int64_t i = 0; s->scored_at && i < s->nw; i++) {
        s->scored_at[i] = s->n_scored;
        s->n_scored += s->win0[i].len - s->win0[i].score_from;
    }
    s->scored = s->scored_at ? st_calloc((size_t)(s->n_scored ? s->n_scored : 1), sizeof *s->scored, e) : NULL;
    return s->scored ? ST_OK : ST_ERR_MEMORY;
}

/* The (B, longest) batch buffers, the arena and context of the forwards, and the buffer
 * of the ranks' sum. */
static int init_state(eval_state *s, size_t rows, st_error *e) {
    const st_eval_opts *opts = s->o;
    s->dist = opts->dist;
    s->rank = st_dist_rank(s->dist);
    s->ranks = st_dist_size(s->dist);
    int rc = ST_OK;
    s->ids = st_malloc(rows * sizeof(int32_t), e);
    s->tgt = st_malloc(rows * sizeof(int32_t), e);
    s->tok_loss = st_malloc(rows * sizeof(float), e);
    if (!s->ids || !s->tgt || !s->tok_loss) rc = ST_ERR_MEMORY;
    size_t limit = opts->arena_limit ? opts->arena_limit : (size_t)default_limit();
    /* 1 MiB to start: a larger block would cost nothing untouched, but a sanitized build
     * poisons its shadow at allocation and at free (32 MiB: 8 MiB written per eval) */
    if (!rc) rc = st_arena_init(&s->arena, (size_t)1 << 20, limit, e);
    s->have_arena = rc == ST_OK;
    if (!rc) rc = st_ctx_init(&s->ctx, &s->arena, 64, e);
    s->have_ctx = rc == ST_OK;
    if (s->have_ctx) s->ctx.mm = opts->mm;
    if (!rc && s->ranks > 1) rc = init_scored(s, e);
    return rc;
}

/* Progress after window i: the live line, or a log line when progress_every s have passed. */
static void show_progress(const eval_state *s, st_live *live, int64_t i, double t0, double *last_log) {
    const int64_t nw = s->nw;
    double now = st_time(), rate = (double)s->r->tokens / (now - t0);
    if (live->on) {
        char bar[21], r[32], eta[32];
        st_fmt_bar(bar, 20, i, nw);
        st_fmt_rate(r, sizeof r, rate);
        st_fmt_duration(eta, sizeof eta, (now - t0) / (double)i * (double)(nw - i));
        st_live_show(live, 0, "eval L=%lld: window %lld/%lld [%s] %s tok/s ETA %s", (long long)s->L, (long long)i,
                     (long long)nw, bar, r, eta);
    } else if (s->o->progress_every > 0 && now - *last_log >= s->o->progress_every) {
        *last_log = now;
        st_log(ST_LOG_INFO, "eval L=%lld: %lld/%lld windows, %.0f tok/s", (long long)s->L, (long long)i,
               (long long)nw, rate);
    }
}

/* Every forward batch in window order; batch k runs on rank k mod N. */
static int run_batches(eval_state *s, st_live *live, double t0, st_error *e) {
    const st_eval_window *win = s->win0;
    const int64_t nw = s->nw;
    st_eval_result *res = s->r;
    double last_log = t0;
    int rc = ST_OK;
    for (int64_t i = 0, k = 0; i < nw && !rc; k++) {
        int64_t nb = batch_at(win, nw, i, s->B, s->L);
        if (k % s->ranks == s->rank) rc = eval_batch(s, win + i, nb, win[i].len, e);
        res->forward_tokens += nb * win[i].len;
        res->windows += nb;
        i += nb;
        if (!rc && st_arena_chunks(&s->arena) > 1) {
            /* first forward done: consolidate the chunks into one block of the high water
             * now, and hand the freed chunks back to the OS before that block is touched
             * (glibc keeps freed blocks below its mmap threshold resident, which would
             * double the peak) */
            st_arena_reset(&s->arena);
            release_heap();
        }
        if (!rc) show_progress(s, live, i, t0, &last_log);
    }
    return rc;
}

/* ranks > 1: every rank leaves together (agreeing on local_rc); then the losses of all
 * batches, in stream order */
static int gather_ranks(eval_state *s, int local_rc, st_error *e) {
    int rc = st_dist_agree(s->dist, local_rc, e);
    if (!rc && st_dist_sum_f32(s->dist, s->scored, (size_t)s->n_scored))
        rc = st_fail(e, ST_ERR_GENERIC, "eval at length %lld: the ranks' sum failed", (long long)s->L);
    for (int64_t i = 0; i < s->nw && !rc; i++) rc = accumulate(s, &s->win0[i], s->scored + s->scored_at[i], e);
    return rc;
}

static void free_state(eval_state *s) {
    free(s->scored);
    free(s->scored_at);
    if (s->have_ctx) st_ctx_free(&s->ctx);
    if (s->have_arena) st_arena_free(&s->arena);
    free(s->ids);
    free(s->tgt);
    free(s->tok_loss);
}

/* The figures from the sums. */
static void finish_result(st_eval_result *res, const st_eval_opts *opts) {
    res->loss = res->nll / (double)res->tokens;
    res->ppl = exp(res->loss);
    if (!opts->token_bytes && opts->bytes_per_token > 0) res->bytes = (double)res->tokens * opts->bytes_per_token;
    if (res->bytes > 0) res->bpb = res->nll / log(2.0) / res->bytes;
    res->tokens_per_s = res->seconds > 0 ? (double)res->tokens / res->seconds : 0.0;
}

int st_eval_run(st_model *m, const int32_t *tokens, int64_t n, int64_t L, int64_t stride,
                const st_eval_opts *opts, st_eval_result *res, st_error *e) {
    st_eval_opts dflt;
    if (!opts) { st_eval_opts_default(&dflt); opts = &dflt; }
    memset(res, 0, sizeof *res);
    res->bpb = NAN;
    int rc = check_run(m, n, L, stride, opts, e);
    if (rc) return rc;

    int64_t nw = st_eval_windows(n, L, stride, NULL, 0);
    if (nw <= 0) return st_fail(e, ST_ERR_DATA, "eval: no evaluation window for %lld tokens", (long long)n);
    st_eval_window *win = st_malloc((size_t)nw * sizeof *win, e);
    if (!win) return ST_ERR_MEMORY;
    st_eval_windows(n, L, stride, win, nw);
    const int64_t B = batch_windows(win, nw, L, opts);
    if ((rc = init_result(res, L, stride, B, opts, e))) { free(win); return rc; }

    eval_state s = {.m = m, .tokens = tokens, .o = opts, .L = L, .r = res, .win0 = win, .nw = nw, .B = B};
    const int64_t longest = L < n - 1 ? L : n - 1;
    rc = init_state(&s, (size_t)(B * longest), e);
    if (opts->reset_peak_rss) reset_peak_rss();
    double t0 = st_time();
    /* progress: the live line on a terminal, else a log line every progress_every s */
    st_live live;
    st_live_init(&live, opts->progress_every <= 0);
    st_attn_acc acc = {0};
    if (!rc && opts->attn_stats) rc = attn_begin(m, opts, &acc, e);
    if (!rc) rc = run_batches(&s, &live, t0, e);
    if (s.ranks > 1) rc = gather_ranks(&s, rc, e);
    if (opts->attn_stats) rc = attn_end(m, &acc, opts->dist, res, rc, e);   /* after the ranks agreed on rc */
    st_live_clear(&live);
    res->seconds = st_time() - t0;
    res->arena_bytes = s.have_arena ? s.arena.high_water : 0;
    free_state(&s);
    free(win);
    res->peak_rss = st_peak_rss();
    if (rc) { st_eval_result_free(res); return rc; }
    finish_result(res, opts);
    return ST_OK;
}
