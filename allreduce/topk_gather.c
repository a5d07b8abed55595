/* topk_gather.c: top-k with error feedback in the ring, as an all-gather of
 * every rank's sparse bucket (topk_gather.h draws it). The selection and the
 * payload's checks are compress/topk.c's; this file gathers and sums. */
#include <stdlib.h>
#include <string.h>

#include "allreduce/topk_gather.h"
#include "compress/compress.h"

struct gs_topk_gather {
  gs_topk *sel;         /* the residual and the selection */
  int rank, world, nb;
  gs_bucket *buckets;
  size_t *kept;         /* [nb] */
  float *all;           /* world payloads of the largest bucket, end to end */
  float *one;           /* one rank's bucket made dense */
};

/* a payload's bytes, a whole number of floats (8k or 4n) */
static size_t words(double fraction, size_t count) {
  return gs_topk_bytes(gs_topk_count(fraction, count), count) / sizeof(float);
}

size_t gs_topk_gather_count(const gs_sync_config *c) {
  size_t most = 0;
  for (int b = 0; b < c->nbuckets; b++) {
    size_t w = words(c->compress.fraction, c->buckets[b].count);
    if (w > most) most = w;
  }
  return most * (size_t)c->world;
}

int gs_topk_gather_create(const gs_sync_config *c, gs_topk_gather **out, gs_err *e) {
  *out = NULL;
  gs_topk_gather *t = calloc(1, sizeof *t);
  if (!t) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
  t->rank = c->rank;
  t->world = c->world;
  t->nb = c->nbuckets;
  size_t maxcnt = 0;
  for (int b = 0; b < c->nbuckets; b++)
    if (c->buckets[b].count > maxcnt) maxcnt = c->buckets[b].count;
  t->buckets = malloc((size_t)c->nbuckets * sizeof *t->buckets);
  t->kept = malloc((size_t)c->nbuckets * sizeof *t->kept);
  t->all = malloc(gs_topk_gather_count(c) * sizeof(float) + sizeof(float));
  t->one = malloc(maxcnt * sizeof(float) + sizeof(float));
  if (!t->buckets || !t->kept || !t->all || !t->one) {
    gs_topk_gather_destroy(t);
    return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for top-k's all-gather (%zu floats)",
                   c->rank, gs_topk_gather_count(c));
  }
  memcpy(t->buckets, c->buckets, (size_t)c->nbuckets * sizeof *t->buckets);
  for (int b = 0; b < c->nbuckets; b++)
    t->kept[b] = gs_topk_count(c->compress.fraction, c->buckets[b].count);
  gs_err te = {0};
  if (gs_topk_create(c->compress.fraction, c->n, maxcnt, &t->sel, &te) < 0) {
    gs_topk_gather_destroy(t);
    return GS_FAIL(e, te.code, "rank %d: %s", c->rank, te.msg);
  }
  *out = t;
  return GS_OK;
}

void gs_topk_gather_destroy(gs_topk_gather *t) {
  if (!t) return;
  gs_topk_destroy(t->sel);
  free(t->buckets);
  free(t->kept);
  free(t->all);
  free(t->one);
  free(t);
}

int gs_topk_gather_bucket(gs_topk_gather *t, gs_comm *comm, gs_kernels *k, float *grads, int b,
                        int64_t step, gs_comm_stats *st, gs_err *e) {
  size_t off = t->buckets[b].offset, cnt = t->buckets[b].count, kept = t->kept[b];
  size_t bytes = gs_topk_bytes(kept, cnt), w = bytes / sizeof(float);
  double t0 = gs_now();
  gs_topk_select(t->sel, grads, off, cnt, t->all + (size_t)t->rank * w);
  st->reduce_s += gs_now() - t0;
  int rc = gs_comm_all_gather(comm, t->all + (size_t)t->rank * w, t->all, w * (size_t)t->world,
                              step, st, e);
  if (rc < 0) {
    gs_err_prefix(e, "top-k, all-gather of bucket %d: ", b);
    return rc;
  }
  /* rank order, the first rank's payload the start of the sum (as the ps
   * server starts from rank 0's push): the same bits on every rank */
  double t1 = gs_now();
  for (int q = 0; q < t->world; q++) {
    gs_err pe = {0};
    float *dst = q == 0 ? grads + off : t->one;
    if (gs_topk_unpack(t->all + (size_t)q * w, bytes, kept, cnt, dst, &pe) < 0)
      return GS_FAIL(e, GS_EPROTO, "rank %d, step %lld bucket %d: rank %d's top-k: %s",
                     t->rank, (long long)step, b, q, pe.msg);
    if (q > 0) k->add(k, cnt, grads + off, t->one);
  }
  st->reduce_s += gs_now() - t1;
  return k->sync(k, e);
}
