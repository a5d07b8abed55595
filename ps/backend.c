/* backend.c: the worker side of the ps backend (sync.h), and the backend
 * entry points the launcher calls (prepare / bootstrap / open / discard).
 *
 * A worker is one DEALER socket to the server. A step, seen from here:
 *
 *   begin_step   reset the step's bookkeeping
 *   bucket_ready without overlap: record; with overlap: push now (the
 *                DEALER send only queues) and apply any parameters that
 *                already came back, without waiting
 *   end_step     push what is left, then receive Params until every bucket
 *                of the step is in, copying each into cfg.params
 *
 * Pushes go zero-copy: straight from cfg.grads on the CPU in fp32, else
 * from a staging buffer allocated once (alloc_host: pinned on a GPU) that
 * holds the wire dtype (convert on the device, then one device-to-host
 * copy). A counter of pushes ZeroMQ still holds is back to zero before
 * end_step returns, so backward may overwrite the gradients.
 *
 * Rank 0 beside its in-process server talks to it over inproc://: its
 * pushes and the parameters it receives are pointers handed across, not
 * bytes on a wire, and its stats report the server thread's reduction,
 * optimizer and wire traffic (its own blocked time minus the server's work
 * is its exposed communication). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/wire.h"
#include "ps/ps.h"
#include "ps/server.h"

typedef struct ps_state {
  int rank;
  bool dedicated;
  void *zctx;
  /* rank 0, in-process server */
  gs_ps_server *server;
  pthread_t thread;
  bool thread_started;
  int server_rc;
  gs_err server_err;
  char tcp_ep[GS_ENDPOINT_MAX], inproc_ep[GS_ENDPOINT_MAX];
  /* rank 0, dedicated server */
  int child, child_fd;
} ps_state;

typedef struct ps_sync {
  gs_sync base;
  gs_sync_config c;
  gs_bucket *buckets;
  ps_state *st;
  void *sock;
  char server_ep[GS_ENDPOINT_MAX];
  bool inproc;      /* rank 0 beside its server thread */
  bool has_server;  /* rank 0 with a dedicated server */
  bool cpu, failed, in_step;
  size_t wsize;
  int wait_ms;      /* the server's timeout plus a quarter: its named error arrives first */
  void *stage_host, *stage_dev;
  uint64_t stage_host_bytes, stage_dev_bytes;
  atomic_int inflight;

  int64_t step;
  uint8_t *ready, *pushed, *got;
  int ngot, nskipped;
  double blocked_s, last_progress;
  uint64_t sent, recv;
  float scale;
  double srv_reduce, srv_update;
  uint64_t srv_sent, srv_recv;
} ps_sync;

static void release_count(void *data, void *hint) {
  (void)data;
  atomic_fetch_sub((atomic_int *)hint, 1);
}

static void release_free(void *data, void *hint) {
  (void)hint;
  free(data);
}

static void span(ps_sync *s, const char *name, int bucket, double t0) {
  if (s->c.span) s->c.span(s->c.span_ctx, name, bucket, t0, gs_now(), 0);
}

/* A failed sync stays failed: later calls report the first error again. */
static int failed(ps_sync *s, gs_err *e) {
  return GS_FAIL(e, GS_EPEER, "ps rank %d: the backend already failed in step %lld; close it",
                 s->c.rank, (long long)s->step);
}

static int kcheck(ps_sync *s, const char *what, gs_err *e) {
  gs_err ke = {0};
  if (s->c.k->sync(s->c.k, &ke) < 0)
    return GS_FAIL(e, ke.code, "ps rank %d, step %lld, %s: %s", s->c.rank, (long long)s->step,
                   what, ke.msg);
  return GS_OK;
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

/* ---------------------------------------------------------------- pushes */

static int push(ps_sync *s, int b, gs_err *e) {
  double t0 = gs_now();
  gs_kernels *k = s->c.k;
  size_t off = s->buckets[b].offset, cnt = s->buckets[b].count, bytes = cnt * s->wsize;
  const float *g = s->c.grads + off;
  const void *data;
  if (s->cpu && s->c.wire == GS_F32) {
    data = g;
  } else {
    char *host = (char *)s->stage_host + off * s->wsize;
    if (s->cpu) {
      k->convert(k, s->c.wire, host, GS_F32, g, cnt);
    } else if (s->c.wire == GS_F32) {
      k->to_host(k, host, g, bytes);
    } else {
      char *dev = (char *)s->stage_dev + off * s->wsize;
      k->convert(k, s->c.wire, dev, GS_F32, g, cnt);
      k->to_host(k, host, dev, bytes);
    }
    data = host;
  }
  GS_TRY(kcheck(s, "staging gradients", e));
  Gradsync__Envelope env;
  Gradsync__Push p = GRADSYNC__PUSH__INIT;
  gs_wire_env(&env, s->c.job, (uint32_t)s->c.rank);
  p.step = (uint64_t)s->step;
  p.bucket = (uint32_t)b;
  p.offset = off;
  p.count = cnt;
  p.dtype = gs_wire_pbdtype(s->c.wire);
  env.body_case = GRADSYNC__ENVELOPE__BODY_PUSH;
  env.push = &p;
  atomic_fetch_add(&s->inflight, 1);
  gs_err we = {0};
  if (gs_wire_send(s->sock, NULL, 0, &env, data, bytes, release_count, &s->inflight, s->wait_ms,
                   s->inproc ? NULL : &s->sent, &we) < 0)
    return GS_FAIL(e, we.code, "ps rank %d: pushing step %lld bucket %d to the ps server (%s): "
                   "%s", s->c.rank, (long long)s->step, b, s->server_ep, we.msg);
  s->pushed[b] = 1;
  s->last_progress = gs_now();
  span(s, "push", b, t0);
  return GS_OK;
}

/* ------------------------------------------------------------- receiving */

static int apply_params(ps_sync *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Params *p = m->env->params;
  int r = s->c.rank;
  if (p->step != (uint64_t)s->step)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: the ps server sent parameters for step %llu "
                   "during step %lld", r, (unsigned long long)p->step, (long long)s->step);
  if (p->bucket >= (uint32_t)s->c.nbuckets)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server sent bucket %u of %d", r,
                   (long long)s->step, p->bucket, s->c.nbuckets);
  int b = (int)p->bucket;
  const gs_bucket *bk = &s->buckets[b];
  if (s->got[b])
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server sent bucket %d twice", r,
                   (long long)s->step, b);
  if (p->offset != bk->offset || p->count != bk->count)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server sent bucket %d as "
                   "[%llu, +%llu); this rank's bucket is [%zu, +%zu)", r, (long long)s->step, b,
                   (unsigned long long)p->offset, (unsigned long long)p->count, bk->offset,
                   bk->count);
  if (p->skipped) {
    if (m->has_payload && zmq_msg_size(&m->payload) > 0)
      return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: a skipped bucket %d with a payload",
                     r, (long long)s->step, b);
    s->nskipped++;
  } else {
    gs_err pe = {0};
    gs_dtype want = s->c.sum_only ? GS_F32 : s->c.wire;
    if (gs_wire_dtype(p->dtype) != want || (int)p->dtype < 0 || (int)p->dtype > 2)
      return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server sent bucket %d in "
                     "dtype %d; this job's parameters travel in %s", r, (long long)s->step, b,
                     (int)p->dtype, gs_dtype_name(want));
    if (gs_wire_expect_payload(m, bk->count, want, &pe) < 0)
      return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld, bucket %d from the ps server: %s", r,
                     (long long)s->step, b, pe.msg);
    double t0 = gs_now();
    if (want == GS_F32) {
      s->c.k->to_device(s->c.k, s->c.params + bk->offset, zmq_msg_data(&m->payload),
                        bk->count * sizeof(float));
    } else if (s->cpu) {
      s->c.k->convert(s->c.k, GS_F32, s->c.params + bk->offset, want,
                      zmq_msg_data(&m->payload), bk->count);
    } else {
      /* the bucket's push has left: its device staging is free again */
      char *dev = (char *)s->stage_dev + bk->offset * s->wsize;
      s->c.k->to_device(s->c.k, dev, zmq_msg_data(&m->payload), bk->count * s->wsize);
      s->c.k->convert(s->c.k, GS_F32, s->c.params + bk->offset, want, dev, bk->count);
    }
    GS_TRY(kcheck(s, "copying parameters in", e));
    span(s, "pull", b, t0);
  }
  s->got[b] = 1;
  s->ngot++;
  s->scale = p->scale;
  if (!s->inproc) s->recv += m->bytes;
  if (s->ngot == s->c.nbuckets) {
    s->srv_reduce = p->reduce_s;
    s->srv_update = p->update_s;
    s->srv_sent = p->bytes_sent;
    s->srv_recv = p->bytes_recv;
    if (s->nskipped != 0 && s->nskipped != s->c.nbuckets)
      return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: the ps server skipped %d of %d "
                     "buckets (all or none)", r, (long long)s->step, s->nskipped,
                     s->c.nbuckets);
  }
  return GS_OK;
}

/* Handle one message from the server (Params or Error). */
static int on_message(ps_sync *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Envelope *env = m->env;
  if (env->rank != GS_SERVER_RANK)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: a %s message from rank %u on the server's "
                   "connection", s->c.rank, gs_wire_kind(env), env->rank);
  if (env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR)
    return GS_FAIL(e, GS_EPEER, "ps rank %d, step %lld: the job stopped: %s", s->c.rank,
                   (long long)s->step, env->error->message ? env->error->message : "?");
  if (env->body_case != GRADSYNC__ENVELOPE__BODY_PARAMS)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: an unexpected %s message from the ps "
                   "server", s->c.rank, (long long)s->step, gs_wire_kind(env));
  return apply_params(s, m, e);
}

static int recv_one(ps_sync *s, int timeout_ms, gs_err *e) {
  gs_wire_msg m;
  gs_err me = {0};
  int rc = gs_wire_recv(s->sock, false, timeout_ms, s->c.job, s->c.n * sizeof(float), &m, &me);
  if (rc == GS_ETIMEOUT) {
    gs_wire_msg_close(&m);
    return 0;
  }
  if (rc < 0) {
    gs_wire_msg_close(&m);
    return GS_FAIL(e, rc, "ps rank %d, step %lld, from the ps server (%s): %s", s->c.rank,
                   (long long)s->step, s->server_ep, me.msg);
  }
  rc = on_message(s, &m, e);
  gs_wire_msg_close(&m);
  if (rc < 0) return rc;
  s->last_progress = gs_now();
  return 1;
}

/* Apply whatever parameters already arrived, without waiting. */
static int drain(ps_sync *s, gs_err *e) {
  for (;;) {
    zmq_pollitem_t it = {.socket = s->sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 0) <= 0) return GS_OK;
    int rc = recv_one(s, 0, e);
    if (rc <= 0) return rc;
  }
}

static int wait_params(ps_sync *s, gs_err *e) {
  double t0 = gs_now();
  while (s->ngot < s->c.nbuckets) {
    double left = s->last_progress + s->wait_ms / 1000.0 - gs_now();
    if (left <= 0) {
      int b = 0;
      while (b < s->c.nbuckets && s->got[b]) b++;
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d: no parameters from the ps server (%s) for "
                     "step %lld bucket %d in %.1f s (%d of %d buckets received): the server "
                     "(rank 0%s) died or stalled", s->c.rank, s->server_ep,
                     (long long)s->step, b, s->wait_ms / 1000.0, s->ngot, s->c.nbuckets,
                     s->has_server || (s->c.dedicated) ? "'s dedicated process" : "");
    }
    GS_TRY(recv_one(s, (int)(left * 1000.0) + 1, e));
  }
  span(s, "wait", -1, t0);
  return GS_OK;
}

static int wait_released(ps_sync *s, gs_err *e) {
  double t0 = gs_now();
  struct timespec ts = {0, 20000};
  while (atomic_load(&s->inflight) > 0) {
    if (gs_now() - t0 > s->wait_ms / 1000.0)
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d, step %lld: ZeroMQ still holds %d pushes "
                     "after %.1f s", s->c.rank, (long long)s->step, atomic_load(&s->inflight),
                     s->wait_ms / 1000.0);
    nanosleep(&ts, NULL);
  }
  return GS_OK;
}

/* ------------------------------------------------------------ sync ops */

static int ps_begin_step(gs_sync *base, int64_t step, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  if (s->failed) return failed(s, e);
  if (s->in_step) {
    s->failed = true;
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: begin_step(%lld) before end_step of step %lld",
                   s->c.rank, (long long)step, (long long)s->step);
  }
  int nb = s->c.nbuckets;
  memset(s->ready, 0, (size_t)nb);
  memset(s->pushed, 0, (size_t)nb);
  memset(s->got, 0, (size_t)nb);
  s->ngot = s->nskipped = 0;
  s->blocked_s = 0;
  s->sent = s->recv = 0;
  s->srv_reduce = s->srv_update = 0;
  s->srv_sent = s->srv_recv = 0;
  s->step = step;
  s->in_step = true;
  return GS_OK;
}

static int ps_bucket_ready(gs_sync *base, int bucket, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  if (s->failed) return failed(s, e);
  int rc = GS_OK;
  if (!s->in_step) {
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: bucket_ready(%d) outside a step", s->c.rank, bucket);
  } else if (bucket < 0 || bucket >= s->c.nbuckets) {
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d, step %lld: bucket_ready(%d), but there are %d "
                 "buckets", s->c.rank, (long long)s->step, bucket, s->c.nbuckets);
  } else if (s->ready[bucket]) {
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d, step %lld: bucket %d marked ready twice", s->c.rank,
                 (long long)s->step, bucket);
  } else {
    s->ready[bucket] = 1;
    if (s->c.overlap) {
      double t0 = gs_now();
      rc = push(s, bucket, e);
      if (rc == GS_OK) rc = drain(s, e);
      s->blocked_s += gs_now() - t0;
    }
  }
  if (rc < 0) s->failed = true;
  return rc;
}

static int ps_end_step(gs_sync *base, gs_sync_stats *st, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  if (s->failed) return failed(s, e);
  int rc = GS_OK;
  double t0 = gs_now();
  if (!s->in_step)
    rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: end_step outside a step", s->c.rank);
  for (int b = 0; rc == GS_OK && b < s->c.nbuckets; b++) {
    if (!s->ready[b])
      rc = GS_FAIL(e, GS_EINVAL, "ps rank %d, step %lld: end_step, but bucket %d was never "
                   "marked ready", s->c.rank, (long long)s->step, b);
    else if (!s->pushed[b])
      rc = push(s, b, e);
  }
  if (rc == GS_OK) rc = wait_params(s, e);
  if (rc == GS_OK) rc = wait_released(s, e);
  if (rc < 0) {
    s->failed = true;
    return rc;
  }
  s->blocked_s += gs_now() - t0;
  s->in_step = false;
  if (st) {
    memset(st, 0, sizeof *st);
    st->wait_s = s->blocked_s;
    st->skipped = s->nskipped == s->c.nbuckets;
    st->scale = s->scale;
    if (s->inproc) {
      /* The server thread's work is this rank's (DataParallel's GPU 0). */
      st->reduce_s = s->srv_reduce;
      st->update_s = s->srv_update;
      st->wait_s -= s->srv_reduce + s->srv_update;
      if (st->wait_s < 0) st->wait_s = 0;
      st->bytes_sent = s->srv_sent;
      st->bytes_recv = s->srv_recv;
    } else {
      st->bytes_sent = s->sent;
      st->bytes_recv = s->recv;
    }
    if (s->has_server) {
      st->has_server = true;
      st->server_reduce_s = s->srv_reduce;
      st->server_update_s = s->srv_update;
      st->server_bytes_sent = s->srv_sent;
      st->server_bytes_recv = s->srv_recv;
    }
  }
  return GS_OK;
}

/* Tell the server (best effort) and stop rank 0's server, if any. */
static int ps_close(gs_sync *base, bool ok, gs_err *e) {
  ps_sync *s = (ps_sync *)base;
  ps_state *st = s->st;
  bool orderly = ok && !s->failed && !s->in_step;
  int rc = GS_OK;
  Gradsync__Envelope env;
  gs_wire_env(&env, s->c.job, (uint32_t)s->c.rank);
  Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  char msg[128];
  if (orderly) {
    sd.reason = (char *)"done";
    env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN;
    env.shutdown = &sd;
  } else {
    if (s->step < 0) snprintf(msg, sizeof msg, "rank %d aborted before its first step", s->c.rank);
    else snprintf(msg, sizeof msg, "rank %d aborted in step %lld", s->c.rank, (long long)s->step);
    er.phase = (char *)"abort";
    er.message = msg;
    env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
    env.error = &er;
  }
  gs_err se = {0};
  if (gs_wire_send(s->sock, NULL, 0, &env, NULL, 0, NULL, NULL, orderly ? s->wait_ms : 100, NULL,
                   &se) < 0 && orderly)
    rc = GS_FAIL(e, se.code, "ps rank %d: saying goodbye to the ps server: %s", s->c.rank,
                 se.msg);
  if (!orderly) {
    int linger = 200;
    zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof linger);
  }
  zmq_close(s->sock);
  if (st->thread_started) {
    if (!orderly) gs_ps_server_stop(st->server);
    pthread_join(st->thread, NULL);
    if (orderly && st->server_rc < 0 && rc == GS_OK)
      rc = GS_FAIL(e, st->server_rc, "%s", st->server_err.msg);
  }
  if (st->server) gs_ps_server_destroy(st->server);
  if (st->child > 0) {
    gs_err ce = {0};
    int crc = gs_ps_spawn_reap(st->child, st->child_fd, orderly ? s->wait_ms : 1000, &ce);
    if (orderly && crc < 0 && rc == GS_OK) rc = GS_FAIL(e, crc, "%s", ce.msg);
  }
  zmq_ctx_term(st->zctx);  /* all messages released: the gradients are free again */
  if (s->stage_host) s->c.k->release_host(s->c.k, s->stage_host);
  if (s->stage_dev) s->c.k->release(s->c.k, s->stage_dev);
  free(s->buckets);
  free(s->ready);
  free(s->pushed);
  free(s->got);
  free(st);
  free(s);
  return rc;
}

static const gs_sync_ops ps_ops = {
  .begin_step = ps_begin_step,
  .bucket_ready = ps_bucket_ready,
  .end_step = ps_end_step,
  .close = ps_close,
};

void gs_ps_memory(const gs_sync *base, uint64_t *device_bytes, uint64_t *host_bytes) {
  const ps_sync *s = (const ps_sync *)base;
  uint64_t dev = 0, host = 0;
  if (s->st->server) gs_ps_server_memory(s->st->server, &dev, &host);
  if (s->cpu) {
    dev += s->stage_host_bytes + s->stage_dev_bytes;
  } else {
    dev += s->stage_dev_bytes;
    host += s->stage_host_bytes;
  }
  *device_bytes = dev;
  *host_bytes = host;
}

/* ------------------------------------------------------------ backend */

static int ps_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                      gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  if (c->world < 1 || c->rank < 0 || c->rank >= c->world)
    return GS_FAIL(e, GS_EINVAL, "ps: rank %d of world %d is impossible", c->rank, c->world);
  if (!c->k || !c->params || !c->grads || c->n == 0)
    return GS_FAIL(e, GS_EINVAL, "ps rank %d: no kernels or buffers to synchronize", c->rank);
  ps_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  st->rank = c->rank;
  st->dedicated = c->dedicated;
  st->child = st->child_fd = -1;
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
  /* rank 0's context carries the in-process server's connections */
  if (c->rank == 0 && !c->dedicated)
    zmq_ctx_set(st->zctx, ZMQ_IO_THREADS, gs_ps_io_threads(c->world - 1));
  *state = st;
  return GS_OK;
}


static void *server_main(void *arg) {
  ps_state *st = arg;
  st->server_rc = gs_ps_server_run(st->server, &st->server_err);
  return NULL;
}

static int ps_bootstrap(void *state, const gs_sync_config *c, void *blob, size_t *len,
                        gs_err *e) {
  ps_state *st = state;
  if (st->rank != 0)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() is for rank 0, not rank %d", st->rank);
  if (st->server || st->thread_started)
    return GS_FAIL(e, GS_EINVAL, "ps: bootstrap() called twice");
  if (st->dedicated) {
    GS_TRY(gs_ps_spawn_endpoint(st->child, st->child_fd, c->timeout_ms > 0 ? c->timeout_ms : 60000,
                                st->tcp_ep, e));
  } else {
    gs_kernels *k = c->k->clone(c->k, e);
    if (!k) {
      gs_err_prefix(e, "ps: the server's kernels: ");
      return e ? e->code : GS_EDEVICE;
    }
    gs_ps_server_opts o = {
      .zctx = st->zctx, .host = c->host, .inproc = true, .job = c->job,
      .timeout_ms = c->timeout_ms, .max_elems = c->n, .k = k,
      .span = c->span, .span_ctx = c->span_ctx,
    };
    GS_TRY(gs_ps_server_create(&o, &st->server, st->tcp_ep, st->inproc_ep, e));
    /* The handler of SIGINT belongs to the training thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&st->thread, NULL, server_main, st);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
      gs_ps_server_destroy(st->server);
      st->server = NULL;
      return GS_FAIL(e, GS_EIO, "ps: cannot start the server thread: %s", strerror(rc));
    }
    st->thread_started = true;
  }
  /* The blob is the server's address, NUL included (GS_BOOTSTRAP_MAX bytes). */
  size_t need = strlen(st->tcp_ep) + 1;
  if (need > GS_BOOTSTRAP_MAX)
    return GS_FAIL(e, GS_EINVAL, "ps: server address %s is too long", st->tcp_ep);
  memcpy(blob, st->tcp_ep, need);
  *len = need;
  return GS_OK;
}

static void ps_discard(void *state) {
  ps_state *st = state;
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
  free(st);
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
    rc = kcheck(s, "reading the initial parameters", e);
    if (rc == GS_OK)
      rc = gs_wire_send(s->sock, NULL, 0, &env, init, c->n * sizeof(float), release_free, NULL,
                        s->wait_ms, NULL, &se);
    else
      free(init);
    free(offs);
    free(cnts);
  }
  if (rc < 0 && se.code)
    return GS_FAIL(e, rc, "ps rank %d: saying hello to the ps server (%s): %s", c->rank,
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
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d: no welcome from the ps server (%s) in %.1f s: "
                     "the server or another rank did not start", c->rank, s->server_ep,
                     s->wait_ms / 1000.0);
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
        rc = kcheck(s, "copying the initial parameters in", e);
      }
    } else if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
      rc = GS_FAIL(&me, GS_EPEER, "%s", m.env->error->message ? m.env->error->message : "?");
    } else if (rc == GS_OK) {
      rc = GS_FAIL(&me, GS_EPROTO, "an unexpected %s message", gs_wire_kind(m.env));
    }
    gs_wire_msg_close(&m);
    if (rc < 0 && me.code)
      return GS_FAIL(e, rc, "ps rank %d: joining the ps server (%s): %s", c->rank,
                     s->server_ep, me.msg);
    return rc;
  }
}

static int ps_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  ps_state *st = state;
  *out = NULL;
  ps_sync *s = calloc(1, sizeof *s);
  int rc = GS_OK;
  if (!s) {
    ps_discard(st);
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  }
  s->base.ops = &ps_ops;
  s->base.name = "ps";
  s->c = *c;
  s->st = st;
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
  if (c->rank == 0 && !st->dedicated) {
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
        strlen(blob) != len - 1 || strncmp(blob, "tcp://", 6) != 0) {
      rc = GS_FAIL(e, GS_EINVAL, "ps rank %d: the bootstrap blob is not a ps server address "
                   "(%zu bytes; expected \"tcp://host:port\" from rank 0's bootstrap)",
                   c->rank, len);
      goto fail;
    }
    ep = blob;
    snprintf(s->server_ep, sizeof s->server_ep, "%s", blob);
    s->has_server = c->rank == 0;
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
  if (zmq_connect(s->sock, ep) < 0) {
    rc = GS_FAIL(e, GS_EIO, "ps rank %d: connecting to the ps server at %s: %s", c->rank, ep,
                 zmq_strerror(errno));
    goto fail;
  }
  if ((rc = send_hello(s, e)) < 0 || (rc = wait_welcome(s, e)) < 0) goto fail;
  *out = &s->base;
  return GS_OK;

fail:
  /* open() owns the state: release everything, and let the server go. */
  s->failed = true;
  if (s->sock) {
    ps_close(&s->base, false, NULL);
    return rc;
  }
  if (s->stage_host) c->k->release_host(c->k, s->stage_host);
  if (s->stage_dev) c->k->release(c->k, s->stage_dev);
  free(s->buckets);
  free(s->ready);
  free(s->pushed);
  free(s->got);
  free(s);
  ps_discard(st);
  return rc;
}

const gs_backend gs_ps_backend = {
  .name = "ps",
  .prepare = ps_prepare,
  .bootstrap = ps_bootstrap,
  .open = ps_open,
  .discard = ps_discard,
};
