/* test_spare.c: BytePS' summation servers (ps.h opts.summation: ps/split.c,
 * ps/sched.c over ps/flat.c).
 *
 *   shares   gs_ps_spare_shares is BytePS' formula: at n = 4 every link
 *            carries 2n(n-1)/(n^2+kn-2k) of the parameters each way (the
 *            ring's 1.5 at k = 0, 1.25 at k = 2, 1 at k = 4); a share of
 *            one's own splits the rest evenly; more spare hosts than the
 *            formula takes, or a share above 1/k, is refused
 *   plan     the partitions cover every parameter once, in priority order
 *            (the lowest offset first), none above its size nor across a
 *            bucket; every server's share is its formula's to 1e-3
 *   bits     world 4 on 4 workers' hosts with 0, 1, 2 and 4 spare servers
 *            (threads of the test), with and without overlap, with and
 *            without a credit, with arrival jitter: every rank holds the
 *            flat ps' reference bits after every step (the servers sum in
 *            rank order, every rank averages and steps alike); run after
 *            run the same bits; each rank's bytes are its link's share of
 *            the split within 5%
 *   refused  a stale consistency model or loss scaling, with the flags
 *            named (the capabilities' words) */
#include <math.h>
#include <string.h>

#include "ps_harness.h"
#include "ps/ps.h"
#include "ps/ps_internal.h"

static void shares(void) {
  int n = 4;
  for (int k = 0; k <= n; k++) {
    double y, x;
    REQUIRE(gs_ps_spare_shares(n, k, 0, &y, &x) == 0, "n %d k %d refused", n, k);
    double d = n * n + k * n - 2.0 * k;
    REQUIRE(fabs(k * y + n * x - 1) < 1e-12, "n %d k %d: shares sum to %g", n, k, k * y + n * x);
    /* a workers' host: its pushes to every other server and its server's
     * answers; a spare host: n shares each way */
    double worker = (1 - x) + (n - 1) * x, spare = n * y, want = 2.0 * n * (n - 1) / d;
    REQUIRE(fabs(worker - want) < 1e-12 && (k == 0 || fabs(spare - want) < 1e-12),
            "n %d k %d: a workers' host carries %g, a spare host %g; BytePS' formula %g", n, k,
            worker, spare, want);
  }
  double y, x;
  REQUIRE(gs_ps_spare_shares(4, 2, 0, &y, &x) == 0 && fabs(y - 0.3) < 1e-12 &&
              fabs(x - 0.1) < 1e-12, "n 4, k 2: spare %g, colo %g (0.3, 0.1)", y, x);
  REQUIRE(gs_ps_spare_shares(4, 2, 0.4, &y, &x) == 0 && y == 0.4 && fabs(x - 0.05) < 1e-12,
          "a share of 0.4: spare %g, colo %g", y, x);
  REQUIRE(gs_ps_spare_shares(4, 5, 0, &y, &x) < 0, "5 spare hosts for 4 workers' hosts");
  REQUIRE(gs_ps_spare_shares(4, 2, 0.6, &y, &x) < 0, "a share of 0.6 for 2 spare hosts");
  printf("ok: BytePS' shares, every link 2n(n-1)/(n^2+kn-2k)\n");
}

static void plan(int k, size_t part_bytes) {
  gs_err e = {0};
  gs_kernels *kk = gs_kernels_cpu(1, &e);
  REQUIRE(kk, "%s", e.msg);
  int nb = 0;
  size_t n = 100003;
  gs_bucket *b = plan_buckets(n, 30000, &nb);
  gs_ps_opts o = {.summation = true, .spare = k, .hosts = 4, .partition_bytes = part_bytes};
  gs_sync_config c = {.rank = 0, .world = 4, .k = kk, .n = n, .buckets = b, .nbuckets = nb,
                      .opts = &o};
  ps_keys ks;
  ps_split sp;
  REQUIRE(gs_ps_split_plan(&ks, &sp, &c, &e) == 0, "k %d: %s", k, e.msg);
  uint8_t *seen = calloc(n, 1);
  size_t last = 0;
  for (int p = 0; p < sp.nparts; p++) {
    const ps_part *x = &sp.part[p];
    const gs_bucket *bk = &b[x->bucket];
    REQUIRE(x->count * sizeof(float) <= part_bytes && x->offset >= bk->offset &&
                x->offset + x->count <= bk->offset + bk->count && (p == 0 || x->offset > last),
            "k %d: partition %d [%zu, +%zu) of bucket %d", k, p, x->offset, x->count, x->bucket);
    last = x->offset;
    size_t at = x->offset;
    for (int i = x->first; i < x->first + x->npieces; i++) {
      const ps_piece *q = &sp.piece[i];
      REQUIRE(q->offset == at && q->count > 0, "k %d: piece %d of partition %d", k, i, p);
      for (size_t j = 0; j < q->count; j++) seen[q->offset + j]++;
      at += q->count;
    }
    REQUIRE(at == x->offset + x->count, "k %d: partition %d's pieces end at %zu", k, p, at);
  }
  for (size_t i = 0; i < n; i++) REQUIRE(seen[i] == 1, "k %d: element %zu in %d pieces", k, i, seen[i]);
  double y, x;
  gs_ps_spare_shares(4, k, 0, &y, &x);
  for (int s = 0; s < ks.K; s++) {
    double want = s < k ? y : x, got = (double)ks.vn[s] / (double)n;
    REQUIRE(fabs(got - want) < 1e-3, "k %d: server %d sums %.5f of the parameters, its share %.5f",
            k, s, got, want);
    REQUIRE(ks.rank_of[s] == (s < k ? -1 : s - k), "k %d: server %d in rank %d", k, s,
            ks.rank_of[s]);
  }
  REQUIRE(ks.K == k + (k < 4 ? 4 : 0), "k %d: %d servers", k, ks.K);
  printf("ok: k %d, %d partitions of at most %zu bytes, every share to 1e-3\n", k, sp.nparts,
         part_bytes);
  gs_ps_keys_free(&ks);
  gs_ps_split_free(&sp);
  free(seen);
  free(b);
  kk->destroy(kk);
}

static job_opts byteps(int k, bool overlap, size_t credit, uint64_t jitter) {
  job_opts o;
  job_defaults(&o);
  o.world = 4;
  o.summation = true;
  o.spare = k;
  o.n = 100003;
  o.bucket_elems = 30000;
  o.partition_bytes = 40000;
  o.credit_bytes = credit;
  o.steps = 3;
  o.overlap = overlap;
  o.jitter_seed = jitter;
  o.jitter_us = 300;
  return o;
}

static void bits(int k, bool overlap, size_t credit) {
  job_opts o = byteps(k, overlap, credit, (uint64_t)(k * 10 + overlap));
  char what[96];
  snprintf(what, sizeof what, "summation, %d spare, %s, credit %zu (0: two partitions)", k,
           overlap ? "overlap" : "no overlap", credit);
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) == 0, "%s: %s | %s", what, r->err[0], r->err[3]);
  free(check_reference(&o, r, what, NULL, NULL));
  /* again, another arrival order: the same bits */
  job_opts o2 = byteps(k, overlap, credit, 12345);
  job_result *r2 = result_new(&o2);
  REQUIRE(run_threads(&o2, r2) == 0, "%s again: %s", what, r2->err[0]);
  REQUIRE(same_bits(result_params(r, o.steps, 0), result_params(r2, o.steps, 0), o.n, what),
          "%s: two runs differ", what);
  double y, x;
  gs_ps_spare_shares(4, k, 0, &y, &x);
  double S = (double)o.n * sizeof(float), want = ((1 - x) + 3 * x) * S;
  for (int s = 0; s < o.steps; s++)
    for (int q = 0; q < o.world; q++) {
      const gs_sync_stats *st = &r->stats[(size_t)s * o.world + q];
      REQUIRE(fabs(st->bytes_sent / want - 1) < 0.05 && fabs(st->bytes_recv / want - 1) < 0.05,
              "%s, step %d, rank %d: sent %llu, received %llu; its link's share %.0f", what, s,
              q, (unsigned long long)st->bytes_sent, (unsigned long long)st->bytes_recv, want);
      REQUIRE(st->update_s > 0, "%s, rank %d: no optimizer of its own", what, q);
    }
  printf("ok: %s: the flat ps' bits on every rank, twice; bytes as split\n", what);
  result_free(r);
  result_free(r2);
}

static void refused(void) {
  job_opts o = byteps(2, true, 0, 1);
  o.ps_sync = (gs_ps_sync){.model = GS_PS_SSP, .staleness = 1};
  gs_caps c;
  gs_ps_opts po = {.summation = true, .spare = 2, .sync = o.ps_sync};
  gs_ps_backend.caps(&po, &c);
  gs_want w = {0};
  gs_want_set(&w, GS_AXIS_SYNC, GS_SYNC_SSP, "--ps-sync ssp:1");
  gs_err e = {0};
  REQUIRE(gs_caps_check(&c, &w, NULL, &e) < 0 && strstr(e.msg, "--ps-sync ssp:1") &&
              strstr(e.msg, "--ps-spare-hosts 2"),
          "ssp with summation servers: %s", e.msg);
  gs_want v = {0};
  gs_want_set(&v, GS_AXIS_SCALING, 1, "--loss-scale 8");
  e = (gs_err){0};
  REQUIRE(gs_caps_check(&c, &v, NULL, &e) < 0 && strstr(e.msg, "--loss-scale 8"),
          "loss scaling with summation servers: %s", e.msg);
  printf("ok: refused with the flags named\n");
}

int main(void) {
  shares();
  for (int k = 0; k <= 4; k++) plan(k, k == 3 ? 4096 : 40000);
  refused();
  bits(0, true, 0);
  bits(1, true, 0);
  bits(2, true, 80000);
  bits(2, false, 0);
  bits(4, true, 0);
  return 0;
}
