/* compress.c: the cost model of a compressed step (costmodel.h,
 * gs_cm_compressed): what each bucket puts on the wire under --compress,
 * counted from the model's tensors by the same rule compress/ sends them by,
 * and the step it predicts against the uncompressed one. Pure: the
 * compression's own work comes in measured (compress_measure.c).
 *
 * A compressed bucket in the ring is a chain on the communication thread:
 * compress (P = M Q), all-reduce the uncompressed tensors, all-reduce P,
 * Q = M^T P, all-reduce Q, decompress. So each bucket pays its all-reduces'
 * latency once per part, its (fewer) bytes, and the work in between, and
 * while that thread computes, the next bucket waits: the overlap compression
 * loses is what the schedule of costmodel.c then shows as exposed time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"

void gs_cm_compressed_free(gs_cm_compressed *c) {
  if (!c) return;
  gs_cm_plan_free(&c->plan);
  gs_cm_plan_free(&c->plain);
  free(c->collectives);
  free(c->compute_s);
  memset(c, 0, sizeof *c);
}

/* floats bucket b sends under powersgd, and its non-empty parts */
static void powersgd_bucket(const gs_compress *c, const gs_compress_tensor *t, int nt,
                            const gs_bucket *b, size_t *floats, int *parts) {
  size_t plain = 0, np = 0, nq = 0;
  for (int i = 0; i < nt; i++) {
    if (t[i].offset < b->offset || t[i].offset >= b->offset + b->count) continue;
    if (gs_powersgd_compresses(c, &t[i])) {
      size_t r = (size_t)c->rank;
      if (r > t[i].rows) r = t[i].rows;
      if (r > t[i].cols) r = t[i].cols;
      np += t[i].rows * r;
      nq += t[i].cols * r;
    } else {
      plain += t[i].rows * t[i].cols;
    }
  }
  *floats = plain + np + nq;
  *parts = (plain > 0) + (np > 0) + (nq > 0);
}

int gs_cm_compress_plan(const gs_compress *c, gs_dtype precision,
                        const gs_compress_tensor *tensors, int ntensors,
                        const gs_bucket *buckets, int nbuckets, size_t nparams,
                        gs_cm_compressed *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  if (nbuckets < 1 || !buckets || ntensors < 0 || (ntensors > 0 && !tensors))
    return GS_FAIL(e, GS_EINVAL, "cost model, compression: no buckets or tensors (%d buckets, "
                   "%d tensors)", nbuckets, ntensors);
  for (int i = 0; i < ntensors; i++) {
    const gs_compress_tensor *t = &tensors[i];
    int in = -1;
    for (int b = 0; b < nbuckets && in < 0; b++)
      if (t->offset >= buckets[b].offset && t->offset < buckets[b].offset + buckets[b].count)
        in = b;
    if (in < 0 || t->offset + t->rows * t->cols > buckets[in].offset + buckets[in].count)
      return GS_FAIL(e, GS_EINVAL, "cost model, compression: tensor %d (%zu x %zu at %zu) does "
                     "not lie in one bucket", i, t->rows, t->cols, t->offset);
  }
  out->c = *c;
  out->plan.nbuckets = nbuckets;
  out->plan.nparams = nparams;
  out->plan.bytes = calloc((size_t)nbuckets, sizeof *out->plan.bytes);
  out->plain = out->plan;
  out->plain.bytes = calloc((size_t)nbuckets, sizeof *out->plain.bytes);
  out->collectives = calloc((size_t)nbuckets, sizeof *out->collectives);
  out->compute_s = calloc((size_t)nbuckets, sizeof *out->compute_s);
  if (!out->plan.bytes || !out->plain.bytes || !out->collectives || !out->compute_s) {
    gs_cm_compressed_free(out);
    return GS_FAIL(e, GS_ENOMEM, "cost model, compression: out of memory");
  }
  gs_dtype wire = gs_compress_wire(c, precision);
  out->plain.elem_bytes = gs_dtype_size(precision);
  out->plan.elem_bytes = c->kind == GS_COMPRESS_POWERSGD || c->kind == GS_COMPRESS_TOPK
                             ? sizeof(float) : gs_dtype_size(wire);
  for (int b = 0; b < nbuckets; b++) {
    size_t floats = buckets[b].count;
    int parts = 1;
    if (c->kind == GS_COMPRESS_POWERSGD)
      powersgd_bucket(c, tensors, ntensors, &buckets[b], &floats, &parts);
    out->plan.bytes[b] = floats * out->plan.elem_bytes;
    if (c->kind == GS_COMPRESS_TOPK)  /* the push: k indices and values (ps) */
      out->plan.bytes[b] = gs_topk_bytes(gs_topk_count(c->fraction, floats), floats);
    out->collectives[b] = parts;
    out->plan.total += (double)out->plan.bytes[b];
    out->plain.bytes[b] = buckets[b].count * out->plain.elem_bytes;
    out->plain.total += (double)out->plain.bytes[b];
  }
  /* the tensor that completes each bucket, for readiness (readiness.c) */
  out->plain.first_tensor = ntensors > 0 ? calloc((size_t)nbuckets, sizeof(int)) : NULL;
  for (int b = 0; out->plain.first_tensor && b < nbuckets; b++) {
    int i = 0;
    while (i + 1 < ntensors && tensors[i].offset < buckets[b].offset) i++;
    out->plain.first_tensor[b] = i;
  }
  out->plain.ntensors = out->plain.first_tensor ? ntensors : 0;
  return GS_OK;
}

void gs_cm_topk_ring_bytes(const gs_cm_plan *plan, int world, size_t *out) {
  for (int b = 0; b < plan->nbuckets; b++) out[b] = plan->bytes[b] * (size_t)world / 2;
}

int gs_cm_compress_predict(const gs_cm_machine *m, const gs_cm_job *j,
                           const gs_cm_compressed *c, gs_cm_compress_verdict *v, gs_err *e) {
  memset(v, 0, sizeof *v);
  if (!c->plan.bytes || c->plan.nbuckets != j->plan->nbuckets)
    return GS_FAIL(e, GS_EINVAL, "cost model, compression: %d compressed buckets for a plan of "
                   "%d", c->plan.nbuckets, j->plan->nbuckets);
  gs_cm_job plain = *j;
  plain.collectives = NULL;
  plain.extra_s = NULL;
  GS_TRY(gs_cm_predict(m, &plain, &v->plain, e));
  for (int b = 0; b < c->plan.nbuckets; b++) {
    if (!(c->compute_s[b] >= 0) || !isfinite(c->compute_s[b]) || c->collectives[b] < 0)
      return GS_FAIL(e, GS_EINVAL, "cost model, compression: bucket %d: %g s of work, %d "
                     "all-reduces", b, c->compute_s[b], c->collectives[b]);
    v->compute_s += c->compute_s[b];
  }
  /* gradients become ready as backward makes them, whatever they shrink to */
  double *ready = NULL;
  if (!j->ready) {
    ready = malloc((size_t)c->plan.nbuckets * sizeof *ready);
    if (!ready) return GS_FAIL(e, GS_ENOMEM, "cost model, compression: out of memory");
    gs_cm_ready_by_bytes(j->plan, ready);
  }
  gs_cm_job comp = *j;
  comp.plan = &c->plan;
  if (ready) comp.ready = ready;
  gs_cm_plan gather = c->plan;  /* ring top-k: an all-gather */
  size_t *gbytes = NULL;
  /* the ring all-reduces c's bytes; the flat ps pushes them (top-k
   * selecting them first, PowerSGD getting its parts' sums back before it
   * sends Q) and pulls the dense bucket; the rest of the ps family sends
   * the bucket as it is, in the wire's dtype */
  bool ring = j->mode == GS_CM_RING, topk = c->c.kind == GS_COMPRESS_TOPK;
  bool ps = j->mode == GS_CM_PS && (topk || c->c.kind == GS_COMPRESS_POWERSGD);
  if (ring && topk) {
    if (!(gbytes = malloc((size_t)gather.nbuckets * sizeof *gbytes))) {
      free(ready);
      return GS_FAIL(e, GS_ENOMEM, "cost model, compression: out of memory");
    }
    gs_cm_topk_ring_bytes(&c->plan, j->world, gbytes);
    gather.bytes = gbytes;
    gather.total = 0;
    for (int b = 0; b < gather.nbuckets; b++) gather.total += (double)gbytes[b];
    comp.plan = &gather;
  }
  comp.collectives = ring ? c->collectives : NULL;
  comp.extra_s = ring || ps ? c->compute_s : NULL;
  if (ps) {
    comp.plan = j->plan;
    comp.push_bytes = c->plan.bytes;
    if (!topk) comp.back_bytes = c->plan.bytes;
  }
  int rc = gs_cm_predict(m, &comp, &v->comp, e);
  free(ready);
  free(gbytes);
  GS_TRY(rc);
  if (ps || topk) v->comp.grad_bytes = c->plan.total;
  v->even = fabs(v->comp.step_s / v->plain.step_s - 1) <= GS_CM_EVEN;
  v->pays = !v->even && v->comp.step_s < v->plain.step_s;
  return GS_OK;
}
