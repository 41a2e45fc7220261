/* init_from.c - train.init_from: the weights a fresh run starts from.
 *
 * Exported weights (safetensors), or a stretch checkpoint or run directory (its latest
 * checkpoint; the weights only, fresh optimizer state), the way a context extension starts
 * from its base run (docs/extension.md). A checkpoint must have the model's parameter
 * table exactly. The run records which checkpoint file (which step of which run) it came
 * from in RUN/init_from.json; the key itself keeps what the config said.
 *
 * A run stopped before its first checkpoint restarts from step 0 (--resume). Its base run
 * may have moved on meanwhile (a run directory's latest checkpoint is another one), so the
 * restart takes the checkpoint RUN/init_from.json pinned, or, for exported weights, checks
 * that the file is still the one recorded: otherwise it would silently be another run. */
#include "config_schema.h"
#include "train_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The size and CRC32 that tell one weights file from another: a checkpoint's stored one
 * (its header's, which every load verifies: no second read of the file), an export's
 * computed over the file in 1 MiB pieces. 0 when unreadable. */
static int weights_identity(const char *path, int checkpoint, double *bytes, char crc_hex[16]) {
    struct stat st;
    uint32_t crc = 0;
    int ok = stat(path, &st) == 0;
    if (ok && checkpoint) {
        ok = st_checkpoint_stored_crc(path, &crc);
        *bytes = (double)st.st_size;
    } else if (ok) {
        FILE *f = fopen(path, "rb");
        unsigned char *buf = f ? malloc((size_t)1 << 20) : NULL;
        size_t got, total = 0;
        while (buf && (got = fread(buf, 1, (size_t)1 << 20, f)) > 0) {
            crc = st_crc32(crc, buf, got);
            total += got;
        }
        ok = buf && !ferror(f);
        free(buf);
        if (f) fclose(f);
        *bytes = (double)total;
    }
    snprintf(crc_hex, 16, "%08x", (unsigned)crc);
    return ok;
}

/* RUN/init_from.json's text (malloc'd; NULL when out of memory or unreadable): the
 * weights file under `key` ("checkpoint" or "safetensors"), its size and CRC32 (which tell
 * the weights apart when a file of that name is later replaced, as best.ckpt is), and for
 * a checkpoint (bs, base given) its step, the base length, method and scaling. */
static char *origin_json(const char *init_from, const char *key, const char *file, const st_train_state *bs,
                         const st_run_config *base) {
    double bytes;
    char crc[16];
    if (!weights_identity(file, bs != NULL, &bytes, crc)) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "init_from", init_from);
    cJSON_AddStringToObject(o, key, file);
    if (bs) cJSON_AddNumberToObject(o, "step", (double)bs->step);
    st_json_add_number(o, "bytes", bytes);
    cJSON_AddStringToObject(o, "crc32", crc);
    if (base) {
        cJSON_AddNumberToObject(o, "train_seq_len", base->train.seq_len);
        cJSON_AddStringToObject(o, "pos", st_pos_name(base->model.pos));
        cJSON_AddStringToObject(o, "scaling", st_transform_name(base->model.scaling));
    }
    char *txt = st_json_print_exact(o, 1);
    cJSON_Delete(o);
    return txt;
}

int st_init_from_pinned(const char *run_dir, const st_run_config *c, char *pinned, size_t n, st_error *e) {
    pinned[0] = 0;
    char path[ST_PATH_BUF];
    snprintf(path, sizeof path, "%s/init_from.json", run_dir);
    size_t len = 0;
    st_error le = {0};
    char *text = st_read_file(path, &len, (size_t)1 << 20, &le);
    if (!text) return ST_OK;   /* the first attempt died before writing it: nothing pinned yet */
    cJSON *o = st_json_parse_text(path, text, len, &le);
    free(text);
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(o, "init_from");
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(o, "checkpoint");
    const cJSON *crc = cJSON_GetObjectItemCaseSensitive(o, "crc32");
    int rc = ST_OK;
    /* unreadable, or of another init_from: not this run's record; the start resolves
     * train.init_from as a fresh run does and rewrites it */
    if (cJSON_IsString(from) && strcmp(from->valuestring, c->train.init_from) == 0 &&
        (cJSON_IsString(ck) || cJSON_IsString(crc))) {
        const char *file = cJSON_IsString(ck) ? ck->valuestring : c->train.init_from;   /* a checkpoint, or the export */
        double bytes;
        char now[16];
        if (cJSON_IsString(ck)) snprintf(pinned, n, "%s", file);
        /* a record without a CRC32 (an earlier build's): the file only has to be there */
        if (cJSON_IsString(crc) ? !weights_identity(file, cJSON_IsString(ck), &bytes, now) : access(file, R_OK) != 0)
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: the run started from %s, which is gone; restarting from "
                         "train.init_from (%s) now would make it another run (restore that file, or train again "
                         "in a new directory)", path, file, c->train.init_from);
        else if (cJSON_IsString(crc) && strcmp(now, crc->valuestring) != 0)
            rc = st_fail(e, ST_ERR_CHECKPOINT, "%s: the run started from %s with CRC32 %s; the file has changed since "
                         "(CRC32 %s): restarting from it would make another run (restore it, or train again in a new "
                         "directory)", path, file, crc->valuestring, now);
    }
    cJSON_Delete(o);
    return rc;
}

/* The weights match the parameter table, but model keys without a tensor (embed_scale,
 * gelu, rope_base, a method with the same table, ...) may still differ from the run that
 * trained them: the same weights then compute another function. Said once, naming up to
 * three keys. The scaling keys (context extension's purpose), dropout and the init scale
 * (no effect on the loaded function) are left out. */
static void warn_model_keys(const st_run_config *base, const st_run_config *c, const char *path) {
    char list[600] = "", va[256], vb[256];
    int n = 0;
    for (int i = 0; i < st_config_nkeys; i++) {
        const st_ckey *k = &st_config_keys[i];
        if (k->kind == CK_OBJ || strncmp(k->path, "model.", 6) != 0 || !strncmp(k->path, "model.scaling.", 14) ||
            !strncmp(k->path, "model.dropout_", 14) || !strcmp(k->path, "model.init_std"))
            continue;
        st_config_value_str(k, base, va, sizeof va);
        st_config_value_str(k, c, vb, sizeof vb);
        if (!strcmp(va, vb)) continue;
        if (n++ < 3) {
            const size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s: %.60s vs %.60s", l ? "; " : "", k->path, va, vb);
        }
    }
    if (n)
        st_log(ST_LOG_WARN, "init_from: %d model key%s differ%s from the run that trained %s (%s%s; trained vs now): "
               "its weights now compute another function", n, n > 1 ? "s" : "", n > 1 ? "" : "s", path, list,
               n > 3 ? "; ..." : "");
}

/* Exported weights carry no config, but `stretch export` writes the run's config.json
 * beside model.safetensors: its model keys are those the weights were trained with, so a
 * key without a tensor that differs (a swiglu export loaded as geglu) is warned about as for
 * a checkpoint. The export resolves model.d_ff and model.n_kv_heads (0 and -1 are rules),
 * so both sides are compared resolved. A file without an export's config.json: nothing. */
static void warn_export_keys(const st_run_config *c, const char *st_path) {
    char cfg[ST_PATH_BUF + 16];
    const char *slash = strrchr(st_path, '/');
    if (slash) snprintf(cfg, sizeof cfg, "%.*s/config.json", (int)(slash - st_path), st_path);
    else snprintf(cfg, sizeof cfg, "config.json");
    if (access(cfg, R_OK) != 0) return;
    st_run_config *two = malloc(2 * sizeof *two);   /* large: paths */
    if (!two) return;
    st_error le = {0};
    if (!st_run_config_load(cfg, NULL, 0, &two[0], &le)) {
        two[1] = *c;
        for (int i = 0; i < 2; i++) {
            two[i].model.d_ff = st_model_d_ff(&two[i].model);
            two[i].model.n_kv_heads = st_model_kv_heads(&two[i].model);
        }
        warn_model_keys(&two[0], &two[1], st_path);
    }
    free(two);
}

int st_init_from_load(const st_run_config *c, st_model *m, int quiet, const char *pinned, char **origin,
                      st_error *e) {
    const st_train_config *tc = &c->train;
    const st_model_config *mc = &c->model;
    *origin = NULL;
    if (!st_checkpoint_is(tc->init_from)) {
        int rc = st_model_load_safetensors(m, tc->init_from, e);
        if (!rc && !(*origin = origin_json(tc->init_from, "safetensors", tc->init_from, NULL, NULL)))
            rc = st_fail(e, ST_ERR_IO, "%s: train.init_from: %s: cannot read it again for init_from.json", c->file,
                         tc->init_from);
        if (!rc && !quiet) warn_export_keys(c, tc->init_from);
        return rc;
    }
    char path[ST_PATH_BUF];
    st_run_config *base = malloc(sizeof *base);   /* large: paths */
    if (!base) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    st_train_state bs;
    st_error le = {0};
    int rc = ST_OK;
    if (pinned && pinned[0]) snprintf(path, sizeof path, "%s", pinned);   /* a restart: the first start's */
    else rc = st_checkpoint_resolve(tc->init_from, path, sizeof path, &le);
    if (!rc) rc = st_checkpoint_load(path, base, &m->params, 0, &bs, &le);
    /* an extension is at least as long as its base run (a scaled model's L is the base's) */
    if (!rc && mc->scaling != ST_XF_NONE && tc->seq_len < base->train.seq_len)
        rc = st_fail(&le, ST_ERR_CONFIG, "train.seq_len: %d is shorter than the base run's %d; a scaled model "
                     "(model.scaling.transform %s) extends its base run's length", tc->seq_len, base->train.seq_len,
                     st_transform_name(mc->scaling));
    if (!rc && !(*origin = origin_json(tc->init_from, "checkpoint", path, &bs, base)))
        rc = st_fail(&le, ST_ERR_IO, "%s: cannot read it again for init_from.json", path);
    if (rc) {
        free(base);
        char st_file[ST_PATH_BUF + 32];
        snprintf(st_file, sizeof st_file, "%s/model.safetensors", tc->init_from);
        const int export_dir = !(pinned && pinned[0]) && access(st_file, R_OK) == 0;   /* `stretch export`'s */
        return st_fail(e, rc, "%s: train.init_from: %s%s%s%s", c->file, le.msg,
                       export_dir ? " (the directory holds an export: name its weights, " : "",
                       export_dir ? st_file : "", export_dir ? ")" : "");
    }
    if (!quiet) {
        st_log(ST_LOG_INFO, "init_from: %s (step %lld of a run trained at train.seq_len %d, model.pos %s%s%s)", path,
               (long long)bs.step, base->train.seq_len, st_pos_name(base->model.pos),
               base->model.scaling ? ", model.scaling.transform " : "",
               base->model.scaling ? st_transform_name(base->model.scaling) : "");
        const int base_len = base->model.scaling && base->model.scaling_len > 0 ? base->model.scaling_len
                                                                                : base->train.seq_len;
        if (mc->scaling != ST_XF_NONE && mc->scaling_len != base_len)
            st_log(ST_LOG_WARN, "model.scaling.train_len %d differs from the base run's training length %d (%s)",
                   mc->scaling_len, base_len, path);
        warn_model_keys(base, c, path);
    }
    free(base);
    return ST_OK;
}
