/* backend.c: the ps backend's entry points, as the launcher calls them
 * (sync.h): prepare (a dedicated server process is forked here, before
 * any ZeroMQ context exists), bootstrap on rank 0 (the in-process server
 * thread, or the dedicated one's address), open (Hello / Init to the
 * server, then its Welcome with rank 0's parameters) and discard. The
 * steps themselves are client.c's. With --ps-servers K > 1 each entry
 * point hands over to shard.c, which runs the _one functions once per
 * server. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ps/ps_internal.h"

static void release_free(void *data, void *hint) {
  (void)hint;
  free(data);
}

static int check_buckets(const gs_sync_config *c, gs_err *e) {
  if (c->nbuckets < 1 || !c->buckets)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: no buckets (the model has no parameters?)",
                   c->rank);
  for (int b = 0; b < c->nbuckets; b++) {
    const gs_bucket *x = &c->buckets[b];
    if (x->count < 1 || x->offset > c->n || x->count > c->n - x->offset)
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: bucket %d = [%zu, +%zu) is empty or outside "
                     "the %zu parameters", c->rank, b, x->offset, x->count, c->n);
    for (int o = 0; o < b; o++) {
      const gs_bucket *y = &c->buckets[o];
      if (x->offset < y->offset + y->count && y->offset < x->offset + x->count)
        return GS_FAIL(e, GS_EINVAL, "ps rank %d: buckets %d and %d overlap", c->rank, o, b);
    }
  }
  return GS_OK;
}

/* ------------------------------------------------------------ backend */

int gs_ps_prepare_one(const gs_sync_config *c, bool host_server, ps_state **out, gs_err *e) {
  *out = NULL;
  if (c->world < 1 || c->rank < 0 || c->rank >= c->world)
    return GS_FAIL(e, GS_EINVAL, "ps: rank %d of world %d is impossible", c->rank, c->world);
  if (!c->k || !c->params || !c->grads || c->n == 0)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: no kernels or buffers to synchronize", c->rank);
  ps_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  st->rank = c->rank;
  st->dedicated = c->dedicated;
  st->child = st->child_fd = -1;
  snprintf(st->who, sizeof st->who, "the ps server");
  snprintf(st->where, sizeof st->where, c->dedicated ? "rank 0's dedicated process" : "rank 0");
  /* Fork first: the child must not inherit a context of ours. */
  if (c->rank == 0 && c->dedicated) {
    int rc = gs_ps_spawn(c, &st->child, &st->child_fd, e);
    if (rc < 0) {
      free(st);
      return rc;
    }
  }
  st->zctx = zmq_ctx_new();
  if (!st->zctx) {
    int err = errno;
    if (st->child > 0) gs_ps_spawn_reap(st->child, st->child_fd, 0, NULL);
    free(st);
    return GS_FAIL(e, GS_EIO, "ps rank %d: zmq_ctx_new: %s", c->rank, zmq_strerror(err));
  }
  /* the server's host's context carries the in-process server's connections */
  if (host_server) zmq_ctx_set(st->zctx, ZMQ_IO_THREADS, gs_ps_io_threads(c->world - 1));
  *out = st;
  return GS_OK;
}

static int ps_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                      gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  ps_state *st = NULL;
  int rc = c->ps_servers > 1 || c->ps_server_eps
               ? gs_ps_shards_prepare(c, &st, endpoint, e)
               : gs_ps_prepare_one(c, c->rank == 0 && !c->dedicated, &st, e);
  *state = st;
  return rc;
}


static void *server_main(void *arg) {
  ps_state *st = arg;
  st->server_rc = gs_ps_server_run(st->server, &st->server_err);
  return NULL;
}

int gs_ps_host_server(ps_state *st, const gs_sync_config *c, gs_err *e) {
  gs_kernels *k = c->k->clone(c->k, e);
  if (!k) {
    gs_err_prefix(e, "ps rank %d: the server's kernels: ", c->rank);
    return e ? e->code : GS_EDEVICE;
  }
  gs_ps_server_opts o = {
    .zctx = st->zctx, .host = c->host, .inproc = true, .inproc_rank = c->rank, .job = c->job,
    .cred = c->cred, .timeout_ms = c->timeout_ms, .max_elems = c->n, .k = k,
    .span = c->span, .span_ctx = c->span_ctx,
  };
  int rc = gs_zap_start(st->zctx, &c->cred, 0, "ps server", &st->zap, e);
  if (rc < 0) {
    k->destroy(k);
    return rc;
  }
  return gs_ps_server_create(&o, &st->server, st->tcp_ep, st->inproc_ep, e);
}

int gs_ps_serve(ps_state *st, gs_err *e) {
  /* The handler of SIGINT belongs to the training thread. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&st->thread, NULL, server_main, st);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    gs_ps_server_destroy(st->server);
    st->server = NULL;
    return GS_FAIL(e, GS_EIO, "ps rank %d: cannot start the server thread: %s", st->rank,
                   strerror(rc));
  }
  st->thread_started = true;
  return GS_OK;
}

static int ps_bootstrap(void *state, const gs_sync_config *c, void *blob, size_t *len,
                        gs_err *e) {
  ps_state *st = state;
  if (st->rank != 0)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() is for rank 0, not rank %d", st->rank);
  if (st->shards) {
    /* every shard's server published its address as its rank's endpoint */
    *len = 0;
    return GS_OK;
  }
  if (st->server || st->thread_started)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() called twice");
  if (st->dedicated) {
    GS_TRY(gs_ps_spawn_endpoint(st->child, st->child_fd, c->timeout_ms > 0 ? c->timeout_ms : 60000,
                                st->tcp_ep, e));
  } else {
    GS_TRY(gs_ps_host_server(st, c, e));
    GS_TRY(gs_ps_serve(st, e));
  }
  /* The blob is the server's address, NUL included (GS_BOOTSTRAP_MAX bytes). */
  size_t need = strlen(st->tcp_ep) + 1;
  if (need > GS_BOOTSTRAP_MAX)
    return GS_FAIL(e, GS_EINVAL, "ps: server address %s is too long", st->tcp_ep);
  memcpy(blob, st->tcp_ep, need);
  *len = need;
  return GS_OK;
}

void gs_ps_discard_one(ps_state *st) {
  if (!st) return;
  if (st->thread_started) {
    gs_ps_server_stop(st->server);
    pthread_join(st->thread, NULL);
  }
  if (st->server) gs_ps_server_destroy(st->server);
  if (st->child > 0) {
    kill(st->child, SIGKILL);
    gs_ps_spawn_reap(st->child, st->child_fd, 1000, NULL);
  }
  if (st->zctx) zmq_ctx_term(st->zctx);
  gs_zap_join(st->zap);
  free(st);
}

static void ps_discard(void *state) {
  ps_state *st = state;
  if (st && st->shards) gs_ps_shards_discard(st);
  else gs_ps_discard_one(st);
}

static int send_hello(ps_sync *s, gs_err *e) {
  const gs_sync_config *c = &s->c;
  Gradsync__Envelope env;
  gs_wire_env(&env, c->job, (uint32_t)c->rank);
  gs_err se = {0};
  int rc;
  if (c->rank != 0) {
    Gradsync__Hello h = GRADSYNC__HELLO__INIT;
    h.count = c->n;
    h.nbuckets = (uint32_t)c->nbuckets;
    env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
    env.hello = &h;
    rc = gs_wire_send(s->sock, NULL, 0, &env, NULL, 0, NULL, NULL, s->wait_ms, NULL, &se);
  } else {
    Gradsync__Init in = GRADSYNC__INIT__INIT;
    uint64_t *offs = malloc((size_t)c->nbuckets * sizeof *offs);
    uint64_t *cnts = malloc((size_t)c->nbuckets * sizeof *cnts);
    float *init = malloc(c->n * sizeof(float));
    if (!offs || !cnts || !init) {
      free(offs);
      free(cnts);
      free(init);
      return GS_FAIL(e, GS_ENOMEM, "ps rank 0: out of memory");
    }
    for (int b = 0; b < c->nbuckets; b++) {
      offs[b] = c->buckets[b].offset;
      cnts[b] = c->buckets[b].count;
    }
    in.world = (uint32_t)c->world;
    in.count = c->n;
    in.n_bucket_offset = in.n_bucket_count = (size_t)c->nbuckets;
    in.bucket_offset = offs;
    in.bucket_count = cnts;
    in.lr = c->sgd.lr;
    in.momentum = c->sgd.momentum;
    in.weight_decay = c->sgd.weight_decay;
    in.dtype = gs_wire_pbdtype(c->wire);
    in.scale = c->scaler.scale;
    in.dynamic_scale = c->scaler.dynamic;
    in.scale_interval = c->scaler.interval > 0 ? (uint32_t)c->scaler.interval : 0;
    in.scale_growth = c->scaler.growth;
    in.scale_backoff = c->scaler.backoff;
    in.timeout_ms = (uint32_t)(c->timeout_ms > 0 ? c->timeout_ms : 0);
    in.sum_only = c->sum_only;
    env.body_case = GRADSYNC__ENVELOPE__BODY_INIT;
    env.init = &in;
    c->k->to_host(c->k, init, c->params, c->n * sizeof(float));
    rc = gs_ps_kcheck(s, "reading the initial parameters", e);
    if (rc == GS_OK)
      rc = gs_wire_send(s->sock, NULL, 0, &env, init, c->n * sizeof(float), release_free, NULL,
                        s->wait_ms, NULL, &se);
    else
      free(init);
    free(offs);
    free(cnts);
  }
  if (rc < 0 && se.code)
    return GS_FAIL(e, rc, "ps rank %d: saying hello to %s (%s): %s", c->rank, s->who,
                   s->server_ep, se.msg);
  return rc;
}

/* open() is a barrier: wait for the server's Welcome and its parameters. */
static int wait_welcome(ps_sync *s, gs_err *e) {
  const gs_sync_config *c = &s->c;
  double deadline = gs_now() + s->wait_ms / 1000.0;
  for (;;) {
    double left = deadline - gs_now();
    if (left <= 0)
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d: no welcome from %s (%s, in %s) in %.1f s: "
                     "the server or another rank did not start", c->rank, s->who, s->server_ep,
                     s->where, s->wait_ms / 1000.0);
    gs_wire_msg m;
    gs_err me = {0};
    int rc = gs_wire_recv(s->sock, false, (int)(left * 1000.0) + 1, c->job,
                          c->n * sizeof(float), &m, &me);
    if (rc == GS_ETIMEOUT) {
      gs_wire_msg_close(&m);
      continue;
    }
    if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_WELCOME) {
      rc = gs_wire_expect_payload(&m, c->n, GS_F32, &me);
      if (rc == GS_OK) {
        c->k->to_device(c->k, c->params, zmq_msg_data(&m.payload), c->n * sizeof(float));
        rc = gs_ps_kcheck(s, "copying the initial parameters in", e);
      }
    } else if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
      rc = GS_FAIL(&me, GS_EPEER, "%s", m.env->error->message ? m.env->error->message : "?");
    } else if (rc == GS_OK) {
      rc = GS_FAIL(&me, GS_EPROTO, "an unexpected %s message", gs_wire_kind(m.env));
    }
    gs_wire_msg_close(&m);
    if (rc < 0 && me.code)
      return GS_FAIL(e, rc, "ps rank %d: joining %s (%s): %s", c->rank, s->who,
                     s->server_ep, me.msg);
    return rc;
  }
}

int gs_ps_open_one(ps_state *st, const gs_sync_config *c, ps_sync **out, gs_err *e) {
  *out = NULL;
  ps_sync *s = calloc(1, sizeof *s);
  int rc = GS_OK;
  if (!s) {
    gs_ps_discard_one(st);
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  }
  s->base.ops = &gs_ps_step_ops;
  s->base.name = "ps";
  s->c = *c;
  s->st = st;
  s->who = st->who;
  s->where = st->where;
  s->cpu = c->k->device == GS_DEV_CPU;
  s->step = -1;
  s->scale = c->scaler.scale;
  int64_t timeout = c->timeout_ms > 0 ? c->timeout_ms : 60000;
  timeout += timeout / 4;
  s->wait_ms = timeout > INT32_MAX ? INT32_MAX : (int)timeout;
  s->c.endpoints = NULL;
  s->c.bootstrap = NULL;
  s->c.host = NULL;
  if ((rc = check_buckets(c, e)) < 0) goto fail;
  if (c->wire != GS_F32 && c->wire != GS_F16 && c->wire != GS_BF16) {
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: unknown wire dtype %d", c->rank, (int)c->wire);
    goto fail;
  }
  s->wsize = gs_dtype_size(c->wire);
  int nb = c->nbuckets;
  s->buckets = malloc((size_t)nb * sizeof *s->buckets);
  s->ready = calloc((size_t)nb, 1);
  s->pushed = calloc((size_t)nb, 1);
  s->got = calloc((size_t)nb, 1);
  if (!s->buckets || !s->ready || !s->pushed || !s->got) {
    rc = GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
    goto fail;
  }
  memcpy(s->buckets, c->buckets, (size_t)nb * sizeof *s->buckets);
  s->c.buckets = s->buckets;

  const char *ep;
  /* a shard's worker beside no server goes over the wire */
  if (st->server || (c->rank == 0 && !st->dedicated && !st->shard)) {
    if (!st->thread_started) {
      rc = GS_FAIL(e, GS_EINVAL, "ps rank 0: open() before bootstrap() (the launcher must call "
                   "bootstrap on rank 0 to start the server)");
      goto fail;
    }
    ep = st->inproc_ep;
    s->inproc = true;
    snprintf(s->server_ep, sizeof s->server_ep, "%s", st->tcp_ep);
  } else {
    const char *blob = c->bootstrap;
    size_t len = c->bootstrap_len;
    if (!blob || len < 7 || len > GS_ENDPOINT_MAX || blob[len - 1] != '\0' ||
        strlen(blob) != len - 1 || (strncmp(blob, "tcp://", 6) && strncmp(blob, "ipc://@", 7))) {
      rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: the bootstrap blob is not the address of %s "
                   "(%zu bytes; expected \"tcp://host:port\" or \"ipc://@name\" from %s)",
                   c->rank, s->who, len, s->where);
      goto fail;
    }
    ep = blob;
    snprintf(s->server_ep, sizeof s->server_ep, "%s", blob);
    s->has_server = c->rank == 0 && st->dedicated;
  }

  if (!s->cpu || c->wire != GS_F32) {
    size_t bytes = c->n * s->wsize;
    s->stage_host = c->k->alloc_host(c->k, bytes);
    s->stage_host_bytes = bytes;
    if (!s->cpu && c->wire != GS_F32) {
      s->stage_dev = c->k->alloc(c->k, bytes);
      s->stage_dev_bytes = bytes;
    }
    gs_err ke = {0};
    if (!s->stage_host || (!s->cpu && c->wire != GS_F32 && !s->stage_dev) ||
        c->k->sync(c->k, &ke) < 0) {
      rc = GS_FAIL(e, GS_ENOMEM, "ps rank %d: cannot allocate %zu bytes of staging for "
                   "gradients%s%s", c->rank, bytes, ke.code ? ": " : "", ke.msg);
      goto fail;
    }
  }

  s->sock = zmq_socket(st->zctx, ZMQ_DEALER);
  if (!s->sock) {
    rc = GS_FAIL(e, GS_EIO, "ps rank %d: zmq_socket: %s", c->rank, zmq_strerror(errno));
    goto fail;
  }
  gs_wire_tune(s->sock);
  int64_t maxmsg = (int64_t)(c->n * sizeof(float));
  if (maxmsg < (int64_t)GS_HEADER_MAX) maxmsg = GS_HEADER_MAX;
  maxmsg += 64;
  zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  /* a fixed routing id: after a dropped connection comes back the server
   * still knows whose it is (it lets the new connection take it over) */
  char rid[32];
  snprintf(rid, sizeof rid, "gs-ps-%d", c->rank);
  zmq_setsockopt(s->sock, ZMQ_ROUTING_ID, rid, strlen(rid));
  int ivl = 20;
  zmq_setsockopt(s->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
  s->resent_step = -1;
  if ((rc = gs_dial_open(st->zctx, s->sock, &c->cred, ep, &s->dial, e)) < 0) {
    gs_err_prefix(e, "ps rank %d: connecting to %s: ", c->rank, s->who);
    goto fail;
  }
  if ((rc = send_hello(s, e)) < 0 || (rc = wait_welcome(s, e)) < 0) goto fail;
  *out = s;
  return GS_OK;

fail:
  /* open() owns the state: release everything, and let the server go. */
  s->failed = true;
  if (s->sock) {
    gs_ps_step_ops.close(&s->base, false, NULL);
    return rc;
  }
  if (s->stage_host) c->k->release_host(c->k, s->stage_host);
  if (s->stage_dev) c->k->release(c->k, s->stage_dev);
  free(s->buckets);
  free(s->ready);
  free(s->pushed);
  free(s->got);
  free(s);
  gs_ps_discard_one(st);
  return rc;
}

static int ps_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  ps_state *st = state;
  *out = NULL;
  if (st->shards) return gs_ps_shards_open(st, c, out, e);
  ps_sync *s = NULL;
  GS_TRY(gs_ps_open_one(st, c, &s, e));
  *out = &s->base;
  return GS_OK;
}

const gs_backend gs_ps_backend = {
  .name = "ps",
  .prepare = ps_prepare,
  .bootstrap = ps_bootstrap,
  .open = ps_open,
  .discard = ps_discard,
};
