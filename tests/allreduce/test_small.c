/* test_small.c: the small-message algorithms of the bare ZeroMQ ring
 * (allreduce.h gs_algo: rd, direct, shm and auto, which is shm here: the
 * ranks share a host), rank per process.
 *
 *   test_small sums W1 W2   worlds W1..W2, every algorithm, lengths 1, 2, 3,
 *                           W-1, W+1, odd and larger ones (auto and shm must
 *                           run shm), in place and out of place, collectives
 *                           back to back (one rank pausing now and then):
 *                           exact integer sums; random values: the bits of
 *                           the documented order (rd's pairs and rounds,
 *                           direct's and shm's rank order) on every rank
 *   test_small lowp         fp16 / bf16 wire through rd and direct: the bits
 *                           of an emulation of the documented rounding, on
 *                           every rank, at worlds 2..5
 *   test_small mismatch     ranks given different algorithms: a clear error
 *                           naming the algorithm on every rank, at once
 *   test_small sync         through the ring's sync.h backend: a sum_only
 *                           session runs the algorithm it is given (the bytes
 *                           each rank sends are that algorithm's), training
 *                           runs the ring whatever it is given
 *   test_small abort        a rank that closes with !ok in the middle of rd,
 *                           direct or shm collectives: the others stop soon
 *                           with its cause, not their timeout
 *   test_small killed       a rank killed in the middle of shm collectives:
 *                           the others stop soon, naming it */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "allreduce_harness.h"
#include "kernels/elem.h"

#define MAXN 65537u

static gs_kernels *K;
/* rd and direct by name (main): the launcher names neither */
static gs_algo RD, DIRECT, ALGOS[4];
#define NALGOS 4

/* ------------------------------------------------------------------ */
/* the documented orders, emulated element by element */

static uint16_t to_lp(gs_dtype t, float f) {
  return t == GS_F16 ? gs_f32_to_f16(f) : gs_f32_to_bf16(f);
}
static float from_lp(gs_dtype t, uint16_t h) {
  return t == GS_F16 ? gs_f16_to_f32(h) : gs_bf16_to_f32(h);
}
/* what the wire makes of x (fp32: x itself) */
static float wire(gs_dtype t, float x) { return t == GS_F32 ? x : from_lp(t, to_lp(t, x)); }

/* rank order 0..N-1, each contribution as the wire carries it */
static float ref_direct(gs_dtype t, uint64_t seed, int N, size_t i) {
  float acc = wire(t, th_randf(seed, 0, i));
  for (int r = 1; r < N; r++) acc += wire(t, th_randf(seed, r, i));
  return wire(t, acc);
}

/* the first 2R ranks fold in pairwise, then rounds with partner nr ^ 2^b,
 * each side adding what the other sent (as rounded) to its own (as
 * rounded) */
static float ref_rd(gs_dtype t, uint64_t seed, int N, size_t i) {
  int P = 1;
  while (P * 2 <= N) P *= 2;
  int R = N - P;
  float cur[TH_MAX_WORLD], next[TH_MAX_WORLD];
  for (int nr = 0; nr < P; nr++)
    cur[nr] = nr < R ? wire(t, th_randf(seed, 2 * nr + 1, i)) + wire(t, th_randf(seed, 2 * nr, i))
                     : th_randf(seed, nr + R, i);
  for (int mask = 1; mask < P; mask <<= 1) {
    for (int nr = 0; nr < P; nr++) next[nr] = wire(t, cur[nr]) + wire(t, cur[nr ^ mask]);
    memcpy(cur, next, sizeof cur);
  }
  return wire(t, cur[0]);
}

/* shm sums in rank order, as direct */
static float ref(gs_algo a, gs_dtype t, uint64_t seed, int N, size_t i) {
  return a == DIRECT || a == GS_ALGO_SHM ? ref_direct(t, seed, N, i) : ref_rd(t, seed, N, i);
}

/* ------------------------------------------------------------------ */




static void base_opts(gs_comm_opts *o, int rank, int world, size_t max_count, gs_algo a) {
  th_ring_opts(o, rank, world, max_count, K);
  o->algo = a;
}

static size_t lengths_for(int world, size_t *out) {
  size_t cand[] = {1, 2, 3, (size_t)world - 1, (size_t)world + 1, 7, 31, 1009, 4099, MAXN};
  size_t n = 0;
  for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
    bool dup = cand[i] == 0;
    for (size_t j = 0; j < n; j++) dup |= out[j] == cand[i];
    if (!dup) out[n++] = cand[i];
  }
  return n;
}

static int body_sums(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  gs_comm *rings[NALGOS];
  gs_comm_opts o;
  for (int a = 0; a < NALGOS; a++) {
    base_opts(&o, rank, world, MAXN, ALGOS[a]);
    if (th_ring_open(sh, a, &o, &rings[a], &e) < 0) return th_report(sh, rank, &e);
  }
  float *src = gs_alloc(MAXN * sizeof(float), &e), *dst = gs_alloc(MAXN * sizeof(float), &e);
  if (!src || !dst) return th_report(sh, rank, &e);
  size_t lens[16];
  size_t nl = lengths_for(world, lens);
  int slot = 0, bad = 0;
  int64_t step = 0;
  for (int a = 0; a < NALGOS; a++) {
    for (size_t li = 0; li < nl; li++) {
      size_t n = lens[li];
      gs_algo ran = gs_comm_algo(rings[a], n);
      if ((ALGOS[a] == GS_ALGO_AUTO || ALGOS[a] == GS_ALGO_SHM) && ran != GS_ALGO_SHM) {
        fprintf(stderr, "rank %d: %s on one host ran %s, not shm\n", rank,
                gs_algo_name(ALGOS[a]), gs_algo_name(ran));
        bad++;
      }
      for (int kind = 0; kind < 4; kind++, slot++) {
        bool inplace = kind & 1, random = kind & 2;
        uint64_t seed = (uint64_t)slot + 1;
        for (size_t i = 0; i < n; i++)
          src[i] = random ? th_randf(seed, rank, i) : th_contribution(rank, i, slot);
        float *out = inplace ? src : dst;
        if (!inplace) memset(dst, 0xff, n * sizeof(float));
        /* a late rank: the others' next messages wait for it in its queues */
        if (rank == slot % world && slot % 7 == 0) usleep(5000);
        if (gs_comm_allreduce(rings[a], src, out, n, step++, slot, NULL, &e) < 0)
          return th_report(sh, rank, &e);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
          float want = 0;
          if (!random)
            for (int r = 0; r < world; r++) want += th_contribution(r, i, slot);
          else if (ran != GS_ALGO_RING)
            want = ref(ran, GS_F32, seed, world, i);
          else
            want = out[i]; /* the ring's order: test_ring's business */
          if (out[i] != want && wrong++ == 0) first = i;
        }
        if (wrong) {
          fprintf(stderr, "rank %d: %s (ran %s) length %zu %s %s: %zu wrong elements, first "
                  "[%zu] = %.9g\n", rank, gs_algo_name(ALGOS[a]), gs_algo_name(ran), n,
                  random ? "random" : "integers", inplace ? "in place" : "out of place", wrong,
                  first, out[first]);
          bad++;
        }
        if (!inplace)
          for (size_t i = 0; i < n; i++)
            if (src[i] != (random ? th_randf(seed, rank, i) : th_contribution(rank, i, slot))) {
              fprintf(stderr, "rank %d: out-of-place %s changed src[%zu]\n", rank,
                      gs_algo_name(ran), i);
              bad++;
              break;
            }
        sh->u64[rank][slot] = th_hash(out, n * sizeof(float));
      }
    }
  }
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)slot;
  gs_free(src);
  gs_free(dst);
  for (int a = 0; a < NALGOS; a++) gs_comm_close(rings[a], true, NULL);
  return bad ? 1 : 0;
}

static int body_lowp(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  const gs_dtype types[2] = {GS_F16, GS_BF16};
  const size_t n = 1001;
  float *buf = gs_alloc(n * sizeof(float), &e), *out = gs_alloc(n * sizeof(float), &e);
  if (!buf || !out) return th_report(sh, rank, &e);
  int bad = 0, slot = 0;
  for (int a = 0; a < 2; a++) {
    for (int t = 0; t < 2; t++, slot++) {
      gs_comm *r;
      gs_comm_opts o;
      base_opts(&o, rank, world, n, ALGOS[a]);
      o.wire = types[t];
      if (th_ring_open(sh, slot, &o, &r, &e) < 0) return th_report(sh, rank, &e);
      uint64_t seed = 11 + (uint64_t)slot;
      for (size_t i = 0; i < n; i++) buf[i] = th_randf(seed, rank, i);
      /* out of place, then the same in place: the same bits */
      if (gs_comm_allreduce(r, buf, out, n, 0, 0, NULL, &e) < 0 ||
          gs_comm_allreduce(r, buf, buf, n, 1, 0, NULL, &e) < 0)
        return th_report(sh, rank, &e);
      size_t wrong = 0;
      for (size_t i = 0; i < n; i++) wrong += out[i] != ref(ALGOS[a], types[t], seed, world, i);
      if (wrong || memcmp(out, buf, n * sizeof(float))) {
        fprintf(stderr, "rank %d: %s over a %s wire: %zu elements differ from the emulated "
                "rounding%s\n", rank, gs_algo_name(ALGOS[a]), gs_dtype_name(types[t]), wrong,
                memcmp(out, buf, n * sizeof(float)) ? "; in place differs from out of place"
                                                    : "");
        bad++;
      }
      sh->u64[rank][slot] = th_hash(out, n * sizeof(float));
      gs_comm_close(r, true, NULL);
    }
  }
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)slot;
  gs_free(buf);
  gs_free(out);
  return bad;
}

static int body_mismatch(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  gs_comm *r = NULL;
  gs_comm_opts o;
  base_opts(&o, rank, world, 100, rank == 1 ? DIRECT : RD);
  double t0 = gs_now();
  int rc = th_ring_open(sh, 0, &o, &r, &e);
  sh->u64[rank][0] = (uint64_t)-rc;
  sh->f64[rank][0] = gs_now() - t0;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == GS_OK, NULL);
  return 0;
}

/* rank 1 gives up after a few collectives (closing with a reason, or
 * killed); the others go on */
typedef struct stop_case {
  gs_algo a;
  bool kill;
} stop_case;

static int body_abort(th_shared *sh, int rank, int world, void *arg) {
  const stop_case *c = arg;
  gs_err e = {0};
  gs_comm *r;
  gs_comm_opts o;
  base_opts(&o, rank, world, 64, c->a);
  if (th_ring_open(sh, 0, &o, &r, &e) < 0) return th_report(sh, rank, &e);
  float buf[64];
  int rc = GS_OK;
  double t_fail = 0;
  for (int64_t s = 0; s < 1000 && rc == GS_OK; s++) {
    if (rank == 1 && s == 5) {
      if (c->kill) raise(SIGKILL);
      gs_comm_close(r, false, "the test stops it");
      return 0;
    }
    for (int i = 0; i < 64; i++) buf[i] = (float)rank;
    rc = gs_comm_allreduce(r, buf, buf, 64, s, 0, NULL, &e);
    if (rc < 0) t_fail = gs_now();
  }
  sh->u64[rank][0] = (uint64_t)-rc;
  sh->f64[rank][0] = t_fail;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == GS_OK, NULL);
  return 0;
}

/* Payload bytes rank `rank` sends in one all-reduce of n floats. */
static double algo_bytes(gs_algo a, int rank, int world, size_t n) {
  double S = (double)n * sizeof(float);
  if (a == GS_ALGO_RING) return 2.0 * (world - 1) / world * S;
  if (a == DIRECT) return (world - 1) * S;
  int P = 1, rounds = 0;
  while (P * 2 <= world) P *= 2, rounds++;
  int R = world - P;
  if (rank < 2 * R) return rank % 2 == 0 ? S : (rounds + 1) * S;
  return rounds * S;
}

#define SYNC_N 40000u /* above the ring's whole-vector threshold */

static int body_sync(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  float *params = K->alloc(K, SYNC_N * sizeof(float)), *grads = K->alloc(K, SYNC_N * sizeof(float));
  gs_bucket bucket = {0, SYNC_N};
  /* sum_only with ring, rd, direct; then training given rd */
  const gs_algo given[4] = {GS_ALGO_RING, RD, DIRECT, RD};
  int bad = 0;
  for (int c = 0; c < 4; c++) {
    bool sum_only = c < 3;
    gs_allreduce_opts ar = {.algo = given[c]};
    gs_sync_config cfg = {.rank = rank, .world = world, .timeout_ms = 20000, .job = 0xabc,
                          .host = "127.0.0.1", .k = K, .params = params, .grads = grads,
                          .n = SYNC_N, .buckets = &bucket, .nbuckets = 1,
                          .sgd = {.lr = 0.5f}, .wire = GS_F32, .sum_only = sum_only,
                          .opts = &ar};
    gs_scaler_init(&cfg.scaler, 1, false);
    for (size_t i = 0; i < SYNC_N; i++) {
      grads[i] = th_contribution(rank, i, c);
      params[i] = 0;
    }
    void *state;
    char ep[GS_ENDPOINT_MAX];
    const char *eps[TH_MAX_WORLD];
    gs_sync *s;
    gs_sync_stats st;
    memset(&st, 0, sizeof st);
    if (gs_allreduce_backend.prepare(&cfg, &state, ep, &e) < 0) return th_report(sh, rank, &e);
    if (th_exchange(sh, c, rank, ep, eps) < 0) return 1;
    cfg.endpoints = eps;
    if (gs_allreduce_backend.open(state, &cfg, &s, &e) < 0 || s->ops->begin_step(s, 0, &e) < 0 ||
        s->ops->bucket_ready(s, 0, &e) < 0 || s->ops->end_step(s, &st, &e) < 0 ||
        s->ops->close(s, true, &e) < 0)
      return th_report(sh, rank, &e);
    gs_algo want = sum_only ? given[c] : GS_ALGO_RING;
    double payload = algo_bytes(want, rank, world, SYNC_N), ratio = (double)st.bytes_sent / payload;
    if (ratio < 1.0 || ratio > 1.01) {
      fprintf(stderr, "rank %d: %s given %s sent %llu bytes: %s would send %.0f (+ headers)\n",
              rank, sum_only ? "sum_only" : "training", gs_algo_name(given[c]),
              (unsigned long long)st.bytes_sent, gs_algo_name(want), payload);
      bad++;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < SYNC_N; i++) {
      float sum = 0;
      for (int r = 0; r < world; r++) sum += th_contribution(r, i, c);
      /* training: one SGD step from 0 with the mean gradient */
      float want_p = sum_only ? sum : -0.5f * (sum / (float)world);
      wrong += fabsf(params[i] - want_p) > (sum_only ? 0.0f : 1e-6f);
    }
    if (wrong) {
      fprintf(stderr, "rank %d: %s given %s: %zu wrong parameters\n", rank,
              sum_only ? "sum_only" : "training", gs_algo_name(given[c]), wrong);
      bad++;
    }
  }
  K->release(K, params);
  K->release(K, grads);
  return bad;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  K = th_start();
  if (!K) return 1;
  RD = th_algo("rd");
  DIRECT = th_algo("direct");
  const gs_algo algos4[NALGOS] = {RD, DIRECT, GS_ALGO_AUTO, GS_ALGO_SHM};
  memcpy(ALGOS, algos4, sizeof ALGOS);
  const char *what = argc > 1 ? argv[1] : "sums";
  if (!strcmp(what, "sums")) {
    int lo = argc > 2 ? atoi(argv[2]) : 2, hi = argc > 3 ? atoi(argv[3]) : lo;
    CHECK(th_worlds_agree(lo, hi, body_sums, 120) == 0, "worlds %d..%d", lo, hi);
  } else if (!strcmp(what, "lowp")) {
    for (int w = 2; w <= 5; w++) {
      th_shared *sh = th_run(w, body_lowp, NULL, 60, NULL);
      CHECK(sh && th_failures(sh) == 0, "lowp world %d failed", w);
      if (!sh) break;
      int slots = (int)sh->u64[0][TH_SLOTS - 1];
      CHECK(slots == 4, "world %d: %d cases ran", w, slots);
      for (int s = 0; s < slots; s++)
        for (int r = 1; r < w; r++)
          CHECK(sh->u64[r][s] == sh->u64[0][s], "world %d case %d: rank %d differs", w, s, r);
      th_free(sh);
    }
  } else if (!strcmp(what, "mismatch")) {
    int w = 3;
    th_shared *sh = th_run(w, body_mismatch, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "mismatch: a rank crashed");
    for (int r = 0; sh && r < w; r++) {
      printf("rank %d: %s\n", r, sh->msg[r]);
      CHECK(sh->u64[r][0] == (uint64_t)-GS_EMISMATCH, "rank %d: the handshake gave code %d", r,
            -(int)sh->u64[r][0]);
      CHECK(strstr(sh->msg[r], "the algorithm") && strstr(sh->msg[r], "rank 1: direct") &&
            strstr(sh->msg[r], "rank 0: rd"), "rank %d: unclear message: %s", r, sh->msg[r]);
      CHECK(sh->f64[r][0] < 4.0, "rank %d: the error took %.1f s", r, sh->f64[r][0]);
    }
    th_free(sh);
  } else if (!strcmp(what, "sync")) {
    for (int w = 2; w <= 5; w++) {
      th_shared *sh = th_run(w, body_sync, NULL, 60, NULL);
      CHECK(sh && th_failures(sh) == 0, "sync world %d failed", w);
      th_free(sh);
    }
  } else if (!strcmp(what, "abort") || !strcmp(what, "killed")) {
    /* the socket algorithms learn a closing rank's cause from its message;
     * shm from the segment, and that a killed rank's process is gone */
    const bool kill = !strcmp(what, "killed");
    const gs_algo algos[3] = {RD, DIRECT, GS_ALGO_SHM};
    for (int a = kill ? 2 : 0; a < 3; a++) {
      for (int w = 2; w <= 4; w++) {
        stop_case c = {algos[a], kill};
        double t0 = gs_now();
        th_shared *sh = th_run(w, body_abort, &c, 60, NULL);
        CHECK(sh != NULL, "fork failed");
        for (int r = 0; sh && r < w; r++) {
          if (r == 1) continue;
          printf("%s%s world %d rank %d: %s\n", gs_algo_name(algos[a]), kill ? " killed" : "",
                 w, r, sh->msg[r]);
          CHECK(sh->status[r] == 0, "rank %d crashed (status %d)", r, sh->status[r]);
          CHECK(sh->u64[r][0] != 0, "rank %d finished 1000 collectives without rank 1", r);
          CHECK(strstr(sh->msg[r], kill ? "rank 1 (pid" : "the test stops it"),
                "rank %d does not name the cause: %s", r, sh->msg[r]);
          CHECK(sh->f64[r][0] > 0 && sh->f64[r][0] - t0 < 10.0, "rank %d stopped %.1f s after "
                "the start (its 20 s timeout, not the cause)", r, sh->f64[r][0] - t0);
        }
        th_free(sh);
      }
    }
  }
  K->destroy(K);
  return check_done(what);
}
