/* test_topk_wire.c: sparse pushes on the ps wire (--compress topk, ps/topk_recv.c).
 *
 * Rank 0 is a real worker (topk:0.1, zero gradients) beside its server;
 * rank 1 is a raw socket that joins and pushes by hand.
 *
 *   sum      step 0: rank 1's sparse pushes (known indices and values) land
 *            where their indices say: every bucket's new parameters are
 *            -lr x (its values / world) there and untouched elsewhere
 *   lies     step 1: one bad push of bucket 0 (an index out of the bucket,
 *            a repeated index, decreasing indices, a kept count that is not
 *            the server's, a payload of the wrong size, a dense push in a
 *            topk job, a sparse push in a dense job): the job fails at once
 *            with an error naming rank 1, the step and the bucket and what
 *            was wrong, on rank 0, and the raw rank gets an Error; nothing
 *            crashes (run under ASan too). */
#include <pthread.h>
#include <string.h>
#include <zmq.h>

#include "harness.h"
#include "proto/wire.h"
#include "ps/ps.h"

#define JOB 0x70b4c0ffee123400ull
#define N 1000
#define FRACTION 0.1
#define LR 0.1f

static void *zctx;

enum { L_NONE, L_RANGE, L_REPEAT, L_DOWN, L_KEPT, L_SIZE, L_DENSE, L_SPARSE_IN_DENSE, L_COUNT };
static const char *const l_name[] = {
  "good pushes", "index out of the bucket", "a repeated index", "decreasing indices",
  "kept count not the server's", "payload of the wrong size", "dense push in a topk job",
  "sparse push in a dense job",
};
static const char *const l_needle[] = {
  "", "has index 300, outside the bucket's 300", "has index 0 after 0",
  "has index 7 after 14", "with 29 kept entries; topk:0.1 keeps 30",
  "a top-k push of 236 bytes for 30 kept entries", "with 0 kept entries; topk:0.1 keeps 30",
  "this job's pushes are dense",
};

typedef struct rank0 {
  gs_sync_config cfg;
  void *state;
  int nb, rc, steps;
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
    if (z->rc == 0) z->steps++;
  }
  if (s) s->ops->close(s, z->rc == 0, NULL);
  return NULL;
}

/* One message on the raw socket: its kind (-1: none in time); Params are
 * copied into params at their offset. */
static int raw_recv(void *s, int timeout_ms, float *params) {
  gs_wire_msg m;
  gs_err e = {0};
  int rc = gs_wire_recv(s, false, timeout_ms, JOB, 1 << 24, &m, &e);
  int kind = rc == 0 ? (int)m.env->body_case : -1;
  if (kind == GRADSYNC__ENVELOPE__BODY_PARAMS && params && m.has_payload) {
    const Gradsync__Params *p = m.env->params;
    if (p->offset <= N && zmq_msg_size(&m.payload) <= (N - p->offset) * sizeof(float))
      memcpy(params + p->offset, zmq_msg_data(&m.payload), zmq_msg_size(&m.payload));
  }
  gs_wire_msg_close(&m);
  return kind;
}

/* Rank 1's push of bucket b: k entries at indices 7j with values j + 1,
 * sparse; `lie` bends it. */
static void raw_push(void *s, uint64_t step, int b, const gs_bucket *bk, int lie) {
  size_t cnt = bk[b].count, k = gs_topk_count(FRACTION, cnt);
  static uint8_t pay[N * 8];
  uint32_t idx[N];
  float val[N];
  for (size_t j = 0; j < k; j++) {
    idx[j] = (uint32_t)(7 * j);
    val[j] = (float)(j + 1);
  }
  size_t kept = k, bytes = gs_topk_bytes(k, cnt);
  switch (lie) {
  case L_RANGE: idx[k - 1] = (uint32_t)cnt; break;
  case L_REPEAT: idx[1] = idx[0]; break;
  case L_DOWN: idx[2] = 7; idx[1] = 14; break;
  case L_KEPT: kept = k - 1; bytes = gs_topk_bytes(kept, cnt); break;
  case L_SIZE: bytes -= 4; break;
  case L_DENSE: kept = 0; bytes = cnt * sizeof(float); break;
  default: break;
  }
  memcpy(pay, idx, kept * sizeof *idx);
  memcpy(pay + kept * sizeof *idx, val, kept * sizeof *val);
  uint8_t h[256];
  Gradsync__Envelope env;
  Gradsync__Push p;
  push_env(&env, &p, JOB, 1, step, (uint32_t)b, bk[b].offset, cnt);
  p.kept = kept;
  size_t hl = gradsync__envelope__pack(&env, h);
  zmq_send(s, h, hl, ZMQ_SNDMORE);
  zmq_send(s, pay, bytes, 0);
}

static void run_case(int lie) {
  rank0 z = {0};
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  REQUIRE(k, "cpu kernels: %s", e.msg);
  float *params = k->alloc(k, N * sizeof(float)), *grads = k->alloc(k, N * sizeof(float));
  memset(params, 0, N * sizeof(float));
  memset(grads, 0, N * sizeof(float));
  gs_bucket *bk = plan_buckets(N, 300, &z.nb);
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
  c->buckets = bk;
  c->nbuckets = z.nb;
  c->sgd = (gs_sgd){LR, 0.0f, 0.0f};
  c->wire = GS_F32;
  gs_scaler_init(&c->scaler, 1.0f, false);
  gs_compress_default(&c->compress);
  if (lie != L_SPARSE_IN_DENSE) REQUIRE(gs_compress_parse("topk:0.1", &c->compress, &e) == 0,
                                        "parse: %s", e.msg);
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
  hello.nbuckets = (uint32_t)z.nb;
  env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
  env.hello = &hello;
  zmq_send(s, h, gradsync__envelope__pack(&env, h), 0);
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, rank0_main, &z) == 0, "pthread_create");
  REQUIRE(raw_recv(s, 5000, NULL) == GRADSYNC__ENVELOPE__BODY_WELCOME, "%s: no welcome",
          l_name[lie]);

  /* step 0: good sparse pushes (a dense job gets dense ones) */
  static float dense[N];
  for (int b = 0; b < z.nb; b++) {
    if (lie != L_SPARSE_IN_DENSE) {
      raw_push(s, 0, b, bk, L_NONE);
      continue;
    }
    Gradsync__Push p;
    push_env(&env, &p, JOB, 1, 0, (uint32_t)b, bk[b].offset, bk[b].count);
    zmq_send(s, h, gradsync__envelope__pack(&env, h), ZMQ_SNDMORE);
    zmq_send(s, dense, bk[b].count * sizeof(float), 0);
  }
  static float got[N];
  for (int i = 0; i < N; i++) got[i] = 12345.0f;
  for (int b = 0; b < z.nb; b++)
    REQUIRE(raw_recv(s, 5000, got) == GRADSYNC__ENVELOPE__BODY_PARAMS, "%s: params of step 0",
            l_name[lie]);
  if (lie == L_NONE) {
    size_t bad = 0, placed = 0;
    for (int b = 0; b < z.nb; b++) {
      size_t kb = gs_topk_count(FRACTION, bk[b].count);
      for (size_t i = 0; i < bk[b].count; i++) {
        float want = 0.0f;
        if (i % 7 == 0 && i / 7 < kb) {
          want = -(LR * ((float)(i / 7 + 1) / 2.0f));
          placed++;
        }
        bad += got[bk[b].offset + i] != want;
      }
    }
    CHECK(bad == 0 && placed > 0, "step 0: %zu of %d parameters are not -lr x the sparse "
          "values / world where pushed and 0 elsewhere", bad, N);
    printf("ok: sparse pushes summed where their indices say (%zu entries in %d buckets)\n",
           placed, z.nb);
  }

  if (lie != L_NONE) raw_push(s, 1, 0, bk, lie);
  else for (int step = 1; step < 3; step++) {
    for (int b = 0; b < z.nb; b++) raw_push(s, (uint64_t)step, b, bk, L_NONE);
    for (int b = 0; b < z.nb; b++)
      REQUIRE(raw_recv(s, 5000, NULL) == GRADSYNC__ENVELOPE__BODY_PARAMS, "params");
  }
  if (lie == L_NONE) {
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
    CHECK(z.rc == 0 && z.steps == 3, "good pushes: rank 0 failed (%d steps): %s", z.steps,
          z.e.msg);
  } else {
    /* rank 0 stops in step 1, or still in step 0: the in-process server
       may abort it before it has read step 0's parameters */
    CHECK(z.rc != 0 && z.steps <= 1, "%s: rank 0 did not fail by step 1 (rc %d, %d steps)",
          l_name[lie], z.rc, z.steps);
    CHECK(strstr(z.e.msg, l_needle[lie]), "%s: rank 0's error does not say '%s': %s",
          l_name[lie], l_needle[lie], z.e.msg);
    CHECK(strstr(z.e.msg, "rank 1") && strstr(z.e.msg, "step 1") && strstr(z.e.msg, "bucket 0"),
          "%s: the error does not name rank 1, step 1, bucket 0: %s", l_name[lie], z.e.msg);
    CHECK(dt < 1.4, "%s: rank 0 took %.2f s to stop", l_name[lie], dt);
    int kind = -1;
    for (int i = 0; i < 8 && kind != GRADSYNC__ENVELOPE__BODY_ERROR; i++)
      kind = raw_recv(s, 3000, NULL);
    CHECK(kind == GRADSYNC__ENVELOPE__BODY_ERROR, "%s: the raw rank 1 got no Error",
          l_name[lie]);
    printf("ok: %-28s -> %s\n", l_name[lie], z.e.msg);
  }
  zmq_close(s);
  k->release(k, params);
  k->release(k, grads);
  k->destroy(k);
  free(bk);
}

int main(void) {
  zctx = zmq_ctx_new();
  for (int lie = 0; lie < L_COUNT; lie++) run_case(lie);
  zmq_ctx_term(zctx);
  return check_done("test_topk_wire");
}
