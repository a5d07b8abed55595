/* test_byteps.c: the cost model's BytePS (byteps: ps/split.c's summation
 * servers on k spare hosts).
 *
 *   bytes    every workers' host and every spare host carries
 *            2n(n-1)/(n^2+kn-2k) S each way (n hosts of one rank, or of
 *            several that sum first), k = 0 .. n; the job has n + k hosts;
 *            k = 0 is the ring's 2(n-1)/n S; a share of one's own splits
 *            the rest; k > n (the formula) and a share above 1/k refused
 *   time     link_s is BytePS' t_opt = 2n(n-1) S / ((n^2+kn-2k) b); the
 *            communication of many small partitions is it, their messages' alpha
 *            and one partition's tail, of
 *            few large ones longer (the pipeline's fill and tail); the
 *            step falls with k; at k = 0 it is the ring's link time; a
 *            slow server (its summing rate) becomes the bottleneck
 *   project  --project's spare hosts: per world the ring's row and k = 0 ..
 *            n; the best k is the fewest within 1% of the shortest step,
 *            its speed-up the ring's step over its; the JSON says them */
#include <stdio.h>
#include <string.h>

#include "mt.h"

static gs_cm_job job(const gs_cm_plan *p, int world, int hosts, int k) {
  return (gs_cm_job){.mode = GS_CM_BYTEPS, .world = world, .hosts = hosts, .servers = k,
                     .plan = p, .batch = 1, .overlap = true, .partition_bytes = 1 << 20};
}

static void bytes(void) {
  gs_cm_mode m;
  REQUIRE(gs_cm_mode_parse("byteps", &m, NULL) == GS_OK && m == GS_CM_BYTEPS, "byteps' name");
  size_t b[] = {40 << 20, 24 << 20};
  gs_cm_plan p = mt_plan(b, 2);
  double S = p.total;
  for (int per = 1; per <= 2; per++)
    for (int n = 2; n <= 6; n++)
      for (int k = 0; k <= n; k++) {
        gs_cm_job j = job(&p, n * per, n, k);
        j.host_reduce = per > 1;
        double want = 2.0 * n * (n - 1) / (n * n + k * n - 2.0 * k) * S;
        REQUIRE(gs_cm_nhosts(&j) == n + k, "n %d k %d: %d hosts", n, k, gs_cm_nhosts(&j));
        for (int h = 0; h < n + k; h++) {
          double in, out;
          REQUIRE(gs_cm_link_bytes(&j, h, &in, &out, NULL) == GS_OK, "n %d k %d host %d", n, k,
                  h);
          REQUIRE(mt_near(in, want, 1e-12) && mt_near(out, want, 1e-12),
                  "n %d (x%d) k %d host %d: %g / %g bytes, BytePS' %g", n, per, k, h, in, out,
                  want);
        }
      }
  gs_cm_job j = job(&p, 4, 4, 2);
  j.spare_share = 0.4;
  double in, out;
  REQUIRE(gs_cm_link_bytes(&j, 4, &in, &out, NULL) == GS_OK && mt_near(in, 4 * 0.4 * S, 1e-12),
          "a share of 0.4: a spare host carries %g", in);
  REQUIRE(gs_cm_link_bytes(&j, 0, &in, &out, NULL) == GS_OK &&
              mt_near(in, (0.95 + 3 * 0.05) * S, 1e-12),
          "a share of 0.4: a workers' host carries %g", in);
  gs_err e = {0};
  gs_cm_job bad = job(&p, 4, 4, 5);
  REQUIRE(gs_cm_link_bytes(&bad, 0, &in, &out, &e) == GS_EINVAL && strstr(e.msg, "spare"),
          "5 spare hosts beside 4: %s", e.msg);
  bad = job(&p, 4, 4, 2);
  bad.spare_share = 0.6;
  REQUIRE(gs_cm_link_bytes(&bad, 0, &in, &out, NULL) == GS_EINVAL, "a share of 0.6 for k 2");
  printf("ok: bytes, BytePS' 2n(n-1)/(n^2+kn-2k) S on every link\n");
}

static void times(void) {
  size_t b[] = {40 << 20, 24 << 20};
  gs_cm_plan p = mt_plan(b, 2);
  gs_cm_machine m = mt_machine();
  double S = p.total, prev = INFINITY;
  gs_cm_job rj = {.mode = GS_CM_RING, .world = 4, .hosts = 4, .plan = &p, .batch = 1,
                  .overlap = true};
  gs_cm_result ring;
  REQUIRE(gs_cm_predict(&m, &rj, &ring, NULL) == GS_OK, "ring");
  for (int k = 0; k <= 4; k++) {
    gs_cm_job j = job(&p, 4, 4, k);
    gs_cm_result r;
    gs_err e = {0};
    REQUIRE(gs_cm_predict(&m, &j, &r, &e) == GS_OK, "k %d: %s", k, e.msg);
    double topt = 2.0 * 4 * 3 / (16 + 4 * k - 2.0 * k) * S / m.link_Bps;
    REQUIRE(mt_near(r.link_s, topt, 1e-9), "k %d: link_s %g, t_opt %g", k, r.link_s, topt);
    /* 64 partitions: the last one's tail (a partition's link time, its sum),
     * and at the busiest endpoint max(N, servers) messages of alpha each */
    int servers = k + (k < 4 ? 4 : 0);
    double most = topt + 64 * (servers > 4 ? servers : 4) * m.alpha_s + 3 * topt / 64;
    REQUIRE(r.comm_s >= topt && r.comm_s <= most, "k %d: communication %g, t_opt %g, at most "
            "%g (64 partitions of 1 MiB)", k, r.comm_s, topt, most);
    REQUIRE(r.step_s < prev, "k %d: step %g not below k - 1's %g", k, r.step_s, prev);
    prev = r.step_s;
    if (k == 0)
      REQUIRE(mt_near(r.link_s, ring.link_s, 1e-9) && mt_near(r.comm_s, ring.comm_s, 0.05),
              "k 0: %g / %g, the ring's %g / %g", r.link_s, r.comm_s, ring.link_s, ring.comm_s);
    /* few large partitions: the pipeline's tail shows */
    j.partition_bytes = (size_t)32 << 20;
    gs_cm_result big;
    REQUIRE(gs_cm_predict(&m, &j, &big, NULL) == GS_OK, "k %d, 32 MiB", k);
    REQUIRE(k == 0 || big.comm_s > r.comm_s * 1.1, "k %d: 32 MiB partitions %g, 1 MiB %g", k,
            big.comm_s, r.comm_s);
  }
  gs_cm_job j = job(&p, 4, 4, 4);
  m.server_reduce_Bps = 1e8; /* a server summing at 100 MB/s: 3 x 16 MB a partition */
  gs_cm_result slow;
  REQUIRE(gs_cm_predict(&m, &j, &slow, NULL) == GS_OK &&
              slow.bottleneck == GS_CM_B_SERVER_REDUCE && slow.comm_s > 2 * slow.link_s,
          "a slow server: bottleneck %s, comm %g, links %g",
          gs_cm_bottleneck_name(slow.bottleneck), slow.comm_s, slow.link_s);
  printf("ok: time, t_opt and the pipeline\n");
}

static void project(void) {
  size_t b[] = {40 << 20, 24 << 20};
  gs_cm_plan p = mt_plan(b, 2);
  gs_cm_machine m = mt_machine();
  int worlds[] = {1, 4, 8};
  gs_cm_proj_in in = {.model = "t", .plan = &p, .worlds = worlds, .nworlds = 3,
                      .ranks_per_host = 1, .batch = 1, .fwd_s = 1e-3, .bwd_s = 2e-3,
                      .overlap = -1, .spare_max = 8, .partition_bytes = 1 << 20};
  gs_cm_projection pr;
  gs_err e = {0};
  REQUIRE(gs_cm_project(&m, &in, &pr, &e) == GS_OK, "%s", e.msg);
  REQUIRE(pr.nspare_worlds == 2 && pr.spare_worlds[0] == 4 && pr.spare_worlds[1] == 8 &&
              pr.nspare_rows == (1 + 5) + (1 + 9),
          "%d worlds, %d rows", pr.nspare_worlds, pr.nspare_rows);
  /* world 4: k = 4 is best, about 1.5x the ring (its step holds a little compute) */
  REQUIRE(pr.spare_best[0] == 4 && pr.spare_speedup[0] > 1.4 && pr.spare_speedup[0] < 1.5,
          "world 4: best k %d, %.3fx", pr.spare_best[0], pr.spare_speedup[0]);
  const gs_cm_result *ring = &pr.spare_rows[0];
  REQUIRE(ring->mode == GS_CM_RING && pr.spare_rows[5].mode == GS_CM_BYTEPS &&
              mt_near(ring->step_s / pr.spare_rows[5].step_s, pr.spare_speedup[0], 1e-12),
          "world 4's rows");
  json_t *j = gs_cm_projection_json(&pr);
  json_t *sp = json_object_get(j, "spare_hosts");
  REQUIRE(json_array_size(sp) == 2 &&
              json_integer_value(json_object_get(json_array_get(sp, 0), "best_spare_hosts")) ==
                  4 &&
              json_array_size(json_object_get(json_array_get(sp, 1), "byteps")) == 9,
          "projection.json's spare_hosts");
  json_decref(j);
  gs_cm_projection_free(&pr);
  printf("ok: --project over k, the best k and its speed-up\n");
}

int main(void) {
  bytes();
  times();
  project();
  return 0;
}
