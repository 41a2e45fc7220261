/* bench.c - `stretch bench`: sgemm peak, training step split, evaluation speed and memory
 * (definitions in include/st_bench.h).
 *
 * Timing policy: every figure is a median over repeated runs of the same work, so a
 * burst of load from another process moves one sample, not the result. The training
 * step is the trainer's step without data loading or logging:
 *   forward   st_ctx_begin + st_model_loss          (arena reset, tape recorded)
 *   backward  st_backward                           (activation and parameter grads)
 *   optimiser st_grad_norm, st_clip_factor, st_optim_step (AdamW), st_params_zero_grad
 * The first step of a shape sizes the arena (extra chunks, consolidated at the next
 * reset); at least one untimed warmup step always runs so timed steps allocate nothing. */
#define _GNU_SOURCE
#include "st_bench.h"
#include "st_matmul.h"
#include "st_tensor.h"
#include "st_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- presets ---- */
typedef struct preset { const char *name; int V, L, d, H; int64_t B, T; int steps, warmup;
                        int n_eval; int64_t eval[3]; } preset;
static const preset presets[] = {
    {"tiny", 512,   2,  64,  4, 4, 64,  5, 1, 2, {256, 1024, 0}},
    {"S",    33280, 4,  256, 8, 8, 256, 10, 2, 3, {1024, 4096, 16384}},
    {"M",    33280, 6,  512, 8, 4, 512, 8, 2, 3, {1024, 4096, 16384}},
    {"G",    50304, 12, 768, 12, 4, 256, 6, 2, 2, {1024, 4096, 0}},
};

int st_bench_preset(const char *name, st_bench_config *c, st_error *e) {
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) p = &presets[i];
    if (!p) return st_fail(e, ST_ERR_CONFIG, "bench: --preset: unknown preset '%s' (tiny, S, M, G)", name);
    memset(c, 0, sizeof *c);
    snprintf(c->preset, sizeof c->preset, "%s", p->name);
    st_model_config_default(&c->model);
    c->model.vocab_size = p->V;
    c->model.n_layers = p->L;
    c->model.d_model = p->d;
    c->model.n_heads = p->H;
    c->model.pos = ST_POS_ALIBI;
    c->B = p->B;
    c->T = p->T;
    c->steps = p->steps;
    c->warmup = p->warmup;
    c->lr = 3e-4f;
    c->clip_norm = 1.0f;
    c->n_eval = p->n_eval;
    for (int i = 0; i < p->n_eval; i++) c->eval_lengths[i] = p->eval[i];
    c->eval_B = 1;
    c->eval_reps = 2;
    c->sgemm_n = 2048;
    c->sgemm_reps = 8;
    c->threads = 0;
    c->decode_tokens = 0;   /* --decode N */
    c->decode_context = 0;
    c->precision = ST_PREC_FP32;
    c->seed = 1234;
    return ST_OK;
}

double st_bench_flops_per_token(size_t n_params, const st_model_config *m, int64_t T) {
    return 6.0 * (double)n_params + 6.0 * (double)m->n_layers * (double)T * (double)m->d_model;
}

/* ------------------------------------------------------------- helpers ---- */
/* CPU seconds of the whole process (all threads): on a shared machine the wall time of a
 * step depends on the neighbours, the CPU time much less (waiting threads sleep under
 * OMP_WAIT_POLICY=PASSIVE), so it is reported next to the wall time. */
static double cpu_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Start a new peak-RSS window: writing "5" to clear_refs sets VmHWM to the current RSS
 * (Linux >= 4.0). Without it the figures are process-wide peaks (still upper bounds). */
static void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

static void random_ids(int32_t *ids, size_t n, int V, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)st_rng_below(&r, (uint64_t)V);
}

/* What a timed loop holds: 2n random token ids (inputs, then targets), nt timing samples,
 * and an arena + context. Opened with a fresh peak-RSS window; closing frees what was made
 * (both frees accept the zeroed state of a partial open). */
typedef struct bench_scratch {
    int32_t *ids;
    double *t;
    st_arena arena;
    st_ctx ctx;
} bench_scratch;

static void scratch_close(bench_scratch *s) {
    st_ctx_free(&s->ctx);
    st_arena_free(&s->arena);
    free(s->ids);
    free(s->t);
}

/* The arenas' cap, as training's (st_model_step_bytes): a shape past the machine ends in an
 * error (ST_ERR_MEMORY) instead of an arena grown until the OOM killer steps in. */
static size_t bench_cap(void) {
    const size_t mem = st_mem_total();
    return mem ? mem / 10 * 9 : (size_t)-1;
}

static int scratch_open(bench_scratch *s, int64_t n, size_t nt, int V, uint64_t seed, size_t arena0,
                        st_mm *mm, st_error *e) {
    memset(s, 0, sizeof *s);
    s->ids = st_malloc((size_t)(2 * n) * sizeof(int32_t), e);
    s->t = st_calloc(nt, sizeof(double), e);
    if (!s->ids || !s->t) { scratch_close(s); return ST_ERR_MEMORY; }
    random_ids(s->ids, (size_t)(2 * n), V, seed);
    reset_peak_rss();
    int rc = st_arena_init(&s->arena, arena0, bench_cap(), e);
    if (!rc) rc = st_ctx_init(&s->ctx, &s->arena, 1 << 16, e);
    if (rc) scratch_close(s);
    else s->ctx.mm = mm;
    return rc;
}

/* ----------------------------------------------------------- GEMM peak ---- */
/* bf16: a and b are rounded once (ah, bh), as the weights' shadow is, so the probe times
 * oneDNN's matmul alone. */
typedef struct sgemm_probe {
    float *a, *b, *out;
    uint16_t *ah, *bh;      /* bf16 copies (NULL for fp32) */
    st_mm *mm;
    int n;
    double flops;
} sgemm_probe;

static int probe_init(sgemm_probe *p, int n, uint64_t seed, st_mm *mm, st_error *e) {
    const size_t nn = (size_t)n * (size_t)n;
    p->n = n;
    p->flops = 2.0 * (double)n * (double)n * (double)n;
    p->a = st_aligned_alloc(3 * nn * sizeof(float), e);
    if (!p->a) return ST_ERR_MEMORY;
    p->b = p->a + nn;
    p->out = p->b + nn;
    st_rng rng;
    st_rng_seed(&rng, seed);
    for (size_t i = 0; i < 2 * nn; i++) p->a[i] = (float)st_rng_uniform(&rng) - 0.5f;
    memset(p->out, 0, nn * sizeof(float));
    p->mm = mm;
    if (st_mm_bf16_operands(mm)) {
        p->ah = st_aligned_alloc(2 * nn * sizeof(uint16_t), e);
        if (!p->ah) { st_aligned_free(p->a); p->a = NULL; return ST_ERR_MEMORY; }
        p->bh = p->ah + nn;
        st_bf16_round(p->ah, p->a, (int64_t)(2 * nn));
    }
    return ST_OK;
}

static void probe_free(sgemm_probe *p) {
    st_aligned_free(p->a);
    st_aligned_free(p->ah);
    p->a = NULL;
    p->ah = NULL;
}

/* One n^3 GEMM: GFLOPS over wall time and over CPU time (all threads). */
static double probe_run(sgemm_probe *p, double *cpu_gflops) {
    const int n = p->n;
    double c0 = cpu_time(), t0 = st_time();
    st_mm_gemm(p->mm, n, n, n, 1.0f, st_mm_a(p->a, p->ah, 0, n), st_mm_a(p->b, p->bh, 0, n), 0.0f, p->out, n);
    double dt = st_time() - t0, dc = cpu_time() - c0;
    if (cpu_gflops) *cpu_gflops = dc > 0 ? p->flops / dc * 1e-9 : 0.0;
    return p->flops / dt * 1e-9;
}

static int sgemm_peak(const st_bench_config *c, sgemm_probe *p, st_bench_result *r, st_error *e) {
    double *rate = st_calloc((size_t)c->sgemm_reps, sizeof *rate, e);
    if (!rate) return ST_ERR_MEMORY;
    probe_run(p, NULL);   /* untimed: thread pool start-up, page faults */
    for (int k = 0; k < c->sgemm_reps; k++) {
        double cg;
        rate[k] = probe_run(p, &cg);
        if (rate[k] > r->sgemm_gflops) r->sgemm_gflops = rate[k];
        if (cg > r->sgemm_cpu_gflops) r->sgemm_cpu_gflops = cg;
    }
    r->sgemm_gflops_median = median(rate, c->sgemm_reps);
    free(rate);
    snprintf(r->gemm_impl, sizeof r->gemm_impl, "%s", st_mm_last_impl(p->mm));
    st_log(ST_LOG_INFO, "bench: %s GEMM %d^3 (%s): best %.1f GFLOPS, median %.1f (%.1f per CPU-second)",
           st_precision_name(c->precision), c->sgemm_n, r->gemm_impl, r->sgemm_gflops, r->sgemm_gflops_median,
           r->sgemm_cpu_gflops);
    return ST_OK;
}

/* ------------------------------------------------------------ training ---- */
/* Timed samples per step, in this order in bench_train's array. */
enum { S_FWD, S_BWD, S_OPT, S_STEP, S_CPU, S_GEMM, S_N };

static int bench_train(st_model *m, const st_bench_config *c, sgemm_probe *probe, st_mm *mm,
                       st_bench_result *r, st_error *e) {
    const int64_t B = c->B, T = c->T, n = B * T;
    const int warmup = c->warmup > 0 ? c->warmup : 1, steps = c->steps;
    st_optim opt;
    memset(&opt, 0, sizeof opt);
    bench_scratch sc;
    int rc = scratch_open(&sc, n, (size_t)(S_N * steps), c->model.vocab_size, c->seed + 1, (size_t)64 << 20, mm, e);
    if (rc) return rc;
    const int32_t *ids = sc.ids, *tg = sc.ids + n;
    double *t = sc.t;
    st_ctx *ctx = &sc.ctx;

    st_optim_config oc = {.name = ST_OPT_ADAMW, .lr = c->lr, .beta1 = 0.9f, .beta2 = 0.95f,
                          .eps = 1e-8f, .weight_decay = 0.1f,
                          .no_decay = ST_NODECAY_BIAS | ST_NODECAY_NORM};
    if ((rc = st_optim_init(&opt, &oc, &m->params, e))) goto out;
    st_params_zero_grad(&m->params);

    st_profile_init(&r->profile);
    for (int s = 0; s < warmup + steps; s++) {
        double c0 = cpu_time(), t0 = st_time();
        st_ctx_begin(ctx, 1, 1);
        /* --profile: the timed steps' ops and gemm calls (never the GEMM probe's) */
        const int prof = c->profile && s >= warmup;
        ctx->prof = prof ? &r->profile : NULL;
        st_mm_set_profile(mm, ctx->prof);
        if (prof) st_profile_step(&r->profile);
        st_tensor *loss = st_model_loss(m, ctx, ids, tg, B, T, (uint64_t)s, NULL, e);
        if (!loss) { rc = e && e->code ? e->code : st_ctx_check(ctx, e); goto out; }
        double t1 = st_time();
        if ((rc = st_backward(ctx, loss, 1.0f, e))) goto out;
        double t2 = st_time();
        double gn = st_grad_norm(&opt, &m->params);
        if (!isfinite(gn) || !isfinite(loss->data[0])) {
            rc = st_fail(e, ST_ERR_NUMERIC, "bench: step %d: non-finite loss or gradient", s);
            goto out;
        }
        /* clipped inside the update; bf16: it rewrites the weights' shadow too */
        st_optim_step(&opt, &m->params, c->lr, s + 1, st_clip_factor(gn, c->clip_norm));
        st_params_zero_grad(&m->params);
        double t3 = st_time(), c3 = cpu_time();
        st_mm_set_profile(mm, NULL);
        ctx->prof = NULL;
        if (prof) r->profile.other_s += t3 - t2;
        if (s == 0) r->loss_first = loss->data[0];
        r->loss_last = loss->data[0];
        if (s >= warmup) {
            double *ts = t + (size_t)S_N * (size_t)(s - warmup);
            ts[S_FWD] = t1 - t0; ts[S_BWD] = t2 - t1; ts[S_OPT] = t3 - t2;
            ts[S_STEP] = t3 - t0; ts[S_CPU] = c3 - c0;
            if (probe) {   /* the BLAS limit under the load the step just saw */
                double cg;
                ts[S_GEMM] = probe_run(probe, &cg);
                if (ts[S_GEMM] > r->sgemm_gflops) r->sgemm_gflops = ts[S_GEMM];
                if (cg > r->sgemm_cpu_gflops) r->sgemm_cpu_gflops = cg;
            }
        }
        st_log(ST_LOG_DEBUG, "bench: step %d: %.3f s (fwd %.3f bwd %.3f opt %.3f) loss %.4f",
               s, t3 - t0, t1 - t0, t2 - t1, t3 - t2, loss->data[0]);
    }
    r->train_arena = sc.arena.high_water;
    r->train_peak_rss = st_peak_rss();
    if (steps > 0) {
        double col[S_N][steps > 0 ? steps : 1], sum = 0;
        for (int k = 0; k < steps; k++) {
            for (int j = 0; j < S_N; j++) col[j][k] = t[(size_t)S_N * (size_t)k + (size_t)j];
            sum += col[S_STEP][k];
        }
        r->step_mean_s = sum / steps;
        r->fwd_s = median(col[S_FWD], steps);
        r->bwd_s = median(col[S_BWD], steps);
        r->opt_s = median(col[S_OPT], steps);
        r->step_s = median(col[S_STEP], steps);
        r->step_cpu_s = median(col[S_CPU], steps);
        if (probe) r->sgemm_inter_gflops = median(col[S_GEMM], steps);
        const double fl = r->flops_per_token * (double)n;   /* model flops per step */
        r->tokens_per_s = (double)n / r->step_s;
        r->mfu = r->sgemm_gflops > 0 ? fl / r->step_s / (r->sgemm_gflops * 1e9) : 0.0;
        r->mfu_inter = r->sgemm_inter_gflops > 0 ? fl / r->step_s / (r->sgemm_inter_gflops * 1e9) : 0.0;
        r->cpu_eff = r->sgemm_cpu_gflops > 0 ? fl / r->step_cpu_s / (r->sgemm_cpu_gflops * 1e9) : 0.0;
        st_log(ST_LOG_INFO, "bench: train B=%lld T=%lld: %.3f s/step (fwd %.3f bwd %.3f opt %.3f), "
               "%.0f tokens/s, MFU %.1f%% (%.1f%% vs interleaved GEMM), %.3f CPU s/step (%.1f%% of the "
               "GEMM rate per CPU-second)", (long long)B, (long long)T, r->step_s, r->fwd_s, r->bwd_s,
               r->opt_s, r->tokens_per_s, 100.0 * r->mfu, 100.0 * r->mfu_inter, r->step_cpu_s,
               100.0 * r->cpu_eff);
    }
out:
    st_optim_free(&opt);
    scratch_close(&sc);
    return rc;
}

/* ---------------------------------------------------------- evaluation ---- */
static int bench_eval_one(st_model *m, const st_bench_config *c, st_mm *mm, int64_t L, st_bench_eval *ev,
                          st_error *e) {
    const int64_t B = c->eval_B, n = B * L;
    const int reps = c->eval_reps > 0 ? c->eval_reps : 1;
    bench_scratch sc;
    int rc = scratch_open(&sc, n, (size_t)reps, c->model.vocab_size, c->seed + 2 + (uint64_t)L, (size_t)16 << 20, mm, e);
    if (rc) return rc;
    const int32_t *ids = sc.ids;
    double *t = sc.t;
    ev->L = L;
    ev->B = B;
    for (int k = -1; k < reps; k++) {   /* k = -1: sizes the arena */
        double t0 = st_time();
        st_ctx_begin(&sc.ctx, 0, 0);
        st_tensor *loss = st_model_loss(m, &sc.ctx, ids, ids + n, B, L, 0, NULL, e);
        if (!loss) { rc = e && e->code ? e->code : st_ctx_check(&sc.ctx, e); goto out; }
        double dt = st_time() - t0;
        ev->loss = loss->data[0];
        if (k >= 0) t[k] = dt;
    }
    ev->arena_bytes = sc.arena.high_water;
    ev->peak_rss = st_peak_rss();
    ev->seconds = median(t, reps);
    ev->tokens_per_s = (double)n / ev->seconds;
    st_log(ST_LOG_INFO, "bench: eval L=%lld B=%lld: %.3f s, %.0f tokens/s, peak RSS %.0f MiB",
           (long long)L, (long long)B, ev->seconds, ev->tokens_per_s, (double)ev->peak_rss / 1048576.0);
out:
    scratch_close(&sc);
    return rc;
}

/* ------------------------------------------------------------ decoding ---- */
/* KV-cache decoding as `generate` runs it: prefill the context, then time each of the
 * tokens through the cache (the cache holds all of them: no sliding). */
static int bench_decode(st_model *m, const st_bench_config *c, st_mm *mm, st_bench_result *r, st_error *e) {
    const int64_t C = c->decode_context > 0 ? c->decode_context : c->T, N = c->decode_tokens;
    bench_scratch sc;
    int rc = scratch_open(&sc, C + N, 1, c->model.vocab_size, c->seed + 3, (size_t)16 << 20, mm, e);
    if (rc) return rc;
    float *logits = st_malloc((size_t)c->model.vocab_size * sizeof(float), e);
    st_kv_cache cache;
    memset(&cache, 0, sizeof cache);
    rc = logits ? st_kv_cache_init(&cache, m, C + N, c->precision, e) : ST_ERR_MEMORY;
    if (!rc) {
        st_ctx_begin(&sc.ctx, 0, 0);
        double t0 = st_time();
        rc = st_model_decode(m, &cache, &sc.ctx, sc.ids, C, logits, e);
        r->prefill_s = st_time() - t0;
        t0 = st_time();
        for (int64_t i = 0; i < N && !rc; i++) {
            st_ctx_begin(&sc.ctx, 0, 0);
            rc = st_model_decode(m, &cache, &sc.ctx, sc.ids + C + i, 1, logits, e);
        }
        const double dt = st_time() - t0;
        r->decode_tokens_per_s = dt > 0 ? (double)N / dt : 0.0;
        r->decode_context = C;
        r->decode_tokens = (int)N;
        r->decode_cache_bytes = (size_t)st_kv_cache_bytes(&cache);
    }
    if (!rc)
        st_log(ST_LOG_INFO, "bench: decode: prefill %lld tokens %.3f s, then %lld tokens at %.1f tokens/s",
               (long long)C, r->prefill_s, (long long)N, r->decode_tokens_per_s);
    st_kv_cache_free(&cache);
    free(logits);
    scratch_close(&sc);
    return rc;
}

/* Shapes the machine cannot hold, refused before anything is allocated, naming the flags:
 * the arenas had no cap, so --batch 65536 --seq 1024 of the tiny preset grew a 16 GiB
 * arena, filled it, then stopped on "arena overflow: ... (no limit set)" asking for the
 * next 1 TiB (on a machine without that much free, the OOM killer's business). What is
 * counted are lower bounds: the token ids, and in training the attention probabilities
 * every layer keeps for backward (n_layers x n_heads x B x T^2 floats). The arenas are
 * capped too (bench_cap), so a shape past what these count ends in an error as well. */
static int check_sizes(const st_bench_config *c, st_error *e) {
    const double cap = (double)bench_cap(), gib = 1073741824.0;
    const double B = (double)c->B, T = (double)c->T;
    const double attn = (double)c->model.n_layers * c->model.n_heads * B * T * T * 4.0;
    if (c->steps > 0 && 8.0 * B * T + attn > cap)
        return st_fail(e, ST_ERR_MEMORY, "bench: --batch %lld x --seq %lld: a training step keeps at least %.2f GiB "
                       "(the attention probabilities of %d layers x %d heads for backward, and the token ids); the "
                       "cap is %.2f GiB, 90%% of this machine's memory (lower --batch or --seq, or --no-train)",
                       (long long)c->B, (long long)c->T, (8.0 * B * T + attn) / gib, c->model.n_layers,
                       c->model.n_heads, cap / gib);
    for (int i = 0; i < c->n_eval; i++)
        if (8.0 * (double)c->eval_B * (double)c->eval_lengths[i] > cap)
            return st_fail(e, ST_ERR_MEMORY, "bench: --eval-batch %lld x --eval length %lld: the token ids alone need "
                           "%.2f GiB; the cap is %.2f GiB, 90%% of this machine's memory", (long long)c->eval_B,
                           (long long)c->eval_lengths[i], 8.0 * (double)c->eval_B * (double)c->eval_lengths[i] / gib,
                           cap / gib);
    return ST_OK;
}

int st_bench_run(const st_bench_config *c, st_bench_result *r, st_error *e) {
    memset(r, 0, sizeof *r);
    if (c->B < 1 || c->T < 1 || c->steps < 0 || c->eval_B < 1 || c->n_eval < 0 || c->n_eval > ST_BENCH_MAX_EVAL)
        return st_fail(e, ST_ERR_CONFIG, "bench: B, T, eval batch must be >= 1, steps >= 0, at most %d eval lengths",
                       ST_BENCH_MAX_EVAL);
    if (check_sizes(c, e)) return e->code;
    st_set_threads(c->threads);
    st_blas_query(&r->blas);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    snprintf(r->coretype_env, sizeof r->coretype_env, "%s", ct ? ct : "");
    const char *wp = getenv("OMP_WAIT_POLICY");
    snprintf(r->wait_policy, sizeof r->wait_policy, "%s", wp ? wp : "");
    st_mm *mm = NULL;
    int rc = st_mm_create(&mm, c->precision, 0, e);
    if (rc) return rc;
    snprintf(r->matmul, sizeof r->matmul, "%s", st_mm_describe(mm));
    sgemm_probe probe = {0}, *pp = NULL;
    st_model m;
    int have_model = 0;
    if (c->sgemm_reps > 0 && c->sgemm_n > 0) {
        if ((rc = probe_init(&probe, c->sgemm_n, c->seed, mm, e))) goto out;
        pp = &probe;
        if ((rc = sgemm_peak(c, pp, r, e))) goto out;
    }
    if ((rc = st_model_init(&m, &c->model, c->seed, e))) goto out;
    have_model = 1;
    if (st_mm_bf16_operands(mm) && (rc = st_params_enable_bf16(&m.params, e))) goto out;
    r->n_params = st_model_num_params(&m);
    r->flops_per_token = st_bench_flops_per_token(r->n_params, &m.cfg, c->T);
    if (c->steps > 0) rc = bench_train(&m, c, pp, mm, r, e);
    probe_free(&probe);   /* not resident during the evaluation's memory figures */
    for (int i = 0; !rc && i < c->n_eval; i++) {
        rc = bench_eval_one(&m, c, mm, c->eval_lengths[i], &r->eval[i], e);
        if (!rc) r->n_eval = i + 1;
    }
    if (!rc && c->decode_tokens > 0) rc = bench_decode(&m, c, mm, r, e);
out:
    probe_free(&probe);
    if (have_model) st_model_free(&m);
    st_mm_free(mm);
    return rc;
}

/* -------------------------------------------------------------- output ---- */
static double mib(size_t b) { return (double)b / 1048576.0; }

void st_bench_print(const st_bench_config *c, const st_bench_result *r, void *file) {
    FILE *f = file;
    const st_model_config *m = &c->model;
    fprintf(f, "stretch bench: preset %s  V=%d layers=%d d=%d heads=%d pos=%s  params %.2fM\n",
            c->preset[0] ? c->preset : "custom", m->vocab_size, m->n_layers, m->d_model, m->n_heads,
            st_pos_name(m->pos), (double)r->n_params / 1e6);
    fprintf(f, "BLAS: OpenBLAS core %s (OPENBLAS_CORETYPE=%s), %d BLAS threads, %d OpenMP threads, "
            "OMP_WAIT_POLICY=%s\n", r->blas.corename, r->coretype_env[0] ? r->coretype_env : "unset",
            r->blas.blas_threads, r->blas.omp_threads, r->wait_policy[0] ? r->wait_policy : "unset");
    fprintf(f, "matmul precision: %s\n", r->matmul);
    char inter[32] = "n/a (no training steps)";
    if (r->sgemm_inter_gflops > 0) snprintf(inter, sizeof inter, "%.1f", r->sgemm_inter_gflops);
    if (r->sgemm_gflops > 0)
        fprintf(f, "%s GEMM %d^3 (%s): best %.1f GFLOPS, up-front median %.1f, interleaved median %s, "
                "%.1f per CPU-second\n", st_precision_name(c->precision), c->sgemm_n, r->gemm_impl,
                r->sgemm_gflops, r->sgemm_gflops_median, inter, r->sgemm_cpu_gflops);
    else
        fprintf(f, "GEMM probe: not run (--sgemm 0 or --sgemm-reps 0): no MFU\n");
    if (c->steps > 0) {
        fprintf(f, "\ntraining B=%lld T=%lld, %d timed steps after %d warmup (medians):\n",
                (long long)c->B, (long long)c->T, c->steps, c->warmup > 0 ? c->warmup : 1);
        fprintf(f, "  %-10s %-10s %-10s %-10s %-10s %-7s %-9s %s\n", "forward s", "backward s",
                "optim s", "step s", "tokens/s", "MFU %", "RSS MiB", "loss first -> last");
        char mfu[16] = "n/a";
        if (r->sgemm_gflops > 0) snprintf(mfu, sizeof mfu, "%.1f", 100.0 * r->mfu);
        fprintf(f, "  %-10.4f %-10.4f %-10.4f %-10.4f %-10.0f %-7s %-9.0f %.4f -> %.4f\n", r->fwd_s,
                r->bwd_s, r->opt_s, r->step_s, r->tokens_per_s, mfu, mib(r->train_peak_rss),
                r->loss_first, r->loss_last);
        if (r->sgemm_gflops > 0)
            fprintf(f, "  MFU = %.1f MFLOP/token (6N + 6LTd) x tokens/s / %.1f GFLOPS (best %s GEMM); %.1f%% of the "
                    "interleaved GEMM;\n  %.3f CPU s/step = %.1f%% of the GEMM rate per CPU-second; arena %.0f MiB; "
                    "RSS = the process's peak, with the GEMM probe's\n  buffers (%.0f MiB of fp32 matrices at --sgemm %d; "
                    "bf16 adds its copies)\n",
                    r->flops_per_token / 1e6, r->sgemm_gflops, st_precision_name(c->precision), 100.0 * r->mfu_inter,
                    r->step_cpu_s, 100.0 * r->cpu_eff, mib(r->train_arena),
                    3.0 * (double)c->sgemm_n * (double)c->sgemm_n * sizeof(float) / 1048576.0, c->sgemm_n);
        else
            fprintf(f, "  %.1f MFLOP/token (6N + 6LTd); %.3f CPU s/step; arena %.0f MiB\n", r->flops_per_token / 1e6,
                    r->step_cpu_s, mib(r->train_arena));
    }
    if (c->profile && r->profile.steps > 0) st_profile_print(&r->profile, f, r->sgemm_gflops);
    if (r->n_eval > 0) {
        fprintf(f, "\nevaluation (inference mode, st_model_loss):\n");
        fprintf(f, "  %-8s %-4s %-10s %-11s %-14s %-12s %s\n", "L", "B", "s/forward", "tokens/s",
                "peak RSS MiB", "arena MiB", "loss");
        for (int i = 0; i < r->n_eval; i++) {
            const st_bench_eval *v = &r->eval[i];
            fprintf(f, "  %-8lld %-4lld %-10.4f %-11.0f %-14.0f %-12.0f %.4f\n", (long long)v->L,
                    (long long)v->B, v->seconds, v->tokens_per_s, mib(v->peak_rss), mib(v->arena_bytes),
                    v->loss);
        }
    }
    if (r->decode_tokens > 0)
        fprintf(f, "\ndecoding (KV cache, as generate): prefill %lld tokens %.4f s (%.0f tokens/s), then %d tokens at "
                "%.1f tokens/s (%.3f ms/token); cache %.1f MiB\n", (long long)r->decode_context, r->prefill_s,
                r->prefill_s > 0 ? (double)r->decode_context / r->prefill_s : 0.0, r->decode_tokens,
                r->decode_tokens_per_s, r->decode_tokens_per_s > 0 ? 1e3 / r->decode_tokens_per_s : 0.0,
                mib(r->decode_cache_bytes));
}

int st_bench_write_json(const st_bench_config *c, const st_bench_result *r, const char *path,
                        st_error *e) {
    st_atomic_file af;   /* an interrupted bench leaves no half-written report */
    FILE *f = st_atomic_open(&af, path, e);
    if (!f) return e ? e->code : ST_ERR_IO;
    const st_model_config *m = &c->model;
    fprintf(f, "{\n  \"program\": \"stretch\",\n  \"version\": \"%s\",\n  \"preset\": \"%s\",\n", ST_VERSION,
            c->preset[0] ? c->preset : "custom");
    fprintf(f, "  \"config\": {\"vocab_size\": %d, \"n_layers\": %d, \"d_model\": %d, \"n_heads\": %d, "
               "\"d_ff\": %d, \"pos\": \"%s\", \"B\": %lld, \"T\": %lld, \"steps\": %d, \"warmup\": %d, "
               "\"lr\": %.9g, \"clip_norm\": %.9g, \"eval_B\": %lld, \"eval_reps\": %d, \"seed\": %llu, "
               "\"precision\": \"%s\"},\n",
            m->vocab_size, m->n_layers, m->d_model, m->n_heads, st_model_d_ff(m),
            st_pos_name(m->pos), (long long)c->B, (long long)c->T, c->steps, c->warmup, c->lr,
            c->clip_norm, (long long)c->eval_B, c->eval_reps, (unsigned long long)c->seed,
            st_precision_name(c->precision));
    fprintf(f, "  \"env\": {\"blas_core\": \"%s\", \"openblas_coretype\": \"%s\", \"blas_threads\": %d, "
               "\"omp_threads\": %d, \"omp_wait_policy\": \"%s\", \"cpu_avx512\": %d},\n",
            r->blas.corename, r->coretype_env, r->blas.blas_threads, r->blas.omp_threads,
            r->wait_policy, r->blas.cpu_avx512 != 0);
    fprintf(f, "  \"matmul\": \"%s\",\n", r->matmul);
    fprintf(f, "  \"sgemm\": {\"n\": %d, \"reps\": %d, \"precision\": \"%s\", \"impl\": \"%s\", "
               "\"gflops_best\": %.3f, \"gflops_median\": %.3f, \"gflops_interleaved\": %.3f, \"gflops_per_cpu_s\": %.3f},\n",
            c->sgemm_n, c->sgemm_reps, st_precision_name(c->precision), r->gemm_impl, r->sgemm_gflops,
            r->sgemm_gflops_median, r->sgemm_inter_gflops, r->sgemm_cpu_gflops);
    fprintf(f, "  \"n_params\": %zu,\n  \"flops_per_token\": %.17g,\n", r->n_params, r->flops_per_token);
    /* the MFU figures need the GEMM probe: null without it (--sgemm 0, --sgemm-reps 0) */
    char mfu[3][32];
    const double eff[3] = {r->mfu, r->mfu_inter, r->cpu_eff};
    for (int i = 0; i < 3; i++) {
        if (r->sgemm_gflops > 0 && (i != 1 || r->sgemm_inter_gflops > 0)) snprintf(mfu[i], sizeof mfu[i], "%.5f", eff[i]);
        else snprintf(mfu[i], sizeof mfu[i], "null");
    }
    if (c->steps > 0)
        fprintf(f, "  \"train\": {\"forward_s\": %.6f, \"backward_s\": %.6f, \"optim_s\": %.6f, "
                   "\"step_s\": %.6f, \"step_mean_s\": %.6f, \"step_cpu_s\": %.6f, \"tokens_per_s\": %.3f, \"mfu\": %s, \"mfu_interleaved\": %s, \"cpu_efficiency\": %s, "
                   "\"peak_rss_bytes\": %zu, \"arena_bytes\": %zu, \"loss_first\": %.6f, \"loss_last\": %.6f},\n",
                r->fwd_s, r->bwd_s, r->opt_s, r->step_s, r->step_mean_s, r->step_cpu_s, r->tokens_per_s, mfu[0], mfu[1], mfu[2],
                r->train_peak_rss, r->train_arena, r->loss_first, r->loss_last);
    else
        fprintf(f, "  \"train\": null,\n");
    fprintf(f, "  \"eval\": [");
    for (int i = 0; i < r->n_eval; i++) {
        const st_bench_eval *v = &r->eval[i];
        fprintf(f, "%s\n    {\"L\": %lld, \"B\": %lld, \"seconds\": %.6f, \"tokens_per_s\": %.3f, "
                   "\"peak_rss_bytes\": %zu, \"arena_bytes\": %zu, \"loss\": %.6f}",
                i ? "," : "", (long long)v->L, (long long)v->B, v->seconds, v->tokens_per_s, v->peak_rss,
                v->arena_bytes, v->loss);
    }
    fprintf(f, "%s],\n", r->n_eval ? "\n  " : "");
    if (r->decode_tokens > 0)
        fprintf(f, "  \"decode\": {\"context\": %lld, \"tokens\": %d, \"prefill_s\": %.6f, \"tokens_per_s\": %.3f, "
                   "\"cache_bytes\": %zu}\n}\n", (long long)r->decode_context, r->decode_tokens, r->prefill_s,
                r->decode_tokens_per_s, r->decode_cache_bytes);
    else
        fprintf(f, "  \"decode\": null\n}\n");
    return st_atomic_commit(&af, e);
}
