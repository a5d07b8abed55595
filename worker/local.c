/* local.c: gs_sync_local, the single-process backend: no communication, the
 * reference every distributed step must equal.
 *
 * end_step does what a backend's reduction + optimizer would do for world
 * 1, in the same order:
 *   1. mixed precision: the gradients take the trip through the wire dtype
 *      that a real backend makes (fp32 -> fp16/bf16 -> fp32), so world 1
 *      sees the same rounding and the same overflows as world N;
 *   2. loss scaling: inf/NaN check and the GradScaler verdict
 *      (gs_scaler_update); an overflowing step is skipped, the parameters and
 *      the momentum stay as they were;
 *   3. unscale (g *= 1/scale, as GradScaler.unscale_) and torch.optim.SGD.
 * Scaling is active when the wire is fp16/bf16 or the scale is not a fixed
 * 1; in plain fp32 nothing is checked, as in PyTorch without a GradScaler.
 * sum_only (collective benchmark) copies the gradients into the parameters:
 * the sum over one rank. */
#include <stdlib.h>

#include "worker/worker.h"

typedef struct local_sync {
  gs_sync base;
  gs_sync_config c;
  gs_scaler scaler;
  float *momentum;     /* NULL when momentum is 0 */
  void *wire;          /* n elements of the wire dtype */
  bool first;          /* the optimizer has not stepped yet */
  bool scaling;
  int ready;           /* buckets handed over this step */
  int64_t step;
} local_sync;

static int local_begin(gs_sync *s, int64_t step, gs_err *e) {
  local_sync *l = (local_sync *)s;
  l->ready = 0;
  l->step = step;
  return GS_OK;
}

static int local_ready(gs_sync *s, int bucket, gs_err *e) {
  local_sync *l = (local_sync *)s;
  if (bucket != l->ready)
    return GS_FAIL(e, GS_EINVAL, "local backend, step %lld: bucket %d ready out of order "
                   "(expected %d)", (long long)l->step, bucket, l->ready);
  l->ready++;
  return GS_OK;
}

static int local_end(gs_sync *s, gs_sync_stats *st, gs_err *e) {
  local_sync *l = (local_sync *)s;
  const gs_sync_config *c = &l->c;
  gs_kernels *k = c->k;
  *st = (gs_sync_stats){0};
  if (l->ready != c->nbuckets)
    return GS_FAIL(e, GS_EINVAL, "local backend, step %lld: end_step after %d of %d buckets",
                   (long long)l->step, l->ready, c->nbuckets);
  double t0 = gs_now();
  if (c->sum_only) {
    k->copy(k, c->params, c->grads, c->n * sizeof(float));
    GS_TRY(k->sync(k, e));
    st->reduce_s = gs_now() - t0;
    st->scale = l->scaler.scale;
    return GS_OK;
  }
  float used = l->scaler.scale;  /* the scale this step's gradients carry */
  bool skip = false;
  if (c->wire != GS_F32) {
    k->convert(k, c->wire, l->wire, GS_F32, c->grads, c->n);
    size_t bad = k->nonfinite(k, c->wire, c->n, l->wire);
    k->convert(k, GS_F32, c->grads, c->wire, l->wire, c->n);
    skip = gs_scaler_update(&l->scaler, bad > 0);
  } else if (l->scaling) {
    size_t bad = k->nonfinite(k, GS_F32, c->n, c->grads);
    skip = gs_scaler_update(&l->scaler, bad > 0);
  }
  if (!skip && used != 1.0f) k->scale(k, c->n, 1.0f / used, c->grads);
  GS_TRY(k->sync(k, e));
  double t1 = gs_now();
  st->reduce_s = t1 - t0;
  if (c->span && l->scaling)
    c->span(c->span_ctx, skip ? "unscale+skip" : "unscale", -1, t0, t1, 0);
  if (!skip) {
    k->sgd(k, c->n, c->params, c->grads, l->momentum, c->sgd, l->first);
    l->first = false;
    GS_TRY(k->sync(k, e));
    double t2 = gs_now();
    st->update_s = t2 - t1;
    if (c->span) c->span(c->span_ctx, "optimizer", -1, t1, t2, 0);
  }
  st->skipped = skip;
  st->scale = l->scaler.scale;
  return GS_OK;
}

static int local_close(gs_sync *s, bool ok, gs_err *e) {
  local_sync *l = (local_sync *)s;
  if (!l) return GS_OK;
  gs_kernels *k = l->c.k;
  k->release(k, l->momentum);
  k->release(k, l->wire);
  free(l);
  return GS_OK;
}

static const gs_sync_ops local_ops = {local_begin, local_ready, local_end, local_close};

int gs_sync_local(const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  if (c->world != 1 || c->rank != 0)
    return GS_FAIL(e, GS_EINVAL, "the local backend runs world 1 only (got rank %d of %d); use "
                   "--mode ps or ring for more ranks", c->rank, c->world);
  if (!c->k || !c->params || !c->grads || c->n == 0 || !c->buckets || c->nbuckets <= 0)
    return GS_FAIL(e, GS_EINVAL, "local backend: incomplete configuration (no model buffers)");
  local_sync *l = calloc(1, sizeof *l);
  if (!l) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  l->base.ops = &local_ops;
  l->base.name = "local";
  l->c = *c;
  l->c.endpoints = NULL;
  l->c.bootstrap = NULL;
  l->scaler = c->scaler;
  l->first = true;
  l->scaling = c->wire != GS_F32 || c->scaler.dynamic || c->scaler.scale != 1.0f;
  gs_kernels *k = c->k;
  int rc = GS_OK;
  if (c->sgd.momentum != 0.0f && !c->sum_only) {
    l->momentum = k->alloc(k, c->n * sizeof(float));
    if (!l->momentum) rc = GS_ENOMEM;
  }
  if (c->wire != GS_F32) {
    l->wire = k->alloc(k, c->n * gs_dtype_size(c->wire));
    if (!l->wire) rc = GS_ENOMEM;
  }
  if (rc) {
    k->sync(k, e);
    GS_FAIL(e, rc, "local backend: out of memory for %zu parameters", c->n);
    local_close(&l->base, false, NULL);
    return rc;
  }
  *out = &l->base;
  return GS_OK;
}
