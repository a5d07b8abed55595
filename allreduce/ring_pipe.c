/* ring_pipe.c: the ring algorithm's pipelined reduce-scatter + all-gather
 * over ZeroMQ (allreduce.h), of float32 buffers (the collective
 * benchmark's fp64 and int32 too, and its other ops).
 *
 * Every rank PULLs from its left neighbour (rank - 1) on a socket it bound
 * in gs_comm_prepare, and PUSHes to its right neighbour (rank + 1). The
 * buffer is cut into N segments (s0 .. s3 below) and every segment into C
 * chunks; a segment first leaves the rank with its number and is added to
 * at every hop, so segment j is summed in the fixed order
 * ((g_j + g_j+1) + g_j+2) + ... whatever the timing (determinism).
 *
 *                     rank 0
 *                   ^        \
 *                  /          v
 *             rank 3          rank 1     each rank sends to its right
 *                  ^          /
 *                   \        v
 *                     rank 2
 *
 *   N = 4       rank 0        rank 1        rank 2        rank 3
 *   RS 0  send  s0            s1            s2            s3
 *         recv  s3 +=         s0 +=         s1 +=         s2 +=
 *   RS 1  send  s3            s0            s1            s2
 *         recv  s2 +=         s3 +=         s0 +=         s1 +=
 *   RS 2  send  s2            s3            s0            s1
 *         recv  s1 += (done)  s2 += (done)  s3 += (done)  s0 += (done)
 *   AG 0  send  s1            s2            s3            s0
 *         recv  s0 =          s1 =          s2 =          s3 =
 *   AG 1  send  s0 (fwd)      s1 (fwd)      s2 (fwd)      s3 (fwd)
 *         recv  s3 =          s0 =          s1 =          s2 =
 *   AG 2  send  s3 (fwd)      s0 (fwd)      s1 (fwd)      s2 (fwd)
 *         recv  s2 =          s3 =          s0 =          s1 =
 *
 * Reduce-scatter step k: rank r sends segment r-k and adds what it receives
 * into segment r-k-1; after N-1 steps rank r holds the complete sum of
 * segment r+1. All-gather step k: rank r sends segment r+1-k and copies
 * what it receives into segment r-k; from step 1 on, what it sends is what
 * it has just received, so it forwards the received ZeroMQ message itself.
 *
 * Chunks make it a pipeline (Gloo's ring_chunked, with more in flight).
 * The stream on each pair is RS0.c0 RS0.c1 .. RS0.c(C-1) RS1.c0 .. AG(N-2).c(C-1);
 * message k depends only on message k - C (the same chunk one ring step
 * earlier) having been received and added. Message k leaves once message
 * k - W has been handled (W = inflight <= C), so W chunks are in flight on
 * every link: the ZeroMQ I/O thread moves one while this thread adds the
 * previous one, and what leaves was written a moment ago (still in cache,
 * which a whole segment in flight would not be). On loopback TCP the
 * kernel's two copies per byte are most of the cost, so the defaults (512
 * KiB chunks, 2 in flight, the kernel's own socket buffer sizing) keep
 * both cores busy without pushing chunks out of cache.
 *
 * Zero copies of our own: chunks leave from the caller's buffer (or the
 * wire-dtype staging buffer) by zmq_msg_init_data; a release callback
 * clears the chunk's in-flight flag, and a region still held by ZeroMQ is
 * never overwritten (the all-gather writes where reduce-scatter sent) nor
 * handed back to the caller (a collective returns when every flag is
 * clear). Received chunks are added straight out of the zmq_msg. Nothing is
 * allocated per collective: flags, staging, the header arena and scratch
 * are sized in prepare.
 *
 * Every chunk carries a gradsync Envelope with a Chunk header (step,
 * bucket, phase, ring step, segment, chunk, offset, count, dtype, total),
 * compared with what this rank expects; anything else is an error naming
 * the neighbour. The sockets, every wait's timeout, the checked receive
 * and the relay of a failure around the ring (so every rank stops with the
 * cause) are proto/'s gs_pair; the handshake is the communicator's
 * (comm_hello.c).
 *
 * Other reductions (prod, min, max) and types (fp64, int32: the wire is
 * the buffer's own type) take the same paths; only the per-chunk math is
 * gs_comm_combine's other branch, so the order, and the bits, stay fixed.
 *
 * Mixed precision: chunks travel in the wire dtype. Each hop adds the
 * received fp16/bf16 partial sum into its own fp32 values and rounds once
 * to the wire dtype for the next hop; the owner keeps the rounded value, so
 * every rank ends with the same bits.
 */
#include <stdlib.h>
#include <string.h>

#include "allreduce/ring_bufs.h"

static void chunk_range(size_t seglen, size_t C, size_t c, size_t *off, size_t *len) {
  size_t q = seglen / C, rem = seglen % C;
  *len = q + (c < rem);
  *off = c * q + (c < rem ? c : rem);
}


size_t gs_ring_chunks(const gs_comm *r, size_t n) {
  size_t ce = r->chunk_bytes / gs_dtype_size(r->o.wire);
  if (ce == 0) ce = 1;
  size_t segmax = (n + (size_t)r->o.world - 1) / (size_t)r->o.world;
  return segmax ? (segmax + ce - 1) / ce : 1;
}

/* The k-th message of a collective's stream, as this rank sends it
 * (send) or receives it (!send). */
typedef struct ring_geom {
  int N, me;
  size_t n, C, per;
  int rot;   /* data segment = ring segment - rot (a phase alone: rank r owns segment r) */
  int rs, ag; /* the two phases' numbers on the wire (the ring's row's) */
} ring_geom;

static void geom(const ring_geom *g, size_t k, bool send, gs_comm_want *w) {
  w->phase = k < g->per ? g->rs : g->ag;
  w->ring_step = (int)((k % g->per) / g->C);
  w->chunk = (int)(k % g->C);
  int s = w->ring_step;
  w->segment = w->phase == g->rs ? gs_comm_mod(g->me - s - !send, g->N)
                                  : gs_comm_mod(g->me + send - s, g->N);
  size_t so, sl, co, cl;
  gs_part_range(g->n, g->N, gs_comm_mod(w->segment - g->rot, g->N), &so, &sl);
  chunk_range(sl, g->C, (size_t)w->chunk, &co, &cl);
  w->offset = so + co;
  w->count = cl;
}

int gs_ring_phases(gs_comm *r, const void *src, void *dst, size_t n, int phases,
                   gs_comm_stats *st, gs_err *e) {
  gs_kernels *k = r->o.k;
  ring_bufs *rs = gs_ring_state(r);
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const size_t ws = gs_dtype_size(w), es = gs_comm_es(r);
  const bool lp = gs_dtype_lp(w);
  const size_t C = gs_ring_chunks(r, n);
  const size_t per = (size_t)(N - 1) * C; /* messages per phase */
  /* the messages [k0, M) of the all-reduce's stream; send k of them */
  const size_t k0 = phases & GS_RING_RS ? 0 : per, M = phases & GS_RING_AG ? 2 * per : per;
  const size_t W = r->inflight > 0 && (size_t)r->inflight < C ? (size_t)r->inflight : C;
  const ring_geom g = {N, me, n, C, per, phases == (GS_RING_RS | GS_RING_AG) ? 0 : 1,
                       (int)rs->phase[RING_RS], (int)rs->phase[RING_AG]};
  uint8_t *stage = r->stage;
  const double t0 = gs_now();
  double t_rs = t0, red = 0;
  int rc = GS_OK;
  if (phases == GS_RING_AG && lp) {
    /* own segment to the wire dtype, kept as the others will hold it */
    size_t so, sl;
    gs_part_range(n, N, me, &so, &sl);
    k->convert(k, w, stage + so * ws, GS_F32, gs_comm_at(r, dst, so), sl);
    k->convert(k, GS_F32, gs_comm_at(r, dst, so), w, stage + so * ws, sl);
  }

  /* Message k leaves once message k - W has been received and handled,
   * so W chunks are in flight on every pair; k >= C also needs message
   * k - C (the same chunk one ring step earlier), which W <= C ensures. */
  for (size_t kk = k0; kk < M + W; kk++) {
    if (kk >= k0 + W) { /* receive and handle message kk - W */
      size_t kr = kk - W;
      gs_comm_want wr;
      geom(&g, kr, false, &wr);
      zmq_msg_t msg;
      rc = gs_comm_recv_chunk(r, &wr, &msg, &st->bytes_recv, e);
      if (rc < 0) {
        zmq_msg_close(&msg);
        return rc;
      }
      void *d = gs_comm_at(r, dst, wr.offset);
      if (wr.phase == g.rs) {
        double a = gs_now();
        const void *p = zmq_msg_data(&msg);
        if (src != dst) k->copy(k, d, gs_comm_at(r, src, wr.offset), wr.count * es);
        gs_comm_combine(r, wr.count, d, p);
        if (lp) {
          /* what the next hop gets; the owner keeps exactly that */
          k->convert(k, w, stage + wr.offset * ws, GS_F32, d, wr.count);
          if (wr.ring_step == N - 2)
            k->convert(k, GS_F32, d, w, stage + wr.offset * ws, wr.count);
        }
        red += gs_now() - a;
        zmq_msg_close(&msg);
        if (kr + 1 == per) t_rs = gs_now();
      } else {
        /* The final value of this chunk holds what this rank sent for it
         * in reduce-scatter step s, so the right neighbour had that
         * message, and every one before: the resend log lets them go
         * before the region they were borrowed from is written. */
        const size_t rs_slot = (size_t)wr.ring_step * C + (size_t)wr.chunk;
        if (g.rot == 0) gs_pair_acked(r->pair, rs->sent_seq[rs_slot]);
        /* reduce-scatter step s sent this very region; ZeroMQ must be done */
        if (!lp) {
          rc = gs_pair_wait_released(r->pair, &rs->flags[rs_slot], "the all-gather", e);
          if (rc < 0) {
            zmq_msg_close(&msg);
            return rc;
          }
        }
        gs_comm_take(r, wr.count, d, zmq_msg_data(&msg));
        if (wr.ring_step < N - 2) zmq_msg_move(&rs->hold[wr.chunk], &msg); /* to forward */
        zmq_msg_close(&msg);
      }
    }
    if (kk < M) { /* send message kk */
      gs_comm_want wn;
      geom(&g, kk, true, &wn);
      const void *data = NULL;
      atomic_uint *flag = NULL;
      zmq_msg_t *fwd = NULL;
      if (wn.phase == g.ag && wn.ring_step > 0) {
        fwd = &rs->hold[wn.chunk]; /* forward what came in one step earlier */
      } else {
        size_t slot = wn.phase == g.rs ? kk : per + (size_t)wn.chunk;
        flag = &rs->flags[slot];
        if (kk < C && lp) { /* our own segment, rounded to the wire dtype */
          double a = gs_now();
          k->convert(k, w, stage + wn.offset * ws, GS_F32, gs_comm_at(r, src, wn.offset),
                     wn.count);
          red += gs_now() - a;
        }
        data = lp ? (const void *)(stage + wn.offset * ws)
                  : gs_comm_at(r, kk < C ? src : dst, wn.offset);
      }
      rc = gs_comm_send_chunk(r, &wn, fwd ? NULL : data, flag, fwd, &st->bytes_sent, e);
      if (rc < 0) return rc;
      if (wn.phase == g.rs) rs->sent_seq[kk] = gs_pair_last_seq(r->pair);
    }
  }
  /* Hand the buffers back only when ZeroMQ holds none of them. */
  GS_TRY(gs_ring_wait_flags(r, per + C, e));
  st->reduce_s += red;
  double t1 = gs_now();
  if (phases & GS_RING_RS) gs_comm_span(r, "reduce-scatter", t0, t_rs);
  if (phases & GS_RING_AG) gs_comm_span(r, "all-gather", phases & GS_RING_RS ? t_rs : t0, t1);
  return GS_OK;
}

int gs_ring_wait_flags(gs_comm *r, size_t n, gs_err *e) {
  ring_bufs *rs = gs_ring_state(r);
  for (size_t i = 0; i < n; i++)
    GS_TRY(gs_pair_wait_released(r->pair, &rs->flags[i], "the end of a collective", e));
  return GS_OK;
}
