/* rng.h: the one pseudo-random generator of gradsync (header-only, internal to
 * the parts that draw numbers: worker/ and compress/).
 *
 * Everything random (initial parameters, synthetic data, the sampler's
 * permutation) comes from xoshiro256** (Blackman & Vigna, 2018) seeded by
 * splitmix64, as the authors recommend. Streams are independent by
 * construction: a stream is seeded from splitmix64(seed ^ a stream constant),
 * so e.g. the parameters of fc1 do not depend on how many other tensors the
 * model has. This is NOT PyTorch's generator (torch uses Philox / MT19937):
 * the same --seed gives different numbers than torch.manual_seed, but always
 * the same numbers here, on every machine. */
#ifndef GS_RNG_H
#define GS_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct gs_rng {
  uint64_t s[4];
} gs_rng;

static inline uint64_t gs_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Streams of one seed: stream ids below are fixed forever (changing one
 * changes every result derived from it). */
enum {
  GS_STREAM_INIT = 0x1000,     /* + tensor index */
  GS_STREAM_DATA = 0x2000,     /* synthetic dataset */
  GS_STREAM_SAMPLER = 0x3000,  /* see sampler.c: seed + epoch, as PyTorch */
  GS_STREAM_PROFILE = 0x4000,  /* pseudo-gradients of profiles */
  GS_STREAM_POWERSGD = 0x5000, /* + tensor index: PowerSGD's first Q (compress/) */
  GS_STREAM_STRAGGLE = 0x6000, /* + rank: per-step compute noise (straggle.c) */
};

static inline void gs_rng_seed(gs_rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
  for (int i = 0; i < 4; i++) r->s[i] = gs_splitmix64(&x);
}

static inline uint64_t gs_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t gs_rng_next(gs_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = gs_rng_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = gs_rng_rotl(s[3], 45);
  return out;
}

/* Uniform in [0, 1) with 24 random bits: every value is an exact float. */
static inline float gs_rng_uniform(gs_rng *r) {
  return (float)(gs_rng_next(r) >> 40) * 0x1.0p-24f;
}

/* Standard normal by Box-Muller in double (the cosine branch only, one
 * normal per two draws of 53 bits), rounded once to float. Plain enough to
 * be reproduced outside C with the same libm (tests/ref/powersgd_ddp.py). */
static inline float gs_rng_normal(gs_rng *r) {
  double u1 = (double)(gs_rng_next(r) >> 11) * 0x1.0p-53;
  double u2 = (double)(gs_rng_next(r) >> 11) * 0x1.0p-53;
  return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
}

/* Uniform in [0, n) without modulo bias (Lemire's multiply-shift with
 * rejection). n > 0. */
static inline uint64_t gs_rng_below(gs_rng *r, uint64_t n) {
  uint64_t x = gs_rng_next(r);
  __uint128_t m = (__uint128_t)x * n;
  uint64_t lo = (uint64_t)m;
  if (lo < n) {
    uint64_t thresh = (0 - n) % n;
    while (lo < thresh) {
      x = gs_rng_next(r);
      m = (__uint128_t)x * n;
      lo = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

#endif
