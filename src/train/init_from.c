/* init_from.c - train.init_from: the weights a fresh run starts from.
 *
 * Exported weights (safetensors), or a stretch checkpoint or run directory (its latest
 * checkpoint; the weights only, fresh optimizer state), the way a context extension starts
 * from its base run (docs/extension.md). A checkpoint must have the model's parameter
 * table exactly. The run records which checkpoint file (which step of which run) it came
 * from in RUN/init_from.json; the key itself keeps what the config said. */
#include "train_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RUN/init_from.json's text (malloc'd; NULL when out of memory) */
static char *origin_json(const char *init_from, const char *path, const st_train_state *bs, const st_run_config *base) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "init_from", init_from);
    cJSON_AddStringToObject(o, "checkpoint", path);
    cJSON_AddNumberToObject(o, "step", (double)bs->step);
    cJSON_AddNumberToObject(o, "train_seq_len", base->train.seq_len);
    cJSON_AddStringToObject(o, "pos", st_pos_name(base->model.pos));
    cJSON_AddStringToObject(o, "scaling", st_transform_name(base->model.scaling));
    char *txt = st_json_print_exact(o, 1);
    cJSON_Delete(o);
    return txt;
}

/* RUN/init_from.json for exported weights: the file and its CRC32 (an export has no step;
 * the checksum tells which weights they were). NULL when out of memory or unreadable. */
static char *origin_safetensors(const char *init_from) {
    size_t n = 0;
    st_error le = {0};
    char *data = st_read_file(init_from, &n, (size_t)1 << 40, &le);
    if (!data) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "init_from", init_from);
    cJSON_AddStringToObject(o, "safetensors", init_from);
    st_json_add_number(o, "bytes", (double)n);
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)st_crc32(0, data, n));
    cJSON_AddStringToObject(o, "crc32", crc);
    free(data);
    char *txt = st_json_print_exact(o, 1);
    cJSON_Delete(o);
    return txt;
}

int st_init_from_load(const st_run_config *c, st_model *m, int quiet, char **origin, st_error *e) {
    const st_train_config *tc = &c->train;
    const st_model_config *mc = &c->model;
    *origin = NULL;
    if (!st_checkpoint_is(tc->init_from)) {
        int rc = st_model_load_safetensors(m, tc->init_from, e);
        if (!rc && !(*origin = origin_safetensors(tc->init_from)))
            rc = st_fail(e, ST_ERR_IO, "%s: train.init_from: %s: cannot read it again for init_from.json", c->file,
                         tc->init_from);
        return rc;
    }
    char path[ST_PATH_BUF];
    st_run_config *base = malloc(sizeof *base);   /* large: paths */
    if (!base) return st_fail(e, ST_ERR_MEMORY, "out of memory");
    st_train_state bs;
    st_error le = {0};
    int rc = st_checkpoint_resolve(tc->init_from, path, sizeof path, &le);
    if (!rc) rc = st_checkpoint_load(path, base, &m->params, 0, &bs, &le);
    /* an extension is at least as long as its base run (a scaled model's L is the base's) */
    if (!rc && mc->scaling != ST_XF_NONE && tc->seq_len < base->train.seq_len)
        rc = st_fail(&le, ST_ERR_CONFIG, "train.seq_len: %d is shorter than the base run's %d; a scaled model "
                     "(model.scaling.transform %s) extends its base run's length", tc->seq_len, base->train.seq_len,
                     st_transform_name(mc->scaling));
    if (!rc && !(*origin = origin_json(tc->init_from, path, &bs, base))) rc = st_fail(&le, ST_ERR_MEMORY, "out of memory");
    if (rc) {
        free(base);
        return st_fail(e, rc, "%s: train.init_from: %s", c->file, le.msg);
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
    }
    free(base);
    return ST_OK;
}
