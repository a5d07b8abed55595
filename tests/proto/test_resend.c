/* test_resend.c: proto/resend.c on a real PUSH/PULL pair in one process,
 * with the job's credential as the ring uses it (a PLAIN login good for one
 * connection, proto/auth.c). The receiving socket is closed and bound
 * again at the same address, which drops the connection as a reset does;
 * the PUSH's dial connects again with a fresh login, and what its log kept
 * must come again, in order, with the bytes it had when sent:
 *
 *   numbers   the receiver's side: in order once, copies and gaps dropped
 *   again     copied, borrowed and shared payloads sent again after a
 *             reconnect; a borrowed one as it was at gs_resend_end
 *   acked     what the receiver had is forgotten, and not sent again
 *   off       a log opened without keep, or a collective that does not
 *             settle, keeps nothing */
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "proto/proto.h"
#include "tests/check.h"

static void *ctx;
static gs_cred cred;
static char endpoint[GS_ENDPOINT_MAX]; /* with the port nonce */

/* a fresh port (endpoint NULL), or the same one again */
static void *bind_pull(const char *ep) {
  void *p = zmq_socket(ctx, ZMQ_PULL);
  int zero = 0;
  zmq_setsockopt(p, ZMQ_LINGER, &zero, sizeof zero);
  gs_err e = {0};
  if (!ep) {
    CHECK_OK(gs_cred_bind(p, &cred, "127.0.0.1", endpoint, &e), &e);
    return p;
  }
  for (int i = 0; i < 100; i++) { /* the port may take a moment to be free again */
    if (gs_cred_bind_at(p, &cred, ep, &e) == 0) break;
    usleep(20000);
  }
  return p;
}

/* The next message on pull within ms, looking at the log meanwhile (as a
 * ring's waits do): its header and payload as text, "" when none came. */
static void wait_msg(void *pull, gs_resend *s, char *hdr, char *pay, int ms) {
  hdr[0] = pay[0] = 0;
  for (int i = 0; i < ms / 50; i++) {
    gs_err e = {0};
    CHECK_OK(gs_resend_check(s, true, &e), &e);
    zmq_pollitem_t it = {.socket = pull, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 50) <= 0) continue;
    int n = zmq_recv(pull, hdr, 63, 0);
    hdr[n > 0 ? n : 0] = 0;
    int more = 0;
    size_t sz = sizeof more;
    zmq_getsockopt(pull, ZMQ_RCVMORE, &more, &sz);
    if (more) {
      n = zmq_recv(pull, pay, 63, 0);
      pay[n > 0 ? n : 0] = 0;
    }
    return;
  }
}

static void next_msg(void *pull, gs_resend *s, char *hdr, char *pay) {
  wait_msg(pull, s, hdr, pay, 5000);
}

/* send header + payload as the link does, and keep it */
static void send_kept(void *push, gs_resend *s, const char *hdr, const char *data, zmq_msg_t *fwd,
                      bool borrow) {
  uint64_t seq = gs_resend_next(s);
  gs_err e = {0};
  CHECK_OK(gs_resend_keep(s, seq, hdr, strlen(hdr), data, strlen(data), fwd, borrow, &e), &e);
  REQUIRE(zmq_send(push, hdr, strlen(hdr), ZMQ_SNDMORE) >= 0);
  REQUIRE(zmq_send(push, data, strlen(data), 0) >= 0);
}

/* drop the connection: close the receiver and bind a new one in its place */
static void *reset(void *pull) {
  zmq_close(pull);
  return bind_pull(endpoint);
}

static void numbers(void) {
  gs_seq_in in = {0};
  CHECK(gs_resend_fresh(&in, 1, 0, 1, "left") == 1);
  CHECK(gs_resend_fresh(&in, 2, 0, 1, "left") == 1);
  CHECK(gs_resend_fresh(&in, 2, 0, 1, "left") == 0, "a copy is dropped");
  CHECK(gs_resend_fresh(&in, 1, 0, 1, "left") == 0, "an older copy is dropped");
  CHECK(gs_resend_fresh(&in, 4, 0, 1, "left") == 0, "what comes after a gap is dropped");
  CHECK(gs_resend_fresh(&in, 5, 0, 1, "left") == 0);
  CHECK(gs_resend_fresh(&in, 0, 0, 1, "left") == 1, "an unnumbered Error is taken");
  CHECK(gs_resend_fresh(&in, 3, 0, 1, "left") == 1, "the gap filled");
  CHECK(gs_resend_fresh(&in, 4, 0, 1, "left") == 1);
  CHECK(in.last == 4, "last %llu", (unsigned long long)in.last);
}

static void again(void) {
  void *pull = bind_pull(NULL);
  void *push = zmq_socket(ctx, ZMQ_PUSH);
  gs_resend *s;
  gs_dial *d;
  gs_err e = {0};
  CHECK_OK(gs_dial_open(ctx, push, &cred, endpoint, &d, &e), &e);
  CHECK_OK(gs_resend_open(d, push, 0, 1, "right", true, &s, &e), &e);
  char h[64], p[64];

  gs_resend_begin(s, true);
  char borrowed[8] = "bbb";
  zmq_msg_t fwd;
  zmq_msg_init_size(&fwd, 3);
  memcpy(zmq_msg_data(&fwd), "sss", 3);
  send_kept(push, s, "h1", "ccc", NULL, false);
  send_kept(push, s, "h2", borrowed, NULL, true);
  send_kept(push, s, "h3", "sss", &fwd, false);
  zmq_msg_close(&fwd);
  CHECK_OK(gs_resend_end(s, &e), &e);
  memcpy(borrowed, "XXX", 3); /* the caller's memory is its own again */
  for (int i = 1; i <= 3; i++) {
    next_msg(pull, s, h, p);
    CHECK(h[0] == 'h' && h[1] == '0' + i, "message %d: '%s'", i, h);
  }

  pull = reset(pull);
  const char *want[][2] = {{"h1", "ccc"}, {"h2", "bbb"}, {"h3", "sss"}};
  for (int i = 0; i < 3; i++) {
    next_msg(pull, s, h, p);
    CHECK(!strcmp(h, want[i][0]) && !strcmp(p, want[i][1]),
          "sent again %d: '%s' '%s', expected '%s' '%s'", i, h, p, want[i][0], want[i][1]);
  }

  /* acked: the receiver had 1 and 2; only 3 goes again */
  gs_resend_acked(s, 2);
  pull = reset(pull);
  next_msg(pull, s, h, p);
  CHECK(!strcmp(h, "h3") && !strcmp(p, "sss"), "after acked(2): '%s' '%s'", h, p);

  /* a collective that settles forgets what was sent before it began */
  gs_resend_begin(s, true);
  send_kept(push, s, "h4", "ddd", NULL, false);
  CHECK_OK(gs_resend_end(s, &e), &e);
  next_msg(pull, s, h, p);
  CHECK(!strcmp(h, "h4"), "h4 first time: '%s'", h);
  pull = reset(pull);
  next_msg(pull, s, h, p);
  CHECK(!strcmp(h, "h4") && !strcmp(p, "ddd"), "only h4 again: '%s' '%s'", h, p);

  /* one that does not settle keeps nothing of its own */
  gs_resend_begin(s, false);
  send_kept(push, s, "h5", "eee", NULL, false);
  CHECK_OK(gs_resend_end(s, &e), &e);
  next_msg(pull, s, h, p);
  CHECK(!strcmp(h, "h5"), "h5 first time: '%s'", h);
  pull = reset(pull);
  next_msg(pull, s, h, p);
  CHECK(!strcmp(h, "h4"), "h4 again, not h5: '%s'", h);
  wait_msg(pull, s, h, p, 1500);
  CHECK(h[0] == 0, "nothing more: '%s'", h);

  gs_resend_close(s);
  gs_dial_close(d);
  zmq_close(push);
  zmq_close(pull);
}

static void off(void) {
  void *pull = bind_pull(NULL);
  void *push = zmq_socket(ctx, ZMQ_PUSH);
  gs_resend *s;
  gs_dial *d;
  gs_err e = {0};
  CHECK_OK(gs_dial_open(ctx, push, &cred, endpoint, &d, &e), &e);
  CHECK_OK(gs_resend_open(d, push, 0, 1, "right", false, &s, &e), &e);
  gs_resend_begin(s, true);
  send_kept(push, s, "h1", "ccc", NULL, false);
  CHECK(gs_resend_last(s) == 1, "numbered all the same");
  char h[64], p[64];
  next_msg(pull, s, h, p);
  CHECK(!strcmp(h, "h1"), "'%s'", h);
  pull = reset(pull);
  wait_msg(pull, s, h, p, 1500);
  CHECK(h[0] == 0, "a log without keep sent '%s' again", h);
  gs_resend_close(s);
  gs_dial_close(d);
  zmq_close(push);
  zmq_close(pull);
}

int main(void) {
  ctx = zmq_ctx_new();
  gs_err e = {0};
  gs_zap *zap = NULL;
  CHECK_OK(gs_cred_derive(&cred, "resend test secret", 18, false, &e), &e);
  CHECK_OK(gs_zap_start(ctx, &cred, 0, "test_resend", &zap, &e), &e);
  numbers();
  again();
  off();
  zmq_ctx_term(ctx);
  gs_zap_join(zap);
  return check_done("resend");
}
