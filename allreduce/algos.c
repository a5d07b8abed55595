/* algos.c: the table of algorithms over the communicator (comm.h), one
 * row per gs_algo, and the all-reduce's choice among them: the one the
 * ring was given, or under auto (and shm, hier) the hierarchical
 * all-reduce where it connected (several hosts), shared memory where every
 * rank maps it, else the choice by size (gs_algo_pick: recursive doubling up to
 * GS_ALGO_AUTO_MAX_BYTES, the ring above). A new algorithm is a row here
 * and a file of its own. */
#include "allreduce/comm.h"

extern const gs_algo_ops gs_algo_ring, gs_algo_rd, gs_algo_direct, gs_algo_shm, gs_algo_hier;

static const gs_algo_ops *const table[GS_ALGO_SLOTS] = {
  [GS_ALGO_RING] = &gs_algo_ring,
  [GS_ALGO_RD] = &gs_algo_rd,
  [GS_ALGO_DIRECT] = &gs_algo_direct,
  [GS_ALGO_SHM] = &gs_algo_shm,
  [GS_ALGO_HIER] = &gs_algo_hier,
};

gs_algo gs_comm_algo(const gs_comm *r, size_t count) {
  if (!r) return GS_ALGO_RING;
  if (gs_comm_ready(r, GS_ALGO_HIER) && (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_HIER))
    return GS_ALGO_HIER;
  if (r->o.algo == GS_ALGO_HIER) return GS_ALGO_RING; /* hier_auto, where it does not run */
  if (gs_comm_ready(r, GS_ALGO_SHM) && (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_SHM))
    return GS_ALGO_SHM;
  return gs_algo_pick(r->o.algo, count, r->o.world);
}

int gs_comm_prepare(const gs_comm_opts *o, gs_comm **out, char endpoint[GS_ENDPOINT_MAX],
                    gs_err *e) {
  return gs_comm_prepare_table(o, table, out, endpoint, e);
}

int gs_comm_allreduce(gs_comm *r, const void *src, void *dst, size_t count, int64_t step,
                      int bucket, gs_comm_stats *st, gs_err *e) {
  return gs_comm_allreduce_op(r, GS_REDOP_SUM, src, dst, count, step, bucket, st, e);
}

int gs_comm_allreduce_op(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count,
                         int64_t step, int bucket, gs_comm_stats *st, gs_err *e) {
  return gs_comm_run(r, gs_comm_algo(r, count), op, src, dst, count, step, bucket, st, e);
}
