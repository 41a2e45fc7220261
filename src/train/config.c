/* config.c - run configs from JSON: strict parsing, --set assignments and defaults
 * (validation after parsing: config_validate.c). cJSON stays inside src/train/config*.c;
 * everything else sees the plain st_run_config struct.
 *
 * Strictness: an unknown key, a duplicated key, a wrong type, an out-of-range number or an
 * unknown name is an error naming the file and the key path ("--set key" for command-line
 * assignments), so a typo never silently trains with a default. Not here: the semantic
 * checks of the model and data sections, which their modules own
 * (st_model_config_validate, st_data_config_validate); validation (config_validate.c)
 * calls them. */
#define _GNU_SOURCE
#include "config_schema.h"
#include "train_internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ messages ---- */
static int type_error(st_error *e, const char *loc, const char *want, const cJSON *v) {
    char got[128];
    st_json_describe(v, got, sizeof got);
    return st_fail(e, ST_ERR_CONFIG, "%s: expected %s, got %s", loc, want, got);
}

/* An integer-valued JSON number within the key's range. */
static int get_integer(const cJSON *v, const st_ckey *k, const char *loc, double *out, st_error *e) {
    if (!cJSON_IsNumber(v)) return type_error(e, loc, "an integer", v);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return type_error(e, loc, "an integer", v);
    if (!st_ckey_in_range(k, d)) return st_ckey_range_error(e, loc, k, d);
    *out = d;
    return ST_OK;
}

/* ---------------------------------------------------------------- apply ---- */
static void *field(st_run_config *c, const st_ckey *k) { return (char *)c + k->off; }

static int apply_value(st_run_config *c, const st_ckey *k, const cJSON *v, const char *loc, st_error *e) {
    char allowed[256];
    double d;
    int rc;
    switch (k->kind) {
    case CK_INT:
        if ((rc = get_integer(v, k, loc, &d, e))) return rc;
        *(int *)field(c, k) = (int)d;
        return ST_OK;
    case CK_I64:
        if ((rc = get_integer(v, k, loc, &d, e))) return rc;
        *(int64_t *)field(c, k) = (int64_t)d;
        return ST_OK;
    case CK_U64:
        if ((rc = get_integer(v, k, loc, &d, e))) return rc;
        *(uint64_t *)field(c, k) = (uint64_t)d;
        return ST_OK;
    case CK_FLOAT:
    case CK_DOUBLE:
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return type_error(e, loc, "a number", v);
        if (!st_ckey_in_range(k, v->valuedouble)) return st_ckey_range_error(e, loc, k, v->valuedouble);
        if (k->kind == CK_FLOAT) *(float *)field(c, k) = (float)v->valuedouble;
        else *(double *)field(c, k) = v->valuedouble;
        return ST_OK;
    case CK_BOOL:
        if (!cJSON_IsBool(v)) return type_error(e, loc, "true or false", v);
        *(int *)field(c, k) = cJSON_IsTrue(v) ? 1 : 0;
        return ST_OK;
    case CK_ENUM: {
        st_cenum_list(k->en, allowed, sizeof allowed);
        if (!cJSON_IsString(v)) {
            char want[300];
            snprintf(want, sizeof want, "one of %s", allowed);
            return type_error(e, loc, want, v);
        }
        int x = st_cenum_from(k->en, v->valuestring);
        if (x < 0)
            return st_fail(e, ST_ERR_CONFIG, "%s: unknown value \"%.60s\" (expected %s)", loc, v->valuestring, allowed);
        *(int *)field(c, k) = x;
        return ST_OK;
    }
    case CK_STR:
    case CK_PATH:
        if (!cJSON_IsString(v)) return type_error(e, loc, "a string", v);
        if (strlen(v->valuestring) >= k->size)
            return st_fail(e, ST_ERR_CONFIG, "%s: too long (at most %zu bytes)", loc, k->size - 1);
        if (k->en && st_cenum_from(k->en, v->valuestring) < 0) {
            st_cenum_list(k->en, allowed, sizeof allowed);
            return st_fail(e, ST_ERR_CONFIG, "%s: unknown value \"%.60s\" (expected %s)", loc, v->valuestring, allowed);
        }
        snprintf((char *)field(c, k), k->size, "%s", v->valuestring);
        return ST_OK;
    case CK_I64_LIST:
    case CK_I64_3: {
        if (!cJSON_IsArray(v)) return type_error(e, loc, "an array of integers", v);
        int n = cJSON_GetArraySize(v);
        if (k->kind == CK_I64_3 && n != 3)
            return st_fail(e, ST_ERR_CONFIG, "%s: expected 3 integers (train, valid, test), got %d", loc, n);
        if (n > (int)k->size)
            return st_fail(e, ST_ERR_CONFIG, "%s: at most %zu entries, got %d", loc, k->size, n);
        /* [] would read as "unset" (count 0) and silently become the defaults */
        if (n == 0)
            return st_fail(e, ST_ERR_CONFIG, "%s: expected at least one entry, got [] (leave the key out for the defaults)", loc);
        int64_t *dst = field(c, k);
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            char eloc[ST_PATH_BUF + 512];
            snprintf(eloc, sizeof eloc, "%s[%d]", loc, i);
            if ((rc = get_integer(it, k, eloc, &d, e))) return rc;
            dst[i++] = (int64_t)d;
        }
        if (k->kind == CK_I64_LIST) *(int *)((char *)c + k->off_n) = n;
        return ST_OK;
    }
    case CK_MASK: {
        st_cenum_list(k->en, allowed, sizeof allowed);
        char want[300];
        snprintf(want, sizeof want, "an array of %s", allowed);
        if (!cJSON_IsArray(v)) return type_error(e, loc, want, v);
        int mask = 0, i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            char eloc[ST_PATH_BUF + 512];
            snprintf(eloc, sizeof eloc, "%s[%d]", loc, i++);
            if (!cJSON_IsString(it)) {
                char one[300];
                snprintf(one, sizeof one, "one of %s", allowed);
                return type_error(e, eloc, one, it);
            }
            int x = st_cenum_from(k->en, it->valuestring);
            if (x < 0)
                return st_fail(e, ST_ERR_CONFIG, "%s: unknown value \"%.60s\" (expected %s)", eloc, it->valuestring, allowed);
            mask |= x;
        }
        *(int *)field(c, k) = mask;
        return ST_OK;
    }
    default:
        ST_ASSERT(0 && "bad config key kind");
    }
    return ST_OK;
}

/* Levenshtein distance (short strings) for "did you mean". */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Length of the parent prefix of a key path ("model.rf.kind" -> 8, "model" -> 0). */
static size_t parent_len(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot ? (size_t)(dot - path) : 0;
}

static int unknown_key(const char *file, const char *path, st_error *e) {
    /* closest sibling name */
    size_t pl = parent_len(path);
    const char *leaf = pl ? path + pl + 1 : path;
    const char *best = NULL;
    int best_d = 99;
    for (int i = 0; i < st_config_nkeys; i++) {
        const char *kp = st_config_keys[i].path;
        if (parent_len(kp) != pl || strncmp(kp, path, pl) != 0) continue;
        const char *kl = pl ? kp + pl + 1 : kp;
        int d = edit_distance(leaf, kl);
        if (d < best_d) { best_d = d; best = kp; }
    }
    char loc[ST_PATH_BUF + 512];
    st_ckey_where(loc, sizeof loc, file, path);
    if (best && best_d <= 2 + (int)strlen(leaf) / 4)
        return st_fail(e, ST_ERR_CONFIG, "%s: unknown key (did you mean \"%s\"?)", loc, best);
    return st_fail(e, ST_ERR_CONFIG, "%s: unknown key (see configs/README.md)", loc);
}

/* Walk one JSON object whose key path is `prefix` ("" at the top). */
static int walk(st_run_config *c, const cJSON *obj, const char *prefix, const char *file, st_error *e) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char path[512];
        if (prefix[0]) snprintf(path, sizeof path, "%s.%s", prefix, it->string);
        else snprintf(path, sizeof path, "%s", it->string);
        char loc[ST_PATH_BUF + 512];
        st_ckey_where(loc, sizeof loc, file, path);
        for (const cJSON *prev = obj->child; prev != it; prev = prev->next)
            if (strcmp(prev->string, it->string) == 0)
                return st_fail(e, ST_ERR_CONFIG, "%s: duplicate key", loc);
        const st_ckey *k = st_config_find_key(path);
        if (!k) return unknown_key(file, path, e);
        int rc;
        if (k->kind == CK_OBJ) {
            if (!cJSON_IsObject(it)) return type_error(e, loc, "an object", it);
            rc = walk(c, it, path, file, e);
        } else {
            rc = apply_value(c, k, it, loc, e);
        }
        if (rc) return rc;
    }
    return ST_OK;
}

/* A --set value (and a table default): a JSON value when the text is one (numbers,
 * true/false, "quoted", [arrays]; strict JSON, so "01" is the string "01"); otherwise the
 * raw text as a string (so model.pos=alibi needs no quotes). NULL: out of memory. */
static cJSON *set_value(const char *text) {
    const char *why;
    cJSON *v = st_json_strict_check(text, strlen(text), &why) == (size_t)-1 ? cJSON_ParseWithOpts(text, NULL, 1) : NULL;
    if (!v || cJSON_IsObject(v)) {
        cJSON_Delete(v);
        v = cJSON_CreateString(text);
    }
    return v;
}

int st_run_config_set(st_run_config *c, const char *assignment, st_error *e) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return st_fail(e, ST_ERR_CONFIG, "--set %s: expected section.key=value", assignment);
    char path[512];
    size_t pl = (size_t)(eq - assignment);
    if (pl >= sizeof path) return st_fail(e, ST_ERR_CONFIG, "--set: key too long");
    memcpy(path, assignment, pl);
    path[pl] = 0;
    const st_ckey *k = st_config_find_key(path);
    if (!k) return unknown_key(NULL, path, e);
    if (k->kind == CK_OBJ)
        return st_fail(e, ST_ERR_CONFIG, "--set %s: is an object; set its keys one by one (e.g. %s.<key>=value)",
                       path, path);
    cJSON *v = set_value(eq + 1);
    if (!v) return st_fail(e, ST_ERR_MEMORY, "--set %s: out of memory", path);
    char loc[ST_PATH_BUF + 512];
    st_ckey_where(loc, sizeof loc, NULL, path);
    int rc = apply_value(c, k, v, loc, e);
    cJSON_Delete(v);
    return rc;
}

/* ------------------------------------------------------------ defaults ---- */
/* Every default is a row of the key table (config_schema.c), written as a --set value and
 * applied by the same code as a user's value, so a default is also range-checked. Keys
 * without one stay zero / empty (derived at load time). The table is fixed at build time:
 * test_config checks that every default applies; a failure here is a table bug, so the
 * key is left at zero rather than aborting a library caller. section: "model", ...;
 * NULL: every key. */
static void apply_defaults(st_run_config *c, const char *section) {
    size_t sl = section ? strlen(section) : 0;
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (!k->def || k->kind == CK_OBJ || (section && (strncmp(k->path, section, sl) != 0 || k->path[sl] != '.')))
            continue;
        cJSON *v = set_value(k->def);
        st_error e = {0};
        if (v) apply_value(c, k, v, k->path, &e);
        cJSON_Delete(v);
    }
}

void st_run_config_default(st_run_config *c) {
    memset(c, 0, sizeof *c);
    apply_defaults(c, NULL);   /* every section */
}

/* The modules' defaults are their sections of the same table (declared in st_model.h and
 * st_data.h for callers that build a model or dataset without a run config). */
void st_model_config_default(st_model_config *c) {
    st_run_config *r = calloc(1, sizeof *r);
    memset(c, 0, sizeof *c);
    if (!r) return;
    apply_defaults(r, "model");
    *c = r->model;
    free(r);
}

void st_data_config_default(st_data_config *c) {
    st_run_config *r = calloc(1, sizeof *r);
    memset(c, 0, sizeof *c);
    if (!r) return;
    apply_defaults(r, "data");
    *c = r->data;
    free(r);
}

/* ------------------------------------------------------------ parsing ---- */
/* The error at byte `off` of text[0..len): line, column, the byte (plus skip, the BOM's
 * bytes dropped before text), what is wrong when known, and the text there. */
static int json_error(const char *file, const char *text, size_t len, size_t off, size_t skip, const char *why,
                      st_error *e) {
    int line = 1, col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') { line++; col = 1; } else col++;
    }
    char near[32] = "";
    size_t j = 0;
    for (size_t i = off; i < len && j < 20 && text[i] != '\n'; i++) near[j++] = text[i];
    near[j] = 0;
    if (off >= len)
        return st_fail(e, ST_ERR_CONFIG, "%s: invalid JSON: unexpected end of file at line %d, column %d (byte %zu)",
                       file, line, col, off + skip);
    return st_fail(e, ST_ERR_CONFIG, "%s: invalid JSON at line %d, column %d (byte %zu)%s%s, near '%s'",
                   file, line, col, off + skip, why ? ": " : "", why ? why : "", near);
}

cJSON *st_json_parse_text(const char *file, const char *json, size_t len, st_error *e) {
    size_t skip = 0;
    if (len >= 3 && (unsigned char)json[0] == 0xEF && (unsigned char)json[1] == 0xBB && (unsigned char)json[2] == 0xBF)
        skip = 3;   /* UTF-8 byte-order mark */
    const char *nul = memchr(json, 0, len);
    if (nul) {
        st_fail(e, ST_ERR_CONFIG, "%s: invalid JSON: NUL byte at byte %zu", file, (size_t)(nul - json));
        return NULL;
    }
    /* cJSON wants the terminator inside the length when it must reject trailing garbage */
    char *buf = st_malloc(len - skip + 1, e);
    if (!buf) return NULL;
    memcpy(buf, json + skip, len - skip);
    buf[len - skip] = 0;
    const char *end = NULL, *why = NULL;
    const size_t bad = st_json_strict_check(buf, len - skip, &why);
    cJSON *root = bad == (size_t)-1 ? cJSON_ParseWithLengthOpts(buf, len - skip + 1, &end, 1) : NULL;
    if (bad != (size_t)-1) json_error(file, buf, len - skip, bad, skip, why, e);
    else if (!root) json_error(file, buf, len - skip, end ? (size_t)(end - buf) : 0, skip, NULL, e);
    free(buf);
    return root;
}

int st_run_config_parse(const char *json, size_t len, const char *file,
                        const char *const *sets, int n_sets, st_run_config *c, st_error *e) {
    st_run_config_default(c);
    snprintf(c->file, sizeof c->file, "%s", file ? file : "config");
    file = c->file;
    st_error pe = {0};
    cJSON *root = st_json_parse_text(file, json, len, &pe);
    int rc = ST_OK;
    if (!root) {
        rc = st_fail(e, pe.code, "%s", pe.msg);
    } else if (!cJSON_IsObject(root)) {
        rc = st_fail(e, ST_ERR_CONFIG, "%s: expected a JSON object with sections model, data, train, eval", file);
    } else {
        rc = walk(c, root, "", file, e);
    }
    cJSON_Delete(root);
    for (int i = 0; !rc && i < n_sets; i++) rc = st_run_config_set(c, sets[i], e);
    if (!rc) rc = st_run_config_validate(c, e);
    return rc;
}

int st_run_config_load(const char *path, const char *const *sets, int n_sets,
                       st_run_config *c, st_error *e) {
    size_t len = 0;
    char *text = st_read_file(path, &len, (size_t)16 << 20, e);
    if (!text) { st_run_config_default(c); return e ? e->code : ST_ERR_IO; }
    int rc = st_run_config_parse(text, len, path, sets, n_sets, c, e);
    free(text);
    return rc;
}

void st_run_config_error(const char *path, const char *text, const char *const *sets, int n_sets, st_error *e) {
    st_run_config *tmp = malloc(sizeof *tmp);   /* large: paths */
    if (!tmp) { st_fail(e, ST_ERR_MEMORY, "out of memory"); return; }
    if (text) st_run_config_parse(text, strlen(text), path, sets, n_sets, tmp, e);
    else st_run_config_load(path, sets, n_sets, tmp, e);
    free(tmp);
}

int st_config_names_key(const char *msg, const char *assignment) {
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(assignment, "="), assignment);
    const size_t n = strlen(key);
    for (const char *p = msg; n && (p = strstr(p, key)) != NULL; p++) {
        const char b = p > msg ? p[-1] : ' ', c = p[n];
        if (!isalnum((unsigned char)b) && b != '_' && b != '.' && !isalnum((unsigned char)c) && c != '_' && c != '.')
            return 1;
    }
    return 0;
}

int st_config_blame(st_error *e, const char *file, const char *const *sets, int n_sets, const char *label,
                    const char *flags, const st_error *alone) {
    char who[512];
    snprintf(who, sizeof who, "%s", flags ? flags : "");
    const int same_alone = alone && alone->code && strcmp(alone->msg, e->msg) == 0;
    for (int i = 0; i < n_sets && !same_alone; i++) {
        if (!st_config_names_key(e->msg, sets[i])) continue;
        const size_t w = strlen(who);
        snprintf(who + w, sizeof who - w, "%s%s%.100s", w ? ", " : "", label, sets[i]);
    }
    const int set_named = !strncmp(e->msg, "--set ", 6);
    /* a --set error names its --set already ("--set train.steps: expected an integer") */
    if (!who[0] || (set_named && !(flags && flags[0]))) return 0;
    const char *rest = e->msg;
    const size_t fl = file ? strlen(file) : 0;
    if (set_named) rest += 6;
    else if (fl && !strncmp(rest, file, fl) && !strncmp(rest + fl, ": ", 2)) rest += fl + 2;
    char msg[sizeof e->msg];
    snprintf(msg, sizeof msg, "%s", rest);
    st_fail(e, e->code, "%s: %s", who, msg);
    return 1;
}
