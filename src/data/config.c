/* config.c - the data section of a run config: range checks (its defaults are rows of the
 * key table, src/train/config_schema.c).
 * Parsing JSON into st_data_config is the trainer's config parser's job; this file only
 * knows what values are acceptable. Messages read "FILE: data.<key>: what is wrong". */
#include "st_data.h"
#include "st_task.h"

#include <math.h>
#include <string.h>

const char *st_data_tokenizer_name(const st_data_config *c) {
    if (strcmp(c->tokenizer, "auto") != 0 && c->tokenizer[0]) return c->tokenizer;
    if (!strcmp(c->source, "wikitext")) return "word";
    if (!strcmp(c->source, "text")) return "byte";
    if (!strcmp(c->source, "task")) return "task";
    return "synthetic";
}

/* memchr-based check that a fixed char array holds a terminated string */
static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

/* mode "copy": the recall segments' parameters (the process is in synthetic_copy.c) */
static int validate_copy(const st_data_config *c, const char *f, st_error *e) {
    int copy = !strcmp(c->syn_mode, "copy");
    if (!copy && strcmp(c->syn_mode, "markov") != 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.mode: expected \"markov\" or \"copy\", got \"%s\"", f,
                       c->syn_mode);
    if (!copy) return ST_OK;
    if (c->syn_vocab == 65536)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.vocab: mode \"copy\" adds a marker symbol; vocab must be "
                       "<= 65535, got %d", f, c->syn_vocab);
    if (c->copy_len < c->syn_order || c->copy_len > 1 << 20)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.copy.len: must be in [synthetic.order = %d, 2^20], got %d", f,
                       c->syn_order, c->copy_len);
    if (c->copy_max_dist < c->copy_len + 1 || c->copy_max_dist > 1 << 20)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.copy.max_dist: must be in [copy.len + 1 = %d, 2^20], got %d",
                       f, c->copy_len + 1, c->copy_max_dist);
    if (c->copy_min_dist <= c->copy_len || c->copy_min_dist > c->copy_max_dist)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.copy.min_dist: must be in [copy.len + 1 = %d, copy.max_dist "
                       "= %d] (the copied span ends before the marker), got %d", f, c->copy_len + 1, c->copy_max_dist,
                       c->copy_min_dist);
    if (!isfinite(c->copy_decay) || c->copy_decay < 0.0 || c->copy_decay > 100.0)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.copy.decay: must be in [0, 100], got %g", f, c->copy_decay);
    if (!isfinite(c->copy_rate) || c->copy_rate <= 0.0 || c->copy_rate > 1.0)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.copy.rate: must be in (0, 1], got %g", f, c->copy_rate);
    return ST_OK;
}

int st_data_config_validate(const st_data_config *c, const char *file, st_error *e) {
    const char *f = file && *file ? file : "config";
    if (!terminated(c->source, sizeof c->source) || !terminated(c->tokenizer, sizeof c->tokenizer) ||
        !terminated(c->path, sizeof c->path) || !terminated(c->cache_dir, sizeof c->cache_dir) ||
        !terminated(c->syn_mode, sizeof c->syn_mode))
        return st_fail(e, ST_ERR_CONFIG, "%s: data: a string field is not terminated", f);

    int syn = !strcmp(c->source, "synthetic"), wiki = !strcmp(c->source, "wikitext"),
        text = !strcmp(c->source, "text"), task = !strcmp(c->source, "task");
    if (!syn && !wiki && !text && !task)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.source: expected \"synthetic\", \"wikitext\", \"text\" or \"task\", "
                       "got \"%s\"", f, c->source);
    const char *tok = st_data_tokenizer_name(c);
    int t_word = !strcmp(tok, "word"), t_byte = !strcmp(tok, "byte"), t_bpe = !strcmp(tok, "bpe"),
        t_syn = !strcmp(tok, "synthetic"), t_task = !strcmp(tok, "task");
    if (!t_word && !t_byte && !t_bpe && !t_syn && !t_task)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.tokenizer: expected \"auto\", \"word\", \"byte\", \"bpe\", "
                       "\"synthetic\" or \"task\", got \"%s\"", f, c->tokenizer);
    if (syn != t_syn || task != t_task)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.tokenizer: \"%s\" does not go with data.source \"%s\"%s", f, tok,
                       c->source, syn ? " (use \"synthetic\" or \"auto\")" : task ? " (use \"task\" or \"auto\")"
                                                                              : " (use \"word\", \"byte\" or \"bpe\")");
    int trc = st_task_config_validate(c, f, e);
    if (trc) return trc;
    if (task) return ST_OK;
    if (syn && c->pk_rate > 0)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.passkey.rate: passkeys are inserted into text; data.source "
                       "\"synthetic\" has no text tokenizer (use \"text\" or \"wikitext\")", f);
    if (!syn && !c->path[0])
        return st_fail(e, ST_ERR_CONFIG, "%s: data.path: required for source \"%s\" (%s)", f, c->source,
                       wiki ? "the directory holding train.txt / wiki.train.tokens" : "a text file");
    /* Each key's own range is the config schema's (src/train/config_schema.c; `stretch
     * data` goes through it too). Kept here: guards a direct library caller needs, and
     * the rules that relate keys. */
    if (t_bpe && c->bpe_vocab < 257)
        return st_fail(e, ST_ERR_CONFIG, "%s: data.bpe_vocab: at least 257 (256 bytes + merges), got %d", f, c->bpe_vocab);
    if (text) {
        if (!(c->valid_frac > 0.0f) || !(c->test_frac > 0.0f))
            return st_fail(e, ST_ERR_CONFIG, "%s: data.valid_frac / data.test_frac: must be > 0 for source \"text\"", f);
        if (c->valid_frac + c->test_frac > 0.5f)
            return st_fail(e, ST_ERR_CONFIG, "%s: data.test_frac: valid_frac + test_frac must be <= 0.5, got %g + %g",
                           f, (double)c->valid_frac, (double)c->test_frac);
    }
    if (syn) {
        if (c->syn_vocab < 2 || c->syn_order < 1)
            return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic: vocab must be >= 2 and order >= 1 (see configs/README.md)", f);
        if (c->syn_branch < 1 || c->syn_branch > c->syn_vocab)
            return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.branch: must be in [1, synthetic.vocab = %d], got %d", f,
                           c->syn_vocab, c->syn_branch);
        double n_ctx = pow((double)c->syn_vocab, (double)c->syn_order);
        if (n_ctx > (double)(1 << 20))
            return st_fail(e, ST_ERR_CONFIG,
                           "%s: data.synthetic.order: vocab^order = %d^%d = %.0f contexts exceeds 2^20; lower one of them",
                           f, c->syn_vocab, c->syn_order, n_ctx);
        if (n_ctx * c->syn_branch > (double)(1 << 24))
            return st_fail(e, ST_ERR_CONFIG,
                           "%s: data.synthetic.branch: contexts x branch = %.0f x %d exceeds 2^24 transition entries", f,
                           n_ctx, c->syn_branch);
        for (int i = 0; i < 3; i++)
            if (c->syn_tokens[i] < 2 * (int64_t)c->syn_order + 2)
                return st_fail(e, ST_ERR_CONFIG, "%s: data.synthetic.tokens[%d]: at least 2 x data.synthetic.order + 2 = "
                               "%d, got %lld", f, i, 2 * c->syn_order + 2, (long long)c->syn_tokens[i]);
        int rc = validate_copy(c, f, e);
        if (rc) return rc;
    }
    return ST_OK;
}
