/* results.h (internal to bench/): the files one run leaves, and the atomic
 * writes every file of the bench goes through:
 *   steps.csv             one row per rank per step, appended as the run goes
 *                         (another launcher's: rank 0's, then everyone's);
 *   runs/<id>/run.json    the run's summary (gs_summary as JSON);
 *   runs/<id>/trace.json  the run's Chrome trace (one process per rank);
 *   runs/<id>/timeline.json  a few of its steps rank by rank, drawn by the
 *                         report (timeline-<id>.svg). */
#ifndef GS_BENCH_RESULTS_H
#define GS_BENCH_RESULTS_H

#include <jansson.h>
#include <stdio.h>

#include "bench/summary.h"

/* steps.csv: one formatted row of a run (returns its length, -1 when cap
 * is short). */
int gs_csv_row(char *buf, size_t cap, const gs_run_info *run, const gs_step_row *row,
               uint64_t param_hash);
/* dir/steps.csv made afresh with its header (O_EXCL | O_NOFOLLOW: an
 * earlier run's, or a link of that name, is an error saying so); returns
 * the open descriptor for rows as they go. Our launcher's sweep makes it
 * once; a job that another launcher started, on rank 0, and at the end
 * replaces it atomically with every rank's gathered rows. */
int gs_csv_start(const char *dir, gs_err *e);
/* A rank of our launcher's: dir/steps.csv to append to, only when it is
 * still the regular file of this user that the sweep made (not a link). */
int gs_csv_open(const char *dir, gs_err *e);
int gs_results_write_steps(const char *dir, const gs_run_info *info,
                           const gs_rank_result *ranks, gs_err *e);

/* Write run.json (s), trace.json (the ranks' spans) and timeline.json under
 * dir/runs/<s->id>/, atomically; read a run.json back (every metric must
 * be there: see gs_summary_from_json). */
int gs_results_write_run(const char *dir, const gs_summary *s, const gs_run_info *info,
                         const gs_rank_result *ranks, gs_err *e);
int gs_results_read_run(const char *dir, const gs_run_info *info, gs_summary *out, gs_err *e);

/* Write bytes to path atomically: a temporary file in the same directory,
 * fsync, rename. */
int gs_write_atomic(const char *path, const void *data, size_t len, gs_err *e);
int gs_json_write_atomic(const char *path, json_t *j, gs_err *e);
/* mkdir -p */
int gs_mkdirs(const char *path, gs_err *e);
/* mkdir -p of dir/sub, every level below dir a directory, not a link. */
int gs_mkdir_below(const char *dir, const char *sub, gs_err *e);
/* Whether dir holds a run already (steps.csv or report.json, or a link of
 * either name). */
bool gs_holds_run(const char *dir);

#endif
