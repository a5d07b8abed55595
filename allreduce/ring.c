/* ring.c: the ring algorithm's functions for its row (comm.h gs_algo_ops):
 * every rank talks to its two neighbours only; a collective of at most
 * small_bytes float32 bytes sends whole vectors around (ring_small.c),
 * anything larger runs the pipelined reduce-scatter + all-gather
 * (ring_pipe.c). Its state is sized here, once, for the largest
 * collective, so nothing is allocated per collective. */
#include <stdlib.h>

#include "allreduce/ring_bufs.h"

/* the messages it holds, before the pair goes */
static void ring_close(gs_comm *r, void *state, bool abort) {
  ring_bufs *s = state;
  if (s->held) {
    for (int i = 0; i < r->o.world; i++) zmq_msg_close(&s->held[i]);
    free(s->held);
    s->held = NULL;
  }
  if (s->hold) {
    for (size_t i = 0; i < s->nhold; i++) zmq_msg_close(&s->hold[i]);
    free(s->hold);
    s->hold = NULL;
  }
}

/* the rest once the pair is gone: its release callbacks write the flags */
static void ring_release(gs_comm *r, void *state) {
  ring_bufs *s = state;
  if (s->scratch) r->o.k->release(r->o.k, s->scratch);
  free(s->flags);
  free(s->sent_seq);
  free(s);
}

static int ring_prepare(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e) {
  const gs_comm_opts *o = &r->o;
  gs_kernels *k = o->k;
  ring_bufs *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", o->rank);
  *state = s;
  for (int p = 0; p < RING_PHASES; p++) s->phase[p] = row->phase[p].wire;
  s->held = calloc((size_t)o->world, sizeof *s->held);
  if (s->held)
    for (int i = 0; i < o->world; i++) zmq_msg_init(&s->held[i]);
  /* flags for every chunk sent zero-copy in one collective of max_count */
  size_t C = gs_ring_chunks(r, o->max_count);
  s->nflags = (size_t)o->world * C;
  s->flags = calloc(s->nflags, sizeof *s->flags);
  s->sent_seq = calloc(s->nflags, sizeof *s->sent_seq);
  s->nhold = C;
  s->hold = calloc(C, sizeof *s->hold);
  if (s->hold)
    for (size_t i = 0; i < C; i++) zmq_msg_init(&s->hold[i]);
  size_t small_elems = r->small_bytes == GS_COMM_NO_SMALL ? 0 : r->small_bytes / sizeof(float);
  if (small_elems > o->max_count) small_elems = o->max_count;
  s->scratch = k->alloc(k, small_elems * gs_comm_es(r) + 64);
  if (!s->held || !s->flags || !s->sent_seq || !s->hold || !s->scratch) {
    k->sync(k, e);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the ring's buffers (%zu elements)",
                   o->rank, o->max_count);
  }
  return GS_OK;
}

static int ring_allreduce(gs_comm *r, void *state, const void *src, void *dst, size_t n,
                          gs_comm_stats *st, gs_err *e) {
  /* by float32 size, so fp16 and fp32 pick the same path (and half the
   * bytes) */
  if (r->small_bytes != GS_COMM_NO_SMALL && n * sizeof(float) <= r->small_bytes)
    return gs_ring_small(r, src, dst, n, st, e);
  return gs_ring_phases(r, src, dst, n, GS_RING_RS | GS_RING_AG, st, e);
}

const gs_algo_ops gs_algo_ring = {
  .prepare = ring_prepare,
  .allreduce = ring_allreduce,
  .close = ring_close,
  .release = ring_release,
};
