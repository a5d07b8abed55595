/* buckets.c: gs_plan_buckets, DDP's bucket assignment
 * (torch/csrc/distributed/c10d/reducer.cpp, compute_bucket_assignment_by_size):
 * walk the parameters from the last to the first, add each whole parameter
 * to the open bucket, and close the bucket as soon as its size reaches the
 * limit (so a bucket may exceed it by at most one parameter). The first
 * bucket's limit is first_cap (DDP: 1 MiB), the others' cap (25 MiB). The
 * last parameters are the first whose gradients backward produces, so
 * bucket 0 is ready first. Because parameters live back to back in one flat
 * buffer, each bucket is one contiguous range of it.
 *
 * Two caps of 0 name the variants a course compares DDP with: a cap of 0
 * gives every parameter a bucket of its own, the first too (one all-reduce
 * per parameter); a first cap of 0 gives the first bucket no limit of its
 * own, so it closes as the others (uniform buckets, a single one when the
 * cap is at least the model). */
#include <stdlib.h>

#include "worker/sync.h"

int gs_plan_buckets(const size_t *param_sizes, int nparams, size_t elem_bytes,
                    size_t first_cap, size_t cap, gs_bucket **out, int *nbuckets, gs_err *e) {
  *out = NULL;
  *nbuckets = 0;
  if (nparams <= 0) return GS_FAIL(e, GS_EINVAL, "bucket plan: the model has no parameters");
  if (elem_bytes == 0) return GS_FAIL(e, GS_EINVAL, "bucket plan: element size 0");
  if (cap == 0 || first_cap == 0) first_cap = cap;
  size_t total = 0;
  for (int i = 0; i < nparams; i++) total += param_sizes[i];
  gs_bucket *b = calloc((size_t)nparams, sizeof *b);  /* at most one bucket per parameter */
  if (!b) return GS_FAIL(e, GS_ENOMEM, "bucket plan: out of memory");
  int nb = 0;
  size_t end = total, bytes = 0, limit = first_cap;
  for (int i = nparams - 1; i >= 0; i--) {
    size_t start = end - b[nb].count - param_sizes[i];  /* the open bucket grows downwards */
    b[nb].count += param_sizes[i];
    b[nb].offset = start;
    bytes += param_sizes[i] * elem_bytes;
    if (bytes >= limit && i > 0) {
      end = start;
      nb++;
      bytes = 0;
      limit = cap;
    }
  }
  nb++;
  /* empty parameters only: a zero-sized bucket is harmless but useless */
  *out = b;
  *nbuckets = nb;
  return GS_OK;
}
