/* test_proto.c: round trips of the ps messages through proto/wire.
 *
 * Every message kind the ps backend uses (Init, Hello, Welcome, Push,
 * Params, Error, Shutdown) goes DEALER -> ROUTER -> DEALER over TCP with its
 * payload; each field comes back as sent, the payload bytes are intact,
 * the zero-copy release callback runs exactly once, and the byte counters
 * of both ends agree (header + payload). */
#include <string.h>
#include <zmq.h>

#include "tests/check.h"
#include "proto/proto.h"

static int released;
static void on_release(void *data, void *hint) {
  (void)data;
  (void)hint;
  released++;
}

static const uint64_t JOB = 0xfeedfacecafebeefull;

/* DEALER -> ROUTER, then the ROUTER echoes it back to the DEALER. */
static void roundtrip(void *dealer, void *router, Gradsync__Envelope *env, const void *pay,
                      size_t len, int kind, void (*check)(const Gradsync__Envelope *)) {
  gs_err e = {0};
  uint64_t sent = 0;
  released = 0;
  REQUIRE(gs_wire_send(dealer, NULL, 0, env, pay, len, pay ? on_release : NULL, NULL, 1000, &sent,
                     &e) == 0, "send: %s", e.msg);
  gs_wire_msg m;
  REQUIRE(gs_wire_recv(router, true, 2000, JOB, 1 << 20, &m, &e) == 0, "recv: %s", e.msg);
  REQUIRE(m.has_id && (int)m.env->body_case == kind, "kind %d, want %d", (int)m.env->body_case,
        kind);
  REQUIRE(m.bytes == sent, "received %zu bytes, sent %llu", m.bytes, (unsigned long long)sent);
  REQUIRE(m.has_payload == (pay != NULL), "payload presence");
  if (pay) {
    REQUIRE(zmq_msg_size(&m.payload) == len && memcmp(zmq_msg_data(&m.payload), pay, len) == 0,
          "payload bytes differ");
  }
  check(m.env);
  /* echo back with the identity, as the server does */
  uint64_t sent2 = 0;
  REQUIRE(gs_wire_send(router, zmq_msg_data(&m.id), zmq_msg_size(&m.id), m.env, pay, len, NULL,
                     NULL, 1000, &sent2, &e) == 0, "echo: %s", e.msg);
  gs_wire_msg_close(&m);
  gs_wire_msg m2;
  REQUIRE(gs_wire_recv(dealer, false, 2000, JOB, 1 << 20, &m2, &e) == 0, "recv 2: %s", e.msg);
  REQUIRE(!m2.has_id && (int)m2.env->body_case == kind && m2.bytes == sent2, "echo kind / bytes");
  check(m2.env);
  gs_wire_msg_close(&m2);
  for (int i = 0; i < 100 && pay && released == 0; i++) zmq_poll(NULL, 0, 10);
  REQUIRE(released == (pay ? 1 : 0), "release callback ran %d times", released);
}

static void check_init(const Gradsync__Envelope *env) {
  const Gradsync__Init *in = env->init;
  REQUIRE(env->version == GS_PROTO_VERSION && env->job == JOB && env->rank == 0, "envelope");
  REQUIRE(in->world == 4 && in->count == 1000 && in->n_bucket_offset == 2 &&
            in->n_bucket_count == 2 && in->bucket_offset[1] == 700 && in->bucket_count[1] == 300,
        "init sizes");
  REQUIRE(in->lr == 0.5f && in->momentum == 0.9f && in->weight_decay == 1e-4f &&
            in->dtype == GRADSYNC__DTYPE__F16 && in->scale == 65536.0f && in->dynamic_scale &&
            in->timeout_ms == 60000 && in->sum_only && in->scale_interval == 2000 &&
            in->scale_growth == 2.0f && in->scale_backoff == 0.5f,
        "init settings");
}
static void check_hello(const Gradsync__Envelope *env) {
  REQUIRE(env->rank == 3 && env->hello->count == 1000 && env->hello->nbuckets == 2, "hello");
}
static void check_welcome(const Gradsync__Envelope *env) {
  REQUIRE(env->rank == GS_SERVER_RANK && env->welcome->world == 4, "welcome");
}
static void check_push(const Gradsync__Envelope *env) {
  const Gradsync__Push *p = env->push;
  REQUIRE(p->step == 1234567890123ull && p->bucket == 1 && p->offset == 700 && p->count == 300 &&
            p->dtype == GRADSYNC__DTYPE__BF16, "push");
}
static void check_params(const Gradsync__Envelope *env) {
  const Gradsync__Params *p = env->params;
  REQUIRE(p->step == 9 && p->bucket == 1 && p->offset == 700 && p->count == 300 && !p->skipped &&
            p->scale == 32768.0f && p->reduce_s == 0.25 && p->update_s == 0.125 &&
            p->bytes_sent == 123456789012ull && p->bytes_recv == 42, "params");
}
static void check_error(const Gradsync__Envelope *env) {
  REQUIRE(!strcmp(env->error->phase, "ps server") &&
            !strcmp(env->error->message, "rank 2 sent no gradients"), "error");
}
static void check_shutdown(const Gradsync__Envelope *env) {
  REQUIRE(!strcmp(env->shutdown->reason, "done"), "shutdown");
}

int main(void) {
  gs_err e = {0};
  void *ctx = gs_sock_context(0, &e);
  void *router = gs_sock_open(ctx, &GS_SOCK_BULK(ZMQ_ROUTER), &e);
  void *dealer = gs_sock_open(ctx, &GS_SOCK_BULK(ZMQ_DEALER), &e);
  REQUIRE(router && dealer, "sockets: %s", e.msg);
  char ep[GS_ENDPOINT_MAX];
  REQUIRE(gs_wire_bind_any(router, "127.0.0.1", ep, sizeof ep, &e) == 0, "bind: %s", e.msg);
  REQUIRE(zmq_connect(dealer, ep) == 0, "connect");

  float pay[1000];
  for (int i = 0; i < 1000; i++) pay[i] = (float)i * 0.5f - 17.0f;
  Gradsync__Envelope env;

  Gradsync__Init in = GRADSYNC__INIT__INIT;
  uint64_t offs[2] = {0, 700}, cnts[2] = {700, 300};
  gs_wire_env(&env, JOB, 0);
  in.world = 4;
  in.count = 1000;
  in.n_bucket_offset = in.n_bucket_count = 2;
  in.bucket_offset = offs;
  in.bucket_count = cnts;
  in.lr = 0.5f;
  in.momentum = 0.9f;
  in.weight_decay = 1e-4f;
  in.dtype = GRADSYNC__DTYPE__F16;
  in.scale = 65536.0f;
  in.dynamic_scale = true;
  in.timeout_ms = 60000;
  in.sum_only = true;
  in.scale_interval = 2000;
  in.scale_growth = 2.0f;
  in.scale_backoff = 0.5f;
  env.body_case = GRADSYNC__ENVELOPE__BODY_INIT;
  env.init = &in;
  roundtrip(dealer, router, &env, pay, sizeof pay, GRADSYNC__ENVELOPE__BODY_INIT, check_init);

  Gradsync__Hello h = GRADSYNC__HELLO__INIT;
  gs_wire_env(&env, JOB, 3);
  h.count = 1000;
  h.nbuckets = 2;
  env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  roundtrip(dealer, router, &env, NULL, 0, GRADSYNC__ENVELOPE__BODY_HELLO, check_hello);

  Gradsync__Welcome w = GRADSYNC__WELCOME__INIT;
  gs_wire_env(&env, JOB, GS_SERVER_RANK);
  w.world = 4;
  env.body_case = GRADSYNC__ENVELOPE__BODY_WELCOME;
  env.welcome = &w;
  roundtrip(dealer, router, &env, pay, sizeof pay, GRADSYNC__ENVELOPE__BODY_WELCOME,
            check_welcome);

  Gradsync__Push p = GRADSYNC__PUSH__INIT;
  gs_wire_env(&env, JOB, 3);
  p.step = 1234567890123ull;
  p.bucket = 1;
  p.offset = 700;
  p.count = 300;
  p.dtype = GRADSYNC__DTYPE__BF16;
  env.body_case = GRADSYNC__ENVELOPE__BODY_PUSH;
  env.push = &p;
  roundtrip(dealer, router, &env, pay, 600, GRADSYNC__ENVELOPE__BODY_PUSH, check_push);

  Gradsync__Params pr = GRADSYNC__PARAMS__INIT;
  gs_wire_env(&env, JOB, GS_SERVER_RANK);
  pr.step = 9;
  pr.bucket = 1;
  pr.offset = 700;
  pr.count = 300;
  pr.scale = 32768.0f;
  pr.reduce_s = 0.25;
  pr.update_s = 0.125;
  pr.bytes_sent = 123456789012ull;
  pr.bytes_recv = 42;
  env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS;
  env.params = &pr;
  roundtrip(dealer, router, &env, pay + 700, 1200, GRADSYNC__ENVELOPE__BODY_PARAMS, check_params);

  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, JOB, GS_SERVER_RANK);
  er.phase = (char *)"ps server";
  er.message = (char *)"rank 2 sent no gradients";
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  roundtrip(dealer, router, &env, NULL, 0, GRADSYNC__ENVELOPE__BODY_ERROR, check_error);

  Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
  gs_wire_env(&env, JOB, 1);
  sd.reason = (char *)"done";
  env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN;
  env.shutdown = &sd;
  roundtrip(dealer, router, &env, NULL, 0, GRADSYNC__ENVELOPE__BODY_SHUTDOWN, check_shutdown);

  /* expect_payload: exact size in the header's dtype */
  gs_wire_env(&env, JOB, 3);
  env.body_case = GRADSYNC__ENVELOPE__BODY_PUSH;
  env.push = &p;
  REQUIRE(gs_wire_send(dealer, NULL, 0, &env, pay, 600, NULL, NULL, 1000, NULL, &e) == 0, "send");
  gs_wire_msg m;
  REQUIRE(gs_wire_recv(router, true, 2000, JOB, 1 << 20, &m, &e) == 0, "recv");
  gs_err pe = {0};
  REQUIRE(gs_wire_expect_payload(&m, 300, GS_BF16, &pe) == 0, "300 bf16 = 600 bytes");
  REQUIRE(gs_wire_expect_payload(&m, 300, GS_F32, &pe) == GS_EPROTO && strstr(pe.msg, "truncated"),
        "300 fp32 != 600 bytes: %s", pe.msg);
  gs_wire_msg_close(&m);

  gs_sock_close(dealer, GS_SOCK_AS_OPENED);
  gs_sock_close(router, GS_SOCK_AS_OPENED);
  gs_sock_context_end(ctx, NULL);
  printf("ok: Init, Hello, Welcome, Push, Params, Error, Shutdown round trips\n");
  return 0;
}
