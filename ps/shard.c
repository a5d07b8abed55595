/* shard.c: the parameter server's keys, as ps-lite and BytePS shard
 * theirs: the flat parameter vector cut into K contiguous ranges of equal
 * size (to the element: equal bytes), cutting through buckets where a
 * boundary falls, so that a model of one big bucket still spreads evenly;
 * a bucket becomes one piece per range it overlaps. Server k owns range k
 * and is the unchanged ps server over it (sum in rank order, average,
 * SGD: all element-wise, so the bits are those of one server and of one
 * process). K = 1 is one range, each bucket its own single piece. */
#include <stdlib.h>
#include <string.h>

#include "ps/ps_internal.h"

static bool overlaps(const gs_bucket *b, size_t lo, size_t hi) {
  return b->offset < hi && lo < b->offset + b->count;
}

/* The ranges and every bucket's pieces. */
int gs_ps_keys_plan(ps_keys *sh, int K, const gs_sync_config *c, gs_err *e) {
  int nb = c->nbuckets;
  memset(sh, 0, sizeof *sh);
  sh->K = K;
  sh->nb = nb;
  sh->lo = malloc((size_t)(K + 1) * sizeof *sh->lo);
  sh->sub = calloc((size_t)K, sizeof *sh->sub);
  sh->nsub = calloc((size_t)K, sizeof *sh->nsub);
  sh->first = calloc((size_t)nb + 1, sizeof *sh->first);
  if (!sh->lo || !sh->sub || !sh->nsub || !sh->first)
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  /* floor(n k / K) without overflow: n = q K + r */
  for (int k = 0; k <= K; k++)
    sh->lo[k] = c->n / (size_t)K * (size_t)k + c->n % (size_t)K * (size_t)k / (size_t)K;
  int np = 0;
  for (int b = 0; b < nb; b++) {
    const gs_bucket *x = &c->buckets[b];
    sh->first[b] = np;
    for (int k = 0; k < K; k++)
      if (overlaps(x, sh->lo[k], sh->lo[k + 1])) {
        np++;
        sh->nsub[k]++;
      }
  }
  sh->first[nb] = np;
  sh->pk = malloc((size_t)np * sizeof *sh->pk);
  sh->pj = malloc((size_t)np * sizeof *sh->pj);
  if (!sh->pk || !sh->pj) return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int k = 0; k < K; k++) {
    if (sh->nsub[k] == 0)
      return GS_FAIL(e, GS_EINVAL, "ps rank %d: ps server %d of %d owns parameters [%zu, %zu), "
                     "which no bucket holds", c->rank, k, K, sh->lo[k], sh->lo[k + 1]);
    if (!(sh->sub[k] = malloc((size_t)sh->nsub[k] * sizeof *sh->sub[k])))
      return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
    sh->nsub[k] = 0;
  }
  int p = 0;
  for (int b = 0; b < nb; b++) {
    const gs_bucket *x = &c->buckets[b];
    for (int k = 0; k < K; k++) {
      size_t lo = sh->lo[k], hi = sh->lo[k + 1];
      if (!overlaps(x, lo, hi)) continue;
      size_t a = x->offset > lo ? x->offset : lo;
      size_t z = x->offset + x->count < hi ? x->offset + x->count : hi;
      sh->pk[p] = k;
      sh->pj[p] = sh->nsub[k];
      sh->sub[k][sh->nsub[k]++] = (gs_bucket){.offset = a - lo, .count = z - a};
      p++;
    }
  }
  return GS_OK;
}

void gs_ps_keys_free(ps_keys *sh) {
  for (int i = 0; sh->vbuf && i < 2 * sh->K; i++)
    if (sh->vbuf[i]) sh->vk->release(sh->vk, sh->vbuf[i]);
  free(sh->vbuf);
  free(sh->vn);
  free(sh->rank_of);
  for (int k = 0; sh->sub && k < sh->K; k++) free(sh->sub[k]);
  free(sh->sub);
  free(sh->nsub);
  free(sh->lo);
  free(sh->first);
  free(sh->pk);
  free(sh->pj);
  memset(sh, 0, sizeof *sh);
}

/* Server k's view of the job: its range of the buffers, its pieces. */
gs_sync_config gs_ps_keys_view(const ps_keys *sh, const gs_sync_config *c, int k) {
  gs_sync_config x = *c;
  if (sh->vbuf) { /* summation servers (split.c): a compact view that sums only */
    x.params = sh->vbuf[k];
    x.grads = sh->vbuf[sh->K + k];
    x.n = sh->vn[k];
    x.sum_only = true;
    x.overlap = true;  /* sched.c pushes a piece when it says ready */
    x.span = NULL;     /* the timeline shows partitions (sched.c), not pieces */
  } else {
    x.params = c->params + sh->lo[k];
    x.grads = c->grads + sh->lo[k];
    x.n = sh->lo[k + 1] - sh->lo[k];
  }
  x.buckets = sh->sub[k];
  x.nbuckets = sh->nsub[k];
  return x;
}
