/* test_nccl_coll_mock.c: gs_nccl_collective (allreduce/nccl/nccl_coll.c) on an
 * NCCL session, against the CPU mock of CUDA and NCCL (tests/gpu/mock),
 * ranks as threads, any machine, ASan included. Every collective x
 * -d float, half, bfloat16, double, int32 x -o sum, avg, prod, min, max
 * (the reducing ones) x every root (broadcast, reduce) x out of place / in
 * place, at worlds 2, 3 and 4, each result checked element by element
 * against a value this file computes from the contract alone, exact by
 * choice of inputs, as nccl-tests picks them:
 *   - small integers, whose sums, minima and maxima are exact in every type
 *     and order; prod takes +-1 and +-2 (powers of two);
 *   - avg: floating inputs are N x small integers, so that NCCL's way (each
 *     contribution times 1/N in the type, then the sum) gives the integer
 *     exactly; int32 inputs are not multiples of N, so the truncating
 *     division toward zero shows;
 *   - int32 sum and prod include elements that overflow: the result wraps
 *     modulo 2^32, as NCCL's does.
 * What a rank must not write is checked too: the other parts of
 * reduce_scatter's output, and reduce's on the other ranks (poisoned out of
 * place, still the input in place). Then the errors: bad arguments refused
 * before anything runs (the communicator still usable after), ranks calling
 * different collectives, a peer failing, a stalled call (timeout), each
 * message naming the rank, the step, the NCCL call and its root. */
#include <pthread.h>

#include "allreduce/allreduce.h"
#include "bench/coll/coll.h"
#include "kernels/kernels.h"
#include "mock.h"
#include "tests/gpu/gpu_check.h"

#define COUNT 1200   /* a multiple of 2, 3 and 4 */
#define MAXW 4
#define POISON (-777.0)

static const gs_dtype types[] = {GS_F32, GS_F16, GS_BF16, GS_F64, GS_I32};
#define NTYPES 5

/* The buffers' type: fp32 under the 16-bit wires. */
static gs_dtype buf_type(gs_dtype wire) { return gs_dtype_lp(wire) ? GS_F32 : wire; }

/* rank r's element i for op (as an integer; exact in every type) */
static int64_t input(gs_dtype t, gs_redop op, int world, int r, size_t i) {
  int v = (int)((i + 7u * (size_t)r) % 11u) - 5;
  static const int prod[11] = {1, -1, 2, 1, -2, 1, -1, 1, 2, -1, 1};
  if (t == GS_I32 && i % 5 == 0) {
    /* near the int32 limits: sum and prod wrap */
    if (op == GS_REDOP_PROD) return 65536 + 3 * r + 1;
    if (op != GS_REDOP_AVG) return (int64_t)INT32_MAX - 2 * r;
  }
  if (op == GS_REDOP_PROD) return prod[v + 5];
  if (op == GS_REDOP_AVG && t != GS_I32) return (int64_t)world * v;
  return v;
}

/* int32 arithmetic modulo 2^32 */
static int64_t wrap32(uint64_t x) { return (int32_t)(uint32_t)x; }

/* The op over ranks of element i, from the contract. */
static int64_t reduced(gs_dtype t, gs_redop op, int world, size_t i) {
  int64_t acc = input(t, op, world, 0, i);
  uint64_t u = (uint64_t)acc;
  for (int r = 1; r < world; r++) {
    int64_t x = input(t, op, world, r, i);
    if (op == GS_REDOP_MIN) acc = x < acc ? x : acc;
    else if (op == GS_REDOP_MAX) acc = x > acc ? x : acc;
    else if (op == GS_REDOP_PROD) u *= (uint64_t)x, acc = (int64_t)u;
    else u += (uint64_t)x, acc = (int64_t)u;
  }
  if (t == GS_I32) acc = wrap32((uint64_t)acc);
  if (op == GS_REDOP_AVG) {
    /* integers: truncated toward zero; floating inputs are world x an integer */
    int64_t mag = (acc < 0 ? -acc : acc) / world;
    acc = acc < 0 ? -mag : mag;
  }
  return acc;
}

static double get_v(gs_dtype t, const void *p, size_t i) {
  if (t == GS_F64) return ((const double *)p)[i];
  if (t == GS_I32) return ((const int32_t *)p)[i];
  return ((const float *)p)[i];
}
static void set_v(gs_dtype t, void *p, size_t i, double v) {
  if (t == GS_F64) ((double *)p)[i] = v;
  else if (t == GS_I32) ((int32_t *)p)[i] = (int32_t)v;
  else ((float *)p)[i] = (float)v;
}

/* One call every rank makes, in the same order. */
typedef struct job {
  gs_coll c;
  gs_redop op;
  int root;
  bool in_place;
} job;

static int jobs_of(int world, job *out) {
  int n = 0;
  for (int c = GS_COLL_ALL_REDUCE; c <= GS_COLL_REDUCE; c++)
    for (int op = GS_REDOP_SUM; op <= GS_REDOP_MAX; op++) {
      if (!gs_coll_has_op((gs_coll)c) && op != GS_REDOP_SUM) continue;
      for (int root = 0; root < (gs_coll_has_root((gs_coll)c) ? world : 1); root++)
        for (int ip = 0; ip < 2; ip++) out[n++] = (job){(gs_coll)c, (gs_redop)op, root, ip};
    }
  return n;
}
#define MAXJOBS 128

/* What rank q's dst must hold after j at element i (src: its input). */
static double expect(gs_dtype t, const job *j, int world, int q, size_t i) {
  size_t part = COUNT / (size_t)world;
  double mine = j->in_place ? (double)input(t, j->op, world, q, i) : POISON;
  switch (j->c) {
  case GS_COLL_REDUCE_SCATTER:
    return i / part == (size_t)q ? (double)reduced(t, j->op, world, i) : mine;
  case GS_COLL_ALL_GATHER: return (double)input(t, GS_REDOP_SUM, world, (int)(i / part), i);
  case GS_COLL_BROADCAST: return (double)input(t, GS_REDOP_SUM, world, j->root, i);
  case GS_COLL_REDUCE: return q == j->root ? (double)reduced(t, j->op, world, i) : mine;
  default: return (double)reduced(t, j->op, world, i);
  }
}

typedef struct rank_run {
  int world, rank;
  gs_dtype wire;
  const unsigned char *blob;
  size_t blob_len;
  int rc;
  gs_err e;
  int wrong_jobs;          /* jobs with a wrong element */
  char first_wrong[300];   /* the first of them */
} rank_run;

/* The session one rank opens: sum_only, one bucket that is the buffer. */
static int open_session(gs_kernels *k, int rank, int world, gs_dtype wire, void *p, void *g,
                        const gs_bucket *bucket, const unsigned char *blob, size_t blen,
                        int timeout_ms, gs_sync **s, gs_err *e) {
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.world = world;
  c.local_rank = rank;
  c.local_world = world;
  c.device = rank;
  c.timeout_ms = timeout_ms;
  c.k = k;
  c.params = p;
  c.grads = g;
  c.n = bucket->count;
  c.buckets = bucket;  /* the session keeps the pointer: the caller's, for its life */
  c.nbuckets = 1;
  c.wire = wire;
  c.sum_only = true;
  gs_scaler_init(&c.scaler, 1.0f, false);
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  GS_TRY(gs_nccl_backend.prepare(&c, &state, endpoint, e));
  c.bootstrap = blob;
  c.bootstrap_len = blen;
  return gs_nccl_backend.open(state, &c, s, e);
}

static void *rank_main(void *arg) {
  rank_run *r = arg;
  gs_kernels *k = mock_gpu_table(r->rank);
  gs_dtype bt = buf_type(r->wire);
  size_t es = gs_dtype_size(bt);
  void *src = k->alloc(k, COUNT * es), *dst = k->alloc(k, COUNT * es);
  gs_sync *s = NULL;
  static const gs_bucket whole = {0, COUNT};
  r->rc = open_session(k, r->rank, r->world, r->wire, dst, src, &whole, r->blob, r->blob_len,
                       5000, &s, &r->e);
  job jobs[MAXJOBS];
  int nj = jobs_of(r->world, jobs);
  for (int n = 0; n < nj && r->rc == GS_OK; n++) {
    const job *j = &jobs[n];
    for (size_t i = 0; i < COUNT; i++) {
      set_v(bt, src, i, (double)input(r->wire, j->op, r->world, r->rank, i));
      set_v(bt, dst, i, POISON);
    }
    void *out = j->in_place ? src : dst;
    r->rc = gs_nccl_collective(s, j->c, j->op, j->root, src, out, COUNT, n, &r->e);
    if (r->rc) break;
    for (size_t i = 0; i < COUNT; i++) {
      double want = expect(r->wire, j, r->world, r->rank, i), got = get_v(bt, out, i);
      if (got != want) {
        if (r->wrong_jobs++ == 0)
          snprintf(r->first_wrong, sizeof r->first_wrong, "%s -o %s root %d %s: element %zu "
                   "is %.17g, expected %.17g", gs_coll_name(j->c), gs_redop_name(j->op),
                   j->root, j->in_place ? "in place" : "out of place", i, got, want);
        break;
      }
    }
  }
  if (s) {
    int crc = s->ops->close(s, r->rc == GS_OK, r->rc ? NULL : &r->e);
    if (!r->rc) r->rc = crc;
  }
  k->release(k, src);
  k->release(k, dst);
  k->destroy(k);
  return NULL;
}

static void run_world_type(int world, gs_dtype wire) {
  mock_reset();
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  mock_nccl_blob(blob, &blen);
  rank_run runs[MAXW];
  pthread_t th[MAXW];
  for (int r = 0; r < world; r++) {
    runs[r] = (rank_run){.world = world, .rank = r, .wire = wire, .blob = blob,
                         .blob_len = blen};
    pthread_create(&th[r], NULL, rank_main, &runs[r]);
  }
  for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
  const char *tn = gs_perf_type_name(wire);
  for (int r = 0; r < world; r++) {
    CHECK(runs[r].rc == GS_OK, "world %d -d %s rank %d: %s (%s)", world, tn, r,
          gs_strerror(runs[r].rc), runs[r].e.msg);
    CHECK(runs[r].wrong_jobs == 0, "world %d -d %s rank %d: %d wrong result(s), first: %s",
          world, tn, r, runs[r].wrong_jobs, runs[r].first_wrong);
  }
  /* every rank made every call, and nothing was aborted */
  job jobs[MAXJOBS];
  int nj = jobs_of(world, jobs), calls[5] = {0};
  for (int n = 0; n < nj; n++) calls[jobs[n].c] += world;
  for (int c = 0; c < 5; c++)
    CHECK(mock_colls[c] == calls[c], "world %d -d %s: %d %s calls, expected %d", world, tn,
          mock_colls[c], gs_coll_name((gs_coll)c), calls[c]);
  CHECK(mock_aborts == 0 && mock_finalizes == world, "world %d -d %s: %d aborts, %d finalizes",
        world, tn, mock_aborts, mock_finalizes);
  printf("world %d -d %-8s %d calls per rank: %s\n", world, tn, nj,
         check_failures ? "FAILED so far" : "ok");
}

/* ---- errors ---- */

typedef struct err_run {
  int world, rank, mode;
  const unsigned char *blob;
  size_t blob_len;
  int rc, rc_after;
  gs_err e, e_after;
  double dt;
} err_run;

enum { E_MISMATCH, E_REMOTE, E_HANG, E_PARTS };

static void *err_main(void *arg) {
  err_run *r = arg;
  gs_kernels *k = mock_gpu_table(r->rank);
  float *a = k->alloc(k, COUNT * 4), *b = k->alloc(k, COUNT * 4);
  memset(a, 0, COUNT * 4);
  gs_sync *s = NULL;
  static const gs_bucket whole = {0, COUNT};
  r->rc = open_session(k, r->rank, r->world, GS_F32, b, a, &whole, r->blob, r->blob_len, 300, &s,
                       &r->e);
  if (r->rc) goto out;
  double t0 = gs_now();
  if (r->mode == E_MISMATCH) /* every rank names itself the root */
    r->rc = gs_nccl_collective(s, GS_COLL_BROADCAST, GS_REDOP_SUM, r->rank, a, b, COUNT, 3,
                               &r->e);
  else if (r->mode == E_PARTS) /* 7 elements do not split in two */
    r->rc = gs_nccl_collective(s, GS_COLL_REDUCE_SCATTER, GS_REDOP_SUM, 0, a, b, 7, 3, &r->e);
  else
    r->rc = gs_nccl_collective(s, GS_COLL_REDUCE, GS_REDOP_MAX, r->world - 1, a, b, COUNT, 4,
                               &r->e);
  r->dt = gs_now() - t0;
  r->rc_after = gs_nccl_collective(s, GS_COLL_ALL_REDUCE, GS_REDOP_SUM, 0, a, b, COUNT, 5,
                                   &r->e_after);
  if (r->mode == E_HANG) mock_events_hang = 0;  /* the stream drains after the abort */
  s->ops->close(s, r->rc_after == GS_OK, NULL);
out:
  k->release(k, a);
  k->release(k, b);
  k->destroy(k);
  return NULL;
}

static void run_errors(int world, int mode, err_run *runs) {
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  mock_nccl_blob(blob, &blen);
  pthread_t th[MAXW];
  for (int r = 0; r < world; r++) {
    runs[r] = (err_run){.world = world, .rank = r, .mode = mode, .blob = blob,
                        .blob_len = blen};
    pthread_create(&th[r], NULL, err_main, &runs[r]);
  }
  for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
}

/* Wrong arguments on one rank (world 1: nobody waits for it), refused
 * before anything is queued; the communicator works after them. */
static void test_bad_args(void) {
  mock_reset();
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  mock_nccl_blob(blob, &blen);
  gs_kernels *k = mock_gpu_table(0);
  float *a = k->alloc(k, COUNT * 4), *b = k->alloc(k, COUNT * 4);
  for (size_t i = 0; i < COUNT; i++) a[i] = (float)i;
  gs_sync *s = NULL;
  gs_err e = {0};
  /* world 1 with a 7-element fp16 wire buffer */
  static const gs_bucket seven = {0, 7};
  int rc = open_session(k, 0, 1, GS_F16, b, a, &seven, blob, blen, 5000, &s, &e);
  CHECK(rc == GS_OK, "open: %s", e.msg);
  if (rc) return;
  struct { gs_coll c; gs_redop op; int root; size_t n; const char *needle; } cases[] = {
      {GS_COLL_BROADCAST, GS_REDOP_SUM, 1, 4, "ncclBroadcast: root 1 is not a rank of the world"},
      {GS_COLL_REDUCE, GS_REDOP_SUM, -1, 4, "ncclReduce: root -1"},
      {GS_COLL_ALL_REDUCE, (gs_redop)9, 0, 4, "ncclAllReduce: unknown reduction 9"},
      {(gs_coll)7, GS_REDOP_SUM, 0, 4, "unknown collective 7"},
      {GS_COLL_ALL_REDUCE, GS_REDOP_SUM, 0, 8, "8 elements, but the session's fp16 wire"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gs_err_clear(&e);
    rc = gs_nccl_collective(s, cases[i].c, cases[i].op, cases[i].root, a, b, cases[i].n, 11, &e);
    CHECK(rc == GS_EINVAL && strstr(e.msg, cases[i].needle) && strstr(e.msg, "rank 0/1") &&
              strstr(e.msg, "step 11"),
          "bad argument %zu: %d %s", i, rc, e.msg);
    printf("refused: %s\n", e.msg);
  }
  gs_err_clear(&e);
  rc = gs_nccl_collective(s, GS_COLL_REDUCE, GS_REDOP_MAX, 0, a, b, 7, 12, &e);
  CHECK(rc == GS_OK && b[6] == 6.0f && mock_aborts == 0,
        "after the refusals: %d %s, b[6] = %g, %d aborts", rc, e.msg, b[6], mock_aborts);
  s->ops->close(s, true, NULL);

  /* a session of another backend */
  gs_sync other = {.name = "ring"};
  gs_err_clear(&e);
  rc = gs_nccl_collective(&other, GS_COLL_ALL_REDUCE, GS_REDOP_SUM, 0, a, b, 4, 0, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "ring's, not NCCL's"), "other session: %s", e.msg);
  k->release(k, a);
  k->release(k, b);
  k->destroy(k);
}

static void test_errors(void) {
  err_run runs[MAXW];

  mock_reset();
  run_errors(2, E_MISMATCH, runs);
  for (int r = 0; r < 2; r++) {
    CHECK(runs[r].rc == GS_EDEVICE && strstr(runs[r].e.msg, "ncclBroadcast (root ") &&
              strstr(runs[r].e.msg, "step 3") && strstr(runs[r].e.msg, "/2"),
          "mismatched calls, rank %d: %s", r, runs[r].e.msg);
    CHECK(runs[r].rc_after == GS_EPEER && strstr(runs[r].e_after.msg, "aborted"),
          "after the abort, rank %d: %s", r, runs[r].e_after.msg);
  }
  CHECK(mock_aborts == 2, "mismatched calls: %d aborts", mock_aborts);
  printf("mismatched calls: %s\n", runs[1].e.msg);

  mock_reset();
  run_errors(2, E_PARTS, runs);
  for (int r = 0; r < 2; r++) {
    CHECK(runs[r].rc == GS_EINVAL && strstr(runs[r].e.msg, "ncclReduceScatter: 7 elements do "
                                            "not split into 2 equal parts"),
          "unequal parts, rank %d: %s", r, runs[r].e.msg);
    CHECK(runs[r].rc_after == GS_OK, "after the refusal, rank %d: %s", r, runs[r].e_after.msg);
  }
  CHECK(mock_aborts == 0, "unequal parts: %d aborts", mock_aborts);
  printf("refused: %s\n", runs[0].e.msg);

  mock_reset();
  mock_remote_error_after = 1;
  mock_event_delay = 1000000;
  run_errors(3, E_REMOTE, runs);
  for (int r = 0; r < 3; r++)
    CHECK(runs[r].rc == GS_EPEER && strstr(runs[r].e.msg, "ncclReduce (root 2, 1200 elements "
                                           "of fp32)") && strstr(runs[r].e.msg, "peer") &&
              strstr(runs[r].e.msg, "step 4"),
          "remote error, rank %d: %s", r, runs[r].e.msg);
  CHECK(mock_aborts == 3, "remote error: %d aborts", mock_aborts);
  printf("peer failure: %s\n", runs[0].e.msg);

  mock_reset();
  mock_events_hang = 1;
  run_errors(1, E_HANG, runs);
  CHECK(runs[0].rc == GS_ETIMEOUT && strstr(runs[0].e.msg, "ncclReduce (root 0, 1200 elements "
                                            "of fp32) did not finish within 300 ms") &&
            runs[0].dt >= 0.29 && runs[0].dt < 5 && !strstr(runs[0].e.msg, "buckets"),
        "stalled call: %s (%.2f s)", runs[0].e.msg, runs[0].dt);
  printf("stalled call: after %.2f s: %s\n", runs[0].dt, runs[0].e.msg);
}

int main(void) {
  for (int w = 2; w <= MAXW; w++)
    for (int t = 0; t < NTYPES; t++) run_world_type(w, types[t]);
  test_bad_args();
  test_errors();
  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  printf("NCCL collectives: every collective, type, op and root exact against the mock\n");
  return 0;
}
