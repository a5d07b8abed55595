/* project.h (internal to bench/): bench --calibrate and bench --project,
 * the two commands of the cost model (model.h) that start no rank:
 * calibrate.c measures this machine, project.c reads the flags, predicts,
 * and writes the table, projection.json and projection.svg. */
#ifndef GS_BENCH_PROJECT_H
#define GS_BENCH_PROJECT_H

#include <stdio.h>

#include "bench/bench.h"
#include "bench/model.h"

/* how the figures of a calibration were obtained, for its printed table */
typedef struct gs_calib_notes {
  double transport_rms, reduce_rms, copy_rms; /* relative fit residuals (NaN: no fit) */
  double loop_small_s;                        /* half a 64 B round trip over loopback */
  bool link_measured;                         /* --hosts 2: the link part was measured */
  size_t optim_params;
  int compute_steps, threads;
  double seconds;                             /* the whole measurement */
} gs_calib_notes;

/* Measure this machine: --model at --batch and --precision, --threads BLAS
 * threads (1 by default); --link / --latency become the "link" part, as
 * given, or with --hosts 2 measured between two emulated hosts at that
 * rate. A wrong --model is GS_EINVAL with a message naming the flag. */
int gs_calibrate_measure(const gs_opts *o, gs_cm_calib *c, gs_calib_notes *n, gs_err *e);
/* the table: each field as the file names it, its value in SI units, a
 * readable value and how it was measured */
void gs_calibrate_print(FILE *f, const gs_cm_calib *c, const gs_calib_notes *n);

/* the mains (exit status: 0, 1 on failure, 2 on bad input) */
int gs_calibrate_main(const gs_opts *o);
int gs_project_main(const gs_opts *o);

#endif
