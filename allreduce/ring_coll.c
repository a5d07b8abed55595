/* ring_coll.c: the collectives besides all-reduce on the same ZeroMQ ring
 * (allreduce.h): reduce-scatter and all-gather, the all-reduce's two
 * phases run alone (ring_pipe.c's pipeline), and broadcast and reduce, chains
 * around the ring, cut into the same chunks and pipelined.
 *
 *                 rank 0 (root)                 broadcast: the root's chunks
 *               ^             \                 go right, each rank keeps and
 *              /               v                forwards them; N-1 hops of
 *         rank 3               rank 1           latency, each link carries
 *              ^               /                the vector once (busbw =
 *               \             v                 algbw).
 *                  rank 2
 *
 *   broadcast, root 0:  0 -> 1 -> 2 -> 3        (3 does not forward)
 *   reduce,    root 0:  1 -> 2 -> 3 -> 0        (each adds its own: the sum
 *                                               is ((g1 + g2) + g3) + g0)
 *
 * Every chunk i of the vector (segment i / C, chunk i % C, as the
 * all-reduce cuts it) travels the chain independently: a rank forwards
 * chunk i as soon as it has it, while the next one arrives, so the time is
 * about one vector over one link plus N-2 chunk hops. Sums run in a fixed
 * order whatever the timing (with any op: gs_comm_combine); with a 16-bit wire dtype each hop adds in
 * fp32 and rounds once for the next hop, the root keeps the rounded value
 * (as the all-reduce's owner does), and a broadcast's root keeps what it
 * sent, so replicated results are the same bits everywhere.
 *
 * gs_comm_collective runs any gs_coll through a table of these, the
 * ring's column of the collectives' rows (coll.c). */
#include <string.h>

#include "allreduce/ring_bufs.h"

int gs_comm_reduce_scatter(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count,
                           int64_t step, gs_comm_stats *st, gs_err *e) {
  gs_comm_stats local = {0};
  int in = gs_comm_enter(r, op, src, dst, count, step, 0, true, "reduce-scatter", e);
  if (in < 0) return in;
  if (in == 1) {
    if (src != dst && count) r->o.k->copy(r->o.k, dst, src, count * gs_comm_es(r));
    return r->o.k->sync(r->o.k, e);
  }
  return gs_comm_leave(r, gs_ring_phases(r, src, dst, count, GS_RING_RS, st ? st : &local, e), e);
}

int gs_comm_all_gather(gs_comm *r, const void *src, void *dst, size_t count, int64_t step,
                       gs_comm_stats *st, gs_err *e) {
  gs_comm_stats local = {0};
  int in = gs_comm_enter(r, GS_REDOP_SUM, dst, dst, count, step, 0, true, "all-gather", e);
  if (in < 0) return in;
  size_t off, len;
  gs_comm_part(count, r->o.world, r->o.rank, &off, &len);
  if (len && !src) return GS_FAIL(e, GS_EINVAL, "rank %d: all-gather with a NULL buffer", r->o.rank);
  void *mine = gs_comm_at(r, dst, off);
  if (len && src != mine) r->o.k->copy(r->o.k, mine, src, len * gs_comm_es(r));
  if (in == 1) return r->o.k->sync(r->o.k, e);
  return gs_comm_leave(r, gs_ring_phases(r, dst, dst, count, GS_RING_AG, st ? st : &local, e), e);
}

/* chunk i of a vector of n elements cut in N segments of C chunks */
static void chunk_of(const gs_comm *r, size_t n, size_t C, size_t i, int phase, int ring_step,
                     gs_comm_want *w) {
  size_t so, sl, co, cl;
  gs_part_range(n, r->o.world, (int)(i / C), &so, &sl);
  gs_part_range(sl, (int)C, (int)(i % C), &co, &cl);
  *w = (gs_comm_want){.phase = phase, .ring_step = ring_step, .segment = (int)(i / C),
                      .chunk = (int)(i % C), .offset = so + co, .count = cl};
}

static int check_root(const gs_comm *r, int root, const char *what, gs_err *e) {
  if (root < 0 || root >= r->o.world)
    return GS_FAIL(e, GS_EINVAL, "rank %d: %s with root %d in a world of %d (0 <= root < world)",
                   r->o.rank, what, root, r->o.world);
  return GS_OK;
}

static int bcast_chain(gs_comm *r, const void *src, void *dst, size_t n, int root,
                       gs_comm_stats *st, gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, pos = gs_comm_mod(r->o.rank - root, N);
  const gs_dtype w = r->o.wire;
  const size_t ws = gs_dtype_size(w), es = gs_comm_es(r), C = gs_ring_chunks(r, n);
  const size_t M = (size_t)N * C;
  uint8_t *stage = r->stage;
  atomic_uint *flags = gs_ring_state(r)->flags;
  int rc = GS_OK;
  for (size_t i = 0; i < M && rc == GS_OK; i++) {
    gs_comm_want wt;
    if (pos == 0) {
      chunk_of(r, n, C, i, gs_ring_phase(r, RING_BCAST), 0, &wt);
      const void *data = gs_comm_at(r, src, wt.offset);
      void *d = gs_comm_at(r, dst, wt.offset);
      if (gs_dtype_lp(w)) {
        k->convert(k, w, stage + wt.offset * ws, GS_F32, data, wt.count);
        data = stage + wt.offset * ws;
        /* the root keeps what it sent */
        k->convert(k, GS_F32, d, w, data, wt.count);
      } else if (src != dst) {
        k->copy(k, d, data, wt.count * es);
      }
      rc = gs_comm_send_chunk(r, &wt, data, &flags[i], NULL, &st->bytes_sent, e);
      continue;
    }
    chunk_of(r, n, C, i, gs_ring_phase(r, RING_BCAST), pos - 1, &wt);
    zmq_msg_t msg;
    rc = gs_comm_recv_chunk(r, &wt, &msg, &st->bytes_recv, e);
    if (rc == GS_OK && pos < N - 1) {
      zmq_msg_t fwd;
      zmq_msg_init(&fwd);
      zmq_msg_copy(&fwd, &msg);
      wt.ring_step = pos;
      rc = gs_comm_send_chunk(r, &wt, NULL, NULL, &fwd, &st->bytes_sent, e);
      zmq_msg_close(&fwd);
    }
    if (rc == GS_OK) gs_comm_take(r, wt.count, gs_comm_at(r, dst, wt.offset), zmq_msg_data(&msg));
    zmq_msg_close(&msg);
  }
  if (rc == GS_OK && pos == 0) rc = gs_ring_wait_flags(r, M, e);
  return rc;
}

int gs_comm_broadcast(gs_comm *r, const void *src, void *dst, size_t count, int root,
                      int64_t step, gs_comm_stats *st, gs_err *e) {
  gs_comm_stats local = {0};
  if (r) GS_TRY(check_root(r, root, "broadcast", e));
  /* only the root reads src */
  int in = gs_comm_enter(r, GS_REDOP_SUM, r && r->o.rank == root ? src : dst, dst, count, step,
                         0, false, "broadcast", e);
  if (in < 0) return in;
  if (in == 1) {
    if (src != dst && count) r->o.k->copy(r->o.k, dst, src, count * gs_comm_es(r));
    return r->o.k->sync(r->o.k, e);
  }
  return gs_comm_leave(r, bcast_chain(r, src, dst, count, root, st ? st : &local, e), e);
}

static int reduce_chain(gs_comm *r, const void *src, void *dst, size_t n, int root,
                        gs_comm_stats *st, gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, pos = gs_comm_mod(r->o.rank - root - 1, N);
  const gs_dtype w = r->o.wire;
  const bool lp = gs_dtype_lp(w);
  const size_t ws = gs_dtype_size(w), es = gs_comm_es(r), C = gs_ring_chunks(r, n);
  const size_t M = (size_t)N * C;
  uint8_t *stage = r->stage;
  atomic_uint *flags = gs_ring_state(r)->flags;
  int rc = GS_OK;
  for (size_t i = 0; i < M && rc == GS_OK; i++) {
    gs_comm_want wt;
    const void *data;
    if (pos == 0) {
      chunk_of(r, n, C, i, gs_ring_phase(r, RING_REDUCE), 0, &wt);
      data = gs_comm_at(r, src, wt.offset);
      if (lp) {
        k->convert(k, w, stage + wt.offset * ws, GS_F32, data, wt.count);
        data = stage + wt.offset * ws;
      }
      rc = gs_comm_send_chunk(r, &wt, data, &flags[i], NULL, &st->bytes_sent, e);
      continue;
    }
    chunk_of(r, n, C, i, gs_ring_phase(r, RING_REDUCE), pos - 1, &wt);
    zmq_msg_t msg;
    rc = gs_comm_recv_chunk(r, &wt, &msg, &st->bytes_recv, e);
    if (rc < 0) {
      zmq_msg_close(&msg);
      break;
    }
    double a = gs_now();
    void *d = gs_comm_at(r, dst, wt.offset);
    if (src != dst) k->copy(k, d, gs_comm_at(r, src, wt.offset), wt.count * es);
    gs_comm_combine(r, wt.count, d, zmq_msg_data(&msg));
    zmq_msg_close(&msg);
    data = d;
    if (lp) { /* what the next hop gets; the root keeps exactly that */
      k->convert(k, w, stage + wt.offset * ws, GS_F32, d, wt.count);
      data = stage + wt.offset * ws;
      if (pos == N - 1) k->convert(k, GS_F32, d, w, data, wt.count);
    }
    st->reduce_s += gs_now() - a;
    if (pos < N - 1) {
      wt.ring_step = pos;
      rc = gs_comm_send_chunk(r, &wt, data, &flags[i], NULL, &st->bytes_sent, e);
    }
  }
  if (rc == GS_OK) rc = gs_ring_wait_flags(r, M, e);
  return rc;
}

int gs_comm_reduce(gs_comm *r, gs_redop op, const void *src, void *dst, size_t count, int root,
                   int64_t step, gs_comm_stats *st, gs_err *e) {
  gs_comm_stats local = {0};
  if (r) GS_TRY(check_root(r, root, "reduce", e));
  int in = gs_comm_enter(r, op, src, dst, count, step, 0, false, "reduce", e);
  if (in < 0) return in;
  if (in == 1) {
    if (src != dst && count) r->o.k->copy(r->o.k, dst, src, count * gs_comm_es(r));
    return r->o.k->sync(r->o.k, e);
  }
  return gs_comm_leave(r, reduce_chain(r, src, dst, count, root, st ? st : &local, e), e);
}

/* The ring's way of each collective, with one signature. */
typedef int (*run_fn)(gs_comm *r, gs_redop op, int root, const void *src, void *dst, size_t count,
                      int64_t step, gs_comm_stats *st, gs_err *e);

static int run_all_reduce(gs_comm *r, gs_redop op, int root, const void *src, void *dst,
                          size_t count, int64_t step, gs_comm_stats *st, gs_err *e) {
  return gs_comm_allreduce_op(r, op, src, dst, count, step, 0, st, e);
}
static int run_reduce_scatter(gs_comm *r, gs_redop op, int root, const void *src, void *dst,
                              size_t count, int64_t step, gs_comm_stats *st, gs_err *e) {
  return gs_comm_reduce_scatter(r, op, src, dst, count, step, st, e);
}
/* the input is this rank's part of src */
static int run_all_gather(gs_comm *r, gs_redop op, int root, const void *src, void *dst,
                          size_t count, int64_t step, gs_comm_stats *st, gs_err *e) {
  size_t off = 0, len;
  if (r) gs_comm_part(count, r->o.world, r->o.rank, &off, &len);
  return gs_comm_all_gather(r, r ? gs_comm_at(r, src, off) : src, dst, count, step, st, e);
}
static int run_broadcast(gs_comm *r, gs_redop op, int root, const void *src, void *dst,
                         size_t count, int64_t step, gs_comm_stats *st, gs_err *e) {
  return gs_comm_broadcast(r, src, dst, count, root, step, st, e);
}
static int run_reduce(gs_comm *r, gs_redop op, int root, const void *src, void *dst,
                      size_t count, int64_t step, gs_comm_stats *st, gs_err *e) {
  return gs_comm_reduce(r, op, src, dst, count, root, step, st, e);
}

static const run_fn runs[] = {
  [GS_COLL_ALL_REDUCE] = run_all_reduce, [GS_COLL_REDUCE_SCATTER] = run_reduce_scatter,
  [GS_COLL_ALL_GATHER] = run_all_gather, [GS_COLL_BROADCAST] = run_broadcast,
  [GS_COLL_REDUCE] = run_reduce,
};

int gs_comm_collective(gs_comm *r, gs_coll c, gs_redop op, int root, const void *src, void *dst,
                       size_t count, int64_t step, gs_comm_stats *st, gs_err *e) {
  if (!gs_coll_of(c)) return GS_FAIL(e, GS_EINVAL, "ring: unknown collective %d", (int)c);
  return runs[c](r, op, root, src, dst, count, step, st, e);
}
