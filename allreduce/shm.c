/* shm.c: the all-reduce through shared memory (algos.c's row "shm"), its
 * row's functions, for a job whose ranks all run on one host: the shm
 * part's segment and rounds (shm/shm.h, drawn in shm/rounds.c), over which
 * this file does what the communicator lets it: the handshake and the
 * vote.
 *
 * Rank 0 creates the segment in prepare; its spec and every rank's host
 * key (an emulated host is a namespace, and its traffic must cross its
 * link) travel in the ring's handshake (this row's hello / heard). When
 * every key is the same, every rank maps the segment and the ranks agree
 * over the sockets that all of them did (shm_comm.c). Every rank ends with
 * the same bits, run after run: each element is summed in rank order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/shm_comm.h"

/* The row's state: every rank's host key and rank 0's segment, as the
 * handshake brought them, and this rank's mapping once connected. */
typedef struct shm_state {
  int rank, world;
  char (*keys)[GS_SHM_KEY_MAX];       /* world entries; equal keys share memory */
  char spec[GS_SHM_SPEC_MAX];         /* rank 0's segment ("" none) */
  gs_shm *m;
  bool on;                            /* every rank mapped it (the vote) */
} shm_state;

static int shm_prepare(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e) {
  shm_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  *state = st;
  st->rank = r->o.rank;
  st->world = r->o.world;
  st->keys = calloc((size_t)r->o.world, sizeof *st->keys);
  if (!st->keys)
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for shared memory", r->o.rank);
  gs_shm_host_key(st->keys[st->rank], GS_SHM_KEY_MAX, r->o.host_tag);
  if (r->o.rank != 0 || !gs_comm_shm_may_use(r)) return GS_OK;
  return gs_comm_shm_create(r, r->o.world, GS_SHM_CHUNK_DEFAULT, GS_SHM_WHOLE_DEFAULT, &st->m,
                            st->spec, e);
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
  /* prepared under auto and shm only: shm asked for it by name */
  bool want = r->o.algo == GS_ALGO_SHM;
  /* from the handshake alone, so every rank decides alike */
  bool try_it = one_host && st->spec[0];
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
  if (!gs_comm_shm_may_use(r))
    snprintf(why, sizeof why, "GS_SHM=0, device buffers or a 16-bit wire on this rank");
  else if (r->o.rank == 0)
    ok = st->m != NULL;
  else
    ok = gs_shm_attach(r->o.world, st->spec, &st->m, why, sizeof why);
  if (ok) gs_comm_shm_join(r, st->m, r->o.rank, r->o.world, NULL);
  int rc = gs_comm_shm_settle(r, &st->m, ok, why, want, "shm", "rank 0's", "auto", e);
  st->on = rc == GS_OK && st->m;
  return rc;
}

static bool shm_ready(const void *state) { return ((const shm_state *)state)->on; }

static void shm_tell(void *state, const char *msg) {
  shm_state *st = state;
  if (st->on) gs_shm_tell(st->m, msg);
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
  gs_shm_run run = gs_comm_shm_run(r);
  int rc = gs_shm_allreduce(((shm_state *)state)->m, &run, src, dst, n, e);
  if (rc < 0) return rc;
  st->bytes_sent += run.sent;
  st->bytes_recv += run.recv;
  st->reduce_s += run.reduce_s;
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
