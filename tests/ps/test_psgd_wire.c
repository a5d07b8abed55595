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

#include "ps_harness.h"
#include "proto/proto.h"
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
  Gradsync__Envelope env;
  Gradsync__Push p;
  push_env(&env, &p, JOB, 1, step, 0, 0, count);
  p.part = (uint32_t)part;
  p.again = again;
  push_send(s, &env, pay, count * sizeof(float));
}

static void run_case(int lie) {
  wire_rank0 z;
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  REQUIRE(k, "cpu kernels: %s", e.msg);
  static gs_bucket bk = {.offset = 0, .count = N};
  static const gs_compress_tensor tensors[] = {{0, ROWS, COLS}, {ROWS * COLS, VEC, 1}};
  wire_rank0_config(&z, k, JOB, N, &bk, 1, LR, 2);
  z.cfg.tensors = tensors;
  z.cfg.ntensors = 2;
  REQUIRE(gs_compress_parse("powersgd:1", &z.cfg.compress, &e) == 0, "parse: %s", e.msg);
  z.cfg.compress.start = 0;
  wire_rank0_prepare(&z);
  void *s = wire_raw_join(zctx, &z);
  Gradsync__Envelope env;
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, wire_rank0_main, &z) == 0, "pthread_create");
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
    push_send(s, &env, dense, sizeof dense);
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
  }
  wire_finish(&z, th, s, l_name[lie], lie == L_NONE ? NULL : l_needle[lie]);
}

int main(void) {
  zctx = zmq_ctx_new();
  for (int lie = 0; lie < L_COUNT; lie++) run_case(lie);
  zmq_ctx_term(zctx);
  return check_done("test_psgd_wire");
}
