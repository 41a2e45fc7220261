/* report.c - an evaluation report as a terminal table and as JSON (the format read by
 * `stretch sweep` and scripts/plot.py; docs/evaluation.md lists the fields). */
#include "st_eval.h"
#include "st_matmul.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *ppl_label(int unit) {
    return unit == ST_UNIT_WORD ? "word ppl" : unit == ST_UNIT_BYTE ? "tok ppl" : "ppl";
}

/* The statistics' names in the report, in ST_ATTN_NSTATS order (st_ops.h). */
static const char *const attn_names[ST_ATTN_NSTATS] = {"distance", "entropy", "first", "far"};

/* Statistic x of layer l, head h of a row with attention statistics. */
static double attn_at(const st_eval_result *r, int l, int h, int x) {
    return r->attn[((size_t)l * (size_t)r->attn_heads + (size_t)h) * ST_ATTN_NSTATS + (size_t)x];
}

/* {"far_from": L, "distance": [[per head] per layer], "entropy": ..., "first": ..., "far": ...} */
static cJSON *attn_json(const st_eval_result *r) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "far_from", (double)r->attn_far);
    for (int x = 0; x < ST_ATTN_NSTATS; x++) {
        cJSON *layers = cJSON_AddArrayToObject(a, attn_names[x]);
        for (int l = 0; l < r->attn_layers; l++) {
            cJSON *heads = cJSON_CreateArray();
            for (int h = 0; h < r->attn_heads; h++) {
                const double v = attn_at(r, l, h, x);
                cJSON_AddItemToArray(heads, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
            }
            cJSON_AddItemToArray(layers, heads);
        }
    }
    return a;
}

/* The attention statistics of the rows that have them: per length and layer, each
 * statistic's lowest and highest head. */
static void print_attn(const st_eval_report *rep, FILE *f) {
    int first = 1;
    for (int i = 0; i < rep->n; i++) {
        const st_eval_result *r = &rep->rows[i].r;
        if (rep->rows[i].status || !r->attn) continue;
        if (first)
            fprintf(f, "attention per layer, over the scored query rows (lowest..highest head): mean key distance, entropy "
                       "(nats), mass on the first key, mass at distance >= %lld (the training length)\n%8s %6s %16s "
                       "%16s %16s %16s\n", (long long)r->attn_far, "length", "layer", "distance", "entropy", "first",
                    "far");
        first = 0;
        for (int l = 0; l < r->attn_layers; l++) {
            fprintf(f, "%8lld %6d", (long long)r->length, l);
            for (int x = 0; x < ST_ATTN_NSTATS; x++) {
                double lo = INFINITY, hi = -INFINITY;
                for (int h = 0; h < r->attn_heads; h++) {
                    const double v = attn_at(r, l, h, x);
                    lo = v < lo ? v : lo;
                    hi = v > hi ? v : hi;
                }
                char cell[64];
                snprintf(cell, sizeof cell, x == 0 ? "%.1f..%.1f" : "%.3f..%.3f", lo, hi);
                fprintf(f, " %16s", cell);
            }
            fputc('\n', f);
        }
    }
}

/* The whole split's tokens: split_total, more than split_tokens when --max-tokens cut the
 * split short (0 when the evaluation did not record it: then what was scored). */
static int64_t split_whole(const st_eval_report *rep) {
    return rep->split_total > rep->split_tokens ? rep->split_total : rep->split_tokens;
}

void st_eval_report_print(const st_eval_report *rep, FILE *f) {
    const st_run_config *c = &rep->cfg;
    fprintf(f, "%s: step %lld, pos %s, %d layers x d %d (%zu params), trained at L=%d\n",
            rep->checkpoint, (long long)rep->step, st_pos_name(c->model.pos), c->model.n_layers, c->model.d_model,
            rep->n_params, c->train.seq_len);
    if (rep->external) {
        fprintf(f, "--data %s (%lld bytes, crc32 %08x", rep->data.path, (long long)rep->data.bytes,
                (unsigned)rep->data.crc32);
        if (rep->unit == ST_UNIT_WORD)
            fprintf(f, "; %lld unknown words -> <unk>, %lld distinct", (long long)rep->data.unk_tokens,
                    (long long)rep->data.unk_distinct);
        fprintf(f, ")\n%s: ", rep->data.is_dir ? st_eval_split_name(rep->split) : "file");
    } else {
        fprintf(f, "%s split: ", st_eval_split_name(rep->split));
    }
    /* a byte-level metric over multi-byte tokens (BPE): the count is of tokens */
    const int multibyte = rep->unit == ST_UNIT_BYTE && rep->bytes_per_token != 1.0;
    /* max_tokens: "the first 8192 of 55780 bytes", so a partial split does not read as whole */
    const int64_t whole = split_whole(rep);
    if (whole > rep->split_tokens) fprintf(f, "the first %lld of ", (long long)rep->split_tokens);
    fprintf(f, "%lld %ss (%lld targets", (long long)whole, multibyte ? "token" : st_unit_name(rep->unit),
            (long long)(rep->split_tokens - 1));
    if (multibyte) fprintf(f, ", %.3f bytes per token", rep->bytes_per_token);
    fprintf(f, "), %s, %d thread%s, %s matmuls", st_eval_mode_name(rep->mode), rep->threads,
            rep->threads == 1 ? "" : "s", st_precision_name(rep->precision));
    if (rep->entropy_rate > 0)
        fprintf(f, "; source entropy rate %.4f nats (ideal ppl %.3f)", rep->entropy_rate, exp(rep->entropy_rate));
    fputc('\n', f);
    if (st_transform_active(&rep->xf)) {
        char label[128];
        st_transform_label(&rep->xf, label, sizeof label);
        /* rerope takes a clip, not a scale; dynamic_ntk's scale follows the current length */
        const char *how = rep->xf.kind == ST_XF_NONE || rep->xf.scale != 0 || st_transform_clip(&rep->xf) > 0 ? ""
                          : st_transform_dynamic(rep->xf.kind) ? " (s = max(1, n / L), n the current length)"
                                                              : " (s = max(1, n / L) per length)";
        fprintf(f, "inference-time transform: %s%s\n", label, how);
    }
    int bpb = rep->unit == ST_UNIT_BYTE;
    fprintf(f, "%8s  %-14s %7s %10s %8s %10s", "length", "mode", "stride", "tokens", "loss", ppl_label(rep->unit));
    if (bpb) fprintf(f, " %7s", "bpb");
    fprintf(f, " %9s %9s %8s\n", "elapsed", "tok/s", "peak MB");
    for (int i = 0; i < rep->n; i++) {
        const st_eval_row *row = &rep->rows[i];
        const st_eval_result *r = &row->r;
        if (row->status) {
            fprintf(f, "%8lld  %-14s %7lld  error: %s\n", (long long)r->length, st_eval_mode_name(rep->mode),
                    (long long)r->stride, row->error);
            continue;
        }
        fprintf(f, "%8lld  %-14s %7lld %10lld %8.4f %10.3f", (long long)r->length, st_eval_mode_name(rep->mode),
                (long long)r->stride, (long long)r->tokens, r->loss, r->ppl);
        if (bpb) fprintf(f, " %7.4f", r->bpb);
        fprintf(f, " %8.2fs %9.0f %8.1f\n", r->seconds, r->tokens_per_s, (double)r->peak_rss / 1048576.0);
    }
    print_attn(rep, f);
}

static cJSON *result_json(const st_eval_report *rep, const st_eval_row *row) {
    const st_eval_result *r = &row->r;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "length", (double)r->length);
    cJSON_AddNumberToObject(o, "stride", (double)r->stride);
    if (rep->xf.kind != ST_XF_NONE) {   /* the scale this row was evaluated with */
        if (st_transform_dynamic(rep->xf.kind)) cJSON_AddStringToObject(o, "transform_scale", "dynamic");
        else cJSON_AddNumberToObject(o, "transform_scale", row->xf_scale);
    }
    if (row->status) {
        cJSON_AddStringToObject(o, "status", st_status_name(row->status));
        cJSON_AddNumberToObject(o, "code", row->status);
        cJSON_AddStringToObject(o, "error", row->error);
        return o;
    }
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddNumberToObject(o, "windows", (double)r->windows);
    cJSON_AddNumberToObject(o, "batch", (double)r->batch);
    cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(o, "forward_tokens", (double)r->forward_tokens);
    cJSON_AddNumberToObject(o, "nll", r->nll);
    cJSON_AddNumberToObject(o, "loss", r->loss);
    cJSON_AddNumberToObject(o, "ppl", r->ppl);
    if (isfinite(r->bpb)) {
        cJSON_AddNumberToObject(o, "bytes", r->bytes);
        cJSON_AddNumberToObject(o, "bpb", r->bpb);
    } else {
        cJSON_AddNullToObject(o, "bpb");
    }
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(o, "peak_rss_mb", (double)r->peak_rss / 1048576.0);
    cJSON_AddNumberToObject(o, "arena_mb", (double)r->arena_bytes / 1048576.0);
    cJSON *bs = cJSON_AddArrayToObject(o, "buckets");
    for (int b = 0; b < r->n_buckets; b++) {
        const st_eval_bucket *k = &r->buckets[b];
        cJSON *bo = cJSON_CreateObject();
        cJSON_AddNumberToObject(bo, "lo", (double)k->lo);
        cJSON_AddNumberToObject(bo, "hi", (double)k->hi);
        cJSON_AddNumberToObject(bo, "tokens", (double)k->tokens);
        cJSON_AddNumberToObject(bo, "nll", k->nll);
        if (k->tokens) cJSON_AddNumberToObject(bo, "loss", k->nll / (double)k->tokens);
        else cJSON_AddNullToObject(bo, "loss");
        cJSON_AddItemToArray(bs, bo);
    }
    if (r->attn) cJSON_AddItemToObject(o, "attention", attn_json(r));
    return o;
}

/* The block's departures from the GPT-2 block (st_block_departures: model.norm, ffn, bias,
 * qk_norm, ...), as attn_scale is given when not none: scripts/plot.py averages eval reports
 * whose model objects agree as seeds of one experiment, and a swiglu and a geglu run (or
 * two runs that differ in another block key but not in parameter count) must not agree. */
static void add_block_json(cJSON *mo, const st_model_config *m) {
    st_block_departure d[ST_BLOCK_MAX_DEPARTURES];
    const int n = st_block_departures(m, d);
    for (int i = 0; i < n; i++) {
        if (d[i].name) cJSON_AddStringToObject(mo, d[i].key, d[i].name);
        else if (d[i].boolean) cJSON_AddBoolToObject(mo, d[i].key, d[i].number != 0);
        else cJSON_AddNumberToObject(mo, d[i].key, d[i].number);
    }
}

cJSON *st_eval_model_json(const st_run_config *c, size_t n_params) {
    cJSON *mo = cJSON_CreateObject();
    cJSON_AddStringToObject(mo, "pos", st_pos_name(c->model.pos));
    char vb[32];
    const char *vkey, *variant = st_pos_variant(&c->model, &vkey, vb, sizeof vb);
    if (variant) cJSON_AddStringToObject(mo, vkey, variant);
    if (c->model.attn_scale) cJSON_AddStringToObject(mo, "attn_scale", st_attn_scale_name(c->model.attn_scale));
    if (c->model.scaling) {   /* trained scaling (model.scaling.*): "yarn2" as in the method label */
        char sc[64];
        snprintf(sc, sizeof sc, "%s%g", st_transform_name(c->model.scaling), c->model.scaling_scale);
        cJSON_AddStringToObject(mo, "scaling", sc);
    }
    if (c->model.abacus_rows > 0) cJSON_AddNumberToObject(mo, "abacus_rows", c->model.abacus_rows);
    add_block_json(mo, &c->model);
    cJSON_AddNumberToObject(mo, "n_layers", c->model.n_layers);
    cJSON_AddNumberToObject(mo, "d_model", c->model.d_model);
    cJSON_AddNumberToObject(mo, "n_heads", c->model.n_heads);
    cJSON_AddNumberToObject(mo, "vocab_size", c->model.vocab_size);
    cJSON_AddNumberToObject(mo, "params", (double)n_params);
    return mo;
}

char *st_eval_report_json(const st_eval_report *rep) {
    const st_run_config *c = &rep->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", rep->source);
    cJSON_AddStringToObject(o, "checkpoint", rep->checkpoint);
    cJSON_AddNumberToObject(o, "step", (double)rep->step);
    cJSON_AddItemToObject(o, "model", st_eval_model_json(c, rep->n_params));
    cJSON *to = cJSON_AddObjectToObject(o, "train");
    cJSON_AddNumberToObject(to, "seq_len", c->train.seq_len);
    st_json_add_number(to, "seed", (double)c->train.seed);
    cJSON_AddStringToObject(to, "precision", st_precision_name(c->train.precision));   /* what training ran in */
    cJSON *dob = cJSON_AddObjectToObject(o, "data");
    cJSON_AddStringToObject(dob, "source", c->data.source);
    cJSON_AddStringToObject(dob, "tokenizer", c->data.tokenizer);
    cJSON_AddStringToObject(dob, "unit", st_unit_name(rep->unit));
    if (rep->entropy_rate > 0) cJSON_AddNumberToObject(dob, "entropy_rate", rep->entropy_rate);
    if (rep->unit == ST_UNIT_BYTE) {
        cJSON_AddBoolToObject(dob, "bytes_exact", rep->bytes_exact);
        cJSON_AddNumberToObject(dob, "bytes_per_token", rep->bytes_per_token);
    }
    if (rep->data_hash) {   /* the run's own dataset: st_dataset_hash, and whether training saw it */
        char h[20];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)rep->data_hash);
        cJSON_AddStringToObject(dob, "hash", h);
        if (rep->data_changed >= 0) cJSON_AddBoolToObject(dob, "changed_since_training", rep->data_changed);
    }
    if (rep->external) {
        /* what was evaluated instead of the run's own split */
        const st_text_data *d = &rep->data;
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)d->crc32);
        cJSON *xo = cJSON_AddObjectToObject(dob, "eval_data");
        cJSON_AddStringToObject(xo, "path", d->path);
        cJSON_AddStringToObject(xo, "kind", d->is_dir ? "wikitext" : "file");
        cJSON_AddNumberToObject(xo, "bytes", (double)d->bytes);
        cJSON_AddStringToObject(xo, "crc32", crc);
        cJSON_AddNumberToObject(xo, "tokens", (double)d->n);
        if (rep->unit == ST_UNIT_WORD) {
            cJSON_AddNumberToObject(xo, "unk_tokens", (double)d->unk_tokens);
            cJSON_AddNumberToObject(xo, "unk_distinct", (double)d->unk_distinct);
            cJSON_AddNumberToObject(xo, "unk_literal", (double)d->unk_literal);
        }
    }
    cJSON_AddStringToObject(o, "split", rep->external && !rep->data.is_dir ? "file" : st_eval_split_name(rep->split));
    cJSON_AddStringToObject(o, "mode", st_eval_mode_name(rep->mode));
    if (rep->mode == ST_EVAL_SLIDING) cJSON_AddNumberToObject(o, "stride", (double)rep->stride_arg);
    cJSON_AddNumberToObject(o, "split_tokens", (double)rep->split_tokens);
    cJSON_AddNumberToObject(o, "split_total", (double)split_whole(rep));
    cJSON_AddStringToObject(o, "bucket_scale", rep->bucket_scale == ST_BUCKETS_LOG2 ? "log2" : "linear");
    cJSON_AddNumberToObject(o, "threads", rep->threads);
    cJSON_AddStringToObject(o, "precision", st_precision_name(rep->precision));
    if (rep->matmul[0]) cJSON_AddStringToObject(o, "matmul", rep->matmul);
    if (st_transform_active(&rep->xf)) {
        /* what was evaluated: the sweep tables label rows with "label" */
        const st_transform *xf = &rep->xf;
        char label[128];
        st_transform_label(xf, label, sizeof label);
        cJSON *xo = cJSON_AddObjectToObject(o, "transform");
        cJSON_AddStringToObject(xo, "name", st_transform_name(xf->kind));
        cJSON_AddStringToObject(xo, "label", label);
        if (xf->scale > 0) cJSON_AddNumberToObject(xo, "scale", xf->scale);
        else cJSON_AddStringToObject(xo, "scale", st_transform_dynamic(xf->kind) ? "dynamic"
                                                  : xf->kind && st_transform_clip(xf) == 0 ? "n/L" : "none");
        cJSON_AddNumberToObject(xo, "sinks", (double)xf->sinks);
        cJSON_AddNumberToObject(xo, "window", (double)xf->window);
        if (xf->window > 0) cJSON_AddStringToObject(xo, "positions", xf->cache_positions ? "cache" : "text");
        if (st_transform_clip(xf) > 0) cJSON_AddNumberToObject(xo, "clip", (double)st_transform_clip(xf));
        if (xf->block > 0) cJSON_AddNumberToObject(xo, "blockwise", (double)xf->block);
        cJSON_AddNumberToObject(xo, "train_len", (double)xf->train_len);
    }
    cJSON *rs = cJSON_AddArrayToObject(o, "results");
    for (int i = 0; i < rep->n; i++) cJSON_AddItemToArray(rs, result_json(rep, &rep->rows[i]));
    char *s = st_json_print_exact(o, 1);
    cJSON_Delete(o);
    return s;
}

int st_eval_report_save(const st_eval_report *rep, const char *path, st_error *e) {
    char *s = st_eval_report_json(rep);
    if (!s) return st_fail(e, ST_ERR_MEMORY, "%s: cannot build the JSON report", path);
    size_t n = strlen(s);
    s[n] = '\n';   /* cJSON_Print leaves the NUL's byte; the file ends with a newline */
    int rc = st_write_file_atomic(path, s, n + 1, e);
    free(s);
    return rc;
}
