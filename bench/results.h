/* results.h: what one run measured, summarised with the metric
 * definitions of DESIGN.md, and the files it leaves behind:
 *   steps.csv   one row per rank per step, appended as the run goes;
 *   runs/<id>/run.json   the run's summary, per-rank rows, step series;
 *   runs/<id>/trace.json the run's Chrome trace (one track per rank). */
#ifndef GS_BENCH_RESULTS_H
#define GS_BENCH_RESULTS_H

#include <jansson.h>
#include <stdio.h>

#include "bench/internal.h"

typedef struct gs_run_info {
  const gs_opts *opts;       /* opts->train holds this run's model/batch/bucket */
  gs_mode mode;
  int world;
  const char *kernels;       /* "cpu" / "cuda" */
  const char *source;        /* who launched the ranks */
  size_t nparams;
  int nbuckets;
  gs_dtype wire;
  bool overlap, dedicated;
  int threads;
  double wall_start, wall_end;
  double accuracy, eval_loss; /* < 0: not measured */
} gs_run_info;

/* The run's id, e.g. "ps-w4-mlp_784-512-512-10-b64-bk25" (safe as a name). */
void gs_run_id(const gs_run_info *info, char *buf, size_t cap);

/* steps.csv: the header, and one formatted row (returns its length). */
const char *gs_csv_header(void);
int gs_csv_row(char *buf, size_t cap, const gs_opts *o, gs_mode mode, int world,
               const gs_step_row *row, uint64_t param_hash);
/* Write the header if dir/steps.csv does not exist yet. */
void gs_csv_header_once(const char *dir);

/* Summary + per-rank rows + series of one run as a JSON object (new ref). */
json_t *gs_results_run_json(const gs_run_info *info, const gs_rank_result *ranks);
/* Write run.json and trace.json under dir/runs/<id>/ (atomically). */
int gs_results_write_run(const char *dir, const gs_run_info *info, const gs_rank_result *ranks,
                         gs_err *e);
/* The terminal table of one run (from its JSON object). */
void gs_results_print_json(FILE *f, json_t *run);
void gs_results_print_run(FILE *f, const gs_run_info *info, const gs_rank_result *ranks);

/* A number / string member of a JSON object (0 / "" when absent). */
double gs_jnum(json_t *o, const char *key);
const char *gs_jstr(json_t *o, const char *key);

/* Write bytes to path atomically: a temporary file in the same directory,
 * fsync, rename. */
int gs_write_atomic(const char *path, const void *data, size_t len, gs_err *e);
int gs_json_write_atomic(const char *path, json_t *j, gs_err *e);
/* mkdir -p */
int gs_mkdirs(const char *path, gs_err *e);

/* Which backend implements a mode on a device ("ps", "ring", "nccl"). */
const gs_backend *gs_bench_backend(const char *name, gs_err *e);
void gs_bench_signals(void);

#endif
