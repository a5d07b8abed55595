/* comm_chunk.c: one chunk to the right neighbour and one from the left,
 * with the Chunk header every algorithm over the neighbours (the ring's
 * pipeline and whole-vector path, the chains of ring_coll.c) checks on
 * receipt: a chunk from another step, phase, segment, dtype or op, or
 * with another total count, is an error naming the neighbour and where
 * (a phase by the name its row gives it). */
#include <inttypes.h>
#include <stdio.h>

#include "allreduce/comm.h"

/* Where a chunk belongs, put in words only when an error needs it:
 * "reduce-scatter step 2/3 of bucket 3, step 14". */
typedef struct where_ctx {
  const gs_comm *r;
  const gs_comm_want *w;
  char buf[160];
} where_ctx;

static void chunk_where(const void *ctx, char *buf, size_t cap) {
  const where_ctx *c = ctx;
  snprintf(buf, cap, "%s step %d/%d of bucket %d, step %" PRId64,
           gs_comm_phase_name(c->r, (uint32_t)c->w->phase),
           c->w->ring_step + 1, c->r->o.world - 1, c->r->cur_bucket, c->r->cur_step);
}

static const char *wtext(where_ctx *c) {
  chunk_where(c, c->buf, sizeof c->buf);
  return c->buf;
}

/* Receive the chunk w describes; payload holds its bytes. */
int gs_comm_recv_chunk(gs_comm *r, const gs_comm_want *w, zmq_msg_t *payload, uint64_t *bytes,
                      gs_err *e) {
  where_ctx wc = {.r = r, .w = w};
  gs_pair_where lw = {.fn = chunk_where, .ctx = &wc};
  Gradsync__Envelope *env;
  int rc = gs_pair_recv(r->pair, "chunk", &lw, r->spin_now, &env, payload, bytes, e);
  if (rc < 0) return rc;
  if (env->body_case != GRADSYNC__ENVELOPE__BODY_CHUNK || !env->chunk)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %d (left) where a chunk was "
                   "expected, in %s", r->o.rank, gs_wire_kind(env), r->left, wtext(&wc));
  const Gradsync__Chunk *c = env->chunk;
  gs_dtype dt = gs_wire_dtype(c->dtype);
  if (c->total != r->cur_total)
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d (left) all-reduces %" PRIu64 " elements "
                   "and rank %d %zu, in %s: every rank must pass the same count", r->o.rank,
                   r->left, (uint64_t)c->total, r->o.rank, r->cur_total, wtext(&wc));
  if (c->redop != (uint32_t)r->cur_op)
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d (left) reduces with op %u and rank %d "
                   "with op %u (0 sum, 2 prod, 3 min, 4 max), in %s: every rank must pass the "
                   "same op", r->o.rank, r->left, c->redop, r->o.rank, (unsigned)r->cur_op,
                   wtext(&wc));
  if (c->step != (uint64_t)r->cur_step || c->bucket != (uint32_t)r->cur_bucket ||
      c->phase != (uint32_t)w->phase || c->ring_step != (uint32_t)w->ring_step ||
      c->segment != (uint32_t)w->segment || c->chunk != (uint32_t)w->chunk ||
      c->offset != w->offset || c->count != w->count || dt != r->o.wire ||
      (int)c->dtype != (int)gs_wire_pbdtype(dt))
    return GS_FAIL(e, GS_EPROTO, "rank %d: unexpected chunk from rank %d (left) in %s: got "
                   "step %" PRIu64 " bucket %u %s step %u segment %u chunk %u offset %" PRIu64
                   " count %" PRIu64 " %s, expected step %" PRId64 " bucket %d segment %d "
                   "chunk %d offset %zu count %zu %s (ranks out of step, or configured "
                   "differently)", r->o.rank, r->left, wtext(&wc), (uint64_t)c->step, c->bucket,
                   gs_comm_phase_name(r, c->phase), c->ring_step + 1,
                   c->segment, c->chunk, (uint64_t)c->offset, (uint64_t)c->count,
                   gs_dtype_name(dt), r->cur_step, r->cur_bucket, w->segment, w->chunk,
                   w->offset, w->count, gs_dtype_name(r->o.wire));
  size_t want_bytes = w->count * gs_dtype_size(r->o.wire);
  if (zmq_msg_size(payload) != want_bytes)
    return GS_FAIL(e, GS_EPROTO, "rank %d: a chunk from rank %d (left) in %s holds %zu bytes; "
                   "its header promises %zu (%zu x %s): truncated or corrupt", r->o.rank,
                   r->left, wtext(&wc), zmq_msg_size(payload), want_bytes, w->count,
                   gs_dtype_name(r->o.wire));
  return GS_OK;
}

void gs_comm_chunk_env(const gs_comm *r, const gs_comm_want *w, Gradsync__Envelope *env,
                       Gradsync__Chunk *ch) {
  gradsync__chunk__init(ch);
  gs_wire_env(env, r->o.job, (uint32_t)r->o.rank);
  ch->step = (uint64_t)r->cur_step;
  ch->bucket = (uint32_t)r->cur_bucket;
  ch->phase = (uint32_t)w->phase;
  ch->ring_step = (uint32_t)w->ring_step;
  ch->segment = (uint32_t)w->segment;
  ch->chunk = (uint32_t)w->chunk;
  ch->offset = w->offset;
  ch->count = w->count;
  ch->dtype = gs_wire_pbdtype(r->o.wire);
  ch->total = r->cur_total;
  ch->redop = (uint32_t)r->cur_op;
  env->body_case = GRADSYNC__ENVELOPE__BODY_CHUNK;
  env->chunk = ch;
}

int gs_comm_send_chunk(gs_comm *r, const gs_comm_want *w, const void *data, atomic_uint *flag,
                      zmq_msg_t *fwd, uint64_t *sent, gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Chunk ch;
  gs_comm_chunk_env(r, w, &env, &ch);
  where_ctx wc = {.r = r, .w = w};
  gs_pair_where lw = {.fn = chunk_where, .ctx = &wc};
  return gs_pair_send(r->pair, &env, data, w->count * gs_dtype_size(r->o.wire), flag, fwd, sent,
                      &lw, e);
}