/* config.c - run configs from JSON: strict parsing, --set assignments, derived defaults
 * and validation. cJSON stays inside src/train/config*.c; everything else sees the plain
 * st_run_config struct.
 *
 * Strictness: an unknown key, a duplicated key, a wrong type, an out-of-range number or an
 * unknown name is an error naming the file and the key path ("--set key" for command-line
 * assignments), so a typo never silently trains with a default. Not here: the semantic
 * checks of the model and data sections, which their modules own
 * (st_model_config_validate, st_data_config_validate); validation calls them. */
#define _GNU_SOURCE
#include "config_schema.h"
#include "st_transform.h"
#include "train_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ messages ---- */
/* Where a value came from: "FILE: model.d_model" or "--set model.d_model". */
static void where(char *buf, size_t n, const char *file, const char *path) {
    if (file) snprintf(buf, n, "%s: %s", file, path);
    else snprintf(buf, n, "--set %s", path);
}

static void describe(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, n, "\"%.60s\"%s", v->valuestring, strlen(v->valuestring) > 60 ? "..." : "");
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, n, "null");
    else if (cJSON_IsArray(v)) snprintf(buf, n, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, n, "an object");
    else snprintf(buf, n, "an invalid value");
}

static int type_error(st_error *e, const char *loc, const char *want, const cJSON *v) {
    char got[128];
    describe(v, got, sizeof got);
    return st_fail(e, ST_ERR_CONFIG, "%s: expected %s, got %s", loc, want, got);
}

/* Shortest text that reads back as the same double; integers up to 1e9 in full, larger
 * magnitudes as "1e12" / "1.23e29" (a count of digits is unreadable), 2^53 by name. */
static void num(char *buf, size_t n, double d) {
    if (d == 9007199254740992.0) { snprintf(buf, n, "2^53"); return; }
    if (d == floor(d) && fabs(d) <= 1e9) { snprintf(buf, n, "%.0f", d); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
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
static int range_error(st_error *e, const char *loc, const st_ckey *k, double x) {
    char lo[32], hi[32], got[32];
    num(lo, sizeof lo, k->min);
    num(hi, sizeof hi, k->max);
    num(got, sizeof got, x);
    return st_fail(e, ST_ERR_CONFIG, "%s: must be in %c%s, %s], got %s", loc, k->xmin ? '(' : '[', lo, hi, got);
}


static int in_range(const st_ckey *k, double x) {
    if (!isfinite(x) || x > k->max) return 0;
    return k->xmin ? x > k->min : x >= k->min;
}

/* An integer-valued JSON number within the key's range. */
static int get_integer(const cJSON *v, const st_ckey *k, const char *loc, double *out, st_error *e) {
    if (!cJSON_IsNumber(v)) return type_error(e, loc, "an integer", v);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return type_error(e, loc, "an integer", v);
    if (!in_range(k, d)) return range_error(e, loc, k, d);
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
        if (!in_range(k, v->valuedouble)) return range_error(e, loc, k, v->valuedouble);
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
    where(loc, sizeof loc, file, path);
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
        where(loc, sizeof loc, file, path);
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
 * true/false, "quoted", [arrays]); otherwise the raw text as a string (so model.pos=alibi
 * needs no quotes). NULL: out of memory. */
static cJSON *set_value(const char *text) {
    cJSON *v = cJSON_ParseWithOpts(text, NULL, 1);
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
    where(loc, sizeof loc, NULL, path);
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
/* skip: bytes dropped before text (a BOM), added back to the reported byte offset */
static int json_error(const char *file, const char *text, size_t len, size_t off, size_t skip, st_error *e) {
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
    return st_fail(e, ST_ERR_CONFIG, "%s: invalid JSON at line %d, column %d (byte %zu), near '%s'",
                   file, line, col, off + skip, near);
}

int st_run_config_parse(const char *json, size_t len, const char *file,
                        const char *const *sets, int n_sets, st_run_config *c, st_error *e) {
    st_run_config_default(c);
    snprintf(c->file, sizeof c->file, "%s", file ? file : "config");
    file = c->file;
    size_t skip = 0;
    if (len >= 3 && (unsigned char)json[0] == 0xEF && (unsigned char)json[1] == 0xBB && (unsigned char)json[2] == 0xBF)
        skip = 3;   /* UTF-8 byte-order mark */
    const char *nul = memchr(json, 0, len);
    if (nul) return st_fail(e, ST_ERR_CONFIG, "%s: invalid JSON: NUL byte at byte %zu", file, (size_t)(nul - json));
    /* cJSON wants the terminator inside the length when it must reject trailing garbage */
    char *buf = st_malloc(len - skip + 1, e);
    if (!buf) return ST_ERR_MEMORY;
    memcpy(buf, json + skip, len - skip);
    buf[len - skip] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len - skip + 1, &end, 1);
    int rc = ST_OK;
    if (!root) {
        size_t off = end ? (size_t)(end - buf) : 0;
        rc = json_error(file, buf, len - skip, off, skip, e);
    } else if (!cJSON_IsObject(root)) {
        rc = st_fail(e, ST_ERR_CONFIG, "%s: expected a JSON object with sections model, data, train, eval", file);
    } else {
        rc = walk(c, root, "", file, e);
    }
    cJSON_Delete(root);
    free(buf);
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

/* ---------------------------------------------------------- validation ---- */
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
        where(loc, sizeof loc, file, k->path);
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
                if (!in_range(k, v)) {
                    char eloc[ST_PATH_BUF + 512 + 16];
                    snprintf(eloc, sizeof eloc, "%s[%d]", loc, j);
                    return range_error(e, eloc, k, v);
                }
            }
            continue;
        }
        default: continue;
        }
        if (!in_range(k, x)) return range_error(e, loc, k, x);
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
    if (c->model.attn_scale == ST_ATTN_SCALE_LOGN && c->model.attn_scale_len == 0)
        c->model.attn_scale_len = t->seq_len;   /* logn: L = the training length */
    /* cross-key rules */
    if (c->model.scaling != 0 && c->model.scaling_len > 0 && t->seq_len < c->model.scaling_len)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.seq_len: %d is shorter than model.scaling.train_len %d: a scaled "
                       "model is trained at the length it extends to", file, t->seq_len, c->model.scaling_len);
    const int64_t max_len = st_pos_max_len(&c->model);
    if (max_len > 0 && t->seq_len > max_len)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.seq_len: %d exceeds the %lld tokens %s positions represent; %s",
                       file, t->seq_len, (long long)max_len, st_pos_name(c->model.pos), st_pos_limit_why(c->model.pos));
    if (c->data.task_doc_mask && st_pos_no_sinks(c->model.pos))
        return st_fail(e, ST_ERR_CONFIG, "%s: data.task.doc_mask: not available with model.pos \"%s\" in training: %s",
                       file, st_pos_name(c->model.pos), st_pos_no_sinks(c->model.pos));
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
    if (t->sched.kind == ST_SCHED_INV_SQRT && t->sched.warmup < 1)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.schedule.warmup: must be >= 1 with kind \"inv_sqrt\"", file);
    if (t->sched.kind == ST_SCHED_COSINE && t->steps > 0 && t->sched.warmup > t->steps)
        return st_fail(e, ST_ERR_CONFIG, "%s: train.schedule.warmup: %lld exceeds train.steps (%lld)",
                       file, (long long)t->sched.warmup, (long long)t->steps);
    /* in either mode: a nonoverlapping config may be evaluated with --mode sliding */
    if (c->eval.stride > 0) {
        for (int i = 0; i < c->eval.n_lengths; i++)
            if (c->eval.stride > c->eval.lengths[i])
                return st_fail(e, ST_ERR_CONFIG, "%s: eval.stride: %lld exceeds eval.lengths[%d] = %lld",
                               file, (long long)c->eval.stride, i, (long long)c->eval.lengths[i]);
    }
    const st_transform xf = {.kind = c->eval.transform, .scale = c->eval.transform_scale, .sinks = c->eval.sinks,
                             .window = c->eval.window, .clip = c->eval.clip};
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
