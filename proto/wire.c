/* wire.c: framing, zero-copy sends and checked receives (see proto.h). */
#include "proto/proto.h"

#include <errno.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLICE_MS 100

const char *gs_wire_kind(const Gradsync__Envelope *env) {
  if (!env) return "nothing";
  switch (env->body_case) {
  case GRADSYNC__ENVELOPE__BODY_REG: return "register";
  case GRADSYNC__ENVELOPE__BODY_WELCOME: return "welcome";
  case GRADSYNC__ENVELOPE__BODY_INIT: return "init";
  case GRADSYNC__ENVELOPE__BODY_HELLO: return "hello";
  case GRADSYNC__ENVELOPE__BODY_PUSH: return "push";
  case GRADSYNC__ENVELOPE__BODY_PARAMS: return "params";
  case GRADSYNC__ENVELOPE__BODY_CHUNK: return "chunk";
  case GRADSYNC__ENVELOPE__BODY_STATS: return "stats";
  case GRADSYNC__ENVELOPE__BODY_ERROR: return "error";
  case GRADSYNC__ENVELOPE__BODY_SHUTDOWN: return "shutdown";
  case GRADSYNC__ENVELOPE__BODY_RING_HELLO: return "ring hello";
  default: return "empty";
  }
}

void gs_wire_env(Gradsync__Envelope *env, uint64_t job, uint32_t rank) {
  gradsync__envelope__init(env);
  env->version = GS_PROTO_VERSION;
  env->job = job;
  env->rank = rank;
}

gs_dtype gs_wire_dtype(Gradsync__DType t) {
  switch (t) {
  case GRADSYNC__DTYPE__F16: return GS_F16;
  case GRADSYNC__DTYPE__BF16: return GS_BF16;
  case GRADSYNC__DTYPE__F64: return GS_F64;
  case GRADSYNC__DTYPE__I32: return GS_I32;
  default: return GS_F32;
  }
}

Gradsync__DType gs_wire_pbdtype(gs_dtype t) {
  switch (t) {
  case GS_F16: return GRADSYNC__DTYPE__F16;
  case GS_BF16: return GRADSYNC__DTYPE__BF16;
  case GS_F64: return GRADSYNC__DTYPE__F64;
  case GS_I32: return GRADSYNC__DTYPE__I32;
  default: return GRADSYNC__DTYPE__F32;
  }
}

/* Poll sock for `events` up to timeout_ms, in slices that notice SIGINT:
 * 1 ready, 0 timed out, < 0 an error. */
static int wait_for(void *sock, short events, int timeout_ms, gs_err *e) {
  double deadline = gs_now() + (timeout_ms > 0 ? timeout_ms : 0) / 1000.0;
  for (;;) {
    if (gs_interrupted) return GS_FAIL(e, GS_EINTR, "interrupted");
    double left = deadline - gs_now();
    int slice = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
    if (slice > SLICE_MS) slice = SLICE_MS;
    zmq_pollitem_t it = {.socket = sock, .events = events};
    int rc = zmq_poll(&it, 1, slice);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return GS_FAIL(e, GS_EIO, "zmq_poll: %s", zmq_strerror(errno));
    }
    if (rc > 0) return 1;
    if (left <= 0) return 0;
  }
}

int gs_wire_wait(void *sock, int timeout_ms, gs_err *e) {
  return wait_for(sock, ZMQ_POLLIN, timeout_ms, e);
}

static int wait_out(void *sock, int timeout_ms, gs_err *e) {
  return wait_for(sock, ZMQ_POLLOUT, timeout_ms, e);
}

/* The delay line (proto.h): set once per process before any socket. */
static struct {
  double delay_s;
  int host, per_host;
} line;

void gs_wire_delay(double delay_s, int host, int per_host) {
  line.delay_s = delay_s > 0 ? delay_s : 0;
  line.host = host;
  line.per_host = per_host > 0 ? per_host : 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Hold a message from another host until its stamp + the delay. A stamp
 * from the future (no sender of this machine makes one) waits no longer
 * than the delay itself. Frames behind it wait in the socket meanwhile, so
 * a stream is delayed, not slowed. */
static void delay_line(const Gradsync__Envelope *env) {
  if (!(line.delay_s > 0) || !env->sent_ns) return;
  int from = env->rank == GS_SERVER_RANK ? 0 : (int)(env->rank / (uint32_t)line.per_host);
  if (from == line.host) return; /* the same host: its loopback has no delay */
  uint64_t d = (uint64_t)(line.delay_s * 1e9), now = now_ns();
  uint64_t due = env->sent_ns > now ? now + d : env->sent_ns + d;
  if (due <= now) return;
  struct timespec ts = {.tv_sec = (time_t)(due / 1000000000u), .tv_nsec = (long)(due % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !gs_interrupted) {
  }
}

size_t gs_wire_pack(const Gradsync__Envelope *env, uint8_t *buf, size_t cap) {
  Gradsync__Envelope stamped;
  if (line.delay_s > 0) {
    stamped = *env;
    stamped.sent_ns = now_ns();
    env = &stamped;
  }
  size_t n = gradsync__envelope__get_packed_size(env);
  if (n > cap) return n;
  return gradsync__envelope__pack(env, buf);
}

int gs_wire_send(void *sock, const void *id, size_t idlen, const Gradsync__Envelope *env,
                 const void *data, size_t len, zmq_free_fn *release, void *hint,
                 int timeout_ms, uint64_t *bytes, gs_err *e) {
  uint8_t stackbuf[512];
  /* room for the header with a delay line's stamp (a fixed64: 9 bytes) */
  size_t cap = gradsync__envelope__get_packed_size(env) + 9;
  uint8_t *hbuf = cap <= sizeof stackbuf ? stackbuf : malloc(cap);
  int rc = GS_OK;
  bool payload_owned = release != NULL; /* we must call release if we never hand it over */
  if (!hbuf) {
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory packing a %s header", gs_wire_kind(env));
    goto out;
  }
  size_t hlen = gs_wire_pack(env, hbuf, cap);

  int w = wait_out(sock, timeout_ms, e);
  if (w < 0) { rc = w; goto out; }
  if (w == 0) {
    rc = GS_FAIL(e, GS_ETIMEOUT, "could not send a %s message within %d ms (peer not reading)",
                 gs_wire_kind(env), timeout_ms);
    goto out;
  }
  bool more = data != NULL;
  if (id) {
    if (zmq_send(sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
      rc = GS_FAIL(e, errno == EHOSTUNREACH ? GS_EPEER : GS_EIO, "sending a %s message: %s",
                   gs_wire_kind(env), zmq_strerror(errno));
      goto out;
    }
  }
  if (zmq_send(sock, hbuf, hlen, more ? ZMQ_SNDMORE : 0) < 0) {
    rc = GS_FAIL(e, GS_EIO, "sending a %s header: %s", gs_wire_kind(env), zmq_strerror(errno));
    goto out;
  }
  if (more) {
    zmq_msg_t m;
    if (release && len > 0) {
      zmq_msg_init_data(&m, (void *)data, len, release, hint);
      payload_owned = false; /* zmq_msg_close / the send now calls release */
    } else {
      zmq_msg_init_size(&m, len);
      if (len) memcpy(zmq_msg_data(&m), data, len);
    }
    if (zmq_msg_send(&m, sock, 0) < 0) {
      int err = errno;
      zmq_msg_close(&m);
      rc = GS_FAIL(e, GS_EIO, "sending a %s payload of %zu bytes: %s", gs_wire_kind(env), len,
                   zmq_strerror(err));
      goto out;
    }
  }
  if (bytes) *bytes += hlen + (more ? len : 0);
out:
  if (payload_owned) release((void *)data, hint);
  if (hbuf != stackbuf) free(hbuf);
  return rc;
}

void gs_wire_msg_close(gs_wire_msg *m) {
  if (m->has_id) zmq_msg_close(&m->id);
  if (m->has_payload) zmq_msg_close(&m->payload);
  if (m->env) gradsync__envelope__free_unpacked(m->env, m->alloc);
  m->has_id = m->has_payload = false;
  m->env = NULL;
}

static bool more_frames(void *sock) {
  int more = 0;
  size_t sz = sizeof more;
  zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz);
  return more != 0;
}

static void drain(void *sock) {
  while (more_frames(sock)) {
    zmq_msg_t x;
    zmq_msg_init(&x);
    if (zmq_msg_recv(&x, sock, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&x);
      return;
    }
    zmq_msg_close(&x);
  }
}

int gs_wire_recv(void *sock, bool router, int timeout_ms, uint64_t job, size_t max_payload,
                 gs_wire_msg *m, gs_err *e) {
  memset(m, 0, sizeof *m);
  int w = gs_wire_wait(sock, timeout_ms, e);
  if (w < 0) return w;
  if (w == 0) return GS_FAIL(e, GS_ETIMEOUT, "nothing received in %d ms", timeout_ms);
  return gs_wire_read(sock, router, job, max_payload, NULL, m, e);
}

/* The rank a received frame's connection proved at the rendezvous: the
 * ZAP handler (auth.c) names it as the connection's User-Id; -1 when it
 * proved none. */
static int proven_rank(zmq_msg_t *frame) {
  const char *u = zmq_msg_gets(frame, "User-Id");
  if (!u || !*u || strlen(u) > 8) return -1;
  char *end;
  long r = strtol(u, &end, 10);
  return *end || r < 1 || r > (1 << 24) ? -1 : (int)r;
}

int gs_wire_read(void *sock, bool router, uint64_t job, size_t max_payload,
                 ProtobufCAllocator *alloc, gs_wire_msg *m, gs_err *e) {
  memset(m, 0, sizeof *m);
  m->alloc = alloc;
  m->proven = -1;
  if (router) {
    zmq_msg_init(&m->id);
    m->has_id = true;
    if (zmq_msg_recv(&m->id, sock, ZMQ_DONTWAIT) < 0)
      return GS_FAIL(e, GS_EIO, "receiving an identity frame: %s", zmq_strerror(errno));
    if (!more_frames(sock)) return GS_FAIL(e, GS_EPROTO, "a message with no header frame");
  }
  zmq_msg_t h;
  zmq_msg_init(&h);
  if (zmq_msg_recv(&h, sock, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&h);
    return GS_FAIL(e, GS_EIO, "receiving a header frame: %s", zmq_strerror(errno));
  }
  size_t hlen = zmq_msg_size(&h);
  m->bytes += hlen;
  if (router) { /* who sent it: its address and what it proved (not kept on the identity
                  frame) */
    const char *a = zmq_msg_gets(&h, "Peer-Address");
    if (a) snprintf(m->peer, sizeof m->peer, "%s", a);
    m->proven = proven_rank(&h);
  }
  int rc = GS_OK;
  if (hlen == 0 || hlen > GS_HEADER_MAX) {
    rc = GS_FAIL(e, GS_EPROTO, "a header frame of %zu bytes (expected 1..%u)", hlen,
                 GS_HEADER_MAX);
  } else {
    m->env = gradsync__envelope__unpack(alloc, hlen, zmq_msg_data(&h));
    if (!m->env) rc = GS_FAIL(e, GS_EPROTO, "a header of %zu bytes that is not a gradsync "
                              "Envelope (corrupt or foreign message)", hlen);
  }
  zmq_msg_close(&h);
  if (rc == GS_OK && more_frames(sock)) {
    zmq_msg_init(&m->payload);
    m->has_payload = true;
    if (zmq_msg_recv(&m->payload, sock, ZMQ_DONTWAIT) < 0)
      return GS_FAIL(e, GS_EIO, "receiving a payload frame: %s", zmq_strerror(errno));
    m->bytes += zmq_msg_size(&m->payload);
    if (more_frames(sock))
      rc = GS_FAIL(e, GS_EPROTO, "a %s message with more than one payload frame",
                   gs_wire_kind(m->env));
    else if (zmq_msg_size(&m->payload) > max_payload)
      rc = GS_FAIL(e, GS_EPROTO, "a %s payload of %zu bytes exceeds the %zu expected at most",
                   gs_wire_kind(m->env), zmq_msg_size(&m->payload), max_payload);
  }
  drain(sock);
  if (rc < 0) return rc;
  if (m->env->version != GS_PROTO_VERSION)
    return GS_FAIL(e, GS_EPROTO, "a %s message from rank %u speaks protocol version %u; this "
                   "build speaks %u (run the same gradsync build on every rank)",
                   gs_wire_kind(m->env), m->env->rank, m->env->version, GS_PROTO_VERSION);
  if (job != 0 && m->env->job != job)
    return GS_FAIL(e, GS_EPROTO, "a %s message claiming rank %u carries job token %016llx, "
                   "not this job's (a stray or unauthenticated sender)", gs_wire_kind(m->env),
                   m->env->rank, (unsigned long long)m->env->job);
  if (m->env->body_case == GRADSYNC__ENVELOPE__BODY__NOT_SET)
    return GS_FAIL(e, GS_EPROTO, "an empty message from rank %u", m->env->rank);
  delay_line(m->env);
  return GS_OK;
}

int gs_wire_expect_payload(const gs_wire_msg *m, uint64_t count, gs_dtype t, gs_err *e) {
  uint64_t want;
  size_t got = m->has_payload ? zmq_msg_size((zmq_msg_t *)&m->payload) : 0;
  if (__builtin_mul_overflow(count, (uint64_t)gs_dtype_size(t), &want))
    return GS_FAIL(e, GS_EPROTO, "a %s message from rank %u promises %llu elements of %s: more "
                   "bytes than any message holds", gs_wire_kind(m->env),
                   m->env ? m->env->rank : 0u, (unsigned long long)count, gs_dtype_name(t));
  if (!m->has_payload && want > 0)
    return GS_FAIL(e, GS_EPROTO, "a %s message from rank %u has no payload; expected %llu "
                   "bytes", gs_wire_kind(m->env), m->env ? m->env->rank : 0u,
                   (unsigned long long)want);
  if (got != want)
    return GS_FAIL(e, GS_EPROTO, "a %s payload from rank %u holds %zu bytes; its header "
                   "promises %llu (%llu x %s): truncated or corrupt", gs_wire_kind(m->env),
                   m->env ? m->env->rank : 0u, got, (unsigned long long)want,
                   (unsigned long long)count, gs_dtype_name(t));
  return GS_OK;
}

int gs_wire_bind_any(void *sock, const char *host, char *endpoint, size_t cap, gs_err *e) {
  char addr[300];
  static atomic_uint seq;
  if (host && !strcmp(host, GS_WIRE_IPC)) /* Linux's abstract namespace: no file to remove */
    snprintf(addr, sizeof addr, "ipc://@gradsync-%d-%u-%08x", (int)getpid(),
             atomic_fetch_add(&seq, 1u), randombytes_random());
  else
    snprintf(addr, sizeof addr, "tcp://%s:*", host && *host ? host : "127.0.0.1");
  if (zmq_bind(sock, addr) < 0)
    return GS_FAIL(e, GS_EIO, "cannot bind %s: %s (check the address belongs to this host)",
                   addr, zmq_strerror(errno));
  size_t sz = cap;
  if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, endpoint, &sz) < 0)
    return GS_FAIL(e, GS_EIO, "ZMQ_LAST_ENDPOINT: %s", zmq_strerror(errno));
  /* A wildcard bind is reachable at this host's name, not at 0.0.0.0. */
  const char *wild = "tcp://0.0.0.0:";
  if (strncmp(endpoint, wild, strlen(wild)) == 0) {
    char hostname[256] = "127.0.0.1", port[32];
    gethostname(hostname, sizeof hostname - 1);
    snprintf(port, sizeof port, "%s", endpoint + strlen(wild));
    snprintf(endpoint, cap, "tcp://%s:%s", hostname, port);
  }
  return GS_OK;
}

void *gs_wire_monitor(void *ctx, void *sock, int events) {
  char addr[64];
  snprintf(addr, sizeof addr, "inproc://gs-mon-%p", sock);
  if (zmq_socket_monitor(sock, addr, events) < 0) return NULL;
  /* it only reads: no linger is ever waited for */
  void *mon = gs_sock_open(ctx, &(gs_sock_opts){.type = ZMQ_PAIR, .linger_ms = 0}, NULL);
  if (mon && zmq_connect(mon, addr) < 0) {
    gs_sock_close(mon, GS_SOCK_AS_OPENED);
    zmq_socket_monitor(sock, NULL, 0);
    return NULL;
  }
  return mon;
}

void gs_wire_monitor_close(void *sock, void *mon) {
  if (!mon) return;
  zmq_socket_monitor(sock, NULL, 0);
  gs_sock_close(mon, GS_SOCK_AS_OPENED);
}

int gs_wire_monitor_event(void *mon, uint16_t *id, uint32_t *value) {
  zmq_msg_t ev;
  zmq_msg_init(&ev);
  if (!mon || zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&ev);
    return 0;
  }
  *id = 0;
  *value = 0;
  if (zmq_msg_size(&ev) >= 6) {
    memcpy(id, zmq_msg_data(&ev), 2);
    memcpy(value, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
  }
  bool more = zmq_msg_more(&ev);
  zmq_msg_close(&ev);
  while (more) { /* the endpoint frame */
    zmq_msg_init(&ev);
    more = zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&ev);
    zmq_msg_close(&ev);
  }
  return 1;
}
