/* update.c: the end of a step (kernels.h, gs_update_apply), the one place
 * where a reduced gradient becomes a parameter update: the wire-fit and
 * finite checks, GradScaler's verdict, the average and SGD. It lives with
 * the kernels because the optimizer does and because every backend, below
 * the worker, calls it; it knows nothing of sockets, ranks or buckets. */
#include <string.h>

#include "kernels/kernels.h"

int gs_update_init(gs_update *u, gs_kernels *k, size_t n, int world, gs_sgd sgd, gs_dtype wire,
                   gs_scaler scaler, gs_err *e) {
  memset(u, 0, sizeof *u);
  if (!k || world < 1)
    return GS_FAIL(e, GS_EINVAL, "optimizer: no kernels table or world %d", world);
  u->k = k;
  u->sgd = sgd;
  u->wire = wire;
  u->world = world;
  u->scaler = scaler;
  if (u->scaler.scale == 0.0f) gs_scaler_init(&u->scaler, 1.0f, false);
  u->scaling = wire != GS_F32 || u->scaler.dynamic || u->scaler.scale != 1.0f;
  u->first = true;
  u->n = n;
  if (sgd.momentum != 0.0f && n > 0 && !(u->momentum = k->alloc(k, n * sizeof(float)))) {
    k->sync(k, e);
    return GS_FAIL(e, GS_ENOMEM, "optimizer: out of memory for the momentum of %zu parameters",
                   n);
  }
  return GS_OK;
}

void gs_update_free(gs_update *u) {
  if (!u || !u->k) return;
  if (u->momentum) u->k->release(u->k, u->momentum);
  if (u->fit) u->k->release(u->k, u->fit);
  memset(u, 0, sizeof *u);
}

size_t gs_update_bytes(const gs_update *u) {
  return (u->momentum ? u->n * sizeof(float) : 0) + u->fit_cap * gs_dtype_size(u->wire);
}

/* *bad += values of the range that would be inf/NaN in the wire dtype. */
static int unfit(gs_update *u, const gs_update_range *r, size_t *bad, gs_err *e) {
  gs_kernels *k = u->k;
  if (r->count > u->fit_cap) {
    if (u->fit) k->release(k, u->fit);
    u->fit_cap = 0;
    if (!(u->fit = k->alloc(k, r->count * gs_dtype_size(u->wire)))) {
      k->sync(k, NULL);
      return GS_FAIL(e, GS_ENOMEM, "optimizer: out of memory checking %zu gradients", r->count);
    }
    u->fit_cap = r->count;
  }
  k->convert(k, u->wire, u->fit, GS_F32, r->grad, r->count);
  *bad += k->nonfinite(k, u->wire, r->count, u->fit);
  return GS_OK;
}

int gs_update_apply(gs_update *u, void *params, const gs_update_range *r, int nr, bool in_wire,
                    bool last, gs_update_result *out, gs_err *e) {
  gs_update_result local;
  if (!out) out = &local;
  memset(out, 0, sizeof *out);
  gs_kernels *k = u->k;
  if (u->scaling && !last)
    return GS_FAIL(e, GS_EINVAL, "optimizer: with loss scaling a step is applied in one call "
                   "(the overflow verdict is the whole step's)");
  double t0 = gs_now();
  /* double, then float: the mean and the unscale in one rounding */
  float f = (float)(1.0 / ((double)u->world * (double)u->scaler.scale));
  size_t bad = 0;
  for (int i = 0; i < nr; i++) {
    if (u->scaling && !in_wire && u->wire != GS_F32) GS_TRY(unfit(u, &r[i], &bad, e));
    if (f != 1.0f) k->scale(k, r[i].count, f, r[i].grad);
    if (u->scaling) bad += k->nonfinite(k, GS_F32, r[i].count, r[i].grad);
  }
  int rc = k->sync(k, e);
  if (rc < 0) {
    gs_err_prefix(e, "optimizer, unscaling: ");
    return rc;
  }
  out->skipped = u->scaling && gs_scaler_update(&u->scaler, bad > 0);
  double t1 = gs_now();
  if (!out->skipped) {
    for (int i = 0; i < nr; i++)
      k->sgd(k, r[i].count, (float *)params + r[i].offset, r[i].grad,
             u->momentum ? (float *)u->momentum + r[i].offset : NULL, u->sgd, u->first);
    u->stepped = true;
    rc = k->sync(k, e);
    if (rc < 0) {
      gs_err_prefix(e, "optimizer: ");
      return rc;
    }
  }
  if (last) {
    if (u->stepped) u->first = false;
    u->stepped = false;
  }
  out->scale = u->scaler.scale;
  out->check_s = t1 - t0;
  out->update_s = gs_now() - t1;
  return GS_OK;
}
