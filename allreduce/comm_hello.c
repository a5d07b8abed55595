/* comm_hello.c: connecting the ring, and the handshake before the first
 * collective: every rank's configuration (world, largest collective, wire
 * dtype, chunk and small-message sizes, bucket plan, algorithm) travels
 * once around the ring (round i: rank r forwards origin r - i), so every
 * rank compares every configuration and fails alike, naming each rank's
 * value, on a mismatch instead of hanging or silently corrupting
 * (baidu-allreduce exchanges buffer lengths first for the same reason).
 * What an algorithm publishes (a socket's endpoint, a host key) travels
 * with it through the algorithm's hello / heard, and every used algorithm
 * connects once the configurations agree. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "allreduce/comm.h"

static void my_cfg(const gs_comm *r, hello_cfg *c) {
  c->world = (uint32_t)r->o.world;
  c->count = r->o.max_count;
  c->dtype = (uint32_t)r->o.wire;
  c->chunk_bytes = r->chunk_bytes;
  c->small_bytes = r->small_bytes;
  c->nbuckets = r->o.nbuckets;
  c->plan_hash = r->o.plan_hash;
  c->sum_only = r->o.sum_only;
  c->algo = (uint32_t)r->o.algo;
}

/* Field f of a configuration, as a number. */
static uint64_t cfg_field(const hello_cfg *c, int f) {
  switch (f) {
  case 0: return c->world;
  case 1: return c->count;
  case 2: return c->dtype;
  case 3: return c->nbuckets;
  case 4: return c->plan_hash;
  case 5: return c->chunk_bytes;
  case 6: return c->small_bytes;
  case 7: return c->sum_only;
  default: return c->algo;
  }
}

/* Compare every rank's configuration; the message lists each rank's value
 * of the first field that differs (every rank builds the same text). */
static int compare_cfgs(gs_comm *r, gs_err *e) {
  static const char *what[] = {"the world size", "the buffer length (elements)", "the wire dtype",
                               "the number of buckets", "the bucket plan (offsets and sizes)",
                               "the chunk size", "the small-message threshold",
                               "the collective-benchmark mode", "the algorithm"};
  static const char *hint[] = {" (launch every rank with the same --world)",
                               " (every rank must build the same model)",
                               " (use the same --precision everywhere)",
                               " (use the same bucket sizes everywhere)",
                               " (use the same bucket sizes everywhere)",
                               " (GS_RING_CHUNK must be the same on every rank)",
                               " (GS_RING_SMALL must be the same on every rank)", "",
                               " (use the same --algo everywhere)"};
  int N = r->o.world;
  const hello_cfg *c = r->cfgs;
  for (int f = 0; f < 9; f++) {
    bool differs = false;
    for (int i = 1; i < N; i++) differs |= cfg_field(&c[i], f) != cfg_field(&c[0], f);
    if (!differs) continue;
    char list[700] = "";
    size_t len = 0;
    for (int i = 0; i < N && len < sizeof list - 48; i++) {
      char v[64];
      uint64_t x = cfg_field(&c[i], f);
      if (f == 2) snprintf(v, sizeof v, "%s", gs_dtype_name((gs_dtype)x));
      else if (f == 4) snprintf(v, sizeof v, "%016" PRIx64, x);
      else if (f == 7) snprintf(v, sizeof v, "%s", x ? "sum-only" : "training");
      else if (f == 8) snprintf(v, sizeof v, "%s", gs_algo_name((gs_algo)x));
      else snprintf(v, sizeof v, "%" PRIu64, x);
      len += (size_t)snprintf(list + len, sizeof list - len, "%s rank %d: %s", i ? "," : "", i, v);
    }
    return GS_FAIL(e, GS_EMISMATCH, "rank %d: ranks disagree on %s:%s%s", r->o.rank, what[f],
                   list, hint[f]);
  }
  return GS_OK;
}

/* the handshake's place, for errors */
static void hello_where(const void *ctx, char *buf, size_t cap) { snprintf(buf, cap, "%s", (const char *)ctx); }

static int hello(gs_comm *r, const char *const *endpoints, gs_err *e) {
  int N = r->o.world, rc;

  /* Handshake: N-1 rounds; in round i rank r forwards the configuration of
   * rank r-i and receives that of rank r-1-i. */
  memset(r->cfgs, 0, (size_t)N * sizeof *r->cfgs);
  my_cfg(r, &r->cfgs[r->o.rank]);
  uint64_t bytes = 0;
  for (int i = 0; i < N - 1; i++) {
    int origin = gs_comm_mod(r->o.rank - i, N), from = gs_comm_mod(r->o.rank - 1 - i, N);
    const hello_cfg *c = &r->cfgs[origin];
    Gradsync__Envelope env;
    Gradsync__RingHello h = GRADSYNC__RING_HELLO__INIT;
    gs_wire_env(&env, r->o.job, (uint32_t)r->o.rank);
    h.origin = (uint32_t)origin;
    h.round = (uint32_t)i;
    h.world = c->world;
    h.count = c->count;
    h.dtype = gs_wire_pbdtype((gs_dtype)c->dtype);
    h.chunk_bytes = c->chunk_bytes;
    h.small_bytes = c->small_bytes;
    h.nbuckets = c->nbuckets;
    h.plan_hash = c->plan_hash;
    h.sum_only = c->sum_only;
    h.algo = c->algo;
    for (int a = 0; a < r->nrows; a++)
      if (r->state[a] && r->rows[a].ops->hello) r->rows[a].ops->hello(r->state[a], origin, &h);
    env.body_case = GRADSYNC__ENVELOPE__BODY_RING_HELLO;
    env.ring_hello = &h;
    char ctxmsg[96];
    snprintf(ctxmsg, sizeof ctxmsg, "the handshake (round %d/%d)", i + 1, N - 1);
    gs_pair_where wc = {.fn = hello_where, .ctx = ctxmsg};
    rc = gs_pair_send(r->pair, &env, NULL, 0, NULL, NULL, &bytes, &wc, e);
    if (rc < 0) return gs_comm_fail(r, e, rc);
    Gradsync__Envelope *got;
    zmq_msg_t payload;
    rc = gs_pair_recv(r->pair, "handshake", &wc, false, &got, &payload, &bytes, e);
    bool has_payload = zmq_msg_size(&payload) > 0;
    zmq_msg_close(&payload);
    if (rc < 0) return gs_comm_fail(r, e, rc);
    const Gradsync__RingHello *g = got->ring_hello;
    if (got->body_case != GRADSYNC__ENVELOPE__BODY_RING_HELLO || !g || has_payload)
      return gs_comm_fail(r, e, GS_FAIL(e, GS_EPROTO, "rank %d: a %s message from rank %d (left) "
                                        "during %s, where a ring hello was expected", r->o.rank,
                                        gs_wire_kind(got), r->left, ctxmsg));
    if (g->round != (uint32_t)i || g->origin != (uint32_t)from)
      return gs_comm_fail(r, e, GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d (left) sent the "
                                        "configuration of rank %u in round %u; expected rank "
                                        "%d's in round %d (do the ranks agree on the world size? "
                                        "world here: %d)", r->o.rank, r->left, g->origin,
                                        g->round + 1, from, i + 1, N));
    hello_cfg *d = &r->cfgs[from];
    d->world = g->world;
    d->count = g->count;
    d->dtype = (uint32_t)gs_wire_dtype(g->dtype);
    d->chunk_bytes = g->chunk_bytes;
    d->small_bytes = g->small_bytes;
    d->nbuckets = g->nbuckets;
    d->plan_hash = g->plan_hash;
    d->sum_only = g->sum_only;
    d->algo = g->algo;
    for (int a = 0; a < r->nrows; a++)
      if (r->state[a] && r->rows[a].ops->heard) r->rows[a].ops->heard(r->state[a], from, g);
  }
  rc = compare_cfgs(r, e);
  /* Every rank found the same mismatch: nobody needs to be told. */
  if (rc < 0) {
    r->broken = true;
    gs_pair_told(r->pair);
    return rc;
  }
  for (int a = 0; rc == GS_OK && a < r->nrows; a++)
    if (r->state[a] && r->rows[a].ops->connect)
      rc = r->rows[a].ops->connect(r, r->state[a], endpoints, e);
  if (rc < 0) return gs_comm_fail(r, e, rc);
  return GS_OK;
}

int gs_comm_connect(gs_comm *r, const char *const *endpoints, gs_err *e) {
  if (!r) return GS_FAIL(e, GS_EINVAL, "ring: connect on no ring");
  if (r->broken) return GS_FAIL(e, GS_EPEER, "rank %d: the ring failed earlier", r->o.rank);
  if (r->connected) return GS_OK;
  r->connected = true;
  if (r->o.world == 1) return GS_OK;
  int rc = gs_pair_connect(r->pair, endpoints ? endpoints[r->right] : NULL, e);
  if (rc < 0) return gs_comm_fail(r, e, rc);
  return hello(r, endpoints, e);
}
