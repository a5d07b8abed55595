/* small.c: the latency-bound all-reduces, for collectives too small for
 * the ring's 2(N-1) dependent hops to pay (allreduce.h gs_algo). Both
 * exchange whole buffers over the mesh (mesh.c) and go through the
 * gs_kernels table for every sum and conversion.
 *
 * Recursive doubling ("rd"), log2 N rounds; in round k rank r exchanges
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
 * Direct exchange ("direct"), one round: every rank sends its buffer to
 * every other rank and sums the N buffers in rank order 0..N-1, the same
 * order on every rank:
 *
 *   rank r    send v_r to each rank != r;  dst = ((v_0 + v_1) + v_2) + ...
 *
 * Low-precision wire (fp16, bf16): what travels is rounded to the wire
 * dtype, and a rank keeps exactly what it sent (rd rounds its partial sum
 * before each round; direct sums the rounded buffers), so both sides of
 * every add hold the same operands; the result is rounded once more, as
 * the ring's owner keeps the rounded value.
 *
 * Other ops (prod, min, max) and types (fp64, int32) go the same ways with
 * gs_ring_combine's math; min and max are commutative bit for bit
 * (gs_reduce_host), as rd's partners need. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/ring_internal.h"

const char *gs_algo_name(gs_algo a) {
  switch (a) {
  case GS_ALGO_RING: return "ring";
  case GS_ALGO_RD: return "rd";
  case GS_ALGO_DIRECT: return "direct";
  case GS_ALGO_AUTO: return "auto";
  case GS_ALGO_SHM: return "shm";
  }
  return "unknown";
}

int gs_algo_parse(const char *s) {
  for (int a = GS_ALGO_RING; a <= GS_ALGO_SHM; a++)
    if (s && !strcmp(s, gs_algo_name((gs_algo)a))) return a;
  return -1;
}

gs_algo gs_algo_pick(gs_algo a, size_t count, int world) {
  if (world <= 1) return GS_ALGO_RING;
  if (a == GS_ALGO_AUTO || a == GS_ALGO_SHM)
    return count <= GS_ALGO_AUTO_MAX_BYTES / sizeof(float) ? GS_ALGO_RD : GS_ALGO_RING;
  return a;
}

gs_algo gs_ring_algo(const gs_ring *r, size_t count) {
  if (!r) return GS_ALGO_RING;
  if (gs_shm_on(r) && (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_SHM)) return GS_ALGO_SHM;
  return gs_algo_pick(r->o.algo, count, r->o.world);
}

/* Where a message belongs, for errors: "recursive doubling round 2/3 of
 * bucket 0, step 14". rd's rounds on the wire: 0 the fold-in, 1..rounds,
 * rounds + 1 the fold-out. */
typedef struct where_ctx {
  const gs_ring *r;
  int phase, round, rounds;
} where_ctx;

static void msg_where(const void *ctx, char *buf, size_t cap) {
  const where_ctx *c = ctx;
  char what[64];
  if (c->phase == PH_DIRECT) snprintf(what, sizeof what, "the direct exchange");
  else if (c->round == 0) snprintf(what, sizeof what, "the fold-in of recursive doubling");
  else if (c->round > c->rounds) snprintf(what, sizeof what, "the fold-out of recursive doubling");
  else snprintf(what, sizeof what, "recursive doubling round %d/%d", c->round, c->rounds);
  snprintf(buf, cap, "%s of bucket %d, step %" PRId64, what, c->r->cur_bucket, c->r->cur_step);
}

static int send_whole(gs_ring *r, int peer, const where_ctx *wc, const void *data, size_t n,
                      gs_ring_stats *st, gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Chunk ch = GRADSYNC__CHUNK__INIT;
  gs_wire_env(&env, r->o.job, (uint32_t)r->o.rank);
  ch.step = (uint64_t)r->cur_step;
  ch.bucket = (uint32_t)r->cur_bucket;
  ch.phase = (uint32_t)wc->phase;
  ch.ring_step = (uint32_t)wc->round;
  ch.segment = (uint32_t)r->o.rank;
  ch.count = n;
  ch.dtype = gs_wire_pbdtype(r->o.wire);
  ch.total = r->cur_total;
  ch.redop = (uint32_t)r->cur_op;
  env.body_case = GRADSYNC__ENVELOPE__BODY_CHUNK;
  env.chunk = &ch;
  gs_link_where lw = {.fn = msg_where, .ctx = wc};
  return gs_mesh_send(r->mesh, peer, &env, data, n * gs_dtype_size(r->o.wire), &st->bytes_sent,
                      &lw, e);
}

/* Receive peer's whole buffer for the round wc names into m, checked. */
static int recv_whole(gs_ring *r, int peer, const where_ctx *wc, size_t n, gs_wire_msg *m,
                      gs_ring_stats *st, gs_err *e) {
  gs_link_where lw = {.fn = msg_where, .ctx = wc};
  int rc = gs_mesh_recv(r->mesh, peer, r->spin_now, m, &st->bytes_recv, &lw, e);
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

static const void *payload(gs_wire_msg *m) {
  return m->has_payload ? zmq_msg_data(&m->payload) : NULL;
}

/* dst = dst rounded to the wire dtype (kept in stage too, for sending). */
static void round_wire(gs_ring *r, void *dst, size_t n) {
  gs_kernels *k = r->o.k;
  k->convert(k, r->o.wire, r->stage, GS_F32, dst, n);
  k->convert(k, GS_F32, dst, r->o.wire, r->stage, n);
}

static void span(gs_ring *r, const char *name, double t0) {
  if (r->o.span) r->o.span(r->o.span_ctx, name, r->cur_bucket, t0, gs_now(), 1);
}

/* Send dst (rounded to the wire dtype first) to peer. */
static int send_dst(gs_ring *r, int peer, const where_ctx *wc, void *dst, size_t n,
                    gs_ring_stats *st, gs_err *e) {
  if (!gs_dtype_lp(r->o.wire)) return send_whole(r, peer, wc, dst, n, st, e);
  double a = gs_now();
  round_wire(r, dst, n);
  st->reduce_s += gs_now() - a;
  return send_whole(r, peer, wc, r->stage, n, st, e);
}

/* dst op= peer's buffer (or dst = it, when copy). */
static int take(gs_ring *r, int peer, const where_ctx *wc, void *dst, size_t n, bool copy,
                gs_ring_stats *st, gs_err *e) {
  gs_wire_msg m;
  int rc = recv_whole(r, peer, wc, n, &m, st, e);
  if (rc == GS_OK && n) {
    double a = gs_now();
    if (copy) gs_ring_take(r, n, dst, payload(&m));
    else gs_ring_combine(r, n, dst, payload(&m));
    st->reduce_s += gs_now() - a;
  }
  gs_wire_msg_close(&m);
  return rc;
}

int gs_small_rd(gs_ring *r, const void *src, void *dst, size_t n, gs_ring_stats *st,
                gs_err *e) {
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
  if (src != dst && n) k->copy(k, dst, src, n * gs_ring_es(r));
  where_ctx wc = {.r = r, .phase = PH_RD, .round = 0, .rounds = rounds};
  int nr; /* the rank among the P, or -1: dropped out */
  int rc = GS_OK;
  if (me < 2 * R) {
    if (me % 2 == 0) {
      rc = send_dst(r, me + 1, &wc, dst, n, st, e);
      nr = -1;
    } else {
      if (lp) round_wire(r, dst, n); /* as the partner's was */
      rc = take(r, me - 1, &wc, dst, n, false, st, e);
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
      GS_TRY(send_dst(r, peer, &wc, dst, n, st, e));
      GS_TRY(take(r, peer, &wc, dst, n, false, st, e));
    }
    if (lp) round_wire(r, dst, n);
  }
  wc.round = rounds + 1;
  if (me < 2 * R) {
    if (me % 2 == 1) rc = send_whole(r, me - 1, &wc, lp ? r->stage : (const void *)dst, n, st,
                                     e);
    else rc = take(r, me + 1, &wc, dst, n, true, st, e);
  }
  span(r, "recursive doubling", t0);
  return rc;
}

int gs_small_direct(gs_ring *r, const void *src, void *dst, size_t n, gs_ring_stats *st,
                    gs_err *e) {
  gs_kernels *k = r->o.k;
  const int N = r->o.world, me = r->o.rank;
  const gs_dtype w = r->o.wire;
  const bool lp = gs_dtype_lp(w);
  const size_t es = gs_ring_es(r);
  const double t0 = gs_now();
  where_ctx wc = {.r = r, .phase = PH_DIRECT, .round = 0, .rounds = 0};
  const void *own = src;
  if (lp) {
    double a = gs_now();
    k->convert(k, w, r->stage, GS_F32, src, n);
    st->reduce_s += gs_now() - a;
    own = r->stage;
  } else if (src == dst && me != 0 && n) {
    k->copy(k, r->own, src, n * es); /* dst takes v_0 first */
    own = r->own;
  }
  /* each rank starts with its right neighbour, so no rank is everyone's first */
  for (int i = 1; i < N; i++) GS_TRY(send_whole(r, (me + i) % N, &wc, own, n, st, e));
  for (int i = 1; i < N; i++) {
    int p = gs_ring_mod(me - i, N);
    GS_TRY(recv_whole(r, p, &wc, n, &r->got[p], st, e));
  }
  double a = gs_now();
  for (int i = 0; i < N && n; i++) {
    const void *v = i == me ? own : payload(&r->got[i]);
    if (i > 0) gs_ring_combine(r, n, dst, v);
    else if (lp) k->convert(k, GS_F32, dst, w, v, n);
    else if (v != dst) k->copy(k, dst, v, n * es);
  }
  if (lp && n) round_wire(r, dst, n);
  st->reduce_s += gs_now() - a;
  for (int i = 0; i < N; i++) gs_wire_msg_close(&r->got[i]);
  span(r, "direct exchange", t0);
  return GS_OK;
}

int gs_small_prepare(gs_ring *r, gs_err *e) {
  const gs_ring_opts *o = &r->o;
  if (o->algo == GS_ALGO_RING || o->world == 1) return GS_OK;
  if (o->algo != GS_ALGO_RD && o->algo != GS_ALGO_DIRECT && o->algo != GS_ALGO_AUTO &&
      o->algo != GS_ALGO_SHM)
    return GS_FAIL(e, GS_EINVAL, "rank %d: ring: unknown algorithm %d", o->rank, (int)o->algo);
  gs_kernels *k = o->k;
  size_t ws = gs_dtype_size(o->wire);
  r->got = calloc((size_t)o->world, sizeof *r->got);
  if (o->algo == GS_ALGO_DIRECT) r->own = k->alloc(k, o->max_count * gs_ring_es(r) + 64);
  if (!r->got || (o->algo == GS_ALGO_DIRECT && !r->own)) {
    k->sync(k, e);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the mesh's buffers (%zu elements)",
                   o->rank, o->max_count);
  }
  size_t max_payload = o->max_count > 0 ? o->max_count * ws : ws;
  return gs_mesh_open(r, gs_link_zmq_context(r->link), max_payload, &r->mesh, r->mesh_ep, e);
}

/* Rank i's mesh socket is bound where its ring socket is, so it is reached
 * at the host of the ring endpoint the launcher published (which may
 * differ from the one the rank wrote, behind a wildcard bind) and the port
 * of the mesh endpoint the handshake brought. */
static void mesh_address(const char *ring_ep, const char *mesh_ep, char out[GS_ENDPOINT_MAX]) {
  const char *rc = ring_ep ? strrchr(ring_ep, ':') : NULL, *mc = strrchr(mesh_ep, ':');
  if (!rc || !mc || strncmp(ring_ep, "tcp://", 6) || rc < ring_ep + 6)
    snprintf(out, GS_ENDPOINT_MAX, "%s", mesh_ep);
  else
    snprintf(out, GS_ENDPOINT_MAX, "%.*s%s", (int)(rc - ring_ep), ring_ep, mc);
}

int gs_small_connect(gs_ring *r, const char *const *endpoints, gs_err *e) {
  if (!r->mesh) return GS_OK;
  int N = r->o.world;
  char (*addr)[GS_ENDPOINT_MAX] = calloc((size_t)N, sizeof *addr);
  const char **eps = calloc((size_t)N, sizeof *eps);
  int rc = GS_OK;
  if (!addr || !eps) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", r->o.rank);
  } else {
    for (int i = 0; i < N; i++) {
      if (r->cfgs[i].mesh_ep[0])
        mesh_address(endpoints ? endpoints[i] : NULL, r->cfgs[i].mesh_ep, addr[i]);
      eps[i] = addr[i];
    }
    rc = gs_mesh_connect(r->mesh, eps, r->o.job, e);
  }
  free(addr);
  free(eps);
  return rc;
}

void gs_small_free(gs_ring *r, bool abort) {
  gs_mesh_close(r->mesh, abort);
  r->mesh = NULL;
  if (r->got) {
    for (int i = 0; i < r->o.world; i++) gs_wire_msg_close(&r->got[i]);
    free(r->got);
    r->got = NULL;
  }
  if (r->own) r->o.k->release(r->o.k, r->own);
  r->own = NULL;
}
