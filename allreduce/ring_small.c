/* ring_small.c: the ring algorithm's path for small collectives (<=
 * small_bytes): the ring's 2(N-1) dependent hops are pure latency, so
 * every rank instead sends its whole vector around the ring (N-1 hops) and
 * sums the N vectors locally in rank order, which again gives every rank
 * the same bits. */
#include <string.h>

#include "allreduce/ring_bufs.h"

int gs_ring_small(gs_comm *r, const void *src, void *dst, size_t n, gs_comm_stats *st,
                  gs_err *e) {
  gs_kernels *k = r->o.k;
  ring_bufs *rs = gs_ring_state(r);
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const bool lp = gs_dtype_lp(w);
  const size_t es = gs_comm_es(r);
  const double t0 = gs_now();
  double red = 0;
  const void *own = src;
  if (lp) {
    double a = gs_now();
    k->convert(k, w, r->stage, GS_F32, src, n);
    red += gs_now() - a;
    own = r->stage;
  }
  const int ph = gs_ring_phase(r, RING_SMALL);
  gs_comm_want wt = {.phase = ph, .ring_step = 0, .segment = me, .chunk = 0, .offset = 0,
             .count = n};
  int rc = gs_comm_send_chunk(r, &wt, own, NULL, NULL, &st->bytes_sent, e);
  if (rc < 0) return rc;
  for (int s = 0; s < N - 1; s++) {
    int origin = gs_comm_mod(me - 1 - s, N);
    gs_comm_want wr = {.phase = ph, .ring_step = s, .segment = origin, .chunk = 0, .offset = 0,
               .count = n};
    zmq_msg_close(&rs->held[origin]);
    rc = gs_comm_recv_chunk(r, &wr, &rs->held[origin], &st->bytes_recv, e);
    if (rc < 0) return rc;
    if (s < N - 2) {
      zmq_msg_t fwd;
      zmq_msg_init(&fwd);
      zmq_msg_copy(&fwd, &rs->held[origin]);
      wr.ring_step = s + 1;
      rc = gs_comm_send_chunk(r, &wr, NULL, NULL, &fwd, &st->bytes_sent, e);
      zmq_msg_close(&fwd);
      if (rc < 0) return rc;
    }
  }
  /* Sum in rank order on every rank: the same bits everywhere. */
  double a = gs_now();
  if (!lp) {
    if (src == dst && me != 0) {
      k->copy(k, rs->scratch, dst, n * es);
      own = rs->scratch;
    }
    for (int i = 0; i < N; i++) {
      const void *v = i == me ? own : zmq_msg_data(&rs->held[i]);
      if (i == 0) {
        if (v != dst) k->copy(k, dst, v, n * es);
      } else {
        gs_comm_combine(r, n, dst, v);
      }
    }
  } else {
    for (int i = 0; i < N; i++) {
      const void *v = i == me ? own : zmq_msg_data(&rs->held[i]);
      if (i == 0) k->convert(k, GS_F32, dst, w, v, n);
      else gs_comm_combine(r, n, dst, v);
    }
    /* the sum travels no further, but round it as the ring's owner does */
    gs_comm_round(r, dst, n);
  }
  red += gs_now() - a;
  for (int i = 0; i < N; i++) {
    zmq_msg_close(&rs->held[i]);
    zmq_msg_init(&rs->held[i]);
  }
  st->reduce_s += red;
  double t1 = gs_now();
  gs_comm_span(r, "all-gather", t0, t1);
  return GS_OK;
}
