/* server_send.c: the ps server's sending side (server_core.h): the
 * parameters (or sums) of a bucket to every rank, or again to one whose
 * connection dropped, sent zero-copy from the server's buffers, with a
 * count per (bucket, rank) of what ZeroMQ still holds, and the wait for
 * those counts to clear before a bucket is written again. */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "ps/server_core.h"

/* Wait until ZeroMQ released every message that still points at bucket b
 * (and at the Welcome's parameters). Normally already the case: a worker
 * pushes step s+1 only after it received step s. */
static bool holds(gs_ps_server *s, int b) {
  for (int r = 0; r < s->world; r++)
    if (atomic_load(&s->inflight[(size_t)b * s->world + r]) > 0) return true;
  return atomic_load(&s->inflight_welcome) > 0;
}

int gs_pss_wait_inflight(gs_ps_server *s, int b, gs_err *e) {
  double t0 = gs_now();
  struct timespec ts = {0, 50000};
  while (holds(s, b)) {
    if (gs_now() - t0 > s->timeout_ms / 1000.0) {
      char who[256] = "";
      size_t n = 0;
      int many = 0;
      for (int r = 0; r < s->world && n + 16 < sizeof who; r++)
        if (atomic_load(&s->inflight[(size_t)b * s->world + r]) > 0) {
          n += (size_t)snprintf(who + n, sizeof who - n, "%s%d", n ? ", " : "", r);
          many++;
        }
      return FAIL(s, e, GS_ETIMEOUT, "ps server: ZeroMQ still holds bucket %d's outgoing "
                  "parameters for %s %s after %.1f s (not reading: dead or stalled)", b,
                  many > 1 ? "ranks" : "rank", n ? who : "joining", s->timeout_ms / 1000.0);
    }
    nanosleep(&ts, NULL);
    /* let the socket run its pending commands: a dead connection's queue
     * (and what it holds) is let go only in this thread */
    int ev = 0;
    size_t sz = sizeof ev;
    zmq_getsockopt(s->sock, ZMQ_EVENTS, &ev, &sz);
  }
  return GS_OK;
}

/* Header size of a Params message, which depends on the byte counts it
 * reports: iterate until the reported bytes include the header itself. */
static uint64_t final_sent(gs_ps_server *s, Gradsync__Envelope *env, Gradsync__Params *p,
                           size_t payload) {
  int remote = 0;
  for (int r = 0; r < s->world; r++) remote += !s->peers[r].inproc;
  uint64_t total = s->sent;
  for (int i = 0; i < 4; i++) {
    p->bytes_sent = total;
    total = s->sent + (uint64_t)remote * (gradsync__envelope__get_packed_size(env) + payload);
  }
  return total;
}

/* only >= 0: to that rank alone, again (its connection dropped): the
 * bucket still holds the finished step's parameters, since nobody can push
 * the next step's before this rank has them. */
int gs_pss_send_bucket(gs_ps_server *s, int b, bool skipped, bool last, int only,
                       gs_err *e) {
  size_t c = s->cnt[b], o = s->off[b];
  const float *src = s->sum_only ? gs_ps_reduce_sum(s->red, b) : s->master + o;
  /* mixed precision: parameters travel in the wire dtype like the
   * gradients (half the bytes both ways); the fp32 master stays here, with
   * the optimizer, and workers compute with the low-precision copy anyway */
  gs_dtype out = s->sum_only ? GS_F32 : s->wire;
  size_t esz = gs_dtype_size(out);
  const void *data = NULL;
  size_t len = 0;
  if (!skipped) {
    len = c * esz;
    if (out != GS_F32) {
      GS_TRY(gs_pss_wait_inflight(s, b, e));
      double t0 = gs_now();
      char *w = (char *)s->wout + o * esz;
      s->k->convert(s->k, out, w, GS_F32, src, c);
      if (!s->cpu) s->k->to_host(s->k, (char *)s->hout + o * esz, w, len);
      GS_TRY(gs_pss_kernel_check(s, "converting parameters to the wire dtype", e));
      s->update_s += gs_now() - t0;
      data = s->cpu ? (const void *)w : (const void *)((char *)s->hout + o * esz);
    } else if (s->cpu) {
      data = src;
    } else {
      GS_TRY(gs_pss_wait_inflight(s, b, e));
      double t0 = gs_now();
      s->k->to_host(s->k, s->hout + o, src, len);
      GS_TRY(gs_pss_kernel_check(s, "copying parameters to the host", e));
      s->update_s += gs_now() - t0;
      data = s->hout + o;
    }
  }
  Gradsync__Envelope env;
  Gradsync__Params p = GRADSYNC__PARAMS__INIT;
  gs_wire_env(&env, s->o.job, GS_SERVER_RANK);
  p.step = only >= 0 ? s->last_step : s->step;
  p.bucket = (uint32_t)b;
  p.offset = o;
  p.count = c;
  p.skipped = skipped;
  p.scale = s->u.scaler.scale;
  p.dtype = gs_wire_pbdtype(out);
  env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS;
  env.params = &p;
  if (only >= 0) {
    p.reduce_s = s->last_cost.reduce_s;
    p.update_s = s->last_cost.update_s;
    p.bytes_recv = s->last_cost.bytes_recv;
    p.bytes_sent = s->last_cost.bytes_sent;
  } else if (last) {
    p.reduce_s = s->reduce_s;
    p.update_s = s->update_s;
    p.bytes_recv = s->recv;
    p.bytes_sent = final_sent(s, &env, &p, len);
    s->last_cost = p;
    s->last_skipped = skipped;
  }
  for (int r = only >= 0 ? only : 0; r < (only >= 0 ? only + 1 : s->world); r++) {
    peer *pr = &s->peers[r];
    gs_err se = {0};
    atomic_int *held = &s->inflight[(size_t)b * s->world + r];
    if (data) atomic_fetch_add(held, 1);
    int rc = gs_wire_send(s->sock, pr->id, pr->idlen, &env, data, len,
                          data ? gs_pss_release_count : NULL, held, s->timeout_ms,
                          pr->inproc ? NULL : &s->sent, &se);
    if (rc == GS_EPEER && !pr->inproc) {
      /* not connected now: a dropped connection that ZeroMQ is bringing
       * back (the rank pushes again then, and gets this bucket), or a dead
       * rank (its missing pushes name it at the deadline) */
      gs_pss_warn(s, "rank %d is not connected (%s); it gets step %llu bucket %d "
                  "when it pushes again", r, se.msg, (unsigned long long)p.step, b);
    } else if (rc < 0) {
      return FAIL(s, e, rc, "ps server: sending step %llu bucket %d to rank %d: %s",
                  (unsigned long long)p.step, b, r, se.msg);
    }
  }
  return GS_OK;
}
