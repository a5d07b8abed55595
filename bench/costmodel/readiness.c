/* readiness.c: when each bucket's gradients are ready, as a fraction of
 * backward (costmodel.h, gs_cm_job.ready), from the model's layers.
 *
 * Bytes are a poor clock for backward: VGG-16's fully connected layers hold
 * 90% of its parameters and under 1% of its work, so their 411 MB are ready
 * at the very start of backward, not after 89% of it. Readiness is kept per
 * tensor, so one measurement (a calibration times each tensor's gradient in
 * backward) or one count (a profile's multiply-adds per layer) serves every
 * bucket plan: a bucket is ready when the lowest tensor in it is. */
#include <math.h>

#include "bench/costmodel/costmodel.h"

int gs_cm_ready_check(const double *tensor_ready, int ntensors, const char *what, gs_err *e) {
  if (ntensors < 1 || ntensors > GS_CM_MAX_TENSORS || !tensor_ready)
    return GS_FAIL(e, GS_EINVAL, "%s: %d tensors: must be between 1 and %d", what, ntensors,
                   GS_CM_MAX_TENSORS);
  for (int i = 0; i < ntensors; i++) {
    double r = tensor_ready[i];
    if (!(r >= 0 && r <= 1))
      return GS_FAIL(e, GS_EINVAL, "%s: tensor %d is ready at %g of backward: fractions are in "
                     "[0, 1]", what, i, r);
    if (i > 0 && r > tensor_ready[i - 1])
      return GS_FAIL(e, GS_EINVAL, "%s: tensor %d is ready at %g of backward, after tensor %d "
                     "(%g): backward walks from the last tensor, so the fractions may not grow "
                     "with the index", what, i, r, i - 1, tensor_ready[i - 1]);
  }
  return GS_OK;
}

void gs_cm_ready_by_bytes(const gs_cm_plan *p, double *bucket_ready) {
  double cum = 0;
  for (int b = 0; b < p->nbuckets; b++) {
    cum += (double)p->bytes[b];
    bucket_ready[b] = fmin(cum / p->total, 1.0);
  }
}

int gs_cm_ready_from_macs(const double *macs, int ntensors, double *tensor_ready, gs_err *e) {
  if (ntensors < 1 || !macs)
    return GS_FAIL(e, GS_EINVAL, "readiness from layer work: no tensors");
  double total = 0;
  for (int i = 0; i < ntensors; i++) {
    if (!(macs[i] >= 0) || !isfinite(macs[i]))
      return GS_FAIL(e, GS_EINVAL, "readiness from layer work: tensor %d has %g multiply-adds",
                     i, macs[i]);
    total += macs[i];
  }
  if (!(total > 0)) return GS_FAIL(e, GS_EINVAL, "readiness from layer work: no work counted");
  double done = 0;
  for (int i = ntensors - 1; i >= 0; i--) {
    done += macs[i];
    tensor_ready[i] = fmin(done / total, 1.0);
  }
  return GS_OK;
}

int gs_cm_plan_ready(const gs_cm_plan *p, const double *tensor_ready, int ntensors,
                     double *bucket_ready, gs_err *e) {
  if (!p->first_tensor || p->ntensors < 1)
    return GS_FAIL(e, GS_EINVAL, "readiness: the bucket plan does not know the model's tensors");
  if (ntensors != p->ntensors)
    return GS_FAIL(e, GS_EINVAL, "readiness: %d tensors measured, and the model has %d: the "
                   "measurement is of another model", ntensors, p->ntensors);
  GS_TRY(gs_cm_ready_check(tensor_ready, ntensors, "readiness", e));
  for (int b = 0; b < p->nbuckets; b++) {
    int t = p->first_tensor[b];
    if (t < 0 || t >= ntensors)
      return GS_FAIL(e, GS_EINVAL, "readiness: bucket %d starts at tensor %d of %d", b, t,
                     ntensors);
    bucket_ready[b] = tensor_ready[t];
  }
  return GS_OK;
}
