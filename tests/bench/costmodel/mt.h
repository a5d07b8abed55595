/* mt.h: what the cost-model tests share: a plan built from a list of
 * bucket sizes, a machine with round numbers, and a relative comparison. */
#ifndef GS_TEST_MODEL_MT_H
#define GS_TEST_MODEL_MT_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "bench/costmodel/costmodel.h"
#include "tests/check.h"

/* A plan over caller storage: nb buckets of the given bytes (fp32 wire). */
static inline gs_cm_plan mt_plan(size_t *bytes, int nb) {
  gs_cm_plan p = {.bytes = bytes, .nbuckets = nb, .elem_bytes = 4};
  for (int i = 0; i < nb; i++) p.total += (double)bytes[i];
  p.nparams = (size_t)(p.total / 4);
  return p;
}

/* 1 GB/s links, 100 us latency, 20 us per message, 4 GB/s loopback,
 * 8 GB/s reduction, 16 GB/s copy, 1e9 parameters/s. */
static inline gs_cm_machine mt_machine(void) {
  return (gs_cm_machine){.link_Bps = 1e9, .link_latency_s = 1e-4, .alpha_s = 2e-5,
                         .local_Bps = 4e9, .reduce_Bps = 8e9, .copy_Bps = 1.6e10,
                         .optim_pps = 1e9};
}

static inline bool mt_near(double a, double b, double rel) {
  return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

#endif
