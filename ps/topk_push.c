/* topk_push.c: a ps worker's sparse pushes (--compress topk:FRACTION,
 * compress.h): each bucket's gradient plus this rank's residual goes out as
 * its k largest entries, indices then values (or the dense bucket where
 * that is not larger, compress.h), from a buffer that holds every
 * bucket's payload of the step (a push sent again after a dropped
 * connection is the same bytes: the residual has moved on by then). The
 * selection is compress/topk.c's; this file only owns the buffers. */
#include <stdlib.h>

#include "ps/ps_internal.h"

int gs_ps_topk_open(ps_worker *s, gs_err *e) {
  const gs_sync_config *c = &s->c;
  if (c->compress.kind != GS_COMPRESS_TOPK) return GS_OK;
  int nb = c->nbuckets;
  size_t max = 0, total = 0;
  s->topk_at = malloc((size_t)nb * sizeof *s->topk_at);
  s->topk_kept = malloc((size_t)nb * sizeof *s->topk_kept);
  if (!s->topk_at || !s->topk_kept)
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory", c->rank);
  for (int b = 0; b < nb; b++) {
    size_t cnt = c->buckets[b].count;
    if (cnt > max) max = cnt;
    s->topk_at[b] = total;
    s->topk_kept[b] = gs_topk_count(c->compress.fraction, cnt);
    total += gs_topk_bytes(s->topk_kept[b], cnt);
  }
  gs_err te = {0};
  if (gs_topk_create(c->compress.fraction, c->n, max, &s->topk, &te) < 0)
    return GS_FAIL(e, te.code, "ps rank %d: %s", c->rank, te.msg);
  s->topk_buf = malloc(total ? total : 1);
  s->topk_bytes = total + c->n * sizeof(float) + max * sizeof(uint32_t);
  if (!s->topk_buf)
    return GS_FAIL(e, GS_ENOMEM, "ps rank %d: out of memory for %zu bytes of sparse pushes",
                   c->rank, total);
  return GS_OK;
}

void gs_ps_topk_free(ps_worker *s) {
  gs_topk_destroy(s->topk);
  free(s->topk_buf);
  free(s->topk_at);
  free(s->topk_kept);
}

const void *gs_ps_topk_stage(ps_worker *s, int b) {
  uint8_t *out = s->topk_buf + s->topk_at[b];
  gs_topk_select(s->topk, s->c.grads, s->buckets[b].offset, s->buckets[b].count, out);
  return out;
}

const void *gs_ps_topk_staged(const ps_worker *s, int b) { return s->topk_buf + s->topk_at[b]; }
