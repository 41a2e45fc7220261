/* sweep_io.c - the few file operations a sweep needs: existence tests (reading goes
 * through st_read_file, writing through st_write_file_atomic, mkdir -p through st_mkdirs),
 * and which checkpoint a point's marker evaluated.
 *
 * A marker (sweep_done.json) stands for the evaluation of one checkpoint. The run dir is
 * an ordinary run, so `train --force` or `train --resume` can replace or extend that
 * checkpoint after the sweep wrote the marker (train does not know about sweeps and
 * leaves the marker alone). The marker therefore names the checkpoint's file, step and
 * the CRC32 its header stores (read from its first 64 bytes), and a re-run compares them
 * with what the run dir holds before it trusts the marker. */
#include "sweep_internal.h"
#include "st_train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int st_sweep_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static const char *base_name(const char *p) {
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* train_dir's latest checkpoint (path) and its stored CRC; 0 when it has none. */
static int latest_ckpt(const char *train_dir, char *path, size_t n, uint32_t *crc) {
    st_error le = {0};
    return !st_checkpoint_resolve(train_dir, path, n, &le) && st_checkpoint_stored_crc(path, crc);
}

cJSON *st_sweep_ckpt_id(const char *train_dir, int64_t step) {
    char path[ST_PATH_BUF], hex[16];
    uint32_t crc;
    if (!latest_ckpt(train_dir, path, sizeof path, &crc)) return NULL;
    snprintf(hex, sizeof hex, "%08x", crc);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", base_name(path));
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddStringToObject(o, "crc32", hex);
    return o;
}

/* mtime of path in nanoseconds (0: none) */
static long long mtime_ns(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : 0;
}

int st_sweep_same_ckpt(const cJSON *m, const char *marker_path, const char *train_dir, char *why, size_t n) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "checkpoint");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(id, "file");
    const cJSON *crc_was = cJSON_GetObjectItemCaseSensitive(id, "crc32");
    /* a marker of an older stretch has no "checkpoint": its report's checkpoint path
     * gives the file, and a checkpoint written after the marker tells a replaced run */
    const int legacy = !cJSON_IsString(file) || !cJSON_IsString(crc_was);
    if (legacy) file = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "report"), "checkpoint");
    if (!cJSON_IsString(file)) return 1;   /* nothing to compare with: the marker stands */
    const char *was = base_name(file->valuestring);
    char path[ST_PATH_BUF], hex[16];
    uint32_t crc;
    if (!latest_ckpt(train_dir, path, sizeof path, &crc)) {
        snprintf(why, n, "it evaluated %s, and %s holds no checkpoint now", was, train_dir);
        return 0;
    }
    snprintf(hex, sizeof hex, "%08x", crc);
    const char *now = base_name(path);
    if (!legacy && (strcmp(was, now) != 0 || strcmp(crc_was->valuestring, hex) != 0)) {
        snprintf(why, n, "its checkpoint changed since the sweep evaluated it (%s CRC %s then, %s CRC %s now)", was,
                 crc_was->valuestring, now, hex);
        return 0;
    }
    if (legacy && (strcmp(was, now) != 0 || mtime_ns(path) > mtime_ns(marker_path))) {
        snprintf(why, n, "its checkpoint changed since the sweep evaluated it (%s then, %s %s now)", was, now,
                 strcmp(was, now) ? "" : "written after sweep_done.json");
        return 0;
    }
    return 1;
}
