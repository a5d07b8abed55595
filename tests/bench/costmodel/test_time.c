/* test_time.c: the step time of gs_cm_predict.
 *  - ring: world 1 has no communication; the time equals Thakur et al.'s
 *    2(N-1)(alpha + a) + 2(N-1)/N S beta + (N-1)/N S (gamma + copy);
 *    a large S is bandwidth-bound, a small S latency-bound;
 *  - overlap, over many random jobs of every mode: without overlap the step
 *    is compute + communication (+ the ring's optimizer); with it, never
 *    slower than without, never faster than compute alone nor than
 *    max(compute, communication);
 *  - ps: buckets pipeline push, update and pull (fp32), a barrier (loss
 *    scaling) serialises push then pull; ps grows with the hosts while the
 *    ring stays nearly flat; sps-hosts beats the ring when bandwidth-bound;
 *    recursive doubling beats the ring for small messages only;
 *  - the bottleneck named in each regime; rejection of nonsense. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mt.h"

static gs_cm_result run(const gs_cm_machine *m, gs_cm_job j) {
  gs_cm_result r;
  gs_err e = {0};
  int rc = gs_cm_predict(m, &j, &r, &e);
  CHECK(rc == GS_OK, "%s world %d hosts %d: %s", gs_cm_mode_name(j.mode), j.world, j.hosts,
         e.msg);
  return r;
}

/* the ring formula, written out here independently */
static double thakur_ring(const gs_cm_machine *m, int N, int K, double S) {
  int n = N / K;
  double a = K > 1 ? m->link_latency_s : 0;
  double beta = fmax(K > 1 ? 1 / m->link_Bps : 0, n > 1 ? 1 / m->local_Bps : 0);
  return 2.0 * (N - 1) * (m->alpha_s + a) + 2.0 * (N - 1) / N * S * beta +
         (N - 1.0) / N * S * (1 / m->reduce_Bps + 1 / m->copy_Bps);
}

static void ring_limits(void) {
  gs_cm_machine m = mt_machine();
  size_t big[1] = {(size_t)1 << 36}, small[1] = {64};
  gs_cm_plan pb = mt_plan(big, 1), ps = mt_plan(small, 1);
  gs_cm_job j = {.mode = GS_CM_RING, .world = 1, .hosts = 1, .plan = &pb, .batch = 8,
                 .fwd_s = 1e-3, .bwd_s = 2e-3, .overlap = true};
  gs_cm_result r = run(&m, j);
  CHECK(r.comm_s == 0 && r.exposed_s == 0 && r.efficiency == 1);
  CHECK(mt_near(r.step_s, 8 * 3e-3 + (double)pb.nparams / m.optim_pps, 1e-12));

  static const int cases[][2] = {{2, 2}, {8, 8}, {8, 2}, {16, 4}, {64, 8}, {6, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int N = cases[c][0], K = cases[c][1];
    j.world = N;
    j.hosts = K;
    j.overlap = false;
    j.plan = &pb;
    r = run(&m, j);
    CHECK(mt_near(r.comm_s, thakur_ring(&m, N, K, pb.total), 1e-12), "N %d K %d: %g vs %g", N,
           K, r.comm_s, thakur_ring(&m, N, K, pb.total));
    /* large S: the byte terms are all of it */
    double beta = fmax(K > 1 ? 1 / m.link_Bps : 0, N / K > 1 ? 1 / m.local_Bps : 0);
    double bytes = 2.0 * (N - 1) / N * pb.total * beta +
                   (N - 1.0) / N * pb.total * (1 / m.reduce_Bps + 1 / m.copy_Bps);
    CHECK(mt_near(r.comm_s, bytes, 1e-3), "N %d K %d: large S not bandwidth-bound", N, K);
    CHECK(r.bottleneck == GS_CM_B_RING_BANDWIDTH);
    /* small S: 2(N-1) latencies */
    j.plan = &ps;
    r = run(&m, j);
    double lat = 2.0 * (N - 1) * (m.alpha_s + (K > 1 ? m.link_latency_s : 0));
    CHECK(mt_near(r.comm_s, lat, 1e-2), "N %d K %d: small S not latency-bound (%g vs %g)", N, K,
           r.comm_s, lat);
    CHECK(mt_near(r.latency_s, lat, 1e-12));
    j.fwd_s = j.bwd_s = 0;  /* nothing else to hide behind */
    r = run(&m, j);
    CHECK(r.bottleneck == GS_CM_B_RING_LATENCY, "N %d K %d: bottleneck %s", N, K,
           gs_cm_bottleneck_name(r.bottleneck));
    j.fwd_s = 1e-3;
    j.bwd_s = 2e-3;
  }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}
static double logu(double lo, double hi) { return lo * pow(hi / lo, uniform()); }

static void overlap_bounds(void) {
  static const int layouts[][2] = {{2, 1}, {2, 2}, {4, 2}, {8, 8}, {16, 4}, {64, 8}, {256, 32}};
  int jobs = 0;
  for (int trial = 0; trial < 2000; trial++) {
    gs_cm_machine m = {.link_Bps = logu(1e7, 1e11), .link_latency_s = logu(1e-7, 1e-3),
                       .alpha_s = logu(1e-7, 1e-4), .local_Bps = logu(1e8, 1e11),
                       .reduce_Bps = logu(1e8, 1e11), .copy_Bps = logu(1e8, 1e11),
                       .optim_pps = logu(1e7, 1e10)};
    size_t bytes[12];
    int nb = 1 + (int)(uniform() * 12);
    for (int i = 0; i < nb; i++) bytes[i] = (size_t)logu(1e3, 1e8);
    gs_cm_plan p = mt_plan(bytes, nb);
    const int *L = layouts[(int)(uniform() * 7)];
    gs_cm_job j = {.mode = (gs_cm_mode)(trial % GS_CM_NMODES), .world = L[0], .hosts = L[1],
                   .servers = 1 + (int)(uniform() * 8), .plan = &p, .batch = 1 + (int)(uniform() * 64),
                   .fwd_s = logu(1e-6, 1e-1), .bwd_s = logu(1e-6, 1e-1), .barrier = uniform() < 0.3};
    if (j.mode == GS_CM_BYTEPS)  /* BytePS' split: k <= n, none at n = 1 */
      j.servers = j.hosts > 1 ? j.servers % (j.hosts + 1) : 0;
    gs_cm_result off = run(&m, j);
    j.overlap = true;
    gs_cm_result on = run(&m, j);
    /* every rank's optimizer after its step's communication */
    bool local_opt = j.mode == GS_CM_RING || j.mode == GS_CM_RD || j.mode == GS_CM_BYTEPS;
    double post = local_opt ? off.optimizer_s : 0;
    double tol = 1e-9 * off.step_s;
    CHECK(mt_near(off.step_s, off.compute_s + off.comm_s + post, 1e-9),
           "trial %d %s: no overlap %g != compute %g + comm %g + post %g", trial,
           gs_cm_mode_name(j.mode), off.step_s, off.compute_s, off.comm_s, post);
    CHECK(mt_near(off.exposed_s, off.comm_s, 1e-9), "trial %d: exposed %g comm %g", trial,
           off.exposed_s, off.comm_s);
    CHECK(on.step_s <= off.step_s + tol, "trial %d %s: overlap slower (%g > %g)", trial,
           gs_cm_mode_name(j.mode), on.step_s, off.step_s);
    CHECK(on.step_s >= on.compute_s + post - tol, "trial %d %s: faster than compute", trial,
           gs_cm_mode_name(j.mode));
    CHECK(on.step_s >= fmax(on.compute_s, on.comm_s) + post - tol,
           "trial %d %s: overlap %g faster than max(compute %g, comm %g) + %g", trial,
           gs_cm_mode_name(j.mode), on.step_s, on.compute_s, on.comm_s, post);
    CHECK(on.exposed_s <= off.exposed_s + tol && on.exposed_s >= 0);
    /* a sharded server updates only its share, so its step can beat world 1's
     * optimizer; the others cannot beat world 1 */
    if (j.mode == GS_CM_PS || local_opt)
      CHECK(off.efficiency <= 1 + 1e-12 && off.efficiency > 0, "trial %d %s: efficiency %g",
             trial, gs_cm_mode_name(j.mode), off.efficiency);
    if (local_opt) CHECK(on.efficiency <= 1 + 1e-12);
    CHECK(mt_near(on.samples_per_s, j.world * j.batch / on.step_s, 1e-12));
    jobs++;
  }
  CHECK(jobs == 2000);
}

/* ps: one link, four 25 MB buckets, no per-message or compute costs */
static void ps_pipeline(void) {
  gs_cm_machine m = {.link_Bps = 1e9, .local_Bps = 1e9, .reduce_Bps = 1e15, .copy_Bps = 1e15,
                     .optim_pps = 1e15};
  size_t b[4] = {25000000, 25000000, 25000000, 25000000};
  gs_cm_plan p = mt_plan(b, 4);
  gs_cm_job j = {.mode = GS_CM_PS, .world = 4, .hosts = 4, .plan = &p, .batch = 1};
  gs_cm_result r = run(&m, j);
  /* fp32: bucket i's parameters leave while bucket i+1 still arrives:
   * (N-n)(S + s_last)/b */
  CHECK(mt_near(r.comm_s, 3 * (p.total + 25e6) / 1e9, 1e-6), "pipelined ps comm %g", r.comm_s);
  CHECK(r.bottleneck == GS_CM_B_MASTER_LINK);
  j.barrier = true;  /* loss scaling: every push before any pull, 2(N-n)S/b */
  r = run(&m, j);
  CHECK(mt_near(r.comm_s, 2 * 3 * p.total / 1e9, 1e-6), "ps with barrier comm %g", r.comm_s);
  CHECK(mt_near(r.link_busy, 3 * p.total / 1e9 / r.step_s, 1e-9));

  /* scaling in hosts: ps grows with N - n, the ring barely moves */
  size_t one[1] = {100000000};
  gs_cm_plan p1 = mt_plan(one, 1);
  j.plan = &p1;
  j.barrier = false;
  double ps4, ps8, ring4, ring8;
  j.world = j.hosts = 4;
  ps4 = run(&m, j).comm_s;
  j.world = j.hosts = 8;
  ps8 = run(&m, j).comm_s;
  j.mode = GS_CM_RING;
  ring8 = run(&m, j).comm_s;
  j.world = j.hosts = 4;
  ring4 = run(&m, j).comm_s;
  CHECK(mt_near(ps8 / ps4, 7.0 / 3.0, 1e-6), "ps 8/4 hosts: %g", ps8 / ps4);
  CHECK(mt_near(ring8 / ring4, (7.0 / 8) / (3.0 / 4), 1e-6), "ring 8/4 hosts: %g", ring8 / ring4);
}

static void topologies(void) {
  gs_cm_machine m = mt_machine();
  size_t big[1] = {400000000}, tiny[1] = {4096}, parts[100];
  for (int i = 0; i < 100; i++) parts[i] = 4000000;
  gs_cm_plan pb = mt_plan(big, 1), pt = mt_plan(tiny, 1), pp = mt_plan(parts, 100);
  gs_cm_job j = {.world = 16, .hosts = 16, .servers = 16, .plan = &pb, .batch = 1};
  j.mode = GS_CM_RING;
  double ring = run(&m, j).comm_s;
  /* sps-hosts moves S each way instead of 2(N-1)/N S, but only gains when
   * pushes and pulls of different pieces overlap (BytePS partitions) */
  j.mode = GS_CM_SPS_HOSTS;
  gs_cm_result sh = run(&m, j);
  CHECK(sh.comm_s > ring, "one piece: sps-hosts %g vs ring %g", sh.comm_s, ring);
  j.plan = &pp;
  sh = run(&m, j);
  CHECK(sh.comm_s < 0.7 * ring, "100 pieces: sps-hosts %g vs ring %g", sh.comm_s, ring);
  j.plan = &pb;
  j.servers = 2;  /* too few servers: their links are the limit */
  sh = run(&m, j);
  CHECK(sh.bottleneck == GS_CM_B_SERVER_LINK, "bottleneck %s", gs_cm_bottleneck_name(sh.bottleneck));
  CHECK(sh.comm_s > ring);
  j.world = 64;  /* 4 ranks on each of 16 worker hosts, 32 server hosts */
  j.servers = 32;
  sh = run(&m, j);
  CHECK(sh.bottleneck == GS_CM_B_WORKER_LINK, "bottleneck %s", gs_cm_bottleneck_name(sh.bottleneck));
  j.mode = GS_CM_SPS_COLO;
  CHECK(run(&m, j).bottleneck == GS_CM_B_HOST_LINK);

  j.world = j.hosts = 64;
  j.mode = GS_CM_RD;
  double rd_big = run(&m, j).comm_s;
  j.mode = GS_CM_RING;
  double ring_big = run(&m, j).comm_s;
  CHECK(ring_big < rd_big, "large S: ring %g rd %g", ring_big, rd_big);
  j.plan = &pt;
  double ring_tiny = run(&m, j).comm_s;
  j.mode = GS_CM_RD;
  double rd_tiny = run(&m, j).comm_s;
  CHECK(rd_tiny < ring_tiny, "small S: rd %g ring %g", rd_tiny, ring_tiny);

  /* the master's reduction: one fast host, a slow adder */
  gs_cm_machine slow = m;
  slow.reduce_Bps = 1e8;
  slow.local_Bps = 1e11;
  gs_cm_job k = {.mode = GS_CM_PS, .world = 8, .hosts = 1, .plan = &pb, .batch = 1};
  CHECK(run(&slow, k).bottleneck == GS_CM_B_MASTER_REDUCE);
  k.fwd_s = 100;  /* compute dwarfs everything */
  k.mode = GS_CM_RING;
  CHECK(run(&slow, k).bottleneck == GS_CM_B_COMPUTE);
}

static void readiness(void) {
  gs_cm_machine m = mt_machine();
  size_t b[3] = {1 << 20, 25 << 20, 25 << 20};
  gs_cm_plan p = mt_plan(b, 3);
  double late[3] = {1, 1, 1}, early[3] = {0, 0.1, 0.2};
  gs_cm_job j = {.mode = GS_CM_RING, .world = 8, .hosts = 4, .plan = &p, .batch = 4,
                 .fwd_s = 1e-3, .bwd_s = 5e-3};
  double off = run(&m, j).step_s;
  j.overlap = true;
  j.ready = late;  /* every bucket ready at the end of backward: no overlap at all */
  CHECK(mt_near(run(&m, j).step_s, off, 1e-12));
  j.ready = early;
  double on_early = run(&m, j).step_s;
  j.ready = NULL;
  double on_prop = run(&m, j).step_s;
  CHECK(on_early <= on_prop && on_prop < off, "early %g proportional %g none %g", on_early,
         on_prop, off);
}

static void expect_reject(const gs_cm_machine *m, gs_cm_job j, const char *needle) {
  gs_cm_result r;
  gs_err e = {0};
  int rc = gs_cm_predict(m, &j, &r, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, needle), "expected an error naming '%s', got %d: %s",
         needle, rc, e.msg);
}

static void rejects(void) {
  gs_cm_machine m = mt_machine();
  size_t b[2] = {1000, 2000};
  gs_cm_plan p = mt_plan(b, 2);
  gs_cm_job j = {.mode = GS_CM_RING, .world = 8, .hosts = 2, .plan = &p, .batch = 1};
  gs_cm_job x = j;
  x.world = 0;
  expect_reject(&m, x, "world 0");
  x = j;
  x.hosts = 3;
  expect_reject(&m, x, "does not split evenly");
  x.hosts = 9;
  expect_reject(&m, x, "9 hosts");
  x = j;
  x.mode = (gs_cm_mode)42;
  expect_reject(&m, x, "unknown mode");
  x = j;
  x.batch = 0;
  expect_reject(&m, x, "batch 0");
  x = j;
  x.bwd_s = -1;
  expect_reject(&m, x, "backward");
  x = j;
  double bad[2] = {0.5, 0.2};
  x.ready = bad;
  expect_reject(&m, x, "bucket 1");
  x = j;
  x.plan = NULL;
  expect_reject(&m, x, "plan");
  gs_cm_machine mm = m;
  mm.link_Bps = -1e9;
  expect_reject(&mm, j, "link rate");
  mm = m;
  mm.link_latency_s = NAN;
  expect_reject(&mm, j, "latency");
  mm = m;
  mm.optim_pps = 0;
  expect_reject(&mm, j, "optimizer");
  gs_cm_mode mode;
  gs_err e = {0};
  CHECK(gs_cm_mode_parse("ring", &mode, &e) == GS_OK && mode == GS_CM_RING);
  CHECK(gs_cm_mode_parse("sps-hosts", &mode, &e) == GS_OK && mode == GS_CM_SPS_HOSTS);
  CHECK(gs_cm_mode_parse("allgather", &mode, &e) == GS_EINVAL && strstr(e.msg, "allgather"));
}

/* Hosts that reduce first, on 2 hosts of 4 ranks, link-bound: the ps
 * master's link carries S instead of 4 S, the ring 1 S instead of 1.75 S,
 * so both steps are shorter than the flat ones, by at most those ratios
 * (the shared-memory sums add their own time); one rank per host changes
 * nothing. */
static void host_reduce(void) {
  size_t b[2] = {1 << 20, 24 << 20};
  gs_cm_plan p = mt_plan(b, 2);
  gs_cm_machine m = mt_machine();
  for (int mode = GS_CM_PS; mode <= GS_CM_RING; mode++) {
    gs_cm_job j = {.mode = (gs_cm_mode)mode, .world = 8, .hosts = 2, .plan = &p, .batch = 1,
                   .fwd_s = 1e-6, .bwd_s = 1e-6};
    gs_cm_result flat, hr, one, one_hr;
    gs_err e = {0};
    CHECK_OK(gs_cm_predict(&m, &j, &flat, &e), &e);
    j.host_reduce = true;
    CHECK_OK(gs_cm_predict(&m, &j, &hr, &e), &e);
    double bytes = mode == GS_CM_PS ? 4.0 : 1.75;
    CHECK(hr.comm_s < flat.comm_s && hr.comm_s > flat.comm_s / bytes / 1.01,
          "%s: comm %g s with hosts reducing first, %g s flat (ratio at most %g)",
          gs_cm_mode_name(j.mode), hr.comm_s, flat.comm_s, bytes);
    CHECK(mt_near(hr.hot_in, mode == GS_CM_PS ? p.total : p.total, 1e-12));
    j.world = 2;
    CHECK_OK(gs_cm_predict(&m, &j, &one_hr, &e), &e);
    j.host_reduce = false;
    CHECK_OK(gs_cm_predict(&m, &j, &one, &e), &e);
    CHECK(one.step_s == one_hr.step_s, "%s: one rank per host, %g vs %g",
          gs_cm_mode_name(j.mode), one.step_s, one_hr.step_s);
  }
}

int main(void) {
  host_reduce();
  ring_limits();
  overlap_bounds();
  ps_pipeline();
  topologies();
  readiness();
  rejects();
  return check_done("model_time");
}
