/* test_equiv.c: the ps backend computes exactly the reference update.
 *
 * For world 1..4 (threads, the server inside rank 0) and several bucket
 * plans, every rank's parameters after every step must equal, bit for
 * bit, the reference of ps_harness.c (sum in rank order, / world, SGD with
 * momentum, the same kernel calls); so all ranks are identical, overlap on
 * and off agree, and runs with different arrival orders (jitter) agree.
 * Also: open() hands every rank rank 0's parameters, the traffic per step
 * matches the cost model (rank 0 moves (N-1)*S each way, a worker S), and
 * sum_only returns the exact sum. */
#include <pthread.h>
#include <string.h>

#include "ps_harness.h"

/* spans seen: [rank][track][name] */
static const char *const span_names[] = {"push", "pull", "wait", "reduce", "optimizer"};
static int spans[MAXW][2][5];
static int bad_spans;
static pthread_mutex_t span_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_span(void *ctx, const char *name, int bucket, double t0, double t1, int track) {
  int rank = *(int *)ctx;
  pthread_mutex_lock(&span_mu);
  int i = 0;
  while (i < 5 && strcmp(name, span_names[i])) i++;
  if (i == 5 || track < 0 || track > 1 || t1 < t0 || bucket < -1) bad_spans++;
  else spans[rank][track][i]++;
  pthread_mutex_unlock(&span_mu);
}

/* Run o and compare every rank after every step with the reference. */
static job_result *check_job(const job_opts *o, const char *what) {
  job_result *r = result_new(o);
  int rc = run_threads(o, r);
  for (int i = 0; i < o->world; i++)
    REQUIRE(r->rc[i] == 0, "%s: rank %d failed: %s", what, i, r->err[i]);
  REQUIRE(rc == 0, "%s", what);
  float *ref = check_reference(o, r, what, NULL, NULL);
  /* the update did something */
  REQUIRE(o->steps == 0 || memcmp(ref, ref + (size_t)o->steps * o->n, o->n * sizeof(float)) != 0,
        "%s: the parameters never changed", what);
  free(ref);
  return r;
}

int main(void) {
  job_opts o;
  for (int world = 1; world <= 4; world++) {
    for (int overlap = 0; overlap <= 1; overlap++) {
      job_defaults(&o);
      o.world = world;
      o.n = 1000;
      o.bucket_elems = 300;  /* 4 buckets: 300, 300, 300, 100 */
      o.overlap = overlap;
      o.jitter_us = 300;
      o.jitter_seed = (uint64_t)(world * 10 + overlap);
      char what[64];
      snprintf(what, sizeof what, "world %d overlap %d", world, overlap);
      job_result *r = check_job(&o, what);
      /* open() gave every rank rank 0's parameters */
      float *p0 = malloc(o.n * sizeof(float));
      make_params(&o, 0, p0);
      for (int i = 0; i < world; i++)
        REQUIRE(same_bits(result_params(r, 0, i), p0, o.n, "after open"), "rank %d", i);
      free(p0);
      result_free(r);
    }
  }
  printf("ok: world 1..4, overlap off/on, bitwise equal to the reference\n");

  /* Two runs with different arrival orders: same bits (both equal the
   * reference, and each other). */
  job_defaults(&o);
  o.world = 4;
  o.overlap = true;
  o.jitter_us = 2000;
  o.jitter_seed = 1;
  job_result *a = check_job(&o, "run A");
  o.jitter_seed = 2;
  job_result *b = check_job(&o, "run B");
  REQUIRE(same_bits(result_params(a, o.steps, 3), result_params(b, o.steps, 3), o.n, "A vs B"),
        "two runs differ");
  result_free(a);
  result_free(b);
  printf("ok: two runs with different arrival orders are identical\n");

  /* Bucket plans: one bucket larger than the whole buffer would be (all in
   * one), a prime-sized bucket, single-element buckets, no momentum. */
  job_defaults(&o);
  o.world = 3;
  o.bucket_elems = 5000;
  result_free(check_job(&o, "one bucket"));
  o.bucket_elems = 97;
  o.n = 1009;
  result_free(check_job(&o, "97-element buckets over 1009"));
  o.n = 7;
  o.bucket_elems = 1;
  o.sgd.momentum = 0.0f;
  result_free(check_job(&o, "single-element buckets, no momentum"));
  /* buckets given out of memory order and not covering a gap */
  gs_bucket odd[3] = {{600, 400}, {0, 250}, {250, 350}};
  job_defaults(&o);
  o.world = 2;
  o.buckets = odd;
  o.nbuckets = 3;
  result_free(check_job(&o, "buckets in a custom order"));
  printf("ok: bucket plans that do not divide the buffer, one bucket, tiny buckets\n");

  /* Traffic per step: the cost model, headers included (within 5%). */
  job_defaults(&o);
  o.world = 3;
  o.n = 200000;
  o.bucket_elems = 50000;
  o.steps = 2;
  job_result *r = check_job(&o, "traffic");
  double S = (double)o.n * sizeof(float);
  for (int s = 0; s < o.steps; s++)
    for (int i = 0; i < o.world; i++) {
      gs_sync_stats *st = &r->stats[(size_t)s * o.world + i];
      double want = i == 0 ? (o.world - 1) * S : S;
      REQUIRE(st->bytes_sent >= want && st->bytes_sent < want * 1.05,
            "rank %d step %d sent %llu bytes; the cost model says %.0f", i, s,
            (unsigned long long)st->bytes_sent, want);
      REQUIRE(st->bytes_recv >= want && st->bytes_recv < want * 1.05,
            "rank %d step %d received %llu bytes; the cost model says %.0f", i, s,
            (unsigned long long)st->bytes_recv, want);
      REQUIRE(!st->skipped && st->scale == 1.0f && !st->has_server, "rank %d flags", i);
      REQUIRE(st->wait_s >= 0 && st->reduce_s >= 0 && st->update_s >= 0, "times");
      if (i != 0) REQUIRE(st->reduce_s == 0 && st->update_s == 0, "a worker reduced");
    }
  REQUIRE(r->stats[0].reduce_s > 0 && r->stats[0].update_s > 0,
        "rank 0 reports no server work: reduce %g update %g", r->stats[0].reduce_s,
        r->stats[0].update_s);
  /* rank 0 holds the server's buffers: master, momentum, and the sums
     (adopted pushes, reduce.c) of the buckets in flight; the server
     updates each bucket as its sum completes, so how many sums it held at
     once depends on the order pushes arrived in: at least one */
  double bucket = (double)o.bucket_elems * sizeof(float);
  REQUIRE(r->mem_dev[0] >= 2 * S + bucket, "rank 0 reports %llu bytes of server memory",
        (unsigned long long)r->mem_dev[0]);
  REQUIRE(r->mem_dev[1] == 0, "a worker in fp32 on the CPU needs no staging");
  printf("ok: traffic per step: rank 0 %llu / %llu bytes, worker %llu / %llu (S = %.0f)\n",
         (unsigned long long)r->stats[0].bytes_sent, (unsigned long long)r->stats[0].bytes_recv,
         (unsigned long long)r->stats[1].bytes_sent, (unsigned long long)r->stats[1].bytes_recv,
         S);
  result_free(r);

  /* Timeline spans: every rank pushes, pulls and waits on its training
   * track; rank 0's server thread reduces and updates on track 1. */
  job_defaults(&o);
  o.world = 3;
  o.steps = 2;
  o.span = on_span;
  result_free(check_job(&o, "spans"));
  REQUIRE(bad_spans == 0, "%d malformed spans", bad_spans);
  int nb = 4;  /* 1000 elements in buckets of 300 */
  for (int i = 0; i < o.world; i++) {
    REQUIRE(spans[i][0][0] == nb * o.steps && spans[i][0][1] == nb * o.steps &&
              spans[i][0][2] == o.steps, "rank %d: push %d pull %d wait %d", i, spans[i][0][0],
          spans[i][0][1], spans[i][0][2]);
    REQUIRE(spans[i][0][3] == 0 && spans[i][0][4] == 0, "rank %d reduced on its training track", i);
    if (i > 0) REQUIRE(spans[i][1][3] == 0 && spans[i][1][4] == 0, "rank %d has server spans", i);
  }
  REQUIRE(spans[0][1][3] >= nb * o.steps && spans[0][1][4] == nb * o.steps,
        "server spans: reduce %d optimizer %d", spans[0][1][3], spans[0][1][4]);
  printf("ok: spans: push / pull / wait per rank, reduce / optimizer on rank 0's server track\n");

  /* sum_only: the exact rank-order sum comes back, no averaging. */
  job_defaults(&o);
  o.world = 4;
  o.sum_only = true;
  o.steps = 3;
  result_free(check_job(&o, "sum_only"));
  printf("ok: sum_only returns the rank-order sum\n");
  return 0;
}
