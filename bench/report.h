/* report.h: the launcher's side: run every combination of the sweep, then
 * turn the runs' results into report.json, the comparison table, the SVG
 * charts and the merged trace. */
#ifndef GS_BENCH_REPORT_H
#define GS_BENCH_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "bench/internal.h"

/* Launch every run of the sweep; returns the process exit code. */
int gs_sweep_main(gs_opts *o, int argc, char **argv);

/* report.json from the runs' JSON objects (array), the environment and
 * the configuration; adds scaling_efficiency to each run. */
json_t *gs_report_json(const gs_opts *o, json_t *runs, bool interrupted);
/* Add scaling_efficiency (throughput(N) / (N x throughput(1)) of the same
 * mode and configuration, null without a world-1 run) to every run. */
void gs_report_scaling(const gs_opts *o, json_t *runs);
/* The side-by-side comparison of the runs (ps vs ring per world). */
void gs_report_print_comparison(FILE *f, json_t *runs);
/* Write report.json, the SVG charts and trace.json into dir. */
int gs_report_write(const char *dir, const gs_opts *o, json_t *runs, bool interrupted, gs_err *e);

/* The collective benchmark (collective.c): as launcher and as one rank. */
int gs_collective_rank(const gs_opts *o, gs_mode mode, const gs_rank_env *env);

#endif
