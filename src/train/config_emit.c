/* config_emit.c - the canonical JSON form of a run config: saving RUN_DIR/config.json,
 * the config hash stored in checkpoints, and key-by-key diffs.
 *
 * Canonical = the key table's order, two-space indentation, integers in decimal, floats
 * in the shortest text that reads back to the same float (so a saved config loads back
 * bit-identical, and "lr": 0.0003 stays readable instead of 0.00030000001424923539). */
#include "config_schema.h"
#include "train_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Growable text buffer; on allocation failure it marks itself failed and stops. */
typedef struct sbuf { char *p; size_t len, cap; int failed; } sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (b->len + n + 1 > cap) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->failed = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void fmt_float(char *buf, size_t n, float f) {
    if (f == floorf(f) && fabsf(f) < 1e9f) { snprintf(buf, n, "%.0f", (double)f); return; }   /* 10000, not 1e+04 */
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return;
    }
}

static void fmt_double(char *buf, size_t n, double d) {
    if (d == floor(d) && fabs(d) < 1e15) { snprintf(buf, n, "%.0f", d); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) return;
    }
}

/* JSON string with escapes for quotes, backslashes and control bytes. */
static void fmt_string(char *buf, size_t n, const char *s) {
    size_t j = 0;
    if (n < 3) { if (n) buf[0] = 0; return; }
    buf[j++] = '"';
    for (; *s && j + 8 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') { buf[j++] = '\\'; buf[j++] = (char)ch; }
        else if (ch == '\n') { buf[j++] = '\\'; buf[j++] = 'n'; }
        else if (ch == '\t') { buf[j++] = '\\'; buf[j++] = 't'; }
        else if (ch < 0x20) j += (size_t)snprintf(buf + j, n - j, "\\u%04x", ch);
        else buf[j++] = (char)ch;
    }
    buf[j++] = '"';
    buf[j] = 0;
}

void st_config_value_str(const struct st_ckey *k, const st_run_config *c, char *buf, size_t n) {
    const void *f = (const char *)c + k->off;
    buf[0] = 0;
    switch (k->kind) {
    case CK_INT: snprintf(buf, n, "%d", *(const int *)f); break;
    case CK_I64: snprintf(buf, n, "%lld", (long long)*(const int64_t *)f); break;
    case CK_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)f); break;
    case CK_FLOAT: fmt_float(buf, n, *(const float *)f); break;
    case CK_DOUBLE: fmt_double(buf, n, *(const double *)f); break;
    case CK_BOOL: snprintf(buf, n, "%s", *(const int *)f ? "true" : "false"); break;
    case CK_ENUM: {
        const char *name = st_cenum_to(k->en, *(const int *)f);
        fmt_string(buf, n, name ? name : "?");
        break;
    }
    case CK_STR:
    case CK_PATH: fmt_string(buf, n, (const char *)f); break;
    case CK_I64_LIST:
    case CK_I64_3: {
        int cnt = k->kind == CK_I64_3 ? 3 : *(const int *)((const char *)c + k->off_n);
        size_t j = (size_t)snprintf(buf, n, "[");
        for (int i = 0; i < cnt && j < n; i++)
            j += (size_t)snprintf(buf + j, n - j, "%s%lld", i ? ", " : "", (long long)((const int64_t *)f)[i]);
        if (j < n) snprintf(buf + j, n - j, "]");
        break;
    }
    case CK_MASK: {
        int mask = *(const int *)f, first = 1;
        size_t j = (size_t)snprintf(buf, n, "[");
        for (int bit = 1; bit < (1 << 16) && j < n; bit <<= 1) {
            if (!(mask & bit)) continue;
            const char *name = st_cenum_to(k->en, bit);
            j += (size_t)snprintf(buf + j, n - j, "%s\"%s\"", first ? "" : ", ", name ? name : "?");
            first = 0;
        }
        if (j < n) snprintf(buf + j, n - j, "]");
        break;
    }
    default: break;
    }
}

static size_t parent_len(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot ? (size_t)(dot - path) : 0;
}

/* Is `path` a direct child of `prefix` ("" = top level)? */
static int is_child(const char *path, const char *prefix) {
    size_t pl = strlen(prefix);
    if (parent_len(path) != pl) return 0;
    return pl == 0 || (strncmp(path, prefix, pl) == 0 && path[pl] == '.');
}

static void indent(sbuf *b, int depth) {
    for (int i = 0; i < depth; i++) sb_puts(b, "  ");
}

/* The children of `prefix` as the body of an object, at indentation depth. */
static void emit_object(sbuf *b, const st_run_config *c, const char *prefix, int depth) {
    int first = 1;
    char val[8192];
    sb_puts(b, "{\n");
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (!is_child(k->path, prefix)) continue;
        if (!first) sb_puts(b, ",\n");
        first = 0;
        indent(b, depth + 1);
        const char *leaf = prefix[0] ? k->path + strlen(prefix) + 1 : k->path;
        sb_puts(b, "\"");
        sb_puts(b, leaf);
        sb_puts(b, "\": ");
        if (k->kind == CK_OBJ) {
            emit_object(b, c, k->path, depth + 1);
        } else {
            st_config_value_str(k, c, val, sizeof val);
            sb_puts(b, val);
        }
    }
    sb_puts(b, "\n");
    indent(b, depth);
    sb_puts(b, "}");
}

char *st_run_config_to_json(const st_run_config *c, const char *section) {
    sbuf b = {0};
    emit_object(&b, c, section ? section : "", 0);
    sb_puts(&b, "\n");
    if (b.failed) { free(b.p); return NULL; }
    return b.p;
}

int st_run_config_write(const st_run_config *c, FILE *f, const char *path, st_error *e) {
    char *json = st_run_config_to_json(c, NULL);
    if (!json) return st_fail(e, ST_ERR_MEMORY, "%s: out of memory formatting the config", path);
    const size_t n = strlen(json);
    int rc = fwrite(json, 1, n, f) == n ? ST_OK : st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    free(json);
    return rc;
}

int st_run_config_save(const st_run_config *c, const char *path, st_error *e) {
    st_atomic_file a;
    if (!st_atomic_open(&a, path, e)) return e->code;
    int rc = st_run_config_write(c, a.f, path, e);
    if (rc) { st_atomic_abort(&a); return rc; }
    return st_atomic_commit(&a, e);
}

uint64_t st_run_config_hash(const st_run_config *c) {
    char *json = st_run_config_to_json(c, NULL);
    if (!json) return 0;
    const uint64_t h = st_fnv1a(ST_FNV_OFFSET, json, strlen(json));
    free(json);
    return h;
}

int st_run_config_diff(const st_run_config *a, const st_run_config *b, const char *section,
                       char *buf, size_t n) {
    size_t sl = section ? strlen(section) : 0;
    char va[8192], vb[8192], item[480];
    int count = 0, left = 0;   /* keys that differ; of those, the ones buf had no room for */
    size_t len = 0;
    if (buf && n) buf[0] = 0;
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (k->kind == CK_OBJ) continue;
        if (sl && (strncmp(k->path, section, sl) != 0 || k->path[sl] != '.')) continue;
        st_config_value_str(k, a, va, sizeof va);
        st_config_value_str(k, b, vb, sizeof vb);
        if (strcmp(va, vb) == 0) continue;
        const int m = snprintf(item, sizeof item, "%s%s: %.200s vs %.200s", count ? ", " : "", k->path, va, vb);
        count++;
        /* every key, not the first alone: a resume that changed two keys says both; room
         * is kept for the ", and N more" that ends a list cut short */
        if (!buf || left || len + (size_t)m + 24 > n) left += buf != NULL;
        else len += (size_t)snprintf(buf + len, n - len, "%s", item);
    }
    if (left) snprintf(buf + len, n - len, ", and %d more", left);
    return count > 0;
}
