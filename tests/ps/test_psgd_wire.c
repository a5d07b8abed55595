/* test_psgd_wire.c: PowerSGD's parts on the ps wire (--compress powersgd,
 * ps/powersgd_recv.c).
 *
 * Rank 0 is a real worker (powersgd:1 from step 0, zero gradients) beside
 * its server; rank 1 is a raw socket that joins and pushes parts by hand.
 * The model: a 20 x 30 matrix (compressed: P 20, Q 30 floats) and a
 * vector of 40 (sent as it is), one bucket.
 *
 *   sum      step 0: the sums of rank 1's parts come back as it pushed them
 *            (rank 0's are zero), and the parameters are -lr x (the vector,
 *            and P orthogonalized times Q) / world
 *   lies     step 1: one bad part (Q before the sums, a part of the wrong
 *            size, a part that does not exist, a part twice, the bucket
 *            whole in a compressed step, a part pushed again after a
 *            dropped connection): the job fails at once, naming rank 1,
 *            step 1, bucket 0 and what was wrong, on rank 0, and the raw
 *            rank gets an Error; nothing crashes (run under ASan too). */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <zmq.h>

#include "harness.h"
#include "proto/wire.h"
#include "ps/ps.h"

#define JOB 0x70b4c0ffee125600ull
#define ROWS 20
#define COLS 30
#define VEC 40
#define N (ROWS * COLS + VEC)
#define LR 0.5f

static void *zctx;

enum { L_NONE, L_EARLY_Q, L_SIZE, L_NOPART, L_TWICE, L_WHOLE, L_AGAIN, L_COUNT };
static const char *const l_name[] = {
  "good parts", "Q before the sums", "a part of the wrong size", "a part that does not exist",
  "a part twice", "the bucket whole", "a part pushed again",
};
static const char *const l_needle[] = {
  "", "pushed Q of step 1 bucket 0 before the server sent the sums",
  "the part is 20 fp32", "which has no such part", "pushed P of step 1 bucket 0 twice",
  "pushed step 1 bucket 0 whole", "is not resumed",
};

typedef struct rank0 {
  gs_sync_config cfg;
  void *state;
  int rc, steps;
  gs_err e;
} rank0;

static void *rank0_main(void *arg) {
  rank0 *z = arg;
  gs_sync *s = NULL;
  z->rc = gs_ps_backend.open(z->state, &z->cfg, &s, &z->e);
  for (int step = 0; z->rc == 0 && step < 2; step++) {
    z->rc = s->ops->begin_step(s, step, &z->e);
    if (z->rc == 0) z->rc = s->ops->bucket_ready(s, 0, &z->e);
    gs_sync_stats st;
    if (z->rc == 0) z->rc = s->ops->end_step(s, &st, &z->e);
    if (z->rc == 0) z->steps++;
  }
  if (s) s->ops->close(s, z->rc == 0, NULL);
  return NULL;
}

/* One message on the raw socket: its kind (-1: none in time); a Params'
 * part in *part and its payload copied into out (at most cap floats). */
static int raw_recv(void *s, int timeout_ms, int *part, float *out, size_t cap) {
  gs_wire_msg m;
  gs_err e = {0};
  int rc = gs_wire_recv(s, false, timeout_ms, JOB, 1 << 20, &m, &e);
  int kind = rc == 0 ? (int)m.env->body_case : -1;
  if (kind == GRADSYNC__ENVELOPE__BODY_PARAMS) {
    if (part) *part = (int)m.env->params->part;
    if (out && m.has_payload && zmq_msg_size(&m.payload) <= cap * sizeof(float))
      memcpy(out, zmq_msg_data(&m.payload), zmq_msg_size(&m.payload));
  }
  gs_wire_msg_close(&m);
  return kind;
}

/* rank 1's parts: the vector j + 1, P 0.1 (i + 1), Q 1 - 0.05 j */
static float u_of(int j) { return (float)(j + 1); }
static float p_of(int i) { return 0.1f * (float)(i + 1); }
static float q_of(int j) { return 1.0f - 0.05f * (float)j; }

static void raw_part(void *s, uint64_t step, int part, size_t count, bool again) {
  float pay[N];
  for (size_t i = 0; i < count && i < N; i++)
    pay[i] = part == 1 ? u_of((int)i) : part == 2 ? p_of((int)i) : q_of((int)i);
  uint8_t h[256];
  Gradsync__Envelope env;
  Gradsync__Push p;
  push_env(&env, &p, JOB, 1, step, 0, 0, count);
  p.part = (uint32_t)part;
  p.again = again;
  zmq_send(s, h, gradsync__envelope__pack(&env, h), ZMQ_SNDMORE);
  zmq_send(s, pay, count * sizeof(float), 0);
}

static void run_case(int lie) {
  rank0 z = {0};
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  REQUIRE(k, "cpu kernels: %s", e.msg);
  float *params = k->alloc(k, N * sizeof(float)), *grads = k->alloc(k, N * sizeof(float));
  memset(params, 0, N * sizeof(float));
  memset(grads, 0, N * sizeof(float));
  static gs_bucket bk = {.offset = 0, .count = N};
  static const gs_compress_tensor tensors[] = {{0, ROWS, COLS}, {ROWS * COLS, VEC, 1}};
  gs_sync_config *c = &z.cfg;
  c->rank = 0;
  c->world = 2;
  c->timeout_ms = 1500;
  c->job = JOB;
  c->host = "127.0.0.1";
  c->k = k;
  c->params = params;
  c->grads = grads;
  c->n = N;
  c->buckets = &bk;
  c->nbuckets = 1;
  c->sgd = (gs_sgd){LR, 0.0f, 0.0f};
  c->wire = GS_F32;
  c->tensors = tensors;
  c->ntensors = 2;
  gs_scaler_init(&c->scaler, 1.0f, false);
  gs_compress_default(&c->compress);
  REQUIRE(gs_compress_parse("powersgd:1", &c->compress, &e) == 0, "parse: %s", e.msg);
  c->compress.start = 0;
  char ep[GS_ENDPOINT_MAX], blob[GS_BOOTSTRAP_MAX];
  size_t len;
  REQUIRE(gs_ps_backend.prepare(c, &z.state, ep, &e) == 0, "prepare: %s", e.msg);
  REQUIRE(gs_ps_backend.bootstrap(z.state, c, blob, &len, &e) == 0, "bootstrap: %s", e.msg);
  c->bootstrap = blob;
  c->bootstrap_len = len;

  void *s = zmq_socket(zctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  static const gs_cred job_cred;
  REQUIRE(gs_cred_connect(s, &job_cred, blob, &e) == 0, "connect %s: %s", blob, e.msg);
  uint8_t h[256];
  Gradsync__Envelope env;
  Gradsync__Hello hello = GRADSYNC__HELLO__INIT;
  gs_wire_env(&env, JOB, 1);
  hello.count = N;
  hello.nbuckets = 1;
  env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
  env.hello = &hello;
  zmq_send(s, h, gradsync__envelope__pack(&env, h), 0);
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, rank0_main, &z) == 0, "pthread_create");
  REQUIRE(raw_recv(s, 5000, NULL, NULL, 0) == GRADSYNC__ENVELOPE__BODY_WELCOME, "%s: no welcome",
          l_name[lie]);

  /* step 0: good parts; the sums of 1 and 2, then Q's, then the parameters */
  raw_part(s, 0, 1, VEC, false);
  raw_part(s, 0, 2, ROWS, false);
  float sum[2][N], qsum[COLS], got[N];
  for (int i = 0; i < 2; i++) {
    int part = -1;
    float buf[N];
    REQUIRE(raw_recv(s, 5000, &part, buf, N) == GRADSYNC__ENVELOPE__BODY_PARAMS &&
            (part == 1 || part == 2), "%s: no sum of part 1 or 2 (part %d)", l_name[lie], part);
    memcpy(sum[part - 1], buf, sizeof buf);
  }
  raw_part(s, 0, 3, COLS, false);
  int part = -1;
  REQUIRE(raw_recv(s, 5000, &part, qsum, COLS) == GRADSYNC__ENVELOPE__BODY_PARAMS && part == 3,
          "%s: no sum of Q (part %d)", l_name[lie], part);
  REQUIRE(raw_recv(s, 5000, &part, got, N) == GRADSYNC__ENVELOPE__BODY_PARAMS && part == 0,
          "%s: no parameters (part %d)", l_name[lie], part);
  if (lie == L_NONE) {
    size_t bad = 0;
    for (int j = 0; j < VEC; j++) bad += sum[0][j] != u_of(j);
    for (int i = 0; i < ROWS; i++) bad += sum[1][i] != p_of(i);
    for (int j = 0; j < COLS; j++) bad += qsum[j] != q_of(j);
    CHECK(bad == 0, "step 0: %zu sums are not rank 1's parts (rank 0's are zero)", bad);
    double norm = 0;
    for (int i = 0; i < ROWS; i++) norm += (double)p_of(i) * p_of(i);
    norm = sqrt(norm);
    double worst = 0;
    for (int i = 0; i < ROWS; i++)
      for (int j = 0; j < COLS; j++) {
        double want = -LR * (p_of(i) / norm) * q_of(j) / 2;
        worst = fmax(worst, fabs(got[i * COLS + j] - want));
      }
    for (int j = 0; j < VEC; j++)
      worst = fmax(worst, fabs(got[ROWS * COLS + j] - (-LR * u_of(j) / 2)));
    CHECK(worst < 1e-6, "step 0: the parameters are %.3g from -lr x (the vector, P Q^T) / 2",
          worst);
    printf("ok: the parts' sums came back as pushed; the parameters are -lr x the rebuilt "
           "bucket / world (worst %.1e)\n", worst);
  }

  switch (lie) {
  case L_EARLY_Q: raw_part(s, 1, 1, VEC, false); raw_part(s, 1, 3, COLS, false); break;
  case L_SIZE: raw_part(s, 1, 2, ROWS - 1, false); break;
  case L_NOPART: raw_part(s, 1, 4, VEC, false); break;
  case L_TWICE: raw_part(s, 1, 2, ROWS, false); raw_part(s, 1, 2, ROWS, false); break;
  case L_WHOLE: {
    float dense[N] = {0};
    Gradsync__Push p;
    push_env(&env, &p, JOB, 1, 1, 0, 0, N);
    zmq_send(s, h, gradsync__envelope__pack(&env, h), ZMQ_SNDMORE);
    zmq_send(s, dense, sizeof dense, 0);
    break;
  }
  case L_AGAIN: raw_part(s, 1, 1, VEC, false); raw_part(s, 1, 1, VEC, true); break;
  default:
    raw_part(s, 1, 1, VEC, false);
    raw_part(s, 1, 2, ROWS, false);
    for (int i = 0; i < 2; i++) raw_recv(s, 5000, NULL, NULL, 0);
    raw_part(s, 1, 3, COLS, false);
    for (int i = 0; i < 2; i++)
      REQUIRE(raw_recv(s, 5000, NULL, NULL, 0) == GRADSYNC__ENVELOPE__BODY_PARAMS, "step 1");
    Gradsync__Shutdown sd = GRADSYNC__SHUTDOWN__INIT;
    sd.reason = (char *)"done";
    gs_wire_env(&env, JOB, 1);
    env.body_case = GRADSYNC__ENVELOPE__BODY_SHUTDOWN;
    env.shutdown = &sd;
    zmq_send(s, h, gradsync__envelope__pack(&env, h), 0);
  }
  double t0 = gs_now();
  pthread_join(th, NULL);
  double dt = gs_now() - t0;
  if (lie == L_NONE) {
    CHECK(z.rc == 0 && z.steps == 2, "good parts: rank 0 failed (%d steps): %s", z.steps,
          z.e.msg);
  } else {
    CHECK(z.rc != 0 && z.steps <= 1, "%s: rank 0 did not fail by step 1 (rc %d, %d steps)",
          l_name[lie], z.rc, z.steps);
    CHECK(strstr(z.e.msg, l_needle[lie]), "%s: rank 0's error does not say '%s': %s",
          l_name[lie], l_needle[lie], z.e.msg);
    CHECK(strstr(z.e.msg, "rank 1") && strstr(z.e.msg, "step 1") && strstr(z.e.msg, "bucket 0"),
          "%s: the error does not name rank 1, step 1, bucket 0: %s", l_name[lie], z.e.msg);
    CHECK(dt < 1.4, "%s: rank 0 took %.2f s to stop", l_name[lie], dt);
    int kind = -1;
    for (int i = 0; i < 8 && kind != GRADSYNC__ENVELOPE__BODY_ERROR; i++)
      kind = raw_recv(s, 3000, NULL, NULL, 0);
    CHECK(kind == GRADSYNC__ENVELOPE__BODY_ERROR, "%s: the raw rank 1 got no Error",
          l_name[lie]);
    printf("ok: %-28s -> %s\n", l_name[lie], z.e.msg);
  }
  zmq_close(s);
  k->release(k, params);
  k->release(k, grads);
  k->destroy(k);
}

int main(void) {
  zctx = zmq_ctx_new();
  for (int lie = 0; lie < L_COUNT; lie++) run_case(lie);
  zmq_ctx_term(zctx);
  return check_done("test_psgd_wire");
}
