/* config_schema.c - every key of a run config: JSON path, type, struct field, range and
 * allowed names. One table drives parsing, --set, saving, diffs and range checks, so a
 * key added here is handled everywhere (and must be documented in configs/README.md).
 * This table is the only place a key's type, default and range are defined
 * (st_run_config_default and the modules' st_*_config_default apply its defaults): configs/README.md's
 * tables are checked against it (test_config), and the modules' validators
 * (st_model_config_validate, st_data_config_validate) keep only rules that relate keys
 * (n_heads | d_model, ...) and guards against sizes a direct library caller could pass
 * that would crash. */
#include "config_schema.h"
#include "st_matmul.h"
#include "st_task.h"
#include "st_transform.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* ---- names of enumerations owned here ---- */
static const st_cname rf_scope_names[] = {
    {"fixed", ST_RF_FIXED}, {"layer", ST_RF_PER_LAYER}, {"head", ST_RF_PER_HEAD}};
static const st_cname rf_param_names[] = {{"softplus", ST_RF_SOFTPLUS}, {"log", ST_RF_LOG}};
static const st_cname kerple_kind_names[] = {{"log", ST_KERPLE_LOG}, {"power", ST_KERPLE_POWER}};
static const st_cname gelu_names[] = {{"tanh", 0}, {"erf", 1}};
static const st_cname source_names[] = {{"synthetic", 0}, {"wikitext", 1}, {"text", 2}, {"task", 3}};
static const st_cname task_loss_names[] = {{"answer", 0}, {"all", 1}};
static const st_cname task_format_names[] = {{"plain", 0}, {"reversed", 1}};
static const st_cname task_queries_names[] = {{"each", 0}, {"random", 1}};
static const st_cname tokenizer_names[] = {{"auto", 0}, {"word", 1}, {"byte", 2}, {"bpe", 3}, {"synthetic", 4}, {"task", 5}};
static const st_cname syn_mode_names[] = {{"markov", 0}, {"copy", 1}};
static const st_cname optim_names[] = {{"adamw", ST_OPT_ADAMW}, {"sgd", ST_OPT_SGD}};
static const st_cname nodecay_names[] = {
    {"bias", ST_NODECAY_BIAS}, {"norm", ST_NODECAY_NORM}, {"embedding", ST_NODECAY_EMBEDDING}};
static const st_cname sched_names[] = {
    {"constant", ST_SCHED_CONSTANT}, {"cosine", ST_SCHED_COSINE}, {"inv_sqrt", ST_SCHED_INV_SQRT},
    {"linear", ST_SCHED_LINEAR}, {"wsd", ST_SCHED_WSD}};
static const st_cname nonfinite_names[] = {{"error", ST_NONFINITE_ERROR}, {"skip", ST_NONFINITE_SKIP}};
static const st_cname split_names[] = {{"valid", ST_SPLIT_VALID}, {"test", ST_SPLIT_TEST}};
static const st_cname mode_names[] = {{"nonoverlapping", ST_EVAL_NONOVERLAPPING}, {"sliding", ST_EVAL_SLIDING}};
static const st_cname positions_names[] = {{"text", ST_SINK_POS_TEXT}, {"cache", ST_SINK_POS_CACHE}};

#define NAMES(t) { t, (int)(sizeof t / sizeof t[0]), NULL, NULL, 0 }
static const st_cenum en_pos = { NULL, 0, st_pos_from_name, st_pos_name, ST_POS_COUNT };
static const st_cenum en_precision = { NULL, 0, st_precision_from_name, st_precision_name, ST_PREC_COUNT };
static const st_cenum en_transform = { NULL, 0, st_transform_from_name, st_transform_name, ST_XF_COUNT };
static const st_cenum en_rf_kind = { NULL, 0, st_rf_from_name, st_rf_name, ST_RF_COUNT };
static const st_cenum en_rf_scope = NAMES(rf_scope_names);
static const st_cenum en_rf_param = NAMES(rf_param_names);
static const st_cenum en_kerple_kind = NAMES(kerple_kind_names);
static const st_cenum en_attn_scale = { NULL, 0, st_attn_scale_from_name, st_attn_scale_name, ST_ATTN_SCALE_COUNT };
static const st_cenum en_gelu = NAMES(gelu_names);
static const st_cenum en_norm = { NULL, 0, st_norm_from_name, st_norm_name, ST_NORM_COUNT };
static const st_cenum en_ffn = { NULL, 0, st_ffn_from_name, st_ffn_name, ST_FFN_COUNT };
static const st_cenum en_qk_norm = { NULL, 0, st_qk_norm_from_name, st_qk_norm_name, ST_QK_NORM_COUNT };
static const st_cenum en_out_gate = { NULL, 0, st_out_gate_from_name, st_out_gate_name, ST_OUT_GATE_COUNT };
static const st_cenum en_out_norm = { NULL, 0, st_out_norm_from_name, st_out_norm_name, ST_OUT_NORM_COUNT };
static const st_cenum en_kv_shift = { NULL, 0, st_kv_shift_from_name, st_kv_shift_name, ST_KV_SHIFT_COUNT };
static const st_cenum en_source = NAMES(source_names);
static const st_cenum en_tokenizer = NAMES(tokenizer_names);
static const st_cenum en_syn_mode = NAMES(syn_mode_names);
static const st_cenum en_task = { NULL, 0, st_task_index, st_task_name_at, ST_TASK_COUNT };
static const st_cenum en_task_loss = NAMES(task_loss_names);
static const st_cenum en_task_format = NAMES(task_format_names);
static const st_cenum en_task_queries = NAMES(task_queries_names);
static const st_cenum en_optim = NAMES(optim_names);
static const st_cenum en_nodecay = NAMES(nodecay_names);
static const st_cenum en_sched = NAMES(sched_names);
static const st_cenum en_nonfinite = NAMES(nonfinite_names);
static const st_cenum en_split = NAMES(split_names);
static const st_cenum en_mode = NAMES(mode_names);
static const st_cenum en_positions = NAMES(positions_names);

#define OFF(f) offsetof(st_run_config, f)
#define SZ(f) sizeof(((st_run_config *)0)->f)
/* The last argument of each row is the key's default, written as for --set (JSON, or bare
 * text for a string); NULL: zero / empty, or derived when the config is loaded. */
#define OBJ(p)                    { p, CK_OBJ, 0, 0, 0, 0, 0, 0, NULL, NULL }
#define INT(p, f, lo, hi, d)      { p, CK_INT, OFF(f), 0, 0, lo, hi, 0, NULL, d }
#define I64(p, f, lo, hi, d)      { p, CK_I64, OFF(f), 0, 0, lo, hi, 0, NULL, d }
/* seeds stop below 2^53: 2^53 + 1 reads as the double 2^53, so a range that admitted 2^53
 * would take a seed the file does not hold */
#define U64(p, f, d)              { p, CK_U64, OFF(f), 0, 0, 0, 9007199254740991.0, 0, NULL, d }
#define FLT(p, f, lo, hi, x, d)   { p, CK_FLOAT, OFF(f), 0, 0, lo, hi, x, NULL, d }
#define DBL(p, f, lo, hi, d)      { p, CK_DOUBLE, OFF(f), 0, 0, lo, hi, 0, NULL, d }
#define BOOL(p, f, d)             { p, CK_BOOL, OFF(f), 0, 0, 0, 1, 0, NULL, d }
#define ENUM(p, f, e, d)          { p, CK_ENUM, OFF(f), 0, 0, 0, 0, 0, &e, d }
#define STR(p, f, e, d)           { p, CK_STR, OFF(f), SZ(f), 0, 0, 0, 0, e, d }
#define PATH(p, f, d)             { p, CK_PATH, OFF(f), SZ(f), 0, 0, 0, 0, NULL, d }
#define MASK(p, f, e, d)          { p, CK_MASK, OFF(f), 0, 0, 0, 0, 0, &e, d }

#define BIG 1e12   /* step counts */

/* Parents come before their children and children are contiguous (the saver relies on
 * the order; it is also the order of configs/README.md). */
const st_ckey st_config_keys[] = {
    OBJ("model"),
    INT("model.vocab_size", model.vocab_size, 0, 1 << 24, "0"),
    INT("model.n_layers", model.n_layers, 1, 256, "4"),
    INT("model.d_model", model.d_model, 1, 1 << 16, "256"),
    INT("model.n_heads", model.n_heads, 1, ST_MAX_HEADS, "8"),
    INT("model.d_ff", model.d_ff, 0, 1 << 20, "0"),
    /* the decoder block (src/model/block.c) */
    ENUM("model.norm", model.norm, en_norm, "layernorm"),
    ENUM("model.ffn", model.ffn, en_ffn, "gelu"),
    BOOL("model.bias", model.bias, "true"),
    ENUM("model.qk_norm", model.qk_norm, en_qk_norm, "none"),
    ENUM("model.out_gate", model.out_gate, en_out_gate, "none"),
    ENUM("model.out_norm", model.out_norm, en_out_norm, "none"),
    ENUM("model.kv_shift", model.kv_shift, en_kv_shift, "none"),
    INT("model.n_kv_heads", model.n_kv_heads, -1, 256, "-1"),
    ENUM("model.pos", model.pos, en_pos, "alibi"),
    INT("model.max_len", model.max_len, 1, 1 << 24, "1024"),
    BOOL("model.tie_embeddings", model.tie_embeddings, "true"),
    FLT("model.embed_scale", model.embed_scale, 0, 1e6, 0, "1"),
    FLT("model.dropout_emb", model.dropout_emb, 0, 0.99, 0, "0"),
    FLT("model.dropout_attn", model.dropout_attn, 0, 0.99, 0, "0"),
    FLT("model.dropout_resid", model.dropout_resid, 0, 0.99, 0, "0"),
    ENUM("model.gelu", model.gelu_exact, en_gelu, "tanh"),
    FLT("model.ln_eps", model.ln_eps, 0, 1, 1, "1e-5"),
    FLT("model.init_std", model.init_std, 0, 10, 1, "0.02"),
    /* log-n attention scaling (any method; src/model/attn_scale.c) */
    ENUM("model.attn_scale", model.attn_scale, en_attn_scale, "none"),
    INT("model.attn_scale_len", model.attn_scale_len, 0, 1 << 24, "0"),
    /* trained position scaling (context extension; src/model/transform.c, model/config.c) */
    OBJ("model.scaling"),
    ENUM("model.scaling.transform", model.scaling, en_transform, "none"),
    DBL("model.scaling.scale", model.scaling_scale, 1, 1e6, "1"),
    INT("model.scaling.train_len", model.scaling_len, 0, 1 << 24, "0"),
    { "model.scaling.yarn_alpha", CK_DOUBLE, OFF(model.yarn_alpha), 0, 0, 0, 1e6, 1, NULL, ST_XF_TEXT(ST_YARN_ALPHA) },   /* (0, 1e6] */
    { "model.scaling.yarn_beta", CK_DOUBLE, OFF(model.yarn_beta), 0, 0, 0, 1e6, 1, NULL, ST_XF_TEXT(ST_YARN_BETA) },
    /* position methods' keys, grouped per method (src/model/pos/<method>.c reads them);
     * alibi, alibi_rf */
    FLT("model.alibi_max_bias", model.alibi_max_bias, 0, 64, 1, "8"),
    INT("model.alibi_heads", model.alibi_heads, 0, ST_MAX_HEADS, "0"),
    OBJ("model.rf"),
    ENUM("model.rf.kind", model.rf_kind, en_rf_kind, "exp"),
    ENUM("model.rf.scope", model.rf_scope, en_rf_scope, "fixed"),
    ENUM("model.rf.param", model.rf_param, en_rf_param, "softplus"),
    FLT("model.rf.rho", model.rf_rho, 0, 1e7, 1, "64"),
    /* rope */
    FLT("model.rope_base", model.rope_base, 1, 1e12, 1, "10000"),
    /* t5 */
    INT("model.t5_buckets", model.t5_buckets, 2, 4096, "32"),
    INT("model.t5_max_distance", model.t5_max_distance, 1, 1 << 24, "128"),
    /* kerple */
    OBJ("model.kerple"),
    ENUM("model.kerple.kind", model.kerple_kind, en_kerple_kind, "log"),
    /* fire */
    OBJ("model.fire"),   /* defaults: Li et al. 2023, MLP 1 -> 32 -> H, c = 0.1, L = 512 */
    INT("model.fire.hidden", model.fire_hidden, 1, ST_FIRE_MAX_HIDDEN, "32"),
    FLT("model.fire.c", model.fire_c, 0, 1e6, 1, "0.1"),
    FLT("model.fire.threshold", model.fire_threshold, 0, 1e9, 1, "512"),
    /* xpos */
    OBJ("model.xpos"),
    FLT("model.xpos.gamma", model.xpos_gamma, 0, 1e9, 1, "512"),
    /* cope */
    OBJ("model.cope"),
    INT("model.cope.n_pos", model.cope_npos, 1, 1 << 20, "64"),
    /* Abacus embeddings (any method): McLeish et al. 2024 */
    OBJ("model.abacus"),
    INT("model.abacus.rows", model.abacus_rows, 0, 1 << 20, "0"),
    INT("model.abacus.digit0", model.abacus_digit0, -1, 1 << 24, "-1"),

    OBJ("data"),
    STR("data.source", data.source, &en_source, "synthetic"),
    PATH("data.path", data.path, NULL),
    STR("data.tokenizer", data.tokenizer, &en_tokenizer, "auto"),
    INT("data.bpe_vocab", data.bpe_vocab, 257, 262144, "512"),
    PATH("data.cache_dir", data.cache_dir, NULL),
    FLT("data.valid_frac", data.valid_frac, 0, 0.5, 1, "0.05"),
    FLT("data.test_frac", data.test_frac, 0, 0.5, 1, "0.05"),
    OBJ("data.passkey"),
    DBL("data.passkey.rate", data.pk_rate, 0, 1, "0"),
    INT("data.passkey.digits", data.pk_digits, 1, ST_PASSKEY_MAX_DIGITS, "5"),
    OBJ("data.task"),
    STR("data.task.name", data.task_name, &en_task, "copy"),
    I64("data.task.min_size", data.task_min_size, 1, ST_TASK_MAX_SIZE, "1"),
    I64("data.task.max_size", data.task_max_size, 1, ST_TASK_MAX_SIZE, "16"),
    INT("data.task.symbols", data.task_symbols, 2, ST_TASK_MAX_SYMBOLS, "16"),
    STR("data.task.loss", data.task_loss, &en_task_loss, "answer"),
    BOOL("data.task.pack", data.task_pack, "false"),
    BOOL("data.task.doc_mask", data.task_doc_mask, "false"),
    STR("data.task.format", data.task_format, &en_task_format, "plain"),
    STR("data.task.queries", data.task_queries, &en_task_queries, "each"),
    INT("data.task.digits", data.task_digits, 1, ST_TASK_MAX_DIGITS, "5"),
    DBL("data.task.ignore_prob", data.task_ignore_prob, 0, 1, "0.8"),
    DBL("data.task.blank_prob", data.task_blank_prob, 0, 1, "0.75"),
    INT("data.task.needles", data.task_needles, 2, ST_TASK_MAX_NEEDLES, "4"),
    INT("data.task.hops", data.task_hops, 1, ST_TASK_MAX_HOPS, "4"),
    INT("data.task.chains", data.task_chains, 1, ST_TASK_MAX_CHAINS, "2"),
    INT("data.task.max_count", data.task_max_count, 0, ST_TASK_MAX_SIZE, "0"),
    OBJ("data.synthetic"),
    U64("data.synthetic.seed", data.syn_seed, "1234"),
    INT("data.synthetic.vocab", data.syn_vocab, 2, 65536, "64"),
    INT("data.synthetic.order", data.syn_order, 1, 20, "2"),
    INT("data.synthetic.branch", data.syn_branch, 1, 1 << 24, "4"),
    { "data.synthetic.tokens", CK_I64_3, OFF(data.syn_tokens), 3, 0, 1, 2147483648.0, 0, NULL, "[1000000, 100000, 100000]" },
    STR("data.synthetic.mode", data.syn_mode, &en_syn_mode, "markov"),
    OBJ("data.synthetic.copy"),
    INT("data.synthetic.copy.len", data.copy_len, 1, 1 << 20, "8"),
    INT("data.synthetic.copy.min_dist", data.copy_min_dist, 2, 1 << 20, "9"),
    INT("data.synthetic.copy.max_dist", data.copy_max_dist, 2, 1 << 20, "24"),
    DBL("data.synthetic.copy.decay", data.copy_decay, 0, 100, "0.1"),
    { "data.synthetic.copy.rate", CK_DOUBLE, OFF(data.copy_rate), 0, 0, 0, 1, 1, NULL, "0.25" },   /* (0, 1] */

    OBJ("train"),
    U64("train.seed", train.seed, "1"),
    INT("train.batch_size", train.batch_size, 1, 1 << 20, "16"),
    INT("train.seq_len", train.seq_len, 1, 1 << 24, "128"),
    I64("train.steps", train.steps, 0, BIG, "1000"),
    INT("train.grad_accum", train.grad_accum, 1, 1 << 16, "1"),
    I64("train.random_positions", train.random_positions, 0, 1 << 24, "0"),
    INT("train.abacus_max_k", train.abacus_max_k, 0, 1 << 20, "0"),
    OBJ("train.optimizer"),
    ENUM("train.optimizer.name", train.optim.name, en_optim, "adamw"),
    FLT("train.optimizer.lr", train.optim.lr, 0, 100, 1, "0.001"),
    FLT("train.optimizer.beta1", train.optim.beta1, 0, 0.999999, 0, "0.9"),
    FLT("train.optimizer.beta2", train.optim.beta2, 0, 0.999999, 0, "0.98"),
    FLT("train.optimizer.eps", train.optim.eps, 0, 1, 1, "1e-8"),
    FLT("train.optimizer.weight_decay", train.optim.weight_decay, 0, 100, 0, "0.01"),
    FLT("train.optimizer.momentum", train.optim.momentum, 0, 0.999999, 0, "0"),
    MASK("train.optimizer.no_decay", train.optim.no_decay, en_nodecay, "[\"bias\", \"norm\"]"),
    OBJ("train.schedule"),
    ENUM("train.schedule.kind", train.sched.kind, en_sched, "cosine"),
    I64("train.schedule.warmup", train.sched.warmup, 0, BIG, "100"),
    FLT("train.schedule.min_lr_ratio", train.sched.min_lr_ratio, 0, 1, 0, "0.1"),
    DBL("train.schedule.decay_frac", train.sched.decay_frac, 0, 1, "0.2"),   /* a double: round(frac x steps) as typed */
    FLT("train.clip_norm", train.clip_norm, 0, 1e9, 0, "1"),
    I64("train.eval_every", train.eval_every, 0, BIG, "200"),
    INT("train.eval_batches", train.eval_batches, 0, 1 << 20, "20"),
    INT("train.patience", train.patience, 0, 1 << 20, "0"),
    I64("train.checkpoint_every", train.checkpoint_every, 0, BIG, "500"),
    INT("train.keep_last", train.keep_last, 1, 1 << 20, "2"),
    INT("train.threads", train.threads, 0, 4096, "0"),
    ENUM("train.precision", train.precision, en_precision, "fp32"),
    ENUM("train.nonfinite", train.nonfinite, en_nonfinite, "error"),
    INT("train.nonfinite_limit", train.nonfinite_limit, 0, 1 << 30, "100"),
    I64("train.log_every", train.log_every, 1, BIG, "10"),
    DBL("train.max_seconds", train.max_seconds, 0, 1e9, "0"),
    PATH("train.init_from", train.init_from, NULL),

    OBJ("eval"),
    { "eval.lengths", CK_I64_LIST, OFF(eval.lengths), ST_EVAL_MAX_LENGTHS, OFF(eval.n_lengths),
      1, 1 << 24, 0, NULL, NULL },   /* default: T, 2T, 4T, 8T of train.seq_len */
    ENUM("eval.split", eval.split, en_split, "valid"),
    ENUM("eval.mode", eval.mode, en_mode, "nonoverlapping"),
    I64("eval.stride", eval.stride, 0, 1 << 24, "0"),
    I64("eval.max_tokens", eval.max_tokens, 0, BIG, "0"),
    INT("eval.buckets", eval.buckets, 0, 1 << 16, "16"),
    ENUM("eval.transform", eval.transform, en_transform, "none"),
    DBL("eval.transform_scale", eval.transform_scale, 0, 1e6, "0"),
    I64("eval.sinks", eval.sinks, 0, 1 << 24, "0"),
    I64("eval.window", eval.window, 0, 1 << 24, "0"),
    I64("eval.clip", eval.clip, 0, 1 << 24, "0"),
    I64("eval.blockwise", eval.blockwise, 0, 1 << 24, "0"),
    ENUM("eval.positions", eval.positions, en_positions, "text"),
    BOOL("eval.attn_stats", eval.attn_stats, "false"),
};
const int st_config_nkeys = (int)(sizeof st_config_keys / sizeof st_config_keys[0]);

int st_config_range(const char *path, double *lo, double *hi, int *xlo, int *integral) {
    const st_ckey *k = st_config_find_key(path);
    if (!k || k->kind == CK_OBJ || k->kind == CK_STR || k->kind == CK_PATH || k->kind == CK_ENUM || k->kind == CK_MASK ||
        k->kind == CK_BOOL)
        return 0;
    *lo = k->min;
    *hi = k->max;
    *xlo = k->xmin;
    *integral = k->kind == CK_INT || k->kind == CK_I64 || k->kind == CK_U64 || k->kind == CK_I64_LIST ||
                k->kind == CK_I64_3;
    return 1;
}

const st_ckey *st_config_find_key(const char *path) {
    for (int i = 0; i < st_config_nkeys; i++)
        if (strcmp(st_config_keys[i].path, path) == 0) return &st_config_keys[i];
    return NULL;
}

int st_cenum_from(const st_cenum *en, const char *name) {
    if (en->from) return en->from(name);
    for (int i = 0; i < en->n; i++)
        if (strcmp(en->names[i].name, name) == 0) return en->names[i].value;
    return -1;
}

const char *st_cenum_to(const st_cenum *en, int value) {
    if (en->to) return value >= 0 && value < en->count ? en->to(value) : NULL;
    for (int i = 0; i < en->n; i++)
        if (en->names[i].value == value) return en->names[i].name;
    return NULL;
}

void st_cenum_list(const st_cenum *en, char *buf, size_t n) {
    int count = en->to ? en->count : en->n;
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < count && used < n; i++) {
        const char *name = en->to ? en->to(i) : en->names[i].name;
        const char *sep = i == 0 ? "" : i == count - 1 ? " or " : ", ";
        int k = snprintf(buf + used, n - used, "%s\"%s\"", sep, name ? name : "?");
        if (k < 0) break;
        used += (size_t)k;
    }
}

/* ------------------------------------------------------------ messages ---- */
/* Where a value came from: "FILE: model.d_model" or "--set model.d_model". */
void st_ckey_where(char *buf, size_t n, const char *file, const char *path) {
    if (file) snprintf(buf, n, "%s: %s", file, path);
    else snprintf(buf, n, "--set %s", path);
}

/* Shortest text that reads back as the same double (or, for a value that is a float, as
 * the same float: a float key's 0.6 is 0.6000000238418579 as a double); integers up to
 * 1e9 in full, larger magnitudes as "1e12" / "1.23e29" (a count of digits is
 * unreadable), 2^53 - 1 by name. */
static void num(char *buf, size_t n, double d) {
    if (d == 9007199254740991.0) { snprintf(buf, n, "2^53 - 1"); return; }
    if (d == floor(d) && fabs(d) <= 1e9) { snprintf(buf, n, "%.0f", d); return; }
    /* the float shortcut is for fractions (0.6f); an integer is printed exactly (probe 28:
     * 2^53 as "9.007199e15", 2^31 as "2.1474836e9", which read back as other numbers) */
    const int is_float = isfinite(d) && d != floor(d) && (double)(float)d == d;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        const double back = strtod(buf, NULL);
        if (back == d || (is_float && (float)back == (float)d)) break;
    }
    char *x = strchr(buf, 'e');   /* "1e+12" -> "1e12", "1e-05" -> "1e-5" */
    if (x) {
        char *digits = x + 1 + (x[1] == '+' || x[1] == '-'), *from = digits;
        while (*from == '0' && from[1]) from++;
        if (x[1] == '+') digits--;
        memmove(digits, from, strlen(from) + 1);
    }
}

/* Always the whole range, upper bound included: "must be in [1, 1e12], got 1.23e29". */
int st_ckey_range_error(st_error *e, const char *loc, const st_ckey *k, double x) {
    char lo[32], hi[32], got[32];
    num(lo, sizeof lo, k->min);
    num(hi, sizeof hi, k->max);
    num(got, sizeof got, x);
    return st_fail(e, ST_ERR_CONFIG, "%s: must be in %c%s, %s], got %s", loc, k->xmin ? '(' : '[', lo, hi, got);
}

int st_ckey_in_range(const st_ckey *k, double x) {
    if (k->kind == CK_FLOAT) {
        /* a float key's bounds as floats too: 0.99 is stored as 0.99000001f, which the
         * double bound 0.99 refused ("must be in [0, 0.99], got 0.99") */
        const float v = (float)x;
        if (!isfinite(v) || v > (float)k->max) return 0;
        return k->xmin ? v > (float)k->min : v >= (float)k->min;
    }
    if (!isfinite(x) || x > k->max) return 0;
    return k->xmin ? x > k->min : x >= k->min;
}
