/* test_ring.c: the bare ZeroMQ ring (allreduce.h), rank per process.
 *
 *   test_ring lengths W     exact sums and identical bits on every rank for
 *                           lengths 0, 1, W-1, W+1, primes and 3M elements,
 *                           in place and out of place, through the chunked
 *                           ring (small chunks) and the default settings
 *   test_ring order         random values: the bits equal a reference summed
 *                           in the documented order, on every rank, and the
 *                           same in two separate runs
 *   test_ring lowp          fp16 / bf16 wire: bits equal an emulation of the
 *                           documented rounding, close to the fp32 sum, half
 *                           the bytes
 *   test_ring mismatch      buffer lengths that differ: a clear error on
 *                           every rank at the handshake, and per collective
 *   test_ring junk          strangers on a ring socket (no secret, another
 *                           secret, another job): the ring finishes right
 *   test_ring kill          a rank SIGKILLed mid-collective: the others stop
 *                           within the timeout and name it
 *   test_ring stall         a rank that stops sending: the same
 *   test_ring abort         gs_comm_close(!ok): the others stop at once */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "allreduce_harness.h"
#include "kernels/elem.h"
#include "proto/proto.h"
#include <zmq.h>

#define PRIME_LARGE 3000017u

static gs_kernels *K;

typedef struct ring_set {
  gs_comm *r;
  const char *eps[TH_MAX_WORLD];
} ring_set;




/* ------------------------------------------------------------------ */

static size_t lengths_for(int world, size_t *out) {
  size_t cand[] = {0, 1, (size_t)world - 1, (size_t)world + 1, 2, 3, 5, 7, 13, 31, 1009, 4099,
                   65537, PRIME_LARGE};
  size_t n = 0;
  for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
    bool dup = false;
    for (size_t j = 0; j < n; j++) dup |= out[j] == cand[i];
    if (!dup) out[n++] = cand[i];
  }
  return n;
}

static int body_lengths(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_comm *rings[2] = {0};
  gs_comm_opts o;
  /* ring 0: 4 KiB chunks, never the small path; ring 1: the defaults */
  th_ring_opts(&o, rank, world, PRIME_LARGE, K);
  o.chunk_bytes = 4096;
  o.small_bytes = GS_COMM_NO_SMALL;
  if (th_ring_open(sh, 0, &o, &rings[0], &e) < 0) return th_report(sh, rank, &e);
  th_ring_opts(&o, rank, world, PRIME_LARGE, K);
  if (th_ring_open(sh, 1, &o, &rings[1], &e) < 0) return th_report(sh, rank, &e);
  float *src = gs_alloc(PRIME_LARGE * sizeof(float), &e);
  float *dst = gs_alloc(PRIME_LARGE * sizeof(float), &e);
  size_t lens[16];
  size_t nl = lengths_for(world, lens);
  int slot = 0, bad = 0;
  int64_t step = 0;
  for (int ri = 0; ri < 2; ri++) {
    for (size_t li = 0; li < nl; li++) {
      size_t n = lens[li];
      if (ri == 0 && n == PRIME_LARGE && world > 4) n = 1000003; /* keep 8 ranks brisk */
      for (int inplace = 0; inplace < 2; inplace++, slot++) {
        int salt = slot;
        for (size_t i = 0; i < n; i++) src[i] = th_contribution(rank, i, salt);
        float *out = inplace ? src : dst;
        if (!inplace) memset(dst, 0xff, n * sizeof(float));
        gs_comm_stats st = {0};
        if (gs_comm_allreduce(rings[ri], src, out, n, step++, slot, &st, &e) < 0)
          return th_report(sh, rank, &e);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
          float want = 0;
          for (int r = 0; r < world; r++) want += th_contribution(r, i, salt);
          if (out[i] != want && wrong++ == 0) first = i;
        }
        if (wrong) {
          fprintf(stderr, "rank %d: ring %d length %zu %s: %zu wrong elements, first [%zu] = %g\n",
                  rank, ri, n, inplace ? "in place" : "out of place", wrong, first, out[first]);
          bad++;
        }
        if (!inplace) {
          for (size_t i = 0; i < n; i++)
            if (src[i] != th_contribution(rank, i, salt)) {
              fprintf(stderr, "rank %d: out-of-place all-reduce changed src[%zu]\n", rank, i);
              bad++;
              break;
            }
        }
        sh->u64[rank][slot] = th_hash(out, n * sizeof(float));
        /* every rank sends 2(N-1)/N of the buffer on the ring path (plus headers) */
        if (ri == 0 && world > 1 && n >= 65537) {
          double want = 2.0 * (world - 1) / world * (double)n * 4;
          double ratio = (double)st.bytes_sent / want, rratio = (double)st.bytes_recv / want;
          if (ratio < 0.999 || ratio > 1.05 || rratio < 0.999 || rratio > 1.05) {
            fprintf(stderr, "rank %d: length %zu sent %llu received %llu bytes, expected %.0f "
                    "(+ headers, < 5%%)\n", rank, n, (unsigned long long)st.bytes_sent,
                    (unsigned long long)st.bytes_recv, want);
            bad++;
          }
        }
      }
    }
  }
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)slot;
  gs_free(src);
  gs_free(dst);
  gs_comm_close(rings[0], true, NULL);
  gs_comm_close(rings[1], true, NULL);
  return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* the documented summation order */

static void seg_of(size_t n, int N, size_t i, int *seg) {
  size_t q = n / (size_t)N, rem = n % (size_t)N;
  size_t big = rem * (q + 1); /* the first rem segments hold q+1 */
  *seg = i < big ? (int)(i / (q + 1)) : (int)(rem + (i - big) / (q ? q : 1));
}

/* fp32 reference: segment j starts at rank j and travels right. */
static float ref_ring(uint64_t seed, int N, size_t n, size_t i) {
  int j;
  seg_of(n, N, i, &j);
  float acc = th_randf(seed, j, i);
  for (int t = 1; t < N; t++) acc = th_randf(seed, (j + t) % N, i) + acc;
  return acc;
}
static float ref_small(uint64_t seed, int N, size_t i) {
  float acc = th_randf(seed, 0, i);
  for (int r = 1; r < N; r++) acc += th_randf(seed, r, i);
  return acc;
}

static uint16_t to_lp(gs_dtype t, float f) {
  return t == GS_F16 ? gs_f32_to_f16(f) : gs_f32_to_bf16(f);
}
static float from_lp(gs_dtype t, uint16_t h) {
  return t == GS_F16 ? gs_f16_to_f32(h) : gs_bf16_to_f32(h);
}
/* low-precision wire: every hop adds in fp32 and rounds once */
static float ref_ring_lp(gs_dtype t, uint64_t seed, int N, size_t n, size_t i) {
  int j;
  seg_of(n, N, i, &j);
  uint16_t h = to_lp(t, th_randf(seed, j, i));
  for (int s = 1; s < N; s++) h = to_lp(t, th_randf(seed, (j + s) % N, i) + from_lp(t, h));
  return from_lp(t, h);
}
static float ref_small_lp(gs_dtype t, uint64_t seed, int N, size_t i) {
  float acc = from_lp(t, to_lp(t, th_randf(seed, 0, i)));
  for (int r = 1; r < N; r++) acc += from_lp(t, to_lp(t, th_randf(seed, r, i)));
  return from_lp(t, to_lp(t, acc));
}

static int body_order(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_comm *ring, *small;
  gs_comm_opts o;
  const size_t n = 200003;
  th_ring_opts(&o, rank, world, n, K);
  o.chunk_bytes = 8192;
  o.small_bytes = GS_COMM_NO_SMALL;
  if (th_ring_open(sh, 0, &o, &ring, &e) < 0) return th_report(sh, rank, &e);
  th_ring_opts(&o, rank, world, n, K);
  if (th_ring_open(sh, 1, &o, &small, &e) < 0) return th_report(sh, rank, &e);
  float *buf = gs_alloc(n * sizeof(float), &e);
  uint64_t seed = 42;
  int bad = 0;
  /* ring path; a few rounds with random pauses on one rank, to vary timing */
  for (int rep = 0; rep < 3; rep++) {
    for (size_t i = 0; i < n; i++) buf[i] = th_randf(seed, rank, i);
    if (rank == rep % world) usleep(20000);
    if (gs_comm_allreduce(ring, buf, buf, n, rep, 0, NULL, &e) < 0) return th_report(sh, rank, &e);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += buf[i] != ref_ring(seed, world, n, i);
    if (wrong) {
      fprintf(stderr, "rank %d: %zu elements differ from the documented ring order\n", rank,
              wrong);
      bad++;
    }
    sh->u64[rank][rep] = th_hash(buf, n * sizeof(float));
  }
  /* small path: rank order */
  size_t m = 1000;
  for (size_t i = 0; i < m; i++) buf[i] = th_randf(seed, rank, i);
  if (gs_comm_allreduce(small, buf, buf, m, 9, 0, NULL, &e) < 0) return th_report(sh, rank, &e);
  size_t wrong = 0;
  for (size_t i = 0; i < m; i++) wrong += buf[i] != ref_small(seed, world, i);
  if (wrong) {
    fprintf(stderr, "rank %d: %zu elements differ from the rank-order sum\n", rank, wrong);
    bad++;
  }
  sh->u64[rank][3] = th_hash(buf, m * sizeof(float));
  gs_free(buf);
  gs_comm_close(ring, true, NULL);
  gs_comm_close(small, true, NULL);
  return bad;
}

/* ------------------------------------------------------------------ */

static int body_lowp(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  const size_t n = 100003;
  gs_comm *r32, *r16, *rbf, *r16s;
  gs_comm_opts o;
  th_ring_opts(&o, rank, world, n, K);
  o.chunk_bytes = 4096;
  o.small_bytes = GS_COMM_NO_SMALL;
  if (th_ring_open(sh, 0, &o, &r32, &e) < 0) return th_report(sh, rank, &e);
  o.wire = GS_F16;
  if (th_ring_open(sh, 1, &o, &r16, &e) < 0) return th_report(sh, rank, &e);
  o.wire = GS_BF16;
  if (th_ring_open(sh, 2, &o, &rbf, &e) < 0) return th_report(sh, rank, &e);
  th_ring_opts(&o, rank, world, n, K);
  o.wire = GS_F16;
  if (th_ring_open(sh, 3, &o, &r16s, &e) < 0) return th_report(sh, rank, &e);
  float *src = gs_alloc(n * sizeof(float), &e), *dst = gs_alloc(n * sizeof(float), &e);
  uint64_t seed = 7;
  for (size_t i = 0; i < n; i++) src[i] = th_randf(seed, rank, i);
  int bad = 0;
  gs_comm_stats s32 = {0}, s16 = {0}, sbf = {0};
  if (gs_comm_allreduce(r32, src, dst, n, 0, 0, &s32, &e) < 0) return th_report(sh, rank, &e);
  struct {
    gs_comm *r;
    gs_dtype t;
    gs_comm_stats *st;
    double tol;
  } cases[2] = {{r16, GS_F16, &s16, 4e-3}, {rbf, GS_BF16, &sbf, 3e-2}};
  for (int c = 0; c < 2; c++) {
    if (gs_comm_allreduce(cases[c].r, src, dst, n, 1 + c, 0, cases[c].st, &e) < 0)
      return th_report(sh, rank, &e);
    size_t wrong = 0, far = 0;
    for (size_t i = 0; i < n; i++) {
      double exact = 0;
      for (int r = 0; r < world; r++) exact += th_randf(seed, r, i);
      wrong += dst[i] != ref_ring_lp(cases[c].t, seed, world, n, i);
      far += fabs(dst[i] - exact) > cases[c].tol * world;
    }
    if (wrong || far) {
      fprintf(stderr, "rank %d: %s wire: %zu elements differ from the emulated rounding, %zu "
              "beyond %g of the exact sum\n", rank, gs_dtype_name(cases[c].t), wrong, far,
              cases[c].tol * world);
      bad++;
    }
    sh->u64[rank][c] = th_hash(dst, n * sizeof(float));
    double ratio = (double)cases[c].st->bytes_sent / (double)s32.bytes_sent;
    if (world > 1 && (ratio < 0.475 || ratio > 0.525)) {
      fprintf(stderr, "rank %d: %s sent %llu bytes, fp32 %llu: ratio %.3f, expected 0.5\n", rank,
              gs_dtype_name(cases[c].t), (unsigned long long)cases[c].st->bytes_sent,
              (unsigned long long)s32.bytes_sent, ratio);
      bad++;
    }
  }
  /* fp16 through the small path, in place */
  size_t m = 777;
  for (size_t i = 0; i < m; i++) dst[i] = th_randf(seed, rank, i);
  if (gs_comm_allreduce(r16s, dst, dst, m, 5, 0, NULL, &e) < 0) return th_report(sh, rank, &e);
  size_t wrong = 0;
  for (size_t i = 0; i < m; i++) wrong += dst[i] != ref_small_lp(GS_F16, seed, world, i);
  if (wrong) {
    fprintf(stderr, "rank %d: fp16 small path: %zu elements differ\n", rank, wrong);
    bad++;
  }
  sh->u64[rank][2] = th_hash(dst, m * sizeof(float));
  gs_free(src);
  gs_free(dst);
  gs_comm_close(r32, true, NULL);
  gs_comm_close(r16, true, NULL);
  gs_comm_close(rbf, true, NULL);
  gs_comm_close(r16s, true, NULL);
  return bad;
}

/* ------------------------------------------------------------------ */

static int body_mismatch(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_comm *r;
  gs_comm_opts o;
  /* handshake: rank 1 was built for 1000 elements, the others for 999 */
  th_ring_opts(&o, rank, world, rank == 1 ? 1000 : 999, K);
  o.timeout_ms = 5000;
  double t0 = gs_now();
  int rc = th_ring_open(sh, 0, &o, &r, &e);
  sh->f64[rank][0] = gs_now() - t0;
  sh->u64[rank][0] = (uint64_t)(-rc);
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == 0, NULL);
  /* per collective: rank 2 passes 5000 elements, the others 6000 (ring
   * path) and then 50 / 60 (small path) on a fresh ring */
  for (int pass = 0; pass < 2; pass++) {
    gs_err e2 = {0};
    th_ring_opts(&o, rank, world, 10000, K);
    o.timeout_ms = 5000;
    if (th_ring_open(sh, 1 + pass, &o, &r, &e2) < 0) return th_report(sh, rank, &e2);
    size_t n = pass == 0 ? (rank == 2 ? 5000 : 6000) : (rank == 2 ? 50 : 60);
    float *buf = gs_alloc(10000 * sizeof(float), &e2);
    t0 = gs_now();
    rc = gs_comm_allreduce(r, buf, buf, n, 0, 0, NULL, &e2);
    sh->f64[rank][1 + pass] = gs_now() - t0;
    sh->u64[rank][1 + pass] = (uint64_t)(-rc);
    fprintf(stderr, "rank %d, pass %d: %s\n", rank, pass, e2.msg);
    if (rc == 0 || !strstr(e2.msg, "elements")) sh->u64[rank][10 + pass] = 1;
    gs_comm_close(r, rc == 0, NULL);
    gs_free(buf);
  }
  return 0;
}

/* ------------------------------------------------------------------ */

/* Strangers on rank 1's ring socket while the ring runs: one without the
 * job's secret (refused at the handshake, its connection left open, its
 * garbage never delivered), one with another secret, and one that holds
 * the secret but belongs to another job (its frames dropped). */
static void *stranger(void *ctx, const char *secret, const char *ep) {
  void *s = zmq_socket(ctx, ZMQ_PUSH);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  gs_cred c;
  gs_err e = {0};
  char addr[GS_ENDPOINT_MAX];
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  if (secret && gs_cred_derive(&c, secret, strlen(secret), false, &e) == 0) {
    gs_cred_connect(s, &c, ep, &e);
  } else if (gs_endpoint_split(ep, addr, sizeof addr, nonce) >= 0) {
    zmq_connect(s, addr);
  }
  zmq_send(s, "\xff\x01garbage", 9, ZMQ_DONTWAIT);
  return s;
}

static int body_junk(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  gs_comm *r;
  gs_comm_opts o;
  th_ring_opts(&o, rank, world, 1000, K);
  o.timeout_ms = 5000;
  if (gs_cred_derive(&o.cred, "job secret", 10, false, &e) < 0) return th_report(sh, rank, &e);
  char ep[GS_ENDPOINT_MAX];
  if (gs_comm_prepare(&o, &r, ep, &e) < 0) return th_report(sh, rank, &e);
  const char *eps[TH_MAX_WORLD];
  if (th_exchange(sh, 0, rank, ep, eps) < 0) return 1;
  void *ctx = NULL, *s[3] = {0};
  if (rank == 0) {
    ctx = zmq_ctx_new();
    s[0] = stranger(ctx, NULL, eps[1]);
    s[1] = stranger(ctx, "another secret", eps[1]);
    s[2] = stranger(ctx, "job secret", eps[1]);
    Gradsync__Envelope env;
    Gradsync__Error er = GRADSYNC__ERROR__INIT;
    er.phase = "ring";
    er.message = "a forged stop";
    gs_wire_env(&env, 0xbad, 0);  /* claims to be rank 0, with another job's token */
    env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
    env.error = &er;
    gs_wire_send(s[2], NULL, 0, &env, NULL, 0, NULL, NULL, 1000, NULL, NULL);
    usleep(200000);
  }
  th_barrier(sh, 0);
  int rc = gs_comm_connect(r, eps, &e);
  float buf[10];
  for (int i = 0; i < 10; i++) buf[i] = (float)(rank + 1);
  if (rc == 0) rc = gs_comm_allreduce(r, buf, buf, 10, 0, 0, NULL, &e);
  int wrong = 0;
  for (int i = 0; rc == 0 && i < 10; i++) wrong += buf[i] != 3.0f;
  sh->u64[rank][0] = (uint64_t)(-rc);
  sh->u64[rank][1] = (uint64_t)wrong;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == 0, NULL);
  for (int i = 0; i < 3; i++)
    if (s[i]) zmq_close(s[i]);
  if (ctx) zmq_ctx_term(ctx);
  return 0;
}

/* ------------------------------------------------------------------ */
/* faults: kill, stall, abort */

enum { F_KILL, F_STALL, F_ABORT };
typedef struct fault {
  int kind, victim, timeout_ms;
} fault;

static int body_fault(th_shared *sh, int rank, int world, void *arg) {
  const fault *f = arg;
  gs_err e = {0};
  gs_comm *r;
  gs_comm_opts o;
  const size_t n = 4u << 20;
  th_ring_opts(&o, rank, world, n, K);
  o.timeout_ms = f->timeout_ms;
  if (th_ring_open(sh, 0, &o, &r, &e) < 0) return th_report(sh, rank, &e);
  float *buf = gs_alloc(n * sizeof(float), &e);
  th_barrier(sh, 0);
  for (int64_t it = 0;; it++) {
    if (rank == f->victim && it == 3) {
      sh->f64[rank][0] = gs_now(); /* when it stopped taking part */
      if (f->kind == F_STALL) {
        usleep((useconds_t)f->timeout_ms * 3000);
        gs_comm_close(r, false, NULL);
        gs_free(buf);
        return 0;
      }
      if (f->kind == F_ABORT) {
        gs_comm_close(r, false, "the test aborts it");
        gs_free(buf);
        return 0;
      }
    }
    int rc = gs_comm_allreduce(r, buf, buf, n - (size_t)it, it, (int)(it % 3), NULL, &e);
    if (rc < 0) {
      th_report(sh, rank, &e);
      gs_comm_close(r, false, NULL);
      gs_free(buf);
      return 1;
    }
    if (it > 100000) break;
  }
  gs_comm_close(r, true, NULL);
  gs_free(buf);
  return 0;
}

static void killer(th_shared *sh, const pid_t *pids, void *arg) {
  const fault *f = arg;
  double deadline = gs_now() + 30;
  while (atomic_load(&sh->barrier[0]) < sh->world && gs_now() < deadline) usleep(1000);
  usleep(150000); /* well inside the loop of 16 MiB collectives */
  sh->f64[f->victim][0] = gs_now();
  kill(pids[f->victim], SIGKILL);
}

static int check_fault(int world, int kind, int victim) {
  fault f = {kind, victim, 2000};
  th_shared *sh = th_run(world, body_fault, &f, 40, kind == F_KILL ? killer : NULL);
  CHECK(sh, "fork failed");
  if (!sh) return 1;
  const char *names[] = {"kill", "stall", "abort"};
  double t_fault = sh->f64[victim][0];
  char needle[32];
  snprintf(needle, sizeof needle, "rank %d", victim);
  for (int r = 0; r < world; r++) {
    if (r == victim) continue;
    double after = sh->exit_at[r] - t_fault;
    printf("%s: rank %d exited %d, %.2f s after the fault: %s\n", names[kind], r, sh->status[r],
           after, sh->msg[r]);
    CHECK(sh->status[r] == 1, "%s: rank %d should fail (status %d)", names[kind], r,
          sh->status[r]);
    /* the timeout, plus the time to notice and to pass the news around */
    double limit = kind == F_ABORT ? 1.5 : f.timeout_ms / 1000.0 + 1.5;
    CHECK(t_fault > 0 && after < limit, "%s: rank %d took %.2f s to stop (limit %.1f)",
          names[kind], r, after, limit);
    CHECK(strstr(sh->msg[r], needle) != NULL, "%s: rank %d's error does not name %s: %s",
          names[kind], r, needle, sh->msg[r]);
  }
  if (kind == F_ABORT)
    for (int r = 0; r < world; r++)
      if (r != victim)
        CHECK(strstr(sh->msg[r], "aborted") != NULL, "abort: rank %d: %s", r, sh->msg[r]);
  th_free(sh);
  return 0;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  K = th_start();
  if (!K) return 1;
  const char *what = argc > 1 ? argv[1] : "lengths";
  if (!strcmp(what, "lengths")) {
    int lo = argc > 2 ? atoi(argv[2]) : 1, hi = argc > 3 ? atoi(argv[3]) : lo;
    CHECK(th_worlds_agree(lo, hi, body_lengths, 120) == 0, "worlds %d..%d", lo, hi);
  } else if (!strcmp(what, "order")) {
    uint64_t first[4] = {0};
    for (int run = 0; run < 2; run++) {
      int w = 4;
      th_shared *sh = th_run(w, body_order, NULL, 60, NULL);
      CHECK(sh && th_failures(sh) == 0, "order run %d failed", run);
      if (!sh) break;
      for (int s = 0; s < 4; s++) {
        for (int r = 1; r < w; r++)
          CHECK(sh->u64[r][s] == sh->u64[0][s], "run %d case %d: rank %d differs", run, s, r);
        if (run == 0) first[s] = sh->u64[0][s];
        else CHECK(sh->u64[0][s] == first[s], "case %d: run 2 differs from run 1", s);
      }
      th_free(sh);
    }
  } else if (!strcmp(what, "lowp")) {
    for (int w = 2; w <= 4; w++) {
      th_shared *sh = th_run(w, body_lowp, NULL, 60, NULL);
      CHECK(sh && th_failures(sh) == 0, "lowp world %d failed", w);
      if (!sh) break;
      for (int s = 0; s < 3; s++)
        for (int r = 1; r < w; r++)
          CHECK(sh->u64[r][s] == sh->u64[0][s], "world %d case %d: rank %d differs", w, s, r);
      th_free(sh);
    }
  } else if (!strcmp(what, "mismatch")) {
    int w = 3;
    th_shared *sh = th_run(w, body_mismatch, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "mismatch: a rank crashed");
    if (sh) {
      for (int r = 0; r < w; r++) {
        printf("rank %d: %s\n", r, sh->msg[r]);
        CHECK(sh->u64[r][0] == (uint64_t)-GS_EMISMATCH, "rank %d: handshake gave code %d",
              r, -(int)sh->u64[r][0]);
        CHECK(strstr(sh->msg[r], "buffer length") && strstr(sh->msg[r], "rank 1: 1000") &&
              strstr(sh->msg[r], "rank 0: 999"), "rank %d: unclear message: %s", r,
              sh->msg[r]);
        CHECK(sh->f64[r][0] < 4.0, "rank %d: the handshake error took %.1f s", r,
              sh->f64[r][0]);
        for (int p = 0; p < 2; p++) {
          CHECK(sh->u64[r][1 + p] != 0 && sh->u64[r][10 + p] == 0,
                "rank %d pass %d: a count mismatch was not reported clearly", r, p);
          CHECK(sh->f64[r][1 + p] < 4.0, "rank %d pass %d: the count mismatch took %.1f s "
                "(a timeout, not a clear error)", r, p, sh->f64[r][1 + p]);
        }
      }
      th_free(sh);
    }
  } else if (!strcmp(what, "junk")) {
    th_shared *sh = th_run(2, body_junk, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "junk: a rank crashed");
    for (int i = 0; sh && i < 2; i++)
      CHECK(sh->u64[i][0] == 0 && sh->u64[i][1] == 0, "rank %d should finish with the right "
            "sums while strangers write to the ring: %s (%llu wrong)", i, sh->msg[i],
            (unsigned long long)sh->u64[i][1]);
    if (sh) th_free(sh);
  } else if (!strcmp(what, "kill")) {
    check_fault(4, F_KILL, 2);
    check_fault(2, F_KILL, 0);
  } else if (!strcmp(what, "stall")) {
    check_fault(4, F_STALL, 1);
  } else if (!strcmp(what, "abort")) {
    check_fault(3, F_ABORT, 1);
  } else {
    fprintf(stderr, "usage: test_ring lengths W [W2] | order | lowp | mismatch | junk | kill | "
            "stall | abort\n");
    return 2;
  }
  K->destroy(K);
  return check_done("test_ring");
}
