/* test_nccl_perf_mock.c: `bench --collective C --device cuda` without a
 * GPU: the benchmark's harness (gs_allreduce_perf, bench/coll/perf.c) on a
 * device table, over NCCL sessions (allreduce/nccl/nccl.c) and NCCL's own calls
 * (gs_nccl_collective, allreduce/nccl/nccl_coll.c), wired as bench/coll/collective.c
 * wires them: a session per size (setup), training's all-reduce through a
 * step where the sum is asked, NCCL's call otherwise, the timings exchanged
 * through the session's all-reduce, -o avg as ncclAvg (fn_avg: nothing
 * divides after it). Against the CPU mock (tests/gpu/mock), ranks as
 * threads. Each table must come back with every size and no wrong value
 * in either placement, at worlds 2 to 4, for every collective and the
 * types and ops the GPU path gained (int32 through the session's own
 * all-reduce included), avg at world 3 where NCCL's premultiplication
 * rounds; and the check must bite: told the collective does not average
 * when it does (avg divided twice), the harness counts wrong values. */
#include <pthread.h>

#include "allreduce/allreduce.h"
#include "bench/coll/coll.h"
#include "kernels/kernels.h"
#include "mock.h"
#include "tests/gpu/gpu_check.h"

#define MAXW 4

typedef struct scenario {
  int world;
  gs_coll c;
  gs_dtype wire;
  gs_redop op;
  int root;
  bool lie_avg;  /* say NCCL's avg is a sum: the harness divides again */
} scenario;

typedef struct shared {
  const scenario *sc;
  pthread_barrier_t bar;
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen;
} shared;

typedef struct ctx {
  shared *sh;
  int rank;
  gs_kernels *k;
  gs_sync *s;
  gs_bucket bucket;  /* the session keeps a pointer to it */
  int rc, nrows, sizes;
  gs_err e;
  gs_perf_row rows[32];
} ctx;

static int close_session(ctx *c, bool ok, gs_err *e) {
  int rc = c->s ? c->s->ops->close(c->s, ok, e) : GS_OK;
  c->s = NULL;
  return rc;
}

/* As bench's setup: close the previous session, then every rank opens one
 * whose one bucket is the buffer (sum_only: grads = src, params = dst). */
static int setup(void *vc, const void *src, void *dst, size_t count, gs_err *e) {
  ctx *c = vc;
  shared *sh = c->sh;
  GS_TRY(close_session(c, true, e));
  pthread_barrier_wait(&sh->bar);
  if (c->rank == 0) {
    gs_sync_config z;
    memset(&z, 0, sizeof z);
    GS_TRY(gs_nccl_backend.bootstrap(NULL, &z, sh->blob, &sh->blen, e));
  }
  pthread_barrier_wait(&sh->bar);
  gs_sync_config cf;
  memset(&cf, 0, sizeof cf);
  c->bucket = (gs_bucket){0, count};
  cf.rank = c->rank;
  cf.world = sh->sc->world;
  cf.local_rank = c->rank;
  cf.local_world = sh->sc->world;
  cf.device = c->rank;
  cf.timeout_ms = 5000;
  cf.k = c->k;
  cf.params = dst;
  cf.grads = (void *)src;
  cf.n = count;
  cf.buckets = &c->bucket;
  cf.nbuckets = 1;
  cf.wire = sh->sc->wire;
  cf.sum_only = true;
  gs_scaler_init(&cf.scaler, 1.0f, false);
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  GS_TRY(gs_nccl_backend.prepare(&cf, &state, endpoint, e));
  cf.bootstrap = sh->blob;
  cf.bootstrap_len = sh->blen;
  return gs_nccl_backend.open(state, &cf, &c->s, e);
}

static int step(void *vc, const void *src, void *dst, size_t count, int64_t iter, gs_err *e) {
  ctx *c = vc;
  gs_sync_stats st;
  GS_TRY(c->s->ops->begin_step(c->s, iter, e));
  GS_TRY(c->s->ops->bucket_ready(c->s, 0, e));
  return c->s->ops->end_step(c->s, &st, e);
}

static int nccl_call(void *vc, const void *src, void *dst, size_t count, int64_t iter,
                     gs_err *e) {
  ctx *c = vc;
  const scenario *sc = c->sh->sc;
  return gs_nccl_collective(c->s, sc->c, sc->op, sc->root, src, dst, count, iter, e);
}

static void *rank_main(void *arg) {
  ctx *c = arg;
  const scenario *sc = c->sh->sc;
  c->k = mock_gpu_table(c->rank);
  bool avg = sc->op == GS_REDOP_AVG && gs_coll_has_op(sc->c);
  bool sum = sc->c == GS_COLL_ALL_REDUCE && (sc->op == GS_REDOP_SUM || sc->op == GS_REDOP_AVG);
  gs_coll_fn fn = sum && !avg ? step : nccl_call;
  gs_perf_opts p = {.rank = c->rank, .world = sc->world, .min_bytes = 64, .max_bytes = 6144,
                    .factor = 4, .iters = 2, .warmup = 1, .check = true, .op = sc->op,
                    .wire = sc->wire, .k = c->k, .fn_avg = avg && !sc->lie_avg,
                    .setup = setup, .coll = sc->c, .root = sc->root,
                    .sum = fn == step ? NULL : step};
  c->sizes = gs_perf_sizes(&p);
  c->nrows = 32;
  c->rc = gs_allreduce_perf(fn, c, &p, c->rows, &c->nrows, &c->e);
  gs_err ce = {0};
  int crc = close_session(c, c->rc == GS_OK, &ce);
  if (c->rc == GS_OK && crc) {
    c->rc = crc;
    c->e = ce;
  }
  c->k->destroy(c->k);
  return NULL;
}

/* Runs sc on every rank; returns the wrong values rank 0's table counts
 * (both placements, every size), or -1 when a rank failed. */
static long long run(const scenario *sc) {
  mock_reset();
  shared sh = {.sc = sc};
  pthread_barrier_init(&sh.bar, NULL, (unsigned)sc->world);
  ctx cs[MAXW];
  pthread_t th[MAXW];
  for (int r = 0; r < sc->world; r++) {
    cs[r] = (ctx){.sh = &sh, .rank = r};
    pthread_create(&th[r], NULL, rank_main, &cs[r]);
  }
  for (int r = 0; r < sc->world; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&sh.bar);
  long long wrong = 0;
  for (int r = 0; r < sc->world; r++) {
    CHECK(cs[r].rc == GS_OK, "%s -d %s -o %s world %d rank %d: %s", gs_coll_name(sc->c),
          gs_perf_type_name(sc->wire), gs_redop_name(sc->op), sc->world, r, cs[r].e.msg);
    if (cs[r].rc) return -1;
  }
  const ctx *c = &cs[0];
  CHECK(c->nrows == c->sizes && c->nrows > 1, "%d rows of %d sizes", c->nrows, c->sizes);
  for (int i = 0; i < c->nrows; i++) {
    const gs_perf_row *row = &c->rows[i];
    bool parted = sc->c == GS_COLL_REDUCE_SCATTER || sc->c == GS_COLL_ALL_GATHER;
    size_t n = row->bytes / gs_dtype_size(sc->wire);
    CHECK(row->count == (parted ? n / (size_t)sc->world : n) && row->oop.time_us > 0 &&
              row->oop.busbw > 0 && row->ip.busbw > 0,
          "%s row %d: count %zu of %zu bytes, time %g, busbw %g / %g", gs_coll_name(sc->c), i,
          row->count, row->bytes, row->oop.time_us, row->oop.busbw, row->ip.busbw);
    CHECK(row->oop.wrong != UINT64_MAX && row->ip.wrong != UINT64_MAX, "unchecked row %d", i);
    wrong += (long long)(row->oop.wrong + row->ip.wrong);
  }
  CHECK(mock_aborts == 0, "%d aborts", mock_aborts);
  return wrong;
}

int main(void) {
  const scenario scs[] = {
      {3, GS_COLL_ALL_REDUCE, GS_F32, GS_REDOP_AVG, 0, false},
      {3, GS_COLL_ALL_REDUCE, GS_F16, GS_REDOP_AVG, 0, false},
      {4, GS_COLL_ALL_REDUCE, GS_F64, GS_REDOP_AVG, 0, false},
      {2, GS_COLL_ALL_REDUCE, GS_I32, GS_REDOP_SUM, 0, false},
      {3, GS_COLL_ALL_REDUCE, GS_F64, GS_REDOP_MIN, 0, false},
      {3, GS_COLL_REDUCE_SCATTER, GS_I32, GS_REDOP_AVG, 0, false},
      {4, GS_COLL_REDUCE_SCATTER, GS_BF16, GS_REDOP_MAX, 0, false},
      {2, GS_COLL_ALL_GATHER, GS_F16, GS_REDOP_SUM, 0, false},
      {3, GS_COLL_ALL_GATHER, GS_I32, GS_REDOP_SUM, 0, false},
      {3, GS_COLL_BROADCAST, GS_BF16, GS_REDOP_SUM, 2, false},
      {4, GS_COLL_BROADCAST, GS_F64, GS_REDOP_SUM, 1, false},
      {3, GS_COLL_REDUCE, GS_F64, GS_REDOP_MAX, 1, false},
      {4, GS_COLL_REDUCE, GS_F32, GS_REDOP_PROD, 3, false},
      {3, GS_COLL_REDUCE, GS_F32, GS_REDOP_AVG, 2, false},
  };
  for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++) {
    const scenario *sc = &scs[i];
    long long wrong = run(sc);
    CHECK(wrong == 0, "%s -d %s -o %s -r %d world %d: %lld wrong values", gs_coll_name(sc->c),
          gs_perf_type_name(sc->wire), gs_redop_name(sc->op), sc->root, sc->world, wrong);
    printf("%-14s -d %-8s -o %-4s -r %d world %d: %lld wrong\n", gs_coll_name(sc->c),
           gs_perf_type_name(sc->wire), gs_redop_name(sc->op), sc->root, sc->world, wrong);
  }
  /* the check bites: ncclAvg's result divided by N again */
  const scenario lie = {2, GS_COLL_ALL_REDUCE, GS_F32, GS_REDOP_AVG, 0, true};
  long long wrong = run(&lie);
  CHECK(wrong > 0, "avg divided twice: %lld wrong values, expected some", wrong);
  printf("avg divided twice (the harness told NCCL does not average): %lld wrong\n", wrong);

  /* on a device the harness divides fp32 buffers only: double avg needs fn_avg */
  gs_err e = {0};
  gs_kernels *k = mock_gpu_table(0);
  gs_perf_opts p = {.world = 1, .min_bytes = 8, .max_bytes = 64, .factor = 2, .iters = 1,
                    .op = GS_REDOP_AVG, .wire = GS_F64, .k = k};
  gs_perf_row rows[8];
  int nrows = 8;
  int rc = gs_allreduce_perf(step, NULL, &p, rows, &nrows, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "fn averaging itself") && nrows == 0, "%d %s", rc,
        e.msg);
  k->destroy(k);

  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  printf("the collective benchmark's NCCL path: every table checked, against the mock\n");
  return 0;
}
