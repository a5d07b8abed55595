/* hier.c: the hierarchical all-reduce (algos.c's row "hier"), its row's
 * functions, for several ranks on each of several hosts: what NCCL and
 * Horovod do there, so that each host's link carries 2(H-1)/H x S per
 * all-reduce of S bytes on H hosts, not the flat ring's share of every
 * rank's.
 *
 * Hosts are the ranks' host keys (shm/shm.h; an emulated host is a
 * namespace), in the order of their first ranks; member l of a host is its
 * l-th rank in rank order. Every host needs the same number L of ranks.
 * Each rank creates a segment in prepare (only pages that are written cost
 * memory); the handshake carries them, the first rank of each host keeps
 * its own and the others map it. Per round of at most a slot, the shm
 * part's rounds (shm/rounds.c) with this file's step between the sum and
 * the copy out:
 *
 *   copy in      member l: slot l = its part of src
 *   barrier
 *   reduce       member l sums part l (of L) of every slot, in member
 *                order, into part l of slot 0:  p = ((v_0 + v_1) + ...)
 *   between      member l of every host all-reduces its part l over the
 *                mesh (rd.c's sockets) with member l of the other hosts:
 *                a ring of H, host h sending to host h+1; reduce-scatter
 *                in H pieces (piece q starts at host q, and each host adds
 *                what arrives to its own: x = own + arrived), then
 *                all-gather (copies)
 *   barrier
 *   copy out     dst = slot 0 (every member)
 *
 * So element i's sum is fixed by i alone: inside each host in member
 * order, then between hosts starting at host q (i's piece) and going
 * right, each host's partial added as (own + arrived). Every rank copies
 * the same bits, run after run; the order differs from the flat ring's, so
 * the two agree to rounding, not bitwise.
 *
 * A failure anywhere reaches every rank: a member's process that is gone
 * or a reason written into the segment ends the host's barrier waits
 * (shm/barrier.c), and the failing rank's reason goes to every rank over
 * the mesh (gs_comm_fail tells every row). The counters of a collective
 * count the bytes on sockets only (those between hosts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/mesh.h"
#include "allreduce/shm_comm.h"

/* bigger slots than shm.c's: each round also pays the ring's latency
 * between hosts, 2(H-1) hops */
#define DEFAULT_HIER_CHUNK ((size_t)1 << 20)

typedef struct hier_state {
  int rank, world;
  char (*keys)[GS_SHM_KEY_MAX];       /* every rank's host key */
  char (*specs)[GS_SHM_SPEC_MAX];     /* every rank's segment ("" none) */
  int H, L, host, local;              /* hosts, ranks per host, this rank's */
  int *members;                       /* L: the ring ranks of this host */
  int *peers;                         /* H: member `local` of each host */
  int phase;                          /* the ring between hosts' on the wire */
  gs_algo rd;                         /* whose mesh that ring runs over */
  gs_shm *m;
  bool on;                            /* every rank mapped its host's (the vote) */
} hier_state;

static int hier_prepare(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e) {
  hier_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for hier", r->o.rank);
  *state = st;
  st->phase = (int)row->phase[0].wire;
  st->rd = gs_algo_parse("rd");
  int N = r->o.world;
  st->rank = r->o.rank;
  st->world = N;
  st->keys = calloc((size_t)N, sizeof *st->keys);
  st->specs = calloc((size_t)N, sizeof *st->specs);
  st->members = calloc((size_t)N, sizeof *st->members);
  st->peers = calloc((size_t)N, sizeof *st->peers);
  if (!st->keys || !st->specs || !st->members || !st->peers)
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for hier", r->o.rank);
  gs_shm_host_key(st->keys[st->rank], GS_SHM_KEY_MAX, r->o.host_tag);
  if (!gs_comm_shm_may_use(r)) return GS_OK;
  /* room for a group of every rank: the group is known after the handshake */
  return gs_comm_shm_create(r, N, DEFAULT_HIER_CHUNK, 0, &st->m, st->specs[st->rank], e);
}

static void hier_hello(const void *state, int origin, Gradsync__RingHello *h) {
  const hier_state *st = state;
  h->host = (char *)st->keys[origin];
  h->host_shm = (char *)st->specs[origin];
}

static void hier_heard(void *state, int origin, const Gradsync__RingHello *h) {
  hier_state *st = state;
  snprintf(st->keys[origin], GS_SHM_KEY_MAX, "%s", h->host ? h->host : "");
  snprintf(st->specs[origin], GS_SHM_SPEC_MAX, "%s", h->host_shm ? h->host_shm : "");
}

/* Hosts from the keys, the same on every rank: host of each rank, H, and
 * whether every host has L ranks (why not, in why). */
static bool place(hier_state *st, int *host_of, int *first, char *why, size_t cap) {
  int N = st->world, H = 0;
  for (int i = 0; i < N; i++) {
    host_of[i] = -1;
    for (int h = 0; h < H; h++)
      if (!strcmp(st->keys[first[h]], st->keys[i])) host_of[i] = h;
    if (host_of[i] < 0) {
      first[H] = i;
      host_of[i] = H++;
    }
  }
  st->H = H;
  st->L = 0;
  for (int i = 0; i < N; i++) st->L += host_of[i] == 0;
  for (int h = 1; h < H; h++) {
    int c = 0;
    for (int i = 0; i < N; i++) c += host_of[i] == h;
    if (c != st->L) {
      snprintf(why, cap, "host 0 (rank 0's) has %d ranks and host %d (rank %d's) %d: every host "
               "needs the same number", st->L, h, first[h], c);
      return false;
    }
  }
  int l = 0;
  for (int i = 0; i < N; i++)
    if (host_of[i] == host_of[st->rank]) {
      if (i == st->rank) st->local = l;
      st->members[l++] = i;
    }
  st->host = host_of[st->rank];
  for (int h = 0; h < H; h++) {
    int k = 0;
    for (int i = 0; i < N; i++)
      if (host_of[i] == h && k++ == st->local) st->peers[h] = i;
  }
  return true;
}

static int hier_connect(gs_comm *r, void *state, const char *const *endpoints, gs_err *e) {
  hier_state *st = state;
  const int N = r->o.world;
  const bool want = r->o.algo == GS_ALGO_HIER && !r->o.hier_auto;
  int *host_of = calloc((size_t)N, sizeof *host_of), *first = calloc((size_t)N, sizeof *first);
  if (!host_of || !first) {
    free(host_of);
    free(first);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for hier", r->o.rank);
  }
  char why[256] = "";
  bool even = place(st, host_of, first, why, sizeof why);
  int lead = first[host_of[st->rank]];
  bool specs = true;
  for (int h = 0; h < st->H; h++) specs = specs && st->specs[first[h]][0];
  free(host_of);
  free(first);
  /* from the handshake alone, so every rank decides alike; auto leaves one
   * host to shm and one rank per host to the flat algorithms */
  bool try_it = even && specs && (want || (st->H > 1 && st->L > 1));
  if (!try_it) {
    gs_shm_close(st->m);
    st->m = NULL;
    if (!want) return GS_OK;
    if (!even)
      return GS_FAIL(e, GS_EINVAL, "rank %d: --algo hier: %s; use --algo ring", r->o.rank, why);
    return GS_FAIL(e, GS_EINVAL, "rank %d: --algo hier: a host's first rank made no shared "
                   "memory (it needs host buffers and an fp32, fp64 or int32 wire; GS_SHM=0 "
                   "turns it off); use --algo ring", r->o.rank);
  }
  bool ok = false;
  if (!gs_comm_shm_may_use(r)) {
    snprintf(why, sizeof why, "GS_SHM=0, device buffers or a 16-bit wire on this rank");
  } else if (lead == st->rank) {
    ok = st->m != NULL;
  } else {
    gs_shm_close(st->m); /* the host's first rank's is the one */
    st->m = NULL;
    ok = gs_shm_attach(N, st->specs[lead], &st->m, why, sizeof why);
  }
  if (ok) gs_comm_shm_join(r, st->m, st->local, st->L, st->members);
  int rc = gs_comm_shm_settle(r, &st->m, ok, why, want, "hier", "its host's", "ring", e);
  st->on = rc == GS_OK && st->m;
  return rc;
}

static bool hier_ready(const void *state) { return ((const hier_state *)state)->on; }

static void between_where(const gs_whole_where *c, char *buf, size_t cap) {
  snprintf(buf, cap, "the hierarchical all-reduce's ring between hosts, step %d/%d", c->round,
           c->rounds);
}

/* What the rounds need of the ring between hosts. */
typedef struct between_ctx {
  gs_comm *r;
  hier_state *hs;
  whole_state *w;
  gs_comm_stats *st;
} between_ctx;

/* x (n elements, this member's part) = its sum over the hosts: a ring of
 * the H peers over the mesh (one host: as it is) */
static int between(void *ctx, void *part, size_t n, gs_err *e) {
  const between_ctx *c = ctx;
  gs_comm *r = c->r;
  const hier_state *hs = c->hs;
  char *x = part;
  const int H = hs->H, h = hs->host;
  if (H == 1) return GS_OK;
  const int right = hs->peers[(h + 1) % H], left = hs->peers[gs_comm_mod(h - 1, H)];
  const size_t es = gs_comm_es(r);
  gs_whole_where wc = {.r = r, .phase = hs->phase, .round = 0, .rounds = 2 * (H - 1),
                       .say = between_where};
  for (int t = 0; t < 2 * (H - 1); t++) {
    bool rs = t < H - 1;
    int sq = rs ? gs_comm_mod(h - t, H) : gs_comm_mod(h + 1 - (t - H + 1), H);
    int rq = gs_comm_mod(sq - 1, H);
    size_t so, sl, ro, rl;
    gs_part_range(n, H, sq, &so, &sl);
    gs_part_range(n, H, rq, &ro, &rl);
    wc.round = t + 1;
    GS_TRY(gs_whole_send(r, c->w, right, &wc, x + so * es, sl, c->st, e));
    GS_TRY(gs_whole_take(r, c->w, left, &wc, x + ro * es, rl, !rs, c->st, e));
  }
  return GS_OK;
}

static int hier_allreduce(gs_comm *r, void *state, const void *src, void *dst, size_t n,
                          gs_comm_stats *st, gs_err *e) {
  hier_state *hs = state;
  whole_state *w = gs_comm_state(r, hs->rd);
  if (hs->H > 1 && !w)
    return GS_FAIL(e, GS_EINVAL, "rank %d: hier without the mesh", r->o.rank);
  const double t0 = gs_now();
  between_ctx c = {.r = r, .hs = hs, .w = w, .st = st};
  gs_shm_run run = gs_comm_shm_run(r);
  run.part = between;
  run.ctx = &c;
  GS_TRY(gs_shm_allreduce(hs->m, &run, src, dst, n, e));
  st->reduce_s += run.reduce_s;
  gs_comm_span(r, "hierarchical all-reduce", t0, gs_now());
  return GS_OK;
}

static void hier_tell(void *state, const char *msg) {
  hier_state *st = state;
  if (hier_ready(st)) gs_shm_tell(st->m, msg);
}

static void hier_interrupt(void *state) { gs_shm_interrupt(((hier_state *)state)->m); }

static void hier_free(gs_comm *r, void *state, bool abort) {
  hier_state *st = state;
  gs_shm_close(st->m);
  free(st->keys);
  free(st->specs);
  free(st->members);
  free(st->peers);
  free(st);
}

const gs_algo_ops gs_algo_hier = {
  .prepare = hier_prepare,
  .hello = hier_hello,
  .heard = hier_heard,
  .connect = hier_connect,
  .ready = hier_ready,
  .allreduce = hier_allreduce,
  .tell = hier_tell,
  .interrupt = hier_interrupt,
  .close = hier_free,
};
