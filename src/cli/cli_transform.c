/* cli_transform.c - the inference-time transform options shared by `stretch eval` and
 * `stretch generate` (include/st_transform.h): --transform NAME, --scale S, --clip W,
 * --sinks K, --window W, --positions text|cache, --blockwise B. One parser, so both
 * commands accept and reject the same. */
#include "cli/cli.h"
#include "st_matmul.h"
#include "st_transform.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_transform_arg(const char *cmd, const char *a, const char *v, st_transform *xf, int *rc) {
    *rc = ST_OK;
    static const char *const flags[] = {CLI_TRANSFORM_FLAGS, NULL};
    int known = 0;
    for (const char *const *f = flags; *f; f++) known |= !strcmp(a, *f);
    if (!known) return 0;
    if (!v) { *rc = cli_usage(cmd, "%s needs a value", a); return 1; }
    double d = 0;
    if (!strcmp(a, "--transform")) {
        if ((xf->kind = st_transform_from_name(v)) < 0) {
            char names[256];
            st_transform_list(names, sizeof names);
            *rc = cli_usage(cmd, "--transform '%s': expected one of %s", v, names);
        }
        xf->none_given = xf->kind == ST_XF_NONE;
    } else if (!strcmp(a, "--scale")) {   /* as the key: 0 = n / L per length, else >= 1 */
        if (!(*rc = cli_key_arg(cmd, a, v, "eval.transform_scale", "0: n / L per length, else >= 1", &d))) {
            if (d > 0 && d < 1)
                *rc = cli_usage(cmd, "--scale '%s': a scale is 0 (n / L per length) or >= 1 (as "
                                "eval.transform_scale)", v);
            xf->scale = d;
        }
    } else if (!strcmp(a, "--clip")) {   /* as the key: 0 = train.seq_len / 2 */
        if (!(*rc = cli_key_arg(cmd, a, v, "eval.clip", "0: train.seq_len / 2", &d))) xf->clip = (int64_t)d;
    } else if (!strcmp(a, "--positions")) {
        if (strcmp(v, "text") && strcmp(v, "cache"))
            *rc = cli_usage(cmd, "--positions '%s': expected text (the sinks at their positions in the text) or cache "
                            "(StreamingLLM: at their positions in the cache)", v);
        xf->cache_positions = !strcmp(v, "cache");
    } else if (!strcmp(a, "--sinks")) {
        if (!(*rc = cli_key_arg(cmd, a, v, "eval.sinks", NULL, &d))) xf->sinks = (int64_t)d;
    } else if (!strcmp(a, "--blockwise")) {   /* 0 switches off the config's blocks, as --window 0 */
        if (!(*rc = cli_key_arg(cmd, a, v, "eval.blockwise", "0: no blocks", &d))) xf->block = (int64_t)d;
    } else {
        /* 0 is a value, not "unset": it switches off a window the run's config sets */
        if (!(*rc = cli_key_arg(cmd, a, v, "eval.window", "0: no window", &d))) xf->window = (int64_t)d;
    }
    return 1;
}

void cli_transform_unset(st_transform *given) {
    *given = (st_transform){.kind = -1, .scale = -1, .sinks = -1, .window = -1, .clip = -1, .cache_positions = -1,
                            .block = -1};
}

void cli_transform_plan(const st_transform *given, st_eval_plan *plan) {
    plan->transform = given->kind;
    plan->transform_scale = given->scale;
    plan->sinks = given->sinks;
    plan->window = given->window;
    plan->clip = given->clip;
    plan->block = given->block;
    plan->positions = given->cache_positions < 0 ? -1 : given->cache_positions ? ST_SINK_POS_CACHE : ST_SINK_POS_TEXT;
}

void cli_precision_tag(int precision, int train_precision, char *tag, size_t n) {
    if (precision == train_precision) snprintf(tag, n, "%s", "");
    else snprintf(tag, n, "_%s", st_precision_name(precision));
}

void cli_transform_tag(const st_transform *xf, char *tag, size_t n) {
    tag[0] = 0;
    if (!st_transform_active(xf) || n < 2) return;
    tag[0] = '_';
    st_transform_label(xf, tag + 1, n - 1);
    for (char *p = tag + 1; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') *p = '_';
}
