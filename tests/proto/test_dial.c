/* test_dial.c: proto/dial.c keeps what came before a drop. A ROUTER (a ps
 * server, say) sends its last words and closes; the DEALER's connection
 * drops, and the dial, seeing the drop, would connect afresh. What came in
 * before the drop must still be read: zmq_disconnect, the first half of
 * dialling again, drops the old connection's queue with it. The DEALER's
 * owner is made slow on purpose: it looks at the dial only after the drop
 * was reported, as a loaded machine's worker does. */
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "proto/proto.h"
#include "tests/check.h"

static void *ctx;
static gs_cred cred;

static void last_words(bool dial_first) {
  void *router = zmq_socket(ctx, ZMQ_ROUTER);
  char endpoint[GS_ENDPOINT_MAX];
  gs_err e = {0};
  CHECK_OK(gs_cred_bind(router, &cred, "127.0.0.1", endpoint, &e), &e);
  void *dealer = zmq_socket(ctx, ZMQ_DEALER);
  zmq_setsockopt(dealer, ZMQ_ROUTING_ID, "w", 1);
  int zero = 0;
  zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
  gs_dial *d;
  CHECK_OK(gs_dial_open(ctx, dealer, &cred, endpoint, &d, &e), &e);
  /* hello, so the router knows whom to answer */
  REQUIRE(zmq_send(dealer, "hi", 2, 0) == 2);
  char id[8], buf[32];
  REQUIRE(zmq_recv(router, id, sizeof id, 0) == 1 && zmq_recv(router, buf, sizeof buf, 0) == 2);
  CHECK(!gs_dial_back(d), "no drop yet");
  REQUIRE(zmq_send(router, id, 1, ZMQ_SNDMORE) == 1 && zmq_send(router, "bye", 3, 0) == 3);
  int linger = 2000;
  zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
  zmq_close(router);
  /* let the connection drop and be reported before the owner looks */
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  if (dial_first) gs_dial_back(d);
  zmq_pollitem_t it = {.socket = dealer, .events = ZMQ_POLLIN};
  int n = zmq_poll(&it, 1, 2000) == 1 ? zmq_recv(dealer, buf, sizeof buf - 1, ZMQ_DONTWAIT) : -1;
  buf[n > 0 ? n : 0] = 0;
  CHECK(n == 3 && !strcmp(buf, "bye"), "%s: the router's last message was lost (got %d bytes)",
        dial_first ? "dial looked first" : "read first", n);
  /* read, the drop is handled as before: the dial connects again */
  gs_dial_back(d);
  gs_dial_close(d);
  zmq_close(dealer);
}

int main(void) {
  ctx = zmq_ctx_new();
  gs_err e = {0};
  gs_zap *zap = NULL;
  CHECK_OK(gs_cred_derive(&cred, "dial test secret", 16, false, &e), &e);
  CHECK_OK(gs_zap_start(ctx, &cred, 0, "test_dial", &zap, &e), &e);
  last_words(false);
  last_words(true);
  zmq_ctx_term(ctx);
  gs_zap_join(zap);
  return check_done("dial");
}
