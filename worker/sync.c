/* sync.c: the checks of sync.h's contract that every backend runs (the
 * call order of a step, the configuration and, through caps.c, what the
 * backend runs), written once so that every backend refuses the same
 * misuse with the same message. Built into the
 * backends' libraries (and the CUDA module) through sync_dep. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/sync.h"

void gs_sync_order_init(gs_sync_order *o, const char *who, int rank, int nbuckets) {
  *o = (gs_sync_order){.who = who, .rank = rank, .nbuckets = nbuckets, .step = -1};
}

int gs_sync_order_begin(gs_sync_order *o, int64_t step, gs_err *e) {
  if (o->in_step)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: begin_step(%" PRId64 ") while step %" PRId64
                   " is not finished (call end_step first)", o->who, o->rank, step, o->step);
  o->in_step = true;
  o->step = step;
  o->next = 0;
  return GS_OK;
}

int gs_sync_order_ready(gs_sync_order *o, int bucket, gs_err *e) {
  if (!o->in_step)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: bucket_ready(%d) outside a step (call begin_step "
                   "first)", o->who, o->rank, bucket);
  if (bucket != o->next)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d, step %" PRId64 ": bucket_ready(%d) out of order: "
                   "bucket %d was due (buckets become ready in order 0, 1, 2 ..., each once, "
                   "the same order on every rank; %d in all)", o->who, o->rank, o->step, bucket,
                   o->next, o->nbuckets);
  o->next++;
  return GS_OK;
}

int gs_sync_order_end(gs_sync_order *o, gs_err *e) {
  if (!o->in_step)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: end_step outside a step", o->who, o->rank);
  if (o->next != o->nbuckets)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d, step %" PRId64 ": end_step after %d of %d buckets "
                   "were ready (backward must hand every bucket over)", o->who, o->rank, o->step,
                   o->next, o->nbuckets);
  o->in_step = false;
  return GS_OK;
}

static int by_offset(const void *a, const void *b) {
  const gs_bucket *x = a, *y = b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void gs_want_of_config(const gs_sync_config *c, gs_want *w) {
  memset(w, 0, sizeof *w);
  char spec[32];
  gs_compress_spec(&c->compress, spec, sizeof spec);
  gs_want_set(w, GS_AXIS_COMPRESS, (int)c->compress.kind,
              c->compress.kind == GS_COMPRESS_NONE ? NULL : "--compress %s", spec);
  gs_want_set(w, GS_AXIS_SYNC, GS_SYNC_BSP, NULL);
  if (c->k) gs_want_set(w, GS_AXIS_DEVICE, (int)c->k->device, c->k->device == GS_DEV_CPU ? NULL
                        : "--device cuda");
  gs_want_set(w, GS_AXIS_WIRE, (int)c->wire, c->wire == GS_F32 ? NULL : "%s gradients on the wire",
              gs_dtype_name(c->wire));
  bool scaled = c->scaler.dynamic || c->scaler.scale != 1.0f;
  gs_want_set(w, GS_AXIS_SCALING, scaled, scaled ? "loss scaling (--loss-scale)" : NULL);
  gs_want_set(w, GS_AXIS_OVERLAP, c->overlap, c->overlap ? "--overlap" : NULL);
  gs_want_set(w, GS_AXIS_COLLECTIVE, c->sum_only, c->sum_only ? "--collective" : NULL);
}

int gs_sync_check_config(const gs_sync_config *c, const gs_backend *be, const char *who,
                         gs_err *e) {
  if (!c) return GS_FAIL(e, GS_EINVAL, "%s: no configuration", who);
  if (c->world < 1 || c->rank < 0 || c->rank >= c->world)
    return GS_FAIL(e, GS_EINVAL, "%s: rank %d of world %d is impossible (0 <= rank < world)", who,
                   c->rank, c->world);
  if (!c->k) return GS_FAIL(e, GS_EINVAL, "%s rank %d: no kernels table", who, c->rank);
  if (c->n == 0 || !c->grads || !c->params)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: no parameter or gradient buffer (the model has no "
                   "parameters?)", who, c->rank);
  if (c->nbuckets < 1 || !c->buckets)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: %d buckets (at least one, in an array)", who,
                   c->rank, c->nbuckets);
  /* fp64 and int32 are the collective benchmark's (its one bucket is the
   * buffer, of that type); training's gradients are fp32 */
  bool bench_type = (c->wire == GS_F64 || c->wire == GS_I32) && c->sum_only && c->nbuckets == 1;
  if (c->wire != GS_F32 && c->wire != GS_F16 && c->wire != GS_BF16 && !bench_type)
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: wire dtype %s (%d): fp32, fp16 or bf16 (fp64 and "
                   "int32 in the collective benchmark only)", who, c->rank,
                   gs_dtype_name(c->wire), (int)c->wire);
  if (be && be->caps) {
    gs_caps caps;
    gs_want w;
    char prefix[64];
    be->caps(c->opts, &caps);
    gs_want_of_config(c, &w);
    if (be->asks) be->asks(c->opts, &w);
    snprintf(prefix, sizeof prefix, "%s rank %d: ", who, c->rank);
    GS_TRY(gs_caps_check(&caps, &w, prefix, e));
  }
  if (c->compress.kind == GS_COMPRESS_POWERSGD) {
    if (c->ntensors < 1 || !c->tensors)
      return GS_FAIL(e, GS_EINVAL, "%s rank %d: --compress powersgd needs the model's tensors",
                     who, c->rank);
    for (int i = 0; i < c->ntensors; i++) {
      const gs_compress_tensor *t = &c->tensors[i];
      if (t->offset > c->n || t->rows * t->cols > c->n - t->offset)
        return GS_FAIL(e, GS_EINVAL, "%s rank %d: tensor %d (%zu x %zu at %zu) lies outside the "
                       "%zu gradients", who, c->rank, i, t->rows, t->cols, t->offset, c->n);
    }
  }
  if (c->compress.kind == GS_COMPRESS_TOPK &&
      (!(c->compress.fraction > 0) || c->compress.fraction > 1))
    return GS_FAIL(e, GS_EINVAL, "%s rank %d: --compress topk keeps a share in (0, 1], not %g",
                   who, c->rank, c->compress.fraction);
  for (int i = 0; i < c->nbuckets; i++) {
    const gs_bucket *b = &c->buckets[i];
    if (b->count == 0 || b->offset > c->n || b->count > c->n - b->offset)
      return GS_FAIL(e, GS_EINVAL, "%s rank %d: bucket %d [%zu, +%zu) is empty or lies outside "
                     "the %zu gradients", who, c->rank, i, b->offset, b->count, c->n);
  }
  if (c->nbuckets == 1) return GS_OK;
  gs_bucket *s = malloc((size_t)c->nbuckets * sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "%s rank %d: out of memory", who, c->rank);
  memcpy(s, c->buckets, (size_t)c->nbuckets * sizeof *s);
  qsort(s, (size_t)c->nbuckets, sizeof *s, by_offset);
  int rc = GS_OK;
  for (int i = 1; i < c->nbuckets && rc == GS_OK; i++)
    if (s[i - 1].offset + s[i - 1].count > s[i].offset)
      rc = GS_FAIL(e, GS_EINVAL, "%s rank %d: buckets [%zu, %zu) and [%zu, %zu) overlap", who,
                   c->rank, s[i - 1].offset, s[i - 1].offset + s[i - 1].count, s[i].offset,
                   s[i].offset + s[i].count);
  free(s);
  return rc;
}
