/* server.c: the ps server loop (DataParallel's master reducer).
 *
 * One ROUTER socket, one thread. The loop receives a message at a time and
 * walks through three phases:
 *
 *   hello   Init from rank 0 (sizes, buckets, SGD, wire dtype, loss scale,
 *           initial parameters) and Hello from every other rank (sizes);
 *           once all `world` ranks are in and agree: Welcome + parameters.
 *   steps   rounds of pushes. A round starts with the first push of a step
 *           and ends when every bucket's parameters went out.
 *   goodbye Shutdown from every rank ends the loop.
 *
 * The reduction (pushes summed in rank order straight out of the ZeroMQ
 * messages, early ones held, the first adopted as the sum) is server_reduce.c's;
 * the end of the step (average, overflow verdict, SGD) is gs_update_apply's
 * (kernels.h), as in every backend. This file keeps the protocol.
 *
 * Outgoing parameters are sent zero-copy from the master copy (the host
 * mirror on a device); a per-bucket counter of messages ZeroMQ still holds
 * (decremented by the release callback, on the I/O thread) is waited for
 * before that memory is written again: server_send.c. Joining is
 * server_join.c's; the peers' identities, warnings and errors
 * server_peers.c's.
 *
 * Deadlines: while some rank has pushed a step and others have not, the
 * round must finish within timeout_ms of its first push; the error names
 * every missing rank with its first missing bucket and its last complete
 * step. Idle time between steps has no deadline (the server's life is tied
 * to rank 0's); the hello and goodbye phases run from the first contact. */
#include "ps/server.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ps/server_core.h"

/* ------------------------------------------------------------ reduction */

/* Apply the step's update to buckets bs[0..nb) (their sums are complete);
 * last: they end the step. Nothing ZeroMQ still sends may point at the
 * parameters SGD writes. */
static int update(gs_ps_server *s, const int *bs, int nb, bool last, bool *skipped, gs_err *e) {
  gs_update_range r[nb > 0 ? nb : 1];
  for (int i = 0; i < nb; i++) {
    GS_TRY(gs_pss_wait_inflight(s, bs[i], e));
    float *psgd = gs_pss_psgd_grad(s, bs[i]);
    r[i] = (gs_update_range){.offset = s->off[bs[i]], .count = s->cnt[bs[i]],
                             .grad = psgd ? psgd : gs_ps_reduce_sum(s->red, bs[i])};
  }
  gs_update_result res;
  gs_err ue = {0};
  double t0 = gs_now();
  if (gs_update_apply(&s->u, s->master, r, nb, false, last, &res, &ue) < 0)
    return FAIL(s, e, ue.code, "ps server (%s kernels): %s", s->k->name, ue.msg);
  for (int i = 0; i < nb; i++) gs_ps_reduce_release(s->red, bs[i]);
  s->reduce_s += res.check_s;
  s->update_s += res.update_s;
  if (!res.skipped && s->o.span)
    s->o.span(s->o.span_ctx, "optimizer", nb == 1 ? bs[0] : -1, t0 + res.check_s, gs_now(), 1);
  *skipped = res.skipped;
  return GS_OK;
}

static void end_round(gs_ps_server *s) {
  for (int r = 0; r < s->world; r++) {
    s->peers[r].last_step = (int64_t)s->step;
    s->peers[r].pushed = 0;
  }
  memset(s->got, 0, (size_t)s->world * s->nb);
  gs_ps_reduce_round(s->red);
  gs_pss_psgd_round(s);
  s->complete = 0;
  s->in_round = false;
  s->stepped = true;
  s->last_step = s->step;
  s->reduce_s = s->update_s = 0;
  s->sent = s->recv = 0;
}

/* Every push of bucket b is in its sum. Without loss scaling a bucket is
 * updated and sent back at once (the server's optimizer overlaps the later
 * buckets' pushes); with it, the verdict needs the whole step. */
static int bucket_done(gs_ps_server *s, int b, gs_err *e) {
  s->complete++;
  bool last = s->complete == s->nb, skip = false;
  if (s->sum_only) {
    GS_TRY(gs_pss_send_bucket(s, b, false, last, -1, e));
  } else if (!s->u.scaling) {
    GS_TRY(update(s, &b, 1, last, &skip, e));
    GS_TRY(gs_pss_send_bucket(s, b, false, last, -1, e));
  } else if (last) {
    int all[s->nb];
    for (int i = 0; i < s->nb; i++) all[i] = i;
    GS_TRY(update(s, all, s->nb, true, &skip, e));
    for (int i = 0; i < s->nb; i++) GS_TRY(gs_pss_send_bucket(s, i, skip, i == s->nb - 1, -1, e));
  }
  if (last) end_round(s);
  return GS_OK;
}

/* --------------------------------------------------------------- phases */

/* A push sent again, of the step just finished, by a rank that has not
 * started the next: its connection dropped before it had every bucket
 * back, so it pushes what is missing again. (Sums for a collective are
 * gone by then.) */
static bool again(const gs_ps_server *s, int r, const Gradsync__Push *p) {
  return p->again && s->stepped && !s->sum_only && p->step == s->last_step &&
         s->peers[r].last_step == (int64_t)s->last_step && s->peers[r].pushed == 0 &&
         p->bucket < (uint32_t)s->nb;
}

static int answer_again(gs_ps_server *s, int r, const Gradsync__Push *p, gs_err *e) {
  gs_pss_warn(s, "rank %d pushed step %llu bucket %u again (its connection "
              "dropped?); sending it that step's parameters again", r,
              (unsigned long long)p->step, p->bucket);
  return gs_pss_send_bucket(s, (int)p->bucket, s->last_skipped, false, r, e);
}

static void start_round(gs_ps_server *s, int r, const Gradsync__Push *p) {
  s->in_round = true;
  s->step = p->step;
  s->round_rank = r;
  s->round_t0 = gs_now();
}

static int on_push(gs_ps_server *s, int r, gs_wire_msg *m, gs_err *e) {
  const Gradsync__Push *p = m->env->push;
  if (!s->running)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients before every rank said "
                "hello", r);
  if (s->peers[r].bye)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients after saying goodbye", r);
  if (!s->stale && again(s, r, p)) return answer_again(s, r, p, e);
  if (s->stale) {
    /* the checks below that are not about rounds */
  } else if (!s->in_round) {
    if (s->stepped && p->step <= s->last_step)
      return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients for step %llu, but "
                  "step %llu is already done", r, (unsigned long long)p->step,
                  (unsigned long long)s->last_step);
  } else if (p->step != s->step) {
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed gradients for step %llu while rank "
                "%d pushed step %llu (ranks out of step)", r, (unsigned long long)p->step,
                s->round_rank, (unsigned long long)s->step);
  }
  if (p->bucket >= (uint32_t)s->nb)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed bucket %u of step %llu; the job has "
                "%d buckets", r, p->bucket, (unsigned long long)p->step, s->nb);
  int b = (int)p->bucket;
  if (p->part || gs_pss_psgd_step(s, p->step)) {
    /* PowerSGD's parts (powersgd_recv.c): the round as below, the rest there */
    if (!s->in_round) start_round(s, r, p);
    if (!s->peers[r].inproc) s->recv += m->bytes;
    bool rebuilt = false;
    GS_TRY(gs_pss_psgd_push(s, r, m, &rebuilt, e));
    return rebuilt ? bucket_done(s, b, e) : GS_OK;
  }
  if (p->offset != s->off[b] || p->count != s->cnt[b])
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d as [%llu, +%llu);"
                " the bucket is [%zu, +%zu)", r, (unsigned long long)p->step, b,
                (unsigned long long)p->offset, (unsigned long long)p->count, s->off[b],
                s->cnt[b]);
  if ((int)p->dtype < 0 || (int)p->dtype > 2 || gs_wire_dtype(p->dtype) != s->wire)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d in dtype %d; "
                "the job's wire dtype is %s", r, (unsigned long long)p->step, b, (int)p->dtype,
                gs_dtype_name(s->wire));
  gs_err pe = {0};
  if (s->topk > 0 || p->kept) {
    GS_TRY(gs_pss_topk_dense(s, r, m, e));
  } else if (gs_wire_expect_payload(m, s->cnt[b], s->wire, &pe) < 0) {
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d, step %llu bucket %d: %s", r,
                (unsigned long long)p->step, b, pe.msg);
  }
  if (s->stale) return gs_pss_stale_push(s, r, m, e);
  size_t i = (size_t)r * s->nb + b;
  if (s->got[i] && !p->again)
    return FAIL(s, e, GS_EPROTO, "ps server: rank %d pushed step %llu bucket %d twice", r,
                (unsigned long long)p->step, b);
  if (s->got[i]) { /* pushed again after a dropped connection: it is in the sum */
    gs_pss_warn(s, "rank %d pushed step %llu bucket %d again (its connection "
                "dropped?); the first push counts", r, (unsigned long long)p->step, b);
    return GS_OK;
  }
  if (!s->in_round) start_round(s, r, p);
  s->got[i] = 1;
  s->peers[r].pushed++;
  if (!s->peers[r].inproc) s->recv += m->bytes;
  /* what went out of this bucket's previous sum (sum_only) must be gone */
  GS_TRY(gs_pss_wait_inflight(s, b, e));
  bool done = false;
  gs_err re = {0};
  if (gs_ps_reduce_push(s->red, r, b, &m->payload, &done, &s->reduce_s, &re) < 0)
    return FAIL(s, e, re.code, "%s", re.msg);
  return done ? bucket_done(s, b, e) : GS_OK;
}

/* 1: every rank said goodbye. */
static int on_bye(gs_ps_server *s, int r, gs_err *e) {
  if (s->in_round && !s->stale)
    return FAIL(s, e, GS_EPEER, "ps server: rank %d said goodbye in the middle of step %llu",
                r, (unsigned long long)s->step);
  if (s->peers[r].bye) return GS_OK;
  s->peers[r].bye = true;
  if (s->stale) GS_TRY(gs_pss_stale_bye(s, r, e));
  if (s->nbye++ == 0) s->bye_t0 = gs_now();
  return s->nbye == s->world;
}

/* The deadline has passed: name who is missing. */
static int timed_out(gs_ps_server *s, gs_err *e) {
  char msg[900] = "";
  size_t len = 0;
  double t = s->timeout_ms / 1000.0;
  for (int r = 0; r < (s->have_init ? s->world : 0) && len < sizeof msg - 200; r++) {
    peer *p = &s->peers[r];
    char last[64];
    if (p->last_step < 0) snprintf(last, sizeof last, "no step completed yet");
    else snprintf(last, sizeof last, "last complete step %lld", (long long)p->last_step);
    if (!s->running && !p->known) {
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d never said hello to the "
                              "ps server in %.1f s (not started, or cannot reach %s)",
                              len ? "; " : "", r, t, s->tcp_ep);
    } else if (s->running && s->in_round && p->pushed < s->nb) {
      int b = 0;
      while (b < s->nb && s->got[(size_t)r * s->nb + b]) b++;
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d sent no gradients for "
                              "step %llu bucket %d in %.1f s (%s)", len ? "; " : "", r,
                              (unsigned long long)s->step, b, t, last);
    } else if (s->running && !s->in_round && s->nbye > 0 && !p->bye) {
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d did not say goodbye "
                              "within %.1f s of the first rank that did (%s)",
                              len ? "; " : "", r, t, last);
    }
  }
  if (!s->have_init)
    snprintf(msg, sizeof msg, "rank 0 sent no Init within %.1f s of the first hello", t);
  return FAIL(s, e, GS_ETIMEOUT, "ps server: %s", msg);
}

/* ------------------------------------------------------------------ API */

int gs_ps_server_create(const gs_ps_server_opts *o, gs_ps_server **out,
                        char tcp_ep[GS_ENDPOINT_MAX], char inproc_ep[GS_ENDPOINT_MAX], gs_err *e) {
  *out = NULL;
  gs_ps_server *s = calloc(1, sizeof *s);
  if (!s) {
    if (o->k) o->k->destroy(o->k);
    return GS_FAIL(e, GS_ENOMEM, "ps server: out of memory");
  }
  s->o = *o;
  s->k = o->k;
  s->cpu = o->k->device == GS_DEV_CPU;
  s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 60000;
  gs_sock_opts so = GS_SOCK_BULK(ZMQ_ROUTER);
  if (o->sockbuf > 0) so.sockbuf = o->sockbuf;
  so.router_mandatory = true;
  /* a rank whose connection dropped comes back with its routing id, and
   * what was queued for the dead connection is let go at once (lingering
   * would keep the parameters it points at held; the rank pushes again
   * and gets them anew); the close lingers again, for the last words */
  so.router_handover = true;
  so.linger_ms = 0;
  /* Frames larger than the model are an attack or a bug: ZeroMQ drops the
   * connection before buffering them. */
  so.max_msg = gs_sock_frame_max(o->max_elems * sizeof(float));
  /* a connection that does not prove the job's credential soon is
   * dropped, with whatever it made ZeroMQ buffer */
  so.handshake_ms = gs_sock_handshake_ms(s->timeout_ms);
  if (!(s->sock = gs_sock_open(o->zctx, &so, e))) {
    gs_err_prefix(e, "ps server: ");
    gs_ps_server_destroy(s);
    return GS_EIO;
  }
  int rc = gs_cred_bind(s->sock, &o->cred, o->host, s->tcp_ep, e);
  if (rc == GS_OK && o->inproc) {
    char ep[GS_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "inproc://gradsync-ps-%p", (void *)s);
    if (zmq_bind(s->sock, ep) < 0)
      rc = GS_FAIL(e, GS_EIO, "ps server: binding %s: %s", ep, zmq_strerror(errno));
    else if (inproc_ep)
      snprintf(inproc_ep, GS_ENDPOINT_MAX, "%s", ep);
  }
  if (rc < 0) {
    gs_ps_server_destroy(s);
    return rc;
  }
  snprintf(tcp_ep, GS_ENDPOINT_MAX, "%s", s->tcp_ep);
  *out = s;
  return GS_OK;
}

static int serve(gs_ps_server *s, gs_err *e);

int gs_ps_server_run(gs_ps_server *s, gs_err *e) {
  int rc = serve(s, e);
  if (rc < 0 && s->have_init && !s->running && s->peers) gs_pss_tell_latecomers(s, e);
  /* every rank said goodbye: the record of what was applied is complete */
  if (rc == GS_OK && s->o.applied.end) {
    rc = s->o.applied.end(s->o.applied.ctx, e);
    if (rc < 0) gs_err_prefix(e, "ps server: ");
  }
  return rc;
}

static int serve(gs_ps_server *s, gs_err *e) {
  for (;;) {
    double deadline = 0;
    if (!s->running && (s->have_init || s->npend > 0)) deadline = s->contact_t0;
    else if (s->running && s->in_round) deadline = s->round_t0;
    else if (s->running && s->nbye > 0) deadline = s->bye_t0;
    if (deadline > 0) deadline += s->timeout_ms / 1000.0;
    /* stopped: what is already queued first (the aborting rank's Error
     * carries its reason, which every other rank should hear), briefly */
    bool stopping = atomic_load(&s->stop);
    if (stopping && !s->stop_t0) s->stop_t0 = gs_now();
    if (stopping && gs_now() - s->stop_t0 > 0.2)
      return FAIL(s, e, GS_EPEER, "ps server: stopped by rank %d (it is closing the job)",
                  s->o.inproc ? s->o.inproc_rank : 0);
    int wait_ms = stopping ? 0 : SLICE_MS;
    if (deadline > 0) {
      double left = deadline - gs_now();
      if (left <= 0) return timed_out(s, e);
      if (!stopping && left * 1000.0 < SLICE_MS) wait_ms = (int)(left * 1000.0) + 1;
    }
    gs_wire_msg m;
    gs_err me = {0};
    size_t maxpay = s->o.max_elems * sizeof(float);
    int rc = gs_wire_recv(s->sock, true, wait_ms, s->o.job, maxpay, &m, &me);
    if (rc == GS_ETIMEOUT) {
      gs_wire_msg_close(&m);
      if (stopping)
        return FAIL(s, e, GS_EPEER, "ps server: stopped by rank %d (it is closing the job)",
                    s->o.inproc ? s->o.inproc_rank : 0);
      continue;
    }
    if (rc == GS_EINTR) {
      gs_wire_msg_close(&m);
      return FAIL(s, e, GS_EINTR, "ps server: interrupted");
    }
    if (rc < 0 && rc != GS_EPROTO) {
      gs_wire_msg_close(&m);
      return FAIL(s, e, rc, "ps server: receiving: %s", me.msg);
    }
    if (!gs_pss_id_fits(&m)) {
      gs_pss_warn(s, "dropped a message from a sender with a %zu-byte routing identity (at most "
                  "%zu)", zmq_msg_size(&m.id), sizeof(((peer *)0)->id));
      gs_wire_msg_close(&m);
      continue;
    }
    int r = m.has_id && s->have_init ? gs_pss_find_peer(s, &m.id) : -1;
    if (rc < 0) {
      gs_wire_msg_close(&m);
      if (r >= 0) return FAIL(s, e, rc, "ps server: rank %d sent a bad message: %s", r, me.msg);
      gs_pss_warn(s, "dropped a message from an unregistered sender: %s", me.msg);
      continue;
    }
    if (s->contact_t0 == 0) s->contact_t0 = gs_now();
    const Gradsync__Envelope *env = m.env;
    if (env->body_case == GRADSYNC__ENVELOPE__BODY_INIT) {
      rc = gs_pss_on_init(s, &m, e);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_HELLO) {
      rc = gs_pss_on_hello(s, &m, e);
    } else if (r < 0) {
      gs_pss_warn(s, "dropped a %s message from an unregistered sender claiming rank %u",
           gs_wire_kind(env), env->rank);
      rc = GS_OK;
    } else if (env->rank != (uint32_t)r) {
      rc = FAIL(s, e, GS_EPROTO, "ps server: rank %d's connection sent a message claiming to be "
                "rank %u", r, env->rank);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_PUSH) {
      rc = on_push(s, r, &m, e);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_SHUTDOWN) {
      rc = on_bye(s, r, e);
    } else if (env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
      const Gradsync__Error *er = env->error;
      rc = FAIL(s, e, GS_EPEER, "rank %d failed (%s): %s", r, er->phase ? er->phase : "?",
                er->message ? er->message : "no message");
    } else {
      rc = FAIL(s, e, GS_EPROTO, "ps server: rank %d sent a %s message, which a ps server never "
                "expects", r, gs_wire_kind(env));
    }
    gs_wire_msg_close(&m);
    if (rc < 0) return rc;
    if (rc == 1) return GS_OK;
  }
}

int gs_ps_io_threads(int world) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int n = world < 4 ? world : 4;
  if (cores > 0 && n > cores) n = (int)cores;
  return n < 1 ? 1 : n;
}

void gs_ps_server_stop(gs_ps_server *s) { atomic_store(&s->stop, 1); }

void gs_ps_server_set_job(gs_ps_server *s, uint64_t job) { s->o.job = job; }

void gs_ps_server_memory(gs_ps_server *s, uint64_t *device_bytes, uint64_t *host_bytes) {
  uint64_t red = 0, held = 0;
  if (s->red) gs_ps_reduce_bytes(s->red, &red, &held);
  for (int k = 0; k < 3; k++)
    if (s->psgd_red[k]) {
      uint64_t d = 0, h = 0;
      gs_ps_reduce_bytes(s->psgd_red[k], &d, &h);
      red += d;
      held += h;
    }
  /* Held pushes live in ZeroMQ's host buffers. */
  if (s->cpu) {
    *device_bytes = atomic_load(&s->dev_bytes) + red + gs_update_bytes(&s->u) + held;
    *host_bytes = 0;
  } else {
    *device_bytes = atomic_load(&s->dev_bytes) + red + gs_update_bytes(&s->u);
    *host_bytes = atomic_load(&s->host_bytes) + held;
  }
}

void gs_ps_server_destroy(gs_ps_server *s) {
  if (!s) return;
  gs_sock_close(s->sock, 2000);
  /* Outgoing zero-copy messages point into the master copy, the sums and
   * hout: wait until ZeroMQ let go of them (sent, or dropped after the
   * linger period). */
  bool leak = false;
  double t0 = gs_now();
  struct timespec ts = {0, 1000000};
  for (;;) {
    int held = atomic_load(&s->inflight_welcome);
    for (size_t i = 0; s->inflight && i < (size_t)s->nb * s->world; i++)
      held += atomic_load(&s->inflight[i]);
    if (held == 0) break;
    if (gs_now() - t0 > 5.0) {
      leak = true;
      fprintf(stderr, "gradsync ps server: warning: ZeroMQ still holds %d outgoing messages "
              "after 5 s; leaving their buffers allocated\n", held);
      break;
    }
    nanosleep(&ts, NULL);
  }
  if (leak) return; /* release callbacks may still run: keep everything */
  gs_pss_stale_free(s);
  gs_pss_psgd_free(s);
  gs_ps_reduce_destroy(s->red);
  gs_update_free(&s->u);
  if (s->master) s->k->release(s->k, s->master);
  if (s->wout) s->k->release(s->k, s->wout);
  if (s->hout) s->k->release_host(s->k, s->hout);
  free(s->inflight);
  s->k->destroy(s->k);
  free(s->off);
  free(s->cnt);
  free(s->peers);
  free(s->pend);
  free(s->got);
  free(s);
}
