/* socket.c: every ZeroMQ socket of gradsync is made and ended here
 * (proto.h, gs_sock_*; its context: context.c), so that what a socket is
 * set up with is read in one struct, gs_sock_opts, instead of a run of
 * zmq_setsockopt calls in each part that opens one.
 *
 * ZeroMQ takes most options only before a socket binds or connects (they
 * apply to the connections made after), so a socket is opened with all of
 * them at once; the order in which they are set is not seen by anyone.
 * What a socket then proves is the credential's business: gs_cred_bind,
 * gs_dial_open or gs_cred_rdv_* (auth.c, dial.c) on the socket opened here.
 * An option ZeroMQ refuses fails the open: a socket that silently lacks one
 * (an unbounded queue, a handshake deadline) would behave otherwise than
 * its caller wrote. */
#include "proto/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* One option: 0 on success, else the option's name for the error. */
static const char *set_int(void *s, int opt, int v, const char *name) {
  return zmq_setsockopt(s, opt, &v, sizeof v) == 0 ? NULL : name;
}

/* 0 in a field leaves ZeroMQ's default; the high-water marks' unbounded
 * is ZeroMQ's 0. */
static const char *apply(void *s, const gs_sock_opts *o) {
  const char *bad = set_int(s, ZMQ_LINGER, o->linger_ms, "ZMQ_LINGER");
  if (!bad && o->sndhwm)
    bad = set_int(s, ZMQ_SNDHWM, o->sndhwm == GS_SOCK_UNBOUNDED ? 0 : o->sndhwm, "ZMQ_SNDHWM");
  if (!bad && o->rcvhwm)
    bad = set_int(s, ZMQ_RCVHWM, o->rcvhwm == GS_SOCK_UNBOUNDED ? 0 : o->rcvhwm, "ZMQ_RCVHWM");
  if (!bad && o->sockbuf > 0) bad = set_int(s, ZMQ_SNDBUF, o->sockbuf, "ZMQ_SNDBUF");
  if (!bad && o->sockbuf > 0) bad = set_int(s, ZMQ_RCVBUF, o->sockbuf, "ZMQ_RCVBUF");
  if (!bad && o->max_msg &&
      zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &o->max_msg, sizeof o->max_msg) < 0)
    bad = "ZMQ_MAXMSGSIZE";
  if (!bad && o->handshake_ms)
    bad = set_int(s, ZMQ_HANDSHAKE_IVL, o->handshake_ms, "ZMQ_HANDSHAKE_IVL");
  if (!bad && o->sndtimeo_ms) bad = set_int(s, ZMQ_SNDTIMEO, o->sndtimeo_ms, "ZMQ_SNDTIMEO");
  if (!bad && o->rcvtimeo_ms) bad = set_int(s, ZMQ_RCVTIMEO, o->rcvtimeo_ms, "ZMQ_RCVTIMEO");
  if (!bad && o->reconnect_ms)
    bad = set_int(s, ZMQ_RECONNECT_IVL, o->reconnect_ms, "ZMQ_RECONNECT_IVL");
  if (!bad && o->router_mandatory)
    bad = set_int(s, ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY");
  if (!bad && o->router_handover)
    bad = set_int(s, ZMQ_ROUTER_HANDOVER, 1, "ZMQ_ROUTER_HANDOVER");
  if (!bad && o->routing_id &&
      zmq_setsockopt(s, ZMQ_ROUTING_ID, o->routing_id, strlen(o->routing_id)) < 0)
    bad = "ZMQ_ROUTING_ID";
  return bad;
}

void *gs_sock_open(void *ctx, const gs_sock_opts *o, gs_err *e) {
  void *s = zmq_socket(ctx, o->type);
  if (!s) {
    int err = errno;
    GS_FAIL(e, GS_EIO, "zmq_socket: %s", zmq_strerror(err));
    errno = err;
    return NULL;
  }
  const char *bad = apply(s, o);
  if (bad) {
    int err = errno;
    zmq_close(s);
    GS_FAIL(e, GS_EIO, "zmq_setsockopt %s: %s", bad, zmq_strerror(err));
    errno = err;
    return NULL;
  }
  return s;
}

int64_t gs_sock_frame_max(size_t payload) {
  return (int64_t)(payload > GS_HEADER_MAX ? payload : GS_HEADER_MAX) + 64;
}

int gs_sock_handshake_ms(int timeout_ms) { return timeout_ms < 5000 ? timeout_ms : 5000; }

int gs_sock_linger(void *sock, int linger_ms) {
  int was = 0;
  size_t sz = sizeof was;
  zmq_getsockopt(sock, ZMQ_LINGER, &was, &sz);
  zmq_setsockopt(sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
  return was;
}

void gs_sock_close(void *sock, int linger_ms) {
  if (!sock) return;
  if (linger_ms != GS_SOCK_AS_OPENED)
    zmq_setsockopt(sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
  zmq_close(sock);
}
