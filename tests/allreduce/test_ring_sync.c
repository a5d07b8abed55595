/* test_ring_sync.c: the "ring" backend through worker/sync.h, shaped like
 * training: N ranks with their own random gradients per step, a bucket
 * plan (one bucket small enough for the small path), overlap with a
 * stand-in for backward between buckets, SGD with momentum and weight decay.
 *
 *   test_ring_sync equiv W     parameters equal a reference (sum in rank
 *                              order, / world, the same SGD kernel) within
 *                              1e-6 relative, bitwise identical on every
 *                              rank, overlap on and off bitwise the same,
 *                              and the small last bucket run by the
 *                              training thread (the default) or handed to
 *                              the progress thread (GS_RING_INLINE=0)
 *                              too; 2(N-1)/N x S bytes per step within 5%
 *   test_ring_sync lowp        fp16 wire with dynamic loss scaling: close
 *                              to the fp32 reference, half the bytes; a
 *                              forced overflow skips the step on every rank
 *                              and halves the scale; bf16 too
 *   test_ring_sync sumonly     sum_only leaves the sum in params
 *   test_ring_sync mismatch    a rank with another bucket plan: open fails
 *                              on every rank with GS_EMISMATCH
 *   test_ring_sync misuse      calls out of order are clear errors */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "allreduce_harness.h"

#define NPARAM 50021
#define STEPS 4

static const gs_bucket PLAN[] = {{50000, 21}, {25100, 24900}, {100, 25000}, {0, 100}};
#define NBUCKETS 4

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static float randf(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = mix(seed ^ mix(a * 1000003u + mix(b)));
  return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* rank r's gradient of element i at step t (before loss scaling) */
static float grad(int r, int t, size_t i, float amp) {
  return amp * randf(77, (uint64_t)r * 131 + (uint64_t)t, i);
}

typedef struct spans {
  atomic_int rs, ag, opt, wait, bad_track;
} spans;

static void on_span(void *ctx, const char *name, int bucket, double t0, double t1, int track) {
  spans *s = ctx;
  atomic_int *n = NULL;
  int want = 0;
  if (!strcmp(name, "reduce-scatter")) n = &s->rs, want = 1;
  else if (!strcmp(name, "all-gather")) n = &s->ag, want = 1;
  else if (!strcmp(name, "optimizer")) n = &s->opt;
  else if (!strcmp(name, "wait")) n = &s->wait;
  if (!n || track != want || t1 < t0) atomic_fetch_add(&s->bad_track, 1);
  else atomic_fetch_add(n, 1);
}

typedef struct run_opts {
  bool overlap, sum_only;
  gs_dtype wire;
  float scale;        /* initial loss scale */
  bool dynamic;
  int overflow_step;  /* -1: none; else rank 1 sends an inf at that step */
  float amp;          /* gradient amplitude */
  const gs_bucket *plan;
  int timeout_ms;
} run_opts;

typedef struct run_out {
  float *params;
  gs_sync_stats st[STEPS];
  uint64_t hash_after[STEPS];
  spans sp;
} run_out;

static void init_params(float *p) {
  for (size_t i = 0; i < NPARAM; i++) p[i] = randf(5, 0, i);
}

/* One training run of STEPS steps through the backend. */
static int train(th_shared *sh, int round, int rank, int world, gs_kernels *k, const run_opts *ro,
                 run_out *out, gs_err *e) {
  float *params = k->alloc(k, NPARAM * sizeof(float));
  float *grads = k->alloc(k, NPARAM * sizeof(float));
  init_params(params);
  memset(&out->sp, 0, sizeof out->sp);
  gs_sync_config c = {
    .rank = rank, .world = world, .timeout_ms = ro->timeout_ms ? ro->timeout_ms : 20000,
    .job = 0xabc, .host = "127.0.0.1", .k = k, .params = params, .grads = grads, .n = NPARAM,
    .buckets = ro->plan ? ro->plan : PLAN, .nbuckets = NBUCKETS,
    .sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f}, .wire = ro->wire,
    .overlap = ro->overlap, .sum_only = ro->sum_only, .span = on_span, .span_ctx = &out->sp,
  };
  gs_scaler_init(&c.scaler, ro->scale, ro->dynamic);
  void *state;
  char ep[GS_ENDPOINT_MAX];
  int rc = gs_allreduce_backend.prepare(&c, &state, ep, e);
  const char *eps[TH_MAX_WORLD];
  if (rc == 0 && th_exchange(sh, round, rank, ep, eps) < 0) {
    gs_allreduce_backend.discard(state);
    rc = GS_FAIL(e, GS_ETIMEOUT, "endpoint exchange");
  }
  c.endpoints = eps;
  gs_sync *s;
  if (rc == 0) rc = gs_allreduce_backend.open(state, &c, &s, e);
  if (rc < 0) {
    k->release(k, params);
    k->release(k, grads);
    return rc;
  }
  float scale = ro->scale;
  for (int t = 0; t < STEPS && rc == 0; t++) {
    rc = s->ops->begin_step(s, t, e);
    /* backward from the last layer: bucket b's gradients, then some work */
    for (int b = 0; b < NBUCKETS && rc == 0; b++) {
      const gs_bucket *bk = &c.buckets[b];
      for (size_t i = bk->offset; i < bk->offset + bk->count; i++)
        grads[i] = grad(rank, t, i, ro->amp) * scale;
      if (t == ro->overflow_step && rank == 1 && b == 1) grads[bk->offset + 7] = 1e30f;
      usleep(2000); /* the next layer's backward */
      rc = s->ops->bucket_ready(s, b, e);
    }
    if (rc == 0) rc = s->ops->end_step(s, &out->st[t], e);
    scale = out->st[t].scale;
    out->hash_after[t] = th_hash(params, NPARAM * sizeof(float));
  }
  gs_err ce = {0};
  s->ops->close(s, rc == 0, &ce);
  out->params = params;
  k->release(k, grads);
  return rc;
}

/* The single-process reference: sum in rank order, / world, same SGD. A
 * step listed in skip leaves everything as it is. */
static void reference(gs_kernels *k, int world, float amp, int skip_step, float *p) {
  float *sum = k->alloc(k, NPARAM * sizeof(float)), *mom = k->alloc(k, NPARAM * sizeof(float));
  init_params(p);
  gs_sgd h = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
  bool first = true;
  for (int t = 0; t < STEPS; t++) {
    if (t == skip_step) continue;
    for (size_t i = 0; i < NPARAM; i++) {
      float s = 0;
      for (int r = 0; r < world; r++) s += grad(r, t, i, amp);
      sum[i] = s;
    }
    k->scale(k, NPARAM, 1.0f / (float)world, sum);
    k->sgd(k, NPARAM, p, sum, mom, h, first);
    first = false;
  }
  k->release(k, sum);
  k->release(k, mom);
}

static double max_rel_diff(const float *a, const float *ref, double floor_) {
  double worst = 0;
  for (size_t i = 0; i < NPARAM; i++) {
    double d = fabs((double)a[i] - ref[i]) / (fabs(ref[i]) + floor_);
    if (d > worst || d != d) worst = d != d ? INFINITY : d;
  }
  return worst;
}

static int report(th_shared *sh, int rank, const gs_err *e) {
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e->msg);
  fprintf(stderr, "rank %d: %s (%s:%d)\n", rank, e->msg, e->file ? e->file : "?", e->line);
  return 1;
}

static int check_spans(int rank, int world, const spans *sp, bool sum_only) {
  int bad = 0;
  int want = world > 1 ? STEPS * NBUCKETS : 0; /* one rank: nothing to all-reduce */
  if (atomic_load(&sp->rs) + atomic_load(&sp->ag) < want || atomic_load(&sp->wait) != STEPS ||
      (!sum_only && atomic_load(&sp->opt) != STEPS) || atomic_load(&sp->bad_track)) {
    fprintf(stderr, "rank %d: spans: %d reduce-scatter, %d all-gather, %d optimizer, %d wait, "
            "%d on a wrong track\n", rank, atomic_load(&sp->rs), atomic_load(&sp->ag),
            atomic_load(&sp->opt), atomic_load(&sp->wait), atomic_load(&sp->bad_track));
    bad++;
  }
  return bad;
}

/* ------------------------------------------------------------------ */

static int body_equiv(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  run_out on = {0}, off = {0};
  run_opts ro = {.overlap = true, .wire = GS_F32, .scale = 1, .overflow_step = -1, .amp = 1};
  if (train(sh, 0, rank, world, k, &ro, &on, &e) < 0) return report(sh, rank, &e);
  ro.overlap = false;
  if (train(sh, 1, rank, world, k, &ro, &off, &e) < 0) return report(sh, rank, &e);
  /* PLAN's last bucket (100 elements) is small: by default the training
   * thread runs it; here the progress thread does, as it does every other */
  run_out handed = {0};
  ro.overlap = true;
  setenv("GS_RING_INLINE", "0", 1);
  int hrc = train(sh, 2, rank, world, k, &ro, &handed, &e);
  unsetenv("GS_RING_INLINE");
  if (hrc < 0) return report(sh, rank, &e);
  int bad = 0;
  if (memcmp(on.params, handed.params, NPARAM * sizeof(float))) {
    fprintf(stderr, "rank %d: the last bucket on the training thread and on the progress thread "
            "give different bits\n", rank);
    bad++;
  }
  bad += check_spans(rank, world, &handed.sp, false);
  k->release(k, handed.params);
  float *ref = k->alloc(k, NPARAM * sizeof(float));
  reference(k, world, 1, -1, ref);
  double d = max_rel_diff(on.params, ref, 1.0);
  if (d > 1e-6) {
    fprintf(stderr, "rank %d: parameters differ from the reference by %.3g (relative)\n", rank, d);
    bad++;
  }
  if (memcmp(on.params, off.params, NPARAM * sizeof(float))) {
    fprintf(stderr, "rank %d: overlap on and off give different bits\n", rank);
    bad++;
  }
  if (world == 1 && memcmp(on.params, ref, NPARAM * sizeof(float))) {
    fprintf(stderr, "rank 0: world 1 differs from the reference\n");
    bad++;
  }
  double S = NPARAM * 4.0, want = 2.0 * (world - 1) / world * S;
  for (int t = 0; t < STEPS; t++) {
    const gs_sync_stats *st = &on.st[t];
    sh->u64[rank][t] = on.hash_after[t];
    double ratio = world > 1 ? st->bytes_sent / want : 1;
    if (ratio < 0.999 || ratio > 1.05 || (world == 1 && st->bytes_sent)) {
      fprintf(stderr, "rank %d step %d: %llu bytes sent, 2(N-1)/N x S = %.0f (ratio %.3f)\n",
              rank, t, (unsigned long long)st->bytes_sent, want, ratio);
      bad++;
    }
    if (st->wait_s < 0 || st->reduce_s < 0 || st->update_s <= 0 || st->skipped ||
        st->scale != 1.0f) {
      fprintf(stderr, "rank %d step %d: odd stats wait %g reduce %g update %g skipped %d scale "
              "%g\n", rank, t, st->wait_s, st->reduce_s, st->update_s, st->skipped, st->scale);
      bad++;
    }
    /* without overlap every collective is exposed; with it, backward hides some */
    sh->f64[rank][t] = on.st[t].wait_s;
    sh->f64[rank][STEPS + t] = off.st[t].wait_s;
  }
  bad += check_spans(rank, world, &on.sp, false);
  k->release(k, ref);
  k->release(k, on.params);
  k->release(k, off.params);
  k->destroy(k);
  return bad;
}

/* ------------------------------------------------------------------ */

static int body_lowp(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  const float amp = 1e-3f;
  run_out f32 = {0}, f16 = {0}, bf = {0}, ovf = {0};
  run_opts ro = {.overlap = true, .wire = GS_F32, .scale = 1, .overflow_step = -1, .amp = amp};
  if (train(sh, 0, rank, world, k, &ro, &f32, &e) < 0) return report(sh, rank, &e);
  ro.wire = GS_F16;
  ro.scale = 65536;
  ro.dynamic = true;
  if (train(sh, 1, rank, world, k, &ro, &f16, &e) < 0) return report(sh, rank, &e);
  ro.wire = GS_BF16;
  ro.scale = 1;
  ro.dynamic = false;
  if (train(sh, 2, rank, world, k, &ro, &bf, &e) < 0) return report(sh, rank, &e);
  ro.wire = GS_F16;
  ro.scale = 65536;
  ro.dynamic = true;
  ro.overflow_step = 2;
  if (train(sh, 3, rank, world, k, &ro, &ovf, &e) < 0) return report(sh, rank, &e);

  int bad = 0;
  float *ref = k->alloc(k, NPARAM * sizeof(float));
  reference(k, world, amp, -1, ref);
  /* the update is lr * (momentum-summed) gradient ~ 0.05 * 4 * 1e-3: the
   * wire's rounding (2^-11 relative for fp16, 2^-8 for bf16) of that */
  double d16 = 0, dbf = 0, d32 = 0;
  for (size_t i = 0; i < NPARAM; i++) {
    d32 = fmax(d32, fabs((double)f32.params[i] - ref[i]));
    d16 = fmax(d16, fabs((double)f16.params[i] - ref[i]));
    dbf = fmax(dbf, fabs((double)bf.params[i] - ref[i]));
  }
  if (d32 > 1e-6 || d16 > 2e-6 || dbf > 2e-5 || d16 == 0) {
    fprintf(stderr, "rank %d: max |param - fp32 reference|: fp32 wire %.3g, fp16 %.3g (<= 2e-6, "
            "> 0), bf16 %.3g (<= 2e-5)\n", rank, d32, d16, dbf);
    bad++;
  }
  for (int t = 0; t < STEPS; t++) {
    double r16 = (double)f16.st[t].bytes_sent / (double)f32.st[t].bytes_sent;
    double rbf = (double)bf.st[t].bytes_sent / (double)f32.st[t].bytes_sent;
    if (world > 1 && (r16 < 0.475 || r16 > 0.525 || rbf < 0.475 || rbf > 0.525)) {
      fprintf(stderr, "rank %d step %d: bytes fp16/fp32 %.3f, bf16/fp32 %.3f (expected 0.5)\n",
              rank, t, r16, rbf);
      bad++;
    }
    if (f16.st[t].skipped || f16.st[t].scale != 65536.0f) {
      fprintf(stderr, "rank %d step %d: fp16 skipped %d scale %g\n", rank, t,
              f16.st[t].skipped, f16.st[t].scale);
      bad++;
    }
    bool want_skip = t == 2;
    float want_scale = t >= 2 ? 32768.0f : 65536.0f;
    if (ovf.st[t].skipped != want_skip || ovf.st[t].scale != want_scale) {
      fprintf(stderr, "rank %d step %d: overflow run skipped %d (want %d), next scale %g (want "
              "%g)\n", rank, t, ovf.st[t].skipped, want_skip, ovf.st[t].scale, want_scale);
      bad++;
    }
  }
  if (ovf.hash_after[2] != ovf.hash_after[1]) {
    fprintf(stderr, "rank %d: the skipped step changed the parameters\n", rank);
    bad++;
  }
  for (size_t i = 0; i < NPARAM; i++)
    if (!isfinite(ovf.params[i])) {
      fprintf(stderr, "rank %d: parameter %zu is not finite after the overflow\n", rank, i);
      bad++;
      break;
    }
  /* the run that skipped step 2 equals the reference that skips it */
  reference(k, world, amp, 2, ref);
  double dov = 0;
  for (size_t i = 0; i < NPARAM; i++) dov = fmax(dov, fabs((double)ovf.params[i] - ref[i]));
  if (dov > 2e-6) {
    fprintf(stderr, "rank %d: overflow run vs reference skipping step 2: %.3g\n", rank, dov);
    bad++;
  }
  sh->u64[rank][0] = th_hash(f16.params, NPARAM * sizeof(float));
  sh->u64[rank][1] = th_hash(bf.params, NPARAM * sizeof(float));
  sh->u64[rank][2] = th_hash(ovf.params, NPARAM * sizeof(float));
  k->release(k, ref);
  k->release(k, f32.params);
  k->release(k, f16.params);
  k->release(k, bf.params);
  k->release(k, ovf.params);
  k->destroy(k);
  return bad;
}

/* ------------------------------------------------------------------ */

static int body_sumonly(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  run_out out = {0};
  run_opts ro = {.overlap = true, .sum_only = true, .wire = GS_F32, .scale = 1,
                 .overflow_step = -1, .amp = 1};
  if (train(sh, 0, rank, world, k, &ro, &out, &e) < 0) return report(sh, rank, &e);
  int bad = 0;
  size_t wrong = 0;
  for (size_t i = 0; i < NPARAM; i++) {
    double s = 0;
    for (int r = 0; r < world; r++) s += grad(r, STEPS - 1, i, 1);
    wrong += fabs(out.params[i] - s) > 1e-5 * world;
  }
  if (wrong) {
    fprintf(stderr, "rank %d: sum_only: %zu elements are not the sum\n", rank, wrong);
    bad++;
  }
  sh->u64[rank][0] = th_hash(out.params, NPARAM * sizeof(float));
  bad += check_spans(rank, world, &out.sp, true);
  k->release(k, out.params);
  k->destroy(k);
  return bad;
}

static int body_mismatch(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  gs_bucket other[] = {{50000, 21}, {25000, 25000}, {100, 24900}, {0, 100}};
  run_out out = {0};
  run_opts ro = {.overlap = true, .wire = GS_F32, .scale = 1, .overflow_step = -1, .amp = 1,
                 .plan = rank == 2 ? other : NULL, .timeout_ms = 5000};
  int rc = train(sh, 0, rank, world, k, &ro, &out, &e);
  sh->u64[rank][0] = (uint64_t)(-rc);
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  if (out.params) k->release(k, out.params);
  k->destroy(k);
  return 0;
}

static int body_misuse(th_shared *sh, int rank, int world, void *arg) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  float *params = k->alloc(k, NPARAM * sizeof(float)), *grads = k->alloc(k, NPARAM * sizeof(float));
  gs_sync_config c = {.rank = rank, .world = world, .timeout_ms = 5000, .job = 1,
                      .host = "127.0.0.1", .k = k, .params = params, .grads = grads,
                      .n = NPARAM, .buckets = PLAN, .nbuckets = NBUCKETS, .wire = GS_F32,
                      .overlap = true};
  gs_scaler_init(&c.scaler, 1, false);
  int bad = 0;
  /* a bucket outside the buffer, overlapping buckets: refused in prepare */
  gs_bucket outside[] = {{50000, 100}}, overlap[] = {{0, 100}, {50, 100}};
  void *state;
  char ep[GS_ENDPOINT_MAX];
  c.buckets = outside;
  c.nbuckets = 1;
  if (gs_allreduce_backend.prepare(&c, &state, ep, &e) != GS_EINVAL) bad++;
  fprintf(stderr, "rank %d: %s\n", rank, e.msg);
  gs_err_clear(&e);
  c.buckets = overlap;
  c.nbuckets = 2;
  if (gs_allreduce_backend.prepare(&c, &state, ep, &e) != GS_EINVAL) bad++;
  fprintf(stderr, "rank %d: %s\n", rank, e.msg);
  gs_err_clear(&e);
  c.buckets = PLAN;
  c.nbuckets = NBUCKETS;
  if (gs_allreduce_backend.prepare(&c, &state, ep, &e) < 0) return report(sh, rank, &e);
  const char *eps[TH_MAX_WORLD];
  if (th_exchange(sh, 0, rank, ep, eps) < 0) return 1;
  c.endpoints = eps;
  gs_sync *s;
  if (gs_allreduce_backend.open(state, &c, &s, &e) < 0) return report(sh, rank, &e);
  gs_sync_stats st;
  if (s->ops->bucket_ready(s, 0, &e) != GS_EINVAL) bad++; /* before begin_step */
  gs_err_clear(&e);
  if (s->ops->begin_step(s, 0, &e) < 0) return report(sh, rank, &e);
  if (s->ops->bucket_ready(s, 1, &e) != GS_EINVAL || !strstr(e.msg, "bucket 0 was due")) bad++;
  fprintf(stderr, "rank %d: %s\n", rank, e.msg);
  gs_err_clear(&e);
  if (s->ops->end_step(s, &st, &e) != GS_EINVAL) bad++; /* buckets missing */
  gs_err_clear(&e);
  for (int b = 0; b < NBUCKETS; b++)
    if (s->ops->bucket_ready(s, b, &e) < 0) return report(sh, rank, &e);
  if (s->ops->end_step(s, &st, &e) < 0) return report(sh, rank, &e);
  s->ops->close(s, true, &e);
  if (bad) fprintf(stderr, "rank %d: %d misuses were not refused\n", rank, bad);
  k->release(k, params);
  k->release(k, grads);
  k->destroy(k);
  return bad;
}

/* ------------------------------------------------------------------ */

static void same_on_all(th_shared *sh, int world, int slots, const char *what) {
  for (int s = 0; s < slots; s++)
    for (int r = 1; r < world; r++)
      CHECK(sh->u64[r][s] == sh->u64[0][s], "%s: result %d of rank %d differs from rank 0's",
            what, s, r);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  const char *what = argc > 1 ? argv[1] : "equiv";
  if (!strcmp(what, "equiv")) {
    int lo = argc > 2 ? atoi(argv[2]) : 1, hi = argc > 3 ? atoi(argv[3]) : lo;
    for (int w = lo; w <= hi; w++) {
      th_shared *sh = th_run(w, body_equiv, NULL, 120, NULL);
      CHECK(sh && th_failures(sh) == 0, "equiv world %d failed", w);
      if (!sh) continue;
      same_on_all(sh, w, STEPS, "equiv");
      double won = 0, woff = 0;
      for (int r = 0; r < w; r++)
        for (int t = 0; t < STEPS; t++) won += sh->f64[r][t], woff += sh->f64[r][STEPS + t];
      printf("world %d: training thread waited %.1f ms with overlap, %.1f ms without\n", w,
             won * 1e3, woff * 1e3);
      th_free(sh);
    }
  } else if (!strcmp(what, "lowp")) {
    for (int w = 2; w <= 3; w++) {
      th_shared *sh = th_run(w, body_lowp, NULL, 120, NULL);
      CHECK(sh && th_failures(sh) == 0, "lowp world %d failed", w);
      if (sh) same_on_all(sh, w, 3, "lowp");
      th_free(sh);
    }
  } else if (!strcmp(what, "sumonly")) {
    th_shared *sh = th_run(3, body_sumonly, NULL, 120, NULL);
    CHECK(sh && th_failures(sh) == 0, "sumonly failed");
    if (sh) same_on_all(sh, 3, 1, "sumonly");
    th_free(sh);
  } else if (!strcmp(what, "mismatch")) {
    th_shared *sh = th_run(3, body_mismatch, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "mismatch: a rank crashed");
    for (int r = 0; sh && r < 3; r++) {
      printf("rank %d: %s\n", r, sh->msg[r]);
      CHECK(sh->u64[r][0] == (uint64_t)-GS_EMISMATCH && strstr(sh->msg[r], "bucket plan"),
            "rank %d: expected a bucket-plan mismatch, got code %d: %s", r, -(int)sh->u64[r][0],
            sh->msg[r]);
    }
    th_free(sh);
  } else if (!strcmp(what, "misuse")) {
    th_shared *sh = th_run(2, body_misuse, NULL, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "misuse failed");
    th_free(sh);
  } else {
    fprintf(stderr, "usage: test_ring_sync equiv W [W2] | lowp | sumonly | mismatch | misuse\n");
    return 2;
  }
  return check_done("test_ring_sync");
}
