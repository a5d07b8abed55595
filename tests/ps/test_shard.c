/* test_shard.c: the sharded parameter server (opts.servers K: ps/flat.c over shard.c).
 *
 * For every world 2..4 and K 1..world, with a parameter count K does not
 * divide and buckets the range boundaries cut through, with and without
 * overlap and with arrival jitter: every rank holds the reference's bits
 * after every step (the same as one server's and one process'); a rank
 * that hosts a server moves its server's (N-1)S/K plus its worker's
 * (K-1)S/K each way, the others S. Refused: more servers than ranks, a
 * dedicated server, loss scaling. A rank that gives up mid-step makes
 * every other rank fail naming it. */
#include <string.h>

#include "ps_harness.h"
#include "ps/ps.h"

/* The placement, spelled out: rank k * world / K hosts server k. */
static bool hosts(int r, int world, int K) {
  bool any = false;
  for (int k = 0; k < K; k++) any |= (int)((int64_t)k * world / K) == r;
  REQUIRE(any == gs_ps_runs_server(r, world, K), "gs_ps_runs_server(%d, %d, %d) says %d", r,
          world, K, !any);
  return any;
}

static void bits_and_bytes(int world, int K, bool overlap) {
  job_opts o;
  job_defaults(&o);
  o.world = world;
  o.ps_servers = K;
  o.n = 100003;
  o.bucket_elems = 30000;
  o.steps = 3;
  o.overlap = overlap;
  o.jitter_seed = (uint64_t)(world * 10 + K);
  o.jitter_us = 300;
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) == 0, "world %d, %d servers: %s | %s", world, K, r->err[0],
          r->err[world - 1]);
  char what[64];
  snprintf(what, sizeof what, "world %d, %d servers%s", world, K, overlap ? ", overlap" : "");
  free(check_reference(&o, r, what, NULL, NULL));
  double S = (double)o.n * sizeof(float);
  for (int s = 0; s < o.steps; s++)
    for (int q = 0; q < world; q++) {
      const gs_sync_stats *st = &r->stats[(size_t)s * world + q];
      double want = hosts(q, world, K) ? (world - 1 + K - 1) * S / K : S;
      REQUIRE(st->bytes_sent >= want && st->bytes_sent < 1.05 * want + 4096 &&
                  st->bytes_recv >= want && st->bytes_recv < 1.05 * want + 4096,
              "%s, step %d, rank %d: sent %llu, received %llu; want %.0f each way", what, s, q,
              (unsigned long long)st->bytes_sent, (unsigned long long)st->bytes_recv, want);
      REQUIRE(!hosts(q, world, K) || (st->reduce_s > 0 && st->update_s > 0),
              "%s, rank %d hosts a server but reports no reduction (%g) or update (%g)", what,
              q, st->reduce_s, st->update_s);
    }
  printf("ok: %s: reference bits on every rank, bytes as placed\n", what);
  result_free(r);
}

static void refused(const char *what, int world, int K, bool dedicated, gs_dtype wire,
                    const char *words) {
  job_opts o;
  job_defaults(&o);
  o.world = world;
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  float *p = k->alloc(k, 1000 * sizeof(float)), *g = k->alloc(k, 1000 * sizeof(float));
  int nb;
  gs_bucket *b = plan_buckets(1000, 300, &nb);
  gs_ps_opts po = {.dedicated = dedicated, .servers = K};
  gs_sync_config c = {.rank = 0, .world = world, .timeout_ms = 2000, .host = "127.0.0.1",
                      .k = k, .params = p, .grads = g, .n = 1000, .buckets = b, .nbuckets = nb,
                      .sgd = o.sgd, .wire = wire, .scaler = o.scaler, .opts = &po};
  if (wire != GS_F32) gs_scaler_init(&c.scaler, 65536.0f, true);
  void *state = NULL;
  char ep[GS_ENDPOINT_MAX];
  int rc = gs_ps_backend.prepare(&c, &state, ep, &e);
  REQUIRE(rc == GS_EINVAL && !state && strstr(e.msg, words),
          "%s: prepare gave %d (%s), expected GS_EINVAL naming '%s'", what, rc, e.msg, words);
  printf("ok: refused: %s: %s\n", what, e.msg);
  free(b);
  k->release(k, p);
  k->release(k, g);
  k->destroy(k);
}

static void give_up(void) {
  job_opts o;
  job_defaults(&o);
  o.world = 3;
  o.ps_servers = 3;
  o.n = 9000;
  o.bucket_elems = 4000;
  o.steps = 4;
  o.timeout_ms = 2000;
  o.abort_rank = 1;
  o.abort_step = 2;
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) != 0, "a rank gave up and the job succeeded");
  for (int q = 0; q < 3; q++) {
    if (q == 1) continue;
    REQUIRE(r->rc[q] != 0 && strstr(r->err[q], "rank 1") && strstr(r->err[q], "ps server"),
            "rank %d after rank 1 gave up: rc %d, '%s' names neither rank 1 nor a ps server", q,
            r->rc[q], r->err[q]);
    REQUIRE(r->fail_t[q] - r->kill_t < 2.0 * 1.25 + 1.0, "rank %d took %.1f s to fail", q,
            r->fail_t[q] - r->kill_t);
  }
  printf("ok: rank 1 gave up: %s\n", r->err[0]);
  result_free(r);
}

int main(void) {
  for (int world = 2; world <= 4; world++)
    for (int K = 1; K <= world; K++) bits_and_bytes(world, K, (world + K) % 2 == 0);
  bits_and_bytes(3, 2, false);
  bits_and_bytes(3, 2, true);
  refused("4 servers at world 3", 3, 4, false, GS_F32, "at most one per rank");
  refused("3 servers and a dedicated one", 3, 3, true, GS_F32, "dedicated");
  refused("2 servers with loss scaling", 2, 2, false, GS_F16, "runs fp32 gradients only");
  give_up();
  return 0;
}
