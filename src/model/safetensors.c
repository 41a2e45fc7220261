/* safetensors.c - model weights as safetensors (https://github.com/huggingface/safetensors):
 *   u64 little-endian N | N bytes of JSON header | raw tensor data
 * header: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *          "__metadata__": {"format": "pt", ...}}; offsets relative to the data start.
 * We write F32 in PyTorch [out, in] layout (our own layout), in parameter order, header
 * padded with spaces to a multiple of 8. The writer goes through a temp file + rename so
 * an existing file is never left half-written. The reader checks every offset against
 * the file size before touching data. */
#define _GNU_SOURCE
#include "st_model.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>

int st_model_write_safetensors(const st_model *m, FILE *f, const char *path, st_error *e) {
    const st_params *p = &m->params;
    cJSON *hdr = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "producer", "stretch " ST_VERSION);
    size_t off = 0;
    for (int i = 0; i < p->count; i++) {
        const st_param_info *in = &p->info[i];
        cJSON *t = cJSON_AddObjectToObject(hdr, in->name);
        cJSON_AddStringToObject(t, "dtype", "F32");
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < in->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)in->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += in->numel * sizeof(float);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    }
    char *json = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    if (!json) return st_fail(e, ST_ERR_MEMORY, "%s: cannot build the safetensors header", path);
    size_t jl = strlen(json), padded = (jl + 7) & ~(size_t)7;
    unsigned char n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(n8, 1, 8, f) == 8 && fwrite(json, 1, jl, f) == jl;
    for (size_t i = jl; i < padded && ok; i++) ok = fputc(' ', f) != EOF;
    free(json);
    for (int i = 0; i < p->count && ok; i++)
        ok = fwrite(p->data + p->info[i].offset, sizeof(float), p->info[i].numel, f) == p->info[i].numel;
    return ok ? ST_OK : st_fail(e, ST_ERR_IO, "%s: write failed: %s", path, strerror(errno));
}

int st_model_save_safetensors(const st_model *m, const char *path, st_error *e) {
    st_atomic_file out;
    if (!st_atomic_open(&out, path, e)) return e ? e->code : ST_ERR_IO;
    int rc = st_model_write_safetensors(m, out.f, path, e);
    if (rc) { st_atomic_abort(&out); return rc; }
    return st_atomic_commit(&out, e);
}

/* One tensor's bytes [b0, b1) in the data buffer. */
typedef struct st_span { uint64_t b0, b1; int idx; } st_span;

static int span_cmp(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    return (x->b0 > y->b0) - (x->b0 < y->b0);
}

/* The format requires the tensors to tile the data buffer: no byte shared by two tensors
 * (an overlap would make writing one change the other) and none that belongs to no
 * tensor (a hole hides data a reader silently ignores). spans sorted by b0. */
static int check_tiling(const st_span *s, int n, uint64_t data_len, const st_params *p, const char *path, st_error *e) {
    uint64_t end = 0;
    for (int i = 0; i < n; i++) {
        const char *name = p->info[s[i].idx].name, *prev = i ? p->info[s[i - 1].idx].name : NULL;
        if (s[i].b0 < end)
            return st_fail(e, ST_ERR_CHECKPOINT, "%s: tensors '%s' and '%s' overlap (data_offsets [%llu, %llu) and "
                           "[%llu, %llu))", path, prev, name, (unsigned long long)s[i - 1].b0,
                           (unsigned long long)s[i - 1].b1, (unsigned long long)s[i].b0, (unsigned long long)s[i].b1);
        if (s[i].b0 > end)
            return st_fail(e, ST_ERR_CHECKPOINT, "%s: bytes [%llu, %llu) of the data %s belong to no tensor", path,
                           (unsigned long long)end, (unsigned long long)s[i].b0, prev ? "between tensors" : "before tensor");
        end = s[i].b1;
    }
    if (end != data_len)
        return st_fail(e, ST_ERR_CHECKPOINT, "%s: bytes [%llu, %llu) after the last tensor ('%s') belong to no tensor",
                       path, (unsigned long long)end, (unsigned long long)data_len, n ? p->info[s[n - 1].idx].name : "-");
    return ST_OK;
}

int st_model_load_safetensors(st_model *m, const char *path, st_error *e) {
    st_params *p = &m->params;
    struct stat sb;   /* a FIFO in place of the file must not block open(): refused */
    const int fd = st_open_regular(path, O_RDONLY, &sb, e);
    if (fd < 0) return e ? e->code : ST_ERR_IO;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return st_fail(e, ST_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); }
    int rc = ST_OK;
    char *json = NULL;
    cJSON *hdr = NULL;
    unsigned char *seen = calloc((size_t)p->count + 1, 1);
    st_span *spans = calloc((size_t)p->count + 1, sizeof *spans);
    int n_spans = 0;
    const off_t fsize = sb.st_size;
    unsigned char n8[8];
    if (!seen || !spans) { rc = st_fail(e, ST_ERR_MEMORY, "%s: out of memory", path); goto done; }
    if (fsize < 8 || fread(n8, 1, 8, f) != 8) { rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: not a safetensors file (too short)", path); goto done; }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)n8[i] << (8 * i);
    if (hl < 2 || hl > (uint64_t)fsize - 8 || hl > (100u << 20)) {
        rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: not a safetensors file (header length %llu, file %lld bytes)",
                     path, (unsigned long long)hl, (long long)fsize);
        goto done;
    }
    json = malloc(hl + 1);
    if (!json || fread(json, 1, hl, f) != hl) { rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: truncated header", path); goto done; }
    json[hl] = 0;
    hdr = cJSON_Parse(json);
    if (!cJSON_IsObject(hdr)) { rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: header is not a JSON object", path); goto done; }
    uint64_t data_len = (uint64_t)fsize - 8 - hl;
    for (cJSON *t = hdr->child; t; t = t->next) {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        int idx = st_params_find(p, t->string);
        if (idx < 0) { rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: tensor '%s' is not a parameter of this model (%s positions)", path, t->string, st_pos_name(m->cfg.pos)); goto done; }
        if (seen[idx]) { rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: tensor '%s' appears twice in the header", path, t->string); goto done; }
        const st_param_info *in = &p->info[idx];
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
        cJSON *of = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "F32") != 0) {
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: %s: dtype must be F32", path, t->string); goto done;
        }
        if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != in->ndim) {
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: %s: expected %d dims", path, t->string, in->ndim); goto done;
        }
        for (int d = 0; d < in->ndim; d++) {
            cJSON *x = cJSON_GetArrayItem(sh, d);
            if (!cJSON_IsNumber(x) || x->valuedouble != (double)in->shape[d]) {   /* no cast: any double is safe */
                rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: %s: shape mismatch in dim %d (model has %lld)", path, t->string, d, (long long)in->shape[d]);
                goto done;
            }
        }
        if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !cJSON_IsNumber(of->child) || !cJSON_IsNumber(of->child->next)) {
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: %s: bad data_offsets", path, t->string); goto done;
        }
        double b0 = of->child->valuedouble, b1 = of->child->next->valuedouble;
        if (!(b0 >= 0) || b0 != floor(b0) || b1 != floor(b1) || b1 < b0 || b1 > (double)data_len ||
            (uint64_t)(b1 - b0) != in->numel * sizeof(float)) {
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: %s: data_offsets [%.0f, %.0f] do not fit the tensor or the file", path, t->string, b0, b1);
            goto done;
        }
        if (fseeko(f, (off_t)(8 + hl + (uint64_t)b0), SEEK_SET) != 0 ||
            fread(p->data + in->offset, sizeof(float), in->numel, f) != in->numel) {
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: %s: truncated data", path, t->string); goto done;
        }
        seen[idx] = 1;
        spans[n_spans++] = (st_span){(uint64_t)b0, (uint64_t)b1, idx};
    }
    for (int i = 0; i < p->count; i++)
        if (!seen[i]) { rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: tensor '%s' is missing", path, p->info[i].name); goto done; }
    qsort(spans, (size_t)n_spans, sizeof *spans, span_cmp);
    rc = check_tiling(spans, n_spans, data_len, p, path, e);
done:
    free(spans);
    cJSON_Delete(hdr);
    free(json);
    free(seen);
    fclose(f);
    return rc;
}
