/* shm.c: the all-reduce through shared memory, for a job whose ranks all
 * run on one host (allreduce.h gs_algo "shm"): no socket, no I/O thread,
 * no wake-up per hop, which is what a ZeroMQ hop costs on one machine.
 *
 * Rank 0 creates the segment (shm_seg.c) in prepare; its name and every
 * rank's host key (an emulated host is a namespace, and its traffic must
 * cross its link) travel in the ring's handshake (this row's hello /
 * heard). When every key is the same, every rank maps the segment and the
 * ranks agree over the ring algorithm that all of them did.
 *
 * The buffer goes through in rounds of at most `chunk` bytes per rank, over
 * two sets of N slots (rounds alternate sets):
 *
 *   round k, set k%2      rank 0        rank 1       ...   rank N-1
 *   copy in               slot 0 = v0   slot 1 = v1        slot N-1
 *   barrier
 *   reduce (split)        part 0 of slot 0 = ((v0 + v1) + v2) + ... (rank r
 *                         sums part r of every slot, in rank order)
 *   barrier
 *   copy out              dst = slot 0 (every rank)
 *
 * With one barrier ("whole"), every rank sums all of the round itself, in
 * the same order, and copies out its own result: half the waits, N times
 * the reads; it wins at small sizes and with two ranks. Either way every
 * rank ends with the same bits, run after run.
 *
 * Two sets make one barrier enough between rounds: a rank writes set s
 * again in round k+2 only after passing round k+1's barrier, which every
 * rank reaches after it has read set s in round k.
 * */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/shm_seg.h"

#define DEFAULT_SHM_CHUNK ((size_t)256 << 10)
#define DEFAULT_SHM_WHOLE ((size_t)64 << 10)

/* The row's state: every rank's host key and rank 0's segment, as the
 * handshake brought them, and this rank's mapping once connected. */
typedef struct shm_state {
  int rank, world;
  char (*keys)[GS_SHM_KEY_MAX];       /* world entries; equal keys share memory */
  char spec[GS_SHM_SPEC_MAX];         /* rank 0's segment ("" none) */
  gs_shm *m;
} shm_state;

static bool may_use(const gs_comm *r) {
  return (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_SHM) && gs_shm_may_use(r);
}

static int shm_prepare(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e) {
  shm_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  *state = st;
  st->rank = r->o.rank;
  st->world = r->o.world;
  st->keys = calloc((size_t)r->o.world, sizeof *st->keys);
  if (!st->keys) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  gs_shm_host_key(st->keys[st->rank], GS_SHM_KEY_MAX, r->o.host_tag);
  if (r->o.rank != 0 || !may_use(r)) return GS_OK;
  return gs_shm_create(r, r->o.world, DEFAULT_SHM_CHUNK, DEFAULT_SHM_WHOLE, &st->m, st->spec, e);
}

static void shm_hello(const void *state, int origin, Gradsync__RingHello *h) {
  const shm_state *st = state;
  h->host = (char *)st->keys[origin];
  h->shm_name = (char *)(origin == 0 ? st->spec : "");
}

static void shm_heard(void *state, int origin, const Gradsync__RingHello *h) {
  shm_state *st = state;
  snprintf(st->keys[origin], GS_SHM_KEY_MAX, "%s", h->host ? h->host : "");
  if (origin == 0) snprintf(st->spec, sizeof st->spec, "%s", h->shm_name ? h->shm_name : "");
}

static int shm_connect(gs_comm *r, void *state, const char *const *endpoints, gs_err *e) {
  shm_state *st = state;
  int N = r->o.world;
  bool one_host = true;
  int other = -1;
  for (int i = 1; i < N && one_host; i++)
    if (strcmp(st->keys[i], st->keys[0])) one_host = false, other = i;
  bool want = r->o.algo == GS_ALGO_SHM;
  /* from the handshake alone, so every rank decides alike */
  bool try_it = one_host && st->spec[0] &&
                (r->o.algo == GS_ALGO_AUTO || r->o.algo == GS_ALGO_SHM);
  if (!try_it) {
    gs_shm_close(st->m);
    st->m = NULL;
    if (!want) return GS_OK;
    if (!one_host)
      return GS_FAIL(e, GS_EINVAL, "rank %d: --algo shm needs every rank on one host, and rank "
                     "%d is on another than rank 0 (or in another network namespace); use "
                     "--algo auto", r->o.rank, other);
    return GS_FAIL(e, GS_EINVAL, "rank %d: --algo shm: rank 0 made no shared memory (it needs "
                   "/dev/shm, host buffers and an fp32, fp64 or int32 wire; GS_SHM=0 turns it "
                   "off); use --algo auto", r->o.rank);
  }
  char why[256] = "";
  bool ok = false;
  if (!may_use(r))
    snprintf(why, sizeof why, "GS_SHM=0, device buffers or a 16-bit wire on this rank");
  else if (r->o.rank == 0)
    ok = st->m != NULL;
  else
    ok = gs_shm_attach(r, r->o.world, st->spec, &st->m, why, sizeof why);
  if (ok) gs_shm_join(r, st->m, r->o.rank, r->o.world, NULL);
  return gs_shm_settle(r, &st->m, ok, why, want, "shm", "rank 0's", "auto", e);
}

static bool shm_ready(const void *state) {
  const shm_state *st = state;
  return st->m && st->m->on;
}

static void shm_tell(void *state, const char *msg) {
  gs_shm_tell(((shm_state *)state)->m, msg);
}

static void shm_interrupt(void *state) { gs_shm_interrupt(((shm_state *)state)->m); }

static void shm_free(gs_comm *r, void *state, bool abort) {
  shm_state *st = state;
  gs_shm_close(st->m);
  free(st->keys);
  free(st);
}

static int shm_allreduce(gs_comm *r, void *state, const void *src, void *dst, size_t n,
                         gs_comm_stats *st, gs_err *e) {
  gs_shm *s = ((shm_state *)state)->m;
  const int N = r->o.world, me = r->o.rank;
  const size_t es = gs_comm_es(r), per = s->chunk / es;
  /* the same on every rank: they all pass the same n, and rank 0 set the
   * threshold in the header */
  const bool whole = N == 2 || n * es <= s->whole;
  double red = 0;
  for (size_t off = 0; off < n; off += per) {
    size_t len = n - off < per ? n - off : per;
    char *set = gs_shm_next_set(s);
    char *mine = set + (size_t)me * s->chunk;
    memcpy(mine, (const char *)src + off * es, len * es);
    GS_TRY(gs_shm_barrier(r, s, e));
    double a = gs_now();
    if (whole) {
      gs_shm_sum(r, s, set, 0, len, (char *)dst + off * es);
    } else {
      size_t po, pl;
      gs_comm_seg_range(len, N, me, &po, &pl);
      gs_shm_sum(r, s, set, po, pl, set + po * es);
    }
    red += gs_now() - a;
    if (!whole) {
      GS_TRY(gs_shm_barrier(r, s, e));
      memcpy((char *)dst + off * es, set, len * es);
    }
    st->bytes_sent += len * es;
    st->bytes_recv += len * es * (size_t)(whole ? N - 1 : 1);
  }
  st->reduce_s += red;
  return GS_OK;
}

const gs_algo_ops gs_algo_shm = {
  .prepare = shm_prepare,
  .hello = shm_hello,
  .heard = shm_heard,
  .connect = shm_connect,
  .ready = shm_ready,
  .allreduce = shm_allreduce,
  .tell = shm_tell,
  .interrupt = shm_interrupt,
  .close = shm_free,
};
