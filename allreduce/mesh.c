/* mesh.c: a socket from every rank to every other, for the algorithms that
 * exchange with ranks other than the ring neighbours (rd.c: recursive
 * doubling, direct.c: direct exchange). Each rank binds one PULL socket, in the ring
 * pair's ZeroMQ context (so the same credential admits peers), and
 * connects a PUSH socket to every other rank's. Its endpoint travels in the
 * ring's handshake, so the launcher still exchanges one endpoint per rank.
 *
 * Messages from one peer arrive in the order it sent them (one connection
 * per pair), but peers interleave: a rank may hear from the partner of its
 * next round, or of its next collective, before the one it waits for. Such
 * a message waits in that peer's queue (a few at most: no rank can run
 * more than one collective ahead of another); a receive takes from the
 * peer's queue first. An Error from any rank stops the wait with its
 * cause, and a failing rank tells every peer, so nobody waits for its
 * timeout. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/mesh.h"

#define SLICE_MS 50
/* Messages one peer may be ahead by: its next round's and its next
 * collective's, with room to spare; more is a protocol error. */
#define QUEUE_MAX 8

typedef struct peer_queue {
  gs_wire_msg m[QUEUE_MAX];
  int head, n;
} peer_queue;

struct gs_mesh {
  int rank, world, timeout_ms, spin_us;
  uint64_t job;
  void *ctx;                 /* the pair's */
  size_t max_payload;
  gs_cred cred;
  void *pull;
  void **push;               /* world entries; NULL for this rank */
  gs_dial **dial;            /* world entries: each push socket's connection */
  gs_resend **out;           /* world entries: what each peer may not have yet */
  gs_seq_in *in;             /* world entries: each peer's numbers */
  gs_pair *pair;               /* whose waits look at out too */
  bool keep;                 /* !gs_comm_opts.no_resend */
  peer_queue *q;             /* world entries */
  bool told;
  unsigned dropped;
  atomic_int stop;
  uint8_t hbuf[4096];
  char (*eps)[GS_ENDPOINT_MAX]; /* world entries: what each rank published */
};

static const char *where(const gs_pair_where *w, char *buf, size_t cap) {
  if (!w || !w->fn) return "the mesh";
  w->fn(w->ctx, buf, cap);
  return buf;
}

int gs_mesh_open(const gs_comm *r, void *zctx, size_t max_payload, gs_mesh **out, gs_err *e) {
  *out = NULL;
  const gs_comm_opts *o = &r->o;
  gs_mesh *m = calloc(1, sizeof *m);
  if (!m) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the mesh", o->rank);
  m->rank = o->rank;
  m->world = o->world;
  m->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
  m->spin_us = r->spin_us;
  m->ctx = zctx;
  m->max_payload = max_payload;
  m->cred = o->cred;
  m->push = calloc((size_t)o->world, sizeof *m->push);
  m->dial = calloc((size_t)o->world, sizeof *m->dial);
  m->q = calloc((size_t)o->world, sizeof *m->q);
  m->out = calloc((size_t)o->world, sizeof *m->out);
  m->in = calloc((size_t)o->world, sizeof *m->in);
  m->eps = calloc((size_t)o->world, sizeof *m->eps);
  m->pair = r->pair;
  m->keep = !o->no_resend;
  int rc = GS_OK;
  if (!m->push || !m->dial || !m->q || !m->out || !m->in || !m->eps) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the mesh", o->rank);
    goto out;
  }
  gs_sock_opts so = {
    .type = ZMQ_PULL, .rcvhwm = GS_SOCK_UNBOUNDED, .linger_ms = 0,
    .max_msg = gs_sock_frame_max(max_payload),
    /* as the ring's: a connection that never finishes its handshake is dropped */
    .handshake_ms = gs_sock_handshake_ms(m->timeout_ms),
  };
  if (!(m->pull = gs_sock_open(zctx, &so, e))) {
    gs_err_prefix(e, "rank %d: mesh: ", o->rank);
    rc = GS_EIO;
    goto out;
  }
  char ep[GS_ENDPOINT_MAX];
  rc = gs_cred_bind(m->pull, &o->cred, r->host, ep, e);
  if (rc < 0) {
    gs_err_prefix(e, "rank %d: mesh: ", o->rank);
    goto out;
  }
  snprintf(m->eps[m->rank], GS_ENDPOINT_MAX, "%s", ep);
out:
  if (rc < 0) {
    gs_mesh_close(m, true);
    return rc;
  }
  *out = m;
  return GS_OK;
}

void gs_mesh_hello(const gs_mesh *m, int origin, Gradsync__RingHello *h) {
  h->mesh_endpoint = (char *)m->eps[origin];
}

void gs_mesh_heard(gs_mesh *m, int origin, const Gradsync__RingHello *h) {
  snprintf(m->eps[origin], GS_ENDPOINT_MAX, "%s", h->mesh_endpoint ? h->mesh_endpoint : "");
}

/* Rank i's mesh socket is bound where its ring socket is, so it is reached
 * at the host of the ring endpoint the launcher published (which may
 * differ from the one the rank wrote, behind a wildcard bind) and the port
 * of the mesh endpoint the handshake brought. */
static void address(const char *ring_ep, const char *mesh_ep, char out[GS_ENDPOINT_MAX]) {
  const char *rc = ring_ep ? strrchr(ring_ep, ':') : NULL, *mc = strrchr(mesh_ep, ':');
  if (!rc || !mc || strncmp(ring_ep, "tcp://", 6) || rc < ring_ep + 6)
    snprintf(out, GS_ENDPOINT_MAX, "%s", mesh_ep);
  else
    snprintf(out, GS_ENDPOINT_MAX, "%.*s%s", (int)(rc - ring_ep), ring_ep, mc);
}

int gs_mesh_connect(gs_mesh *m, const char *const *ring_eps, uint64_t job, gs_err *e) {
  m->job = job;
  char ep[GS_ENDPOINT_MAX];
  for (int p = 0; p < m->world; p++) {
    if (p == m->rank) continue;
    if (!m->eps[p][0])
      return GS_FAIL(e, GS_EMISMATCH, "rank %d: rank %d has no mesh endpoint (it runs the ring "
                     "only: every rank must be given the same algorithm)", m->rank, p);
    gs_sock_opts so = {.type = ZMQ_PUSH, .sndhwm = GS_SOCK_UNBOUNDED,
                       .linger_ms = m->timeout_ms, .sndtimeo_ms = m->timeout_ms};
    void *s = gs_sock_open(m->ctx, &so, e);
    if (!s) {
      gs_err_prefix(e, "rank %d: mesh: ", m->rank);
      return GS_EIO;
    }
    m->push[p] = s;
    address(ring_eps ? ring_eps[p] : NULL, m->eps[p], ep);
    int rc = gs_dial_open(m->ctx, s, &m->cred, ep, &m->dial[p], e);
    if (rc < 0) {
      gs_err_prefix(e, "rank %d: connecting to rank %d's mesh socket: ", m->rank, p);
      return rc;
    }
    GS_TRY(gs_resend_open(m->dial[p], s, m->rank, p, "mesh", m->keep, &m->out[p], e));
    GS_TRY(gs_pair_follow(m->pair, m->out[p], e));
  }
  return GS_OK;
}

int gs_mesh_send(gs_mesh *m, int peer, const Gradsync__Envelope *env, const void *data,
                 size_t bytes, uint64_t *sent, const gs_pair_where *w, gs_err *e) {
  Gradsync__Envelope numbered = *env;
  numbered.seq = gs_resend_next(m->out[peer]);
  size_t hlen = gs_wire_pack(&numbered, m->hbuf, sizeof m->hbuf);
  if (hlen > sizeof m->hbuf)
    return GS_FAIL(e, GS_EINVAL, "rank %d: a header of %zu bytes", m->rank, hlen);
  GS_TRY(gs_resend_keep(m->out[peer], numbered.seq, m->hbuf, hlen, data, bytes, NULL, false, e));
  void *s = m->push[peer];
  if (zmq_send(s, m->hbuf, hlen, bytes ? ZMQ_SNDMORE : 0) < 0 ||
      (bytes && zmq_send(s, data, bytes, 0) < 0)) {
    char wb[160];
    if (errno == EAGAIN)
      return GS_FAIL(e, GS_ETIMEOUT, "rank %d: could not queue a %s for rank %d in %s within "
                     "%.1f s", m->rank, gs_wire_kind(env), peer, where(w, wb, sizeof wb),
                     m->timeout_ms / 1000.0);
    return GS_FAIL(e, GS_EIO, "rank %d: sending to rank %d in %s: %s", m->rank, peer,
                   where(w, wb, sizeof wb), zmq_strerror(errno));
  }
  *sent += hlen + bytes;
  return GS_OK;
}

/* 1 readable, 0 the deadline passed; polls up to spin_us first when asked. */
static int wait_in(gs_mesh *m, double deadline, bool spin, gs_err *e) {
  zmq_pollitem_t it = {.socket = m->pull, .events = ZMQ_POLLIN};
  if (spin && m->spin_us > 0) {
    double until = gs_now() + m->spin_us * 1e-6;
    do {
      if (zmq_poll(&it, 1, 0) > 0) return 1;
      sched_yield();
    } while (gs_now() < until);
  }
  for (;;) {
    if (atomic_load(&m->stop)) return GS_FAIL(e, GS_EINTR, "rank %d: ring interrupted", m->rank);
    if (gs_interrupted) return GS_FAIL(e, GS_EINTR, "rank %d: interrupted", m->rank);
    GS_TRY(gs_pair_check(m->pair, false, e));
    double left = deadline - gs_now();
    int slice = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
    if (slice > SLICE_MS) slice = SLICE_MS;
    int rc = zmq_poll(&it, 1, slice);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return GS_FAIL(e, GS_EIO, "rank %d: zmq_poll: %s", m->rank, zmq_strerror(errno));
    }
    if (rc > 0) return 1;
    if (left <= 0) return 0;
  }
}

static void dropped(gs_mesh *m, const char *why) {
  if (m->dropped++ < 5)
    fprintf(stderr, "rank %d: mesh: dropped a message: %s%s\n", m->rank, why,
            m->dropped == 5 ? "; further drops are not shown" : "");
}

int gs_mesh_recv(gs_mesh *m, int peer, bool spin, gs_wire_msg *out, uint64_t *bytes,
                 const gs_pair_where *w, gs_err *e) {
  memset(out, 0, sizeof *out);
  peer_queue *q = &m->q[peer];
  if (q->n > 0) {
    *out = q->m[q->head];
    q->head = (q->head + 1) % QUEUE_MAX;
    q->n--;
    return GS_OK;
  }
  char wb[160];
  double t0 = gs_now(), deadline = t0 + m->timeout_ms / 1000.0;
  for (bool first = true;; first = false) {
    int ready = wait_in(m, deadline, first && spin, e);
    if (ready < 0) return ready;
    if (ready == 0)
      return GS_FAIL(e, GS_ETIMEOUT, "rank %d: nothing from rank %d in %s, for %.1f s (rank %d "
                     "died, stalled, or runs something else)", m->rank, peer,
                     where(w, wb, sizeof wb), gs_now() - t0, peer);
    gs_wire_msg msg;
    gs_err we = {0};
    errno = 0;
    int rc = gs_wire_read(m->pull, false, m->job, m->max_payload, NULL, &msg, &we);
    *bytes += msg.bytes;
    /* While peers' connections are being set up, the socket may say
     * readable with nothing to read yet: wait again, nothing was dropped. */
    if (rc == GS_EIO && errno == EAGAIN && msg.bytes == 0) {
      gs_wire_msg_close(&msg);
      continue;
    }
    if (rc == GS_EINTR) {
      gs_wire_msg_close(&msg);
      return GS_FAIL(e, rc, "rank %d: ring interrupted", m->rank);
    }
    if (rc < 0) {
      gs_wire_msg_close(&msg);
      dropped(m, we.msg);
      continue;
    }
    uint32_t from = msg.env->rank;
    if (msg.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR && from < (uint32_t)m->world) {
      int code = GS_FAIL(e, GS_EPEER, "rank %d: rank %u stopped while rank %d waited for rank %d "
                         "in %s: %s", m->rank, from, m->rank, peer, where(w, wb, sizeof wb),
                         msg.env->error->message ? msg.env->error->message : "");
      gs_wire_msg_close(&msg);
      return code;
    }
    if (from >= (uint32_t)m->world || from == (uint32_t)m->rank) {
      char why[200];
      snprintf(why, sizeof why, "a %s message claiming rank %u, in a world of %d",
               gs_wire_kind(msg.env), from, m->world);
      gs_wire_msg_close(&msg);
      dropped(m, why);
      continue;
    }
    if (!gs_resend_fresh(&m->in[from], msg.env->seq, m->rank, (int)from, "mesh")) {
      gs_wire_msg_close(&msg);
      continue;
    }
    if (from == (uint32_t)peer) {
      *out = msg;
      return GS_OK;
    }
    peer_queue *o = &m->q[from];
    if (o->n == QUEUE_MAX) {
      gs_wire_msg_close(&msg);
      return GS_FAIL(e, GS_EPROTO, "rank %d: rank %u sent more than %d messages ahead while rank "
                     "%d waited for rank %d in %s (ranks out of step)", m->rank, from, QUEUE_MAX,
                     m->rank, peer, where(w, wb, sizeof wb));
    }
    o->m[(o->head + o->n++) % QUEUE_MAX] = msg;
  }
}

void gs_mesh_tell(gs_mesh *m, const char *msg) {
  if (!m || m->told) return;
  m->told = true;
  Gradsync__Envelope env;
  Gradsync__Error err = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, m->job, (uint32_t)m->rank);
  err.phase = (char *)"mesh";
  err.message = (char *)msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &err;
  size_t len = gs_wire_pack(&env, m->hbuf, sizeof m->hbuf);
  if (len > sizeof m->hbuf) return;
  for (int p = 0; p < m->world; p++)
    if (m->push[p]) zmq_send(m->push[p], m->hbuf, len, ZMQ_DONTWAIT); /* best effort */
}

void gs_mesh_interrupt(gs_mesh *m) {
  if (m) atomic_store(&m->stop, 1);
}

void gs_mesh_close(gs_mesh *m, bool abort) {
  if (!m) return;
  if (m->q)
    for (int p = 0; p < m->world; p++)
      for (int i = 0; i < m->q[p].n; i++)
        gs_wire_msg_close(&m->q[p].m[(m->q[p].head + i) % QUEUE_MAX]);
  if (m->push)
    for (int p = 0; p < m->world; p++) {
      if (!m->push[p]) continue;
      if (m->out && m->out[p]) {
        gs_pair_unfollow(m->pair, m->out[p]);
        gs_resend_close(m->out[p]);
      }
      if (m->dial) gs_dial_close(m->dial[p]);
      gs_sock_close(m->push[p], abort ? 100 : GS_SOCK_AS_OPENED);
    }
  gs_sock_close(m->pull, GS_SOCK_AS_OPENED);
  free(m->push);
  free(m->dial);
  free(m->out);
  free(m->in);
  free(m->q);
  free(m->eps);
  free(m);
}
