/* link_send.c: the sending half of a ring link (wire.h, gs_link), and what
 * makes the stream to the right neighbour survive a dropped connection.
 *
 * ZeroMQ reconnects by itself, but what was in flight on a connection that
 * dropped (in the kernel's buffers, half written) is gone. So every message
 * but an Error carries a number (Envelope.seq); the right neighbour takes
 * them once and in order and acknowledges them (Ack.next, now and then);
 * and every message stays in a log here until acknowledged. When the connection
 * comes back after a drop, everything in the log goes again: what arrived
 * already is dropped there as a duplicate, and whatever arrived behind a
 * lost message is dropped as out of order and taken when it comes again.
 *
 *      rank r (DEALER)  -- chunk 7, chunk 8, ... -->  rank r+1 (ROUTER)
 *                       <-------- ack 8, ack 9 ------
 *
 * The log holds references, not copies: a received message forwarded and
 * a zero-copy send from the caller's buffer share their bytes with it. A
 * zero-copy send's flag therefore clears only when ZeroMQ and the log are
 * both done with it; a caller that waits for the flag (it wants its buffer
 * back) makes the log take its own copy of the bytes still unacknowledged,
 * so it never waits for an acknowledgement. */
#include "proto/link_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_MIN 64
#define LOG_READ 32 /* entries before a send reads the acknowledgements */

static void released(void *data, void *hint) {
  (void)data;
  atomic_store_explicit((atomic_uint *)hint, 0u, memory_order_release);
}

static gs_link_sent *entry(gs_link *l, size_t i) {
  return &l->log[(l->log_head + i) % l->log_cap];
}

static void forget(gs_link_sent *s) {
  zmq_msg_close(&s->hdr);
  if (s->has_pay) zmq_msg_close(&s->pay);
  s->has_pay = false;
  s->flag = NULL;
}

void gs_link_log_free(gs_link *l) {
  for (size_t i = 0; i < l->log_len; i++) forget(entry(l, i));
  free(l->log);
  l->log = NULL;
  l->log_len = l->log_cap = l->log_head = 0;
}

/* Room for one more entry: the log grows (it holds at most what one
 * collective sends ahead of the right neighbour's acknowledgements). */
static int log_room(gs_link *l, gs_err *e) {
  if (l->log_len < l->log_cap) return GS_OK;
  size_t cap = l->log_cap ? 2 * l->log_cap : LOG_MIN;
  gs_link_sent *n = calloc(cap, sizeof *n);
  if (!n) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the ring's send log",
                         l->c.rank);
  for (size_t i = 0; i < l->log_len; i++) {
    gs_link_sent *o = entry(l, i);
    n[i] = (gs_link_sent){.seq = o->seq, .has_pay = o->has_pay, .flag = o->flag};
    zmq_msg_init(&n[i].hdr);
    zmq_msg_move(&n[i].hdr, &o->hdr);
    zmq_msg_close(&o->hdr);
    zmq_msg_init(&n[i].pay);
    if (o->has_pay) {
      zmq_msg_move(&n[i].pay, &o->pay);
      zmq_msg_close(&o->pay);
    }
  }
  free(l->log);
  l->log = n;
  l->log_cap = cap;
  l->log_head = 0;
  return GS_OK;
}

/* Put one logged message on the socket (its frames are shared, not
 * copied). */
static int transmit(gs_link *l, gs_link_sent *s) {
  zmq_msg_t h, p;
  zmq_msg_init(&h);
  zmq_msg_copy(&h, &s->hdr);
  if (zmq_msg_send(&h, l->push, s->has_pay ? ZMQ_SNDMORE : 0) < 0) {
    int err = errno;
    zmq_msg_close(&h);
    errno = err;
    return -1;
  }
  if (!s->has_pay) return 0;
  zmq_msg_init(&p);
  zmq_msg_copy(&p, &s->pay);
  if (zmq_msg_send(&p, l->push, 0) < 0) {
    int err = errno;
    zmq_msg_close(&p);
    errno = err;
    return -1;
  }
  return 0;
}

static void acked(gs_link *l, uint64_t next) {
  while (l->log_len && entry(l, 0)->seq < next) {
    forget(entry(l, 0));
    l->log_head = (l->log_head + 1) % l->log_cap;
    l->log_len--;
  }
}

static void resend(gs_link *l) {
  if (!l->log_len) return;
  if (l->resends++ < 5)
    fprintf(stderr, "rank %d: ring: the connection to rank %d (right) dropped and came back; "
            "sending the %zu message(s) it has not acknowledged again%s\n", l->c.rank,
            l->c.right, l->log_len, l->resends == 5 ? "; further resends are not shown" : "");
  for (size_t i = 0; i < l->log_len; i++)
    if (transmit(l, entry(l, i)) < 0) return; /* the next reconnection tries again */
}

/* Monitor events of the DEALER socket: a drop, then a connection again. */
static void watch_right(gs_link *l) {
  uint16_t id;
  uint32_t fd;
  while (gs_wire_monitor_event(l->rmon, &id, &fd)) {
    if (id == ZMQ_EVENT_DISCONNECTED) {
      l->right_dropped = true;
    } else if (id == ZMQ_EVENT_CONNECTED && l->right_dropped) {
      l->right_dropped = false;
      resend(l);
    }
  }
}

static bool readable(void *sock) {
  int ev = 0;
  size_t sz = sizeof ev;
  return sock && zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN);
}

/* Every look at a ZeroMQ socket from here costs a system call, so the
 * acknowledgements are read when the log has grown (a send), or when a
 * caller waits anyway (a flag, the left neighbour). */
static void read_acks(gs_link *l) {
  while (readable(l->push)) {
    gs_wire_msg m;
    gs_err ignore = {0};
    l->ack_arena.used = 0;
    /* anything but the right neighbour's Ack is dropped */
    if (gs_wire_read(l->push, false, l->c.job, 0, &l->ack_alloc, &m, &ignore) == GS_OK &&
        m.env->body_case == GRADSYNC__ENVELOPE__BODY_ACK && m.env->ack &&
        m.env->rank == (uint32_t)l->c.right && m.env->ack->next <= l->tx_seq + 1)
      acked(l, m.env->ack->next);
    gs_wire_msg_close(&m);
  }
}

void gs_link_right_events(gs_link *l) {
  if (!l->push) return;
  if (l->rmon) watch_right(l);
  read_acks(l);
}

/* An acknowledgement is a message of its own, and on a loaded machine
 * every message costs wake-ups: so at most one per ACK_IVL_S, or per
 * ACK_EVERY messages. The sender never waits for one (it copies what its
 * caller wants back), so a late one costs memory, not time. */
#define ACK_IVL_S 0.001
#define ACK_EVERY 64

void gs_link_ack(gs_link *l, bool now) {
  if (l->rx_next == l->rx_acked && !now) return;
  double t = gs_now();
  if (!now && l->rx_next - l->rx_acked < ACK_EVERY && t - l->acked_at < ACK_IVL_S) return;
  l->rx_acked = l->rx_next;
  l->acked_at = t;
  Gradsync__Envelope env;
  Gradsync__Ack a = GRADSYNC__ACK__INIT;
  gs_wire_env(&env, l->c.job, (uint32_t)l->c.rank);
  a.next = l->rx_next;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ACK;
  env.ack = &a;
  /* packed without the delay line's stamp: an acknowledgement holds up no
   * data, and its reader must not sleep on it */
  uint8_t buf[128];
  if (gradsync__envelope__get_packed_size(&env) > sizeof buf) return;
  size_t n = gradsync__envelope__pack(&env, buf);
  if (zmq_send(l->pull, l->left_id, strlen(l->left_id), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return;
  zmq_send(l->pull, buf, n, ZMQ_DONTWAIT);
}

/* Make the log's entries that borrow flag's buffer hold their own copy. */
static int detach(gs_link *l, atomic_uint *flag, gs_err *e) {
  bool read = false;
  for (size_t i = 0; i < l->log_len; i++) {
    gs_link_sent *s = entry(l, i);
    if (s->flag != flag) continue;
    size_t n = zmq_msg_size(&s->pay);
    /* a large payload was most likely acknowledged at once (link.c):
     * reading that is cheaper than copying it; a small one is copied */
    if (n >= GS_LINK_ACK_NOW && !read) {
      read = true;
      read_acks(l);
      i = (size_t)-1; /* the log may have shrunk: look again */
      continue;
    }
    zmq_msg_t own;
    if (zmq_msg_init_size(&own, n) < 0)
      return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for the ring's send log", l->c.rank);
    memcpy(zmq_msg_data(&own), zmq_msg_data(&s->pay), n);
    zmq_msg_close(&s->pay);
    zmq_msg_init(&s->pay);
    zmq_msg_move(&s->pay, &own);
    zmq_msg_close(&own);
    s->flag = NULL;
  }
  return GS_OK;
}

int gs_link_send(gs_link *l, const Gradsync__Envelope *env, const void *data, size_t bytes,
                 atomic_uint *flag, zmq_msg_t *fwd, uint64_t *sent, const gs_link_where *w,
                 gs_err *e) {
  if (l->log_len >= LOG_READ) read_acks(l);
  GS_TRY(log_room(l, e));
  Gradsync__Envelope numbered = *env;
  numbered.seq = l->tx_seq + 1;
  size_t hlen = gs_wire_pack(&numbered, l->hbuf, sizeof l->hbuf);
  if (hlen > sizeof l->hbuf)
    return GS_FAIL(e, GS_EINVAL, "rank %d: a header of %zu bytes", l->c.rank, hlen);
  gs_link_sent *s = entry(l, l->log_len);
  *s = (gs_link_sent){.seq = numbered.seq};
  zmq_msg_init(&s->pay);
  if (zmq_msg_init_size(&s->hdr, hlen) < 0) {
    zmq_msg_close(&s->pay);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory sending to rank %d (right)", l->c.rank,
                   l->c.right);
  }
  memcpy(zmq_msg_data(&s->hdr), l->hbuf, hlen);
  /* an empty payload travels as no payload frame */
  int rc = 0;
  if (bytes == 0) {
  } else if (fwd) {
    rc = zmq_msg_copy(&s->pay, fwd);
  } else if (flag) {
    atomic_store_explicit(flag, 1u, memory_order_relaxed);
    rc = zmq_msg_init_data(&s->pay, (void *)data, bytes, released, flag);
    s->flag = flag;
  } else if ((rc = zmq_msg_init_size(&s->pay, bytes)) == 0) {
    memcpy(zmq_msg_data(&s->pay), data, bytes);
  }
  s->has_pay = bytes > 0 && rc == 0;
  if (rc == 0) {
    l->tx_seq++;
    l->log_len++;
    rc = transmit(l, s);
  } else {
    forget(s);
  }
  if (fwd) { /* the caller's reference is spent either way, as zmq_msg_send's */
    zmq_msg_close(fwd);
    zmq_msg_init(fwd);
  }
  if (rc < 0) goto fail;
  *sent += hlen + bytes;
  return GS_OK;
fail:;
  char wb[160];
  const char *at = "the ring";
  if (w && w->fn) {
    w->fn(w->ctx, wb, sizeof wb);
    at = wb;
  }
  if (errno == EAGAIN)
    return GS_FAIL(e, GS_ETIMEOUT, "rank %d: could not queue a %s for rank %d (right) in %s "
                   "within %.1f s", l->c.rank, gs_wire_kind(env), l->c.right, at,
                   l->c.timeout_ms / 1000.0);
  return GS_FAIL(e, GS_EIO, "rank %d: sending to rank %d (right) in %s: %s", l->c.rank,
                 l->c.right, at, zmq_strerror(errno));
}

int gs_link_wait_released(gs_link *l, atomic_uint *flag, const char *what, gs_err *e) {
  if (atomic_load_explicit(flag, memory_order_acquire) == 0) return GS_OK;
  GS_TRY(detach(l, flag, e));
  double deadline = gs_now() + l->c.timeout_ms / 1000.0;
  long ns = 1000;
  while (atomic_load_explicit(flag, memory_order_acquire) != 0) {
    if (atomic_load(&l->stop) || gs_interrupted)
      return GS_FAIL(e, GS_EINTR, "rank %d: ring interrupted", l->c.rank);
    if (gs_now() > deadline)
      return GS_FAIL(e, GS_ETIMEOUT, "rank %d: rank %d (right) took no data for %.1f s in %s "
                     "(it died or stalled)", l->c.rank, l->c.right, l->c.timeout_ms / 1000.0,
                     what);
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
    gs_link_right_events(l);
  }
  return GS_OK;
}
