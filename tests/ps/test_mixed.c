/* test_mixed.c: fp16 / bf16 gradient traffic and dynamic loss scaling.
 *
 *  - fp16 and bf16 pushes: bitwise the reference (fp32 accumulation of the
 *    low-precision pushes in rank order, unscale by 1 / (world * scale),
 *    SGD), pushes half the bytes of fp32 (within 5%);
 *  - sum_only in fp16: the exact fp32 sum of the fp16 inputs, and within
 *    fp16 rounding of the fp32 sum;
 *  - forced overflow (one rank's gradient holds +inf in one step): every
 *    rank skips that step, parameters unchanged and finite, the scale
 *    halves, ranks stay bitwise identical; momentum starts at the first
 *    step that is not skipped (torch.optim.SGD), also when step 0 overflows;
 *  - growth after `interval` clean steps, and a static huge scale that
 *    overflows every step (skipped, scale unchanged). */
#include <math.h>
#include <string.h>

#include "ps_harness.h"

static job_result *run_and_compare(const job_opts *o, bool *skipped, float *scales,
                                   const char *what) {
  job_result *r = result_new(o);
  int rc = run_threads(o, r);
  for (int i = 0; i < o->world; i++) REQUIRE(r->rc[i] == 0, "%s: rank %d: %s", what, i, r->err[i]);
  REQUIRE(rc == 0, "%s", what);
  float *ref = check_reference(o, r, what, skipped, scales);
  for (int s = 0; s <= o->steps; s++)
    for (int i = 0; i < o->world; i++)
      for (size_t j = 0; j < o->n; j++)
        REQUIRE(isfinite(result_params(r, s, i)[j]), "%s: rank %d after step %d: non-finite "
              "parameter", what, i, s - 1);
  /* every rank saw the same verdict and the same next scale */
  gs_scaler sc = o->scaler;
  for (int s = 0; s < o->steps; s++) {
    gs_scaler_update(&sc, skipped[s]);
    if (o->sum_only) sc = o->scaler;
    for (int i = 0; i < o->world; i++) {
      gs_sync_stats *st = &r->stats[(size_t)s * o->world + i];
      REQUIRE(st->skipped == skipped[s], "%s: rank %d step %d skipped %d, reference %d", what, i,
            s, st->skipped, skipped[s]);
      REQUIRE(st->scale == sc.scale, "%s: rank %d after step %d: next scale %g, reference %g",
            what, i, s, (double)st->scale, (double)sc.scale);
    }
  }
  free(ref);
  return r;
}

static uint64_t pushed_bytes(job_result *r, int rank) {
  return r->stats[(size_t)0 * r->world + rank].bytes_sent;
}

int main(void) {
  job_opts o;
  bool sk[32];
  float sc[32];

  /* fp16 / bf16 pushes: reference bits, half the bytes. */
  job_defaults(&o);
  o.world = 3;
  o.n = 40000;
  o.bucket_elems = 9000;
  o.steps = 3;
  o.grad_scale = 1e-3f;
  job_result *r32 = run_and_compare(&o, sk, sc, "fp32");
  for (int t = GS_F16; t <= GS_BF16; t++) {
    o.wire = (gs_dtype)t;
    gs_scaler_init(&o.scaler, t == GS_F16 ? 65536.0f : 1.0f, t == GS_F16);
    job_result *r = run_and_compare(&o, sk, sc, gs_dtype_name(o.wire));
    for (int s = 0; s < o.steps; s++) REQUIRE(!sk[s], "%s skipped a clean step", gs_dtype_name(o.wire));
    double ratio = (double)pushed_bytes(r, 1) / (double)pushed_bytes(r32, 1);
    REQUIRE(fabs(ratio - 0.5) < 0.025, "%s pushes %llu bytes, fp32 %llu: ratio %.4f",
          gs_dtype_name(o.wire), (unsigned long long)pushed_bytes(r, 1),
          (unsigned long long)pushed_bytes(r32, 1), ratio);
    /* the server (rank 0) receives the halved pushes of ranks 1 and 2,
     * and sends the parameters back in the wire dtype: half again */
    double ratio0 = (double)r->stats[0].bytes_recv / (double)r32->stats[0].bytes_recv;
    REQUIRE(fabs(ratio0 - 0.5) < 0.025, "server receives ratio %.4f", ratio0);
    double sent0 = (double)r->stats[0].bytes_sent / (double)r32->stats[0].bytes_sent;
    REQUIRE(fabs(sent0 - 0.5) < 0.025, "server sends ratio %.4f", sent0);
    printf("ok: %s pushes: reference bits, %llu bytes vs %llu in fp32 (x%.3f); parameters come "
           "back in %s (x%.3f)\n", gs_dtype_name(o.wire), (unsigned long long)pushed_bytes(r, 1),
           (unsigned long long)pushed_bytes(r32, 1), ratio, gs_dtype_name(o.wire), sent0);
    result_free(r);
  }
  result_free(r32);

  /* sum_only in fp16: exact sum of the fp16 inputs, close to the fp32 sum */
  job_defaults(&o);
  o.world = 4;
  o.sum_only = true;
  o.wire = GS_F16;
  o.steps = 2;
  job_result *r = run_and_compare(&o, sk, sc, "fp16 sum_only");
  float *g = malloc(o.n * sizeof(float)), *sum = calloc(o.n, sizeof(float));
  for (int i = 0; i < o.world; i++) {
    make_grads(&o, i, 1, 1.0f, g);
    for (size_t j = 0; j < o.n; j++) sum[j] += g[j];
  }
  double worst = 0;
  for (size_t j = 0; j < o.n; j++) {
    double d = fabs((double)result_params(r, 2, 3)[j] - (double)sum[j]);
    if (d > worst) worst = d;
  }
  /* 4 inputs in [-1, 1), each rounded to fp16 (half an ulp <= 2^-12) */
  REQUIRE(worst <= 4 * 0x1p-12, "fp16 sum off the fp32 sum by %g", worst);
  REQUIRE(worst > 0, "fp16 sums equal the fp32 sums exactly: were the pushes really fp16?");
  printf("ok: fp16 sum_only: exact fp32 sum of the fp16 inputs, %.3g from the fp32 sum\n", worst);
  free(g);
  free(sum);
  result_free(r);

  /* Forced overflow in step 2 (rank 1's gradient holds +inf). */
  job_defaults(&o);
  o.world = 3;
  o.wire = GS_F16;
  o.grad_scale = 1e-3f;
  o.steps = 5;
  gs_scaler_init(&o.scaler, 65536.0f, true);
  o.inf_rank = 1;
  o.inf_step = 2;
  r = run_and_compare(&o, sk, sc, "overflow in step 2");
  REQUIRE(sk[2] && !sk[0] && !sk[1] && !sk[3], "reference verdicts");
  for (int i = 0; i < o.world; i++) {
    REQUIRE(same_bits(result_params(r, 3, i), result_params(r, 2, i), o.n, "skipped step"),
          "rank %d changed its parameters in a skipped step", i);
    REQUIRE(r->stats[2 * o.world + i].scale == 32768.0f, "rank %d: scale %g after the overflow", i,
          (double)r->stats[2 * o.world + i].scale);
  }
  result_free(r);
  printf("ok: overflow: every rank skips step 2, parameters unchanged, scale 65536 -> 32768\n");

  /* Step 0 overflows: momentum starts at step 1; bf16 with a static scale. */
  o.inf_step = 0;
  result_free(run_and_compare(&o, sk, sc, "overflow in step 0"));
  o.wire = GS_BF16;
  gs_scaler_init(&o.scaler, 128.0f, false);
  o.inf_step = 3;
  result_free(run_and_compare(&o, sk, sc, "bf16 static scale 128, overflow in step 3"));
  printf("ok: overflow in step 0 (momentum starts later), static scale\n");

  /* Growth after exactly `interval` clean steps, and back-off. */
  job_defaults(&o);
  o.world = 2;
  o.wire = GS_F16;
  o.grad_scale = 1e-4f;
  o.steps = 9;
  gs_scaler_init(&o.scaler, 1024.0f, true);
  o.scaler.interval = 3;
  o.inf_rank = 0;
  o.inf_step = 4;
  r = run_and_compare(&o, sk, sc, "growth every 3 clean steps");
  /* 1024 x2 after steps 0..2, skip at 4 halves, 3 clean (5..7) doubles */
  const float want[9] = {1024, 1024, 1024, 2048, 2048, 1024, 1024, 1024, 2048};
  for (int s = 0; s < o.steps; s++) REQUIRE(sc[s] == want[s], "step %d used scale %g", s, (double)sc[s]);
  result_free(r);
  printf("ok: the scale grows after exactly 3 clean steps and halves on overflow\n");

  /* A static scale of 1e30 overflows fp16 every step: all skipped. */
  job_defaults(&o);
  o.world = 2;
  o.wire = GS_F16;
  o.steps = 3;
  gs_scaler_init(&o.scaler, 1e30f, false);
  r = run_and_compare(&o, sk, sc, "static scale 1e30");
  for (int s = 0; s < o.steps; s++) REQUIRE(sk[s], "step %d was not skipped", s);
  REQUIRE(same_bits(result_params(r, 3, 1), result_params(r, 0, 1), o.n, "1e30"), "moved");
  result_free(r);
  printf("ok: --loss-scale 1e30: every step skipped on every rank, parameters unchanged\n");
  return 0;
}
