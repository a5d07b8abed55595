/* test_compress.c: the cost model of a compressed step (compress.c).
 *  - bytes per bucket: powersgd:R sends the tensors it leaves alone, then
 *    rows x r and cols x r per compressed tensor (r = min(R, rows, cols)),
 *    counted by hand here; fp16 / bf16 two bytes an element; none as is;
 *    the all-reduces per bucket (the empty parts are skipped);
 *  - the plan agrees with compress/ itself: PowerSGD run over a counting
 *    all-reduce puts exactly the predicted floats into its all-reduces;
 *  - the step: each all-reduce of a bucket pays the latency, the
 *    compression's work sits on the communication thread; on a slow link
 *    compression pays, on a fast one with real work it does not, and
 *    within 5% it is called even;
 *  - tensors outside the buckets are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

/* bucket 0: a 10-vector then a 300 x 200 matrix; bucket 1: a 64 x 3 matrix
 * (too thin for rank 2 to pay: 2 (64 + 3) 2 > 192) and a 400 x 500 one */
static const gs_compress_tensor T[] = {
    {0, 10, 1}, {10, 300, 200}, {60010, 64, 3}, {60202, 400, 500}};
static const gs_bucket B[] = {{0, 60010}, {60010, 192 + 200000}};
enum { NT = 4, NB = 2, NPARAMS = 60010 + 192 + 200000 };

static gs_compress spec(const char *s) {
  gs_compress c;
  gs_err e = {0};
  gs_compress_default(&c);
  c.min_rate = GS_POWERSGD_MIN_RATE;
  CHECK(gs_compress_parse(s, &c, &e) == GS_OK, "%s: %s", s, e.msg);
  return c;
}

static void bytes(void) {
  gs_err e = {0};
  gs_cm_compressed c;
  gs_compress p2 = spec("powersgd:2");
  CHECK_OK(gs_cm_compress_plan(&p2, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  /* bucket 0: 10 + (300 + 200) x 2; bucket 1: 192 + (400 + 500) x 2 */
  CHECK(c.plan.bytes[0] == 4 * (10 + 1000) && c.plan.bytes[1] == 4 * (192 + 1800),
        "%zu %zu", c.plan.bytes[0], c.plan.bytes[1]);
  CHECK(c.collectives[0] == 3 && c.collectives[1] == 3);
  CHECK(c.plain.bytes[0] == 4 * 60010 && c.plain.total == 4.0 * NPARAMS);
  CHECK(c.plan.total == 4.0 * (1010 + 1992) && c.plan.nparams == NPARAMS);
  gs_cm_compressed_free(&c);

  /* rank 300: r = min(R, rows, cols), and no matrix pays, so one part each */
  gs_compress p300 = spec("powersgd:300");
  CHECK_OK(gs_cm_compress_plan(&p300, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  CHECK(c.plan.bytes[0] == 4 * 60010 && c.collectives[0] == 1 && c.collectives[1] == 1);
  gs_cm_compressed_free(&c);

  gs_compress f16 = spec("fp16"), none = spec("none");
  CHECK_OK(gs_cm_compress_plan(&f16, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  CHECK(c.plan.total == 2.0 * NPARAMS && c.collectives[1] == 1 && c.plan.elem_bytes == 2);
  gs_cm_compressed_free(&c);
  CHECK_OK(gs_cm_compress_plan(&none, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  CHECK(c.plan.total == c.plain.total && c.plan.bytes[1] == c.plain.bytes[1]);
  gs_cm_compressed_free(&c);

  gs_compress_tensor bad[NT];
  memcpy(bad, T, sizeof bad);
  bad[1].rows = 301; /* runs into bucket 1 */
  CHECK(gs_cm_compress_plan(&p2, GS_F32, bad, NT, B, NB, NPARAMS, &c, &e) == GS_EINVAL &&
        strstr(e.msg, "tensor 1"));
}

typedef struct counter {
  size_t floats;
  int calls;
} counter;

static int count(void *ctx, float *buf, size_t n, int part, gs_err *e) {
  (void)buf, (void)part, (void)e;
  counter *c = ctx;
  c->floats += n;
  c->calls++;
  return GS_OK;
}

/* compress/ itself moves what the plan says */
static void agrees_with_powersgd(void) {
  gs_err e = {0};
  gs_compress p2 = spec("powersgd:2");
  p2.start = 0;
  gs_cm_compressed c;
  CHECK_OK(gs_cm_compress_plan(&p2, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  gs_kernels *k = gs_kernels_cpu(1, &e);
  CHECK(k, "%s", e.msg);
  gs_powersgd *p = NULL;
  float *g = calloc(NPARAMS, sizeof *g);
  for (size_t i = 0; g && i < NPARAMS; i++) g[i] = (float)(i % 17) - 8;
  if (k && g && gs_powersgd_create(&p2, k, T, NT, NB, 1, &p, &e) == GS_OK) {
    for (int b = 0; b < NB; b++) {
      counter n = {0};
      CHECK_OK(gs_powersgd_bucket(p, b, g, B[b].offset, B[b].count, count, &n, NULL, &e), &e);
      CHECK(n.floats * 4 == c.plan.bytes[b] && n.calls == c.collectives[b],
            "bucket %d: %zu floats in %d all-reduces, plan %zu bytes in %d", b, n.floats,
            n.calls, c.plan.bytes[b], c.collectives[b]);
    }
  } else {
    CHECK(0, "powersgd: %s", e.msg);
  }
  gs_powersgd_destroy(p);
  free(g);
  if (k) k->destroy(k);
  gs_cm_compressed_free(&c);
}

static void step(void) {
  gs_err e = {0};
  gs_compress p2 = spec("powersgd:2");
  gs_cm_compressed c;
  CHECK_OK(gs_cm_compress_plan(&p2, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  gs_cm_machine m = mt_machine();
  gs_cm_job j = {.mode = GS_CM_RING, .world = 4, .hosts = 4, .plan = &c.plain, .batch = 1,
                 .fwd_s = 1e-4, .bwd_s = 2e-4, .overlap = true};
  gs_cm_compress_verdict v;
  /* no work: every all-reduce pays its latency, so 3 x the plain latency */
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(mt_near(v.comp.latency_s, 3 * v.plain.latency_s, 1e-12), "%g %g", v.comp.latency_s,
        v.plain.latency_s);
  CHECK(v.comp.grad_bytes == c.plan.total && v.plain.grad_bytes == c.plain.total);
  CHECK(v.comp.bandwidth_s < v.plain.bandwidth_s / 50);
  /* a 10 Mbit/s link: 1 MB of gradients take 0.6 s, compressing 1 ms pays */
  m.link_Bps = 1.25e6;
  c.compute_s[0] = c.compute_s[1] = 5e-4;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(v.pays && v.comp.step_s < v.plain.step_s / 10 && mt_near(v.compute_s, 1e-3, 1e-12),
        "%g vs %g", v.comp.step_s, v.plain.step_s);
  /* a fast link (one host's loopback) against 20 ms of work: it does not */
  j.hosts = 1;
  c.compute_s[0] = c.compute_s[1] = 1e-2;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(!v.pays && !v.even && v.comp.step_s > v.plain.step_s + 1e-2, "%g vs %g",
        v.comp.step_s, v.plain.step_s);
  CHECK(v.comp.bottleneck == GS_CM_B_COMPRESSION, "%s",
        gs_cm_bottleneck_name(v.comp.bottleneck));
  /* 0.1 ms of work against 30 ms of compute: within 5%, neither way */
  c.compute_s[0] = c.compute_s[1] = 5e-5;
  j.fwd_s = j.bwd_s = 1.5e-2;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(v.even && !v.pays, "%g vs %g", v.comp.step_s, v.plain.step_s);
  j.fwd_s = 1e-4;
  j.bwd_s = 2e-4;
  c.compute_s[0] = c.compute_s[1] = 1e-2;
  /* ps takes the bytes alone (fp16 there), never the ring's all-reduces */
  j.mode = GS_CM_PS;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(v.comp.grad_bytes == c.plan.total && v.compute_s == 2e-2);
  c.compute_s[1] = -1;
  CHECK(gs_cm_compress_predict(&m, &j, &c, &v, &e) == GS_EINVAL && strstr(e.msg, "bucket 1"));
  gs_cm_compressed_free(&c);
}

int main(void) {
  bytes();
  agrees_with_powersgd();
  step();
  return check_done("model_compress");
}
