/* sweep_io.c - the few file operations a sweep needs: existence tests (reading goes
 * through st_read_file, writing through st_write_file_atomic, mkdir -p through st_mkdirs). */
#include "sweep_internal.h"

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

