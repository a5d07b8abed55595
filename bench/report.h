/* report.h (internal to bench/): the launcher's side: run every
 * combination of the sweep, then turn the runs' summaries into
 * report.json, the comparison table, the SVG charts and the merged trace;
 * and the collective benchmark's entry. */
#ifndef GS_BENCH_REPORT_H
#define GS_BENCH_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "bench/summary.h"

/* Launch every run of the sweep; returns the process exit code. */
int gs_sweep_main(gs_opts *o, int argc, char **argv);

/* report.json from the runs' summaries, the environment and the
 * configuration (a new reference; NULL with e set). */
json_t *gs_report_json(const gs_opts *o, const gs_summary *runs, size_t n, bool interrupted,
                       gs_err *e);
/* Write report.json, the SVG charts and trace.json into dir. */
int gs_report_write(const char *dir, const gs_opts *o, const gs_summary *runs, size_t n,
                    bool interrupted, gs_err *e);
/* --report DIR: print the tables of DIR/report.json's runs to out and draw
 * its charts again; every metric must be in the file (GS_EPROTO naming the
 * missing one otherwise). */
int gs_report_redraw(const char *dir, FILE *out, gs_err *e);
/* Free n summaries and the array. */
void gs_summaries_free(gs_summary *runs, size_t n);
/* --version: version, git revision, build type, CPU code path, libraries,
 * and whether a GPU is usable (or why not). */
void gs_version_print(FILE *f);

/* The collective benchmark (collective.c), as one rank of a job. */
int gs_collective_rank(const gs_opts *o, gs_mode mode, const gs_rank_env *env);

#endif
