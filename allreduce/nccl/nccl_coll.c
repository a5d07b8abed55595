/* nccl_coll.c: the collective benchmark's collectives on an NCCL session
 * (allreduce.h gs_nccl_collective), the calls nccl-tests times:
 *
 *   all_reduce      ncclAllReduce(src, dst, count)
 *   reduce_scatter  ncclReduceScatter(src, dst + rank*part, part)
 *   all_gather      ncclAllGather(src + rank*part, dst, part)
 *   broadcast       ncclBroadcast(src, dst, count, root)
 *   reduce          ncclReduce(src, dst, count, root)
 *
 * with part = count / N. Those offsets are NCCL's in-place layout, so
 * src == dst runs in place as nccl-tests' in-place column does, and the
 * parted ones read and write the same parts as the ZeroMQ ring's
 * (gs_comm_reduce_scatter, gs_comm_all_gather). -o maps to ncclSum,
 * ncclAvg, ncclProd, ncclMin, ncclMax; NCCL averages itself (integers: the
 * sum divided by N, truncated; floating types: each contribution times
 * 1/N, then the sum). The session's wire dtype is the type: fp32, fp64 and
 * int32 buffers go to NCCL as they are; under an fp16 / bf16 wire the
 * buffers hold fp32, which the comm stream rounds into the session's wire
 * buffer, NCCL runs in place there, and the result is widened back, as the
 * session's own all-reduce does.
 *
 * It runs on the session's comm stream after the compute stream's work
 * (the inputs) and before the compute stream's next (the check), waited
 * for as the session waits: polled under cfg.timeout_ms with NCCL's
 * asynchronous errors, the communicator aborted on any failure, the
 * message naming the rank, the step (the iteration), the call and its
 * root. Wrong arguments are refused before anything is queued, without an
 * abort.
 *
 * The calls are NCCL's column of the collectives' rows (allreduce.h
 * gs_coll_desc, coll.c): a table indexed by gs_coll. */
#include <stdarg.h>
#include <stdio.h>

#include "allreduce/allreduce.h"
#include "allreduce/nccl/nccl.h"
#include "allreduce/nccl/nccl_internal.h"

/* One NCCL call on the session's comm stream: sb and db are the whole
 * vectors' buffers, part the elements of one rank's part (count / N for a
 * parted collective), mine where this rank's part starts, in bytes. */
typedef struct call_args {
  const char *sb;
  char *db;
  size_t count, part, mine;
  ncclDataType_t t;
  ncclRedOp_t op;
  int root;
} call_args;

static ncclResult_t all_reduce(nccl_sync *s, const call_args *a) {
  return ncclAllReduce(a->sb, a->db, a->count, a->t, a->op, s->comm, s->comm_stream);
}
static ncclResult_t reduce_scatter(nccl_sync *s, const call_args *a) {
  return ncclReduceScatter(a->sb, a->db + a->mine, a->part, a->t, a->op, s->comm, s->comm_stream);
}
static ncclResult_t all_gather(nccl_sync *s, const call_args *a) {
  return ncclAllGather(a->sb + a->mine, a->db, a->part, a->t, s->comm, s->comm_stream);
}
static ncclResult_t broadcast(nccl_sync *s, const call_args *a) {
  return ncclBroadcast(a->sb, a->db, a->count, a->t, a->root, s->comm, s->comm_stream);
}
static ncclResult_t reduce(nccl_sync *s, const call_args *a) {
  return ncclReduce(a->sb, a->db, a->count, a->t, a->op, a->root, s->comm, s->comm_stream);
}

static const struct {
  const char *name;
  ncclResult_t (*run)(nccl_sync *s, const call_args *a);
} calls[] = {
  [GS_COLL_ALL_REDUCE] = {"ncclAllReduce", all_reduce},
  [GS_COLL_REDUCE_SCATTER] = {"ncclReduceScatter", reduce_scatter},
  [GS_COLL_ALL_GATHER] = {"ncclAllGather", all_gather},
  [GS_COLL_BROADCAST] = {"ncclBroadcast", broadcast},
  [GS_COLL_REDUCE] = {"ncclReduce", reduce},
};

static ncclRedOp_t nccl_op(gs_redop op) {
  switch (op) {
  case GS_REDOP_AVG: return ncclAvg;
  case GS_REDOP_PROD: return ncclProd;
  case GS_REDOP_MIN: return ncclMin;
  case GS_REDOP_MAX: return ncclMax;
  default: return ncclSum;
  }
}

/* A usage error: nothing was queued, so the communicator stays usable. */
static int bad(const nccl_sync *s, gs_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(const nccl_sync *s, gs_err *e, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return GS_FAIL(e, GS_EINVAL, "nccl rank %d/%d (GPU %d), step %lld: %s", s->cfg.rank,
                 s->cfg.world, s->cfg.device, (long long)s->step, msg);
}

static int check_args(const nccl_sync *s, gs_coll c, gs_redop op, int root, const void *src,
                      void *dst, size_t count, gs_err *e) {
  const int N = s->cfg.world;
  const gs_coll_desc *d = gs_coll_of(c);
  if (!d) return bad(s, e, "unknown collective %d", (int)c);
  const char *call = calls[c].name;
  if (d->has_op && (unsigned)op > GS_REDOP_MAX)
    return bad(s, e, "%s: unknown reduction %d (sum, avg, prod, min, max)", call, (int)op);
  if (d->has_root && (root < 0 || root >= N))
    return bad(s, e, "%s: root %d is not a rank of the world (0..%d)", call, root, N - 1);
  if (d->parted && count % (size_t)N)
    return bad(s, e, "%s: %zu elements do not split into %d equal parts (nccl-tests' sizes "
               "are whole multiples of the world)", call, count, N);
  if (count > 0 && (!src || !dst)) return bad(s, e, "%s: no %s buffer", call, src ? "dst" : "src");
  if (gs_dtype_lp(s->cfg.wire) && count > s->cfg.n)
    return bad(s, e, "%s: %zu elements, but the session's %s wire buffer holds %zu", call, count,
               gs_dtype_name(s->cfg.wire), s->cfg.n);
  return GS_OK;
}

int gs_nccl_collective(gs_sync *base, gs_coll c, gs_redop op, int root, const void *src,
                       void *dst, size_t count, int64_t iter, gs_err *e) {
  nccl_sync *s = gs_nccl_of(base);
  if (!s)
    return GS_FAIL(e, GS_EINVAL, "gs_nccl_collective: the session is %s's, not NCCL's",
                   base && base->name ? base->name : "nobody");
  if (s->dead) return gs_nccl_dead(s, e);
  s->step = iter;
  s->enqueued = 0;  /* between steps: no bucket of this one is pending */
  GS_TRY(check_args(s, c, op, root, src, dst, count, e));
  const int me = s->cfg.rank;
  const gs_dtype wire = s->cfg.wire;
  const bool lp = gs_dtype_lp(wire);
  const size_t es = gs_dtype_size(wire);
  const bool rooted = gs_coll_of(c)->has_root;
  const size_t part = gs_coll_of(c)->parted ? count / (size_t)s->cfg.world : count;
  const size_t mine = (size_t)me * part;  /* this rank's part starts here (elements) */
  char phase[192];
  if (rooted)
    snprintf(phase, sizeof phase, "%s (root %d, %zu elements of %s)", calls[c].name, root,
             count, gs_dtype_name(wire));
  else
    snprintf(phase, sizeof phase, "%s (%zu elements of %s)", calls[c].name, count,
             gs_dtype_name(wire));

  GS_NCCL_CU(s, -1, e, cudaEventRecord(s->coll_ready, s->compute));
  GS_NCCL_CU(s, -1, e, cudaStreamWaitEvent(s->comm_stream, s->coll_ready, 0));
  /* NCCL's buffers, of the wire type: the caller's, or the wire buffer
   * (the whole vector, run in place) */
  const char *sb = src;
  char *db = dst;
  if (lp && count > 0) {
    if (c == GS_COLL_ALL_GATHER)
      s->kc->convert(s->kc, wire, (char *)s->wire + mine * es, GS_F32,
                     (const float *)src + mine, part);
    else
      s->kc->convert(s->kc, wire, s->wire, GS_F32, src, count);
    sb = db = s->wire;
  }
  call_args a = {.sb = sb, .db = db, .count = count, .part = part, .mine = mine * es,
                 .t = gs_nccl_type(wire), .op = nccl_op(op), .root = root};
  ncclResult_t r = calls[c].run(s, &a);
  GS_TRY(gs_nccl_settle(s, r, -1, phase, e));
  if (lp && count > 0) {
    /* what this rank must hold, widened: its part, the root's sum, or all */
    if (c == GS_COLL_REDUCE_SCATTER)
      s->kc->convert(s->kc, GS_F32, (float *)dst + mine, wire, (char *)s->wire + mine * es,
                     part);
    else if (c != GS_COLL_REDUCE || me == root)
      s->kc->convert(s->kc, GS_F32, dst, wire, s->wire, count);
  }
  GS_NCCL_CU(s, -1, e, cudaEventRecord(s->done, s->comm_stream));
  GS_TRY(gs_nccl_wait(s, phase, e));
  GS_NCCL_CU(s, -1, e, cudaStreamWaitEvent(s->compute, s->done, 0));
  return GS_OK;
}

/* The module's entry for nccl_proxy.c (nccl.h): in the module
 * gs_nccl_collective above is local. */
gs_nccl_collective_fn *gs_cudamod_nccl_collective(void) { return gs_nccl_collective; }
