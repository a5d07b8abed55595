/* test_malformed.c: bad messages never crash the server.
 *
 * Part A, strays: while a 3-rank job runs, a raw ZeroMQ socket that never
 * joined keeps firing every kind of malformed message at the live server:
 * garbage, empty and oversized headers, a wrong protocol version, a foreign
 * job token, an empty envelope, truncated and oversized pushes, wrong
 * bucket / step / offset / dtype, extra frames, a payload over the size
 * limit, and every message kind a server never expects. They are dropped
 * (with a warning) and the job's parameters are still bitwise the
 * reference. A second raw socket without the job's secret sends the same
 * and is refused at the handshake.
 *
 * Part B, a registered rank misbehaves: rank 1 is a raw socket that joins
 * properly and runs a step, then sends one bad message. The job must fail
 * with an error that names rank 1 and what was wrong, on rank 0 (a real
 * worker) and on the raw socket, and rank 0's server thread must end
 * cleanly (no crash, no hang). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "ps_harness.h"
#include "proto/proto.h"
#include "ps/ps.h"

#define JOB 0x1234abcd5678ef00ull

static void *zctx;

/* with_secret: holds the job's credential (the harness's ranks use the
 * all-zero key), so its frames reach the server; without, it is refused at
 * the handshake and nothing it sends is delivered. */
static void *raw_socket_as(const char *ep, bool with_secret) {
  void *s = zmq_socket(zctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  static const gs_cred job_cred;
  gs_err e = {0};
  if (with_secret) {
    REQUIRE(gs_cred_connect(s, &job_cred, ep, &e) == 0, "connect %s: %s", ep, e.msg);
    return s;
  }
  /* refused at the handshake, it has no peer to queue for: its sends
   * return at once */
  int ms = 0;
  zmq_setsockopt(s, ZMQ_SNDTIMEO, &ms, sizeof ms);
  char addr[GS_ENDPOINT_MAX];
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  REQUIRE(gs_endpoint_split(ep, addr, sizeof addr, nonce) == 1, "no port nonce in %s", ep);
  zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "gradsync", 8);
  zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, "a guess", 7);
  REQUIRE(zmq_connect(s, addr) == 0, "connect %s", addr);
  return s;
}

static void *raw_socket(const char *ep) { return raw_socket_as(ep, true); }

/* Send [header bytes] [payload] [extra payload]. */
static void send_raw(void *s, const void *h, size_t hl, const void *p, size_t pl, bool payload,
                     bool extra) {
  zmq_send(s, h, hl, payload ? ZMQ_SNDMORE : 0);
  if (payload) zmq_send(s, p, pl, extra ? ZMQ_SNDMORE : 0);
  if (extra) zmq_send(s, p, pl, 0);
}

static size_t pack(const Gradsync__Envelope *env, uint8_t *buf) {
  return gradsync__envelope__pack(env, buf);
}

/* Every rank holds the single-process reference's bits after every step
 * (and r is freed). */
static void final_is_reference(job_opts *o, job_result *r, const char *part) {
  free(check_reference(o, r, part, NULL, NULL));
  result_free(r);
}

/* ----------------------------------------------------------- part A */

typedef struct spammer {
  char ep[GS_ENDPOINT_MAX];
  atomic_int stop;
  int rounds;
  pthread_t th;
} spammer;

static void spam_once(void *s) {
  static uint8_t big[1 << 20], junk[100];
  uint8_t h[256];
  float pay[300] = {0};
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 37 + 11);
  Gradsync__Envelope env;
  Gradsync__Push p;
  /* garbage, empty, oversized header */
  send_raw(s, junk, sizeof junk, NULL, 0, false, false);
  send_raw(s, "", 0, NULL, 0, false, false);
  send_raw(s, big, 70000, NULL, 0, false, false);
  /* wrong version, foreign job, empty envelope */
  push_env(&env, &p, JOB, 1, 0, 0, 700, 300);
  env.version = 99;
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);
  push_env(&env, &p, JOB ^ 1, 1, 0, 0, 700, 300);
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);
  gs_wire_env(&env, JOB, 1);
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  /* pushes claiming rank 1 from a sender that never joined */
  push_env(&env, &p, JOB, 1, 0, 0, 700, 300);
  send_raw(s, h, pack(&env, h), pay, 100, true, false);             /* truncated */
  push_env(&env, &p, JOB, 1, 0, 0, 700, 1000000000000ull);
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);      /* oversized count */
  push_env(&env, &p, JOB, 1, 0, 99, 700, 300);
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);      /* wrong bucket */
  push_env(&env, &p, JOB, 1, 12345, 0, 700, 300);
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);      /* wrong step */
  push_env(&env, &p, JOB, 1, 0, 0, 3, 300);
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);      /* wrong offset */
  push_env(&env, &p, JOB, 1, 0, 0, 700, 300);
  p.dtype = (Gradsync__DType)7;
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, false);      /* unknown dtype */
  push_env(&env, &p, JOB, 1, 0, 0, 700, 300);
  send_raw(s, h, pack(&env, h), pay, sizeof pay, true, true);       /* extra frame */
  /* every kind a server never expects from anyone */
  Gradsync__Params pr = GRADSYNC__PARAMS__INIT;
  Gradsync__Welcome w = GRADSYNC__WELCOME__INIT;
  Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  Gradsync__Register rg = GRADSYNC__REGISTER__INIT;
  Gradsync__Chunk ch = GRADSYNC__CHUNK__INIT;
  Gradsync__Stats stt = GRADSYNC__STATS__INIT;
  Gradsync__Init in = GRADSYNC__INIT__INIT;
  gs_wire_env(&env, JOB, 1);
  env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS; env.params = &pr;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  env.body_case = GRADSYNC__ENVELOPE__BODY_WELCOME; env.welcome = &w;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN; env.shutdown = &sd;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR; env.error = &er;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  env.body_case = GRADSYNC__ENVELOPE__BODY_REG; env.reg = &rg;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  env.body_case = GRADSYNC__ENVELOPE__BODY_CHUNK; env.chunk = &ch;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  env.body_case = GRADSYNC__ENVELOPE__BODY_STATS; env.stats = &stt;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  /* an Init from someone who is not rank 0 */
  env.body_case = GRADSYNC__ENVELOPE__BODY_INIT; env.init = &in;
  in.world = 3;
  in.count = 10;
  send_raw(s, h, pack(&env, h), pay, 40, true, false);
  /* over the size limit: ZeroMQ drops the connection (it reconnects) */
  push_env(&env, &p, JOB, 1, 0, 0, 700, 300);
  send_raw(s, h, pack(&env, h), big, sizeof big, true, false);
}

/* A stray's socket: the server may drop its connection (an oversized
 * message), and the socket's reconnect repeats its credential, which the
 * server refuses as a replay; left with no peer, a blocking send would
 * wait forever. A stray's sends are not asserted, so they may give up. */
static void *spam_socket(const char *ep) {
  void *s = raw_socket(ep);
  int ms = 100;
  zmq_setsockopt(s, ZMQ_SNDTIMEO, &ms, sizeof ms);
  return s;
}

static void *spam_main(void *arg) {
  spammer *sp = arg;
  void *s = spam_socket(sp->ep), *stranger = raw_socket_as(sp->ep, false);
  while (!atomic_load(&sp->stop)) {
    spam_once(s);
    spam_once(stranger);
    sp->rounds++;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  zmq_close(s);
  zmq_close(stranger);
  return NULL;
}

static void start_spam(const char *ep, void *ctx) {
  spammer *sp = ctx;
  snprintf(sp->ep, sizeof sp->ep, "%s", ep);
  /* one burst before any rank joins, then continuously */
  void *s = spam_socket(ep);
  spam_once(s);
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  zmq_close(s);
  REQUIRE(pthread_create(&sp->th, NULL, spam_main, sp) == 0, "pthread_create");
}

static void part_a(bool dedicated) {
  job_opts o;
  job_defaults(&o);
  o.world = 3;
  o.job = JOB;
  o.steps = 8;
  o.overlap = true;
  o.jitter_us = 3000;
  o.dedicated = dedicated;
  spammer sp = {0};
  o.on_blob = start_spam;
  o.on_blob_ctx = &sp;
  job_result *r = result_new(&o);
  int rc = run_threads(&o, r);
  atomic_store(&sp.stop, 1);
  pthread_join(sp.th, NULL);
  for (int i = 0; i < o.world; i++) REQUIRE(r->rc[i] == 0, "rank %d: %s", i, r->err[i]);
  REQUIRE(rc == 0, "job failed");
  REQUIRE(sp.rounds >= 3, "only %d rounds of bad messages were sent", sp.rounds);
  final_is_reference(&o, r, "part A");
  printf("ok: %d rounds of 25 malformed messages from a stray and from a stranger without the secret: dropped, the %s server kept "
         "serving and computed the reference bits\n", sp.rounds + 1,
         dedicated ? "dedicated" : "in-process");
}

/* ----------------------------------------------------------- part B */

enum {
  B_GARBAGE, B_VERSION, B_JOB, B_TRUNCATED, B_COUNT, B_BUCKET, B_STEP, B_OFFSET, B_DTYPE,
  B_EXTRA, B_TWICE, B_CLAIM, B_KIND, B_HELLO, B_TOOBIG, B_COUNT_OF
};
static const char *const b_name[] = {
  "garbage header", "wrong version", "foreign job token", "truncated payload",
  "oversized count", "wrong bucket", "wrong step", "wrong offset", "wrong dtype",
  "extra frames", "a bucket twice", "claims another rank", "unexpected kind",
  "hello twice", "payload over the size limit",
};
static const char *const b_needle[] = {
  "rank 1 sent a bad message: a header of", "protocol version 7", "job token",
  "truncated", "the bucket is [", "rank 1 pushed bucket 99", "rank 1 pushed gradients for step 0",
  "the bucket is [", "dtype 2", "more than one payload frame", "bucket 0 twice",
  "claiming to be rank 2", "never expects", "rank 1 said hello twice",
  "rank 1 sent no gradients for step 1 bucket 0",
};

typedef struct rank0 {
  gs_sync_config cfg;
  void *state;
  gs_kernels *k;
  gs_bucket *bk;
  int nb;
  int rc, steps;
  gs_err e;
} rank0;

static void *rank0_main(void *arg) {
  rank0 *z = arg;
  gs_sync *s = NULL;
  z->rc = gs_ps_backend.open(z->state, &z->cfg, &s, &z->e);
  for (int step = 0; z->rc == 0 && step < 3; step++) {
    z->rc = s->ops->begin_step(s, step, &z->e);
    for (int b = 0; z->rc == 0 && b < z->nb; b++) z->rc = s->ops->bucket_ready(s, b, &z->e);
    gs_sync_stats st;
    if (z->rc == 0) z->rc = s->ops->end_step(s, &st, &z->e);
    if (z->rc == 0) __atomic_store_n(&z->steps, z->steps + 1, __ATOMIC_RELEASE);
  }
  if (s) s->ops->close(s, z->rc == 0, NULL);
  return NULL;
}

/* Receive one message on the raw socket: its kind (or -1 on timeout). */
static int raw_recv(void *s, int timeout_ms, size_t *payload) {
  gs_wire_msg m;
  gs_err e = {0};
  int rc = gs_wire_recv(s, false, timeout_ms, JOB, 1 << 24, &m, &e);
  int kind = rc == 0 ? (int)m.env->body_case : -1;
  if (payload) *payload = m.has_payload ? zmq_msg_size(&m.payload) : 0;
  gs_wire_msg_close(&m);
  return kind;
}

static void raw_push(void *s, uint64_t step, int b, const gs_bucket *bk, uint32_t rank) {
  static float pay[1000];
  uint8_t h[256];
  Gradsync__Envelope env;
  Gradsync__Push p;
  push_env(&env, &p, JOB, rank, step, (uint32_t)b, bk[b].offset, bk[b].count);
  send_raw(s, h, pack(&env, h), pay, bk[b].count * sizeof(float), true, false);
}

static void part_b(int kind) {
  const size_t n = 1000;
  rank0 z = {0};
  gs_err e = {0};
  z.k = gs_kernels_cpu(0, &e);
  float *params = z.k->alloc(z.k, n * sizeof(float)), *grads = z.k->alloc(z.k, n * sizeof(float));
  z.bk = plan_buckets(n, 300, &z.nb);
  gs_sync_config *c = &z.cfg;
  c->rank = 0;
  c->world = 2;
  c->timeout_ms = 1500;
  c->job = JOB;
  c->host = "127.0.0.1";
  c->k = z.k;
  c->params = params;
  c->grads = grads;
  c->n = n;
  c->buckets = z.bk;
  c->nbuckets = z.nb;
  c->sgd = (gs_sgd){0.1f, 0.0f, 0.0f};
  c->wire = GS_F32;
  gs_scaler_init(&c->scaler, 1.0f, false);
  char ep[GS_ENDPOINT_MAX], blob[GS_BOOTSTRAP_MAX];
  size_t len;
  REQUIRE(gs_ps_backend.prepare(c, &z.state, ep, &e) == 0, "prepare: %s", e.msg);
  REQUIRE(gs_ps_backend.bootstrap(z.state, c, blob, &len, &e) == 0, "bootstrap: %s", e.msg);
  c->bootstrap = blob;
  c->bootstrap_len = len;

  /* rank 1, by hand: hello, welcome, one good step */
  void *s = raw_socket(blob);
  uint8_t h[70000];
  Gradsync__Envelope env;
  Gradsync__Hello hello = GRADSYNC__HELLO__INIT;
  gs_wire_env(&env, JOB, 1);
  hello.count = n;
  hello.nbuckets = (uint32_t)z.nb;
  env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
  env.hello = &hello;
  send_raw(s, h, pack(&env, h), NULL, 0, false, false);
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, rank0_main, &z) == 0, "pthread_create");
  size_t pl = 0;
  REQUIRE(raw_recv(s, 5000, &pl) == GRADSYNC__ENVELOPE__BODY_WELCOME && pl == n * sizeof(float),
        "%s: no welcome for the raw rank 1", b_name[kind]);
  for (int b = 0; b < z.nb; b++) raw_push(s, 0, b, z.bk, 1);
  for (int b = 0; b < z.nb; b++)
    REQUIRE(raw_recv(s, 5000, &pl) == GRADSYNC__ENVELOPE__BODY_PARAMS, "%s: params of step 0",
          b_name[kind]);
  /* the server answers rank 1 before rank 0's own thread ends step 0: a lie
   * sent before then would stop rank 0 in step 0 */
  for (int i = 0; i < 5000 && __atomic_load_n(&z.steps, __ATOMIC_ACQUIRE) < 1; i++) usleep(1000);
  REQUIRE(__atomic_load_n(&z.steps, __ATOMIC_ACQUIRE) == 1, "%s: rank 0 did not end step 0",
          b_name[kind]);

  /* step 1: the bad message */
  static float pay[1000];
  static uint8_t big[1 << 20];
  Gradsync__Push p;
  const gs_bucket *b0 = &z.bk[0];
  switch (kind) {
  case B_GARBAGE:
    send_raw(s, "\x01\x02\x03garbage", 10, NULL, 0, false, false);
    break;
  case B_VERSION:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset, b0->count);
    env.version = 7;
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, false);
    break;
  case B_JOB:
    push_env(&env, &p, JOB + 1, 1, 1, 0, b0->offset, b0->count);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, false);
    break;
  case B_TRUNCATED:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset, b0->count);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4 - 6, true, false);
    break;
  case B_COUNT:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset, 1ull << 40);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, false);
    break;
  case B_BUCKET:
    push_env(&env, &p, JOB, 1, 1, 99, b0->offset, b0->count);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, false);
    break;
  case B_STEP:
    push_env(&env, &p, JOB, 1, 0, 0, b0->offset, b0->count);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, false);
    break;
  case B_OFFSET:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset + 1, b0->count);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, false);
    break;
  case B_DTYPE:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset, b0->count);
    p.dtype = GRADSYNC__DTYPE__BF16;
    send_raw(s, h, pack(&env, h), pay, b0->count * 2, true, false);
    break;
  case B_EXTRA:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset, b0->count);
    send_raw(s, h, pack(&env, h), pay, b0->count * 4, true, true);
    break;
  case B_TWICE:
    raw_push(s, 1, 0, z.bk, 1);
    raw_push(s, 1, 0, z.bk, 1);
    break;
  case B_CLAIM:
    raw_push(s, 1, 0, z.bk, 2);
    break;
  case B_KIND: {
    Gradsync__Params pr = GRADSYNC__PARAMS__INIT;
    gs_wire_env(&env, JOB, 1);
    env.body_case = GRADSYNC__ENVELOPE__BODY_PARAMS;
    env.params = &pr;
    send_raw(s, h, pack(&env, h), NULL, 0, false, false);
    break;
  }
  case B_HELLO:
    gs_wire_env(&env, JOB, 1);
    env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    send_raw(s, h, pack(&env, h), NULL, 0, false, false);
    break;
  case B_TOOBIG:
    push_env(&env, &p, JOB, 1, 1, 0, b0->offset, b0->count);
    send_raw(s, h, pack(&env, h), big, sizeof big, true, false);
    break;
  }
  double t0 = gs_now();
  pthread_join(th, NULL);
  double dt = gs_now() - t0;
  REQUIRE(z.rc != 0 && z.steps == 1, "%s: rank 0 did not fail in step 1 (rc %d, %d steps)",
        b_name[kind], z.rc, z.steps);
  REQUIRE(strstr(z.e.msg, b_needle[kind]), "%s: rank 0's error does not say '%s': %s",
        b_name[kind], b_needle[kind], z.e.msg);
  REQUIRE(strstr(z.e.msg, "rank 1"), "%s: the error does not name rank 1: %s", b_name[kind],
        z.e.msg);
  /* promptly, not through the 1.5 s timeout (except the dropped connection) */
  REQUIRE(dt < (kind == B_TOOBIG ? 4.0 : 1.4), "%s: rank 0 took %.2f s to stop", b_name[kind], dt);
  if (kind != B_TOOBIG) { /* that connection is gone; ZeroMQ made a new one */
    int got = -1;
    for (int i = 0; i < 8 && got != GRADSYNC__ENVELOPE__BODY_ERROR; i++) {
      got = raw_recv(s, 3000, NULL);  /* parameters of buckets completed before */
      REQUIRE(got == GRADSYNC__ENVELOPE__BODY_ERROR || got == GRADSYNC__ENVELOPE__BODY_PARAMS,
            "%s: the raw rank 1 got %d, not an Error", b_name[kind], got);
    }
    REQUIRE(got == GRADSYNC__ENVELOPE__BODY_ERROR, "%s: no Error", b_name[kind]);
  }
  printf("ok: %-28s -> %s\n", b_name[kind], z.e.msg);
  zmq_close(s);
  z.k->release(z.k, params);
  z.k->release(z.k, grads);
  z.k->destroy(z.k);
  free(z.bk);
}

int main(void) {
  zctx = zmq_ctx_new();
  part_a(false);
  part_a(true);
  for (int kind = 0; kind < B_COUNT_OF; kind++) part_b(kind);
  zmq_ctx_term(zctx);
  return 0;
}
