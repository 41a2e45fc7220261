/* sweep_results.c - the sweep's tables, rebuilt from every point's record:
 *   results.json  one object per run: overrides, position method, training summary and the
 *                 evaluation rows (with per-position buckets) - what scripts/plot.py reads;
 *   results.csv   long format, one line per (run, evaluation length); a run without results
 *                 (failed, pending, incomplete) has a line per length it was to be
 *                 evaluated at, with what its config says (pos, seq_len, seed, split, mode);
 *   results.md    one row per run, one column per evaluation length (ppl, and bpb for
 *                 byte-level data), then the mean over seeds when train.seed is swept;
 *                 task runs add their accuracy table and task_results.csv (sweep_task.c). */
#include "sweep_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *state_name(int s) {
    static const char *const names[] = {"pending", "done", "skipped", "incomplete", "failed"};
    return s >= 0 && s <= PT_FAILED ? names[s] : "?";
}

/* The step an incomplete point stopped at (its run's latest checkpoint; the point may have
 * run in another process or rank), -1 for other states. */
static int64_t stopped_step(const sweep_point *pt) {
    return pt->state == PT_INCOMPLETE ? st_run_latest_step(pt->dir) : -1;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double num(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Position-method label: "alibi", "alibi_rf-exp", "rope+yarn4", "fire+abacus", ...: the
 * method's variant is under the key the registry names for it (st_pos_variant_key);
 * st_pos_label's form. */
static void pos_label(const cJSON *report, char *out, size_t n) {
    const cJSON *m = get(report, "model");
    const char *key = st_pos_variant_key(st_pos_from_name(str(m, "pos")));
    const char *v = key ? str(m, key) : "", *sc = str(m, "attn_scale"), *ts = str(m, "scaling");
    snprintf(out, n, "%s%s%s%s%s%s%s%s", str(m, "pos"), v[0] ? "-" : "", v, sc[0] ? "+" : "", sc, ts[0] ? "+" : "", ts,
             num(m, "abacus_rows") > 0 ? "+abacus" : "");
}

/* The inference-time transform a report was evaluated with ("" when none). */
static const char *transform_label(const cJSON *report) {
    return str(get(report, "transform"), "label");
}

/* Method label plus its transform, "rope + yarn": what the Markdown rows show. */
static void eval_label(const cJSON *report, char *out, size_t n) {
    char pos[200];
    pos_label(report, pos, sizeof pos);
    const char *xf = transform_label(report);
    snprintf(out, n, "%s%s%s", pos, xf[0] ? " + " : "", xf);
}

/* Sorted union of the evaluated lengths. */
static int collect_lengths(const sweep *s, double *out, int cap) {
    int n = 0;
    for (int i = 0; i < s->n_points; i++) {
        const cJSON *rs = get(get(s->points[i].record, "report"), "results");
        for (const cJSON *r = rs ? rs->child : NULL; r; r = r->next) {
            double L = num(r, "length");
            int seen = 0;
            for (int j = 0; j < n; j++) seen |= out[j] == L;
            if (!seen && n < cap) out[n++] = L;
        }
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) { double t = out[j]; out[j] = out[j - 1]; out[j - 1] = t; }
    return n;
}

static const cJSON *row_at(const cJSON *report, double L) {
    const cJSON *rs = get(report, "results");
    for (const cJSON *r = rs ? rs->child : NULL; r; r = r->next)
        if (num(r, "length") == L) return r;
    return NULL;
}

/* A row's perplexity: its "ppl", or exp(loss) where the report has null (a finite loss
 * past ~709 nats overflows exp: +inf, not "nothing"); NAN when there is no loss either. */
static double row_ppl(const cJSON *row) {
    double ppl = num(row, "ppl"), loss = num(row, "loss");
    return isnan(ppl) && isfinite(loss) ? exp(loss) : ppl;
}

/* What a point without a record was to be evaluated with: the sweep's eval plan, where
 * the point's own eval.lengths / split / mode keys or its config fill in (as sweep_run.c's
 * point_plan does for the evaluation itself). */
typedef struct planned_eval {
    int n_lengths;
    const int64_t *lengths;
    const char *split, *mode;
} planned_eval;

static planned_eval planned(const sweep *s, const sweep_point *pt) {
    const st_eval_config *c = &pt->cfg.eval;
    const st_eval_plan *p = &s->plan;
    planned_eval q;
    int own = get(pt->overrides, "eval.lengths") || p->n_lengths == 0;
    q.n_lengths = own ? c->n_lengths : p->n_lengths;
    q.lengths = own ? c->lengths : p->lengths;
    q.split = st_eval_split_name(get(pt->overrides, "eval.split") || p->split < 0 ? c->split : p->split);
    q.mode = st_eval_mode_name(get(pt->overrides, "eval.mode") || p->mode < 0 ? c->mode : p->mode);
    return q;
}

static void csv_field(FILE *f, const char *s, int last) {
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (const char *p = s; *p; p++) { if (*p == '"') fputc('"', f); fputc(*p, f); }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void value_text(const cJSON *v, char *out, size_t n) {
    if (!v) { snprintf(out, n, "%s", ""); return; }
    if (cJSON_IsString(v)) { snprintf(out, n, "%s", v->valuestring); return; }
    char *t = st_json_print_exact(v, 0);
    snprintf(out, n, "%s", t ? t : "");
    cJSON_free(t);
}

static void num_text(double x, const char *fmt, char *out, size_t n) {
    if (isfinite(x)) snprintf(out, n, fmt, x);
    else snprintf(out, n, "%s", "");
}

static void write_csv(const sweep *s, FILE *f) {
    fputs("run,state,", f);
    for (int k = 0; k < s->n_keys; k++) csv_field(f, s->keys[k], 0);
    fputs("pos,train_seq_len,seed,step,val_loss,unit,split,mode,length,stride,tokens,loss,ppl,bpb,seconds,"
          "tokens_per_s,peak_rss_mb,status,error,transform,transform_scale\n", f);
    char buf[1200];
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        const cJSON *rep = get(pt->record, "report"), *tr = get(pt->record, "train");
        const cJSON *rs = get(rep, "results");
        const cJSON *r = rs ? rs->child : NULL;
        /* a run without results: one line per length it was to be evaluated at */
        planned_eval q = planned(s, pt);
        for (int j = 0; j == 0 || (rep ? r != NULL : j < q.n_lengths); j++) {
            csv_field(f, pt->name, 0);
            csv_field(f, state_name(pt->state), 0);
            for (int k = 0; k < s->n_keys; k++) { value_text(get(pt->overrides, s->keys[k]), buf, sizeof buf); csv_field(f, buf, 0); }
            if (rep) pos_label(rep, buf, sizeof buf);
            else st_pos_label(&pt->cfg.model, buf, sizeof buf);   /* as results.json and results.md */
            csv_field(f, buf, 0);
            num_text(rep ? num(get(rep, "train"), "seq_len") : pt->cfg.train.seq_len, "%.0f", buf, sizeof buf); csv_field(f, buf, 0);
            num_text(rep ? num(get(rep, "train"), "seed") : (double)pt->cfg.train.seed, "%.0f", buf, sizeof buf); csv_field(f, buf, 0);
            const int64_t at = stopped_step(pt);
            num_text(tr ? num(tr, "step") : at >= 0 ? (double)at : NAN, "%.0f", buf, sizeof buf); csv_field(f, buf, 0);
            num_text(num(tr, "val_loss"), "%.6f", buf, sizeof buf); csv_field(f, buf, 0);
            csv_field(f, str(get(rep, "data"), "unit"), 0);
            csv_field(f, rep ? str(rep, "split") : q.split, 0);
            csv_field(f, rep ? str(rep, "mode") : q.mode, 0);
            static const char *const cols[] = {"length", "stride", "tokens", "loss", "ppl", "bpb", "seconds",
                                               "tokens_per_s", "peak_rss_mb"};
            static const char *const fmts[] = {"%.0f", "%.0f", "%.0f", "%.6f", "%.4f", "%.5f", "%.3f", "%.1f", "%.1f"};
            for (int c = 0; c < 9; c++) {
                double v = !strcmp(cols[c], "ppl") ? row_ppl(r) : num(r, cols[c]);
                if (!rep && c == 0 && j < q.n_lengths) v = (double)q.lengths[j];
                if (isinf(v) && v > 0) snprintf(buf, sizeof buf, "inf");
                else num_text(v, fmts[c], buf, sizeof buf);
                csv_field(f, buf, 0);
            }
            csv_field(f, r ? str(r, "status") : state_name(pt->state), 0);
            csv_field(f, r ? str(r, "error") : pt->error, 0);
            csv_field(f, transform_label(rep), 0);
            const cJSON *xs = get(r, "transform_scale");
            if (cJSON_IsString(xs)) csv_field(f, xs->valuestring, 1);
            else { num_text(num(r, "transform_scale"), "%.6g", buf, sizeof buf); csv_field(f, buf, 1); }
            r = r ? r->next : NULL;
        }
    }
}

/* The runs an earlier sweep of another file wrote to this out's results.json (a seed sweep
 * sharing its out, as docs/results.md (a) runs them; probe 30 found them overwritten): kept
 * after this sweep's own, so results.json holds every sweep's runs. A run in one of this
 * sweep's point directories is this sweep's now; results.md and results.csv stay this
 * sweep's. Their lengths join *lens (sorted, at most cap). */
static void keep_other_sweeps(const sweep *s, const char *me, const char *path, cJSON *runs, double *lens, int *nl,
                              int cap) {
    size_t len = 0;
    st_error le = {0};
    char *text = st_read_file(path, &len, (size_t)1 << 30, &le);
    cJSON *old = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    if (!old) return;
    const char *old_sweep = str(old, "sweep");
    const cJSON *list = get(old, "runs");
    for (const cJSON *r = cJSON_IsArray(list) ? list->child : NULL; r; r = r->next) {
        const char *from = str(r, "sweep_file")[0] ? str(r, "sweep_file") : old_sweep;
        char buf[ST_PATH_BUF];
        const char *fr = realpath(from, buf) ? buf : from;
        int ours = !strcmp(fr, me);
        for (int i = 0; i < s->n_points && !ours; i++) ours = !strcmp(str(r, "dir"), s->points[i].dir);
        if (ours) continue;
        cJSON *c = cJSON_Duplicate(r, 1);
        if (!str(c, "sweep_file")[0]) cJSON_AddStringToObject(c, "sweep_file", fr);
        cJSON_AddItemToArray(runs, c);
        const cJSON *rs = get(r, "results");
        for (const cJSON *x = cJSON_IsArray(rs) ? rs->child : NULL; x; x = x->next) {
            const double L = num(x, "length");
            int k = 0;
            while (k < *nl && lens[k] < L) k++;
            if (!isfinite(L) || (k < *nl && lens[k] == L) || *nl == cap) continue;
            memmove(lens + k + 1, lens + k, (size_t)(*nl - k) * sizeof *lens);
            lens[k] = L;
            (*nl)++;
        }
    }
    cJSON_Delete(old);
}

static int write_json(const sweep *s, const char *path, const double *lens_in, int nl_in, st_error *e) {
    enum { CAP = 1024 };   /* collect_lengths' cap */
    double lens[CAP];
    int nl = nl_in < CAP ? nl_in : CAP;
    memcpy(lens, lens_in, (size_t)nl * sizeof *lens);
    char mine[ST_PATH_BUF];
    const char *me = realpath(s->file, mine) ? mine : s->file;   /* which sweep wrote a run */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "sweep", s->file);
    cJSON_AddStringToObject(o, "base", s->base_desc);
    cJSON_AddStringToObject(o, "out", s->out);
    const cJSON *d = get(s->root, "description");
    if (cJSON_IsString(d)) cJSON_AddStringToObject(o, "description", d->valuestring);
    cJSON *la = cJSON_AddArrayToObject(o, "lengths");   /* filled below, with other sweeps' lengths */
    cJSON *runs = cJSON_AddArrayToObject(o, "runs");
    char buf[256];
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        const cJSON *rep = get(pt->record, "report");
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "name", pt->name);
        cJSON_AddStringToObject(r, "sweep_file", me);
        cJSON_AddStringToObject(r, "group", pt->group);
        cJSON_AddStringToObject(r, "dir", pt->dir);
        if (pt->train_dir[0] && strcmp(pt->train_dir, pt->dir) != 0) cJSON_AddStringToObject(r, "trained_in", pt->train_dir);
        cJSON_AddStringToObject(r, "state", state_name(pt->state));
        if (pt->error[0]) cJSON_AddStringToObject(r, "error", pt->error);
        if (stopped_step(pt) >= 0) st_json_add_number(r, "step", (double)stopped_step(pt));
        cJSON_AddItemToObject(r, "overrides", cJSON_Duplicate(pt->overrides, 1));
        cJSON_AddStringToObject(r, "pos", st_pos_name(pt->cfg.model.pos));
        char vb[32];
        const char *vkey, *variant = st_pos_variant(&pt->cfg.model, &vkey, vb, sizeof vb);
        if (variant) cJSON_AddStringToObject(r, vkey, variant);
        if (rep) pos_label(rep, buf, sizeof buf);
        else st_pos_label(&pt->cfg.model, buf, sizeof buf);
        if (rep && transform_label(rep)[0]) {
            cJSON_AddItemToObject(r, "transform", cJSON_Duplicate(get(rep, "transform"), 1));
            eval_label(rep, buf, sizeof buf);
        }
        cJSON_AddStringToObject(r, "label", buf);
        cJSON_AddNumberToObject(r, "seq_len", pt->cfg.train.seq_len);
        st_json_add_number(r, "seed", (double)pt->cfg.train.seed);
        if (pt->record) {
            cJSON_AddItemToObject(r, "train", cJSON_Duplicate(get(pt->record, "train"), 1));
            cJSON_AddStringToObject(r, "unit", str(get(rep, "data"), "unit"));
            cJSON_AddStringToObject(r, "split", str(rep, "split"));
            cJSON_AddStringToObject(r, "mode", str(rep, "mode"));
            if (cJSON_IsNumber(get(rep, "stride"))) cJSON_AddNumberToObject(r, "stride", num(rep, "stride"));
            cJSON_AddStringToObject(r, "bucket_scale", str(rep, "bucket_scale"));
            double h = num(get(rep, "data"), "entropy_rate");
            if (isfinite(h)) cJSON_AddNumberToObject(r, "entropy_rate", h);
            cJSON_AddItemToObject(r, "results", cJSON_Duplicate(get(rep, "results"), 1));
            if (get(pt->record, "task")) cJSON_AddItemToObject(r, "task", cJSON_Duplicate(get(pt->record, "task"), 1));
        }
        cJSON_AddItemToArray(runs, r);
    }
    keep_other_sweeps(s, me, path, runs, lens, &nl, CAP);
    for (int i = 0; i < nl; i++) cJSON_AddItemToArray(la, cJSON_CreateNumber(lens[i]));
    char *text = st_json_print_exact(o, 1);
    cJSON_Delete(o);
    if (!text) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path);
    int rc = st_write_file_atomic(path, text, strlen(text), e);
    free(text);
    return rc;
}

/* One Markdown cell: "ppl" or "ppl / bpb"; "n/a" when the length failed. */
static void cell(const cJSON *row, int bpb, char *out, size_t n) {
    if (!row) { snprintf(out, n, " "); return; }
    if (strcmp(str(row, "status"), "ok") != 0) { snprintf(out, n, "n/a"); return; }
    double ppl = row_ppl(row), b = num(row, "bpb");
    if (bpb && isfinite(b)) snprintf(out, n, "%.3f / %.4f", ppl, b);
    else snprintf(out, n, "%.3f", ppl);
}

/* Group of a run for the seed means: its name without the train.seed part. */
static void group_key(const sweep_point *pt, char *out, size_t n) {
    snprintf(out, n, "%s", pt->group);
}

/* What of report's protocol (split, mode, stride and the tokens evaluated) differs from
 * ref's, the one the table's header states: " [sliding, stride 32]", "" when nothing does.
 * A sweep may set eval.mode or eval.max_tokens per variant, and a sliding row must not read
 * as nonoverlapping, nor a row of 4096 tokens as one of the header's. */
static void protocol_note(const cJSON *report, const cJSON *ref, char *out, size_t n) {
    out[0] = 0;
    if (!report || !ref || report == ref) return;
    const char *split = str(report, "split"), *mode = str(report, "mode");
    const double stride = num(report, "stride"), tokens = num(report, "split_tokens");
    const int other_split = strcmp(split, str(ref, "split")) != 0;
    const int other_mode = strcmp(mode, str(ref, "mode")) != 0 || (isfinite(stride) && stride != num(ref, "stride"));
    const int other_tokens = isfinite(tokens) && tokens != num(ref, "split_tokens");
    if (!other_split && !other_mode && !other_tokens) return;
    char st[64] = "", tk[64] = "";
    if (other_mode && isfinite(stride) && strcmp(mode, "sliding") == 0)   /* 0: the default, L/2 per length */
        snprintf(st, sizeof st, stride > 0 ? ", stride %.0f" : ", stride L/2", stride);
    if (other_tokens)
        snprintf(tk, sizeof tk, "%s%.0f %ss", other_split || other_mode ? ", " : "", tokens,
                 str(get(report, "data"), "unit"));
    snprintf(out, n, " [%s%s%s%s%s%s]", other_split ? split : "", other_split ? " split" : "", other_split && other_mode ? ", " : "",
             other_mode ? mode : "", st, tk);
}

/* The part of its split the header's report evaluated: "the first 4096 of 55780 bytes of
 * the " when eval.max_tokens cut the split short (the header said "valid split" of a sweep
 * that scored 4,096 of its 55,780 bytes), else "". The report's own counts say it; a
 * report written before split_total existed says nothing. */
static void split_scope(const cJSON *report, char *out, size_t n) {
    out[0] = 0;
    const double scored = num(report, "split_tokens"), total = num(report, "split_total");
    if (isfinite(scored) && isfinite(total) && total > scored)
        snprintf(out, n, "the first %.0f of %.0f %ss of the ", scored, total, str(get(report, "data"), "unit"));
}

static void write_md(const sweep *s, FILE *f, const double *lens, int nl) {
    const cJSON *first = NULL;
    for (int i = 0; i < s->n_points && !first; i++) first = get(s->points[i].record, "report");
    const char *unit = first ? str(get(first, "data"), "unit") : "";
    int bpb = strcmp(unit, "byte") == 0;
    fprintf(f, "# Sweep `%s`\n\n", s->file);
    const cJSON *d = get(s->root, "description");
    if (cJSON_IsString(d)) fprintf(f, "%s\n\n", d->valuestring);
    int mixed = 0;
    char note[160];
    for (int i = 0; i < s->n_points && !mixed; i++) {
        protocol_note(get(s->points[i].record, "report"), first, note, sizeof note);
        mixed = note[0] != 0;
    }
    char scope[128] = "";
    if (first) split_scope(first, scope, sizeof scope);
    if (first)
        fprintf(f, "Evaluation: %s%s split%s, %s windows%s%s; unit: %s. Cells: perplexity%s at each evaluation length "
                "(n/a: could not be evaluated, see results.json).\n\n", scope, str(first, "split"),
                scope[0] ? " (eval.max_tokens)" : "", str(first, "mode"),
                cJSON_IsNumber(get(first, "stride")) ? " (stride in results.json)" : "",
                mixed ? " unless a row's pos says otherwise (`[sliding, stride S]`)" : "", unit,
                bpb ? " / bits per byte" : "");
    fprintf(f, "| run | pos | L train | step | val loss |");
    for (int j = 0; j < nl; j++) fprintf(f, " %.0f |", lens[j]);
    fprintf(f, "\n|---|---|---:|---:|---:|");
    for (int j = 0; j < nl; j++) fprintf(f, "---:|");
    fputc('\n', f);
    char buf[256];
    int seeds_swept = 0;
    for (int k = 0; k < s->n_keys; k++) seeds_swept |= strcmp(s->keys[k], "train.seed") == 0;
    for (int i = 0; i < s->n_points; i++) {
        const sweep_point *pt = &s->points[i];
        const cJSON *rep = get(pt->record, "report"), *tr = get(pt->record, "train");
        eval_label(rep, buf, sizeof buf);
        protocol_note(rep, first, note, sizeof note);
        fprintf(f, "| %s | %s%s | %d |", pt->name, rep ? buf : st_pos_name(pt->cfg.model.pos), note,
                pt->cfg.train.seq_len);
        if (!pt->record) {
            if (stopped_step(pt) >= 0) fprintf(f, " %s at %lld | |", state_name(pt->state), (long long)stopped_step(pt));
            else fprintf(f, " %s | |", state_name(pt->state));
            for (int j = 0; j < nl; j++) fprintf(f, " |");
            fputc('\n', f);
            continue;
        }
        double vl = num(tr, "val_loss");
        fprintf(f, " %.0f |", num(tr, "step"));
        if (isfinite(vl)) fprintf(f, " %.4f |", vl); else fprintf(f, " |");
        for (int j = 0; j < nl; j++) { cell(row_at(rep, lens[j]), bpb, buf, sizeof buf); fprintf(f, " %s |", buf); }
        fputc('\n', f);
    }
    if (seeds_swept) {
        /* mean perplexity over seeds: exp of the mean loss, i.e. the geometric mean of ppl */
        fprintf(f, "\nMean over seeds (geometric mean of perplexity = exp of the mean loss; runs that could not be "
                "evaluated at a length are left out of that cell):\n\n| group | runs |");
        for (int j = 0; j < nl; j++) fprintf(f, " %.0f |", lens[j]);
        fprintf(f, "\n|---|---:|");
        for (int j = 0; j < nl; j++) fprintf(f, "---:|");
        fputc('\n', f);
        char gk[1024], gk2[1024];
        for (int i = 0; i < s->n_points; i++) {
            group_key(&s->points[i], gk, sizeof gk);
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) { group_key(&s->points[j], gk2, sizeof gk2); seen = strcmp(gk, gk2) == 0; }
            if (seen) continue;
            int runs = 0;
            for (int j = i; j < s->n_points; j++) {
                group_key(&s->points[j], gk2, sizeof gk2);
                runs += strcmp(gk, gk2) == 0 && s->points[j].record;
            }
            fprintf(f, "| %s | %d |", gk, runs);
            for (int L = 0; L < nl; L++) {
                double sum = 0, bsum = 0;
                int cnt = 0, bcnt = 0;
                for (int j = i; j < s->n_points; j++) {
                    group_key(&s->points[j], gk2, sizeof gk2);
                    if (strcmp(gk, gk2) != 0) continue;
                    const cJSON *row = row_at(get(s->points[j].record, "report"), lens[L]);
                    if (!row || strcmp(str(row, "status"), "ok") != 0) continue;
                    sum += num(row, "loss"); cnt++;
                    if (isfinite(num(row, "bpb"))) { bsum += num(row, "bpb"); bcnt++; }
                }
                if (!cnt) fprintf(f, " n/a |");
                else if (bpb && bcnt == cnt) fprintf(f, " %.3f / %.4f |", exp(sum / cnt), bsum / bcnt);
                else fprintf(f, " %.3f |", exp(sum / cnt));
            }
            fputc('\n', f);
        }
    }
    st_sweep_task_md(s, f);
}

/* The tables st_sweep_write_results (and st_sweep_task_csv) replace, results.json first: it is
 * written first, so whenever another of them exists a sweep's results.json is beside it. */
static const char *const table_files[] = {"results.json", "results.csv", "results.md", "task_results.csv"};

int st_sweep_check_out(const sweep *s, st_error *e) {
    char path[ST_PATH_BUF];
    int ours = -1;   /* unknown until a table file is found */
    for (size_t i = 0; i < sizeof table_files / sizeof table_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", s->out, table_files[i]);
        if (!st_sweep_exists(path)) continue;
        if (ours < 0) {
            char json[ST_PATH_BUF];
            snprintf(json, sizeof json, "%s/results.json", s->out);
            size_t len = 0;
            st_error ignored = {0};
            char *text = st_sweep_exists(json) ? st_read_file(json, &len, SWEEP_TEXT_MAX, &ignored) : NULL;
            cJSON *o = text ? cJSON_ParseWithLength(text, len) : NULL;
            ours = cJSON_IsString(get(o, "sweep")) && cJSON_IsArray(get(o, "runs"));
            cJSON_Delete(o);
            free(text);
        }
        if (!ours)
            return st_fail(e, ST_ERR_IO, "%s: the sweep's output directory holds %s, which no sweep wrote (there is "
                           "no sweep results.json beside it); choose another out / --out or move the file", s->out,
                           table_files[i]);
    }
    return ST_OK;
}

int st_sweep_write_results(const sweep *s, st_error *e) {
    double lens[1024];
    int nl = collect_lengths(s, lens, 1024);
    char path[ST_PATH_BUF];
    int rc;
    snprintf(path, sizeof path, "%s/results.json", s->out);
    if ((rc = write_json(s, path, lens, nl, e))) return rc;
    /* csv and md through the atomic writer, like the json */
    st_atomic_file a;
    snprintf(path, sizeof path, "%s/results.csv", s->out);
    if (!st_atomic_open(&a, path, e)) return e ? e->code : ST_ERR_IO;
    write_csv(s, a.f);
    if ((rc = st_atomic_commit(&a, e))) return rc;
    snprintf(path, sizeof path, "%s/results.md", s->out);
    if (!st_atomic_open(&a, path, e)) return e ? e->code : ST_ERR_IO;
    write_md(s, a.f, lens, nl);
    if ((rc = st_atomic_commit(&a, e))) return rc;
    return st_sweep_task_csv(s, e);
}
