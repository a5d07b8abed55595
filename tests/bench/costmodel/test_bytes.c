/* test_bytes.c: bytes per host link and direction (gs_cm_link_bytes) for
 * ps, ring, recursive doubling, both sharded-ps placements and BytePS'
 * summation servers at every k from 0 to the hosts, flat and
 * with hosts that reduce first (host_reduce: one push per host from its
 * first rank, the hierarchical ring's one ring per local rank), against
 *  - an independent count: every message each mode sends, rank by rank,
 *    placed host-major, summed on the links it crosses;
 *  - a few values worked out by hand (world 6 on 3 hosts, 2 ranks each);
 * and the rejection of hosts outside the job and uneven placements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"

enum { MAXH = 64 };

typedef struct tally {
  double in[MAXH], out[MAXH];
} tally;

static void flow(tally *t, int from, int to, double bytes) {
  if (from == to) return;  /* same host: loopback, no link */
  t->out[from] += bytes;
  t->in[to] += bytes;
}

/* byteps: one rank on host h pushes BytePS' share of its S bytes to each
 * spare host's server (hosts K..) and to the server of each workers' host,
 * and takes the sums back, worked out here from the paper's fractions. */
static void byteps_flows(const gs_cm_job *j, tally *t, int h, double S) {
  double n = j->hosts, k = j->servers, d = n * n + k * n - 2 * k;
  double y = k > 0 ? 2 * (n - 1) / d : 0, x = (n - k) / d;
  for (int s = 0; s < j->servers; s++) {
    flow(t, h, j->hosts + s, y * S);
    flow(t, j->hosts + s, h, y * S);
  }
  for (int g = 0; g < j->hosts; g++) {
    flow(t, h, g, x * S);
    flow(t, g, h, x * S);
  }
}

/* Every message of one step, as the algorithms send them. */
static void count(const gs_cm_job *j, tally *t) {
  memset(t, 0, sizeof *t);
  int N = j->world, n = N / j->hosts, K = j->hosts;
  double S = j->plan->total;
#define HOST(r) ((r) / n)
  if (j->host_reduce && j->mode != GS_CM_RD && n > 1) {
    for (int h = 0; h < K; h++) {
      switch (j->mode) {
      case GS_CM_PS:  /* host h's first rank pushes the host's sum to rank 0 */
        flow(t, h, 0, S);
        flow(t, 0, h, S);
        break;
      case GS_CM_RING:  /* local rank l of every host: a ring of K on 1/n of each bucket */
        for (int l = 0; l < n; l++)
          for (int step = 0; step < 2 * (K - 1); step++)
            for (int b = 0; b < j->plan->nbuckets; b++)
              flow(t, h, (h + 1) % K, (double)j->plan->bytes[b] / n / K);
        break;
      case GS_CM_SPS_COLO:  /* servers on the hosts' first ranks */
        for (int g = 0; g < K; g++) {
          flow(t, h, g, S / K);
          flow(t, g, h, S / K);
        }
        break;
      case GS_CM_SPS_HOSTS:
        for (int s = 0; s < j->servers; s++) {
          flow(t, h, K + s, S / j->servers);
          flow(t, K + s, h, S / j->servers);
        }
        break;
      case GS_CM_BYTEPS:  /* the host's sum, as one rank of a host would */
        byteps_flows(j, t, h, S);
        break;
      default:
        break;
      }
    }
    return;
  }
  switch (j->mode) {
  case GS_CM_PS:
    for (int r = 1; r < N; r++) {
      flow(t, HOST(r), HOST(0), S);  /* push */
      flow(t, HOST(0), HOST(r), S);  /* parameters back */
    }
    break;
  case GS_CM_RING:
    for (int step = 0; step < 2 * (N - 1); step++)
      for (int r = 0; r < N; r++)
        for (int b = 0; b < j->plan->nbuckets; b++)
          flow(t, HOST(r), HOST((r + 1) % N), (double)j->plan->bytes[b] / N);
    break;
  case GS_CM_RD:
    for (int d = 1; d < N; d *= 2)
      for (int r = 0; r < N; r++) flow(t, HOST(r), HOST(r ^ d), S);
    break;
  case GS_CM_SPS_COLO:
    for (int r = 0; r < N; r++)
      for (int h = 0; h < K; h++) {
        flow(t, HOST(r), h, S / K);
        flow(t, h, HOST(r), S / K);
      }
    break;
  case GS_CM_SPS_HOSTS:
    for (int r = 0; r < N; r++)
      for (int s = 0; s < j->servers; s++) {
        flow(t, HOST(r), K + s, S / j->servers);
        flow(t, K + s, HOST(r), S / j->servers);
      }
    break;
  case GS_CM_BYTEPS:
    for (int r = 0; r < N; r++) byteps_flows(j, t, HOST(r), S);
    break;
  default:
    break;
  }
#undef HOST
}

static void against_count(void) {
  static const int cases[][2] = {{2, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}, {6, 3}, {8, 2},
                                 {8, 4}, {8, 8}, {12, 3}, {12, 4}, {16, 4}, {16, 16}, {32, 8}};
  size_t buckets[3] = {1 << 20, 25 << 20, 3000};
  gs_cm_plan p = mt_plan(buckets, 3);
  int checked = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int mode = 0; mode < 2 * GS_CM_NMODES; mode++) {
      /* byteps: 0 to as many spare hosts as hosts (at one host, none: the
       * split's n^2 + kn - 2k is 0 at n = k = 1) */
      int m = mode % GS_CM_NMODES, K = cases[c][1];
      int most = m == GS_CM_SPS_HOSTS ? 3 : m == GS_CM_BYTEPS ? (K > 1 ? K : 0) : 1;
      for (int servers = m == GS_CM_BYTEPS ? 0 : 1; servers <= most; servers++) {
        gs_cm_job j = {.mode = (gs_cm_mode)(mode % GS_CM_NMODES), .world = cases[c][0],
                       .hosts = cases[c][1], .servers = servers, .plan = &p, .batch = 1,
                       .host_reduce = mode >= GS_CM_NMODES};
        int n = j.world / j.hosts;
        if (j.mode == GS_CM_RD && ((j.world & (j.world - 1)) || (n & (n - 1)))) continue;
        tally t;
        count(&j, &t);
        for (int h = 0; h < gs_cm_nhosts(&j); h++) {
          double in = -1, out = -1;
          gs_err e = {0};
          CHECK_OK(gs_cm_link_bytes(&j, h, &in, &out, &e), &e);
          CHECK(mt_near(in, t.in[h], 1e-12) && mt_near(out, t.out[h], 1e-12),
                 "%s%s world %d hosts %d servers %d, host %d: model in %.0f out %.0f, "
                 "messages in %.0f out %.0f", gs_cm_mode_name(j.mode),
                 j.host_reduce ? " (hosts reduce first)" : "", j.world, j.hosts, servers, h, in,
                 out, t.in[h], t.out[h]);
          checked++;
        }
      }
    }
  }
  CHECK(checked > 600, "only %d host links checked", checked);
}

static double in_of(gs_cm_mode mode, int N, int K, int servers, int host, gs_cm_plan *p) {
  gs_cm_job j = {.mode = mode, .world = N, .hosts = K, .servers = servers, .plan = p, .batch = 1};
  double in = -1, out = -2;
  gs_err e = {0};
  CHECK_OK(gs_cm_link_bytes(&j, host, &in, &out, &e), &e);
  CHECK(in == out);  /* every mode here is symmetric per step */
  return in;
}

/* World 6 on 3 hosts (n = 2), S = 1000 bytes. */
static void by_hand(void) {
  size_t b[1] = {1000};
  gs_cm_plan p = mt_plan(b, 1);
  /* ps: host 0 takes the 4 pushes of hosts 1 and 2, and sends 4 S back */
  CHECK(mt_near(in_of(GS_CM_PS, 6, 3, 0, 0, &p), 4000, 1e-12));
  CHECK(mt_near(in_of(GS_CM_PS, 6, 3, 0, 1, &p), 2000, 1e-12));
  CHECK(mt_near(in_of(GS_CM_PS, 6, 3, 0, 2, &p), 2000, 1e-12));
  /* ring: one edge per host each way, 2(N-1)/N S = 10/6 S */
  CHECK(mt_near(in_of(GS_CM_RING, 6, 3, 0, 1, &p), 10000.0 / 6, 1e-12));
  /* sps-colo: 2 n (K-1)/K S = 2 * 2 * 2/3 S */
  CHECK(mt_near(in_of(GS_CM_SPS_COLO, 6, 3, 0, 2, &p), 8000.0 / 3, 1e-12));
  /* sps-hosts, 2 server hosts: a worker host n S each way, a server host N S / 2 */
  CHECK(mt_near(in_of(GS_CM_SPS_HOSTS, 6, 3, 2, 0, &p), 2000, 1e-12));
  CHECK(mt_near(in_of(GS_CM_SPS_HOSTS, 6, 3, 2, 3, &p), 3000, 1e-12));
  CHECK(mt_near(in_of(GS_CM_SPS_HOSTS, 6, 3, 2, 4, &p), 3000, 1e-12));
  /* recursive doubling, 8 on 4 hosts (n = 2): log2 K = 2 exchanges cross
   * the links, each carrying n S */
  CHECK(mt_near(in_of(GS_CM_RD, 8, 4, 0, 3, &p), 4000, 1e-12));
  /* one host: nothing on any link (except to server hosts) */
  CHECK(in_of(GS_CM_PS, 4, 1, 0, 0, &p) == 0);
  CHECK(in_of(GS_CM_RING, 4, 1, 0, 0, &p) == 0);
  CHECK(mt_near(in_of(GS_CM_SPS_HOSTS, 4, 1, 1, 1, &p), 4000, 1e-12));
  /* hosts that reduce first: (K-1) S at the master, S elsewhere; the
   * hierarchical ring 2(K-1)/K S on every link */
  gs_cm_job hr = {.mode = GS_CM_PS, .world = 6, .hosts = 3, .plan = &p, .batch = 1,
                  .host_reduce = true};
  double in = -1, out = -1;
  gs_err e = {0};
  CHECK_OK(gs_cm_link_bytes(&hr, 0, &in, &out, &e), &e);
  CHECK(mt_near(in, 2000, 1e-12) && mt_near(out, 2000, 1e-12), "ps, hosts reduce: %g %g", in, out);
  CHECK_OK(gs_cm_link_bytes(&hr, 2, &in, &out, &e), &e);
  CHECK(mt_near(in, 1000, 1e-12) && mt_near(out, 1000, 1e-12), "ps, hosts reduce: %g %g", in, out);
  hr.mode = GS_CM_RING;
  CHECK_OK(gs_cm_link_bytes(&hr, 1, &in, &out, &e), &e);
  CHECK(mt_near(in, 4000.0 / 3, 1e-12), "hierarchical ring: %g", in);
  /* n = 1: sps-colo moves exactly what the ring moves; with n > 1 it moves
   * n times the ring's 2(K-1)/K S (no aggregation inside a host) */
  CHECK(mt_near(in_of(GS_CM_SPS_COLO, 4, 4, 0, 0, &p), in_of(GS_CM_RING, 4, 4, 0, 0, &p), 1e-12));
}

/* The result's link fields are the link bytes of the right hosts. */
static void result_fields(void) {
  size_t b[2] = {1 << 20, 4 << 20};
  gs_cm_plan p = mt_plan(b, 2);
  gs_cm_machine m = mt_machine();
  gs_cm_job j = {.mode = GS_CM_PS, .world = 8, .hosts = 4, .plan = &p, .batch = 2,
                 .fwd_s = 1e-3, .bwd_s = 2e-3};
  gs_cm_result r;
  gs_err e = {0};
  CHECK_OK(gs_cm_predict(&m, &j, &r, &e), &e);
  CHECK(mt_near(r.hot_in, 6 * p.total, 1e-12) && mt_near(r.hot_out, 6 * p.total, 1e-12));
  CHECK(mt_near(r.worker_in, 2 * p.total, 1e-12));
  j.mode = GS_CM_SPS_HOSTS;
  j.servers = 2;
  CHECK_OK(gs_cm_predict(&m, &j, &r, &e), &e);
  CHECK(mt_near(r.hot_in, 4 * p.total, 1e-12));     /* N S / 2 */
  CHECK(mt_near(r.worker_out, 2 * p.total, 1e-12)); /* n S */
}

static void rejects(void) {
  size_t b[1] = {1000};
  gs_cm_plan p = mt_plan(b, 1);
  gs_cm_job j = {.mode = GS_CM_PS, .world = 6, .hosts = 3, .plan = &p, .batch = 1};
  double in, out;
  gs_err e = {0};
  CHECK(gs_cm_link_bytes(&j, 3, &in, &out, &e) == GS_EINVAL);
  CHECK(strstr(e.msg, "host 3"), "message: %s", e.msg);
  j.hosts = 4;
  gs_err_clear(&e);
  CHECK(gs_cm_link_bytes(&j, 0, &in, &out, &e) == GS_EINVAL);
  CHECK(strstr(e.msg, "does not split evenly"), "message: %s", e.msg);
  j.hosts = 2;
  j.mode = GS_CM_SPS_HOSTS;
  j.servers = 0;
  gs_err_clear(&e);
  CHECK(gs_cm_link_bytes(&j, 0, &in, &out, &e) == GS_EINVAL);
  CHECK(strstr(e.msg, "server hosts"), "message: %s", e.msg);
  j.mode = GS_CM_RD;
  gs_err_clear(&e);
  CHECK(gs_cm_link_bytes(&j, 0, &in, &out, &e) == GS_EINVAL);  /* 6 is no power of two */
  CHECK(strstr(e.msg, "powers of two"), "message: %s", e.msg);
}

int main(void) {
  against_count();
  by_hand();
  result_fields();
  rejects();
  return check_done("model_bytes");
}
