/* tokenizer_io.c - tokenizer files (JSON through cJSON) and their validation.
 *
 *   {"format": "stretch-tokenizer", "version": 1, "kind": "word|byte|bpe|synthetic|task",
 *    "vocab_size": N, "hash": "16 hex digits",
 *    "tokens": ["<eos>", "the", ...]          word: token i is entry i; a token that is
 *                                             not valid UTF-8 is written {"hex": "c3ff"}
 *    "merges": [[116, 104], ...]              bpe: merge r makes token 256 + r
 *    "synthetic": {"seed": "1234", "order": 2, "branch": 4}}
 *   task: nothing more (the vocabulary's layout is fixed, include/st_task.h: vocab_size
 *   gives the number of symbols). 
 * Loading checks everything (types, ranges, duplicates, the size) and recomputes the hash:
 * a file edited by hand or truncated is refused, naming the file and the key. */
#include "data/data_internal.h"
#include "st_task.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF) without NUL */
static int valid_utf8(const unsigned char *s, int64_t n) {
    for (int64_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c == 0) return 0;
        if (c < 0x80) { i++; continue; }
        int k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
        if (k < 0 || c > 0xF4 || i + k >= n) return 0;
        uint32_t cp = c & (0x3Fu >> k);
        for (int j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

char *st_sd_tok_to_json(const st_tokenizer *t, st_error *e) {
    cJSON *root = cJSON_CreateObject();
    char hash[24];
    snprintf(hash, sizeof hash, "%016" PRIx64, t->hash);
    cJSON_AddStringToObject(root, "format", "stretch-tokenizer");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "kind", st_sd_tok_kind_name(t->kind));
    cJSON_AddNumberToObject(root, "vocab_size", t->vocab_size);
    cJSON_AddStringToObject(root, "hash", hash);
    if (t->kind == ST_TOK_WORD) {
        cJSON *arr = cJSON_AddArrayToObject(root, "tokens");
        char *tmp = NULL;
        size_t tmp_cap = 0;
        for (int i = 0; i < t->vocab_size; i++) {
            const unsigned char *s = (const unsigned char *)t->pool + t->off[i];
            int64_t n = t->off[i + 1] - t->off[i];
            if ((size_t)(2 * n + 1) > tmp_cap) {
                tmp_cap = (size_t)(2 * n + 1) * 2;
                char *nt = realloc(tmp, tmp_cap);
                if (!nt) { free(tmp); cJSON_Delete(root); st_fail(e, ST_ERR_MEMORY, "out of memory"); return NULL; }
                tmp = nt;
            }
            if (valid_utf8(s, n)) {
                memcpy(tmp, s, (size_t)n);
                tmp[n] = 0;
                cJSON_AddItemToArray(arr, cJSON_CreateString(tmp));
            } else {
                for (int64_t j = 0; j < n; j++) snprintf(tmp + 2 * j, 3, "%02x", s[j]);
                tmp[2 * n] = 0;
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "hex", tmp);
                cJSON_AddItemToArray(arr, o);
            }
        }
        free(tmp);
    } else if (t->kind == ST_TOK_BPE) {
        cJSON *arr = cJSON_AddArrayToObject(root, "merges");
        for (int r = 0; r < t->n_merges; r++) {
            int pair[2] = {t->merges[r][0], t->merges[r][1]};
            cJSON_AddItemToArray(arr, cJSON_CreateIntArray(pair, 2));
        }
    } else if (t->kind == ST_TOK_SYNTHETIC) {
        cJSON *o = cJSON_AddObjectToObject(root, "synthetic");
        char seed[24];
        snprintf(seed, sizeof seed, "%" PRIu64, t->syn_seed);
        cJSON_AddStringToObject(o, "seed", seed);
        cJSON_AddNumberToObject(o, "order", t->syn_order);
        cJSON_AddNumberToObject(o, "branch", t->syn_branch);
    }
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!txt) { st_fail(e, ST_ERR_MEMORY, "out of memory printing the tokenizer"); return NULL; }
    /* cJSON allocates with malloc by default; hand back a plain malloc'd copy + "\n" */
    size_t n = strlen(txt);
    char *out = malloc(n + 2);
    if (out) { memcpy(out, txt, n); out[n] = '\n'; out[n + 1] = 0; }
    else st_fail(e, ST_ERR_MEMORY, "out of memory");
    cJSON_free(txt);
    return out;
}

static int get_int(const cJSON *o, const char *key, const char *name, int64_t lo, int64_t hi, int64_t *v, st_error *e) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x)) return st_fail(e, ST_ERR_DATA, "%s: %s: missing or not a number", name, key);
    double d = x->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))   /* no cast before the range check */
        return st_fail(e, ST_ERR_DATA, "%s: %s: must be an integer in [%lld, %lld], got %g", name, key, (long long)lo,
                       (long long)hi, d);
    *v = (int64_t)d;
    return ST_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int load_words(st_tokenizer *t, const cJSON *arr, int64_t vocab, const char *name, st_error *e) {
    if (!cJSON_IsArray(arr)) return st_fail(e, ST_ERR_DATA, "%s: tokens: missing or not an array", name);
    int64_t n = cJSON_GetArraySize(arr);
    if (n != vocab) return st_fail(e, ST_ERR_DATA, "%s: vocab_size is %lld but tokens has %lld entries", name, (long long)vocab, (long long)n);
    int64_t i = 0;
    char *tmp = NULL;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        const char *s;
        int64_t len;
        if (cJSON_IsString(x)) {
            s = x->valuestring;
            len = (int64_t)strlen(s);
        } else {
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(x, "hex");
            if (!cJSON_IsString(h)) { free(tmp); return st_fail(e, ST_ERR_DATA, "%s: tokens[%lld]: expected a string or {\"hex\": ...}", name, (long long)i); }
            size_t hl = strlen(h->valuestring);
            free(tmp);
            tmp = malloc(hl / 2 + 1);
            if (!tmp) return st_fail(e, ST_ERR_MEMORY, "out of memory");
            if (hl % 2) { free(tmp); return st_fail(e, ST_ERR_DATA, "%s: tokens[%lld].hex: odd number of digits", name, (long long)i); }
            for (size_t j = 0; j < hl / 2; j++) {
                int hi = hexval(h->valuestring[2 * j]), lo = hexval(h->valuestring[2 * j + 1]);
                if (hi < 0 || lo < 0) { free(tmp); return st_fail(e, ST_ERR_DATA, "%s: tokens[%lld].hex: not hexadecimal", name, (long long)i); }
                tmp[j] = (char)(hi * 16 + lo);
            }
            s = tmp;
            len = (int64_t)(hl / 2);
        }
        if (len == 0) { free(tmp); return st_fail(e, ST_ERR_DATA, "%s: tokens[%lld]: empty token", name, (long long)i); }
        uint64_t hh = st_fnv1a(ST_FNV_OFFSET, s, (size_t)len);
        if (st_sd_word_find(t, s, len, hh) >= 0) {
            free(tmp);
            return st_fail(e, ST_ERR_DATA, "%s: tokens[%lld]: duplicate token \"%.60s\"", name, (long long)i, cJSON_IsString(x) ? s : "(hex)");
        }
        if (st_sd_word_intern(t, s, len, hh, e) < 0) { free(tmp); return e ? e->code : ST_ERR_MEMORY; }
        i++;
    }
    free(tmp);
    if (t->eos < 0) return st_fail(e, ST_ERR_DATA, "%s: tokens: no \"<eos>\" token (not a word-level vocabulary)", name);
    return ST_OK;
}

static int load_merges(st_tokenizer *t, const cJSON *arr, int64_t vocab, const char *name, st_error *e) {
    if (!cJSON_IsArray(arr)) return st_fail(e, ST_ERR_DATA, "%s: merges: missing or not an array", name);
    int64_t n = cJSON_GetArraySize(arr);
    if (256 + n != vocab)
        return st_fail(e, ST_ERR_DATA, "%s: vocab_size is %lld but 256 bytes + %lld merges make %lld", name, (long long)vocab,
                       (long long)n, (long long)(256 + n));
    t->merges = malloc((size_t)(n ? n : 1) * sizeof *t->merges);
    if (!t->merges) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    const cJSON *x;
    int64_t r = 0;
    cJSON_ArrayForEach(x, arr) {
        const cJSON *a = cJSON_GetArrayItem(x, 0), *b = cJSON_GetArrayItem(x, 1);
        if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b))
            return st_fail(e, ST_ERR_DATA, "%s: merges[%lld]: expected a pair of token ids", name, (long long)r);
        double da = a->valuedouble, db = b->valuedouble;
        /* range first, then integrality: casting an out-of-range double is undefined */
        if (!(da >= 0 && db >= 0 && da < 256 + r && db < 256 + r) || da != floor(da) || db != floor(db))
            return st_fail(e, ST_ERR_DATA, "%s: merges[%lld]: ids must be integers in [0, %lld) (tokens made before it), got [%g, %g]",
                           name, (long long)r, (long long)(256 + r), da, db);
        t->merges[r][0] = (int32_t)da;
        t->merges[r][1] = (int32_t)db;
        r++;
    }
    t->n_merges = (int)n;
    st_error sub = {0};
    if (st_sd_bpe_index(t, &sub)) return st_fail(e, sub.code, "%s: merges: %s", name, sub.msg);
    return ST_OK;
}

st_tokenizer *st_sd_tok_from_json(const char *text, int64_t len, const char *name, st_error *e) {
    cJSON *root = cJSON_ParseWithLength(text, (size_t)len);
    st_tokenizer *t = NULL;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= text && at <= text + len ? (long)(at - text) : -1;
        st_fail(e, ST_ERR_DATA, "%s: not a valid JSON tokenizer file (parse error near byte %ld)", name, off);
        return NULL;
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(root, "hash");
    int64_t version = 0, vocab = 0;
    int k = -1;
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "stretch-tokenizer") != 0) {
        st_fail(e, ST_ERR_DATA, "%s: format: expected \"stretch-tokenizer\" (not a stretch tokenizer file)", name);
        goto fail;
    }
    if (get_int(root, "version", name, 1, 1000, &version, e)) goto fail;
    if (version != 1) { st_fail(e, ST_ERR_DATA, "%s: version: %lld is not supported (this build reads 1)", name, (long long)version); goto fail; }
    for (int i = 0; i < ST_TOK_COUNT; i++)
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, st_sd_tok_kind_name(i))) k = i;
    if (k < 0) { st_fail(e, ST_ERR_DATA, "%s: kind: expected \"word\", \"byte\", \"bpe\", \"synthetic\" or \"task\"", name); goto fail; }
    if (get_int(root, "vocab_size", name, 2, INT32_MAX - 1, &vocab, e)) goto fail;
    if (!cJSON_IsString(hash) || strlen(hash->valuestring) != 16 || strspn(hash->valuestring, "0123456789abcdef") != 16) {
        st_fail(e, ST_ERR_DATA, "%s: hash: expected 16 lowercase hex digits", name);
        goto fail;
    }
    if (!(t = st_sd_tok_new(k, e))) goto fail;
    if (k == ST_TOK_BYTE && vocab != 256) { st_fail(e, ST_ERR_DATA, "%s: vocab_size: a byte tokenizer has 256, got %lld", name, (long long)vocab); goto fail; }
    if (k == ST_TOK_WORD && load_words(t, cJSON_GetObjectItemCaseSensitive(root, "tokens"), vocab, name, e)) goto fail;
    if (k == ST_TOK_BPE && load_merges(t, cJSON_GetObjectItemCaseSensitive(root, "merges"), vocab, name, e)) goto fail;
    if (k == ST_TOK_SYNTHETIC) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "synthetic");
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
        int64_t order = 0, branch = 0;
        char *end = NULL;
        if (!cJSON_IsObject(o) || !cJSON_IsString(seed)) { st_fail(e, ST_ERR_DATA, "%s: synthetic: expected {\"seed\": \"...\", \"order\", \"branch\"}", name); goto fail; }
        uint64_t sv = strtoull(seed->valuestring, &end, 10);
        if (!*seed->valuestring || *end) { st_fail(e, ST_ERR_DATA, "%s: synthetic.seed: not a decimal integer", name); goto fail; }
        if (get_int(o, "order", name, 1, 20, &order, e) || get_int(o, "branch", name, 1, vocab, &branch, e)) goto fail;
        t->vocab_size = (int)vocab;
        t->syn_seed = sv;
        t->syn_order = (int)order;
        t->syn_branch = (int)branch;
    }
    if (k == ST_TOK_TASK) {
        if (vocab < st_task_vocab(2) || vocab > st_task_vocab(ST_TASK_MAX_SYMBOLS)) {
            st_fail(e, ST_ERR_DATA, "%s: vocab_size: a task vocabulary has %d + symbols ids (2 to %d symbols), got %lld",
                    name, ST_TT_SYMBOL0, ST_TASK_MAX_SYMBOLS, (long long)vocab);
            goto fail;
        }
        t->vocab_size = (int)vocab;
    }
    st_sd_tok_rehash(t);
    char want[24];
    snprintf(want, sizeof want, "%016" PRIx64, t->hash);
    if (strcmp(want, hash->valuestring) != 0) {
        st_fail(e, ST_ERR_DATA, "%s: hash: the file says %s but its vocabulary hashes to %s (edited or corrupt file)", name,
                hash->valuestring, want);
        goto fail;
    }
    cJSON_Delete(root);
    return t;
fail:
    st_tokenizer_free(t);
    cJSON_Delete(root);
    return NULL;
}

int st_tokenizer_save(const st_tokenizer *t, const char *path, st_error *e) {
    char *txt = st_sd_tok_to_json(t, e);
    if (!txt) return e ? e->code : ST_ERR_MEMORY;
    int rc = st_write_file_atomic(path, txt, strlen(txt), e);
    free(txt);
    return rc;
}

st_tokenizer *st_tokenizer_load(const char *path, st_error *e) {
    int64_t n = 0;
    char *txt = st_sd_read_file(path, &n, (int64_t)1 << 31, e);
    if (!txt) return NULL;
    if (n == 0) { free(txt); st_fail(e, ST_ERR_DATA, "%s: empty file (not a tokenizer)", path); return NULL; }
    st_tokenizer *t = st_sd_tok_from_json(txt, n, path, e);
    free(txt);
    return t;
}

st_tokenizer *st_tokenizer_load_expect(const char *path, uint64_t hash, int vocab_size, st_error *e) {
    st_tokenizer *t = st_tokenizer_load(path, e);
    if (!t) return NULL;
    if (t->hash != hash || t->vocab_size != vocab_size) {
        st_fail(e, ST_ERR_DATA, "%s: tokenizer does not match: it has vocab %d, hash %016" PRIx64
                "; expected vocab %d, hash %016" PRIx64 " (a tokenizer from another run?)",
                path, t->vocab_size, t->hash, vocab_size, hash);
        st_tokenizer_free(t);
        return NULL;
    }
    return t;
}
