/* config_validate.c - a run config's validation after parsing: every key's range read
 * back from the struct (configs built in code get the same checks as parsed ones), paths
 * expanded and made absolute, derived defaults, the rules relating keys of different
 * sections, then the model and data modules' own rules (st_model_config_validate,
 * st_data_config_validate). Parsing and --set live in config.c, the key table in
 * config_schema.c. */
#define _GNU_SOURCE
#include "config_schema.h"
#include "st_transform.h"
#include "train_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* Expand "$STRETCH_DATA_DIR" / "${STRETCH_DATA_DIR}" and make the path absolute, then
 * drop "." and resolve ".." lexically. */
int st_resolve_path(const char *in, char *out, size_t n) {
    char tmp[ST_PATH_BUF];
    const char *rest = NULL;
    if (strncmp(in, "${STRETCH_DATA_DIR}", 19) == 0) rest = in + 19;
    else if (strncmp(in, "$STRETCH_DATA_DIR", 17) == 0 && (in[17] == 0 || in[17] == '/')) rest = in + 17;
    if (rest) {
        const char *dir = getenv("STRETCH_DATA_DIR");
        if (!dir || !*dir) dir = "../shared/data";
        snprintf(tmp, sizeof tmp, "%s%s", dir, rest);
    } else {
        snprintf(tmp, sizeof tmp, "%s", in);
    }
    char full[ST_PATH_BUF + 4097];   /* cwd + "/" + the path */
    if (tmp[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) return ST_ERR_IO;
        snprintf(full, sizeof full, "%s/%s", cwd, tmp);
    } else {
        snprintf(full, sizeof full, "%s", tmp);
    }
    /* lexical normalisation into out */
    size_t used = 0;
    const char *p = full;
    if (n < 2) return ST_ERR_CONFIG;
    out[0] = 0;
    while (*p) {
        while (*p == '/') p++;
        const char *q = p;
        while (*q && *q != '/') q++;
        size_t l = (size_t)(q - p);
        if (l == 0) break;
        if (l == 1 && p[0] == '.') { /* skip */ }
        else if (l == 2 && p[0] == '.' && p[1] == '.') {
            while (used > 0 && out[used - 1] != '/') used--;
            if (used > 0) used--;
            out[used] = 0;
        } else {
            if (used + 1 + l + 1 > n) return ST_ERR_CONFIG;
            out[used++] = '/';
            memcpy(out + used, p, l);
            used += l;
            out[used] = 0;
        }
        p = q;
    }
    if (used == 0) { out[0] = '/'; out[1] = 0; }
    return ST_OK;
}

static int resolve_field(char *field_buf, size_t size, const char *file, const char *key, st_error *e) {
    if (!field_buf[0]) return ST_OK;
    char tmp[ST_PATH_BUF];
    if (st_resolve_path(field_buf, tmp, sizeof tmp) || strlen(tmp) >= size || strlen(tmp) > ST_PATH_MAX)
        return st_fail(e, ST_ERR_CONFIG, "%s: %s: path longer than %d bytes after expansion: %.200s...", file, key,
                       ST_PATH_MAX, field_buf);
    snprintf(field_buf, size, "%s", tmp);
    return ST_OK;
}

/* Every key's range, read back from the struct (configs built in code get the same checks). */
static int check_ranges(const st_run_config *c, const char *file, st_error *e) {
    char loc[ST_PATH_BUF + 512], allowed[256];
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        const void *f = (const char *)c + k->off;
        double x;
        st_ckey_where(loc, sizeof loc, file, k->path);
        switch (k->kind) {
        case CK_INT: x = *(const int *)f; break;
        case CK_I64: x = (double)*(const int64_t *)f; break;
        case CK_U64: x = (double)*(const uint64_t *)f; break;
        case CK_FLOAT: x = *(const float *)f; break;
        case CK_DOUBLE: x = *(const double *)f; break;
        case CK_BOOL:
            if (*(const int *)f != 0 && *(const int *)f != 1)
                return st_fail(e, ST_ERR_CONFIG, "%s: must be true or false", loc);
            continue;
        case CK_ENUM:
            if (!st_cenum_to(k->en, *(const int *)f)) {
                st_cenum_list(k->en, allowed, sizeof allowed);
                return st_fail(e, ST_ERR_CONFIG, "%s: invalid value %d (expected %s)", loc, *(const int *)f, allowed);
            }
            continue;
        case CK_STR:
            if (k->en && st_cenum_from(k->en, (const char *)f) < 0) {
                st_cenum_list(k->en, allowed, sizeof allowed);
                return st_fail(e, ST_ERR_CONFIG, "%s: unknown value \"%.60s\" (expected %s)", loc, (const char *)f, allowed);
            }
            continue;
        case CK_I64_LIST:
        case CK_I64_3: {
            int cnt = k->kind == CK_I64_3 ? 3 : *(const int *)((const char *)c + k->off_n);
            if (cnt < 0 || cnt > (int)k->size)
                return st_fail(e, ST_ERR_CONFIG, "%s: at most %zu entries, got %d", loc, k->size, cnt);
            for (int j = 0; j < cnt; j++) {
                double v = (double)((const int64_t *)f)[j];
                if (!st_ckey_in_range(k, v)) {
                    char eloc[ST_PATH_BUF + 512 + 16];
                    snprintf(eloc, sizeof eloc, "%s[%d]", loc, j);
                    return st_ckey_range_error(e, eloc, k, v);
                }
            }
            continue;
        }
        default: continue;
        }
        if (!st_ckey_in_range(k, x)) return st_ckey_range_error(e, loc, k, x);
    }
    return ST_OK;
}

/* The data module names the synthetic fields by their struct names ("data.syn_order");
 * users write them as "data.synthetic.order": rewrite the message to the JSON path. */
static void name_json_keys(st_error *e) {
    if (!e) return;
    char *p = strstr(e->msg, "data.syn_");
    while (p) {
        char out[sizeof e->msg];
        size_t head = (size_t)(p - e->msg);
        snprintf(out, sizeof out, "%.*sdata.synthetic.%s", (int)head, e->msg, p + 9);
        snprintf(e->msg, sizeof e->msg, "%s", out);
        p = strstr(e->msg + head + 15, "data.syn_");
    }
}

int st_run_config_validate(st_run_config *c, st_error *e) {
    if (!c->file[0]) snprintf(c->file, sizeof c->file, "config");
    const char *file = c->file;
    int rc = check_ranges(c, file, e);
    if (rc) return rc;
    if ((rc = resolve_field(c->data.path, sizeof c->data.path, file, "data.path", e))) return rc;
    if ((rc = resolve_field(c->data.cache_dir, sizeof c->data.cache_dir, file, "data.cache_dir", e))) return rc;
    if ((rc = resolve_field(c->train.init_from, sizeof c->train.init_from, file, "train.init_from", e))) return rc;

    const st_train_config *t = &c->train;
    /* derived defaults */
    if (c->eval.n_lengths == 0) {
        for (int i = 0; i < 4; i++) c->eval.lengths[i] = (int64_t)t->seq_len << i;
        c->eval.n_lengths = 4;
    }
    if (c->model.attn_scale == ST_ATTN_SCALE_LOGN && c->model.attn_scale_len == 0) {
        /* logn: L = the training length, which must be one log_L can take */
        if (t->seq_len < 2)
            return st_fail(e, ST_ERR_CONFIG, "%s: train.seq_len: model.attn_scale \"logn\" scales by log_L n with L the "
                           "training length, which must be >= 2 (got %d)", file, t->seq_len);
        c->model.attn_scale_len = t->seq_len;
    }
    /* cross-key rules */
    if (c->model.scaling != 0 && c->model.scaling_len > 0 && t->seq_len < c->model.scaling_len)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.seq_len: %d is shorter than model.scaling.train_len %d: a scaled "
                       "model is trained at the length it extends to", file, t->seq_len, c->model.scaling_len);
    const int64_t max_len = st_pos_max_len(&c->model);
    if (max_len > 0 && t->seq_len > max_len)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.seq_len: %d exceeds the %lld tokens %s positions represent; %s",
                       file, t->seq_len, (long long)max_len, st_pos_name(c->model.pos), st_pos_limit_why(c->model.pos));
    if (c->data.task_doc_mask && st_pos_no_doc_mask(c->model.pos))
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.doc_mask: not available with model.pos \"%s\" in training: %s",
                       file, st_pos_name(c->model.pos), st_pos_no_doc_mask(c->model.pos));
    if (t->random_positions > 0) {
        if (t->random_positions <= t->seq_len)
            return st_fail(e, ST_ERR_CONFIG, "%s: train.random_positions: %lld must exceed train.seq_len (%d): the "
                           "positions of a window are a subset of [0, N)", file, (long long)t->random_positions, t->seq_len);
        if (!st_pos_abs_indices(c->model.pos)) {
            char list[256];
            st_pos_abs_list(list, sizeof list);
            return st_fail(e, ST_ERR_CONFIG, "%s: train.random_positions: model.pos \"%s\" reads no absolute token "
                           "indices (it applies to %s)", file, st_pos_name(c->model.pos), list);
        }
        if (max_len > 0 && t->random_positions > max_len)
            return st_fail(e, ST_ERR_CONFIG, "%s: train.random_positions: %lld exceeds the %lld tokens %s positions "
                           "represent; %s", file, (long long)t->random_positions, (long long)max_len,
                           st_pos_name(c->model.pos), st_pos_limit_why(c->model.pos));
    }
    /* the largest Abacus row training reads: a whole row of digits at the largest offset */
    if (c->model.abacus_rows > 0 && (int64_t)c->model.abacus_rows < (int64_t)t->abacus_max_k + t->seq_len + 1)
        return st_fail(e, ST_ERR_CONFIG, "%s: model.abacus.rows: %d rows; training reads up to row train.abacus_max_k "
                       "+ train.seq_len = %lld (a window of digits at the largest offset), so it needs at least %lld",
                       file, c->model.abacus_rows, (long long)t->abacus_max_k + t->seq_len,
                       (long long)t->abacus_max_k + t->seq_len + 1);
    if (t->patience > 0 && (t->eval_every == 0 || t->eval_batches == 0))
        return st_fail(e, ST_ERR_CONFIG, "%s: train.patience: counts validations, which need train.eval_every > 0 and "
                       "train.eval_batches > 0 (got %lld and %d)", file, (long long)t->eval_every, t->eval_batches);
    if (t->sched.kind == ST_SCHED_INV_SQRT && t->sched.warmup < 1)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.schedule.warmup: must be >= 1 with kind \"inv_sqrt\"", file);
    const int decays = t->sched.kind == ST_SCHED_COSINE || t->sched.kind == ST_SCHED_LINEAR || t->sched.kind == ST_SCHED_WSD;
    if (decays && t->steps > 0 && t->sched.warmup > t->steps)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.schedule.warmup: %lld exceeds train.steps (%lld)",
                       file, (long long)t->sched.warmup, (long long)t->steps);
    /* a decay_frac for another kind would be ignored: refused, so a config says what runs */
    if (t->sched.kind != ST_SCHED_WSD && t->sched.decay_frac != 0.2) {
        char kind[32];
        st_config_value_str(st_config_find_key("train.schedule.kind"), c, kind, sizeof kind);   /* "\"cosine\"" */
        return st_fail(e, ST_ERR_CONFIG, "%s: train.schedule.decay_frac: applies to train.schedule.kind \"wsd\" only "
                       "(this one is %s)", file, kind);
    }
    /* wsd: the decay must not start inside the warmup */
    if (t->sched.kind == ST_SCHED_WSD && t->steps > 0 && t->sched.warmup + st_lr_wsd_decay(t) > t->steps)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.schedule.decay_frac: the decay's %lld steps (%g x %lld) and "
                       "train.schedule.warmup's %lld exceed train.steps (%lld)", file, (long long)st_lr_wsd_decay(t),
                       t->sched.decay_frac, (long long)t->steps, (long long)t->sched.warmup,
                       (long long)t->steps);
    /* in either mode: a nonoverlapping config may be evaluated with --mode sliding */
    if (c->eval.max_tokens == 1)
        return st_fail(e, ST_ERR_CONFIG, "%s: eval.max_tokens: " ST_EVAL_ONE_TOKEN, file);
    if (c->eval.stride > 0) {
        for (int i = 0; i < c->eval.n_lengths; i++)
            if (c->eval.stride > c->eval.lengths[i])
                return st_fail(e, ST_ERR_CONFIG, "%s: eval.stride: %lld exceeds eval.lengths[%d] = %lld",
                               file, (long long)c->eval.stride, i, (long long)c->eval.lengths[i]);
    }
    const st_transform xf = {.kind = c->eval.transform, .scale = c->eval.transform_scale, .sinks = c->eval.sinks,
                             .window = c->eval.window, .clip = c->eval.clip, .block = c->eval.blockwise,
                             .cache_positions = c->eval.positions == ST_SINK_POS_CACHE};
    st_error xe = {0};
    if ((rc = st_transform_check(&xf, c->model.pos, "eval.transform", &xe))) return st_fail(e, rc, "%s: %s", file, xe.msg);
    /* the modules' own rules; vocab_size 0 means "the dataset's", checked at load time */
    st_model_config m = c->model;
    if (m.vocab_size == 0) m.vocab_size = 256;
    if ((rc = st_model_config_validate(&m, file, e))) return rc;
    if ((rc = st_data_config_validate(&c->data, file, e))) {
        name_json_keys(e);
        return rc;
    }
    return ST_OK;
}

/* The optimizer's and schedule's keys that the chosen ones do not read. */
static const struct { const char *key; int optim, sched; } unread_rules[] = {
    {"train.optimizer.beta1", ST_OPT_SGD, -1},
    {"train.optimizer.beta2", ST_OPT_SGD, -1},
    {"train.optimizer.eps", ST_OPT_SGD, -1},
    {"train.optimizer.momentum", ST_OPT_ADAMW, -1},
    {"train.schedule.min_lr_ratio", -1, ST_SCHED_CONSTANT},
    {"train.schedule.min_lr_ratio", -1, ST_SCHED_INV_SQRT},
};

/* Names key k's value in buf when it differs from the default d's (values as config.json
 * writes them, so "1e-5" and "1e-05" are one value). */
static int name_if_set(const st_ckey *k, const st_run_config *c, const st_run_config *d, char *buf, size_t n,
                       size_t *len) {
    char val[64], def[64];
    st_config_value_str(k, c, val, sizeof val);
    st_config_value_str(k, d, def, sizeof def);
    if (strcmp(val, def) == 0) return 0;
    if (*len < n) *len += (size_t)snprintf(buf + *len, n - *len, "%s%s %s", *len ? ", " : "", k->path, val);
    return 1;
}

int st_run_config_unread(const st_run_config *c, char *buf, size_t n) {
    int count = 0;
    size_t len = 0;
    if (n) buf[0] = 0;
    st_run_config *d = malloc(sizeof *d);
    if (!d) return 0;
    st_run_config_default(d);
    /* another position method's keys (model.fire.hidden in a rope run): a sweep over
     * model.pos shares one base, so named, not refused */
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (k->kind != CK_OBJ && st_pos_key_reader(k->path, c->model.pos) == 0)
            count += name_if_set(k, c, d, buf, n, &len);
    }
    static const char *const abacus_keys[] = {"model.abacus.digit0", "train.abacus_max_k"};
    for (size_t i = 0; i < 2 && c->model.abacus_rows == 0; i++)   /* the Abacus keys without a table */
        count += name_if_set(st_config_find_key(abacus_keys[i]), c, d, buf, n, &len);
    for (size_t i = 0; i < sizeof unread_rules / sizeof unread_rules[0]; i++) {
        if (unread_rules[i].optim >= 0 && unread_rules[i].optim != c->train.optim.name) continue;
        if (unread_rules[i].sched >= 0 && unread_rules[i].sched != c->train.sched.kind) continue;
        count += name_if_set(st_config_find_key(unread_rules[i].key), c, d, buf, n, &len);
    }
    free(d);
    return count;
}
