/* rd.c: recursive doubling ("rd", a row of algos.c's table), for
 * collectives too small for the ring's 2(N-1) dependent hops to pay: its
 * row's functions. It exchanges whole buffers over the mesh (whole.c, mesh.c) and
 * goes through the gs_kernels table for every sum and conversion.
 *
 * Recursive doubling: log2 N rounds; in round k rank r exchanges
 * its partial sum with rank r ^ 2^k and both add the other's:
 *
 *   N = 4     rank 0       rank 1       rank 2       rank 3
 *   round 0   a <-> b      b <-> a      c <-> d      d <-> c
 *             a+b          a+b          c+d          c+d
 *   round 1   (a+b)<->(c+d)             (c+d)<->(a+b)
 *             (a+b)+(c+d)  (a+b)+(c+d)  (c+d)+(a+b)  (c+d)+(a+b)
 *
 * Partners add the same two operands, and x + y == y + x bit for bit, so
 * every rank ends with the same bits. When N is not a power of two, with
 * P the largest power of two below N and R = N - P, the first 2R ranks
 * pair up before and after (as MPICH does): the even one of each pair
 * sends its buffer to the odd one and drops out, the P remaining ranks
 * (new rank r/2 for the first R odd ones, r - R for the others) run the
 * rounds, and each odd one sends the result back to its even partner:
 *
 *   N = 5 (P = 4, R = 1)
 *   fold in   rank 0 -> rank 1 (a+b)
 *   rounds    ranks 1, 2, 3, 4 as new ranks 0, 1, 2, 3 above
 *   fold out  rank 1 -> rank 0 (the result, copied)
 *
 * Low-precision wire (fp16, bf16): what travels is rounded to the wire
 * dtype, and a rank keeps exactly what it sent (rd rounds its partial sum
 * before each round), so both sides of every add hold the same operands;
 * the result is rounded once more, as the ring's owner keeps the rounded
 * value.
 *
 * Other ops (prod, min, max) and types (fp64, int32) go the same way with
 * gs_comm_combine's math; min and max are commutative bit for bit
 * (gs_reduce_host), as partners need. */
#include <stdio.h>

#include "allreduce/mesh.h"

static void rd_where(const gs_whole_where *c, char *buf, size_t cap) {
  if (c->round == 0) snprintf(buf, cap, "the fold-in of recursive doubling");
  else if (c->round > c->rounds) snprintf(buf, cap, "the fold-out of recursive doubling");
  else snprintf(buf, cap, "recursive doubling round %d/%d", c->round, c->rounds);
}

static int rd_allreduce(gs_comm *r, void *state, const void *src, void *dst, size_t n,
                        gs_comm_stats *st, gs_err *e) {
  whole_state *s = state;
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  int P = 1, rounds = 0;
  while (P * 2 <= N) {
    P *= 2;
    rounds++;
  }
  const int R = N - P;
  const double t0 = gs_now();
  const bool lp = gs_dtype_lp(r->o.wire);
  if (src != dst && n) k->copy(k, dst, src, n * gs_comm_es(r));
  gs_whole_where wc = {.r = r, .phase = s->phase, .round = 0, .rounds = rounds,
                       .say = rd_where};
  int nr; /* the rank among the P, or -1: dropped out */
  int rc = GS_OK;
  if (me < 2 * R) {
    if (me % 2 == 0) {
      rc = gs_whole_send_dst(r, s, me + 1, &wc, dst, n, st, e);
      nr = -1;
    } else {
      if (lp) gs_comm_round(r, dst, n); /* as the partner's was */
      rc = gs_whole_take(r, s, me - 1, &wc, dst, n, false, st, e);
      nr = me / 2;
    }
  } else {
    nr = me - R;
  }
  if (rc < 0) return rc;
  if (nr >= 0) {
    for (int b = 0; b < rounds; b++) {
      int pn = nr ^ (1 << b);
      int peer = pn < R ? 2 * pn + 1 : pn + R;
      wc.round = b + 1;
      GS_TRY(gs_whole_send_dst(r, s, peer, &wc, dst, n, st, e));
      GS_TRY(gs_whole_take(r, s, peer, &wc, dst, n, false, st, e));
    }
    if (lp) gs_comm_round(r, dst, n);
  }
  wc.round = rounds + 1;
  if (me < 2 * R) {
    if (me % 2 == 1)
      rc = gs_whole_send(r, s, me - 1, &wc, lp ? r->stage : (const void *)dst, n, st, e);
    else rc = gs_whole_take(r, s, me + 1, &wc, dst, n, true, st, e);
  }
  gs_comm_span(r, "recursive doubling", t0, gs_now());
  return rc;
}

static int rd_prepare(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e) {
  return gs_whole_prepare(r, row, false, state, e);
}

const gs_algo_ops gs_algo_rd = {
  .prepare = rd_prepare,
  .hello = gs_whole_hello,
  .heard = gs_whole_heard,
  .connect = gs_whole_connect,
  .allreduce = rd_allreduce,
  .tell = gs_whole_tell,
  .interrupt = gs_whole_interrupt,
  .close = gs_whole_close,
};
