/* shm_comm.c: shared memory over the communicator (shm_comm.h), what
 * shm.c and hier.c share: the checks of the ring's options, the segment
 * and a member from them, and the vote that every rank mapped it. */
#include <stdio.h>

#include "allreduce/shm_comm.h"

bool gs_comm_shm_may_use(const gs_comm *r) {
  return r->o.world > 1 && r->o.k->device == GS_DEV_CPU && !gs_dtype_lp(r->o.wire) &&
         !gs_shm_disabled();
}

int gs_comm_shm_create(gs_comm *r, int N, size_t chunk, size_t whole, gs_shm **out,
                       char spec[GS_SHM_SPEC_MAX], gs_err *e) {
  return gs_shm_create(r->o.rank, N, r->o.max_count * gs_comm_es(r), chunk, whole, out, spec, e);
}

void gs_comm_shm_join(gs_comm *r, gs_shm *s, int me, int N, const int *ranks) {
  gs_shm_cfg c = {.me = me, .size = N, .rank = r->o.rank, .ranks = ranks,
                  .timeout_ms = r->o.timeout_ms, .k = r->o.k, .dtype = r->o.wire,
                  .local_ranks = r->o.local_ranks};
  gs_shm_join(s, &c);
}

static int vote(gs_comm *r, bool ok, bool *all, gs_err *e) {
  union { float f; double d; int32_t i; } v;
  if (r->o.wire == GS_F64) v.d = ok;
  else if (r->o.wire == GS_I32) v.i = ok;
  else v.f = ok;
  /* over recursive doubling's mesh, which the table prepares wherever it
   * prepares shm or hier (a collective of one element runs there under
   * auto and shm) */
  int rc = gs_comm_run(r, gs_algo_parse("rd"), GS_REDOP_MIN, &v, &v, 1, 0, 0, NULL, e);
  if (rc < 0) return rc;
  *all = r->o.wire == GS_F64 ? v.d > 0 : r->o.wire == GS_I32 ? v.i > 0 : v.f > 0;
  return GS_OK;
}

int gs_comm_shm_settle(gs_comm *r, gs_shm **m, bool ok, const char *why, bool want,
                       const char *algo, const char *whose, const char *fallback, gs_err *e) {
  bool all = false;
  GS_TRY(vote(r, ok, &all, e));
  if (all) {
    gs_shm_mapped(*m);
    return GS_OK;
  }
  gs_shm_close(*m);
  *m = NULL;
  if (want)
    return GS_FAIL(e, GS_EINVAL, "rank %d: --algo %s: not every rank could map %s shared "
                   "memory%s%s%s; use --algo %s", r->o.rank, algo, whose,
                   why[0] ? " (here: " : "", why, why[0] ? ")" : "", fallback);
  if (why[0]) fprintf(stderr, "rank %d: no shared memory (%s): the all-reduce uses sockets\n",
                      r->o.rank, why);
  return GS_OK;
}
