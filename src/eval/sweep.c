/* sweep.c - read a sweep file strictly and expand it into points.
 *
 *   {"description": "...",                       optional, free text
 *    "base": "x.json" | {inline run config},     path relative to the sweep file's directory
 *    "set": {"train.steps": 600, ...},           optional, applied to every point (not in names)
 *    "variants": [{"name": "alibi_rf-exp", "model.pos": "alibi_rf", "model.rf.kind": "exp"}, ...],
 *    "grid": {"train.seed": [1, 2], "train.seq_len": [64]},
 *    "eval": {"lengths": [...], "split", "mode", ...},  the evaluation plan (sweep_eval.c)
 *    "out": "runs/sweep_x",                      relative to the current directory
 *    "jobs": 2}                                  optional: runs side by side (--jobs overrides)
 *
 * Points = variants x the cartesian product of the grid lists (first grid key slowest,
 * last fastest). Each point is base + "set" + the variant's assignments + one value per grid key,
 * applied like `stretch train --set key=value`, and validated here, before any training, so
 * a typo fails the sweep at once (exit 2) with the file and key path. */
#include "sweep_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POINTS 10000

static const char *const top_keys[] = {"description", "base", "set", "variants", "grid", "eval", "out", "jobs"};

static int key_allowed(const char *k, const char *const *list, int n) {
    for (int i = 0; i < n; i++) if (strcmp(k, list[i]) == 0) return 1;
    return 0;
}

int st_sweep_check_keys(const cJSON *obj, const char *const *list, int n, const char *file, const char *where,
                        st_error *e) {
    for (const cJSON *it = obj->child; it; it = it->next)
        if (!key_allowed(it->string, list, n)) {
            char allowed[512] = "";
            for (int i = 0; i < n; i++) {
                strncat(allowed, i ? ", " : "", sizeof allowed - strlen(allowed) - 1);
                strncat(allowed, list[i], sizeof allowed - strlen(allowed) - 1);
            }
            return st_fail(e, ST_ERR_CONFIG, "%s: %s%s%s: unknown key (allowed: %s)", file, where, *where ? "." : "",
                           it->string, allowed);
        }
    return ST_OK;
}

/* "FILE: PATH: expected WANT, got VALUE" */
int st_sweep_type_error(st_error *e, const char *file, const char *path, const char *want, const cJSON *v) {
    char got[128];
    st_json_describe(v, got, sizeof got);
    return st_fail(e, ST_ERR_CONFIG, "%s: %s: expected %s, got %s", file, path, want, got);
}

/* An integer in [lo, hi] (JSON numbers are doubles: require an exact integer). */
int st_sweep_get_int(const cJSON *v, const char *file, const char *path, double lo, double hi, int64_t *out,
                     st_error *e) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return st_sweep_type_error(e, file, path, "an integer", v);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return st_fail(e, ST_ERR_CONFIG, "%s: %s: must be in [%.0f, %.0f], got %.0f", file, path, lo, hi, v->valuedouble);
    *out = (int64_t)v->valuedouble;
    return ST_OK;
}

/* Check one override (key, value) by applying it to a default config. */
static int check_override(const sweep *s, const char *where, const char *key, const cJSON *v, st_error *e) {
    if (!(cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v) || cJSON_IsArray(v)))
        return st_sweep_type_error(e, s->file, where, "a string, number, boolean or array", v);
    if (!strchr(key, '.'))
        return st_fail(e, ST_ERR_CONFIG, "%s: %s: a config key path is section.key (e.g. model.pos)", s->file, where);
    char *text = st_json_print_exact(v, 0);
    if (!text) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", s->file);
    size_t n = strlen(key) + strlen(text) + 2;
    char *asg = malloc(n);
    st_run_config *tmp = malloc(sizeof *tmp);
    int rc = ST_OK;
    if (!asg || !tmp) rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", s->file);
    else {
        snprintf(asg, n, "%s=%s", key, text);
        st_run_config_default(tmp);
        st_error le = {0};
        if (st_run_config_set(tmp, asg, &le)) {
            /* the loader's "--set KEY: why" is "WHERE: why" here, and its "--set KEY[i]: why"
             * "WHERE[i]: why": the sweep file's key path names it (no --set was given) */
            const size_t kl = strlen(key);
            const int named = !strncmp(le.msg, "--set ", 6) && !strncmp(le.msg + 6, key, kl);
            const char *rest = le.msg + 6 + kl;
            if (named && !strncmp(rest, ": ", 2)) rc = st_fail(e, ST_ERR_CONFIG, "%s: %s: %s", s->file, where, rest + 2);
            else if (named && rest[0] == '[') rc = st_fail(e, ST_ERR_CONFIG, "%s: %s%s", s->file, where, rest);
            else rc = st_fail(e, ST_ERR_CONFIG, "%s: %s: %s", s->file, where, le.msg);
        }
    }
    free(asg);
    free(tmp);
    cJSON_free(text);
    return rc;
}

/* Short text of an override for run names: "pos-alibi", "rf.kind-exp", "seed-1". */
static void name_part(const char *key, const cJSON *v, char *out, size_t n) {
    const char *dot = strchr(key, '.');
    const char *k = dot ? dot + 1 : key;
    char val[256] = "";
    if (cJSON_IsString(v)) snprintf(val, sizeof val, "%s", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(val, sizeof val, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v)) {
        /* integers in full up to 2^53 (seeds: 1e15+1 and 1e15+2 were both "1e_15") */
        if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) <= 9007199254740992.0)
            snprintf(val, sizeof val, "%.0f", v->valuedouble);
        else snprintf(val, sizeof val, "%g", v->valuedouble);
    } else if (cJSON_IsArray(v)) {
        for (const cJSON *it = v->child; it; it = it->next) {
            char one[64];
            name_part("", it, one, sizeof one);
            strncat(val, it == v->child ? "" : "-", sizeof val - strlen(val) - 1);
            strncat(val, one + 1, sizeof val - strlen(val) - 1);   /* drop the "-" of an empty key */
        }
    }
    snprintf(out, n, "%s-%s", k, val);
    for (char *p = out; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') *p = '_';
}

/* name = name + "__" + part (truncated to the buffer; duplicates are caught later) */
static void append_part(char *name, size_t cap, const char *part) {
    size_t l = strlen(name);
    for (const char *p = l ? "__" : ""; *p && l + 1 < cap; p++) name[l++] = *p;
    for (const char *p = part; *p && l + 1 < cap; p++) name[l++] = *p;
    name[l] = 0;
}

static void add_key(sweep *s, const char *key) {
    for (int i = 0; i < s->n_keys; i++) if (strcmp(s->keys[i], key) == 0) return;
    char **nk = realloc(s->keys, (size_t)(s->n_keys + 1) * sizeof *nk);
    if (!nk) return;
    s->keys = nk;
    s->keys[s->n_keys] = strdup(key);
    if (s->keys[s->n_keys]) s->n_keys++;
}

/* Append one assignment to the point (and, when `record`, to its overrides). */
static int point_add(sweep_point *pt, const char *key, const cJSON *v, int record) {
    char *text = st_json_print_exact(v, 0);
    if (!text) return ST_ERR_MEMORY;
    size_t n = strlen(key) + strlen(text) + 2;
    char **ns = realloc(pt->sets, (size_t)(pt->n_sets + 1) * sizeof *ns);
    char *asg = malloc(n);
    if (!ns || !asg) { free(asg); if (ns) pt->sets = ns; cJSON_free(text); return ST_ERR_MEMORY; }
    pt->sets = ns;
    snprintf(asg, n, "%s=%s", key, text);
    pt->sets[pt->n_sets++] = asg;
    cJSON_free(text);
    if (record) cJSON_AddItemToObject(pt->overrides, key, cJSON_Duplicate(v, 1));
    return ST_OK;
}

static int load_point_config(sweep *s, sweep_point *pt, const char *base_path, const char *base_text, st_error *e) {
    st_error le = {0};
    int rc;
    if (base_path) rc = st_run_config_load(base_path, (const char *const *)pt->sets, pt->n_sets, &pt->cfg, &le);
    else rc = st_run_config_parse(base_text, strlen(base_text), s->base_desc, (const char *const *)pt->sets,
                                  pt->n_sets, &pt->cfg, &le);
    if (rc == ST_ERR_CONFIG) {
        /* a rule between keys broken by the point's own values (set, variant, grid) names
         * them, not the base file, unless the base alone breaks it the same way */
        st_error alone = {0};
        st_run_config_error(base_path ? base_path : s->base_desc, base_path ? NULL : base_text, NULL, 0, &alone);
        st_config_blame(&le, base_path ? base_path : s->base_desc, (const char *const *)pt->sets, pt->n_sets,
                        "the point's ", NULL, &alone);
    }
    if (rc) return st_fail(e, rc == ST_ERR_IO ? ST_ERR_IO : ST_ERR_CONFIG, "%s: point %s: %s", s->file, pt->name, le.msg);
    st_run_config norm = pt->cfg;
    norm.train.threads = 0;          /* how fast a run went is not what it is */
    norm.train.max_seconds = 0;
    snprintf(pt->config_hash, sizeof pt->config_hash, "%016llx", (unsigned long long)st_run_config_hash(&norm));
    return ST_OK;
}

/* The sections the points are built from (items of s->root) and the resolved base. */
typedef struct sweep_spec {
    const char *file;               /* the sweep file, as given (messages, base path) */
    const cJSON *common;            /* "set", or NULL */
    const cJSON *vars;              /* "variants", or NULL */
    const cJSON *grid;              /* "grid", or NULL */
    int n_var, n_grid;              /* variants (1 without any), grid keys */
    double total;                   /* points: n_var x the grid's product */
    char base_path[ST_PATH_BUF];    /* the base config file; "" for an inline base */
    char *base_text;                /* the inline base, printed (cJSON_free) */
} sweep_spec;

/* Read and parse the file into s->root; a syntax error names its line, column and byte,
 * as a run config's does. */
static int parse_file(sweep *s, const char *file, st_error *e) {
    size_t len = 0;
    char *text = st_read_file(file, &len, SWEEP_TEXT_MAX, e);
    if (!text) return e ? e->code : ST_ERR_IO;
    s->root = st_json_parse_text(file, text, len, e);
    free(text);
    return s->root ? ST_OK : e ? e->code : ST_ERR_CONFIG;
}

/* The top level: known keys only, "description", "jobs" and "out" (options override). */
static int parse_header(sweep *s, const char *file, const st_sweep_opts *opts, st_error *e) {
    cJSON *root = s->root;
    if (!cJSON_IsObject(root)) return st_fail(e, ST_ERR_CONFIG, "%s: expected a JSON object", file);
    int rc = st_sweep_check_keys(root, top_keys, (int)(sizeof top_keys / sizeof *top_keys), file, "", e);
    if (rc) return rc;
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (desc && !cJSON_IsString(desc)) return st_sweep_type_error(e, file, "description", "a string", desc);

    /* jobs: runs at a time on this machine (each rank's share under MPI) */
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
    int64_t nj = 1;
    if (jobs && (rc = st_sweep_get_int(jobs, file, "jobs", 1, 1024, &nj, e))) return rc;
    s->jobs = opts && opts->jobs > 0 ? opts->jobs : (int)nj;

    /* out */
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(root, "out");
    if (out && (!cJSON_IsString(out) || !out->valuestring[0]))
        return st_sweep_type_error(e, file, "out", "a non-empty directory path", out);
    if (opts && opts->out) snprintf(s->out, sizeof s->out, "%s", opts->out);
    else if (out) snprintf(s->out, sizeof s->out, "%s", out->valuestring);
    else return st_fail(e, ST_ERR_CONFIG, "%s: out: missing (set it in the file or pass --out DIR)", file);
    return ST_OK;
}

/* base: a path relative to the sweep file (falling back to the current directory), or
 * an inline config object */
static int resolve_base(sweep *s, sweep_spec *sp, st_error *e) {
    const char *file = sp->file;
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(s->root, "base");
    if (!base) return st_fail(e, ST_ERR_CONFIG, "%s: base: missing (a config path or an inline config object)", file);
    if (cJSON_IsString(base)) {
        const char *b = base->valuestring;
        const char *slash = strrchr(file, '/');
        char *base_path = sp->base_path;
        const size_t cap = sizeof sp->base_path;
        if (b[0] != '/' && slash) snprintf(base_path, cap, "%.*s/%s", (int)(slash - file), file, b);
        else snprintf(base_path, cap, "%s", b);
        if (!st_sweep_exists(base_path) && st_sweep_exists(b)) snprintf(base_path, cap, "%s", b);
        if (!st_sweep_exists(base_path))
            return st_fail(e, ST_ERR_IO, "%s: base: %s: no such config file (paths are relative to the sweep file)", file, base_path);
        snprintf(s->base_desc, sizeof s->base_desc, "%s", base_path);
        return ST_OK;
    }
    if (cJSON_IsObject(base)) {
        sp->base_text = st_json_print_exact(base, 0);
        if (!sp->base_text) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", file);
        snprintf(s->base_desc, sizeof s->base_desc, "%s:base", file);
        return ST_OK;
    }
    return st_fail(e, ST_ERR_CONFIG, "%s: base: expected a config file path or an inline config object", file);
}

/* set: common assignments */
static int check_common(sweep *s, sweep_spec *sp, st_error *e) {
    const cJSON *common = sp->common = cJSON_GetObjectItemCaseSensitive(s->root, "set");
    if (!common) return ST_OK;
    if (!cJSON_IsObject(common))
        return st_sweep_type_error(e, sp->file, "set", "an object {\"section.key\": value}", common);
    char where[512];
    int rc = ST_OK;
    for (const cJSON *it = common->child; !rc && it; it = it->next) {
        snprintf(where, sizeof where, "set.%s", it->string);
        rc = check_override(s, where, it->string, it, e);
    }
    return rc;
}

/* variants: objects of overrides, each with an optional "name" */
static int check_variants(sweep *s, sweep_spec *sp, st_error *e) {
    const char *file = sp->file;
    const cJSON *vars = sp->vars = cJSON_GetObjectItemCaseSensitive(s->root, "variants");
    if (!vars) return ST_OK;
    sp->n_var = cJSON_GetArraySize(vars);
    if (!cJSON_IsArray(vars) || sp->n_var < 1)
        return st_sweep_type_error(e, file, "variants", "a non-empty array of objects", vars);
    char where[512];
    int rc = ST_OK, i = 0;
    for (const cJSON *v = vars->child; !rc && v; v = v->next, i++) {
        if (!cJSON_IsObject(v) || !v->child) {
            snprintf(where, sizeof where, "variants[%d]", i);
            return st_sweep_type_error(e, file, where, "a non-empty object of config overrides", v);
        }
        for (const cJSON *it = v->child; !rc && it; it = it->next) {
            snprintf(where, sizeof where, "variants[%d].%s", i, it->string);
            if (strcmp(it->string, "name") == 0) {
                if (!cJSON_IsString(it) || !it->valuestring[0])
                    rc = st_sweep_type_error(e, file, where, "a non-empty string", it);
            } else {
                rc = check_override(s, where, it->string, it, e);
                if (!rc) add_key(s, it->string);
            }
        }
    }
    return rc;
}

/* grid: a non-empty list of values per key; the point count multiplies by each length */
static int check_grid(sweep *s, sweep_spec *sp, st_error *e) {
    const cJSON *grid = sp->grid = cJSON_GetObjectItemCaseSensitive(s->root, "grid");
    sp->total = sp->n_var;
    if (!grid) return ST_OK;
    if (!cJSON_IsObject(grid))
        return st_sweep_type_error(e, sp->file, "grid", "an object {\"section.key\": [values]}", grid);
    char where[512];
    int rc = ST_OK;
    for (const cJSON *g = grid->child; !rc && g; g = g->next, sp->n_grid++) {
        int n = cJSON_GetArraySize(g);
        if (!cJSON_IsArray(g) || n < 1) {
            snprintf(where, sizeof where, "grid.%s", g->string);
            return st_sweep_type_error(e, sp->file, where, "a non-empty array of values", g);
        }
        int i = 0;
        for (const cJSON *it = g->child; !rc && it; it = it->next, i++) {
            snprintf(where, sizeof where, "grid.%s[%d]", g->string, i);
            rc = check_override(s, where, g->string, it, e);
        }
        add_key(s, g->string);
        sp->total *= n;
    }
    return rc;
}

/* Every override of "set", "variants" and "grid", checked before anything runs, and the
 * number of points they make. */
static int check_sections(sweep *s, sweep_spec *sp, st_error *e) {
    int rc = check_common(s, sp, e);
    if (!rc) rc = check_variants(s, sp, e);
    if (!rc) rc = check_grid(s, sp, e);
    if (!rc && sp->total > MAX_POINTS)
        rc = st_fail(e, ST_ERR_CONFIG, "%s: grid: %.0f points, more than the limit of %d", sp->file, sp->total, MAX_POINTS);
    return rc;
}

/* "set" applies to every point but is not part of its name (nor of its overrides) */
static int add_common(sweep_point *pt, const sweep_spec *sp, st_error *e) {
    for (const cJSON *it = sp->common ? sp->common->child : NULL; it; it = it->next)
        if (point_add(pt, it->string, it, 0)) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", sp->file);
    return ST_OK;
}

/* The variant's assignments; its "name", else its overrides' short texts, name the point. */
static int add_variant(sweep_point *pt, const cJSON *var, const char *file, st_error *e) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(var, "name");
    char part[300];
    int rc = ST_OK;
    for (const cJSON *it = var->child; it && !rc; it = it->next) {
        if (strcmp(it->string, "name") == 0) continue;
        if (point_add(pt, it->string, it, 1)) rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", file);
        if (!nm) {
            name_part(it->string, it, part, sizeof part);
            append_part(pt->name, sizeof pt->name, part);
        }
    }
    if (nm) {
        snprintf(pt->name, sizeof pt->name, "%s", nm->valuestring);
        for (char *p = pt->name; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') *p = '_';
        /* OUT/. is OUT itself (whose lock the sweep holds) and OUT/.. its parent: as a
         * point's own name (no grid part after it) neither is a directory of its own */
        if (!strcmp(pt->name, ".") || !strcmp(pt->name, ".."))
            for (char *p = pt->name; *p; p++) *p = '_';
    }
    return rc;
}

/* The point's grid values: its index within the variant, `rem`, in mixed radix (last key
 * fastest). Each joins the name, and the group unless it is the seed (groups average seeds). */
static int add_grid(sweep_point *pt, const sweep_spec *sp, int rem, st_error *e) {
    int g;
    int *choice = calloc((size_t)(sp->n_grid + 1), sizeof *choice);
    if (!choice) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", sp->file);
    for (g = sp->n_grid - 1; g >= 0; g--) {
        const cJSON *gk = cJSON_GetArrayItem(sp->grid, g);
        int n = cJSON_GetArraySize(gk);
        choice[g] = rem % n;
        rem /= n;
    }
    char part[300];
    int rc = ST_OK;
    g = 0;
    for (const cJSON *gk = sp->grid ? sp->grid->child : NULL; gk && !rc; gk = gk->next, g++) {
        const cJSON *v = cJSON_GetArrayItem(gk, choice[g]);
        if (point_add(pt, gk->string, v, 1)) rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", sp->file);
        name_part(gk->string, v, part, sizeof part);
        if (strcmp(gk->string, "train.seed") != 0) append_part(pt->group, sizeof pt->group, part);
        append_part(pt->name, sizeof pt->name, part);
    }
    free(choice);
    return rc;
}

/* Run dirs are named after their points: two points of one name would share one. */
static int check_unique(const sweep *s, int idx, const char *file, st_error *e) {
    for (int j = 0; j < idx; j++)
        if (strcmp(s->points[j].name, s->points[idx].name) == 0)
            return st_fail(e, ST_ERR_CONFIG, "%s: points %d and %d are both named \"%s\" (give the variants distinct names)",
                           file, j, idx, s->points[idx].name);
    return ST_OK;
}

/* Point idx: base + "set" + its variant + its grid values, its names and its config. */
static int build_point(sweep *s, const sweep_spec *sp, int idx, st_error *e) {
    sweep_point *pt = &s->points[idx];
    pt->overrides = cJSON_CreateObject();
    int rc = add_common(pt, sp, e);
    const int per_var = s->n_points / sp->n_var;
    const cJSON *var = sp->vars ? cJSON_GetArrayItem(sp->vars, idx / per_var) : NULL;
    pt->name[0] = 0;
    if (!rc && var) rc = add_variant(pt, var, sp->file, e);
    snprintf(pt->group, sizeof pt->group, "%s", pt->name);   /* the variant part */
    if (!rc) rc = add_grid(pt, sp, idx % per_var, e);
    if (rc) return rc;
    if (!pt->name[0]) snprintf(pt->name, sizeof pt->name, "base");
    if (!pt->group[0]) snprintf(pt->group, sizeof pt->group, "base");
    rc = check_unique(s, idx, sp->file, e);
    snprintf(pt->dir, sizeof pt->dir, "%s/%s", s->out, pt->name);
    return rc ? rc : load_point_config(s, pt, sp->base_path[0] ? sp->base_path : NULL, sp->base_text, e);
}

/* Points = variants x the grid's product, variant slowest. */
static int expand_points(sweep *s, const sweep_spec *sp, st_error *e) {
    /* n_points only once the array exists: st_sweep_free walks n_points entries */
    s->points = calloc((size_t)sp->total, sizeof *s->points);
    if (!s->points) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory", sp->file);
    s->n_points = (int)sp->total;
    int rc = ST_OK;
    for (int idx = 0; !rc && idx < s->n_points; idx++) rc = build_point(s, sp, idx, e);
    return rc;
}

/* the plan's canonical text: the marker records it, so a changed eval section re-runs
 * the evaluation (not the training) */
/* Every point's run directory must leave room for the files its run writes: checked
 * before the first point trains, not when the last one saves its first checkpoint. */
static int check_dirs(const sweep *s, const char *file, const st_sweep_opts *opts, st_error *e) {
    char what[ST_PATH_MAX + 320];
    for (int i = 0; i < s->n_points; i++) {
        snprintf(what, sizeof what, "%s%s: run directory OUT/%s", opts && opts->out ? "" : file,
                 opts && opts->out ? "--out" : ": out", s->points[i].name);
        int rc = st_dir_check(s->points[i].dir, what, e);
        if (rc) return rc;
    }
    return ST_OK;
}

int st_sweep_load(sweep *s, const char *file, const st_sweep_opts *opts, st_error *e) {
    memset(s, 0, sizeof *s);
    snprintf(s->file, sizeof s->file, "%s", file);
    s->threads = opts ? opts->threads : 0;
    int rc = parse_file(s, file, e);
    if (!rc) rc = parse_header(s, file, opts, e);
    if (rc) return rc;
    sweep_spec sp = {.file = file, .n_var = 1};
    if ((rc = resolve_base(s, &sp, e))) return rc;
    rc = st_sweep_parse_eval(s, cJSON_GetObjectItemCaseSensitive(s->root, "eval"), e);
    if (!rc) rc = check_sections(s, &sp, e);
    if (!rc) rc = expand_points(s, &sp, e);
    for (int i = 0; !rc && i < s->n_points; i++) rc = st_sweep_check_task_scales(s, &s->points[i], e);
    if (!rc) rc = st_sweep_check_task_depths(s, e);
    if (!rc) rc = check_dirs(s, file, opts, e);
    cJSON_free(sp.base_text);
    if (rc) return rc;
    st_sweep_sign_plan(s);
    return ST_OK;
}

void st_sweep_free(sweep *s) {
    for (int i = 0; i < s->n_points; i++) {
        sweep_point *pt = &s->points[i];
        for (int j = 0; j < pt->n_sets; j++) free(pt->sets[j]);
        free(pt->sets);
        cJSON_Delete(pt->overrides);
        cJSON_Delete(pt->record);
    }
    free(s->points);
    for (int i = 0; i < s->n_keys; i++) free(s->keys[i]);
    free(s->keys);
    cJSON_Delete(s->root);
    memset(s, 0, sizeof *s);
}
