/* hostagg.c: the ps backend as the launcher sees it (ps.h gs_ps_backend):
 * the flat ps of flat.c where every rank pushes (DataParallel), or,
 * with opts.host_ranks L > 1, the host-aggregated ps (BytePS' local
 * reduce): ranks are L per host, host-major, and a host's gradients are
 * summed inside it over shared memory before ONE push per host; the
 * parameters come back once per host and are shared inside it. So the
 * master's link carries (H-1) x S each way on H hosts instead of (N-L) x S.
 *
 * Who does what, host h holding ranks hL .. hL+L-1:
 *   every rank   a member of its host's shared-memory group (shm/shm.h,
 *                below both backends: this ps runs no communicator): the
 *                leader creates the segment in prepare, and every other
 *                rank maps it in open, by what the leader published in its
 *                endpoint;
 *   the leader   (local rank 0) is rank h of a flat ps of H ranks
 *                (gs_ps_flat_backend, sharded or not, servers on leaders),
 *                whose server averages over the N ranks (Init.average_over),
 *                not over the H pushes.
 * A step: each bucket is summed inside the host (in place, in member
 * order, in fp32: with loss scaling, of gradients that carry the scale),
 * with --overlap as backward hands it over, else after backward; the
 * leader pushes it (in the wire dtype: 16-bit traffic rounds the host's
 * sum, not each rank's gradient); once the leader has the step's
 * parameters, every rank but the leader fills its parameters with -0.0
 * and the host all-reduces them: x + (-0.0) is x for every float, -0.0 and
 * NaN included, so every rank copies the leader's bits. The server's
 * verdict (skipped, the next loss scale, the push's staleness) goes round
 * the host the same way.
 *
 * Under ssp, async and backup workers the server's workers are the hosts:
 * a host's push is one gradient (the sum of its L ranks', averaged as L of
 * them), its staleness is every one of its ranks', a host waits for its
 * slowest rank, and a dropped push drops L gradients.
 *
 * Sum order of element i, fixed and the same run after run: inside host h
 * in rank order, ((g_hL + g_hL+1) + ...) (shm/rounds.c), then over the
 * hosts' sums in host order on the server, as the flat server sums ranks
 * (server_reduce.c), then x 1/N. With one host that is the flat ps' order:
 * the same bits.
 *
 * Meeting: the endpoint a rank publishes is "<its host part>|<its ps
 * worker's>" (the second part empty but on leaders hosting a server); the
 * host part is "<n>,<hash of its host key>", and on a leader
 * ",<the segment's spec>" too (shm.h: the path of the leader's descriptor
 * under /proc, which only the same user may open, and the nonce the
 * segment's header must carry). In open every rank of a host checks that
 * all of them train n parameters on one machine (one host key: the same
 * boot and network, IPC and PID namespaces), so a host that cannot share
 * memory fails alike on every rank, saying why; a rank that cannot map the
 * segment fails saying so, and the others' first wait names it when it
 * times out. The leader's descriptor goes once every member has passed a
 * wait (nothing is left behind: the segment is a memfd, gone with the
 * last mapping).
 *
 * Faults: a rank that dies or fails inside a host stops its host's
 * shared-memory waits (shm/barrier.c names it, and the reason a failing
 * rank writes); its leader aborts the ps with that reason, which the
 * server passes to every other leader, which tells its own host through
 * the shared memory. Every wait of the host's ends at its timeout, longer
 * than the ps' own (prepare says by how much), naming who is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"
#include "shm/shm.h"

typedef struct hostagg_state {
  bool on;                 /* hosts reduce first; else flat is all there is */
  void *flat;              /* the leader's (or every rank's) flat ps state */
  gs_shm *shm;             /* the leader's segment, made in prepare */
  char spec[GS_SHM_SPEC_MAX]; /* what the others map it by */
  int L, H, h, local;
  gs_ps_opts leader;        /* the options of the flat ps the leaders join */
} hostagg_state;

typedef struct hostagg_sync {
  gs_sync base;
  gs_sync *flat;           /* the leader's ps session; NULL elsewhere */
  gs_shm *shm;             /* the host's segment; NULL once this rank failed */
  gs_kernels *k;
  int *ranks;              /* member -> rank in the job (the segment keeps it) */
  int rank, L, h, local;
  float *params, *grads;
  size_t n;
  const gs_bucket *buckets;
  int nbuckets;
  bool overlap, failed;
  gs_sync_order order;
  double blocked_s, reduce_s;
} hostagg_sync;

static const gs_sync_ops hostagg_ops;

/* The host's errors name the job's ranks; they say which host. */
static void host_words(int h, int L, gs_err *e) {
  gs_err_prefix(e, "host %d (ranks %d..%d), shared memory: ", h, h * L, h * L + L - 1);
}

static int check_hostagg(const gs_sync_config *c, gs_err *e) {
  int L = gs_ps_opts_of(c).host_ranks;
  if (c->world % L)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: %d ranks per host do not divide a world of %d "
                   "(the host-aggregated ps needs hosts of equal size; --no-ps-local-reduce "
                   "runs the flat ps)", c->rank, L, c->world);
  if (gs_shm_disabled())
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: the host-aggregated ps sums a host's gradients in "
                   "shared memory, which GS_SHM=0 turns off; --no-ps-local-reduce runs the "
                   "flat ps", c->rank);
  return GS_OK;
}

/* The flat ps the leader of host h joins: rank h of H, averaging over N
 * (p->leader, which lives as long as p). */
static gs_sync_config leader_config(const hostagg_state *p, const gs_sync_config *c) {
  gs_sync_config x = *c;
  x.rank = p->h;
  x.world = p->H;
  x.opts = &p->leader;
  x.local_rank = 0;
  x.local_world = 1;
  return x;
}

static void state_free(hostagg_state *p) {
  if (!p) return;
  if (p->flat) gs_ps_flat_backend.discard(p->flat);
  gs_shm_close(p->shm);
  free(p);
}

/* What a rank publishes for its host (before the '|'): "<n>,<its host
 * key's hash>", and a leader's ",<spec>"; and the same read back (false:
 * not that). */
static void host_part(size_t n, const char *spec, char *out, size_t cap) {
  char key[GS_SHM_KEY_MAX];
  gs_shm_host_key(key, sizeof key, NULL);
  uint64_t hash = gs_hash_bytes(GS_HASH_INIT, key, strlen(key));
  snprintf(out, cap, "%zu,%016llx%s%s", n, (unsigned long long)hash, spec ? "," : "",
           spec ? spec : "");
}

static bool host_parse(const char *part, unsigned long long *n, unsigned long long *key,
                       char spec[GS_SHM_SPEC_MAX]) {
  int end = 0;
  spec[0] = '\0';
  if (sscanf(part, "%llu,%16llx%n", n, key, &end) != 2) return false;
  if (part[end] == ',') snprintf(spec, GS_SHM_SPEC_MAX, "%s", part + end + 1);
  return part[end] == ',' || part[end] == '\0';
}

static int hostagg_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                           gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  GS_TRY(gs_sync_check_config(c, &gs_ps_backend, "ps", e));
  hostagg_state *p = calloc(1, sizeof *p);
  if (!p) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  p->leader = gs_ps_opts_of(c);
  p->on = p->leader.host_ranks > 1;
  p->leader.host_ranks = 0;
  p->leader.average_over = c->world;
  int rc = GS_OK;
  if (!p->on) {
    rc = gs_ps_flat_backend.prepare(c, &p->flat, endpoint, e);
    if (rc < 0) free(p);
    else *state = p;
    return rc;
  }
  if ((rc = check_hostagg(c, e)) < 0) {
    free(p);
    return rc;
  }
  p->L = gs_ps_opts_of(c).host_ranks;
  p->H = c->world / p->L;
  p->h = c->rank / p->L;
  p->local = c->rank % p->L;
  char host_ep[GS_ENDPOINT_MAX] = "", ps_ep[GS_ENDPOINT_MAX] = "";
  /* the ps first: a dedicated server forks before anything else is open */
  if (p->local == 0) {
    gs_sync_config x = leader_config(p, c);
    rc = gs_ps_flat_backend.prepare(&x, &p->flat, ps_ep, e);
  }
  if (rc == GS_OK && p->local == 0) {
    rc = gs_shm_create(c->rank, p->L, c->n * sizeof(float), GS_SHM_CHUNK_DEFAULT,
                       GS_SHM_WHOLE_DEFAULT, &p->shm, p->spec, e);
    if (rc < 0) host_words(p->h, p->L, e);
    else if (!p->shm)
      rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: the host-aggregated ps sums a host's gradients in "
                   "shared memory, and this system makes none (no memfd_create); "
                   "--no-ps-local-reduce runs the flat ps", c->rank);
  }
  host_part(c->n, p->local == 0 ? p->spec : NULL, host_ep, sizeof host_ep);
  if (rc == GS_OK && strlen(host_ep) + strlen(ps_ep) + 2 > GS_ENDPOINT_MAX)
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: endpoints %s and %s are too long", c->rank, host_ep,
                 ps_ep);
  if (rc < 0) {
    state_free(p);
    return rc;
  }
  size_t a = strlen(host_ep); /* both fit: checked above */
  memcpy(endpoint, host_ep, a);
  endpoint[a] = '|';
  memcpy(endpoint + a + 1, ps_ep, strlen(ps_ep) + 1);
  *state = p;
  return GS_OK;
}

static int hostagg_bootstrap(void *state, const gs_sync_config *c, void *blob, size_t *len,
                           gs_err *e) {
  hostagg_state *p = state;
  *len = 0;
  if (!p->on) return gs_ps_flat_backend.bootstrap(p->flat, c, blob, len, e);
  gs_sync_config x = leader_config(p, c);
  if (!p->flat)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() is for rank 0, not rank %d", c->rank);
  return gs_ps_flat_backend.bootstrap(p->flat, &x, blob, len, e);
}

static void hostagg_discard(void *state) { state_free(state); }

/* ------------------------------------------------------------ the steps */

static int failed(hostagg_sync *s, gs_err *e) {
  return GS_FAIL(e, GS_EPEER, "ps rank %d: the backend already failed in step %lld; close it",
                 s->rank, (long long)s->order.step);
}

/* "host h, rank r: " and the end of msg, where a chain of reasons ends
 * with the first cause, in at most cap bytes (the shared memory keeps 248
 * of a reason, the ps' abort 512). */
static void reason(const hostagg_sync *s, const char *msg, char *out, size_t cap) {
  int head = snprintf(out, cap, "host %d, rank %d: ", s->h, s->rank);
  size_t room = cap - (size_t)head - 4, n = strlen(msg);
  if (n <= room) memcpy(out + head, msg, n + 1);
  else {
    memcpy(out + head, "...", 3);
    memcpy(out + head + 3, msg + n - room, room + 1);
  }
}

/* This rank stops: the reason every waiting member of its host reports. */
static void tell_host(hostagg_sync *s, const char *why) {
  char msg[512];
  snprintf(msg, sizeof msg, "rank %d aborted: %s", s->rank, why);
  gs_shm_tell(s->shm, msg);
}

/* A failure: the host hears why (its shared-memory waits end), and the
 * leader's ps passes it to the server when it aborts. */
static int fail(hostagg_sync *s, int rc, gs_err *e) {
  char why[400];
  s->failed = true;
  if (s->flat) {
    reason(s, e->msg, why, sizeof why);
    gs_ps_flat_why(s->flat, why);
  }
  reason(s, e->msg, why, 200); /* with "rank r aborted: ", a member's reason holds it */
  tell_host(s, why);
  gs_shm_close(s->shm);
  s->shm = NULL;
  return rc;
}

/* buf (n floats) = the host's sum, in place (tag: the host collective's
 * bucket number, for messages). Its own failure is the reason the others'
 * waits report, and says which host. */
static int host_allreduce(hostagg_sync *s, float *buf, size_t n, int64_t step, int tag,
                          gs_err *e) {
  gs_shm_run run = {.op = GS_REDOP_SUM, .step = step, .bucket = tag};
  int rc = gs_shm_allreduce(s->shm, &run, buf, buf, n, e);
  if (rc == GS_OK) rc = s->k->sync(s->k, e);
  if (rc < 0) {
    if (rc != GS_EINTR) gs_shm_tell(s->shm, e->msg);
    host_words(s->h, s->L, e);
  }
  return rc;
}

/* The host's sum of count elements at off of buf, in place. */
static int host_sum(hostagg_sync *s, float *buf, size_t off, size_t count, int bucket, gs_err *e) {
  double t0 = gs_now();
  /* no counters: the copies cross no link; the step's bytes are the ps'
   * sockets' */
  int rc = host_allreduce(s, buf + off, count, s->order.step, bucket, e);
  s->reduce_s += gs_now() - t0;
  return rc;
}

/* The leader's ps numbers hosts as its ranks: its errors say so. */
static void ps_words(int rank, int h, int L, gs_err *e) {
  gs_err_prefix(e, "rank %d, the first of host %d (the ps below numbers hosts: its rank h is "
                "host h, ranks %d*h..%d*h+%d): ", rank, h, L, L, L - 1);
}

static int leader_words(hostagg_sync *s, int rc, gs_err *e) {
  if (rc < 0) ps_words(s->rank, s->h, s->L, e);
  return rc;
}

static int hostagg_begin_step(gs_sync *base, int64_t step, gs_err *e) {
  hostagg_sync *s = (hostagg_sync *)base;
  if (s->failed) return failed(s, e);
  int rc = gs_sync_order_begin(&s->order, step, e);
  if (rc < 0) return rc; /* a misuse changes nothing */
  s->blocked_s = s->reduce_s = 0;
  if (s->flat && (rc = leader_words(s, s->flat->ops->begin_step(s->flat, step, e), e)) < 0)
    return fail(s, rc, e);
  return GS_OK;
}

/* The host's sum of bucket b; the leader hands it to its ps. */
static int one_bucket(hostagg_sync *s, int b, gs_err *e) {
  const gs_bucket *bk = &s->buckets[b];
  GS_TRY(host_sum(s, s->grads, bk->offset, bk->count, b, e));
  return s->flat ? leader_words(s, s->flat->ops->bucket_ready(s->flat, b, e), e) : GS_OK;
}

static int hostagg_bucket_ready(gs_sync *base, int bucket, gs_err *e) {
  hostagg_sync *s = (hostagg_sync *)base;
  if (s->failed) return failed(s, e);
  int rc = gs_sync_order_ready(&s->order, bucket, e);
  if (rc < 0) return rc;
  if (!s->overlap) return GS_OK;
  double t0 = gs_now();
  rc = one_bucket(s, bucket, e);
  s->blocked_s += gs_now() - t0;
  return rc < 0 ? fail(s, rc, e) : GS_OK;
}

/* Every rank of the host ends with its leader's n floats at buf: the
 * others add -0.0 (tag: the host collective's bucket number). */
static int share(hostagg_sync *s, float *buf, size_t n, int64_t step, int tag, gs_err *e) {
  if (s->local != 0) {
    uint32_t neg0 = 0x80000000u;
    float f;
    memcpy(&f, &neg0, sizeof f);
    for (size_t i = 0; i < n; i++) buf[i] = f;
  }
  return host_allreduce(s, buf, n, step, tag, e);
}

static int hostagg_end_step(gs_sync *base, gs_sync_stats *st, gs_err *e) {
  hostagg_sync *s = (hostagg_sync *)base;
  if (s->failed) return failed(s, e);
  int rc = gs_sync_order_end(&s->order, e);
  if (rc < 0) return rc;
  double t0 = gs_now();
  for (int b = 0; !s->overlap && rc == GS_OK && b < s->nbuckets; b++) rc = one_bucket(s, b, e);
  gs_sync_stats fs = {0};
  if (rc == GS_OK && s->flat) rc = leader_words(s, s->flat->ops->end_step(s->flat, &fs, e), e);
  if (rc == GS_OK) rc = share(s, s->params, s->n, s->order.step, s->nbuckets, e);
  /* the server's verdict on the step (loss scaling: skipped, and the scale
   * the next step computes with; ssp, async, backup: the staleness of the
   * host's push, or -1 dropped) reached the leader only */
  float verdict[3] = {fs.scale, fs.skipped ? 1.0f : 0.0f, (float)fs.staleness};
  if (rc == GS_OK) rc = share(s, verdict, 3, s->order.step, s->nbuckets + 1, e);
  if (rc < 0) return fail(s, rc, e);
  gs_sync_stats out = fs;
  out.reduce_s += s->reduce_s;
  out.wait_s = s->blocked_s + (gs_now() - t0) - out.reduce_s - out.update_s;
  if (out.wait_s < 0) out.wait_s = 0;
  out.skipped = verdict[1] != 0.0f;
  out.scale = verdict[0];
  out.staleness = (int)verdict[2];
  if (st) *st = out;
  return GS_OK;
}

static int hostagg_close(gs_sync *base, bool ok, gs_err *e) {
  hostagg_sync *s = (hostagg_sync *)base;
  bool orderly = ok && !s->failed && !s->order.in_step;
  int rc = GS_OK;
  if (s->flat) rc = s->flat->ops->close(s->flat, orderly, e);
  if (!orderly) tell_host(s, "a rank of this host stopped");
  gs_shm_close(s->shm);
  free(s->ranks);
  free(s);
  return rc;
}

static const gs_sync_ops hostagg_ops = {
  .begin_step = hostagg_begin_step,
  .bucket_ready = hostagg_bucket_ready,
  .end_step = hostagg_end_step,
  .close = hostagg_close,
};

/* The part of a published endpoint: 0 the host's, 1 the ps'. */
static void ep_part(const char *ep, int part, char out[GS_ENDPOINT_MAX]) {
  const char *bar = strchr(ep, '|');
  if (!bar) {
    out[0] = '\0';
    return;
  }
  if (part == 0) snprintf(out, GS_ENDPOINT_MAX, "%.*s", (int)(bar - ep), ep);
  else snprintf(out, GS_ENDPOINT_MAX, "%s", bar + 1);
}

/* The host meets: every rank checks what its host's ranks published (the
 * same n, one machine: every rank of the host decides alike), maps the
 * leader's segment (the leader has it) and takes its place. */
static int meet(hostagg_state *p, hostagg_sync *s, const gs_sync_config *c, gs_err *e) {
  unsigned long long n0 = 0, key0 = 0;
  char spec[GS_SHM_SPEC_MAX] = "";
  for (int i = 0; i < p->L; i++) {
    int r = p->h * p->L + i;
    char part[GS_ENDPOINT_MAX], sp[GS_SHM_SPEC_MAX];
    unsigned long long n, key;
    ep_part(c->endpoints[r], 0, part);
    if (!host_parse(part, &n, &key, sp) || (i == 0 && !sp[0]))
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: rank %d published no endpoint of the "
                     "host-aggregated ps (\"%.64s\"): do all ranks run it (--ps-local-reduce)?",
                     c->rank, r, c->endpoints[r]);
    if (i == 0) {
      n0 = n;
      key0 = key;
      snprintf(spec, sizeof spec, "%s", sp);
    } else if (n != n0) {
      return GS_FAIL(e, GS_EMISMATCH, "ps rank %d: rank %d has %llu parameters and rank %d, "
                     "the first of host %d, %llu: every rank must build the same model",
                     c->rank, r, n, p->h * p->L, p->h, n0);
    } else if (key != key0) {
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: rank %d is not on the machine of rank %d, the "
                     "first of host %d (another boot, or network, IPC or PID namespace): the "
                     "host-aggregated ps sums a host's gradients in its shared memory, so each "
                     "host's %d ranks must share one (ranks host-major); --no-ps-local-reduce "
                     "runs the flat ps", c->rank, r, p->h * p->L, p->h, p->L);
    }
  }
  char why[256] = "";
  if (p->local == 0) {
    s->shm = p->shm;
    p->shm = NULL;
  } else if (!gs_shm_attach(p->L, spec, &s->shm, why, sizeof why)) {
    return GS_FAIL(e, GS_EIO, "ps rank %d: cannot map the shared memory of host %d (rank %d's): "
                   "%s", c->rank, p->h, p->h * p->L, why);
  }
  for (int i = 0; i < p->L; i++) s->ranks[i] = p->h * p->L + i;
  /* the host waits for its first rank longer than that rank waits for the
   * ps: the server's named error arrives first; a rank whose process is
   * gone is seen at once */
  int t = c->timeout_ms > 0 ? c->timeout_ms : 30000;
  gs_shm_cfg sc = {.me = p->local, .size = p->L, .rank = c->rank, .ranks = s->ranks,
                   .timeout_ms = t + t / 2 + 1000, .k = c->k, .dtype = GS_F32,
                   .local_ranks = p->L};
  gs_shm_join(s->shm, &sc);
  return GS_OK;
}

static int hostagg_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  hostagg_state *p = state;
  if (!p->on) {
    void *flat = p->flat;
    free(p);
    return gs_ps_flat_backend.open(flat, c, out, e);
  }
  hostagg_sync *s = calloc(1, sizeof *s);
  char (*eps)[GS_ENDPOINT_MAX] = calloc((size_t)p->H, GS_ENDPOINT_MAX);
  const char **ptr = calloc((size_t)p->H, sizeof *ptr);
  int *ranks = calloc((size_t)p->L, sizeof *ranks);
  int rc = !s || !eps || !ptr || !ranks
               ? GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank) : GS_OK;
  if (rc < 0) {
    free(s);
    free(ranks);
    s = NULL;
  } else {
    s->base.ops = &hostagg_ops;
    s->base.name = "ps";
    s->k = c->k;
    s->ranks = ranks;
    s->rank = c->rank;
    s->L = p->L;
    s->h = p->h;
    s->local = p->local;
    s->params = c->params;
    s->grads = c->grads;
    s->n = c->n;
    s->buckets = c->buckets;
    s->nbuckets = c->nbuckets;
    s->overlap = c->overlap;
    gs_sync_order_init(&s->order, "ps", c->rank, c->nbuckets);
  }
  if (rc == GS_OK && !c->endpoints)
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: open() without the ranks' endpoints", c->rank);
  if (rc == GS_OK) rc = meet(p, s, c, e);
  if (rc == GS_OK && p->flat) {
    for (int i = 0; i < p->H; i++) { /* the leaders' ps workers */
      ep_part(c->endpoints[i * p->L], 1, eps[i]);
      ptr[i] = eps[i];
    }
    gs_sync_config x = leader_config(p, c);
    x.endpoints = ptr;
    void *flat = p->flat;
    p->flat = NULL; /* open takes it over, also when it fails */
    rc = gs_ps_flat_backend.open(flat, &x, &s->flat, e);
    if (rc < 0) ps_words(c->rank, p->h, p->L, e);
  }
  /* every rank starts from the leader's copy of rank 0's parameters */
  if (rc == GS_OK) rc = share(s, s->params, s->n, -1, s->nbuckets, e);
  free(eps);
  free(ptr);
  state_free(p);
  if (rc < 0) {
    if (s) {
      fail(s, rc, e);
      gs_err ce = {0};
      hostagg_close(&s->base, false, &ce);
    }
    return rc;
  }
  *out = &s->base;
  return GS_OK;
}

const gs_backend gs_ps_backend = {
  .name = "ps",
  .caps = gs_ps_caps,
  .asks = gs_ps_asks,
  .prepare = hostagg_prepare,
  .bootstrap = hostagg_bootstrap,
  .open = hostagg_open,
  .discard = hostagg_discard,
};

void gs_ps_memory(const gs_sync *base, uint64_t *device_bytes, uint64_t *host_bytes) {
  *device_bytes = *host_bytes = 0;
  if (base->ops != &hostagg_ops) {
    gs_ps_flat_memory(base, device_bytes, host_bytes);
    return;
  }
  const hostagg_sync *s = (const hostagg_sync *)base;
  if (s->flat) gs_ps_flat_memory(s->flat, device_bytes, host_bytes);
}
