/* client.c: one server's worker's steps (sync.h, as flat.c drives
 * them; the call order is flat.c's to check), over one DEALER socket to
 * the server:
 *
 *   begin        reset the step's bookkeeping
 *   ready        without overlap: record; with overlap: push now (the
 *                DEALER send only queues) and apply any parameters that
 *                already came back, without waiting
 *   push_rest,   push what is left, then receive Params until every bucket
 *   finish       of the step is in, copying each into cfg.params
 *
 * Pushes go zero-copy: straight from cfg.grads on the CPU in fp32, else
 * from a staging buffer allocated once (alloc_host: pinned on a GPU) that
 * holds the wire dtype (convert on the device, then one device-to-host
 * copy). A counter of pushes ZeroMQ still holds is back to zero before
 * end_step returns, so backward may overwrite the gradients.
 *
 * With --compress topk a push is instead topk_push.c's payload: the
 * bucket's largest entries of gradient + residual, sparse. With --compress
 * powersgd, from its start step, a bucket goes in parts whose sums come
 * back before the parameters (powersgd_push.c). Either way the message is
 * push_msg.c's.
 *
 * Rank 0 beside its in-process server talks to it over inproc://: its
 * pushes and the parameters it receives are pointers handed across, not
 * bytes on a wire, and its stats report the server thread's reduction,
 * optimizer and wire traffic (its own blocked time minus the server's work
 * is its exposed communication). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps/ps_internal.h"

static void span(ps_worker *s, const char *name, int bucket, double t0) {
  if (s->c.span) s->c.span(s->c.span_ctx, name, bucket, t0, gs_now(), 0);
}

/* A failed sync stays failed: later calls report the first error again. */
static int failed(ps_worker *s, gs_err *e) {
  return GS_FAIL(e, GS_EPEER, "ps rank %d: the backend already failed in step %lld; close it",
                 s->c.rank, (long long)s->step);
}

int gs_ps_kcheck(ps_worker *s, const char *what, gs_err *e) {
  gs_err ke = {0};
  if (s->c.k->sync(s->c.k, &ke) < 0)
    return GS_FAIL(e, ke.code, "ps rank %d, step %lld, %s: %s", s->c.rank, (long long)s->step,
                   what, ke.msg);
  return GS_OK;
}

/* ---------------------------------------------------------------- pushes */

static int push(ps_worker *s, int b, gs_err *e) {
  double t0 = gs_now();
  if (gs_powersgd_active(s->psgd, s->step)) {
    GS_TRY(gs_ps_psgd_push(s, b, e));
    s->pushed[b] = 1;
    s->last_progress = gs_now();
    span(s, "push", b, t0);
    return GS_OK;
  }
  gs_kernels *k = s->c.k;
  size_t off = s->buckets[b].offset, cnt = s->buckets[b].count, bytes = cnt * s->wsize;
  const float *g = s->c.grads + off;
  const void *data;
  if (s->topk) {
    data = gs_ps_topk_stage(s, b);
  } else if (s->cpu && s->c.wire == GS_F32) {
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
  GS_TRY(gs_ps_kcheck(s, "staging gradients", e));
  GS_TRY(gs_ps_send_push(s, b, data, false, e));
  s->pushed[b] = 1;
  s->last_progress = gs_now();
  span(s, "push", b, t0);
  return GS_OK;
}

/* ------------------------------------------------------ dropped connections
 * The dial connects again by itself (proto/dial.c), but what was in flight
 * on a connection that dropped is gone. The gradients of the step are
 * still where push() left them (end_step returns only when every bucket is
 * back), so once the connection is back every bucket not answered yet goes
 * again; the server takes a push it already has once, and answers one of a
 * step it has finished with that step's parameters again (server.c,
 * on_push). */

/* Whether the connection came back after a drop since the last look. */
static bool reconnected(ps_worker *s) {
  return gs_dial_back(s->dial);
}

static int repush(ps_worker *s, gs_err *e) {
  if (!reconnected(s) || !s->in_step) return GS_OK;
  if (gs_powersgd_active(s->psgd, s->step))
    return GS_FAIL(e, GS_EPEER, "ps rank %d: the connection to %s dropped in step %lld, in the "
                   "middle of PowerSGD's exchange, which has state on both sides and is not "
                   "resumed: run again", s->c.rank, s->who, (long long)s->step);
  int n = 0;
  for (int b = 0; b < s->c.nbuckets; b++) n += s->pushed[b] && !s->got[b];
  fprintf(stderr, "ps rank %d: the connection to the ps server dropped and came back in step "
          "%lld; pushing the %d bucket(s) not answered yet again\n", s->c.rank,
          (long long)s->step, n);
  s->resent_step = s->step;
  for (int b = 0; b < s->c.nbuckets; b++) {
    if (!s->pushed[b] || s->got[b]) continue;
    size_t off = s->buckets[b].offset;
    const void *data = s->topk ? gs_ps_topk_staged(s, b)
                       : s->cpu && s->c.wire == GS_F32 ? (const void *)(s->c.grads + off)
                                                      : (char *)s->stage_host + off * s->wsize;
    GS_TRY(gs_ps_send_push(s, b, data, true, e));
  }
  return GS_OK;
}

/* ----------------------------------------------------------------------- */

/* ------------------------------------------------------------- receiving */

/* A bucket's parameters from the wire into this rank's fp32 copy: the
 * wire dtype `want` (checked by the caller) converted on the way in. */
static int params_in(ps_worker *s, const gs_bucket *bk, gs_wire_msg *m, gs_dtype want,
                     gs_err *e) {
  if (want == GS_F32) {
    s->c.k->to_device(s->c.k, s->c.params + bk->offset, zmq_msg_data(&m->payload),
                      bk->count * sizeof(float));
  } else if (s->cpu) {
    s->c.k->convert(s->c.k, GS_F32, s->c.params + bk->offset, want, zmq_msg_data(&m->payload),
                    bk->count);
  } else {
    /* the bucket's push has left: its device staging is free again */
    char *dev = (char *)s->stage_dev + bk->offset * s->wsize;
    s->c.k->to_device(s->c.k, dev, zmq_msg_data(&m->payload), bk->count * s->wsize);
    s->c.k->convert(s->c.k, GS_F32, s->c.params + bk->offset, want, dev, bk->count);
  }
  return gs_ps_kcheck(s, "copying parameters in", e);
}

/* ssp, async, backup: every bucket of one version, in bucket order, each
 * version newer than the last */
static int apply_version(ps_worker *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Params *p = m->env->params;
  int r = s->c.rank;
  uint64_t v = p->step + 1;
  if (s->vgot == 0 && v <= s->version)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: the ps server sent update %llu's parameters after "
                   "update %llu's", r, (unsigned long long)p->step,
                   (unsigned long long)s->version - 1);
  if ((s->vgot > 0 && v != s->incoming) || p->bucket != (uint32_t)s->vgot ||
      p->bucket >= (uint32_t)s->c.nbuckets)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: the ps server sent update %llu bucket %u while "
                   "bucket %d of update %llu was due", r, (unsigned long long)p->step, p->bucket,
                   s->vgot, (unsigned long long)(s->vgot ? s->incoming : v) - 1);
  const gs_bucket *bk = &s->buckets[p->bucket];
  gs_err pe = {0};
  gs_dtype want = s->c.wire;
  /* a skipped update without parameters: this rank keeps the version before */
  bool bare = p->skipped && (!m->has_payload || zmq_msg_size(&m->payload) == 0);
  if (bare && v != s->version + 1)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: the ps server sent update %llu, a skipped one, "
                   "without parameters; this rank holds update %llu, not the one before",
                   r, (unsigned long long)p->step, (unsigned long long)s->version - 1);
  if (p->offset != bk->offset || p->count != bk->count || gs_wire_dtype(p->dtype) != want ||
      (int)p->dtype < 0 || (int)p->dtype > 2 || !(p->scale > 0) || !isfinite(p->scale) ||
      (!bare && gs_wire_expect_payload(m, bk->count, want, &pe) < 0))
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: update %llu bucket %u from the ps server does not "
                   "match this rank's bucket [%zu, +%zu) of %s parameters with a loss scale "
                   "above 0 (scale %g) %s", r, (unsigned long long)p->step, p->bucket,
                   bk->offset, bk->count, gs_dtype_name(want), (double)p->scale, pe.msg);
  double t0 = gs_now();
  if (!bare) GS_TRY(params_in(s, bk, m, want, e));
  span(s, "pull", (int)p->bucket, t0);
  s->incoming = v;
  if (!s->inproc) s->recv += m->bytes;
  if (++s->vgot < s->c.nbuckets) return GS_OK;
  s->vgot = 0;
  s->version = v;
  s->scale = p->scale; /* the next step computes with it */
  s->vskipped |= p->skipped;
  s->answers++;
  if (s->o.sync.model != GS_PS_SSP) s->staleness = p->staleness;
  s->srv_reduce += p->reduce_s;
  s->srv_update += p->update_s;
  s->srv_sent += p->bytes_sent;
  s->srv_recv += p->bytes_recv;
  return GS_OK;
}

static int apply_params(ps_worker *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Params *p = m->env->params;
  int r = s->c.rank;
  if (s->stale) return apply_version(s, m, e);
  if (p->part) return gs_ps_psgd_sum(s, m, e);
  /* the answers to pushes sent again after a dropped connection may come
   * twice: the second is dropped */
  bool again = s->resent_step >= 0 && p->step == (uint64_t)s->resent_step;
  if (again && p->step + 1 == (uint64_t)s->step) return GS_OK;
  if (again && p->bucket < (uint32_t)s->c.nbuckets && s->got[p->bucket]) return GS_OK;
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
    GS_TRY(params_in(s, bk, m, want, e));
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
static int on_message(ps_worker *s, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Envelope *env = m->env;
  if (env->rank != GS_SERVER_RANK)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d: a %s message from rank %u on the server's "
                   "connection", s->c.rank, gs_wire_kind(env), env->rank);
  if (env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR)
    return GS_FAIL(e, GS_EPEER, "ps rank %d, step %lld: the job stopped (%s said): %s",
                   s->c.rank, (long long)s->step, s->who,
                   env->error->message ? env->error->message : "?");
  if (env->body_case != GRADSYNC__ENVELOPE__BODY_PARAMS)
    return GS_FAIL(e, GS_EPROTO, "ps rank %d, step %lld: an unexpected %s message from %s",
                   s->c.rank, (long long)s->step, gs_wire_kind(env), s->who);
  return apply_params(s, m, e);
}

static int recv_one(ps_worker *s, int timeout_ms, gs_err *e) {
  gs_wire_msg m;
  gs_err me = {0};
  int rc = gs_wire_recv(s->sock, false, timeout_ms, s->c.job, s->c.n * sizeof(float), &m, &me);
  if (rc == GS_ETIMEOUT) {
    gs_wire_msg_close(&m);
    return 0;
  }
  if (rc < 0) {
    gs_wire_msg_close(&m);
    return GS_FAIL(e, rc, "ps rank %d, step %lld, from %s (%s, %s): %s", s->c.rank,
                   (long long)s->step, s->who, s->server_ep, s->where, me.msg);
  }
  rc = on_message(s, &m, e);
  gs_wire_msg_close(&m);
  if (rc < 0) return rc;
  s->last_progress = gs_now();
  return 1;
}

/* Apply whatever parameters already arrived, without waiting. */
static int drain(ps_worker *s, gs_err *e) {
  GS_TRY(repush(s, e));
  for (;;) {
    zmq_pollitem_t it = {.socket = s->sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 0) <= 0) return GS_OK;
    int rc = recv_one(s, 0, e);
    if (rc <= 0) return rc;
  }
}

int gs_ps_check_up(ps_worker *s, double grace_s, gs_err *e) {
  double down = gs_dial_down_s(s->dial);
  if (s->failed || down <= grace_s) return s->failed ? failed(s, e) : GS_OK;
  s->failed = true;
  return GS_FAIL(e, GS_EPEER, "ps rank %d: %s (%s, %s) closed its connection in step %lld and "
                 "has not taken one back in %.1f s: it died", s->c.rank, s->who, s->server_ep,
                 s->where, (long long)s->step, down);
}

int gs_ps_drain(ps_worker *s, gs_err *e) {
  if (s->failed) return failed(s, e);
  int rc = drain(s, e);
  if (rc < 0) s->failed = true;
  return rc;
}

static int wait_params(ps_worker *s, gs_err *e) {
  double t0 = gs_now();
  while (s->ngot < s->c.nbuckets) {
    double left = s->last_progress + s->wait_ms / 1000.0 - gs_now();
    if (left <= 0) {
      int b = 0;
      while (b < s->c.nbuckets && s->got[b]) b++;
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d: no parameters from %s (%s) for step %lld "
                     "bucket %d in %.1f s (%d of %d buckets received): the server (%s) died or "
                     "stalled", s->c.rank, s->who, s->server_ep, (long long)s->step, b,
                     s->wait_ms / 1000.0, s->ngot, s->c.nbuckets, s->where);
    }
    GS_TRY(repush(s, e));
    int slice = (int)(left * 1000.0) + 1;
    GS_TRY(recv_one(s, gs_dial_watched(s->dial) && slice > 50 ? 50 : slice, e));
  }
  span(s, "wait", -1, t0);
  return GS_OK;
}

/* ssp: until this rank holds a whole version at least `need`; async,
 * backup: until every push has its answer */
static bool stale_ready(const ps_worker *s, uint64_t need) {
  if (s->vgot > 0) return false;
  if (s->o.sync.model == GS_PS_SSP) return s->version >= need;
  return s->answers >= s->pushes;
}

static int wait_stale(ps_worker *s, uint64_t need, gs_err *e) {
  double t0 = gs_now();
  GS_TRY(drain(s, e));
  while (!stale_ready(s, need)) {
    double left = s->last_progress + s->wait_ms / 1000.0 - gs_now();
    if (left <= 0)
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d: no parameters from %s (%s) in %.1f s after "
                     "step %lld (holding update %llu, waiting for %llu): the server (%s) died or "
                     "stalled", s->c.rank, s->who, s->server_ep, s->wait_ms / 1000.0,
                     (long long)s->step, (unsigned long long)s->version,
                     (unsigned long long)need, s->where);
    GS_TRY(recv_one(s, (int)(left * 1000.0) + 1 > 50 ? 50 : (int)(left * 1000.0) + 1, e));
  }
  span(s, "wait", -1, t0);
  return GS_OK;
}

static int wait_released(ps_worker *s, gs_err *e) {
  double t0 = gs_now();
  struct timespec ts = {0, 20000};
  while (atomic_load(&s->inflight) > 0) {
    if (gs_now() - t0 > s->wait_ms / 1000.0)
      return GS_FAIL(e, GS_ETIMEOUT, "ps rank %d, step %lld: ZeroMQ still holds %d pushes "
                     "after %.1f s", s->c.rank, (long long)s->step, atomic_load(&s->inflight),
                     s->wait_ms / 1000.0);
    nanosleep(&ts, NULL);
    int ev = 0; /* the socket's pending commands run in this thread */
    size_t sz = sizeof ev;
    zmq_getsockopt(s->sock, ZMQ_EVENTS, &ev, &sz);
  }
  return GS_OK;
}

/* ------------------------------------------------------------ the step */

int gs_ps_begin(ps_worker *s, int64_t step, gs_err *e) {
  if (s->failed) return failed(s, e);
  int nb = s->c.nbuckets;
  memset(s->ready, 0, (size_t)nb);
  memset(s->pushed, 0, (size_t)nb);
  memset(s->got, 0, (size_t)nb);
  s->ngot = s->nskipped = 0;
  s->blocked_s = 0;
  s->sent = s->recv = 0;
  s->srv_reduce = s->srv_update = 0;
  s->srv_sent = s->srv_recv = 0;
  s->psgd_s = 0;
  s->step = step;
  s->in_step = true;
  s->stale = gs_ps_sync_stale(&s->o.sync);
  s->base = s->version;
  s->base_scale = s->scale;
  s->vskipped = false;
  s->staleness = step - (int64_t)s->version; /* ssp: the update of step s is update s */
  return GS_OK;
}

int gs_ps_ready(ps_worker *s, int bucket, gs_err *e) {
  if (s->failed) return failed(s, e);
  s->ready[bucket] = 1;
  if (!s->c.overlap) return GS_OK;
  double t0 = gs_now();
  int rc = push(s, bucket, e);
  if (rc == GS_OK) rc = drain(s, e);
  s->blocked_s += gs_now() - t0;
  if (rc < 0) s->failed = true;
  return rc;
}

int gs_ps_push_rest(ps_worker *s, gs_err *e) {
  if (s->failed) return failed(s, e);
  int rc = GS_OK;
  for (int b = 0; rc == GS_OK && b < s->c.nbuckets; b++)
    if (!s->pushed[b]) rc = push(s, b, e);
  if (rc == GS_OK) s->pushes++;
  if (rc < 0) s->failed = true;
  return rc;
}

int gs_ps_finish(ps_worker *s, double t0, gs_sync_stats *st, gs_err *e) {
  if (s->failed) return failed(s, e);
  int K = s->o.sync.staleness;
  /* ssp: step s+1 may start on any version from s+1-K on */
  uint64_t need = s->step + 1 > K ? (uint64_t)(s->step + 1 - K) : 0;
  /* fault injection for the tests: a worker that ignores the bound, which
   * the server must catch */
  const char *cheat = getenv("GS_TEST_PS_SKIP_WAIT");
  if (cheat && atoi(cheat) == s->c.rank) need = 0;
  int rc = s->stale ? wait_stale(s, need, e) : wait_params(s, e);
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
    st->skipped = s->stale ? s->vskipped : s->nskipped == s->c.nbuckets;
    st->staleness = s->stale ? (int)s->staleness : 0;
    st->scale = s->scale;
    /* PowerSGD's arithmetic is this rank's reduction work, not waiting */
    st->reduce_s = s->psgd_s;
    st->wait_s -= s->psgd_s;
    if (st->wait_s < 0) st->wait_s = 0;
    if (s->inproc) {
      /* The server thread's work is this rank's (DataParallel's GPU 0). */
      st->reduce_s += s->srv_reduce;
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

static void free_bufs(ps_worker *s) {
  gs_ps_topk_free(s);
  gs_ps_psgd_free(s);
  if (s->stage_host) s->c.k->release_host(s->c.k, s->stage_host);
  if (s->stage_dev) s->c.k->release(s->c.k, s->stage_dev);
  free(s->buckets);
  free(s->ready);
  free(s->pushed);
  free(s->got);
  free(s);
}

void gs_ps_free(ps_worker *s) {
  ps_worker_state *st = s->st;
  free_bufs(s);
  gs_ps_end(st, false, true, 1000, NULL);
}

/* Tell the server (best effort) and stop the server beside this rank, if
 * any. */
int gs_ps_goodbye(ps_worker *s, bool ok, gs_err *e) {
  if (s->said_bye) return s->bye_rc;
  bool orderly = ok && !s->failed && !s->in_step;
  int rc = GS_OK;
  /* ssp: every rank leaves with the last update, as every bsp rank does */
  if (orderly && s->stale && s->o.sync.model == GS_PS_SSP && s->pushes > 0 &&
      (rc = wait_stale(s, (uint64_t)s->step + 1, e)) < 0)
    orderly = false;
  Gradsync__Envelope env;
  gs_wire_env(&env, s->c.job, (uint32_t)s->c.rank);
  Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  char msg[700];
  if (orderly) {
    sd.reason = (char *)"done";
    env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN;
    env.shutdown = &sd;
  } else {
    if (s->step < 0) snprintf(msg, sizeof msg, "rank %d aborted before its first step", s->c.rank);
    else snprintf(msg, sizeof msg, "rank %d aborted in step %lld", s->c.rank, (long long)s->step);
    if (s->why[0]) {
      size_t l = strlen(msg);
      snprintf(msg + l, sizeof msg - l, ": %s", s->why);
    }
    er.phase = (char *)"abort";
    er.message = msg;
    env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
    env.error = &er;
  }
  gs_err se = {0};
  if (gs_wire_send(s->sock, NULL, 0, &env, NULL, 0, NULL, NULL, orderly ? s->wait_ms : 100, NULL,
                   &se) < 0 && orderly)
    rc = GS_FAIL(e, se.code, "ps rank %d: saying goodbye to %s: %s", s->c.rank, s->who,
                 se.msg);
  gs_dial_close(s->dial);
  gs_sock_close(s->sock, orderly ? GS_SOCK_AS_OPENED : 200);
  s->said_bye = true;
  s->bye_orderly = orderly;
  s->bye_rc = rc;
  if (rc < 0 && e) s->bye_err = *e;
  return rc;
}

int gs_ps_close(ps_worker *s, bool ok, gs_err *e) {
  ps_worker_state *st = s->st;
  bool said = s->said_bye;
  int rc = gs_ps_goodbye(s, ok, e);
  if (said && rc < 0 && e) *e = s->bye_err;
  bool orderly = s->bye_orderly;
  gs_err ee = {0};
  int erc = gs_ps_end(st, orderly, false, orderly ? s->wait_ms : 1000, &ee);
  if (erc < 0 && rc == GS_OK) rc = GS_FAIL(e, erc, "%s", ee.msg);
  free_bufs(s);
  return rc;
}

void gs_ps_worker_memory(const ps_worker *s, uint64_t *device_bytes, uint64_t *host_bytes) {
  uint64_t dev = 0, host = 0;
  if (s->st->server) gs_ps_server_memory(s->st->server, &dev, &host);
  if (s->cpu) {
    dev += s->stage_host_bytes + s->stage_dev_bytes + s->topk_bytes;
  } else {
    dev += s->stage_dev_bytes;
    host += s->stage_host_bytes;
  }
  *device_bytes = dev;
  *host_bytes = host;
}
