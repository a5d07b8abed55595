/* test_nccl_mock.c: allreduce/nccl/nccl.c run against a CPU mock of the CUDA
 * runtime and NCCL (tests/gpu/mock), ranks as threads, on any machine and
 * under ASan. It checks the backend's own logic, which is most of it: the
 * bucket bookkeeping, what is reduced where (in place, out of place for
 * sum_only, through the fp16 / bf16 wire buffer), the 1/(world*scale)
 * averaging, the skip rule and the scaler on every rank, SGD with momentum,
 * the statistics and spans, polling through "not ready" and ncclInProgress
 * without leaving a CUDA error behind, and every error path: out-of-order
 * buckets, a rank that never joins (timeout), a peer failing mid-step
 * (ncclRemoteError, abort, later calls refused), a step that never
 * completes (timeout naming the bucket), the one-GPU-per-rank check, and
 * bad configurations. What it cannot check: real streams running
 * concurrently, real NCCL, real GPUs (tests/gpu/test_nccl.c does).
 *
 * The mock sums in float in rank order and rounds once to the wire type;
 * the expected parameters are computed here from the contract (sum, round
 * to the wire, widen, times 1/(world*scale), with loss scaling skip on
 * inf/NaN, else SGD on the CPU table) and must match bit for bit on every
 * rank. */
#include <pthread.h>

#include "allreduce/allreduce.h"
#include "kernels/elem.h"
#include "kernels/kernels.h"
#include "mock.h"
#include "tests/gpu/gpu_check.h"

#define N 10007
#define MAXW 4
#define STEPS 3

typedef struct scenario {
  const char *name;
  int world;
  gs_dtype wire;
  bool overlap, sum_only, dynamic;
  float scale;       /* initial loss scale */
  int overflow_step; /* step where rank world-1 sends 70000 (inf in fp16), -1: none */
  int delay;         /* mock "not ready" answers per event */
} scenario;

static const gs_bucket buckets[] = {{6000, N - 6000}, {1000, 5000}, {0, 1000}};
#define NB 3

static float grad_of(int rank, int step, size_t i) {
  return 0.25f * (float)((int)((i * 7 + (size_t)rank * 3 + (size_t)step) % 17) - 8) /
         (float)(rank + 1);
}
static float param0(size_t i) { return 0.01f * (float)((int)(i % 23) - 11); }
/* what the last rank sends at the overflow step: inf once on the wire */
static float overflow_value(gs_dtype wire) { return wire == GS_F32 ? INFINITY : 70000.0f; }

typedef struct span_log {
  pthread_mutex_t mu;
  int allreduce, to_wire, widen, update, skip, bad;
} span_log;

static void on_span(void *ctx, const char *name, int bucket, double t0, double t1, int track) {
  span_log *l = ctx;
  pthread_mutex_lock(&l->mu);
  if (t1 < t0 || track != 1) l->bad++;
  if (!strcmp(name, "allreduce") && bucket >= 0) l->allreduce++;
  else if (!strcmp(name, "to_wire")) l->to_wire++;
  else if (!strcmp(name, "widen")) l->widen++;
  else if (!strcmp(name, "update")) l->update++;
  else if (!strcmp(name, "skip")) l->skip++;
  else l->bad++;
  pthread_mutex_unlock(&l->mu);
}

typedef struct rank_run {
  const scenario *sc;
  int rank;
  const unsigned char *blob;
  size_t blob_len;
  span_log *spans;
  int rc;
  gs_err e;
  float params[N];
  gs_sync_stats st[STEPS];
  cudaError_t stale;  /* CUDA's last error after the steps (must be none) */
} rank_run;

static void config(gs_sync_config *c, const scenario *sc, int rank, gs_kernels *k, float *p,
                   float *g) {
  memset(c, 0, sizeof *c);
  c->rank = rank;
  c->world = sc->world;
  c->local_rank = rank;
  c->local_world = sc->world;
  c->device = rank;
  c->timeout_ms = 5000;
  c->k = k;
  c->params = p;
  c->grads = g;
  c->n = N;
  c->buckets = buckets;
  c->nbuckets = NB;
  c->sgd = (gs_sgd){0.1f, 0.9f, 1e-3f};
  c->wire = sc->wire;
  gs_scaler_init(&c->scaler, sc->scale, sc->dynamic);
  c->scaler.interval = 2;  /* see growth within the test's steps */
  c->overlap = sc->overlap;
  c->sum_only = sc->sum_only;
}

static void *rank_main(void *arg) {
  rank_run *r = arg;
  const scenario *sc = r->sc;
  gs_kernels *k = mock_gpu_table(r->rank);
  float *p = k->alloc(k, N * 4), *g = k->alloc(k, N * 4);
  for (size_t i = 0; i < N; i++) p[i] = param0(i);
  gs_sync_config c;
  config(&c, sc, r->rank, k, p, g);
  c.span = on_span;
  c.span_ctx = r->spans;
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  gs_sync *s = NULL;
  r->rc = gs_nccl_backend.prepare(&c, &state, endpoint, &r->e);
  if (r->rc) goto out;
  c.bootstrap = r->blob;
  c.bootstrap_len = r->blob_len;
  r->rc = gs_nccl_backend.open(state, &c, &s, &r->e);
  if (r->rc) goto out;
  for (int step = 0; step < STEPS; step++) {
    for (size_t i = 0; i < N; i++) g[i] = grad_of(r->rank, step, i);
    if (step == sc->overflow_step && r->rank == sc->world - 1) g[N / 2] = overflow_value(sc->wire);
    if ((r->rc = s->ops->begin_step(s, step, &r->e))) break;
    for (int b = 0; b < NB && !r->rc; b++) r->rc = s->ops->bucket_ready(s, b, &r->e);
    if (r->rc || (r->rc = s->ops->end_step(s, &r->st[step], &r->e))) break;
  }
  r->stale = cudaGetLastError();
  memcpy(r->params, p, sizeof r->params);
  int crc = s->ops->close(s, r->rc == GS_OK, r->rc ? NULL : &r->e);
  if (!r->rc) r->rc = crc;
out:
  k->release(k, p);
  k->release(k, g);
  k->destroy(k);
  return NULL;
}

/* What every rank must end with, from the contract. */
static void expected(const scenario *sc, float *p, bool skipped[STEPS], float scale[STEPS]) {
  gs_err e = {0};
  gs_kernels *cpu = gs_kernels_cpu(1, &e);
  float *avg = xmalloc(N * 4), *buf = xmalloc(N * 4);
  gs_scaler sca;
  gs_scaler_init(&sca, sc->scale, sc->dynamic);
  sca.interval = 2;
  for (size_t i = 0; i < N; i++) p[i] = param0(i);
  bool first = true;
  for (int step = 0; step < STEPS; step++) {
    float f = 1.0f / ((float)sc->world * sca.scale);
    for (size_t i = 0; i < N; i++) {
      float acc = 0;
      for (int r = 0; r < sc->world; r++) {
        float v = grad_of(r, step, i);
        if (step == sc->overflow_step && r == sc->world - 1 && i == N / 2)
          v = overflow_value(sc->wire);
        if (sc->wire == GS_F16) v = gs_f16_to_f32(gs_f32_to_f16(v));
        if (sc->wire == GS_BF16) v = gs_bf16_to_f32(gs_f32_to_bf16(v));
        acc += v;
      }
      if (sc->wire == GS_F16) acc = gs_f16_to_f32(gs_f32_to_f16(acc));
      if (sc->wire == GS_BF16) acc = gs_bf16_to_f32(gs_f32_to_bf16(acc));
      avg[i] = acc;
    }
    if (sc->sum_only) {
      memcpy(p, avg, N * 4);
      skipped[step] = false;
      scale[step] = sca.scale;
      continue;
    }
    if (f != 1.0f) cpu->scale(cpu, N, f, avg);
    bool scaling = sc->wire != GS_F32 || sc->dynamic || sc->scale != 1.0f;
    skipped[step] = scaling && gs_scaler_update(&sca, cpu->nonfinite(cpu, GS_F32, N, avg) > 0);
    if (!skipped[step]) {
      gs_sgd h = {0.1f, 0.9f, 1e-3f};
      cpu->sgd(cpu, N, p, avg, buf, h, first);
      first = false;
    }
    scale[step] = sca.scale;
  }
  free(avg);
  free(buf);
  cpu->destroy(cpu);
}

static void run_scenario(const scenario *sc) {
  mock_reset();
  mock_event_delay = sc->delay;
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  mock_nccl_blob(blob, &blen);
  span_log spans = {.mu = PTHREAD_MUTEX_INITIALIZER};
  static rank_run runs[MAXW];
  pthread_t th[MAXW];
  for (int r = 0; r < sc->world; r++) {
    memset(&runs[r], 0, sizeof runs[r]);
    runs[r].sc = sc;
    runs[r].rank = r;
    runs[r].blob = blob;
    runs[r].blob_len = blen;
    runs[r].spans = &spans;
    pthread_create(&th[r], NULL, rank_main, &runs[r]);
  }
  for (int r = 0; r < sc->world; r++) pthread_join(th[r], NULL);

  float *want = xmalloc(N * 4);
  bool skipped[STEPS];
  float scale[STEPS];
  expected(sc, want, skipped, scale);
  size_t es = gs_dtype_size(sc->wire);
  uint64_t bytes = 0;
  for (int b = 0; b < NB && sc->world > 1; b++)
    bytes += (uint64_t)(2.0 * (sc->world - 1) / sc->world * (double)(buckets[b].count * es));
  int nskip = 0;
  for (int r = 0; r < sc->world; r++) {
    rank_run *x = &runs[r];
    CHECK(x->rc == GS_OK, "%s: rank %d: %s (%s)", sc->name, r, gs_strerror(x->rc), x->e.msg);
    if (x->rc) continue;
    CHECK(same_bits(sc->name, x->params, want, N, 4), "%s: rank %d parameters", sc->name, r);
    CHECK(!memcmp(x->params, runs[0].params, sizeof x->params), "%s: rank %d differs from 0",
          sc->name, r);
    CHECK(x->stale == cudaSuccess, "%s: rank %d left CUDA error %d behind", sc->name, r,
          x->stale);
    for (int s = 0; s < STEPS; s++) {
      gs_sync_stats *st = &x->st[s];
      CHECK(st->skipped == skipped[s], "%s: rank %d step %d skipped %d, expected %d", sc->name,
            r, s, (int)st->skipped, (int)skipped[s]);
      CHECK(st->scale == scale[s], "%s: rank %d step %d scale %g, expected %g", sc->name, r, s,
            st->scale, scale[s]);
      CHECK(st->bytes_sent == bytes && st->bytes_recv == bytes, "%s: bytes %llu, expected %llu",
            sc->name, (unsigned long long)st->bytes_sent, (unsigned long long)bytes);
      CHECK(st->wait_s >= 0 && st->reduce_s >= 0 && st->update_s >= 0 && !st->has_server,
            "%s: stats", sc->name);
      nskip += st->skipped;
    }
  }
  int W = sc->world, steps = W * STEPS;
  CHECK(spans.bad == 0 && spans.allreduce == steps * NB, "%s: spans: %d allreduce, %d bad",
        sc->name, spans.allreduce, spans.bad);
  CHECK(spans.to_wire == (sc->wire != GS_F32 ? steps * NB : 0), "%s: %d to_wire spans",
        sc->name, spans.to_wire);
  CHECK(spans.widen == (sc->wire != GS_F32 ? steps * NB : 0), "%s: %d widen spans", sc->name,
        spans.widen);
  CHECK(sc->sum_only ? spans.update + spans.skip == 0
                     : spans.update == steps - nskip && spans.skip == nskip,
        "%s: %d update / %d skip spans", sc->name, spans.update, spans.skip);
  CHECK(mock_allreduces == steps * NB && mock_finalizes == W && mock_aborts == 0,
        "%s: %d all-reduces, %d finalizes, %d aborts", sc->name, mock_allreduces,
        mock_finalizes, mock_aborts);
  printf("%-24s world %d: %s\n", sc->name, W, check_failures ? "FAILED so far" : "ok");
  free(want);
}

/* ---- error paths ---- */

typedef struct err_run {
  int world, rank, mode;  /* mode 0: out-of-order bucket, 1: remote error, 2: hang */
  const unsigned char *blob;
  size_t blob_len;
  int rc, rc_open, rc_after;
  gs_err e, e_after;
  double dt;
} err_run;

static void *err_main(void *arg) {
  err_run *r = arg;
  scenario sc = {"errors", r->world, GS_F32, false, false, false, 1.0f, -1, 0};
  gs_kernels *k = mock_gpu_table(r->rank);
  float *p = k->alloc(k, N * 4), *g = k->alloc(k, N * 4);
  gs_sync_config c;
  config(&c, &sc, r->rank, k, p, g);
  c.timeout_ms = 300;
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  gs_sync *s = NULL;
  double t0 = gs_now();
  r->rc_open = gs_nccl_backend.prepare(&c, &state, endpoint, &r->e);
  if (!r->rc_open) {
    c.bootstrap = r->blob;
    c.bootstrap_len = r->blob_len;
    r->rc_open = gs_nccl_backend.open(state, &c, &s, &r->e);
  }
  r->dt = gs_now() - t0;
  if (r->rc_open) goto out;
  gs_sync_stats st;
  r->rc = s->ops->begin_step(s, 5, &r->e);
  if (r->mode == 0) {
    r->rc = s->ops->bucket_ready(s, 1, &r->e);
  } else {
    for (int b = 0; b < NB && !r->rc; b++) r->rc = s->ops->bucket_ready(s, b, &r->e);
    t0 = gs_now();
    if (!r->rc) r->rc = s->ops->end_step(s, &st, &r->e);
    r->dt = gs_now() - t0;
    r->rc_after = s->ops->begin_step(s, 6, &r->e_after);
  }
  if (r->mode == 2) mock_events_hang = 0;  /* the stream drains after the abort: free all */
  s->ops->close(s, false, NULL);
out:
  k->release(k, p);
  k->release(k, g);
  k->destroy(k);
  return NULL;
}

static void run_errors(int world, int started, int mode, err_run *runs) {
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  mock_nccl_blob(blob, &blen);
  pthread_t th[MAXW];
  for (int r = 0; r < started; r++) {
    memset(&runs[r], 0, sizeof runs[r]);
    runs[r].world = world;
    runs[r].rank = r;
    runs[r].mode = mode;
    runs[r].blob = blob;
    runs[r].blob_len = blen;
    pthread_create(&th[r], NULL, err_main, &runs[r]);
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
}

static void test_errors(void) {
  err_run runs[MAXW];

  mock_reset();
  run_errors(1, 1, 0, runs);
  CHECK(runs[0].rc == GS_EINVAL && strstr(runs[0].e.msg, "out of order") &&
            strstr(runs[0].e.msg, "step 5"),
        "out-of-order bucket: %s", runs[0].e.msg);
  printf("out-of-order bucket: %s\n", runs[0].e.msg);

  mock_reset();
  run_errors(2, 1, 1, runs);  /* rank 1 never starts */
  CHECK(runs[0].rc_open == GS_ETIMEOUT && strstr(runs[0].e.msg, "did not join") &&
            strstr(runs[0].e.msg, "rank 0/2") && runs[0].dt >= 0.29 && runs[0].dt < 5,
        "missing rank: %s (%.2f s)", runs[0].e.msg, runs[0].dt);
  CHECK(mock_aborts == 1, "missing rank: %d aborts", mock_aborts);
  printf("missing rank: after %.2f s: %s\n", runs[0].dt, runs[0].e.msg);

  mock_reset();
  mock_remote_error_after = 1;
  mock_event_delay = 1000000;
  run_errors(2, 2, 1, runs);
  for (int r = 0; r < 2; r++) {
    CHECK(runs[r].rc == GS_EPEER && strstr(runs[r].e.msg, "step 5") &&
              strstr(runs[r].e.msg, "bucket 0/3") && strstr(runs[r].e.msg, "peer"),
          "remote error, rank %d: %s", r, runs[r].e.msg);
    CHECK(runs[r].rc_after == GS_EPEER && strstr(runs[r].e_after.msg, "aborted"),
          "after the abort, rank %d: %s", r, runs[r].e_after.msg);
  }
  CHECK(mock_aborts == 2, "remote error: %d aborts", mock_aborts);
  printf("peer failure: %s\n", runs[0].e.msg);

  mock_reset();
  mock_events_hang = 1;
  run_errors(1, 1, 2, runs);
  CHECK(runs[0].rc == GS_ETIMEOUT && strstr(runs[0].e.msg, "did not finish within 300 ms") &&
            strstr(runs[0].e.msg, "bucket 0/3") && runs[0].dt >= 0.29 && runs[0].dt < 5,
        "stalled step: %s (%.2f s)", runs[0].e.msg, runs[0].dt);
  printf("stalled step: after %.2f s: %s\n", runs[0].dt, runs[0].e.msg);
}

static void test_config_errors(void) {
  gs_kernels *k = mock_gpu_table(0), *cpu;
  gs_err e = {0};
  cpu = gs_kernels_cpu(1, &e);
  float *p = k->alloc(k, N * 4);
  scenario sc = {"config", 2, GS_F32, false, false, false, 1.0f, -1, 0};
  gs_sync_config c;
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  gs_sync *s = NULL;
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  mock_nccl_blob(blob, &blen);

  mock_reset();
  mock_device_count = 2;
  config(&c, &sc, 0, k, p, p);
  c.local_world = 3;
  int rc = gs_nccl_backend.prepare(&c, &state, endpoint, &e);
  CHECK(rc == GS_EDEVICE && strstr(e.msg, "3 local ranks but 2 GPUs visible"), "%s", e.msg);

  mock_reset();
  mock_device_count_error = cudaErrorInsufficientDriver;
  gs_err_clear(&e);
  rc = gs_nccl_backend.prepare(&c, &state, endpoint, &e);
  CHECK(rc == GS_EDEVICE && strstr(e.msg, "cudaErrorInsufficientDriver") &&
            strstr(e.msg, "nvidia-smi"),
        "%s", e.msg);
  mock_reset();

  struct { const char *what; int code; const char *needle; } cases[] = {
      {"cpu table", GS_EINVAL, "--device cuda"},
      {"blob", GS_EPROTO, "unique id"},
      {"bucket", GS_EINVAL, "outside"},
      {"device", GS_EINVAL, "GPU 0"},
  };
  for (int i = 0; i < 4; i++) {
    config(&c, &sc, 0, k, p, p);
    c.bootstrap = blob;
    c.bootstrap_len = blen;
    gs_bucket bad[1] = {{N - 5, 10}};
    if (i == 0) c.k = cpu;
    if (i == 1) c.bootstrap_len = 3;
    if (i == 2) { c.buckets = bad; c.nbuckets = 1; }
    if (i == 3) c.device = 1;
    gs_err_clear(&e);
    CHECK(gs_nccl_backend.prepare(&c, &state, endpoint, &e) == GS_OK, "prepare: %s", e.msg);
    rc = gs_nccl_backend.open(state, &c, &s, &e);
    CHECK(rc == cases[i].code && s == NULL && strstr(e.msg, cases[i].needle),
          "bad config (%s): %s", cases[i].what, e.msg);
  }
  k->release(k, p);
  k->destroy(k);
  cpu->destroy(cpu);
}

int main(void) {
  const scenario scs[] = {
      {"sgd fp32", 3, GS_F32, false, false, false, 1.0f, -1, 0},
      {"sgd fp32 overlap, polls", 3, GS_F32, true, false, false, 1.0f, -1, 3},
      {"sgd world 1", 1, GS_F32, true, false, false, 1.0f, -1, 0},
      {"sum_only fp32", 4, GS_F32, false, true, false, 1.0f, -1, 0},
      {"sum_only fp16", 2, GS_F16, true, true, false, 1.0f, -1, 1},
      {"fp16 wire, scaler", 3, GS_F16, true, false, true, 1024.0f, -1, 0},
      {"bf16 wire", 2, GS_BF16, false, false, false, 1.0f, -1, 0},
      {"fp16 overflow skips", 3, GS_F16, true, false, true, 65536.0f, 1, 2},
      {"fp32 overflow skips (loss scale 8)", 2, GS_F32, false, false, false, 8.0f, 0, 0},
      {"fp32 overflow, no scaler: steps", 2, GS_F32, false, false, false, 1.0f, 0, 0},
  };
  for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++) run_scenario(&scs[i]);
  test_errors();
  test_config_errors();
  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  printf("nccl backend logic: all scenarios pass against the mock\n");
  return 0;
}
