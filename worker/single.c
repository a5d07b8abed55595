/* single.c: gs_sync_single, the single-process backend: no communication, the
 * reference every distributed step must equal.
 *
 * end_step does what a backend's reduction does for world 1: with
 * fp16/bf16 the gradients take the trip through the wire dtype a real
 * backend makes (fp32 -> fp16/bf16 -> fp32), so world 1 sees the same
 * rounding and the same overflows as world N; then the step ends as every
 * backend's does, in gs_update_apply (kernels.h): unscale, overflow
 * verdict, SGD. sum_only (collective benchmark) copies the gradients into
 * the parameters: the sum over one rank. With --compress powersgd the
 * buckets go through the same compression as in the ring (a world of one:
 * each all-reduce leaves its buffer as it is), as DDP runs its hook at
 * world 1 too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker.h"

typedef struct single_sync {
  gs_sync base;
  gs_sync_config c;
  gs_update u;
  void *wire;          /* n elements of the wire dtype */
  gs_sync_order order;
  gs_powersgd *psgd;   /* --compress powersgd, or NULL */
  int64_t step;
} single_sync;

static int single_begin_step(gs_sync *s, int64_t step, gs_err *e) {
  single_sync *l = (single_sync *)s;
  GS_TRY(gs_sync_order_begin(&l->order, step, e));
  l->step = step;
  return GS_OK;
}

/* the all-reduce of a world of one */
static int alone(void *ctx, float *buf, size_t count, int part, gs_err *e) {
  (void)ctx, (void)buf, (void)count, (void)part, (void)e;
  return GS_OK;
}

static int single_bucket_ready(gs_sync *s, int bucket, gs_err *e) {
  return gs_sync_order_ready(&((single_sync *)s)->order, bucket, e);
}

static int single_end_step(gs_sync *s, gs_sync_stats *st, gs_err *e) {
  single_sync *l = (single_sync *)s;
  const gs_sync_config *c = &l->c;
  gs_kernels *k = c->k;
  *st = (gs_sync_stats){0};
  GS_TRY(gs_sync_order_end(&l->order, e));
  double t0 = gs_now();
  if (c->sum_only) {
    k->copy(k, c->params, c->grads, c->n * sizeof(float));
    GS_TRY(k->sync(k, e));
    st->reduce_s = gs_now() - t0;
    st->scale = l->u.scaler.scale;
    return GS_OK;
  }
  for (int b = 0; gs_powersgd_active(l->psgd, l->step) && b < c->nbuckets; b++)
    GS_TRY(gs_powersgd_bucket(l->psgd, b, c->grads, c->buckets[b].offset, c->buckets[b].count,
                              alone, NULL, NULL, e));
  if (c->wire != GS_F32) {
    k->convert(k, c->wire, l->wire, GS_F32, c->grads, c->n);
    k->convert(k, GS_F32, c->grads, c->wire, l->wire, c->n);
  }
  gs_update_range r = {.offset = 0, .count = c->n, .grad = c->grads};
  gs_update_result res;
  GS_TRY(gs_update_apply(&l->u, c->params, &r, 1, true, true, &res, e));
  double t1 = gs_now() - res.update_s;
  st->reduce_s = t1 - t0;
  st->update_s = res.update_s;
  if (c->span && l->u.scaling)
    c->span(c->span_ctx, res.skipped ? "unscale+skip" : "unscale", -1, t0, t1, 0);
  if (c->span && !res.skipped) c->span(c->span_ctx, "optimizer", -1, t1, t1 + res.update_s, 0);
  st->skipped = res.skipped;
  st->scale = res.scale;
  return GS_OK;
}

static int single_close(gs_sync *s, bool ok, gs_err *e) {
  single_sync *l = (single_sync *)s;
  if (!l) return GS_OK;
  gs_update_free(&l->u);
  gs_powersgd_destroy(l->psgd);
  if (l->wire) l->c.k->release(l->c.k, l->wire);
  free(l);
  return GS_OK;
}

static const gs_sync_ops single_ops = {
  .begin_step = single_begin_step,
  .bucket_ready = single_bucket_ready,
  .end_step = single_end_step,
  .close = single_close,
};

int gs_sync_single(const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  if (c->world != 1 || c->rank != 0)
    return GS_FAIL(e, GS_EINVAL, "the local backend runs world 1 only (got rank %d of %d); use "
                   "--mode ps or ring for more ranks", c->rank, c->world);
  GS_TRY(gs_sync_check_config(c, &gs_single_backend, "local", e));
  single_sync *l = calloc(1, sizeof *l);
  if (!l) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  l->base.ops = &single_ops;
  l->base.name = "local";
  l->c = *c;
  l->c.endpoints = NULL;
  l->c.bootstrap = NULL;
  gs_sync_order_init(&l->order, "local", c->rank, c->nbuckets);
  gs_kernels *k = c->k;
  gs_sgd sgd = c->sgd;
  if (c->sum_only) sgd.momentum = 0.0f;
  int rc = gs_update_init(&l->u, k, c->n, 1, sgd, c->wire, c->scaler, e);
  if (rc == GS_OK && c->wire != GS_F32 && !(l->wire = k->alloc(k, c->n * gs_dtype_size(c->wire)))) {
    k->sync(k, e);
    rc = GS_FAIL(e, GS_ENOMEM, "local backend: out of memory for %zu parameters", c->n);
  }
  if (rc == GS_OK && c->compress.kind == GS_COMPRESS_POWERSGD)
    rc = gs_powersgd_create(&c->compress, k, c->tensors, c->ntensors, c->nbuckets, 1, &l->psgd, e);
  if (rc) {
    single_close(&l->base, false, NULL);
    return rc;
  }
  *out = &l->base;
  return GS_OK;
}

/* What one process runs: everything that needs no other rank (top-k
 * keeps what the others would need; the consistency models and the
 * transports have nobody to wait for or reach). */
static void single_caps(const void *opts, gs_caps *c) {
  gs_caps_everything(c);
  snprintf(c->what, sizeof c->what, "one process (--mode local, or world 1)");
  c->runs[GS_AXIS_COMPRESS] &= ~GS_CAP(GS_COMPRESS_TOPK);
  c->runs[GS_AXIS_SYNC] = GS_CAP(GS_SYNC_BSP);
}

static int single_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                          gs_err *e) {
  if (c->world != 1)
    return GS_FAIL(e, GS_EINVAL, "the local backend is one process (world %d asked)", c->world);
  *state = NULL;
  endpoint[0] = 0;
  return GS_OK;
}

static int single_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  (void)state;
  return gs_sync_single(c, out, e);
}

/* gs_sync_single as a backend, so that world 1 without communication goes
 * through the launcher's path as every other world does. */
const gs_backend gs_single_backend = {
  .name = "local", .caps = single_caps, .asks = NULL, .prepare = single_prepare,
  .bootstrap = NULL, .open = single_open, .discard = NULL,
};
