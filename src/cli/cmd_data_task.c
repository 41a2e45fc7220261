/* cmd_data_task.c - `stretch data --config RUN.json` for a task run (data.source "task"):
 * what the model will see. A task has no corpus to tokenize; its instances are generated
 * per batch (include/st_task.h). This prints the task, its vocabulary, the sizes and
 * instance lengths of training, and then either the first rows the trainer draws, in
 * order (the seeds of st_train_loader_init's loader; step 1 takes batch_size x grad_accum),
 * with each instance on its own line and the tokens the loss scores in [brackets], or
 * (--size S) instances of one size, e.g. an evaluation size past the training range. */
#include "cli/cli.h"
#include "st_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Print tokens tok[0, n) with the scored ones (scored[i] != 0) in brackets: "a b = [a b .]".
 * A run of padding prints as "<pad> x N". */
static void print_tokens(const int32_t *tok, const uint8_t *scored, int64_t n) {
    char name[32];
    int open = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tok[i] == ST_TT_PAD && !scored[i]) {
            int64_t k = i;
            while (k < n && tok[k] == ST_TT_PAD && !scored[k]) k++;
            printf("%s%s<pad>", open ? "]" : "", i ? " " : "");
            if (k - i > 1) printf(" x%lld", (long long)(k - i));
            open = 0;
            i = k - 1;
            continue;
        }
        st_task_token_name(tok[i], name, sizeof name);
        if (scored[i] && !open) printf("%s[%s", i ? " " : "", name);
        else if (!scored[i] && open) printf("] %s", name);
        else printf("%s%s", i ? " " : "", name);
        open = scored[i] != 0;
    }
    printf("%s\n", open ? "]" : "");
}

/* The first `show` rows the trainer draws, T + 1 tokens each (st_task_row_tokens with the
 * seeds of the trainer's loader l), one line per instance, then the padding. */
static int show_rows(const st_run_config *cfg, const st_dataset *ds, const st_loader *l, int64_t show) {
    const int64_t n = (int64_t)cfg->train.seq_len + 1;
    int32_t *tok = malloc((size_t)n * sizeof *tok), *start = malloc((size_t)n * sizeof *start);
    uint8_t *sc = malloc((size_t)n);
    if (!tok || !start || !sc) {
        free(tok); free(start); free(sc);
        return cli_report("data", &(st_error){.code = ST_ERR_MEMORY, .msg = "out of memory"});
    }
    const long long per_step = (long long)cfg->train.batch_size * cfg->train.grad_accum;
    printf("rows        the first %lld the trainer draws (train.seed %llu; step 1 takes %lld, rows 0..%lld), "
           "train.seq_len + 1 = %lld tokens each; [scored by the loss]\n", (long long)show,
           (unsigned long long)cfg->train.seed, per_step, per_step - 1, (long long)n);
    for (int64_t w = 0; w < show; w++) {
        const int64_t used = st_task_row_tokens(ds->task, st_loader_row_seed(l, (uint64_t)w), n, tok, sc, start);
        int64_t n_inst = 0, scored = 0;
        for (int64_t t = 0; t < n; t++) {
            scored += sc[t];
            n_inst += t < used && start[t] == t;
        }
        printf("row %lld: %lld instance%s, %lld of %lld tokens, %lld scored\n", (long long)w, (long long)n_inst,
               n_inst == 1 ? "" : "s", (long long)used, (long long)n, (long long)scored);
        for (int64_t t = 0, end; t < n; t = end) {
            for (end = t + 1; end < n && start[end] == start[t];) end++;
            printf("  ");
            print_tokens(tok + t, sc + t, end - t);
        }
    }
    free(tok); free(start); free(sc);
    return ST_OK;
}

/* `show` instances of one size, seeds st_hash64(seed, i) (examples, not the evaluation's
 * own draws); the answer tokens in brackets. */
static int show_instances(const st_task_data *td, int64_t show, int64_t size, uint64_t seed) {
    const int64_t cap = td->task->length(&td->p, size);
    int32_t *tok = malloc((size_t)cap * sizeof *tok);
    uint8_t *ans = malloc((size_t)cap);
    if (!tok || !ans) {
        free(tok); free(ans);
        return cli_report("data", &(st_error){.code = ST_ERR_MEMORY, .msg = "out of memory"});
    }
    printf("instances   size %lld (%s), seed %llu; [answer]\n", (long long)size, td->task->size_unit,
           (unsigned long long)seed);
    for (int64_t i = 0; i < show; i++) {
        const int64_t n = td->task->generate(&td->p, size, st_hash64(seed, (uint64_t)i), tok, ans);
        printf("%lld tokens: ", (long long)n);
        print_tokens(tok, ans, n);
    }
    free(tok); free(ans);
    return ST_OK;
}

int cli_data_task_show(const st_run_config *cfg, const st_dataset *ds, int64_t show, int64_t size, st_error *e) {
    const st_task_data *td = ds->task;
    st_loader l;   /* rows: the trainer's loader, its checks (a row holds the longest instance) first */
    if (!size && st_train_loader_init(cfg, ds, &l, e)) return e->code;
    const st_task *t = td->task;
    const int symbols = td->p.symbols;
    char last[32];
    st_task_token_name(ST_TT_SYMBOL0 + symbols - 1, last, sizeof last);
    int64_t lo = 0, hi = 0;
    st_task_size_range(t, &td->p, &lo, &hi);
    if (size && (size < lo || size > hi))
        return cli_usage("data", "--size %lld: a %s instance's size (%s) is in [%lld, %lld] with this config",
                         (long long)size, t->name, t->size_unit, (long long)lo, (long long)hi);
    printf("task        %s (%s); size counts %s\n", t->name, t->cite, t->size_unit);
    printf("vocabulary  %d ids: %d specials, 10 digits, %d symbols (a .. %s)\n", ds->vocab_size, ST_TT_DIGIT0, symbols,
           last);
    /* length() is an instance's bound (addition's carry digit may not come) */
    printf("sizes       %lld .. %lld in training (data.task.min_size, max_size; the task allows %lld .. %lld): "
           "instances of at most %lld .. %lld tokens\n", (long long)td->min_size, (long long)td->max_size, (long long)lo,
           (long long)hi, (long long)t->length(&td->p, td->min_size), (long long)st_task_data_max_len(td));
    printf("training    train.seq_len %d, %s; loss on %s\n", cfg->train.seq_len,
           td->pack ? "several instances a row (data.task.pack)" : "one instance a row, then padding",
           td->loss_all ? "every token but padding (data.task.loss \"all\")" : "the answer tokens (data.task.loss \"answer\")");
    return size ? show_instances(td, show, size, cfg->train.seed) : show_rows(cfg, ds, &l, show);
}
