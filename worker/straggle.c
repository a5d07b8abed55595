/* straggle.c: stragglers on demand (worker.h gs_straggle): which ranks are
 * slow, by how much, the seeded per-step noise, and the real arithmetic that
 * stretches a step's compute. Busy work, not sleep: a straggler that sleeps
 * frees its core, which a slow GPU or an overloaded host does not. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rng.h"
#include "worker/worker.h"

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int gs_straggle_parse(const char *spec, gs_straggle *s, gs_err *e) {
  const char *colon = spec ? strrchr(spec, ':') : NULL;
  if (!colon || colon == spec || !colon[1])
    return GS_FAIL(e, GS_EINVAL, "--slow %s: expected RANK[,RANK...]:FACTOR, e.g. 3:2.5 or "
                   "1,3:4", spec ? spec : "");
  char *end;
  errno = 0;
  double f = strtod(colon + 1, &end);
  if (errno || *end || !isfinite(f) || f < 1 || f > 1000)
    return GS_FAIL(e, GS_EINVAL, "--slow %s: the factor '%s' must be a number in [1, 1000] (a "
                   "rank computes FACTOR times as long)", spec, colon + 1);
  gs_straggle t = *s;
  t.nslow = 0;
  t.factor = f;
  const char *p = spec;
  while (p < colon) {
    if (t.nslow == GS_SLOW_MAX)
      return GS_FAIL(e, GS_EINVAL, "--slow %s: at most %d ranks", spec, GS_SLOW_MAX);
    errno = 0;
    long r = (*p >= '0' && *p <= '9') ? strtol(p, &end, 10) : -1;
    if (r < 0 || errno || r > 1048575 || (end != colon && *end != ','))
      return GS_FAIL(e, GS_EINVAL, "--slow %s: the ranks before ':' must be whole numbers "
                     ">= 0, separated by commas", spec);
    for (int i = 0; i < t.nslow; i++)
      if (t.slow[i] == (int)r)
        return GS_FAIL(e, GS_EINVAL, "--slow %s: rank %ld is listed twice", spec, r);
    t.slow[t.nslow++] = (int)r;
    p = *end == ',' ? end + 1 : end;
    if (*end == ',' && p == colon)
      return GS_FAIL(e, GS_EINVAL, "--slow %s: a rank is missing after ','", spec);
  }
  qsort(t.slow, (size_t)t.nslow, sizeof t.slow[0], cmp_int);
  *s = t;
  return GS_OK;
}

void gs_straggle_text(const gs_straggle *s, char *buf, size_t cap) {
  size_t n = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; i < s->nslow && n < cap; i++) {
    int w = snprintf(buf + n, cap - n, "%s%d", i ? "," : "", s->slow[i]);
    if (w < 0) return;
    n += (size_t)w;
  }
  if (s->nslow && n < cap) snprintf(buf + n, cap - n, ":%g", s->factor);
}

double gs_straggle_factor(const gs_straggle *s, int rank) {
  for (int i = 0; i < s->nslow; i++)
    if (s->slow[i] == rank) return s->factor > 1 ? s->factor : 1.0;
  return 1.0;
}

double gs_straggle_multiplier(const gs_straggle *s, uint64_t seed, int rank, int64_t step) {
  double m = gs_straggle_factor(s, rank);
  if (s->jitter_cv > 0) {
    /* one normal per (seed, rank, step), Box-Muller on two uniforms */
    gs_rng r;
    gs_rng_seed(&r, seed ^ ((uint64_t)step * 0x9e3779b97f4a7c15ull),
                GS_STREAM_STRAGGLE + (uint64_t)rank);
    double u1 = ((double)(gs_rng_next(&r) >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    double u2 = (double)(gs_rng_next(&r) >> 11) / 9007199254740992.0;
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    m *= 1.0 + s->jitter_cv * fabs(z);
  }
  return m;
}

void gs_busy_work(double seconds) {
  if (!(seconds > 0)) return;
  double end = gs_now() + seconds;
  /* a chain of dependent multiply-adds, checked against the clock every
   * few thousand: real work a compiler cannot drop (the result is kept) */
  double x = 1.0;
  do {
    for (int i = 0; i < 4096; i++) x = x * 0.999999 + 1e-6;
  } while (gs_now() < end);
  __asm__ volatile("" : : "r"(&x) : "memory"); /* x is used: the loop stays */
}
