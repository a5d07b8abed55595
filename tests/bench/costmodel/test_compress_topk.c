/* test_compress_topk.c: the cost model of top-k pushes (compress.c, ps).
 *  - bytes per bucket: 8 a kept entry, k = ceil(F n), or the dense bucket
 *    where that is not smaller (compress.h's rule), counted by hand;
 *  - the ps step: pushes carry those bytes, the pull stays dense, so the
 *    bandwidth term is (N-1)(S' + S)/b against 2(N-1)S/b, and each link's
 *    bytes are S' one way and S the other; the selection's
 *    work comes before each push; on a 10 Mbit/s link it pays, on loopback
 *    against real work it does not; topk:1 (dense pushes, no work) is the
 *    uncompressed step exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

static const gs_compress_tensor T[] = {{0, 10, 1}, {10, 300, 200}, {60010, 64, 3},
                                       {60202, 400, 500}};
static const gs_bucket B[] = {{0, 60010}, {60010, 192 + 200000}};
enum { NT = 4, NB = 2, NPARAMS = 60010 + 192 + 200000 };

static gs_compress spec(const char *s) {
  gs_compress c;
  gs_err e = {0};
  gs_compress_default(&c);
  CHECK(gs_compress_parse(s, &c, &e) == GS_OK, "%s: %s", s, e.msg);
  return c;
}

int main(void) {
  gs_err e = {0};
  gs_cm_compressed c;
  gs_compress t1 = spec("topk:0.1");
  CHECK_OK(gs_cm_compress_plan(&t1, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  /* ceil(6001.0) = 6001 and ceil(20019.2) = 20020 entries of 8 bytes */
  CHECK(c.plan.bytes[0] == 8 * 6001 && c.plan.bytes[1] == 8 * 20020, "%zu %zu",
        c.plan.bytes[0], c.plan.bytes[1]);
  CHECK(c.plan.total == 8.0 * (6001 + 20020) && c.plain.total == 4.0 * NPARAMS);
  CHECK(c.collectives[0] == 1 && c.collectives[1] == 1);

  gs_cm_machine m = mt_machine();
  m.link_Bps = 1.25e6;  /* 10 Mbit/s */
  gs_cm_job j = {.mode = GS_CM_PS, .world = 4, .hosts = 4, .plan = &c.plain, .batch = 1,
                 .fwd_s = 1e-4, .bwd_s = 2e-4};
  gs_cm_compress_verdict v;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  double want = 3 * (c.plan.total + c.plain.total) / m.link_Bps;
  CHECK(mt_near(v.comp.bandwidth_s, want, 1e-9) &&
        mt_near(v.plain.bandwidth_s, 6 * c.plain.total / m.link_Bps, 1e-9),
        "bandwidth %g (want %g), plain %g", v.comp.bandwidth_s, want, v.plain.bandwidth_s);
  CHECK(v.comp.grad_bytes == c.plan.total, "grad bytes %g", v.comp.grad_bytes);
  /* each link: the master's takes 3 sparse pushes in and 3 dense buckets out */
  gs_cm_job lj = j;
  lj.plan = &c.plain;
  lj.push_bytes = c.plan.bytes;
  double in0, out0, in1, out1;
  CHECK_OK(gs_cm_link_bytes(&lj, 0, &in0, &out0, &e), &e);
  CHECK_OK(gs_cm_link_bytes(&lj, 1, &in1, &out1, &e), &e);
  CHECK(mt_near(in0, 3 * c.plan.total, 1e-12) && mt_near(out0, 3 * c.plain.total, 1e-12) &&
        mt_near(out1, c.plan.total, 1e-12) && mt_near(in1, c.plain.total, 1e-12), "links: master %g in %g out, worker %g in %g out", in0, out0,
        in1, out1);
  CHECK(v.pays && v.comp.step_s < 0.7 * v.plain.step_s, "10 Mbit/s: %g vs %g",
        v.comp.step_s, v.plain.step_s);
  printf("ps world 4 at 10 Mbit/s, topk:0.1: step %.4f s against %.4f s uncompressed\n",
         v.comp.step_s, v.plain.step_s);
  /* loopback (one host) against 10 ms of selection per bucket: it does not */
  j.hosts = 1;
  m.link_Bps = 1e9;
  c.compute_s[0] = c.compute_s[1] = 1e-2;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(!v.pays && !v.even && v.comp.step_s > v.plain.step_s + 1e-2 &&
        mt_near(v.compute_s, 2e-2, 1e-12), "loopback: %g vs %g", v.comp.step_s,
        v.plain.step_s);
  /* the ring: an all-gather, (N-1) P through each link (N = 4: 3 P) against
   * 2(N-1)/N S for the dense all-reduce; priced as the all-reduce of N P/2 */
  size_t gb[NB];
  gs_cm_topk_ring_bytes(&c.plan, 4, gb);
  CHECK(gb[0] == 2 * c.plan.bytes[0] && gb[1] == 2 * c.plan.bytes[1], "ring bytes %zu %zu", gb[0],
        gb[1]);
  c.compute_s[0] = c.compute_s[1] = 0;
  m.link_Bps = 1.25e6;
  gs_cm_job rj = {.mode = GS_CM_RING, .world = 4, .hosts = 4, .plan = &c.plain, .batch = 1,
                  .fwd_s = 1e-4, .bwd_s = 2e-4};
  CHECK_OK(gs_cm_compress_predict(&m, &rj, &c, &v, &e), &e);
  CHECK(mt_near(v.comp.bandwidth_s, 3 * c.plan.total / m.link_Bps, 1e-9) &&
        mt_near(v.plain.bandwidth_s, 1.5 * c.plain.total / m.link_Bps, 1e-9) && v.pays,
        "ring: bandwidth %g (want %g), plain %g (want %g)", v.comp.bandwidth_s,
        3 * c.plan.total / m.link_Bps, v.plain.bandwidth_s, 1.5 * c.plain.total / m.link_Bps);
  printf("ring world 4 at 10 Mbit/s, topk:0.1: bandwidth term %.4f s against %.4f s dense\n",
         v.comp.bandwidth_s, v.plain.bandwidth_s);
  gs_cm_compressed_free(&c);

  /* past half the bucket a push is dense, and topk:1 without work is none */
  gs_compress t6 = spec("topk:0.6"), all = spec("topk:1");
  CHECK_OK(gs_cm_compress_plan(&t6, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  CHECK(c.plan.total == c.plain.total, "topk:0.6 %g", c.plan.total);
  gs_cm_compressed_free(&c);
  CHECK_OK(gs_cm_compress_plan(&all, GS_F32, T, NT, B, NB, NPARAMS, &c, &e), &e);
  j.hosts = 4;
  m.link_Bps = 1.25e6;
  CHECK_OK(gs_cm_compress_predict(&m, &j, &c, &v, &e), &e);
  CHECK(v.comp.step_s == v.plain.step_s && v.even, "topk:1 %g vs %g", v.comp.step_s,
        v.plain.step_s);
  gs_cm_compressed_free(&c);
  return check_done("model_compress_topk");
}
