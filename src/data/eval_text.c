/* eval_text.c - tokenize outside text with a trained run's tokenizer, for `stretch eval
 * --data`: a text file, or one split of a WikiText directory. Nothing is cached and the
 * tokenizer is never changed: byte and BPE runs encode any bytes; a word-level run maps
 * words it has not seen to <unk> and counts them (tokens and distinct words), because
 * perplexity over a text with many <unk> is not comparable to the run's own. The file's
 * size and CRC32 identify what was evaluated in the report. */
#include "data/data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* frees the tokens only: the record of what was read (n, path, counts) stays */
void st_text_data_free(st_text_data *d) {
    free(d->tokens);
    d->tokens = NULL;
}

int st_text_data_load(const st_tokenizer *t, const char *path, int split, st_text_data *d, st_error *e) {
    memset(d, 0, sizeof *d);
    if (t->kind == ST_TOK_SYNTHETIC || t->kind == ST_TOK_TASK)
        return st_fail(e, ST_ERR_DATA, "%s: a %s tokenizer has abstract ids and no text form to read outside data with",
                       path, t->kind == ST_TOK_TASK ? "task" : "synthetic-corpus");
    struct stat st;
    if (stat(path, &st) != 0) return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    d->is_dir = S_ISDIR(st.st_mode);
    if (d->is_dir) {
        if (split < ST_SPLIT_TRAIN || split > ST_SPLIT_TEST)
            return st_fail(e, ST_ERR_CONFIG, "%s: unknown split %d", path, split);
        if (st_sd_wikitext_split_file(path, split, d->path, sizeof d->path, e)) return e->code;
    } else {
        snprintf(d->path, sizeof d->path, "%s", path);
    }
    sd_identity id;
    if (st_sd_identity_of(d->path, &id, e)) return e->code;
    if (id.size == 0) return st_fail(e, ST_ERR_DATA, "%s: empty file", d->path);
    d->bytes = (int64_t)id.size;
    d->crc32 = id.crc32;
    int rc = ST_OK;

    sd_vec v = {0};
    sd_unk_count unk = {0};
    if (t->kind == ST_TOK_WORD) rc = st_sd_word_tokenize_unk(t, d->path, d->bytes, &v, &unk, e);
    else rc = st_sd_encode_file(t, d->path, 0, d->bytes, &v, e);
    free(unk.set);
    if (!rc && v.n < 2)
        rc = st_fail(e, ST_ERR_DATA, "%s: %lld token%s; at least 2 are needed to score one", d->path, (long long)v.n,
                     v.n == 1 ? "" : "s");
    if (rc) { st_sd_vec_free(&v); return rc; }
    d->tokens = v.v;
    d->n = v.n;
    d->unk_tokens = unk.tokens;
    d->unk_distinct = unk.distinct;
    /* the run's own <unk>s in its data are counted too: a word-level file that contains
     * the literal "<unk>" (WikiText does) was already unknown to its author */
    if (t->kind == ST_TOK_WORD && t->unk >= 0)
        for (int64_t i = 0; i < v.n; i++) d->unk_literal += v.v[i] == t->unk;
    d->unk_literal -= d->unk_tokens;
    return ST_OK;
}
