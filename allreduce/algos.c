/* algos.c: the table of algorithms over the communicator (comm.h), one
 * row each, and the all-reduce's choice among them, which the rows say:
 *
 *   ring    reduce-scatter + all-gather, 2(N-1) dependent hops (with the
 *           whole-vector all-gather below small_bytes): bandwidth-optimal
 *           (ring.c, ring_pipe.c, ring_small.c; its other collectives in
 *           ring_coll.c). Every request prepares it.
 *   rd      recursive doubling: log2 N rounds of whole-buffer exchanges
 *           with partner rank ^ 2^k (ranks beyond the largest power of two
 *           fold in first and get the result back last) (rd.c); auto and
 *           shm run it up to GS_ALGO_AUTO_MAX_BYTES, and shm and hier build
 *           on its mesh.
 *   direct  every rank sends its whole buffer to every other rank (one
 *           round) and sums all N in rank order (direct.c).
 *   auto    a request only: hier where it runs, else shm where it runs,
 *           else rd up to GS_ALGO_AUTO_MAX_BYTES and the ring above.
 *   shm     every rank on one host (same boot, same network, IPC and PID
 *           namespaces, so not across emulated hosts): through shared
 *           memory, every rank copying in and summing its part (shm.c,
 *           over shm/); fp32, fp64 or int32 host buffers. Where it does not
 *           run (world 1), as auto.
 *   hier    several ranks on each of several hosts (hier.c): reduce-scatter
 *           inside each host through shared memory, a ring between hosts
 *           run by every local rank on its own slice, and all-gather inside
 *           the host; fp32, fp64 or int32 host buffers. Where it does not
 *           run (training's hier_auto), the ring.
 *
 * rd and direct open a socket to every rank (a mesh, mesh.c) besides the
 * ring's two; so does every request that prepares rd with shm or hier. A row's number is the algorithm's (gs_algo) and
 * the handshake's; the launcher's names for some are allreduce.h's
 * GS_ALGO_*. A phase's number is its chunks' on the wire, each row's own.
 * A new algorithm is a row here and a file of its own. */
#include <string.h>

#include "allreduce/comm.h"

extern const gs_algo_ops gs_algo_ring, gs_algo_rd, gs_algo_direct, gs_algo_shm, gs_algo_hier;

/* the rows' numbers, for the rows below to name each other */
enum { RING = GS_ALGO_RING, RD = 1, DIRECT = 2, AUTO = GS_ALGO_AUTO, SHM = GS_ALGO_SHM,
       HIER = GS_ALGO_HIER, NROWS };
#define B(a) GS_ALGO_BIT(a)
_Static_assert(NROWS <= 32, "gs_algo_row.under has a bit per row");

/* shm runs on one host and hier (under auto) on several: never both, so
 * their order in the table is no preference */

static const gs_algo_row table[NROWS] = {
  [RING] = {.name = "ring", .ops = &gs_algo_ring, .under = ~0u, .large = RING,
            /* in ring_bufs.h's order */
            .phase = {{0, "reduce-scatter"}, {1, "all-gather"},
                      {2, "all-gather of whole vectors"}, {5, "broadcast"}, {6, "reduce"}}},
  [RD] = {.name = "rd", .ops = &gs_algo_rd, .phase = {{3, "recursive doubling"}},
          .under = B(RD) | B(AUTO) | B(SHM) | B(HIER), .large = RD},
  [DIRECT] = {.name = "direct", .ops = &gs_algo_direct, .phase = {{4, "direct exchange"}},
              .under = B(DIRECT), .large = DIRECT},
  [AUTO] = {.name = "auto", .small = RD, .small_max = GS_ALGO_AUTO_MAX_BYTES, .large = RING},
  [SHM] = {.name = "shm", .ops = &gs_algo_shm, .under = B(AUTO) | B(SHM), .when_ready = true,
           .small = RD, .small_max = GS_ALGO_AUTO_MAX_BYTES, .large = RING},
  [HIER] = {.name = "hier", .ops = &gs_algo_hier, .phase = {{7, "hierarchical all-reduce"}},
            .under = B(AUTO) | B(HIER), .when_ready = true, .large = RING},
};

const gs_algo_row *gs_algo_table(int *n) {
  *n = NROWS;
  return table;
}

const char *gs_algo_name(gs_algo a) { return a >= 0 && a < NROWS ? table[a].name : "unknown"; }

int gs_algo_parse(const char *s) {
  for (int a = 0; a < NROWS; a++)
    if (s && !strcmp(s, table[a].name)) return a;
  return -1;
}

void gs_algo_names(char *buf, size_t cap) {
  size_t len = 0;
  if (cap) buf[0] = '\0';
  for (int a = 0; a < NROWS && len < cap; a++) {
    int n = snprintf(buf + len, cap - len, "%s%s", a == 0 ? "" : a == NROWS - 1 ? " or " : ", ",
                     table[a].name);
    if (n < 0) break;
    len += (size_t)n;
  }
}

gs_algo gs_comm_algo(const gs_comm *r, size_t count) {
  if (!r || r->o.world <= 1) return RING;
  const gs_algo q = r->o.algo;
  for (int a = 0; a < r->nrows; a++)
    if (r->rows[a].when_ready && (r->rows[a].under & B(q)) && gs_comm_ready(r, a)) return a;
  const gs_algo_row *row = &r->rows[q];
  return row->small_max && count <= row->small_max / sizeof(float) ? row->small : row->large;
}

int gs_comm_prepare(const gs_comm_opts *o, gs_comm **out, char endpoint[GS_ENDPOINT_MAX],
                    gs_err *e) {
  return gs_comm_prepare_table(o, table, NROWS, out, endpoint, e);
}

int gs_comm_allreduce(gs_comm *r, const void *src, void *dst, size_t count, int64_t step,
                      int bucket, gs_comm_stats *st, gs_err *e) {
  return gs_comm_allreduce_op(r, GS_REDOP_SUM, src, dst, count, step, bucket, st, e);
}

int gs_comm_allreduce_op(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count,
                         int64_t step, int bucket, gs_comm_stats *st, gs_err *e) {
  return gs_comm_run(r, gs_comm_algo(r, count), op, src, dst, count, step, bucket, st, e);
}
