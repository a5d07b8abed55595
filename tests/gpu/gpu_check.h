/* gpu_check.h: what the tests in tests/gpu share besides tests/check.h's
 * assertions: a seeded generator, and array comparisons that print the
 * first mismatch and the worst error.
 * Header-only; each test is one C file. */
#ifndef GS_TEST_GPU_CHECK_H
#define GS_TEST_GPU_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"

/* xorshift64*: the same numbers on every machine */
typedef struct rng { uint64_t s; } rng;
static inline uint64_t rng_next(rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1DULL;
}
/* uniform in [lo, hi) */
static inline float rng_float(rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)((rng_next(r) >> 40) * (1.0 / 16777216.0));
}
static inline int rng_int(rng *r, int n) { return (int)(rng_next(r) % (uint64_t)n); }
static inline void fill_uniform(rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = rng_float(r, lo, hi);
}

static inline void *xmalloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

/* Same bits, element by element. Returns 1 when equal. */
static inline int same_bits(const char *what, const void *a, const void *b, size_t n,
                            size_t elem) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (memcmp(x + i * elem, y + i * elem, elem)) {
      if (elem == 4) {
        float fa, fb;
        memcpy(&fa, x + i * elem, 4);
        memcpy(&fb, y + i * elem, 4);
        uint32_t ua, ub;
        memcpy(&ua, &fa, 4);
        memcpy(&ub, &fb, 4);
        fprintf(stderr, "  %s: element %zu of %zu differs: %.9g (0x%08x) vs %.9g (0x%08x)\n",
                what, i, n, fa, ua, fb, ub);
      } else {
        fprintf(stderr, "  %s: element %zu of %zu differs\n", what, i, n);
      }
      return 0;
    }
  return 1;
}

/* |got - want| <= tol[i] for every i (tol NULL: use atol). Prints the
 * worst error relative to its tolerance. */
static inline int within(const char *what, const float *got, const float *want, size_t n,
                         const double *tol, double atol) {
  double worst = 0.0;
  size_t wi = 0;
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    double t = tol ? tol[i] : atol;
    double d = fabs((double)got[i] - (double)want[i]);
    if (!(d <= t)) {  /* NaN fails */
      if (ok)
        fprintf(stderr, "  %s: element %zu of %zu: %.9g vs %.9g (|diff| %.3g > tol %.3g)\n",
                what, i, n, got[i], want[i], d, t);
      ok = 0;
    }
    double r = t > 0 ? d / t : d;
    if (r > worst) { worst = r; wi = i; }
  }
  if (getenv("GS_TEST_VERBOSE"))
    fprintf(stderr, "  %s: worst |diff|/tol %.3g at %zu\n", what, worst, wi);
  return ok;
}

#endif
