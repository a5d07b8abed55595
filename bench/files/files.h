/* files.h: the contract of bench/files: how every file of the bench is
 * written. A file is complete or absent (a fresh temporary file in the
 * same directory, fsync, rename, fsync of the directory); nothing follows
 * a link planted in a results directory. Knows nothing of what the files
 * hold: the report, the cost model's calibration and the collective
 * benchmark's tables all come through here. */
#ifndef GS_BENCH_FILES_H
#define GS_BENCH_FILES_H

#include <stddef.h>

#include <jansson.h>

#include "base/base.h"

/* Write bytes to path atomically: a temporary file in the same directory,
 * fsync, rename. */
int gs_write_atomic(const char *path, const void *data, size_t len, gs_err *e);
/* j, indented, with a final newline, through gs_write_atomic. */
int gs_json_write_atomic(const char *path, json_t *j, gs_err *e);
/* mkdir -p */
int gs_mkdirs(const char *path, gs_err *e);
/* mkdir -p of dir/sub, every level below dir a directory, not a link. */
int gs_mkdir_below(const char *dir, const char *sub, gs_err *e);

#endif
