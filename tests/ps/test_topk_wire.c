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

#include "ps_harness.h"
#include "proto/proto.h"
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
  Gradsync__Envelope env;
  Gradsync__Push p;
  push_env(&env, &p, JOB, 1, step, (uint32_t)b, bk[b].offset, cnt);
  p.kept = kept;
  push_send(s, &env, pay, bytes);
}

static void run_case(int lie) {
  wire_rank0 z;
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  REQUIRE(k, "cpu kernels: %s", e.msg);
  int nb;
  gs_bucket *bk = plan_buckets(N, 300, &nb);
  wire_rank0_config(&z, k, JOB, N, bk, nb, LR, 3);
  if (lie != L_SPARSE_IN_DENSE)
    REQUIRE(gs_compress_parse("topk:0.1", &z.cfg.compress, &e) == 0, "parse: %s", e.msg);
  wire_rank0_prepare(&z);
  void *s = wire_raw_join(zctx, &z);
  Gradsync__Envelope env;
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, wire_rank0_main, &z) == 0, "pthread_create");
  REQUIRE(raw_recv(s, 5000, NULL) == GRADSYNC__ENVELOPE__BODY_WELCOME, "%s: no welcome",
          l_name[lie]);

  /* step 0: good sparse pushes (a dense job gets dense ones) */
  static float dense[N];
  for (int b = 0; b < nb; b++) {
    if (lie != L_SPARSE_IN_DENSE) {
      raw_push(s, 0, b, bk, L_NONE);
      continue;
    }
    Gradsync__Push p;
    push_env(&env, &p, JOB, 1, 0, (uint32_t)b, bk[b].offset, bk[b].count);
    push_send(s, &env, dense, bk[b].count * sizeof(float));
  }
  static float got[N];
  for (int i = 0; i < N; i++) got[i] = 12345.0f;
  for (int b = 0; b < nb; b++)
    REQUIRE(raw_recv(s, 5000, got) == GRADSYNC__ENVELOPE__BODY_PARAMS, "%s: params of step 0",
            l_name[lie]);
  if (lie == L_NONE) {
    size_t bad = 0, placed = 0;
    for (int b = 0; b < nb; b++) {
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
           placed, nb);
  }

  if (lie != L_NONE) raw_push(s, 1, 0, bk, lie);
  else for (int step = 1; step < 3; step++) {
    for (int b = 0; b < nb; b++) raw_push(s, (uint64_t)step, b, bk, L_NONE);
    for (int b = 0; b < nb; b++)
      REQUIRE(raw_recv(s, 5000, NULL) == GRADSYNC__ENVELOPE__BODY_PARAMS, "params");
  }
  wire_finish(&z, th, s, l_name[lie], lie == L_NONE ? NULL : l_needle[lie]);
  free(bk);
}

int main(void) {
  zctx = zmq_ctx_new();
  for (int lie = 0; lie < L_COUNT; lie++) run_case(lie);
  zmq_ctx_term(zctx);
  return check_done("test_topk_wire");
}
