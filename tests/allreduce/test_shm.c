/* test_shm.c: the shared-memory all-reduce (allreduce.h gs_algo shm), rank
 * per process on this host.
 *
 *   test_shm sums W1 W2   worlds W1..W2, auto and shm (both must run shm):
 *                         lengths from 1 to several rounds (the default
 *                         round; 4 KiB rounds, set with the one-barrier
 *                         threshold by rank 0 while the others ask for
 *                         other values, which must change nothing), in
 *                         place and out of place: fp32 random values with
 *                         the bits of the rank-order sum, fp64 sums, int32
 *                         max, on every rank; src untouched; no rank holds
 *                         a descriptor of the segment after the connect
 *   test_shm stall        a rank stalls past the others' 1 s timeout: they
 *                         stop at it, naming the late rank; it wakes to
 *                         their reason
 *   test_shm fallback     one rank with GS_SHM=0: auto runs over sockets
 *                         (right sums); shm is a clear error on every rank;
 *                         a 16-bit wire never runs shm
 *   test_shm header       what a rank accepts of the object's header: rank
 *                         0's, and none whose size computation wraps, whose
 *                         slots are not whole lines, or of another job or
 *                         world
 * (test_small abort and killed stop a rank in the middle of shm.) */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "shm/shm.h"
#include "allreduce_harness.h"

static gs_kernels *K;
#define MAXN 300001u

/* this process's descriptors of a segment (memfd "gradsync-shm") */
static int open_segments(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    char p[300], to[256];
    snprintf(p, sizeof p, "/proc/self/fd/%s", de->d_name);
    ssize_t len = readlink(p, to, sizeof to - 1);
    if (len > 0) {
      to[len] = '\0';
      n += strstr(to, "memfd:gradsync-shm") != NULL;
    }
  }
  if (d) closedir(d);
  return n;
}

static int check_algo(gs_comm *r, size_t n, int rank, const char *what) {
  if (gs_comm_algo(r, n) == GS_ALGO_SHM) return 0;
  fprintf(stderr, "rank %d: %s on one host runs %s, not shm\n", rank, what,
          gs_algo_name(gs_comm_algo(r, n)));
  return 1;
}

static int body_sums(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  const size_t lens[] = {1, 2, (size_t)world + 1, 1000, 16385, MAXN};
  const size_t nlens = sizeof lens / sizeof *lens;
  int bad = 0, slot = 0;
  float *src = gs_alloc(MAXN * sizeof(double), &e), *dst = gs_alloc(MAXN * sizeof(double), &e);
  if (!src || !dst) return th_report(sh, rank, &e);
  /* auto, shm, shm with 4 KiB rounds; then fp64 sums and int32 max */
  for (int c = 0; c < 5; c++) {
    gs_comm_opts o;
    th_ring_opts(&o, rank, world, MAXN, K);
    o.algo = c == 0 ? GS_ALGO_AUTO : GS_ALGO_SHM;
    o.wire = c == 3 ? GS_F64 : c == 4 ? GS_I32 : GS_F32;
    /* rank 0's sizes rule: another rank's own must change nothing */
    if (c == 2) setenv("GS_SHM_CHUNK", rank == 0 ? "4K" : "64K", 1);
    if (c == 2) setenv("GS_SHM_WHOLE", rank == 0 ? "64K" : "0", 1);
    gs_comm *r;
    int rc = th_ring_open(sh, c, &o, &r, &e);
    unsetenv("GS_SHM_CHUNK");
    unsetenv("GS_SHM_WHOLE");
    if (rc < 0) return th_report(sh, rank, &e);
    if (open_segments()) { /* the mappings alone keep it: it goes with the job */
      fprintf(stderr, "rank %d: a descriptor of the shared memory is open after the connect\n",
              rank);
      bad++;
    }
    for (size_t li = 0; li < nlens; li++) {
      size_t n = lens[li];
      bad += check_algo(r, n, rank, gs_algo_name(o.algo));
      for (int inplace = 0; inplace < 2; inplace++, slot++) {
        uint64_t seed = (uint64_t)slot + 1;
        for (size_t i = 0; i < n; i++) {
          if (o.wire == GS_F64) ((double *)src)[i] = (double)th_randf(seed, rank, i) / 3.0;
          else if (o.wire == GS_I32)
            ((int32_t *)src)[i] = (int32_t)(th_mix(seed + i) % 1000) - rank;
          else src[i] = th_randf(seed, rank, i);
        }
        size_t es = o.wire == GS_F32 ? 4 : o.wire == GS_F64 ? 8 : 4;
        void *out = inplace ? (void *)src : (void *)dst;
        if (!inplace) memset(dst, 0xff, n * es);
        gs_redop op = o.wire == GS_I32 ? GS_REDOP_MAX : GS_REDOP_SUM;
        if (gs_comm_allreduce_op(r, op, src, out, n, slot, 0, NULL, &e) < 0)
          return th_report(sh, rank, &e);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
          bool ok;
          if (o.wire == GS_F64) {
            double want = (double)th_randf(seed, 0, i) / 3.0;
            for (int q = 1; q < world; q++) want += (double)th_randf(seed, q, i) / 3.0;
            ok = ((double *)out)[i] == want;
          } else if (o.wire == GS_I32) {
            ok = ((int32_t *)out)[i] == (int32_t)(th_mix(seed + i) % 1000);
          } else {
            float want = th_randf(seed, 0, i);
            for (int q = 1; q < world; q++) want += th_randf(seed, q, i);
            ok = ((float *)out)[i] == want;
          }
          if (!ok && wrong++ == 0) first = i;
        }
        if (!inplace)
          for (size_t i = 0; i < n && o.wire == GS_F32; i++)
            if (src[i] != th_randf(seed, rank, i)) {
              fprintf(stderr, "rank %d: out of place changed src[%zu]\n", rank, i);
              bad++;
              break;
            }
        if (wrong) {
          fprintf(stderr, "rank %d: case %d (%s wire) length %zu %s: %zu elements differ from "
                  "the rank-order result, first [%zu]\n", rank, c, gs_dtype_name(o.wire), n,
                  inplace ? "in place" : "out of place", wrong, first);
          bad++;
        }
        sh->u64[rank][slot] = th_hash(out, n * es);
      }
    }
    gs_comm_close(r, true, NULL);
  }
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)slot;
  gs_free(src);
  gs_free(dst);
  return bad;
}

/* rank 1 stalls past the others' timeout in the middle of a run */
static int body_stall(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  gs_comm *r;
  gs_comm_opts o;
  th_ring_opts(&o, rank, world, 64, K);
  o.algo = GS_ALGO_SHM;
  o.timeout_ms = 1000;
  if (th_ring_open(sh, 0, &o, &r, &e) < 0) return th_report(sh, rank, &e);
  float buf[64] = {0};
  int rc = GS_OK;
  double t0 = 0;
  for (int64_t s = 0; s < 20 && rc == GS_OK; s++) {
    if (rank == 1 && s == 5) usleep(2500 * 1000);
    t0 = gs_now();
    rc = gs_comm_allreduce(r, buf, buf, 64, s, 0, NULL, &e);
  }
  sh->u64[rank][0] = (uint64_t)-rc;
  sh->f64[rank][0] = gs_now() - t0;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == GS_OK, NULL);
  return 0;
}

/* rank 1 refuses shared memory; auto goes on without it, shm stops */
static int body_fallback(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  if (rank == 1) setenv("GS_SHM", "0", 1);
  float buf[1000];
  int bad = 0;
  for (int c = 0; c < 3; c++) {
    gs_comm *r = NULL;
    gs_comm_opts o;
    th_ring_opts(&o, rank, world, 1000, K);
    o.algo = c == 1 ? GS_ALGO_SHM : GS_ALGO_AUTO;
    if (c == 2) { /* every rank willing, but a 16-bit wire */
      unsetenv("GS_SHM");
      o.wire = GS_F16;
    }
    memset(&e, 0, sizeof e);
    int rc = th_ring_open(sh, c, &o, &r, &e);
    if (c == 1) {
      sh->u64[rank][0] = (uint64_t)-rc;
      snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
      gs_comm_close(r, rc == GS_OK, NULL);
      continue;
    }
    if (rc < 0) return th_report(sh, rank, &e);
    if (gs_comm_algo(r, 1000) == GS_ALGO_SHM) {
      fprintf(stderr, "rank %d: case %d runs shm\n", rank, c);
      bad++;
    }
    for (int i = 0; i < 1000; i++) buf[i] = th_contribution(rank, (size_t)i, c);
    if (gs_comm_allreduce(r, buf, buf, 1000, 0, 0, NULL, &e) < 0) return th_report(sh, rank, &e);
    for (int i = 0; i < 1000; i++) {
      float want = 0;
      for (int q = 0; q < world; q++) want += th_contribution(q, (size_t)i, c);
      if (buf[i] != want) {
        fprintf(stderr, "rank %d: case %d: [%d] = %g, not %g\n", rank, c, i, buf[i], want);
        bad++;
        break;
      }
    }
    gs_comm_close(r, true, NULL);
  }
  return bad;
}

/* The header as a rank reads it: only rank 0's, for an object of the
 * right size. A chunk that makes head + 2 N chunk wrap around to the
 * object's real size is the case an unchecked sum let through. */
static void header(void) {
  const int N = 4;
  const uint64_t nonce = 0x1234;
  size_t hb = gs_shm_header_bytes(N), chunk = 0, whole = 0;
  size_t bytes = hb + 2 * (size_t)N * 4096;
  void *seg = calloc(1, bytes);
  gs_shm_header_write(seg, N, nonce, 4096, 777);
  CHECK(gs_shm_header_check(seg, bytes, N, nonce, &chunk, &whole) && chunk == 4096 &&
        whole == 777, "rank 0's own header refused");
  CHECK(!gs_shm_header_check(seg, bytes - 64, N, nonce, &chunk, &whole), "a short object");
  CHECK(!gs_shm_header_check(seg, bytes, N, nonce + 1, &chunk, &whole), "another job's");
  CHECK(!gs_shm_header_check(seg, bytes, N - 1, nonce, &chunk, &whole), "another world's");
  /* 2 N chunk = 2^64 + 2 N 4096: the sum wraps to bytes */
  uint64_t wrap = ((uint64_t)1 << 61) + 4096;
  gs_shm_header_write(seg, N, nonce, wrap, 777);
  CHECK(!gs_shm_header_check(seg, bytes, N, nonce, &chunk, &whole),
        "a chunk of %llu bytes whose size wraps was accepted", (unsigned long long)wrap);
  gs_shm_header_write(seg, N, nonce, 4096 + 8, 777);
  CHECK(!gs_shm_header_check(seg, hb + 2 * (size_t)N * (4096 + 8), N, nonce, &chunk, &whole),
        "a chunk that is no whole number of lines");
  gs_shm_header_write(seg, N, nonce, 0, 777);
  CHECK(!gs_shm_header_check(seg, hb, N, nonce, &chunk, &whole), "an empty chunk");
  free(seg);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "header")) {
    header();
    return check_done("header");
  }
  K = th_start();
  if (!K) return 1;
  const char *what = argc > 1 ? argv[1] : "sums";
  if (!strcmp(what, "sums")) {
    int lo = argc > 2 ? atoi(argv[2]) : 2, hi = argc > 3 ? atoi(argv[3]) : lo;
    CHECK(th_worlds_agree(lo, hi, body_sums, 120) == 0, "worlds %d..%d", lo, hi);
  } else if (!strcmp(what, "stall")) {
    int w = 3;
    th_shared *sh = th_run(w, body_stall, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "stall: a rank crashed");
    for (int r = 0; sh && r < w; r++) {
      printf("rank %d: %s\n", r, sh->msg[r]);
      if (r == 1) { /* it wakes to find the others gone, and says why */
        CHECK(sh->u64[r][0] == (uint64_t)-GS_EPEER && strstr(sh->msg[r], "did not arrive") &&
              strstr(sh->msg[r], "step 5"),
              "rank 1, back from its stall: %s", sh->msg[r]);
        continue;
      }
      CHECK(sh->u64[r][0] == (uint64_t)-GS_ETIMEOUT || sh->u64[r][0] == (uint64_t)-GS_EPEER,
            "rank %d: code %d", r, -(int)sh->u64[r][0]);
      CHECK(strstr(sh->msg[r], "rank(s) 1 did not arrive within 1000 ms"),
            "rank %d does not name the late rank: %s", r, sh->msg[r]);
      CHECK(sh->f64[r][0] < 2.0, "rank %d waited %.1f s on a 1 s timeout", r, sh->f64[r][0]);
    }
    th_free(sh);
  } else if (!strcmp(what, "fallback")) {
    int w = 3;
    th_shared *sh = th_run(w, body_fallback, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "fallback: a rank failed");
    for (int r = 0; sh && r < w; r++) {
      printf("rank %d: %s\n", r, sh->msg[r]);
      CHECK(sh->u64[r][0] != 0, "rank %d: --algo shm connected with a rank refusing it", r);
      CHECK(strstr(sh->msg[r], "shm") && strstr(sh->msg[r], "--algo auto"),
            "rank %d: unclear message: %s", r, sh->msg[r]);
    }
    th_free(sh);
  }
  K->destroy(K);
  return check_done(what);
}
