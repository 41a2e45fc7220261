/* cmd_generate.c - `stretch generate RUN_DIR|CHECKPOINT [--prompt TEXT] [--tokens N]
 * [--prompt-file FILE|-] [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--seed S] [--context N]
 * [--no-cache]`:
 * sample text from a trained model (st_sample_token: temperature, then the top-k,
 * nucleus and min-p filters). With ALiBi the context may be longer than the training
 * length.
 *
 * Default: a KV cache (st_model_decode). The prompt's last --context tokens go through the
 * model once (prefill), then each new token runs alone through the blocks and attends to
 * the cached keys and values: O(context) work per token instead of a forward over the
 * whole context. The logits equal those of --no-cache (up to float rounding) while the
 * sequence fits in --context. Past it:
 *   - methods whose cache slides (st_kv_cache_slides: none, alibi, alibi_rf, t5, kerple,
 *     sandwich, cope, rope, xpos): the oldest cached keys are dropped, every
 *     layer attends to its last --context keys (sliding-window attention). That equals
 *     --no-cache for one-layer models; with more layers it differs slightly, because a
 *     cached key of layer >= 1 was computed while tokens now outside the window were
 *     still visible (--no-cache recomputes the window from scratch for every token).
 *   - sinusoidal, learned, fire: every position of the window moves when it slides, so each
 *     token re-prefills the last --context tokens, exactly as --no-cache (no speed-up
 *     there).
 * --no-cache: every token reruns the forward over the last --context tokens (inference
 * mode), the behaviour before the cache.
 * --precision fp32|bf16 (default: the run's train.precision): bf16 runs the products
 * through the bf16 backend and keeps the cache's keys and values in bf16 (half the memory;
 * st_kv_cache_init).
 *
 * Inference-time transforms (include/st_transform.h, docs/evaluation.md): --transform
 * pi|ntk|dynamic_ntk|yarn|rerope (rope runs) or alibi_interp (alibi runs) with --scale S
 * (default max(1, context / train.seq_len)) or --clip W (rerope, default train.seq_len / 2); --sinks K --window W: every query sees the first K
 * tokens and its last W (StreamingLLM; --positions cache: the sinks at their cache
 * positions, as StreamingLLM re-positions them). With a window, a sliding cache keeps exactly
 * those K + W keys however long the text grows, and equals a full forward over the whole
 * text with the same mask. --blockwise B: blockwise causal attention, blocks of B counted
 * from the text's first token (a sliding cache keeps the last 2B keys). dynamic_ntk
 * re-prefills whenever its scale changes (each token between train.seq_len and
 * --context), since the cached keys were rotated with the old one. */
#include "cli/cli.h"
#include "st_matmul.h"
#include "st_train.h"
#include "st_transform.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --no-cache: logits of the token after ids[0..n) from a forward over the last `context`
 * tokens (the last position's hidden state only goes through the head). */
static int window_logits(st_model *m, st_ctx *ctx, const int32_t *ids, int64_t n, int64_t context,
                         float *logits, st_error *e) {
    const int V = m->cfg.vocab_size, C = m->cfg.d_model;
    const int64_t T = n < context ? n : context;
    st_tensor *h = st_model_hidden(m, ctx, ids + n - T, 1, T, 0, e);
    if (!h) return e->code ? e->code : st_ctx_check(ctx, e);
    /* (1,C) @ W^T (C,V): one row, so sgemv in fp32 */
    const st_tensor *W = st_param(&m->params, m->cfg.tie_embeddings ? m->p_tok_emb : m->p_lm_head);
    st_mm_gemm(ctx->mm, 1, V, C, 1.0f, st_mm_a(h->data + (T - 1) * C, NULL, 0, C), st_mm_a(W->data, W->bf16, 1, C),
               0.0f, logits, V);
    return ST_OK;
}

/* Check the transform options against the run and hand them to the model (s defaults to
 * max(1, context / train.seq_len)). */
static int use_transform(st_model *m, st_transform *xf, int64_t train_len, int64_t context, st_error *e) {
    xf->train_len = train_len;
    xf->n = context;
    int rc = st_transform_check(xf, m->cfg.pos, "--transform", e);
    if (!rc && st_transform_dynamic(xf->kind) && (xf->window > 0 || xf->block > 0))
        rc = st_fail(e, ST_ERR_CONFIG, "--transform %s with %s: the current length of a windowed cache "
                     "is ambiguous; use ntk with --scale", st_transform_name(xf->kind),
                     xf->window > 0 ? "--window" : "--blockwise");
    if (!rc) st_model_set_transform(m, xf, "generate");
    return rc;
}

/* What the command line asks for. */
typedef struct gen_opts {
    const char *src, *prompt;
    int64_t n_tokens, context;
    st_sampling sampling;
    int no_cache;
    uint64_t seed;
    int precision;   /* -1: the run's train.precision */
    st_transform xf; /* the model keeps a pointer to it (st_model_set_transform) */
    const char *prompt_file;   /* --prompt-file ("-": standard input) */
    char *prompt_text;         /* its text (owned), which prompt then points to */
} gen_opts;

/* The flags that take a value; --no-cache and --help take none. */
static const char *const valued[] = {"--prompt", "--prompt-file", "--tokens", "--top-k", "--top-p", "--min-p", "--context",
                                     "--temperature", "--seed",
                                     "--precision", CLI_TRANSFORM_FLAGS, NULL};

/* One flag with its value. */
static int parse_option(gen_opts *o, const char *a, const char *v) {
    const int64_t max_count = 1L << 30;
    int rc = ST_OK;
    if (!strcmp(a, "--prompt")) o->prompt = v;
    else if (!strcmp(a, "--prompt-file")) { o->prompt_file = v; if (cli_path_arg("generate", a, v)) return ST_ERR_CONFIG; }
    else if (!strcmp(a, "--tokens")) { if (!cli_int_arg(v, 1, max_count, &o->n_tokens)) return cli_usage("generate", "--tokens: integer in [1, %lld] expected", (long long)max_count); }
    else if (!strcmp(a, "--top-k")) { if (!cli_int_arg(v, 0, max_count, &o->sampling.top_k)) return cli_usage("generate", "--top-k: integer in [0, %lld] expected", (long long)max_count); }
    else if (!strcmp(a, "--top-p")) { if (!cli_num_arg(v, 0, 1, &o->sampling.top_p) || !(o->sampling.top_p > 0)) return cli_usage("generate", "--top-p '%s': number in (0, 1] expected", v); }
    else if (!strcmp(a, "--min-p")) { if (!cli_num_arg(v, 0, 1, &o->sampling.min_p)) return cli_usage("generate", "--min-p '%s': number in [0, 1] expected", v); }
    else if (!strcmp(a, "--context")) { if (!cli_int_arg(v, 1, max_count, &o->context)) return cli_usage("generate", "--context: integer in [1, %lld] expected", (long long)max_count); }
    else if (!strcmp(a, "--temperature")) { if (!cli_num_arg(v, 0, 1e6, &o->sampling.temperature)) return cli_usage("generate", "--temperature '%s': finite number in [0, 1e6] expected", v); }
    else if (!strcmp(a, "--seed")) { if (!cli_u64_arg(v, &o->seed)) return cli_usage("generate", "--seed '%s': integer >= 0 expected", v); }
    else if (!strcmp(a, "--precision")) { if ((o->precision = st_precision_from_name(v)) < 0) return cli_usage("generate", "--precision '%s': expected fp32 or bf16", v); }
    else if (!cli_transform_arg("generate", a, v, &o->xf, &rc)) rc = cli_usage("generate", "unknown option '%s'", a);
    return rc;
}

static int help(void) {
    printf("usage: stretch generate RUN_DIR|CHECKPOINT [options]: sample text from a trained model\n\n"
           "  --prompt TEXT        the text to continue (default: empty)\n"
           "  --prompt-file F|-    the prompt from a file or standard input (not with --prompt)\n"
           "  --tokens N           tokens to generate (default 200)\n"
           "  --temperature T      softmax temperature (default 0.8; 0: greedy argmax)\n"
           "  --top-k K            keep the K most likely tokens (default 40; 0: all)\n"
           "  --top-p P            nucleus: the smallest set with probability >= P (default 1: off)\n"
           "  --min-p M            drop tokens below M x the top probability (default 0: off)\n"
           "  --seed S             sampling seed (default 1)\n"
           "  --context N          tokens the model sees (default 1024; longer than training works\n"
           "                       for ALiBi and the other relative methods)\n"
           "  --no-cache           rerun the forward over the context for every token instead of the\n"
           "                       KV cache (while the text fits --context the logits are the same in fp32;\n"
           "                       in bf16 they differ by the cache's bf16 rounding of keys and values)\n"
           "  --precision P        fp32 or bf16 products and KV cache (default: the run's train.precision)\n"
           "  --transform NAME     inference-time transform: pi, ntk, dynamic_ntk, yarn, rerope (rope runs),\n"
           "                       alibi_interp (alibi runs); --scale S (default max(1, context / train.seq_len)),\n"
           "                       --clip W (rerope)\n"
           "  --sinks K --window W attention sinks + window (StreamingLLM): each query sees the first K\n"
           "                       tokens and its last W; --positions cache puts the sinks at their cache\n"
           "                       positions\n"
           "  --blockwise B        blockwise causal attention (xPos): each query sees its block of B tokens\n"
           "                       and the previous one, blocks counted from the text's first token\n"
           "docs: README.md (generate), docs/evaluation.md (transforms)\n");
    return -1;
}

/* ST_OK, a usage error, or -1 after printing the usage for --help (exit 0). */
static int parse_args(int argc, char **argv, gen_opts *o) {
    *o = (gen_opts){.prompt = "", .n_tokens = 200, .context = 1024, .seed = 1, .precision = -1,
                    .sampling = {.temperature = 0.8, .top_k = 40, .top_p = 1, .min_p = 0}};
    int prompt_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int rc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return help();
        if (!strcmp(a, "--no-cache")) { o->no_cache = 1; continue; }
        if (a[0] != '-') {
            if (o->src) return cli_usage("generate", "unexpected argument '%s'", a);
            o->src = a;
            if (cli_path_arg("generate", "RUN_DIR|CHECKPOINT", o->src)) return ST_ERR_CONFIG;
            continue;
        }
        if ((rc = cli_flag_value("generate", valued, argc, argv, &i, &v))) return rc;
        if (!v) return cli_usage("generate", "unknown option '%s'", a);
        if ((rc = parse_option(o, a, v))) return rc;
        if (!strcmp(a, "--prompt")) prompt_given = 1;
    }
    if (prompt_given && o->prompt_file) return cli_usage("generate", "give --prompt or --prompt-file, not both");
    if (!o->src) return cli_usage("generate", "needs a run directory or checkpoint");
    return ST_OK;
}

/* The trained run and the text so far. */
typedef struct gen_run {
    st_model m;
    st_run_config cfg;
    st_train_state ts;
    char tok_path[ST_PATH_BUF];
    st_tokenizer *tok;   /* NULL: the run has no tokenizer.json */
    int32_t *ids;        /* the prompt's ids, then the sampled ones */
    int64_t n, n_prompt;
    int64_t first_shown; /* 1 when ids[0] is the start token of a run without --prompt */
} gen_run;

static void free_run(gen_run *r) {
    free(r->ids);
    if (r->tok) st_tokenizer_free(r->tok);
    st_model_free(&r->m);
}

/* --prompt-file: the whole file (or standard input for "-") as the prompt, with its
 * newlines; a NUL byte would end the text early and is refused. */
static int read_prompt_file(gen_opts *o, st_error *e) {
    const size_t max = (size_t)256 << 20;
    size_t n = 0;
    if (strcmp(o->prompt_file, "-") != 0) {
        st_error le = {0};
        if (!(o->prompt_text = st_read_file(o->prompt_file, &n, max, &le)))
            return st_fail(e, le.code, "--prompt-file %s", le.msg);
    } else {
        size_t cap = 1 << 16;
        if (!(o->prompt_text = st_malloc(cap + 1, e))) return ST_ERR_MEMORY;
        size_t got;
        while ((got = fread(o->prompt_text + n, 1, cap - n, stdin)) > 0) {
            n += got;
            if (n == cap) {
                char *p = cap < max ? realloc(o->prompt_text, 2 * cap + 1) : NULL;
                if (!p) return st_fail(e, ST_ERR_MEMORY, "--prompt-file -: standard input is longer than %zu bytes", max);
                o->prompt_text = p;
                cap *= 2;
            }
        }
        if (ferror(stdin)) return st_fail(e, ST_ERR_IO, "--prompt-file -: cannot read standard input");
        o->prompt_text[n] = 0;
    }
    if (memchr(o->prompt_text, 0, n))
        return st_fail(e, ST_ERR_DATA, "--prompt-file %s: contains a NUL byte at offset %zu (not text)", o->prompt_file,
                       (size_t)((char *)memchr(o->prompt_text, 0, n) - o->prompt_text));
    o->prompt = o->prompt_text;
    return ST_OK;
}

/* The run's tokenizer and the prompt's ids (no prompt: token 0). */
static int encode_prompt(const gen_opts *o, gen_run *r, st_error *e) {
    struct stat sb;
    /* the run's tokenizer must be the one the checkpoint was trained with (same hash and
     * size): a tokenizer.json copied from another run would decode to wrong text */
    r->tok = stat(r->tok_path, &sb) == 0 ? st_tokenizer_load_expect(r->tok_path, r->ts.tok_hash, r->m.cfg.vocab_size, e) : NULL;
    if (!r->tok && !e->code) cli_warn_missing_tokenizer("generate", &r->cfg, r->tok_path, "token ids are printed");
    if (!r->tok && e->code) return e->code;
    const char *prompt = o->prompt;
    int64_t cap = o->n_tokens + (int64_t)strlen(prompt) + 1;
    if (!(r->ids = st_malloc((size_t)cap * sizeof(int32_t), e))) return ST_ERR_MEMORY;
    int64_t n = 0;
    r->first_shown = 0;
    if (prompt[0]) {
        n = r->tok ? st_tokenizer_encode(r->tok, prompt, (int64_t)strlen(prompt), r->ids, cap) : -1;
        if (n < 0)
            return st_fail(e, ST_ERR_DATA, "%s \"%.60s\": cannot be encoded by %s (a word or id outside the vocabulary%s)",
                           o->prompt_file ? "--prompt-file" : "--prompt", prompt, r->tok ? r->tok_path : "the run",
                           r->tok ? "" : "; the run has no tokenizer.json");
    }
    /* no prompt: start from <eos> (word level: the start of a line; its id is the vocabulary's,
     * 0 only for a train split that begins with a blank line), else token 0, a context the
     * text does not show */
    if (n <= 0) {
        const int32_t eos = r->tok ? st_tokenizer_eos(r->tok) : -1;
        r->ids[0] = eos >= 0 ? eos : 0;
        n = 1;
        r->first_shown = 1;
    }
    r->n = r->n_prompt = n;
    return ST_OK;
}

/* The model with its transform (the context clamped to what its positions represent),
 * its tokenizer and the prompt. On failure after the model loaded, all is freed. */
static int load_run(gen_opts *o, gen_run *r, st_error *e) {
    r->tok = NULL;
    r->ids = NULL;
    int rc = cli_load_trained(o->src, &r->m, &r->cfg, &r->ts, r->tok_path, sizeof r->tok_path, e);
    if (rc) return rc;
    const int64_t max_len = st_pos_max_len(&r->m.cfg);
    if (max_len > 0 && o->context > max_len) {
        st_log(ST_LOG_WARN, "--context %lld: %s positions represent %lld tokens (model.max_len); the context is %lld",
               (long long)o->context, st_pos_name(r->m.cfg.pos), (long long)max_len, (long long)max_len);
        o->context = max_len;
    }
    rc = use_transform(&r->m, &o->xf, r->cfg.train.seq_len, o->context, e);
    if (!rc) rc = encode_prompt(o, r, e);
    if (rc) free_run(r);
    return rc;
}

/* What the forwards need. */
typedef struct gen_engine {
    st_mm *mm;           /* the products' backend in the chosen precision */
    float *logits;       /* (2, V): the logits, then st_sample_token's work */
    st_arena ar;
    st_ctx ctx;
    st_kv_cache cache;   /* unused with --no-cache */
    int have_arena, have_ctx;
} gen_engine;

static int engine_init(gen_engine *g, const gen_opts *o, gen_run *r, st_error *e) {
    const int V = r->m.cfg.vocab_size;
    memset(&g->cache, 0, sizeof g->cache);
    /* precision: the products' backend, the weights' bf16 shadow and the cache's rows */
    const int precision = o->precision < 0 ? r->cfg.train.precision : o->precision;
    g->mm = NULL;
    int rc = st_mm_create_for(&g->mm, precision, 0, &r->m.params, e);
    g->logits = st_malloc(sizeof(float) * 2 * (size_t)V, e);
    if (!rc) rc = g->logits ? st_arena_init(&g->ar, (size_t)16 << 20, (size_t)-1, e) : ST_ERR_MEMORY;
    g->have_arena = !rc;
    if (!rc) rc = st_ctx_init(&g->ctx, &g->ar, 1 << 14, e);
    g->have_ctx = !rc;
    if (g->have_ctx) g->ctx.mm = g->mm;
    if (rc || o->no_cache) return rc;
    /* the cache never needs more than the tokens that are fed (the last one sampled is not);
     * a sliding cache under a window or blocks keeps the transform's keys, which --context
     * does not bound, so only the text's length caps them */
    const int64_t fed_max = r->n_prompt + o->n_tokens - 1;
    const int xf_slides = r->m.xf && (r->m.xf->window > 0 || r->m.xf->block > 0) && st_kv_cache_slides(r->m.cfg.pos);
    st_kv_cache *c = &g->cache;
    if ((rc = st_kv_cache_init(c, &r->m, o->context < fed_max && !xf_slides ? o->context : fed_max, precision, e)))
        return rc;
    /* grouped-query attention keeps n_kv_heads per layer: the cache shrinks by the group;
     * the total also holds what the method and block keep beside the rows, named here */
    st_log(ST_LOG_INFO, "kv cache: %lld rows x %d layers x %d key/value heads (of %d query heads) x %d, %s: %.1f MiB "
           "(%.0f bytes): keys and values%s%s%s%s", (long long)c->rows, c->n_layers, c->n_kv_heads, c->n_heads,
           c->head_dim, st_precision_name(c->precision), st_kv_cache_bytes(c) / 1048576.0, st_kv_cache_bytes(c),
           c->k2 || c->k2h ? ", unrotated keys" : "", c->bias ? ", bias tables" : "", c->gate ? ", gate sums" : "",
           c->shift ? ", shift rows" : "");
    return ST_OK;
}

static void engine_free(gen_engine *g) {
    st_kv_cache_free(&g->cache);
    st_mm_free(g->mm);
    if (g->have_ctx) st_ctx_free(&g->ctx);
    if (g->have_arena) st_arena_free(&g->ar);
    free(g->logits);
}

/* The logits after ids[0..n) through the cache; ids[0..*fed) are in it (or were dropped
 * from it). */
static int decode_step(gen_engine *g, gen_run *r, int64_t *fed, st_error *e) {
    st_kv_cache *cache = &g->cache;
    const int64_t n = r->n;
    /* first call, or an absolute-position window that would slide: (re)prefill the
     * last window of tokens; otherwise feed what is new (one token) */
    if (*fed == 0 || st_kv_cache_must_reset(cache, &r->m, n - *fed)) {
        st_kv_cache_reset(cache);
        /* a window transform streams the whole prompt (its sinks are the text's first
         * tokens; the cache keeps sinks + window as it goes), and so do blocks (counted
         * from the text's first token; the cache keeps the last two blocks) */
        const int stream_all = r->m.xf && (r->m.xf->window > 0 || r->m.xf->block > 0) && cache->slides;
        *fed = n > cache->window && !stream_all ? n - cache->window : 0;
    }
    int rc = st_model_decode(&r->m, cache, &g->ctx, r->ids + *fed, n - *fed, g->logits, e);
    *fed = n;
    return rc;
}

/* The text as it grows: written to stdout and flushed token by token, so what was
 * generated before a Ctrl-C (which ends the process by the default action) is on the
 * terminal or in the file: the run's tokenizer's pieces (st_tokenizer_decode_next, the
 * bytes st_tokenizer_decode gives for the whole text), or the ids joined by spaces when
 * the run has none. The start token of a run without --prompt is context, not text: it
 * is not shown (it is token 0, a NUL byte in a byte or BPE run, which once ended the
 * printed text before its first character). A NUL byte the model samples is written as
 * it is, like any other byte. */
typedef struct gen_stream {
    int64_t shown;   /* ids[first_shown..shown) are written */
    int ended;       /* an undecodable id ended the text */
} gen_stream;

/* One token's piece after its predecessor; 0 when the text ends at it. */
static int stream_token(const gen_run *r, int64_t i) {
    const int first = i == r->first_shown;
    const int32_t prev = first ? -1 : r->ids[i - 1];
    if (!r->tok) return printf(first ? "%d" : " %d", r->ids[i]) >= 0;
    char buf[256], *piece = buf;
    int64_t len = st_tokenizer_decode_next(r->tok, prev, r->ids[i], buf, sizeof buf);
    if (len >= (int64_t)sizeof buf && (piece = malloc((size_t)len + 1)) != NULL)
        st_tokenizer_decode_next(r->tok, prev, r->ids[i], piece, len + 1);
    if (len < 0 || !piece) return 0;
    fwrite(piece, 1, (size_t)len, stdout);
    if (piece != buf) free(piece);
    return 1;
}

/* Write ids[s->shown..r->n) and flush: ST_OK, or ST_ERR_IO when standard output cannot
 * take the text (a full disk, a closed descriptor): the text the user asked for is lost,
 * so generating on would only waste the time. */
static int stream_text(const gen_run *r, gen_stream *s, st_error *e) {
    if (s->shown < r->first_shown) s->shown = r->first_shown;
    for (; s->shown < r->n; s->shown++)
        if (!s->ended && !stream_token(r, s->shown)) s->ended = 1;
    errno = 0;
    if (fflush(stdout) != EOF && !ferror(stdout)) return ST_OK;
    return st_fail(e, ST_ERR_IO, "standard output: cannot write the text%s%s", errno ? ": " : "",
                   errno ? strerror(errno) : "");
}

/* Sample --tokens tokens after the prompt, streaming the text (the prompt first). */
static int generate(gen_engine *g, const gen_opts *o, gen_run *r, gen_stream *out, st_error *e) {
    const int V = r->m.cfg.vocab_size;
    st_rng rng;
    st_rng_seed(&rng, o->seed);
    int64_t fed = 0;
    const double t0 = st_time();
    /* a sliding cache with a window keeps the text's first sinks whatever its length, and
     * counts blocks from the text's first token; --no-cache's forward over the last
     * --context tokens has that span's sinks and blocks instead. The last token sampled is
     * never fed, so the longest forward covers n_prompt + n_tokens - 1 tokens */
    const int past = o->no_cache && st_kv_cache_slides(r->m.cfg.pos) && r->n_prompt + o->n_tokens - 1 > o->context;
    if (past && o->xf.window > 0)
        st_log(ST_LOG_WARN, "generate --no-cache: the text will pass --context %lld: from there each forward covers "
               "the last %lld tokens, whose first %lld are its sinks, while the KV cache keeps the text's first ones "
               "(the two agree while the text fits --context)", (long long)o->context, (long long)o->context,
               (long long)o->xf.sinks);
    if (past && o->xf.block > 0)
        st_log(ST_LOG_WARN, "generate --no-cache: the text will pass --context %lld: from there each forward counts "
               "its blocks of %lld from the first of the last %lld tokens, while the KV cache counts them from the "
               "text's first token (the two agree while the text fits --context)", (long long)o->context,
               (long long)o->xf.block, (long long)o->context);
    int rc = stream_text(r, out, e);
    while (!rc && r->n < r->n_prompt + o->n_tokens) {
        st_ctx_begin(&g->ctx, 0, 0);
        if (o->no_cache) rc = window_logits(&r->m, &g->ctx, r->ids, r->n, o->context, g->logits, e);
        else rc = decode_step(g, r, &fed, e);
        if (!rc) r->ids[r->n++] = st_sample_token(g->logits, V, &o->sampling, &rng, g->logits + V);
        if (!rc) rc = stream_text(r, out, e);
    }
    if (rc) return rc;
    const double dt = st_time() - t0;
    const int64_t new_tokens = r->n - r->n_prompt;
    st_log(ST_LOG_INFO, "generate: %lld tokens in %.2f s (%.1f tokens/s, %s, context %lld)",
           (long long)new_tokens, dt, dt > 0 ? (double)new_tokens / dt : 0.0,
           o->no_cache ? "--no-cache" : "kv cache", (long long)o->context);
    return ST_OK;
}

int cmd_generate(int argc, char **argv) {
    gen_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? ST_OK : rc;
    st_error e = {0};
    gen_run r = {0};
    if (o.prompt_file && read_prompt_file(&o, &e)) {
        free(o.prompt_text);
        return cli_report("generate", &e);
    }
    if (load_run(&o, &r, &e)) {
        free(o.prompt_text);
        return cli_report("generate", &e);
    }
    gen_engine g;
    gen_stream out = {0};
    rc = engine_init(&g, &o, &r, &e);
    if (!rc) rc = generate(&g, &o, &r, &out, &e);
    /* the line ends after the text, or after the part written before an error */
    if (!rc || out.shown > r.first_shown) {
        putchar('\n');
        fflush(stdout);
    }
    engine_free(&g);
    free_run(&r);
    free(o.prompt_text);
    return rc ? cli_report("generate", &e) : ST_OK;
}
