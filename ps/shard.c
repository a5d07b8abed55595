/* shard.c: the sharded parameter server (cfg.ps_servers K > 1, or servers
 * of their own), as ps-lite and BytePS shard theirs.
 *
 * Keys: the flat parameter vector is cut into K contiguous ranges of equal
 * size (to the element: equal bytes), cutting through buckets where a
 * boundary falls, so that a model of one big bucket still spreads evenly;
 * a bucket becomes one piece per range it overlaps. Server k owns range k
 * and is the unchanged ps server over it (sum in rank order, average, SGD:
 * all element-wise, so the bits are those of one server and of one
 * process). Every rank runs one ps worker (client.c's ps_sync) per server,
 * over the views [lo_k, lo_k+1) of its parameter and gradient buffers, each
 * with its own DEALER and ZeroMQ context; rank 0's worker of server k sends
 * that server its Init with rank 0's slice of the parameters.
 *
 * Placement, co-located: server k is a thread of rank gs_ps_server_rank
 * (k * world / K: ranks 0..K-1 at K = world; with ranks placed host-major,
 * one server on the first rank of each host when K equals the hosts, the
 * placement whose link bytes the cost model's sps-colo predicts). Its rank
 * binds it in prepare() and publishes its address as that rank's endpoint;
 * it serves from open() on, once the rendezvous brought the job token. Its
 * rank's own worker reaches it over inproc://, as rank 0's does with one
 * server.
 * Placement, servers of their own (cfg.ps_server_eps): K processes a
 * launcher started (gs_ps_serve_alone; on emulated hosts, each on a host of
 * its own), K = 1 included; every rank is then a plain worker of each.
 *
 * A step: begin_step on every server's worker; bucket_ready(b) marks b's
 * pieces ready (with overlap, pushes them); end_step pushes what is left to
 * every server before it waits for any, then collects the parameters of
 * every range. Loss scaling is refused: its skip verdict is one per step
 * over every gradient, which K servers would have to agree on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

struct ps_shards {
  int K, world, mine;      /* mine: the server this rank hosts, or -1 */
  size_t *lo;              /* [K + 1]: server k owns [lo[k], lo[k + 1]) */
  gs_bucket **sub;         /* [K]: server k's pieces, offsets within its range,
                              in readiness order */
  int *nsub;               /* [K] */
  int nb;                  /* the model's buckets */
  int *first;              /* [nb + 1]: bucket b is pieces first[b] .. first[b + 1] - 1 */
  int *pk, *pj;            /* a piece: its server, its index among that server's pieces */
  ps_state **st;           /* [K]: each server's worker state, until open() */
};

typedef struct shard_sync {
  gs_sync base;
  ps_shards *sh;
  ps_sync **w;             /* [K]: the worker of each server */
  int rank;
  bool overlap, failed, in_step;
  int64_t step;
  double blocked_s;
} shard_sync;

static int server_rank(const ps_shards *sh, int k) {
  return gs_ps_server_rank(k, sh->world, sh->K);
}

static void shards_free(ps_shards *sh) {
  if (!sh) return;
  for (int k = 0; sh->sub && k < sh->K; k++) free(sh->sub[k]);
  free(sh->sub);
  free(sh->nsub);
  free(sh->lo);
  free(sh->first);
  free(sh->pk);
  free(sh->pj);
  free(sh->st);
  free(sh);
}

static bool overlaps(const gs_bucket *b, size_t lo, size_t hi) {
  return b->offset < hi && lo < b->offset + b->count;
}

/* The ranges and every bucket's pieces. */
static int plan(ps_shards *sh, const gs_sync_config *c, gs_err *e) {
  int K = sh->K, nb = c->nbuckets;
  sh->nb = nb;
  sh->lo = malloc((size_t)(K + 1) * sizeof *sh->lo);
  sh->sub = calloc((size_t)K, sizeof *sh->sub);
  sh->nsub = calloc((size_t)K, sizeof *sh->nsub);
  sh->first = calloc((size_t)nb + 1, sizeof *sh->first);
  sh->st = calloc((size_t)K, sizeof *sh->st);
  if (!sh->lo || !sh->sub || !sh->nsub || !sh->first || !sh->st)
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  /* floor(n k / K) without overflow: n = q K + r */
  for (int k = 0; k <= K; k++)
    sh->lo[k] = c->n / (size_t)K * (size_t)k + c->n % (size_t)K * (size_t)k / (size_t)K;
  int np = 0;
  for (int b = 0; b < nb; b++) {
    const gs_bucket *x = &c->buckets[b];
    if (x->count < 1 || x->offset > c->n || x->count > c->n - x->offset)
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: bucket %d = [%zu, +%zu) is empty or outside "
                     "the %zu parameters", c->rank, b, x->offset, x->count, c->n);
    sh->first[b] = np;
    for (int k = 0; k < K; k++)
      if (overlaps(x, sh->lo[k], sh->lo[k + 1])) {
        np++;
        sh->nsub[k]++;
      }
  }
  sh->first[nb] = np;
  sh->pk = malloc((size_t)np * sizeof *sh->pk);
  sh->pj = malloc((size_t)np * sizeof *sh->pj);
  if (!sh->pk || !sh->pj) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int k = 0; k < K; k++) {
    if (sh->nsub[k] == 0)
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: ps server %d of %d owns parameters [%zu, %zu), "
                     "which no bucket holds", c->rank, k, K, sh->lo[k], sh->lo[k + 1]);
    if (!(sh->sub[k] = malloc((size_t)sh->nsub[k] * sizeof *sh->sub[k])))
      return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
    sh->nsub[k] = 0;
  }
  int p = 0;
  for (int b = 0; b < nb; b++) {
    const gs_bucket *x = &c->buckets[b];
    for (int k = 0; k < K; k++) {
      size_t lo = sh->lo[k], hi = sh->lo[k + 1];
      if (!overlaps(x, lo, hi)) continue;
      size_t a = x->offset > lo ? x->offset : lo;
      size_t z = x->offset + x->count < hi ? x->offset + x->count : hi;
      sh->pk[p] = k;
      sh->pj[p] = sh->nsub[k];
      sh->sub[k][sh->nsub[k]++] = (gs_bucket){.offset = a - lo, .count = z - a};
      p++;
    }
  }
  return GS_OK;
}

/* Server k's view of the job: its range of the buffers, its pieces. */
static gs_sync_config child_cfg(const ps_shards *sh, const gs_sync_config *c, int k) {
  gs_sync_config x = *c;
  x.params = c->params + sh->lo[k];
  x.grads = c->grads + sh->lo[k];
  x.n = sh->lo[k + 1] - sh->lo[k];
  x.buckets = sh->sub[k];
  x.nbuckets = sh->nsub[k];
  x.dedicated = false;
  x.ps_server_eps = NULL;
  return x;
}

void gs_ps_shards_discard(ps_state *top) {
  if (!top) return;
  ps_shards *sh = top->shards;
  for (int k = 0; sh && sh->st && k < sh->K; k++) gs_ps_discard_one(sh->st[k]);
  shards_free(sh);
  free(top);
}

int gs_ps_shards_prepare(const gs_sync_config *c, ps_state **out, char endpoint[GS_ENDPOINT_MAX],
                         gs_err *e) {
  *out = NULL;
  int K = c->ps_servers;
  bool own = c->ps_server_eps != NULL;
  if (!own && K > c->world)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d ps servers in a world of %d: each server runs "
                   "in a rank's process, at most one per rank", c->rank, K, c->world);
  if (c->dedicated)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d ps servers run in the ranks' processes; a "
                   "dedicated server is one process", c->rank, K);
  if (c->wire != GS_F32 || c->scaler.dynamic || c->scaler.scale != 1.0f)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d ps servers need fp32 gradients without loss "
                   "scaling (a step's inf/NaN verdict covers every gradient, which the servers "
                   "would have to agree on)", c->rank, K);
  if (c->n < (size_t)K)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %zu parameters cannot be shared by %d ps servers",
                   c->rank, c->n, K);
  ps_state *top = calloc(1, sizeof *top);
  ps_shards *sh = calloc(1, sizeof *sh);
  if (!top || !sh) {
    free(top);
    free(sh);
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  }
  top->rank = c->rank;
  top->shards = sh;
  sh->K = K;
  sh->world = c->world;
  sh->mine = -1;
  int rc = plan(sh, c, e);
  for (int k = 0; rc == GS_OK && k < K; k++) {
    gs_sync_config x = child_cfg(sh, c, k);
    int sr = own ? -1 : server_rank(sh, k);
    rc = gs_ps_prepare_one(&x, sr == c->rank, &sh->st[k], e);
    if (rc < 0) break;
    ps_state *st = sh->st[k];
    st->shard = true;
    snprintf(st->who, sizeof st->who, "ps server %d of %d", k, K);
    if (own) snprintf(st->where, sizeof st->where, "a process of its own");
    else snprintf(st->where, sizeof st->where, "a thread of rank %d", sr);
    if (sr == c->rank) {
      sh->mine = k;
      rc = gs_ps_host_server(st, &x, e);
      if (rc == GS_OK) snprintf(endpoint, GS_ENDPOINT_MAX, "%s", st->tcp_ep);
      else gs_err_prefix(e, "ps server %d of %d: ", k, K);
    }
  }
  if (rc < 0) {
    gs_ps_shards_discard(top);
    return rc;
  }
  *out = top;
  return GS_OK;
}

/* ------------------------------------------------------------ the steps */

static int failed(shard_sync *s, gs_err *e) {
  return GS_FAIL(e, GS_EPEER, "ps rank %d: the backend already failed in step %lld; close it",
                 s->rank, (long long)s->step);
}

static int sh_begin_step(gs_sync *base, int64_t step, gs_err *e) {
  shard_sync *s = (shard_sync *)base;
  if (s->failed) return failed(s, e);
  s->step = step;
  s->blocked_s = 0;
  for (int k = 0; k < s->sh->K; k++) {
    int rc = gs_ps_step_ops.begin_step(&s->w[k]->base, step, e);
    if (rc < 0) {
      s->failed = true;
      return rc;
    }
  }
  s->in_step = true;
  return GS_OK;
}

static int sh_bucket_ready(gs_sync *base, int bucket, gs_err *e) {
  shard_sync *s = (shard_sync *)base;
  const ps_shards *sh = s->sh;
  if (s->failed) return failed(s, e);
  if (bucket < 0 || bucket >= sh->nb) {
    s->failed = true;
    return GS_FAIL(e, GS_EINVAL, "ps rank %d, step %lld: bucket_ready(%d), but there are %d "
                   "buckets", s->rank, (long long)s->step, bucket, sh->nb);
  }
  double t0 = gs_now();
  for (int p = sh->first[bucket]; p < sh->first[bucket + 1]; p++) {
    int rc = gs_ps_step_ops.bucket_ready(&s->w[sh->pk[p]]->base, sh->pj[p], e);
    if (rc < 0) {
      gs_err_prefix(e, "bucket %d: ", bucket);
      s->failed = true;
      return rc;
    }
  }
  if (s->overlap) s->blocked_s += gs_now() - t0;
  return GS_OK;
}

/* Wait for every server's parameters at once: the first server to fail
 * (its error names the missing rank) is heard first, whatever its index.
 * A server whose deadline passed is left to gs_ps_finish to name. */
static int wait_all(shard_sync *s, gs_err *e) {
  int K = s->sh->K;
  zmq_pollitem_t it[K];
  int idx[K];
  for (;;) {
    if (gs_interrupted)
      return GS_FAIL(e, GS_EINTR, "ps rank %d, step %lld: interrupted while waiting for "
                     "parameters", s->rank, (long long)s->step);
    int n = 0;
    double left = 0.2; /* a slice: notice SIGINT */
    for (int k = 0; k < K; k++) {
      ps_sync *w = s->w[k];
      if (w->ngot == w->c.nbuckets) continue;
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
                     (long long)s->step, zmq_strerror(errno));
    /* every one, readable or not: a worker whose connection dropped and
     * came back pushes again from there (client.c) */
    for (int i = 0; i < n; i++) GS_TRY(gs_ps_drain(s->w[idx[i]], e));
  }
}

static int sh_end_step(gs_sync *base, gs_sync_stats *st, gs_err *e) {
  shard_sync *s = (shard_sync *)base;
  int K = s->sh->K, rc = GS_OK;
  if (s->failed) return failed(s, e);
  double t0 = gs_now();
  for (int k = 0; rc == GS_OK && k < K; k++) rc = gs_ps_push_rest(s->w[k], e);
  if (rc == GS_OK) rc = wait_all(s, e);
  gs_sync_stats sum = {0};
  for (int k = 0; rc == GS_OK && k < K; k++) {
    gs_sync_stats one;
    rc = gs_ps_finish(s->w[k], t0, &one, e);
    if (rc < 0) break;
    sum.bytes_sent += one.bytes_sent;
    sum.bytes_recv += one.bytes_recv;
    /* the server beside this rank works on this rank's time */
    if (s->w[k]->inproc) {
      sum.reduce_s = one.reduce_s;
      sum.update_s = one.update_s;
    }
    sum.skipped = one.skipped;
    sum.scale = one.scale;
  }
  if (rc < 0) {
    s->failed = true;
    return rc;
  }
  s->in_step = false;
  sum.wait_s = s->blocked_s + (gs_now() - t0) - sum.reduce_s - sum.update_s;
  if (sum.wait_s < 0) sum.wait_s = 0;
  if (st) *st = sum;
  return GS_OK;
}

static int sh_close(gs_sync *base, bool ok, gs_err *e) {
  shard_sync *s = (shard_sync *)base;
  bool orderly = ok && !s->failed && !s->in_step;
  int rc = GS_OK;
  /* Server k finishes once every rank said goodbye to it; a rank waits
   * for its own server only after its goodbyes to the servers before it,
   * so closing in server order never waits in a circle. */
  for (int k = 0; k < s->sh->K; k++) {
    gs_err ce = {0};
    int r = gs_ps_step_ops.close(&s->w[k]->base, orderly, &ce);
    if (r < 0 && rc == GS_OK) rc = GS_FAIL(e, r, "%s", ce.msg);
  }
  shards_free(s->sh);
  free(s->w);
  free(s);
  return rc;
}

const gs_sync_ops gs_ps_shard_ops = {
  .begin_step = sh_begin_step,
  .bucket_ready = sh_bucket_ready,
  .end_step = sh_end_step,
  .close = sh_close,
};

int gs_ps_shards_open(ps_state *top, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  ps_shards *sh = top->shards;
  int K = sh->K;
  shard_sync *s = calloc(1, sizeof *s);
  ps_sync **w = calloc((size_t)K, sizeof *w);
  if (!s || !w) {
    free(s);
    free(w);
    gs_ps_shards_discard(top);
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  }
  int rc = GS_OK;
  /* the other ranks' hellos wait for this rank's server: start it first */
  if (sh->mine >= 0) {
    ps_state *st = sh->st[sh->mine];
    gs_ps_server_set_job(st->server, c->job);
    rc = gs_ps_serve(st, e);
  }
  const char *const *eps = c->ps_server_eps;
  if (rc == GS_OK && !eps && !c->endpoints)
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: open() without the ranks' endpoints (the servers' "
                 "addresses)", c->rank);
  for (int k = 0; rc == GS_OK && k < K; k++) {
    gs_sync_config x = child_cfg(sh, c, k);
    const char *ep = eps ? eps[k] : c->endpoints[server_rank(sh, k)];
    x.bootstrap = ep;
    x.bootstrap_len = strlen(ep) + 1;
    ps_state *st = sh->st[k];
    sh->st[k] = NULL; /* open takes it over, also when it fails */
    rc = gs_ps_open_one(st, &x, &w[k], e);
  }
  if (rc < 0) {
    for (int k = 0; k < K; k++)
      if (w[k]) gs_ps_step_ops.close(&w[k]->base, false, NULL);
    free(w);
    free(s);
    gs_ps_shards_discard(top);
    return rc;
  }
  s->base.ops = &gs_ps_shard_ops;
  s->base.name = "ps";
  s->sh = sh;
  s->w = w;
  s->rank = c->rank;
  s->overlap = c->overlap;
  s->step = -1;
  free(sh->st);
  sh->st = NULL;
  top->shards = NULL;
  free(top);
  *out = &s->base;
  return GS_OK;
}

void gs_ps_shards_memory(const gs_sync *base, uint64_t *device_bytes, uint64_t *host_bytes) {
  const shard_sync *s = (const shard_sync *)base;
  *device_bytes = *host_bytes = 0;
  for (int k = 0; k < s->sh->K; k++) {
    uint64_t d = 0, h = 0;
    gs_ps_memory(&s->w[k]->base, &d, &h);
    *device_bytes += d;
    *host_bytes += h;
  }
}
