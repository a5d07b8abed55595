/* whole.c: what recursive doubling (rd.c) and the direct exchange
 * (direct.c) share: their state over the mesh (mesh.c), the rows' hooks
 * for the handshake, connect, failure and close, and whole buffers sent to
 * and taken from one peer, each checked against the round it belongs to
 * and summed or copied through gs_comm_combine / gs_comm_take. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "allreduce/mesh.h"

static void msg_where(const void *ctx, char *buf, size_t cap) {
  const gs_whole_where *c = ctx;
  char what[64];
  c->say(c, what, sizeof what);
  snprintf(buf, cap, "%s of bucket %d, step %" PRId64, what, c->r->cur_bucket, c->r->cur_step);
}

int gs_whole_send(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc,
                  const void *data, size_t n, gs_comm_stats *st, gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Chunk ch;
  gs_comm_want w = {.phase = wc->phase, .ring_step = wc->round, .segment = r->o.rank,
                    .chunk = 0, .offset = 0, .count = n};
  gs_comm_chunk_env(r, &w, &env, &ch);
  gs_pair_where lw = {.fn = msg_where, .ctx = wc};
  return gs_mesh_send(s->mesh, peer, &env, data, n * gs_dtype_size(r->o.wire), &st->bytes_sent,
                      &lw, e);
}

int gs_whole_recv(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc, size_t n,
                  gs_wire_msg *m, gs_comm_stats *st, gs_err *e) {
  gs_pair_where lw = {.fn = msg_where, .ctx = wc};
  int rc = gs_mesh_recv(s->mesh, peer, r->spin_now, m, &st->bytes_recv, &lw, e);
  if (rc < 0) return rc;
  char wb[160];
  msg_where(wc, wb, sizeof wb);
  const Gradsync__Envelope *env = m->env;
  if (env->body_case != GRADSYNC__ENVELOPE__BODY_CHUNK || !env->chunk)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %d where a buffer was "
                   "expected, in %s", r->o.rank, gs_wire_kind(env), peer, wb);
  const Gradsync__Chunk *c = env->chunk;
  if (c->total != r->cur_total)
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d all-reduces %" PRIu64 " elements and rank "
                   "%d %zu, in %s: every rank must pass the same count", r->o.rank, peer,
                   (uint64_t)c->total, r->o.rank, r->cur_total, wb);
  if (c->redop != (uint32_t)r->cur_op)
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d reduces with op %u and rank %d with op %u "
                   "(0 sum, 2 prod, 3 min, 4 max), in %s: every rank must pass the same op",
                   r->o.rank, peer, c->redop, r->o.rank, (unsigned)r->cur_op, wb);
  gs_dtype dt = gs_wire_dtype(c->dtype);
  if (c->step != (uint64_t)r->cur_step || c->bucket != (uint32_t)r->cur_bucket ||
      c->phase != (uint32_t)wc->phase || c->ring_step != (uint32_t)wc->round ||
      c->segment != (uint32_t)peer || c->offset != 0 || c->count != n || dt != r->o.wire ||
      (int)c->dtype != (int)gs_wire_pbdtype(dt))
    return GS_FAIL(e, GS_EPROTO, "rank %d: unexpected buffer from rank %d in %s: got step %"
                   PRIu64 " bucket %u phase %u round %u count %" PRIu64 " %s (ranks out of "
                   "step, or configured differently)", r->o.rank, peer, wb, (uint64_t)c->step,
                   c->bucket, c->phase, c->ring_step + 1, (uint64_t)c->count, gs_dtype_name(dt));
  size_t got = m->has_payload ? zmq_msg_size(&m->payload) : 0;
  size_t want = n * gs_dtype_size(r->o.wire);
  if (got != want)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a buffer from rank %d in %s holds %zu bytes; its "
                   "header promises %zu: truncated or corrupt", r->o.rank, peer, wb, got, want);
  return GS_OK;
}

int gs_whole_send_dst(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc, void *dst,
                      size_t n, gs_comm_stats *st, gs_err *e) {
  if (!gs_dtype_lp(r->o.wire)) return gs_whole_send(r, s, peer, wc, dst, n, st, e);
  double a = gs_now();
  gs_comm_round(r, dst, n);
  st->reduce_s += gs_now() - a;
  return gs_whole_send(r, s, peer, wc, r->stage, n, st, e);
}

int gs_whole_take(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc, void *dst,
                  size_t n, bool copy, gs_comm_stats *st, gs_err *e) {
  gs_wire_msg m;
  int rc = gs_whole_recv(r, s, peer, wc, n, &m, st, e);
  if (rc == GS_OK && n) {
    double a = gs_now();
    if (copy) gs_comm_take(r, n, dst, gs_whole_payload(&m));
    else gs_comm_combine(r, n, dst, gs_whole_payload(&m));
    st->reduce_s += gs_now() - a;
  }
  gs_wire_msg_close(&m);
  return rc;
}


int gs_whole_prepare(gs_comm *r, const gs_algo_row *row, bool own, void **state, gs_err *e) {
  const gs_comm_opts *o = &r->o;
  gs_kernels *k = o->k;
  size_t ws = gs_dtype_size(o->wire);
  whole_state *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the mesh", o->rank);
  *state = s;
  s->phase = (int)row->phase[0].wire;
  s->got = calloc((size_t)o->world, sizeof *s->got);
  if (own) s->own = k->alloc(k, o->max_count * gs_comm_es(r) + 64);
  if (!s->got || (own && !s->own)) {
    k->sync(k, e);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the mesh's buffers (%zu elements)",
                   o->rank, o->max_count);
  }
  size_t max_payload = o->max_count > 0 ? o->max_count * ws : ws;
  return gs_mesh_open(r, gs_pair_zmq_context(r->pair), max_payload, &s->mesh, e);
}

void gs_whole_hello(const void *state, int origin, Gradsync__RingHello *h) {
  const whole_state *s = state;
  if (s->mesh) gs_mesh_hello(s->mesh, origin, h);
}

void gs_whole_heard(void *state, int origin, const Gradsync__RingHello *h) {
  whole_state *s = state;
  if (s->mesh) gs_mesh_heard(s->mesh, origin, h);
}

int gs_whole_connect(gs_comm *r, void *state, const char *const *endpoints, gs_err *e) {
  whole_state *s = state;
  return gs_mesh_connect(s->mesh, endpoints, r->o.job, e);
}

void gs_whole_tell(void *state, const char *msg) { gs_mesh_tell(((whole_state *)state)->mesh, msg); }

void gs_whole_interrupt(void *state) { gs_mesh_interrupt(((whole_state *)state)->mesh); }

void gs_whole_close(gs_comm *r, void *state, bool abort) {
  whole_state *s = state;
  gs_mesh_close(s->mesh, abort);
  if (s->got) {
    for (int i = 0; i < r->o.world; i++) gs_wire_msg_close(&s->got[i]);
    free(s->got);
  }
  if (s->own) r->o.k->release(r->o.k, s->own);
  free(s);
}
