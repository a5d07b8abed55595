/* family.c: what the all-reduce family's options ask (allreduce.h
 * gs_allreduce_asks): the CPU ring's and NCCL's backends take the same
 * options, so that a flag NCCL does not run (--ring-period) is refused by
 * the one check (worker/caps.c) instead of being dropped. Built into the
 * programs and the CUDA module alike. */
#include "allreduce/allreduce.h"

void gs_allreduce_asks(const void *opts, gs_want *w) {
  gs_allreduce_opts o = {0};
  if (opts) o = *(const gs_allreduce_opts *)opts;
  if (o.period > 1) gs_want_set(w, GS_AXIS_SYNC, GS_SYNC_PERIODIC, "--ring-period %d", o.period);
  else gs_want_set(w, GS_AXIS_SYNC, GS_SYNC_BSP, NULL);
}
