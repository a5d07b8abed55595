/* direct.c: the direct exchange ("direct", a row of algos.c's table), its
 * row's functions: one round over the mesh (whole.c, mesh.c), in which every
 * rank sends its buffer to every other rank and sums the N buffers in rank
 * order 0..N-1, the same order on every rank:
 *
 *   rank r    send v_r to each rank != r;  dst = ((v_0 + v_1) + v_2) + ...
 *
 * Under a 16-bit wire the ranks sum the buffers as they travelled
 * (rounded to the wire dtype), and the result is rounded once more, as the
 * ring's owner keeps the rounded value. */
#include <stdio.h>

#include "allreduce/mesh.h"

static void direct_where(const gs_whole_where *c, char *buf, size_t cap) {
  snprintf(buf, cap, "the direct exchange");
}

static int direct_allreduce(gs_comm *r, void *state, const void *src, void *dst, size_t n,
                            gs_comm_stats *st, gs_err *e) {
  whole_state *s = state;
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const bool lp = gs_dtype_lp(w);
  const size_t es = gs_comm_es(r);
  const double t0 = gs_now();
  gs_whole_where wc = {.r = r, .phase = s->phase, .round = 0, .rounds = 0,
                       .say = direct_where};
  const void *own = src;
  if (lp) {
    double a = gs_now();
    k->convert(k, w, r->stage, GS_F32, src, n);
    st->reduce_s += gs_now() - a;
    own = r->stage;
  } else if (src == dst && me != 0 && n) {
    k->copy(k, s->own, src, n * es); /* dst takes v_0 first */
    own = s->own;
  }
  /* each rank starts with its right neighbour, so no rank is everyone's first */
  for (int i = 1; i < N; i++) GS_TRY(gs_whole_send(r, s, (me + i) % N, &wc, own, n, st, e));
  for (int i = 1; i < N; i++) {
    int p = gs_comm_mod(me - i, N);
    GS_TRY(gs_whole_recv(r, s, p, &wc, n, &s->got[p], st, e));
  }
  double a = gs_now();
  for (int i = 0; i < N && n; i++) {
    const void *v = i == me ? own : gs_whole_payload(&s->got[i]);
    if (i > 0) gs_comm_combine(r, n, dst, v);
    else if (lp) k->convert(k, GS_F32, dst, w, v, n);
    else if (v != dst) k->copy(k, dst, v, n * es);
  }
  if (lp && n) gs_comm_round(r, dst, n);
  st->reduce_s += gs_now() - a;
  for (int i = 0; i < N; i++) gs_wire_msg_close(&s->got[i]);
  gs_comm_span(r, "direct exchange", t0, gs_now());
  return GS_OK;
}

static int direct_prepare(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e) {
  return gs_whole_prepare(r, row, true, state, e);
}

const gs_algo_ops gs_algo_direct = {
  .prepare = direct_prepare,
  .hello = gs_whole_hello,
  .heard = gs_whole_heard,
  .connect = gs_whole_connect,
  .allreduce = direct_allreduce,
  .tell = gs_whole_tell,
  .interrupt = gs_whole_interrupt,
  .close = gs_whole_close,
};
