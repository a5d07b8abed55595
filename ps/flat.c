/* flat.c: the ps backend as the launcher sees it (ps.h, sync.h), K
 * servers in general: K = 1 is DataParallel's master, K > 1 the sharded
 * ps (opts.servers), servers of their own with opts.server_eps. Every
 * rank runs one worker (client.c) per server over the views of its
 * buffers that shard.c's key ranges give, each with its own DEALER and
 * ZeroMQ context; rank 0's worker of server k sends that server its Init
 * with rank 0's slice of the parameters.
 *
 * Where server k runs, and how the workers learn its address:
 *   K = 1       on rank 0: a thread (its kernels a clone of rank 0's), or
 *               with opts.dedicated a process forked in prepare(); rank 0's
 *               bootstrap() starts it and its TCP address is the blob.
 *   K > 1       a thread of rank gs_ps_server_rank(k) (k * world / K:
 *               ranks 0..K-1 at K = world; with ranks placed host-major,
 *               one server on the first rank of each host when K equals
 *               the hosts, the placement whose link bytes the cost model's
 *               sps-colo predicts). Its rank binds it in prepare() and
 *               publishes its address as that rank's endpoint; it serves
 *               from open() on, once the rendezvous brought the job token.
 *   own         opts.server_eps: K processes a launcher started
 *               (gs_ps_serve_alone; on emulated hosts, each on a host of
 *               its own), K = 1 included; every rank is a plain worker.
 *   summation   opts.summation (BytePS): split.c's servers, the spare
 *               hosts' processes (server_eps) and a thread of the first
 *               rank of each workers' host, over compact views of their
 *               pieces; they only sum, sched.c pushes the partitions in
 *               priority order and applies the optimizer on every rank.
 * A worker beside its server reaches it over inproc://.
 *
 * A step: begin on every server's worker; bucket_ready(b) marks b's
 * pieces ready (with overlap, pushes them); end_step pushes what is left
 * to every server before it waits for any, then collects the parameters
 * of every range. sync.h's call order is checked here, once. What each
 * placement runs is placement.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

/* What prepare() hands open(): the plan and each server's worker state. */
typedef struct ps_state {
  int rank, world;
  bool own;                /* servers of their own (opts.server_eps) */
  int mine;                /* the server this rank hosts (K > 1), or -1 */
  ps_keys keys;
  ps_split split;          /* summation servers: the partitions (split.c) */
  ps_worker_state **st;           /* [K], until open() */
} ps_state;

typedef struct ps_sync {
  gs_sync base;
  ps_keys keys;
  ps_split split;
  ps_sum *sum;               /* summation servers: the steps' other half (sched.c) */
  double dead_s;             /* a summation server's connection down this long: dead */
  ps_worker **w;             /* [K]: the worker of each server */
  int rank;
  bool overlap, failed;
  gs_sync_order order;
  double blocked_s;
} ps_sync;

/* K = 1 on rank 0, its address in the blob (the others: endpoints) */
static bool one_master(const ps_state *p) {
  return p->keys.K == 1 && !p->own && !p->keys.rank_of;
}

/* the rank whose thread runs server k, or -1: a process of its own */
static int server_rank(const ps_state *p, int k) {
  if (p->keys.rank_of) return p->keys.rank_of[k];
  return p->own ? -1 : gs_ps_server_rank(k, p->world, p->keys.K);
}

static void prepared_free(ps_state *p, bool end_states) {
  if (!p) return;
  for (int k = 0; end_states && p->st && k < p->keys.K; k++)
    gs_ps_end(p->st[k], false, true, 1000, NULL);
  gs_ps_keys_free(&p->keys);
  gs_ps_split_free(&p->split);
  free(p->st);
  free(p);
}

/* A sharded placement's numbers (what it runs is placement.c's). */
static int check_sharded(const gs_sync_config *c, const gs_ps_opts *o, int K, bool own,
                         gs_err *e) {
  if (!own && !o->summation && K > c->world)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d ps servers in a world of %d: each server runs "
                   "in a rank's process, at most one per rank", c->rank, K, c->world);
  if (o->dedicated)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d ps servers run in the ranks' processes; a "
                   "dedicated server is one process", c->rank, K);
  if (c->n < (size_t)K)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %zu parameters cannot be shared by %d ps servers",
                   c->rank, c->n, K);
  return GS_OK;
}

/* sync.h's checks (with what this placement runs), and the consistency
 * model's numbers. */
static int check_config(const gs_sync_config *c, gs_err *e) {
  GS_TRY(gs_sync_check_config(c, &gs_ps_flat_backend, "ps", e));
  const gs_ps_sync y = gs_ps_opts_of(c).sync;
  if (gs_ps_sync_stale(&y) &&
      (y.model < GS_PS_BSP || y.model > GS_PS_ASYNC || y.staleness < 0 || y.staleness > 1000 ||
       (y.backup_on && (y.model != GS_PS_BSP || y.backup < 0 || y.backup >= c->world))))
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: consistency model %d (ssp:%d, backup %d of %d "
                   "ranks) is not one the server runs", c->rank, (int)y.model, y.staleness,
                   y.backup, c->world);
  return GS_OK;
}

static int ps_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                      gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  GS_TRY(check_config(c, e));
  const gs_ps_opts o = gs_ps_opts_of(c);
  int K = o.servers > 1 ? o.servers : 1;
  bool own = o.server_eps != NULL;
  if (o.summation && o.spare > 0 && !own)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d spare hosts' summation servers, but no "
                   "addresses for them (opts.server_eps)", c->rank, o.spare);
  if ((K > 1 || own) && !o.summation) GS_TRY(check_sharded(c, &o, K, own, e));
  ps_state *p = calloc(1, sizeof *p);
  if (!p) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  p->rank = c->rank;
  p->world = c->world;
  p->own = own;
  p->mine = -1;
  int rc = o.summation ? gs_ps_split_plan(&p->keys, &p->split, c, e)
                       : gs_ps_keys_plan(&p->keys, K, c, e);
  K = p->keys.K;
  if (rc == GS_OK && o.summation) rc = check_sharded(c, &o, K, true, e);
  if (rc == GS_OK && !(p->st = calloc((size_t)K, sizeof *p->st)))
    rc = GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int k = 0; rc == GS_OK && k < K; k++) {
    gs_sync_config x = gs_ps_keys_view(&p->keys, c, k);
    if (one_master(p)) {
      rc = gs_ps_prepare_one(&x, c->rank == 0 && !o.dedicated, &p->st[k], e);
      continue;
    }
    int sr = server_rank(p, k);
    rc = gs_ps_prepare_one(&x, sr == c->rank, &p->st[k], e);
    if (rc < 0) break;
    ps_worker_state *st = p->st[k];
    st->shard = true;
    snprintf(st->who, sizeof st->who, "%s server %d of %d", o.summation ? "summation" : "ps",
             k, K);
    if (sr < 0) snprintf(st->where, sizeof st->where, "a process of its own");
    else snprintf(st->where, sizeof st->where, "a thread of rank %d", sr);
    if (sr == c->rank) {
      p->mine = k;
      rc = gs_ps_host_server(st, &x, e);
      if (rc == GS_OK) snprintf(endpoint, GS_ENDPOINT_MAX, "%s", st->tcp_ep);
      else gs_err_prefix(e, "ps server %d of %d: ", k, K);
    }
  }
  if (rc < 0) {
    prepared_free(p, true);
    return rc;
  }
  *state = p;
  return GS_OK;
}

static int ps_bootstrap(void *state, const gs_sync_config *c, void *blob, size_t *len,
                        gs_err *e) {
  ps_state *p = state;
  *len = 0;
  if (p->rank != 0)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() is for rank 0, not rank %d", p->rank);
  /* K > 1: every server's address is its rank's endpoint */
  if (!one_master(p)) return GS_OK;
  char ep[GS_ENDPOINT_MAX];
  GS_TRY(gs_ps_start(p->st[0], c, ep, e));
  /* The blob is the server's address, NUL included (GS_BOOTSTRAP_MAX bytes). */
  size_t need = strlen(ep) + 1;
  if (need > GS_BOOTSTRAP_MAX)
    return GS_FAIL(e, GS_EINVAL, "ps: server address %s is too long", ep);
  memcpy(blob, ep, need);
  *len = need;
  return GS_OK;
}

static void ps_discard(void *state) { prepared_free(state, true); }

/* ------------------------------------------------------------ the steps */

static int failed(ps_sync *s, gs_err *e) {
  return GS_FAIL(e, GS_EPEER, "ps rank %d: the backend already failed in step %lld; close it",
                 s->rank, (long long)s->order.step);
}

/* why: the reason an abort gives every server (cut to fit); keep: only
 * where none is set yet */
static void set_why(ps_sync *s, const char *why, bool keep) {
  for (int k = 0; k < s->keys.K; k++) {
    char *w = s->w[k]->why;
    if (keep && w[0]) continue;
    size_t n = strnlen(why, sizeof s->w[k]->why - 1);
    memcpy(w, why, n);
    w[n] = '\0';
  }
}

/* a misuse or a failure: the backend stays failed, and its reason goes
 * with the abort each server hears from this rank (one server's Error may
 * reach this rank before another server heard from the rank that began it) */
static int fail(ps_sync *s, int rc, const gs_err *e) {
  s->failed = true;
  if (e) set_why(s, e->msg, true);
  return rc;
}

static int ps_begin_step(gs_sync *base, int64_t step, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  if (s->failed) return failed(s, e);
  int rc = gs_sync_order_begin(&s->order, step, e);
  s->blocked_s = 0;
  for (int k = 0; rc == GS_OK && k < s->keys.K; k++) rc = gs_ps_begin(s->w[k], step, e);
  if (rc == GS_OK && s->sum) gs_ps_sum_begin(s->sum, step);
  return rc < 0 ? fail(s, rc, e) : GS_OK;
}

static int ps_bucket_ready(gs_sync *base, int bucket, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  const ps_keys *ks = &s->keys;
  if (s->failed) return failed(s, e);
  int rc = gs_sync_order_ready(&s->order, bucket, e);
  if (rc < 0) return fail(s, rc, e);
  double t0 = gs_now();
  if (s->sum) { /* its partitions, in priority order as the credit allows */
    rc = s->overlap ? gs_ps_sum_ready(s->sum, bucket, e) : GS_OK;
    if (rc < 0) return fail(s, rc, e);
    if (s->overlap) s->blocked_s += gs_now() - t0;
    return GS_OK;
  }
  for (int p = ks->first[bucket]; p < ks->first[bucket + 1]; p++) {
    rc = gs_ps_ready(s->w[ks->pk[p]], ks->pj[p], e);
    if (rc < 0) {
      if (ks->K > 1) gs_err_prefix(e, "bucket %d: ", bucket);
      return fail(s, rc, e);
    }
  }
  if (s->overlap) s->blocked_s += gs_now() - t0;
  return GS_OK;
}

/* Wait for every server's parameters at once: the first server to fail
 * (its error names the missing rank) is heard first, whatever its index.
 * A server whose deadline passed is left to gs_ps_finish to name. */
static int wait_all(ps_sync *s, gs_err *e) {
  int K = s->keys.K;
  zmq_pollitem_t it[K];
  int idx[K];
  for (;;) {
    if (gs_interrupted)
      return GS_FAIL(e, GS_EINTR, "ps rank %d, step %lld: interrupted while waiting for "
                     "parameters", s->rank, (long long)s->order.step);
    int n = 0;
    /* a slice: notice SIGINT; and a millisecond while the credit holds
     * partitions back (sched.c) */
    double left = s->sum && gs_ps_sum_held(s->sum) ? 0.001 : 0.2;
    for (int k = 0; k < K; k++) {
      ps_worker *w = s->w[k];
      /* ssp, async, backup: the worker waits for its versions in finish */
      if (w->stale || w->ngot == w->c.nbuckets) continue;
      double l = w->last_progress + w->wait_ms / 1000.0 - gs_now();
      if (l <= 0) return GS_OK;
      if (l < left) left = l;
      it[n] = (zmq_pollitem_t){.socket = w->sock, .events = ZMQ_POLLIN};
      idx[n++] = k;
    }
    if (n == 0) return GS_OK;
    int rc = zmq_poll(it, n, (long)(left * 1000.0) + 1);
    if (rc < 0 && errno != EINTR)
      return GS_FAIL(e, GS_EIO, "ps rank %d, step %lld: zmq_poll: %s", s->rank,
                     (long long)s->order.step, zmq_strerror(errno));
    /* every one, readable or not: a worker whose connection dropped and
     * came back pushes again from there (client.c) */
    for (int i = 0; i < n; i++) GS_TRY(gs_ps_drain(s->w[idx[i]], e));
    /* summation: what came back frees the credit for the next partitions;
     * a server that died is named at once, not at the deadline (its pushes
     * would otherwise make the live servers blame the ranks that wait on it) */
    if (s->sum) {
      for (int i = 0; i < n; i++) GS_TRY(gs_ps_check_up(s->w[idx[i]], s->dead_s, e));
      GS_TRY(gs_ps_sum_pump(s->sum, e));
    }
  }
}

static int ps_end_step(gs_sync *base, gs_sync_stats *st, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  int K = s->keys.K;
  if (s->failed) return failed(s, e);
  int rc = gs_sync_order_end(&s->order, e);
  if (rc < 0) return fail(s, rc, e);
  double t0 = gs_now();
  if (s->sum) { /* the scheduler pushes every partition, as the credit allows */
    rc = gs_ps_sum_ready_all(s->sum, e);
    if (rc == GS_OK) rc = wait_all(s, e);
  }
  for (int k = 0; rc == GS_OK && k < K; k++) rc = gs_ps_push_rest(s->w[k], e);
  if (rc == GS_OK) rc = wait_all(s, e);
  gs_sync_stats sum = {0};
  for (int k = 0; rc == GS_OK && k < K; k++) {
    gs_sync_stats one;
    rc = gs_ps_finish(s->w[k], t0, &one, e);
    if (rc < 0) break;
    sum.bytes_sent += one.bytes_sent;
    sum.bytes_recv += one.bytes_recv;
    /* the server beside this rank works on this rank's time, and so does
     * this rank's own compression (PowerSGD) */
    sum.reduce_s += one.reduce_s;
    if (s->w[k]->inproc) sum.update_s = one.update_s;
    if (one.has_server) {
      sum.has_server = true;
      sum.server_reduce_s = one.server_reduce_s;
      sum.server_update_s = one.server_update_s;
      sum.server_bytes_sent = one.server_bytes_sent;
      sum.server_bytes_recv = one.server_bytes_recv;
    }
    sum.skipped = one.skipped;
    sum.scale = one.scale;
    /* K servers, K clocks: the step's staleness is its stalest part's, and
     * -1 when any server dropped its part (backup workers) */
    if (k == 0 || one.staleness < 0 || (sum.staleness >= 0 && one.staleness > sum.staleness))
      sum.staleness = one.staleness;
  }
  /* summation: every rank's optimizer on the sums */
  if (rc == GS_OK && s->sum) rc = gs_ps_sum_update(s->sum, &sum, e);
  if (rc < 0) return fail(s, rc, e);
  sum.wait_s = s->blocked_s + (gs_now() - t0) - sum.reduce_s - sum.update_s;
  if (sum.wait_s < 0) sum.wait_s = 0;
  if (st) *st = sum;
  return GS_OK;
}

static int ps_close(gs_sync *base, bool ok, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  bool orderly = ok && !s->failed && !s->order.in_step;
  int rc = GS_OK;
  /* Server k finishes once every rank said goodbye to it; a rank says
   * goodbye to every server before it waits for its own, so closing never
   * waits in a circle, however far apart the ranks finish (stale models) */
  for (int k = 0; k < s->keys.K && s->keys.K > 1; k++) {
    gs_err ce = {0};
    int r = gs_ps_goodbye(s->w[k], orderly, &ce);
    if (r < 0 && rc == GS_OK) rc = GS_FAIL(e, r, "%s", ce.msg);
  }
  for (int k = 0; k < s->keys.K; k++) {
    gs_err ce = {0};
    int r = gs_ps_close(s->w[k], orderly, &ce);
    if (r < 0 && rc == GS_OK) rc = GS_FAIL(e, r, "%s", ce.msg);
  }
  gs_ps_sum_free(s->sum);
  gs_ps_keys_free(&s->keys);
  gs_ps_split_free(&s->split);
  free(s->w);
  free(s);
  return rc;
}

static const gs_sync_ops ps_ops = {
  .begin_step = ps_begin_step,
  .bucket_ready = ps_bucket_ready,
  .end_step = ps_end_step,
  .close = ps_close,
};

static int ps_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  ps_state *p = state;
  int K = p->keys.K;
  ps_sync *s = calloc(1, sizeof *s);
  ps_worker **w = calloc((size_t)K, sizeof *w);
  int rc = !s || !w ? GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank)
                     : check_config(c, e);
  /* the other ranks' hellos wait for this rank's server: start it first */
  if (rc == GS_OK && p->mine >= 0) {
    ps_worker_state *st = p->st[p->mine];
    gs_ps_server_set_job(st->server, c->job);
    rc = gs_ps_serve(st, e);
  }
  const char *const *eps = gs_ps_opts_of(c).server_eps;
  /* summation: rank 0's parameters go to every server in its view */
  if (rc == GS_OK && p->keys.vbuf) gs_ps_split_copy(&p->keys, &p->split, c->params, false);
  if (rc == GS_OK && !one_master(p) && !eps && !c->endpoints)
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: open() without the ranks' endpoints (the servers' "
                 "addresses)", c->rank);
  for (int k = 0; rc == GS_OK && k < K; k++) {
    gs_sync_config x = gs_ps_keys_view(&p->keys, c, k);
    if (!one_master(p)) {
      int sr = server_rank(p, k);
      const char *ep = sr < 0 ? eps[k] : c->endpoints[sr];
      x.bootstrap = ep;
      x.bootstrap_len = strlen(ep) + 1;
    }
    ps_worker_state *st = p->st[k];
    p->st[k] = NULL; /* open takes it over, also when it fails */
    rc = gs_ps_open_one(st, &x, &w[k], e);
  }
  if (rc < 0) {
    for (int k = 0; w && k < K; k++)
      if (w[k]) gs_ps_close(w[k], false, NULL);
    free(w);
    free(s);
    prepared_free(p, true);
    return rc;
  }
  s->base.ops = &ps_ops;
  s->base.name = "ps";
  s->keys = p->keys;
  memset(&p->keys, 0, sizeof p->keys);
  s->split = p->split;
  memset(&p->split, 0, sizeof p->split);
  s->w = w;
  if (s->keys.vbuf) {
    /* every server's Welcome brought rank 0's parameters into the views */
    gs_ps_split_copy(&s->keys, &s->split, c->params, true);
    gs_err ke = {0};
    rc = c->k->sync(c->k, &ke) < 0 ? GS_FAIL(e, ke.code, "ps rank %d: copying the initial "
                                              "parameters in: %s", c->rank, ke.msg)
                                    : gs_ps_sum_open(c, &s->keys, &s->split, w, &s->sum, e);
    if (rc < 0) {
      gs_err ce = {0};
      ps_close(&s->base, false, &ce);
      prepared_free(p, false);
      return rc;
    }
  }
  s->rank = c->rank;
  s->overlap = c->overlap;
  /* a quarter of the timeout, at most 5 s: a live server's connection is
   * back within a redial (proto/dial.c) */
  double t = (c->timeout_ms > 0 ? c->timeout_ms : 60000) / 4000.0;
  s->dead_s = t < 5 ? t : 5;
  gs_sync_order_init(&s->order, "ps", c->rank, c->nbuckets);
  prepared_free(p, false);
  *out = &s->base;
  return GS_OK;
}

const gs_backend gs_ps_flat_backend = {
  .name = "ps",
  .caps = gs_ps_caps,
  .asks = gs_ps_asks,
  .prepare = ps_prepare,
  .bootstrap = ps_bootstrap,
  .open = ps_open,
  .discard = ps_discard,
};

void gs_ps_flat_why(gs_sync *base, const char *why) { set_why((ps_sync *)base, why, false); }

void gs_ps_flat_memory(const gs_sync *base, uint64_t *device_bytes, uint64_t *host_bytes) {
  const ps_sync *s = (const ps_sync *)base;
  *device_bytes = *host_bytes = 0;
  for (int k = 0; k < s->keys.K; k++) {
    uint64_t d = 0, h = 0;
    gs_ps_worker_memory(s->w[k], &d, &h);
    *device_bytes += d;
    *host_bytes += h;
  }
  /* summation: the views and every rank's optimizer */
  for (int k = 0; s->keys.vbuf && k < s->keys.K; k++)
    *device_bytes += 2 * s->keys.vn[k] * sizeof(float);
  *device_bytes += gs_ps_sum_bytes(s->sum);
}
