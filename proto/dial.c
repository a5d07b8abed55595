/* dial.c: a socket that connects to one data port and stays connected
 * (proto.h, gs_dial).
 *
 * ZeroMQ reconnects a dropped connection by itself, with the credential
 * the socket had when zmq_connect ran. A PLAIN credential of this job is
 * good for one connection (auth.c), so after a drop, or after any refused
 * handshake (libzmq gives up on a peer after a refusal), the dial starts
 * afresh: zmq_disconnect, a new credential, zmq_connect. The caller learns
 * that the connection came back (after a drop) from gs_dial_back, which
 * is what the resend log and the ps client watch to send again what was in
 * flight. */
#include "proto/proto.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define REDIAL_MIN_S 0.05 /* after refusals, not faster than this */

struct gs_dial {
  void *sock, *mon;
  gs_cred cred;
  char ep[GS_ENDPOINT_MAX], addr[GS_ENDPOINT_MAX];
  bool one_time;             /* PLAIN: a credential is spent once admitted */
  bool dropped;              /* a connection was lost and none is admitted since */
  bool refused;              /* the last handshake failed: dial again */
  bool admitted;             /* a connection is up (its handshake succeeded) */
  double last_dial;
  double dropped_at;         /* when the last admitted connection went (with dropped) */
};

static int dial(gs_dial *d, gs_err *e) {
  d->last_dial = gs_now();
  return gs_cred_connect(d->sock, &d->cred, d->ep, e);
}

int gs_dial_open(void *ctx, void *sock, const gs_cred *c, const char *endpoint, gs_dial **out,
                 gs_err *e) {
  *out = NULL;
  gs_dial *d = calloc(1, sizeof *d);
  if (!d) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  d->sock = sock;
  d->cred = *c;
  snprintf(d->ep, sizeof d->ep, "%s", endpoint);
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  int has = gs_endpoint_split(endpoint, d->addr, sizeof d->addr, nonce);
  d->one_time = has > 0 && !c->encrypt;
  /* after a drop the dial itself connects afresh at once; libzmq's own
   * retry, with the spent credential, should rarely come first */
  int ivl = 500;
  if (d->one_time) zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
  /* without a monitor nothing is seen: no resend after a drop (a reset then
   * stops the job, as it would without one) */
  if (has > 0)
    d->mon = gs_wire_monitor(ctx, sock, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                            ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                            ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                            ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
  int rc = dial(d, e);
  if (rc < 0) {
    gs_dial_close(d);
    return rc;
  }
  *out = d;
  return GS_OK;
}

bool gs_dial_watched(const gs_dial *d) { return d && d->mon; }

static void redial(gs_dial *d) {
  /* what waits in the old connection's queue is dropped at once (what
   * matters the resend log sends again); lingering, it would hold the
   * context's end up to the socket's linger */
  int was = gs_sock_linger(d->sock, 0);
  zmq_disconnect(d->sock, d->addr); /* ENOENT when libzmq gave up on it already */
  gs_sock_linger(d->sock, was);
  gs_err e = {0};
  if (dial(d, &e) < 0) d->refused = true; /* tried again at the next look */
  else d->refused = false;
}

/* A message that came in before the drop is still the caller's to read:
 * zmq_disconnect would drop it with the old connection's pipe (a ps
 * server's last Error, sent just before it closed, would be lost). The
 * I/O thread queues a connection's messages before it reports the drop,
 * so what this sees after the event is everything that came. */
static bool inbound_waiting(gs_dial *d) {
  int ev = 0;
  size_t sz = sizeof ev;
  return zmq_getsockopt(d->sock, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN);
}

bool gs_dial_back(gs_dial *d) {
  if (!d || !d->mon) return false;
  bool back = false;
  uint16_t id;
  uint32_t value;
  while (gs_wire_monitor_event(d->mon, &id, &value)) {
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      d->admitted = true;
      if (d->dropped) back = true;
      d->dropped = false;
    } else if (id == ZMQ_EVENT_DISCONNECTED && d->admitted) {
      d->admitted = false;
      d->dropped = true;
      d->dropped_at = gs_now();
      if (d->one_time) d->refused = true; /* its credential is spent */
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
               id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      d->refused = true;
    }
  }
  if (d->refused && gs_now() - d->last_dial >= REDIAL_MIN_S && !inbound_waiting(d)) redial(d);
  return back;
}

double gs_dial_down_s(const gs_dial *d) {
  return d && d->mon && d->dropped ? gs_now() - d->dropped_at : 0;
}

void gs_dial_close(gs_dial *d) {
  if (!d) return;
  gs_wire_monitor_close(d->sock, d->mon);
  sodium_memzero(&d->cred, sizeof d->cred);
  free(d);
}
