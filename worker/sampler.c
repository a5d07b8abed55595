/* sampler.c: DistributedSampler semantics (see sampler.h). The padded list
 * is never built: its j-th entry is order[j mod n], which is what
 * "indices += indices[:padding_size]" (and its repeated form when padding
 * exceeds n) amounts to. */
#include "worker/sampler.h"

#include <stdlib.h>

#include "kernels/rng.h"

int gs_sampler_init(gs_sampler *s, int64_t n, int rank, int world, bool shuffle, bool drop_last,
                    uint64_t seed, gs_err *e) {
  *s = (gs_sampler){0};
  if (n <= 0) return GS_FAIL(e, GS_EINVAL, "sampler: the dataset is empty");
  if (world <= 0 || rank < 0 || rank >= world)
    return GS_FAIL(e, GS_EINVAL, "sampler: rank %d is outside world %d", rank, world);
  s->n = n;
  s->rank = rank;
  s->world = world;
  s->shuffle = shuffle;
  s->drop_last = drop_last;
  s->seed = seed;
  if (drop_last && n % world != 0)
    s->num_samples = (n - world + world - 1) / world;   /* ceil((n - world) / world) */
  else
    s->num_samples = (n + world - 1) / world;
  if (s->num_samples <= 0)
    return GS_FAIL(e, GS_EINVAL,
                   "sampler: %lld samples cannot give each of %d ranks one with --drop-last; "
                   "use a larger dataset or drop --drop-last",
                   (long long)n, world);
  s->total_size = s->num_samples * world;
  s->order = gs_alloc((size_t)n * sizeof *s->order, e);
  if (!s->order) return GS_ENOMEM;
  s->epoch = -1;
  return GS_OK;
}

void gs_sampler_epoch(gs_sampler *s, int64_t epoch, int64_t *out) {
  if (s->epoch != epoch) {
    for (int64_t i = 0; i < s->n; i++) s->order[i] = i;
    if (s->shuffle) {
      /* torch: g.manual_seed(self.seed + self.epoch); randperm(n, generator=g) */
      gs_rng r;
      gs_rng_seed(&r, s->seed + (uint64_t)epoch, GS_STREAM_SAMPLER);
      for (int64_t i = s->n - 1; i > 0; i--) {
        int64_t j = (int64_t)gs_rng_below(&r, (uint64_t)i + 1);
        int64_t t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
      }
    }
    s->epoch = epoch;
  }
  for (int64_t i = 0; i < s->num_samples; i++) {
    int64_t j = s->rank + i * s->world;   /* < total_size */
    out[i] = s->order[j % s->n];
  }
}

void gs_sampler_free(gs_sampler *s) {
  gs_free(s->order);
  s->order = NULL;
}
