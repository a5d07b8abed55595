/* topk.c: top-k sparsification with error feedback (compress.h): which
 * entries of a bucket a push keeps, the residual that carries the rest to
 * the next step, and the checked unpacking of a received sparse push.
 *
 * The k-th largest magnitude is found by a radix select over the magnitudes'
 * bits (|x| as a float's bits without the sign orders as the magnitude
 * does, NaN above inf): four passes of a 256-bin histogram, each narrowing
 * the prefix, so the time is linear and does not depend on the data's order.
 * One last pass in index order keeps every entry above that magnitude and
 * the lowest-indexed ones equal to it until k are kept: the tie rule, and
 * the indices come out increasing without a sort. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"

struct gs_topk {
  double fraction;
  size_t n, max_bucket;
  float *residual;   /* [n] */
  uint32_t *key;     /* [max_bucket] magnitudes' bits of the bucket at hand */
};

size_t gs_topk_count(double fraction, size_t n) {
  if (n == 0) return 0;
  double k = ceil(fraction * (double)n);
  if (!(k >= 1)) return 1;
  if (k >= (double)n) return n;
  return (size_t)k;
}

int gs_topk_create(double fraction, size_t n, size_t max_bucket, gs_topk **out, gs_err *e) {
  *out = NULL;
  if (!(fraction > 0) || fraction > 1)
    return GS_FAIL(e, GS_EINVAL, "topk: fraction %g is not in (0, 1]", fraction);
  if (max_bucket > n || max_bucket > UINT32_MAX)
    return GS_FAIL(e, GS_EINVAL, "topk: a bucket of %zu gradients (of %zu; indices travel as "
                   "32 bits)", max_bucket, n);
  gs_topk *t = calloc(1, sizeof *t);
  if (!t) return GS_FAIL(e, GS_ENOMEM, "topk: out of memory");
  t->fraction = fraction;
  t->n = n;
  t->max_bucket = max_bucket;
  t->residual = calloc(n ? n : 1, sizeof *t->residual);
  t->key = malloc((max_bucket ? max_bucket : 1) * sizeof *t->key);
  if (!t->residual || !t->key) {
    gs_topk_destroy(t);
    return GS_FAIL(e, GS_ENOMEM, "topk: out of memory for the residual of %zu gradients", n);
  }
  *out = t;
  return GS_OK;
}

void gs_topk_destroy(gs_topk *t) {
  if (!t) return;
  free(t->residual);
  free(t->key);
  free(t);
}

float gs_topk_residual(const gs_topk *t, size_t i) { return i < t->n ? t->residual[i] : 0.0f; }

static uint32_t bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* The k-th largest of key[0..n) (1 <= k <= n). */
static uint32_t kth_largest(const uint32_t *key, size_t n, size_t k) {
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    size_t hist[256] = {0};
    for (size_t i = 0; i < n; i++)
      if ((key[i] & mask) == prefix) hist[(key[i] >> shift) & 0xff]++;
    int d = 255;
    while (d > 0 && hist[d] < k) k -= hist[d--];
    prefix |= (uint32_t)d << shift;
    mask |= 0xffu << shift;
  }
  return prefix;
}

size_t gs_topk_select(gs_topk *t, const float *grads, size_t off, size_t count, void *out) {
  size_t k = gs_topk_count(t->fraction, count);
  const float *g = grads + off;
  float *res = t->residual + off;
  uint8_t *idx = out, *val = (uint8_t *)out + k * sizeof(uint32_t);
  /* g + residual, in place of the residual: it becomes the new residual
   * where an entry is not kept */
  for (size_t i = 0; i < count; i++) {
    float r = res[i];
    res[i] = r == 0.0f ? g[i] : g[i] + r;
    t->key[i] = bits(res[i]) & 0x7fffffffu;
  }
  bool sparse = gs_topk_sparse(k, count);
  if (!sparse) memset(out, 0, count * sizeof(float));
  uint32_t kth = k < count ? kth_largest(t->key, count, k) : 0;
  size_t above = 0;
  if (k < count)
    for (size_t i = 0; i < count; i++) above += t->key[i] > kth;
  size_t ties = k - above, j = 0;
  for (size_t i = 0; i < count && j < k; i++) {
    if (t->key[i] < kth || (t->key[i] == kth && ties == 0)) continue;
    if (t->key[i] == kth) ties--;
    uint32_t u = (uint32_t)i;
    if (sparse) {
      memcpy(idx + j * sizeof u, &u, sizeof u);
      memcpy(val + j * sizeof(float), &res[i], sizeof(float));
    } else {
      memcpy((uint8_t *)out + i * sizeof(float), &res[i], sizeof(float));
    }
    res[i] = 0.0f;
    j++;
  }
  return k;
}

int gs_topk_unpack(const void *payload, size_t bytes, size_t k, size_t count, float *dense,
                   gs_err *e) {
  const size_t entry = sizeof(uint32_t) + sizeof(float);
  if (k > count || k > SIZE_MAX / entry || count > SIZE_MAX / sizeof(float) ||
      bytes != gs_topk_bytes(k, count))
    return GS_FAIL(e, GS_EPROTO, "a top-k push of %zu bytes for %zu kept entries of a bucket "
                   "of %zu (it must carry %zu bytes: %s)", bytes, k, count,
                   k <= count ? gs_topk_bytes(k, count) : 0,
                   k > count ? "no more entries than the bucket"
                   : gs_topk_sparse(k, count) ? "an index and a value, 8 bytes, per entry"
                   : "the dense bucket, as 2k >= the bucket");
  if (!gs_topk_sparse(k, count)) {
    memcpy(dense, payload, count * sizeof *dense);
    return GS_OK;
  }
  const uint8_t *idx = payload, *val = (const uint8_t *)payload + k * sizeof(uint32_t);
  uint32_t prev = 0;
  for (size_t j = 0; j < k; j++) {
    uint32_t i;
    memcpy(&i, idx + j * sizeof i, sizeof i);
    if (i >= count)
      return GS_FAIL(e, GS_EPROTO, "sparse push entry %zu has index %u, outside the bucket's "
                     "%zu gradients", j, i, count);
    if (j > 0 && i <= prev)
      return GS_FAIL(e, GS_EPROTO, "sparse push entry %zu has index %u after %u (indices must "
                     "strictly increase)", j, i, prev);
    prev = i;
  }
  memset(dense, 0, count * sizeof *dense);
  for (size_t j = 0; j < k; j++) {
    uint32_t i;
    memcpy(&i, idx + j * sizeof i, sizeof i);
    memcpy(&dense[i], val + j * sizeof(float), sizeof(float));
  }
  return GS_OK;
}
