/* sampler.h: which samples a rank trains on, with PyTorch's
 * torch.utils.data.DistributedSampler semantics (internal to worker/).
 *
 *   num_samples = drop_last && n % world ? ceil((n - world) / world)
 *                                        : ceil(n / world)
 *   total_size  = num_samples * world
 *   order       = shuffle ? a permutation drawn from seed + epoch : 0..n-1
 *   padded      = order, repeated from its start up to total_size
 *                 (drop_last: order cut to total_size)
 *   rank r gets padded[r], padded[r + world], ..., num_samples indices.
 *
 * The permutation is our own (Fisher-Yates over xoshiro256** seeded with
 * seed + epoch, see rng.h), not torch.randperm's: same semantics and the
 * same guarantees (deterministic, new order each epoch, disjoint shards
 * that cover the padded set), different numbers. Without shuffle the
 * indices are exactly PyTorch's. */
#ifndef GS_SAMPLER_H
#define GS_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

typedef struct gs_sampler {
  int64_t n;            /* dataset size */
  int rank, world;
  bool shuffle, drop_last;
  uint64_t seed;
  int64_t num_samples;  /* per rank per epoch */
  int64_t total_size;   /* num_samples * world */
  int64_t *order;       /* n entries, the current epoch's order */
  int64_t epoch;        /* whose order `order` holds; -1 before the first */
} gs_sampler;

int gs_sampler_init(gs_sampler *s, int64_t n, int rank, int world, bool shuffle, bool drop_last,
                    uint64_t seed, gs_err *e);
/* This rank's num_samples indices of `epoch`, in order, into out. */
void gs_sampler_epoch(gs_sampler *s, int64_t epoch, int64_t *out);
void gs_sampler_free(gs_sampler *s);

#endif
