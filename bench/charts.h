/* charts.h: SVG charts drawn from the runs' JSON (no other tool needed):
 * scaling.svg (throughput vs world, both modes, ideal line), breakdown.svg
 * (per-rank stacked time bars), bytes.svg (bytes per rank per step). */
#ifndef GS_BENCH_CHARTS_H
#define GS_BENCH_CHARTS_H

#include <jansson.h>

#include "kernels/util.h"

int gs_charts_write(const char *dir, json_t *runs, gs_err *e);

#endif
