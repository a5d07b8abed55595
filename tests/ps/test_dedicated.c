/* test_dedicated.c: the server as a separate process (--ps-dedicated).
 *
 * Same bits as the reference (and so as the in-process server), with the
 * ranks as threads and as processes; rank 0 is then a plain worker over
 * TCP (it moves S each way, not (N-1)*S) and reports the server's share of
 * each step (has_server: N*S in and out, its reduction and update time).
 * Also: open() fails on every rank, naming both sizes, when one rank runs a
 * different model. */
#include <string.h>

#include "ps_harness.h"

static void compare(const job_opts *o, job_result *r, const char *what) {
  free(check_reference(o, r, what, NULL, NULL));
}

int main(void) {
  job_opts o;
  for (int world = 1; world <= 3; world++) {
    job_defaults(&o);
    o.world = world;
    o.dedicated = true;
    o.n = 100000;
    o.bucket_elems = 30000;
    o.steps = 3;
    o.overlap = world == 2;
    job_result *r = result_new(&o);
    REQUIRE(run_threads(&o, r) == 0, "world %d: %s | %s", world, r->err[0], r->err[world - 1]);
    compare(&o, r, "dedicated, threads");
    double S = (double)o.n * sizeof(float);
    for (int s = 0; s < o.steps; s++) {
      gs_sync_stats *st = &r->stats[(size_t)s * o.world];
      REQUIRE(st->has_server, "rank 0 has no server stats");
      REQUIRE(st->bytes_sent >= S && st->bytes_sent < 1.05 * S, "rank 0 sent %llu, S = %.0f",
            (unsigned long long)st->bytes_sent, S);
      REQUIRE(st->reduce_s == 0 && st->update_s == 0, "rank 0 reduced itself");
      REQUIRE(st->server_bytes_recv >= world * S && st->server_bytes_recv < 1.05 * world * S,
            "server received %llu, want %d x %.0f", (unsigned long long)st->server_bytes_recv,
            world, S);
      REQUIRE(st->server_bytes_sent >= world * S && st->server_bytes_sent < 1.05 * world * S,
            "server sent %llu, want %d x %.0f", (unsigned long long)st->server_bytes_sent,
            world, S);
      REQUIRE(st->server_reduce_s > 0 && st->server_update_s > 0, "server times %g %g",
            st->server_reduce_s, st->server_update_s);
      if (world > 1) REQUIRE(!r->stats[(size_t)s * o.world + 1].has_server, "rank 1 has_server");
    }
    REQUIRE(r->mem_dev[0] == 0, "rank 0 holds no server memory with a dedicated server");
    printf("ok: dedicated server, world %d (threads): server moved %llu in / %llu out\n", world,
           (unsigned long long)r->stats[0].server_bytes_recv,
           (unsigned long long)r->stats[0].server_bytes_sent);
    result_free(r);
  }

  /* sum_only through a dedicated server: rank 0's large pushes are summed
   * in place (adopted), the 40 KB tail bucket through the accumulator. */
  job_defaults(&o);
  o.world = 3;
  o.dedicated = true;
  o.sum_only = true;
  o.n = 100000;
  o.bucket_elems = 30000;
  o.steps = 3;
  o.jitter_us = 2000;
  job_result *rs = result_new(&o);
  REQUIRE(run_threads(&o, rs) == 0, "sum_only: %s | %s", rs->err[0], rs->err[1]);
  compare(&o, rs, "dedicated sum_only");
  result_free(rs);
  printf("ok: dedicated server, sum_only, in-place sums\n");

  job_defaults(&o);
  o.world = 3;
  o.dedicated = true;
  o.overlap = true;
  o.jitter_us = 500;
  job_result *r = result_new(&o);
  REQUIRE(run_procs(&o, r) == 0, "processes: %s | %s | %s", r->err[0], r->err[1], r->err[2]);
  compare(&o, r, "dedicated, processes");
  result_free(r);
  printf("ok: dedicated server, world 3 (processes)\n");

  /* The in-process server, ranks as processes. */
  o.dedicated = false;
  r = result_new(&o);
  REQUIRE(run_procs(&o, r) == 0, "processes: %s | %s | %s", r->err[0], r->err[1], r->err[2]);
  compare(&o, r, "in-process server, processes");
  result_free(r);
  printf("ok: in-process server, world 3 (processes)\n");

  /* A rank with another bucket plan: every rank's open() fails, and the
   * message names the odd rank and both sizes. */
  for (int ded = 0; ded <= 1; ded++) {
    job_defaults(&o);
    o.world = 3;
    o.dedicated = ded;
    o.timeout_ms = 3000;
    o.odd_rank = 2;
    o.odd_bucket_elems = 1000;  /* 1 bucket where the others have 4 */
    r = result_new(&o);
    REQUIRE(run_threads(&o, r) != 0, "a mismatch went unnoticed");
    for (int i = 0; i < o.world; i++) {
      REQUIRE(r->rc[i] != 0, "rank %d opened", i);
      REQUIRE(strstr(r->err[i], "rank 2 holds 1000 parameters in 1 buckets") &&
                strstr(r->err[i], "rank 0 holds 1000 in 4"),
            "rank %d: %s", i, r->err[i]);
    }
    printf("ok: size mismatch (%s server) -> every rank: %s\n", ded ? "dedicated" : "in-process",
           r->err[1]);
    result_free(r);
  }
  return 0;
}
