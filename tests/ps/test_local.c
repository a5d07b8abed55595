/* test_local.c: the host-aggregated ps (opts.host_ranks L: ps/hostagg.c).
 *
 * Ranks as threads of one process share memory as the ranks of one host
 * do, so hosts here are groups of L ranks (host-major) and the checks are:
 *  - bits: every rank holds, after every step, the reference's bits for
 *    the documented order (each host's sum in rank order, then the hosts'
 *    sums in host order, x 1/N), with and without overlap, with one server
 *    and with K sharded servers on the hosts' first ranks, with arrival
 *    jitter, and with a dedicated server process; the same bits run after
 *    run (twice);
 *  - one host (L = N): bitwise the flat ps' bits; several hosts: within
 *    1e-5 relative of the flat ps (another order; relative to each
 *    parameter, or to their mean magnitude where one is near zero);
 *  - bytes: with one server on rank 0, the master's link carries (H-1) x S
 *    each way, a leader elsewhere S, every other rank nothing on sockets;
 *  - fp16 and bf16 pushes of the hosts' sums with loss scaling, a step
 *    skipped on an overflow inside host 1: the reference's bits, verdicts
 *    and next scales on every rank, under bsp and under ssp:0 / backup 0;
 *  - ssp, async and backup workers count hosts: ssp:0 and backup 0 give
 *    the reference's (bsp's) bits on every rank after every step, so the
 *    server averages a host's push as its L ranks; under async and backup 1
 *    every rank of a host holds its leader's bits and reports its host's
 *    staleness (-1: dropped), and a dropped push drops the whole host's;
 *  - refusals: hosts of unequal size, shared memory turned off (GS_SHM=0);
 *  - meeting: a rank of a host on another machine (its published host key)
 *    makes every rank of that host fail saying so; a leader's segment a
 *    member cannot map makes it fail saying so, and its leader's first wait
 *    name it at the timeout; every rank of the job fails in time;
 *  - faults (processes): a rank killed inside a host, or a leader killed,
 *    makes every other rank fail naming it within the timeout, and nothing
 *    is left in /dev/shm. */
#include <dirent.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "ps_harness.h"
#include "ps/ps.h"

static job_opts base(int world, int L) {
  job_opts o;
  job_defaults(&o);
  o.world = world;
  o.host_ranks = L;
  o.n = 50003;
  o.bucket_elems = 12000;
  o.steps = 3;
  return o;
}

static char *what_of(const job_opts *o, char *buf, size_t cap) {
  snprintf(buf, cap, "world %d, hosts of %d, %d server(s)%s", o->world, o->host_ranks,
           o->ps_servers > 1 ? o->ps_servers : 1, o->overlap ? ", overlap" : "");
  return buf;
}

static void bits(int world, int L, int K, bool overlap, uint64_t jitter) {
  job_opts o = base(world, L);
  o.ps_servers = K;
  o.overlap = overlap;
  o.jitter_seed = jitter;
  o.jitter_us = 300;
  char what[96];
  what_of(&o, what, sizeof what);
  float *first = NULL;
  for (int run = 0; run < 2; run++) {
    job_result *r = result_new(&o);
    REQUIRE(run_threads(&o, r) == 0, "%s: %s | %s", what, r->err[0], r->err[world - 1]);
    float *ref = check_reference(&o, r, what, NULL, NULL);
    if (run == 0) {
      first = malloc(o.n * sizeof(float));
      memcpy(first, result_params(r, o.steps, world - 1), o.n * sizeof(float));
    } else {
      REQUIRE(same_bits(first, result_params(r, o.steps, world - 1), o.n, what),
              "%s: a second run gave other bits", what);
    }
    free(ref);
    if (run == 0 && K <= 1 && !overlap) {
      /* bytes on sockets: rank 0 hosts the server, its host's sum arrives
       * over inproc; every other host's first rank pushes S and pulls S */
      double S = (double)o.n * sizeof(float);
      int H = world / L;
      for (int s = 0; s < o.steps; s++)
        for (int q = 0; q < world; q++) {
          const gs_sync_stats *st = &r->stats[(size_t)s * world + q];
          double want = q == 0 ? (H - 1) * S : q % L == 0 ? S : 0;
          REQUIRE(st->bytes_sent >= want && st->bytes_sent <= 1.05 * want + 4096 &&
                      st->bytes_recv >= want && st->bytes_recv <= 1.05 * want + 4096,
                  "%s, step %d, rank %d: sent %llu, received %llu on sockets; want %.0f each "
                  "way", what, s, q, (unsigned long long)st->bytes_sent,
                  (unsigned long long)st->bytes_recv, want);
        }
    }
    result_free(r);
  }
  free(first);
  printf("ok: %s: the documented order's bits on every rank, twice\n", what);
}

/* The server in a process of its own (rank 0 forks it in prepare, before
 * the host's communicator makes a ZeroMQ context). */
static void dedicated(void) {
  job_opts o = base(4, 2);
  o.dedicated = true;
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) == 0, "dedicated server, hosts of 2: %s | %s", r->err[0],
          r->err[3]);
  free(check_reference(&o, r, "dedicated server, hosts of 2", NULL, NULL));
  printf("ok: world 4, hosts of 2, a dedicated server: the documented order's bits\n");
  result_free(r);
}

/* Against the flat ps (every rank pushes): one host is the same order,
 * several hosts another one. */
static void against_flat(int world, int L) {
  job_opts o = base(world, L), f = base(world, 0);
  job_result *r = result_new(&o), *fr = result_new(&f);
  REQUIRE(run_threads(&o, r) == 0 && run_threads(&f, fr) == 0, "world %d: %s | %s", world,
          r->err[0], fr->err[0]);
  const float *a = result_params(r, o.steps, 0), *b = result_params(fr, f.steps, 0);
  if (L == world) {
    REQUIRE(same_bits(a, b, o.n, "one host vs flat"), "one host of %d: not the flat ps' bits",
            world);
    printf("ok: one host of %d ranks: the flat ps' bits\n", world);
  } else {
    /* relative to the element, or to the mean magnitude where it is near
     * zero (as allclose's atol) */
    double worst = 0, mean = 0;
    size_t differ = 0;
    for (size_t i = 0; i < o.n; i++) mean += fabs((double)b[i]) / (double)o.n;
    for (size_t i = 0; i < o.n; i++) {
      double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), mean);
      if (d > worst) worst = d;
      differ += a[i] != b[i];
    }
    REQUIRE(worst <= 1e-5, "world %d, hosts of %d: %.3g relative from the flat ps", world, L,
            worst);
    printf("ok: world %d, hosts of %d: within %.2g relative of the flat ps (%zu of %zu elements "
           "differ in their bits)\n", world, L, worst, differ, o.n);
  }
  result_free(r);
  result_free(fr);
}

/* 16-bit pushes of the hosts' sums with loss scaling: the reference's
 * bits on every rank after every step, and every rank's own verdict and
 * next scale the server's (it reaches the first rank of a host only, and
 * goes round the host). An inf in rank 3's step 2 (not a host's first
 * rank) makes host 1's sum overflow: the server skips step 2. */
static void scaled(gs_dtype wire, gs_ps_sync y, const char *sync) {
  job_opts o = base(4, 2);
  o.wire = wire;
  o.ps_sync = y;
  o.steps = 5;
  o.grad_scale = 1e-3f;
  o.inf_rank = 3;
  o.inf_step = 2;
  if (wire == GS_F16) gs_scaler_init(&o.scaler, 65536.0f, true);
  else gs_scaler_init(&o.scaler, 128.0f, false);
  char what[96];
  snprintf(what, sizeof what, "world 4, hosts of 2, %s pushes, loss scale %g%s, %s",
           gs_dtype_name(wire), (double)o.scaler.scale, o.scaler.dynamic ? " dynamic" : "", sync);
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) == 0, "%s: %s | %s", what, r->err[0], r->err[3]);
  bool skipped[64];
  float scales[64];
  float *ref = check_reference(&o, r, what, skipped, scales);
  gs_scaler sc = o.scaler;
  int nskip = 0, agree = 0;
  for (int s = 0; s < o.steps; s++) {
    nskip += skipped[s];
    gs_scaler_update(&sc, skipped[s]);
    for (int i = 0; i < o.world; i++) {
      const gs_sync_stats *st = &r->stats[(size_t)s * o.world + i];
      agree += st->skipped == skipped[s] && st->scale == sc.scale;
    }
  }
  CHECK(skipped[2] && nskip == 1, "%s: the reference skipped %d steps (step 2: %d)", what, nskip,
        skipped[2]);
  CHECK(agree == o.steps * o.world, "%s: %d of %d (rank, step) verdicts and next scales are the "
        "server's", what, agree, o.steps * o.world);
  printf("ok: %s: every rank holds the reference's bits after every step, and the server's "
         "verdict (step 2 skipped, next scale %g)\n", what, (double)scales[3]);
  free(ref);
  result_free(r);
}

static void stale_bits(gs_ps_sync y, const char *what) {
  job_opts o = base(4, 2);
  o.ps_sync = y;
  o.jitter_seed = 7;
  o.jitter_us = 300;
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) == 0, "%s: %s | %s", what, r->err[0], r->err[3]);
  free(check_reference(&o, r, what, NULL, NULL));
  printf("ok: %s over hosts of 2: every rank holds bsp's bits after every step\n", what);
  result_free(r);
}

static void stale_hosts(gs_ps_sync y, const char *what) {
  job_opts o = base(6, 2);
  o.ps_sync = y;
  o.steps = 6;
  o.jitter_seed = 9;
  o.jitter_us = 2000;
  job_result *r = result_new(&o);
  REQUIRE(run_threads(&o, r) == 0, "%s: %s | %s", what, r->err[0], r->err[5]);
  int stale = 0, dropped = 0;
  for (int t = 0; t < o.steps; t++)
    for (int q = 0; q < o.world; q++) {
      const gs_sync_stats *a = &r->stats[t * o.world + q], *b = &r->stats[t * o.world + q / 2 * 2];
      CHECK(!memcmp(result_params(r, t + 1, q), result_params(r, t + 1, q / 2 * 2),
                    o.n * sizeof(float)), "%s: rank %d after step %d: not its leader's bits", what,
            q, t);
      CHECK(a->staleness == b->staleness, "%s: rank %d step %d: staleness %d, its leader's %d",
            what, q, t, a->staleness, b->staleness);
      CHECK(a->staleness >= -1 && a->staleness < 6, "%s: staleness %d", what, a->staleness);
      stale += a->staleness > 0;
      dropped += a->staleness < 0;
    }
  CHECK(dropped % 2 == 0, "%s: %d dropped gradients, not whole hosts' of 2", what, dropped);
  printf("ok: %s over 3 hosts of 2: a host's ranks hold its leader's bits and its staleness "
         "(%d stale, %d dropped rank-steps)\n", what, stale, dropped);
  result_free(r);
}

static void refused(const char *what, int world, int L, gs_dtype wire, const char *words) {
  job_opts o = base(world, L);
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  float *p = k->alloc(k, 1000 * sizeof(float)), *g = k->alloc(k, 1000 * sizeof(float));
  int nb;
  gs_bucket *b = plan_buckets(1000, 300, &nb);
  gs_ps_opts po = {.host_ranks = L};
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

/* What a host's ranks published, changed before they open: rank 1 on
 * another machine (its host key's hash), or a leader's segment that cannot
 * be mapped (a descriptor it does not hold). */
static void other_machine(char (*ep)[GS_ENDPOINT_MAX], int world) {
  char *hash = strchr(ep[1], ',');
  REQUIRE(world > 1 && hash && hash[1], "rank 1 published '%s'", ep[1]);
  hash[1] = hash[1] == '0' ? '1' : '0';
}

static void unmappable(char (*ep)[GS_ENDPOINT_MAX], int world) {
  char *fd = strstr(ep[0], "/fd/"), *colon = fd ? strchr(fd, ':') : NULL;
  REQUIRE(fd && colon, "rank 0 published '%s'", ep[0]);
  char rest[GS_ENDPOINT_MAX];
  snprintf(rest, sizeof rest, "%s", colon);
  snprintf(fd, GS_ENDPOINT_MAX - (size_t)(fd - ep[0]), "/fd/999999%s", rest);
}

/* A host that cannot meet: every rank fails in time, nobody hangs; the
 * ranks that know why say it (who: the ranks that must say words). */
static void met_badly(const char *what, void (*change)(char (*)[GS_ENDPOINT_MAX], int),
                      const int *who, int nwho, const char *words) {
  job_opts o = base(4, 2);
  o.steps = 2;
  o.timeout_ms = 2000;
  o.on_endpoints = change;
  job_result *r = result_new(&o);
  double t0 = gs_now();
  REQUIRE(run_threads(&o, r) != 0, "%s: the job succeeded", what);
  for (int q = 0; q < o.world; q++) {
    REQUIRE(r->rc[q] != 0 && r->fail_t[q] - t0 < 15.0, "%s: rank %d: rc %d after %.1f s (%s)",
            what, q, r->rc[q], r->fail_t[q] - t0, r->err[q]);
  }
  for (int i = 0; i < nwho; i++)
    REQUIRE(strstr(r->err[who[i]], words), "%s: rank %d does not say '%s': %s", what, who[i],
            words, r->err[who[i]]);
  printf("ok: %s: every rank failed within %.1f s; rank %d said '%s'\n", what,
         gs_now() - t0, who[0], r->err[who[0]]);
  result_free(r);
}

static int shm_entries(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    n += de->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Processes: kill one, and every other rank names it within the timeout. */
static void killed(int world, int L, int victim, int step) {
  job_opts o = base(world, L);
  o.steps = 4;
  o.timeout_ms = 3000;
  o.kill_rank = victim;
  o.kill_step = step;
  o.kill_bucket = 1;
  int before = shm_entries();
  job_result *r = result_new(&o);
  REQUIRE(run_procs(&o, r) != 0, "rank %d was killed and the job succeeded", victim);
  char name[32], pid_words[32];
  snprintf(name, sizeof name, "rank %d", victim);
  snprintf(pid_words, sizeof pid_words, "rank %d (pid", victim);
  for (int q = 0; q < world; q++) {
    if (q == victim) continue;
    double dt = r->fail_t[q] - r->kill_t;
    REQUIRE(r->rc[q] != 0 && r->rc[q] > -1000, "rank %d: rc %d after rank %d was killed", q,
            r->rc[q], victim);
    /* the victim's host names it by its process; the other hosts hear it
     * through the server, or, the victim a host's first rank, the server
     * names its host as the ps' rank that sent nothing */
    bool same_host = q / L == victim / L;
    char host_words[64];
    snprintf(host_words, sizeof host_words, "rank %d sent no gradients", victim / L);
    bool named = same_host ? strstr(r->err[q], pid_words) != NULL
                 : victim % L ? strstr(r->err[q], name) != NULL
                              : strstr(r->err[q], host_words) && strstr(r->err[q], "is host h");
    REQUIRE(named, "rank %d (host %d) does not name rank %d: '%s' (rank 0 said '%.300s')", q,
            q / L, victim, r->err[q], r->err[0]);
    REQUIRE(r->kill_t > 0 && dt >= 0 && dt < 2.5 * o.timeout_ms / 1000.0 + 1.0,
            "rank %d failed %.2f s after rank %d was killed", q, dt, victim);
  }
  int after = shm_entries();
  REQUIRE(after <= before, "/dev/shm had %d entries before and %d after", before, after);
  printf("ok: rank %d (host %d of hosts of %d) killed: every rank failed in time; rank %d said "
         "'%s'; rank 0 said '%s'\n", victim, victim / L, L, (victim + 1) % world,
         r->err[(victim + 1) % world], r->err[0]);
  result_free(r);
}

int main(void) {
  bits(4, 2, 1, false, 1);
  bits(4, 2, 1, true, 2);
  bits(6, 3, 1, false, 3);
  bits(6, 2, 3, false, 4);
  bits(6, 2, 2, true, 5);
  bits(4, 4, 1, false, 6);
  dedicated();
  against_flat(4, 4);
  against_flat(6, 2);
  refused("hosts of 4 in a world of 6", 6, 4, GS_F32, "do not divide");
  setenv("GS_SHM", "0", 1);
  refused("shared memory turned off", 4, 2, GS_F32, "which GS_SHM=0 turns off");
  unsetenv("GS_SHM");
  const int host0[] = {0, 1}, rank1[] = {1}, rank0[] = {0};
  met_badly("rank 1 on another machine", other_machine, host0, 2,
            "rank 1 is not on the machine of rank 0, the first of host 0");
  met_badly("host 0's segment not mappable (rank 1)", unmappable, rank1, 1,
            "cannot map the shared memory of host 0 (rank 0's): opening /proc/");
  met_badly("host 0's segment not mappable (rank 0)", unmappable, rank0, 1,
            "rank(s) 1 did not arrive within 4000 ms");
  scaled(GS_F16, (gs_ps_sync){.model = GS_PS_BSP}, "bsp");
  scaled(GS_BF16, (gs_ps_sync){.model = GS_PS_BSP}, "bsp");
  /* 16-bit pushes under the stale models' machinery: bsp's bits */
  scaled(GS_F16, (gs_ps_sync){.model = GS_PS_SSP, .staleness = 0}, "ssp:0");
  scaled(GS_BF16, (gs_ps_sync){.backup_on = true, .backup = 0}, "backup 0");
  stale_bits((gs_ps_sync){.model = GS_PS_SSP, .staleness = 0}, "ssp:0");
  stale_bits((gs_ps_sync){.backup_on = true, .backup = 0}, "backup 0");
  stale_hosts((gs_ps_sync){.model = GS_PS_ASYNC}, "async");
  stale_hosts((gs_ps_sync){.backup_on = true, .backup = 1}, "backup 1");
  stale_hosts((gs_ps_sync){.model = GS_PS_SSP, .staleness = 2}, "ssp:2");
  killed(4, 2, 3, 1);   /* inside host 1, not its leader */
  killed(4, 2, 1, 2);   /* inside host 0, beside the server */
  killed(6, 3, 3, 1);   /* host 1's leader */
  return 0;
}
