/* html.h: internal to bench/: the self-contained report.html (html.c). */
#ifndef GS_BENCH_HTML_H
#define GS_BENCH_HTML_H

#include <jansson.h>

#include "kernels/util.h"

/* Write dir/report.html (atomically) from report.json's document, with
 * every SVG chart of dir inlined. */
int gs_html_write(const char *dir, json_t *report, gs_err *e);

#endif
