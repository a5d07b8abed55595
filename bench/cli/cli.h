/* cli.h: the contract of bench/cli: the command line. It parses the flags
 * into gs_opts (opts.c: one table of flags, their defaults, help and
 * parsers), checks what needs several flags at once (resolve.c), picks
 * this process's role (roles.c), and runs the two roles that are the
 * command line's own: the launcher's sweep over modes, worlds, models,
 * batches and bucket sizes (sweep.c, sweep_header.c), and the cost model's
 * commands --calibrate and --project (costmodel_cmd.c), which hand the cost
 * model plain configurations. Usage errors name the flag; the roles return
 * exit codes (2: bad input, 1: a failure). */
#ifndef GS_BENCH_CLI_H
#define GS_BENCH_CLI_H

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"

/* bench's entry: parse argv, then run the role this process plays; returns
 * the exit code. */
int gs_bench_main(int argc, char **argv);

/* Parse argv into o. Every flag is one row of opts.c's table: name,
 * argument, default, help and parser; the defaults are the table's, applied
 * by the same parsers before argv. GS_EINVAL with a message naming the flag
 * on a usage error; *help set when --help was asked. */
int gs_opts_parse(int argc, char **argv, gs_opts *o, bool *help, gs_err *e);
void gs_opts_usage(FILE *f);
void gs_opts_free(gs_opts *o);

/* The checks and defaults that need several flags, after every one is read
 * (resolve.c). */
int gs_opts_resolve(gs_opts *o, gs_err *e);
/* A finite number in [lo, hi] and nothing after it: 0, else -1. */
static inline int gs_parse_real(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* Launch every run of the sweep (sweep.c); returns the process exit code. */
int gs_sweep_main(gs_opts *o, int argc, char **argv);
/* The sweep's header (sweep_header.c): links, runs, each model's bucket
 * plan. */
void gs_sweep_header(FILE *f, const gs_opts *o);
/* --compress (compress_forecast.c): before the runs, whether it should pay
 * on the sweep's links (the cost model on this machine, measured first);
 * after them, each run's measured step beside the prediction. NULL: no
 * --compress (or no memory); beside and free take NULL. */
typedef struct gs_compress_forecast gs_compress_forecast;
struct gs_summary;
gs_compress_forecast *gs_compress_forecast_print(FILE *f, const gs_opts *o);
void gs_compress_forecast_beside(FILE *f, const gs_compress_forecast *fc,
                                 const struct gs_summary *runs,
                                 size_t n);
void gs_compress_forecast_free(gs_compress_forecast *fc);

/* --calibrate / --project (costmodel_cmd.c): which flags they take (NULL: name
 * is fine; else the sentence of the error), their own checks, and their
 * mains (exit status: 0, 1 on failure, 2 on bad input). */
const char *gs_costmodel_flag_refused(const gs_opts *o, const char *name);
int gs_costmodel_resolve(gs_opts *o, gs_err *e);
int gs_calibrate_main(const gs_opts *o);
int gs_project_main(const gs_opts *o);
/* --compare (compare_cmd.c): several results directories' runs side by side */
int gs_compare_main(const gs_opts *o);

/* --replay FILE (replay_cmd.c): its checks, and its main (exit status 0 when
 * every update's parameters are the logged bits, 1 when not, 2 on bad
 * input). */
int gs_replay_resolve(const gs_opts *o, gs_err *e);
int gs_replay_main(const gs_opts *o);

#endif
