/* test_config_doc.c - configs/README.md against the config key table
 * (src/train/config_schema.c), the one source of truth of every key's type, default and
 * range (issue 14 item 7): every key has a row in its section's table, no row names a key
 * the table does not have, and each row's type, default and range are the table's. The
 * range cell starts with the table's range written the README's way ("[1, 256]",
 * "(0, 100]", ">= 0", "2^24", enum names); what follows a ", " is a rule relating keys. */
#include "harness.h"
#include "st_train.h"
#include "train/config_schema.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct row { char key[300], type[256], def[256], range[256], meaning[256]; int seen; } row;

static void trim(char *s) {
    size_t n = strlen(s), a = 0;
    while (a < n && s[a] == ' ') a++;
    while (n > a && (s[n - 1] == ' ' || s[n - 1] == '\n')) n--;
    memmove(s, s + a, n - a);
    s[n - a] = 0;
}

static void strip_backticks(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) if (*r != '`') *w++ = *r;
    *w = 0;
}

/* Rows "| `key` | type | default | range | meaning |" of the "## model/data/train/eval"
 * tables, keys prefixed with their section. */
static int read_rows(const char *text, row *rows, int cap) {
    int n = 0;
    char section[16] = "";
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (!strncmp(line, "## ", 3)) {   /* the key tables are the sections model, data, train, eval */
            size_t l = strcspn(line + 3, " \n");
            snprintf(section, sizeof section, "%.*s", (int)(l < 15 ? l : 15), line + 3);
            if (strcmp(section, "model") && strcmp(section, "data") && strcmp(section, "train") && strcmp(section, "eval"))
                section[0] = 0;
            continue;
        }
        if (strncmp(line, "| `", 3) != 0 || !section[0]) continue;
        char cell[5][256];
        const char *p = line + 1;
        int c = 0;
        for (; c < 5; c++) {
            const char *bar = strchr(p, '|');
            if (!bar) break;
            snprintf(cell[c], sizeof cell[c], "%.*s", (int)(bar - p), p);
            trim(cell[c]);
            p = bar + 1;
        }
        if (c < 5 || n == cap) continue;
        strip_backticks(cell[0]);
        row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->key, sizeof r->key, "%s.%s", section, cell[0]);
        snprintf(r->type, sizeof r->type, "%s", cell[1]);
        snprintf(r->def, sizeof r->def, "%s", cell[2]);
        snprintf(r->range, sizeof r->range, "%s", cell[3]);
        snprintf(r->meaning, sizeof r->meaning, "%s", cell[4]);
    }
    return n;
}

static const char *type_name(int kind) {
    switch (kind) {
    case CK_INT: case CK_I64: case CK_U64: return "int";
    case CK_FLOAT: case CK_DOUBLE: return "number";
    case CK_BOOL: return "bool";
    case CK_ENUM: case CK_STR: case CK_PATH: return "string";
    case CK_I64_LIST: return "array of ints";
    case CK_MASK: return "array of strings";
    case CK_I64_3: return "[int, int, int]";
    default: return "?";
    }
}

/* A bound the README's way: powers of two from 2^20 as "2^k", integers below 10^6 in
 * full, 2^53 - 1 by name, the rest in the shortest %g without "+" and leading exponent zeros ("1e9"). */
static void bound(double d, char *buf, size_t n) {
    int k;
    if (d >= 1048576.0 && frexp(d, &k) == 0.5) { snprintf(buf, n, "2^%d", k - 1); return; }
    if (d == 9007199254740991.0) { snprintf(buf, n, "2^53 - 1"); return; }   /* the seeds' bound */
    if (d == floor(d) && fabs(d) < 1e6) { snprintf(buf, n, "%.0f", d); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d || strtof(buf, NULL) == (float)d) break;
    }
    char *x = strchr(buf, 'e');
    if (x) {
        char *digits = x + 1 + (x[1] == '+' || x[1] == '-'), *from = digits;
        while (*from == '0' && from[1]) from++;
        if (x[1] == '+') digits--;
        memmove(digits, from, strlen(from) + 1);
    }
}

/* The table's range of k as README text ("" for keys without one). */
static void canonical_range(const st_ckey *k, char *buf, size_t n) {
    char lo[32], hi[32];
    buf[0] = 0;
    if (k->en && (k->kind == CK_ENUM || k->kind == CK_STR || k->kind == CK_MASK)) {
        int count = k->en->to ? k->en->count : k->en->n;
        size_t j = 0;
        for (int i = 0; i < count && j < n; i++) {
            const char *name = k->en->to ? k->en->to(i) : k->en->names[i].name;
            j += (size_t)snprintf(buf + j, n - j, "%s`%s`", i ? ", " : "", name);
        }
        return;
    }
    if (k->kind == CK_BOOL || k->kind == CK_STR || k->kind == CK_PATH || k->kind == CK_ENUM) return;
    bound(k->min, lo, sizeof lo);
    bound(k->max, hi, sizeof hi);
    char r[96];
    if (k->max >= 1e12 && k->max != 9007199254740991.0) snprintf(r, sizeof r, "%s %s", k->xmin ? ">" : ">=", lo);
    else snprintf(r, sizeof r, "%c%s, %s]", k->xmin ? '(' : '[', lo, hi);
    if (k->kind == CK_I64_LIST) snprintf(buf, n, "1 to %zu entries, each %s", k->size, r);
    else if (k->kind == CK_I64_3) snprintf(buf, n, "each %s", r);
    else snprintf(buf, n, "%s", r);
}

/* README default text vs the default config's value: numbers compare as numbers
 * ("1e-5" and "1e-05"), the rest as text without backticks. Derived defaults (computed
 * from other keys at validation) are written as their rule. */
static int same_default(const char *key, const char *doc, const char *val) {
    static const struct { const char *key, *doc; } derived[] = {{"eval.lengths", "[T, 2T, 4T, 8T]"}};
    for (size_t i = 0; i < sizeof derived / sizeof derived[0]; i++)
        if (!strcmp(key, derived[i].key)) return !strcmp(doc, derived[i].doc);
    char d[256];
    snprintf(d, sizeof d, "%s", doc);
    strip_backticks(d);
    char *e1, *e2;
    double a = strtod(d, &e1), b = strtod(val, &e2);
    if (*d && !*e1 && *val && !*e2) return (float)a == (float)b;
    return strcmp(d, val) == 0;
}

int main(void) {
    const char *src = getenv("STRETCH_SOURCE_DIR");
    char path[ST_PATH_BUF];
    snprintf(path, sizeof path, "%s/configs/README.md", src && *src ? src : "..");
    size_t len = 0;
    st_error e = {0};
    char *text = st_read_file(path, &len, 1 << 20, &e);
    if (!text) { test_skip("configs/README.md", e.msg); return test_finish("test_config_doc"); }
    static row rows[512];
    int n = read_rows(text, rows, 512);
    CHECK_MSG(n > 50, "only %d key rows found in %s", n, path);
    st_run_config def;
    st_run_config_default(&def);
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (k->kind == CK_OBJ) continue;
        row *r = NULL;
        for (int j = 0; j < n && !r; j++) if (!strcmp(rows[j].key, k->path)) r = &rows[j];
        if (!CHECK_MSG(r != NULL, "%s: no row for %s", path, k->path)) continue;
        r->seen = 1;
        CHECK_MSG(!strcmp(r->type, type_name(k->kind)), "%s: type is \"%s\" in the README, %s in the table", k->path,
                  r->type, type_name(k->kind));
        char val[512], want[256];
        st_config_value_str(k, &def, val, sizeof val);
        CHECK_MSG(same_default(k->path, r->def, val), "%s: default is \"%s\" in the README, %s in the code", k->path,
                  r->def, val);
        canonical_range(k, want, sizeof want);
        size_t wl = strlen(want);
        int ok = wl == 0 || (!strncmp(r->range, want, wl) && (r->range[wl] == 0 || !strncmp(r->range + wl, ", ", 2)));
        CHECK_MSG(ok, "%s: range is \"%s\" in the README, the table says \"%s\"", k->path, r->range, want);
    }
    /* a position method's key: the methods its meaning starts with ("`rope`, `xpos`: ...")
     * are the ones that read it (st_pos_key_reader, from each method's table), so the
     * warning naming another method's key set in a run (st_run_config_unread) says what
     * the README says */
    for (int j = 0; j < n; j++) {
        int named[ST_POS_COUNT] = {0};
        for (const char *q = rows[j].meaning; *q == '`';) {   /* "`a`, `b`" at the start */
            char name[32];
            const size_t l = strcspn(q + 1, "`");
            snprintf(name, sizeof name, "%.*s", (int)(l < 31 ? l : 31), q + 1);
            const int p = st_pos_from_name(name);
            if (p >= 0) named[p] = 1;
            q += l + 2;
            if (*q == ',' && q[1] == ' ') q += 2;
        }
        for (int p = 0; p < ST_POS_COUNT; p++)
            CHECK_MSG((st_pos_key_reader(rows[j].key, p) == 1) == named[p], "%s: the README %s %s as reading it, its "
                      "table says it %s", rows[j].key, named[p] ? "names" : "does not name", st_pos_name(p),
                      st_pos_key_reader(rows[j].key, p) == 1 ? "does" : "does not");
    }
    /* the table's defaults are what the default config holds: each one applied (a default
     * its own key rejects would leave zero), and the modules' defaults are the same rows */
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (k->kind == CK_OBJ || !k->def) continue;
        char val[512], want[512];
        st_config_value_str(k, &def, val, sizeof val);
        snprintf(want, sizeof want, "%s", k->def);
        size_t vl = strlen(val);
        if (vl >= 2 && val[0] == '"' && want[0] != '"') { memmove(val, val + 1, vl - 2); val[vl - 2] = 0; }
        char *e1, *e2;
        double a = strtod(want, &e1), b = strtod(val, &e2);
        int same = (*want && !*e1 && *val && !*e2) ? (float)a == (float)b : !strcmp(want, val);
        CHECK_MSG(same, "%s: the table's default %s did not apply (the default config holds %s)", k->path, k->def, val);
    }
    st_model_config mdef;
    st_data_config ddef;
    st_model_config_default(&mdef);
    st_data_config_default(&ddef);
    CHECK_MSG(!memcmp(&mdef, &def.model, sizeof mdef), "st_model_config_default differs from the table's model defaults");
    CHECK_MSG(!memcmp(&ddef, &def.data, sizeof ddef), "st_data_config_default differs from the table's data defaults");
    for (int j = 0; j < n; j++)
        CHECK_MSG(rows[j].seen, "%s: row for %s, which is not a config key", path, rows[j].key);
    free(text);
    return test_finish("test_config_doc");
}
