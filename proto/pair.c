/* pair.c: a rank's socket pair to its ring neighbours (proto.h, gs_pair): a PULL
 * socket it binds for its left neighbour and a PUSH socket it connects to
 * its right one, with everything a stream between neighbours needs besides
 * the algorithm: socket options, a monitor that notices at once when the
 * left neighbour's connection drops, interrupt-aware waits (a short poll
 * first for latency, then sleep in slices), checked receives through
 * gs_wire_read into a fixed arena (no malloc per message), zero-copy sends
 * with a per-chunk "ZeroMQ still holds it" flag, and the relay of errors
 * around the ring so that every rank stops with the cause, not a timeout. */
#include "proto/proto.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLICE_MS 50
/* after the left neighbour disconnects: room for ZeroMQ to reconnect
 * (reconnect_ivl, 100 to 200 ms) when only the connection dropped */
#define GONE_GRACE_S 1.0
#define HDR_MAX 4096           /* a chunk header is ~50 bytes; an Error ~1 KiB */
#define ARENA_BYTES (64 << 10) /* protobuf-c unpack of one header of HDR_MAX */

struct gs_pair {
  gs_pair_cfg c;
  char host[256];
  void *ctx, *pull, *push, *mon;
  gs_dial *dial;             /* the push socket's connection to the right */
  gs_zap *zap;
  bool told_right;           /* the right neighbour has been told why we stop */
  int errors_sent;
  double left_gone_at;       /* > 0: the left neighbour closed its connection */
  uint32_t peer_fd[32];      /* open connections on the PULL socket */
  int npeers;
  unsigned dropped;           /* foreign messages, for the first few lines */
  gs_resend *out;            /* what the right neighbour may not have yet */
  gs_seq_in in;              /* the left neighbour's numbers */
  gs_resend **watch;         /* out, and the mesh's: looked at in every wait */
  int nwatch, watch_cap;
  atomic_int stop;           /* gs_pair_interrupt */
  gs_wire_msg last;          /* the last message received (its env lives in the arena) */
  ProtobufCAllocator alloc;  /* bump allocator over arena */
  size_t arena_used;
  uint8_t *arena;
  uint8_t hbuf[HDR_MAX];
};

static void *arena_alloc(void *data, size_t size) {
  gs_pair *l = data;
  size = (size + 15) & ~(size_t)15;
  if (size > ARENA_BYTES - l->arena_used) return NULL;
  void *p = l->arena + l->arena_used;
  l->arena_used += size;
  return p;
}
static void arena_free(void *data, void *p) {}

static const char *where(const gs_pair_where *w, char *buf, size_t cap) {
  if (!w || !w->fn) return "the ring";
  w->fn(w->ctx, buf, cap);
  return buf;
}

/* ------------------------------------------------------------------ */
/* opening and closing */

int gs_pair_open(const gs_pair_cfg *c, gs_pair **out, char endpoint[GS_ENDPOINT_MAX],
                 gs_err *e) {
  *out = NULL;
  gs_pair *l = calloc(1, sizeof *l);
  if (!l) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", c->rank);
  l->c = *c;
  snprintf(l->host, sizeof l->host, "%s", c->host && *c->host ? c->host : "127.0.0.1");
  l->c.host = l->host;
  if (l->c.timeout_ms <= 0) l->c.timeout_ms = 30000;
  l->alloc.alloc = arena_alloc;
  l->alloc.free = arena_free;
  l->alloc.allocator_data = l;
  int rc = GS_OK;
  if (!(l->arena = gs_alloc(ARENA_BYTES, e))) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory creating the ring", c->rank);
    goto out;
  }
  if (!(l->ctx = gs_sock_context(c->io_threads > 0 ? c->io_threads : 1, e))) {
    gs_err_prefix(e, "rank %d: ", c->rank);
    rc = GS_EIO;
    goto out;
  }
  char who[64];
  snprintf(who, sizeof who, "rank %d: ring", c->rank);
  if ((rc = gs_zap_start(l->ctx, &c->cred, 0, who, &l->zap, e)) < 0) goto out;
  gs_sock_opts o = {
    .type = ZMQ_PULL, .rcvhwm = GS_SOCK_UNBOUNDED, .linger_ms = 0, .sockbuf = c->sockbuf,
    /* a peer that connects and never completes the handshake is dropped
     * soon, so that its idle connection cannot stand in for the left
     * neighbour's */
    .handshake_ms = gs_sock_handshake_ms(l->c.timeout_ms),
    .max_msg = gs_sock_frame_max(c->max_payload),
  };
  if (!(l->pull = gs_sock_open(l->ctx, &o, e))) {
    gs_err_prefix(e, "rank %d: ", c->rank);
    rc = GS_EIO;
    goto out;
  }
  char ep[GS_ENDPOINT_MAX];
  rc = gs_cred_bind(l->pull, &c->cred, l->host, ep, e);
  if (rc < 0) {
    gs_err_prefix(e, "rank %d: ring: ", c->rank);
    goto out;
  }
  /* Learn at once when the left neighbour's connection drops. */
  l->mon = gs_wire_monitor(l->ctx, l->pull, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED);
  if (endpoint) snprintf(endpoint, GS_ENDPOINT_MAX, "%s", ep);
out:
  if (rc < 0) {
    gs_pair_close(l, true);
    return rc;
  }
  *out = l;
  return GS_OK;
}

void gs_pair_set_job(gs_pair *l, uint64_t job) { l->c.job = job; }

void *gs_pair_zmq_context(gs_pair *l) { return l->ctx; }

int gs_pair_connect(gs_pair *l, const char *right, gs_err *e) {
  if (!right || !*right)
    return GS_FAIL(e, GS_EINVAL, "rank %d: no endpoint for rank %d (right); the launcher must "
                   "pass every rank's prepare() endpoint", l->c.rank, l->c.right);
  gs_sock_opts o = {
    .type = ZMQ_PUSH, .sndhwm = GS_SOCK_UNBOUNDED, .sockbuf = l->c.sockbuf,
    .sndtimeo_ms = l->c.timeout_ms,
    .linger_ms = l->c.timeout_ms, /* an orderly close flushes what the right neighbour needs */
  };
  if (!(l->push = gs_sock_open(l->ctx, &o, e))) {
    gs_err_prefix(e, "rank %d: ", l->c.rank);
    return GS_EIO;
  }
  int rc = gs_dial_open(l->ctx, l->push, &l->c.cred, right, &l->dial, e);
  if (rc < 0) {
    gs_err_prefix(e, "rank %d: connecting to rank %d (right): ", l->c.rank, l->c.right);
    return rc;
  }
  GS_TRY(gs_resend_open(l->dial, l->push, l->c.rank, l->c.right, "right", !l->c.no_resend,
                        &l->out, e));
  return gs_pair_follow(l, l->out, e);
}

void gs_pair_close(gs_pair *l, bool abort) {
  if (!l) return;
  gs_wire_msg_close(&l->last);
  gs_resend_close(l->out);
  gs_dial_close(l->dial);
  free(l->watch);
  gs_wire_monitor_close(l->pull, l->mon);
  gs_sock_close(l->pull, GS_SOCK_AS_OPENED);
  /* aborting: a moment for an Error to leave, then drop everything */
  gs_sock_close(l->push, abort ? 100 : GS_SOCK_AS_OPENED);
  gs_sock_context_end(l->ctx, l->zap); /* releases whatever ZeroMQ still held */
  gs_free(l->arena);
  free(l);
}

void gs_pair_interrupt(gs_pair *l) {
  if (l) atomic_store(&l->stop, 1);
}

/* ------------------------------------------------------------------ */
/* what is sent again after a reconnect: the right neighbour's log and the
 * mesh's, looked at in every wait, since the rank that needs a resend may
 * be the one this rank waits for */

int gs_pair_follow(gs_pair *l, gs_resend *s, gs_err *e) {
  if (!s) return GS_OK;
  if (l->nwatch == l->watch_cap) {
    int nc = l->watch_cap ? 2 * l->watch_cap : 8;
    gs_resend **nw = realloc(l->watch, (size_t)nc * sizeof *nw);
    if (!nw) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", l->c.rank);
    l->watch = nw;
    l->watch_cap = nc;
  }
  l->watch[l->nwatch++] = s;
  return GS_OK;
}

void gs_pair_unfollow(gs_pair *l, gs_resend *s) {
  for (int i = 0; l && i < l->nwatch; i++)
    if (l->watch[i] == s) l->watch[i--] = l->watch[--l->nwatch];
}

int gs_pair_check(gs_pair *l, bool now, gs_err *e) {
  for (int i = 0; i < l->nwatch; i++) GS_TRY(gs_resend_check(l->watch[i], now, e));
  return GS_OK;
}

void gs_pair_begin(gs_pair *l, bool settles) {
  for (int i = 0; l && i < l->nwatch; i++) gs_resend_begin(l->watch[i], settles);
}

int gs_pair_end(gs_pair *l, gs_err *e) {
  for (int i = 0; l && i < l->nwatch; i++) GS_TRY(gs_resend_end(l->watch[i], e));
  return GS_OK;
}

uint64_t gs_pair_last_seq(const gs_pair *l) { return gs_resend_last(l->out); }

void gs_pair_acked(gs_pair *l, uint64_t seq) { gs_resend_acked(l->out, seq); }

/* ------------------------------------------------------------------ */
/* errors around the ring */

void gs_pair_tell(gs_pair *l, const char *phase, const char *msg) {
  if (!l->push || l->errors_sent > 4 * l->c.world) return;
  l->errors_sent++;
  l->told_right = true;
  Gradsync__Envelope env;
  Gradsync__Error err = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, l->c.job, (uint32_t)l->c.rank);
  err.phase = (char *)phase;
  err.message = (char *)msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &err;
  size_t len = gs_wire_pack(&env, l->hbuf, sizeof l->hbuf);
  if (len > sizeof l->hbuf) return;
  zmq_send(l->push, l->hbuf, len, ZMQ_DONTWAIT); /* best effort, never blocks */
}

void gs_pair_tell_once(gs_pair *l, const char *phase, const char *msg) {
  if (!l->told_right) gs_pair_tell(l, phase, msg);
}

void gs_pair_told(gs_pair *l) { l->told_right = true; }

/* ------------------------------------------------------------------ */
/* receiving */

/* Monitor events of the PULL socket: the open TCP connections (the left
 * neighbour's, and any stranger's), by file descriptor. When the last of
 * them closes, the left neighbour is gone. */
static void watch_left(gs_pair *l) {
  uint16_t id;
  uint32_t fd;
  while (gs_wire_monitor_event(l->mon, &id, &fd)) {
    if (id == ZMQ_EVENT_ACCEPTED) {
      if (l->npeers < (int)(sizeof l->peer_fd / sizeof *l->peer_fd)) l->peer_fd[l->npeers++] = fd;
      l->left_gone_at = 0;
    } else if (id == ZMQ_EVENT_DISCONNECTED) {
      for (int i = 0; i < l->npeers; i++) {
        if (l->peer_fd[i] != fd) continue;
        l->peer_fd[i] = l->peer_fd[--l->npeers];
        if (l->npeers == 0 && l->left_gone_at == 0) l->left_gone_at = gs_now();
        break;
      }
    }
  }
}

/* Wait until the PULL socket has a message: 1, or 0 when the deadline (or
 * the grace after the left neighbour disconnected) passed. */
static int wait_in(gs_pair *l, double deadline, gs_err *e) {
  for (;;) {
    if (atomic_load(&l->stop)) return GS_FAIL(e, GS_EINTR, "rank %d: ring interrupted", l->c.rank);
    if (gs_interrupted) return GS_FAIL(e, GS_EINTR, "rank %d: interrupted", l->c.rank);
    GS_TRY(gs_pair_check(l, false, e));
    double now = gs_now();
    double end = deadline;
    if (l->left_gone_at > 0 && l->left_gone_at + GONE_GRACE_S < end)
      end = l->left_gone_at + GONE_GRACE_S;
    double left = end - now;
    int slice = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
    if (slice > SLICE_MS) slice = SLICE_MS;
    zmq_pollitem_t it[2] = {{.socket = l->pull, .events = ZMQ_POLLIN},
                            {.socket = l->mon, .events = ZMQ_POLLIN}};
    int rc = zmq_poll(it, l->mon ? 2 : 1, slice);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return GS_FAIL(e, GS_EIO, "rank %d: zmq_poll: %s", l->c.rank, zmq_strerror(errno));
    }
    if (it[0].revents & ZMQ_POLLIN) return 1;
    if (l->mon && (it[1].revents & ZMQ_POLLIN)) watch_left(l);
    if (left <= 0) return 0;
  }
}

/* Whether a message is waiting now: ZMQ_EVENTS is read from the socket's
 * own state, no system call (a message usually is there already). */
static bool ready_now(gs_pair *l) {
  int ev = 0;
  size_t sz = sizeof ev;
  return zmq_getsockopt(l->pull, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN);
}

/* Whether a message is waiting, after polling up to spin_us (yielding the
 * core to the ZeroMQ thread that brings it): a wake-up saved is a large
 * share of a small message's hop. */
static bool spin(gs_pair *l) {
  double until = gs_now() + l->c.spin_us * 1e-6;
  do {
    zmq_pollitem_t it = {.socket = l->pull, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 0) > 0) return true;
    sched_yield();
  } while (gs_now() < until);
  return false;
}

/* How long a rank that gave up listens for news from further up the ring. */
static double grace_s(const gs_pair *l) {
  double g = l->c.timeout_ms / 4000.0;
  return g < 0.5 ? g : 0.5;
}

/* This rank stops because of its left neighbour: a timeout or a closed
 * connection (mine: this rank's sentence) or an Error the neighbour sent
 * (upstream: its text). When one rank stalls, every rank behind it waits
 * and times out at about the same moment, so the first news to reach a rank
 * may be a neighbour's own timeout rather than the cause. So: tell the
 * right neighbour what we know, then listen a moment (grace_s) for Errors
 * from the left, passing each one on; each later one started one hop
 * further up the ring, and the last is the cause. */
static int settle(gs_pair *l, int code, const char *mine, const char *upstream,
                  const gs_pair_where *w, gs_err *e) {
  char cause[900] = "";
  if (upstream) snprintf(cause, sizeof cause, "%s", upstream);
  /* what follows reuses the arena that the last message lives in */
  gs_wire_msg_close(&l->last);
  gs_pair_tell(l, "ring", upstream ? cause : mine);
  double end = gs_now() + grace_s(l);
  gs_err ignore = {0};
  while (wait_in(l, end, &ignore) == 1) {
    gs_wire_msg m;
    l->arena_used = 0;
    int rc = gs_wire_read(l->pull, false, l->c.job, l->c.max_payload, &l->alloc, &m, &ignore);
    if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR && m.env->error->message) {
      snprintf(cause, sizeof cause, "%s", m.env->error->message);
      gs_pair_tell(l, "ring", cause);
    }
    gs_wire_msg_close(&m);
  }
  char wb[160];
  if (cause[0])
    return GS_FAIL(e, GS_EPEER, "rank %d: rank %d (left) stopped in %s: %s", l->c.rank,
                   l->c.left, where(w, wb, sizeof wb), cause);
  return GS_FAIL(e, code, "%s", mine);
}

/* A frame that is not the left neighbour's (a rank of another job that
 * holds the secret, a stale rank of an earlier run, a miswired endpoint) is
 * dropped with a line on stderr, and the wait goes on: only the left
 * neighbour can end it. */
static void dropped(gs_pair *l, const char *why) {
  if (l->dropped++ < 5)
    fprintf(stderr, "rank %d: ring: dropped a message that is not from rank %d (left): %s%s\n",
            l->c.rank, l->c.left, why, l->dropped == 5 ? "; further drops are not shown" : "");
}

int gs_pair_recv(gs_pair *l, const char *what, const gs_pair_where *w, bool spin_first,
                 Gradsync__Envelope **envp, zmq_msg_t *payload, uint64_t *bytes, gs_err *e) {
  zmq_msg_init(payload);
  *envp = NULL;
  char wb[160];
  double t0 = gs_now();
  /* the grace to learn the cause comes out of the timeout */
  double deadline = t0 + l->c.timeout_ms / 1000.0 - grace_s(l);
  for (bool first = true;; first = false) {
    gs_wire_msg_close(&l->last);
    if (!ready_now(l) && !(first && spin_first && l->c.spin_us > 0 && spin(l))) {
      int ready = wait_in(l, deadline, e);
      if (ready < 0) return ready;
      if (ready == 0) {
        char mine[600];
        if (l->left_gone_at > 0) {
          snprintf(mine, sizeof mine, "rank %d: rank %d (left) closed its connection (it exited, "
                   "aborted or was killed) while rank %d waited for a %s in %s", l->c.rank,
                   l->c.left, l->c.rank, what, where(w, wb, sizeof wb));
          return settle(l, GS_EPEER, mine, NULL, w, e);
        }
        snprintf(mine, sizeof mine, "rank %d: no %s from rank %d (left) in %s, for %.1f s (rank "
                 "%d died, stalled, or runs something else)", l->c.rank, what, l->c.left,
                 where(w, wb, sizeof wb), gs_now() - t0, l->c.left);
        return settle(l, GS_ETIMEOUT, mine, NULL, w, e);
      }
    }
    l->arena_used = 0;
    gs_err we = {0};
    errno = 0;
    int rc = gs_wire_read(l->pull, false, l->c.job, l->c.max_payload, &l->alloc, &l->last, &we);
    *bytes += l->last.bytes;
    if (rc == GS_EINTR) return GS_FAIL(e, rc, "rank %d: ring interrupted", l->c.rank);
    /* While a connection comes back, the socket may say readable with
     * nothing to read yet: wait again, nothing was dropped. */
    if (rc == GS_EIO && errno == EAGAIN && l->last.bytes == 0) continue;
    if (rc < 0) {
      dropped(l, we.msg);
      continue;
    }
    Gradsync__Envelope *env = l->last.env;
    if (env->rank != (uint32_t)l->c.left) {
      char why[400];
      snprintf(why, sizeof why, "a %s message from rank %u in %s (are the endpoints miswired, "
               "or does a rank run with another world size?)", gs_wire_kind(env), env->rank,
               where(w, wb, sizeof wb));
      dropped(l, why);
      continue;
    }
    if (!gs_resend_fresh(&l->in, env->seq, l->c.rank, l->c.left, "left")) continue;
    if (env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
      char m[900];
      snprintf(m, sizeof m, "%s", env->error->message ? env->error->message : "");
      return settle(l, GS_EPEER, NULL, m, w, e);
    }
    if (l->last.has_payload) {
      zmq_msg_move(payload, &l->last.payload);
      zmq_msg_close(&l->last.payload);
      l->last.has_payload = false;
    }
    *envp = env;
    return GS_OK;
  }
}

/* ------------------------------------------------------------------ */
/* sending */

static void released(void *data, void *hint) {
  atomic_store_explicit((atomic_uint *)hint, 0u, memory_order_release);
}

int gs_pair_send(gs_pair *l, const Gradsync__Envelope *env, const void *data, size_t bytes,
                 atomic_uint *flag, zmq_msg_t *fwd, uint64_t *sent, const gs_pair_where *w,
                 gs_err *e) {
  Gradsync__Envelope numbered = *env;
  numbered.seq = gs_resend_next(l->out);
  size_t hlen = gs_wire_pack(&numbered, l->hbuf, sizeof l->hbuf);
  if (hlen > sizeof l->hbuf)
    return GS_FAIL(e, GS_EINVAL, "rank %d: a header of %zu bytes", l->c.rank, hlen);
  /* kept before the send, which takes fwd */
  GS_TRY(gs_resend_keep(l->out, numbered.seq, l->hbuf, hlen, data, bytes, fwd, flag != NULL, e));
  /* an empty payload travels as no payload frame */
  if (zmq_send(l->push, l->hbuf, hlen, bytes ? ZMQ_SNDMORE : 0) < 0) goto fail;
  int rc = 0;
  if (bytes == 0) {
  } else if (fwd) {
    rc = zmq_msg_send(fwd, l->push, 0);
  } else if (flag) {
    zmq_msg_t m;
    atomic_store_explicit(flag, 1u, memory_order_relaxed);
    zmq_msg_init_data(&m, (void *)data, bytes, released, flag);
    rc = zmq_msg_send(&m, l->push, 0);
    if (rc < 0) {
      int err = errno;
      zmq_msg_close(&m); /* runs released() */
      errno = err;
    }
  } else {
    rc = zmq_send(l->push, data, bytes, 0);
  }
  if (rc < 0) goto fail;
  *sent += hlen + bytes;
  return GS_OK;
fail:;
  char wb[160];
  if (errno == EAGAIN)
    return GS_FAIL(e, GS_ETIMEOUT, "rank %d: could not queue a %s for rank %d (right) in %s "
                   "within %.1f s", l->c.rank, gs_wire_kind(env), l->c.right,
                   where(w, wb, sizeof wb), l->c.timeout_ms / 1000.0);
  return GS_FAIL(e, GS_EIO, "rank %d: sending to rank %d (right) in %s: %s", l->c.rank,
                 l->c.right, where(w, wb, sizeof wb), zmq_strerror(errno));
}

int gs_pair_wait_released(gs_pair *l, atomic_uint *flag, const char *what, gs_err *e) {
  if (atomic_load_explicit(flag, memory_order_acquire) == 0) return GS_OK;
  double deadline = gs_now() + l->c.timeout_ms / 1000.0;
  long ns = 1000;
  while (atomic_load_explicit(flag, memory_order_acquire) != 0) {
    if (atomic_load(&l->stop) || gs_interrupted)
      return GS_FAIL(e, GS_EINTR, "rank %d: ring interrupted", l->c.rank);
    GS_TRY(gs_pair_check(l, false, e));
    if (gs_now() > deadline)
      return GS_FAIL(e, GS_ETIMEOUT, "rank %d: rank %d (right) took no data for %.1f s in %s "
                     "(it died or stalled)", l->c.rank, l->c.right, l->c.timeout_ms / 1000.0,
                     what);
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
  }
  return GS_OK;
}
