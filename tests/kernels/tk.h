/* tk.h: the common harness of the kernel tests (as nccl-tests' common.h).
 *
 * Assertions are tests/check.h's (CHECK, REQUIRE, check_done). tk_open(isa) makes
 * a CPU table that runs one code path (GS_ISA), or returns NULL and says
 * so when this CPU lacks it. The references the tests compare against are
 * written here and in the tests, independently of kernels/: double
 * precision, naive loops, no elem.h. */
#ifndef GS_TK_H
#define GS_TK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "tests/check.h"
#include "kernels/kernels.h"

/* ---- deterministic random numbers (splitmix64) ---- */
static uint64_t tk_state = 0x9e3779b97f4a7c15ull;
static inline void tk_seed(uint64_t s) { tk_state = s * 0x9e3779b97f4a7c15ull + 1; }
static inline uint64_t tk_u64(void) {
  uint64_t z = (tk_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static inline float tk_unif(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(tk_u64() >> 11) * 0x1p-53);
}
static inline int tk_int(int n) { return (int)(tk_u64() % (uint64_t)n); }
static inline void tk_fill(float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = tk_unif(lo, hi);
}

static inline uint32_t tk_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float tk_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}


/* ---- reference fp16 / bf16, by value (not by bit tricks) ----
 * Decoding: sign * mantissa * 2^exponent in double. Encoding: find the two
 * neighbours of |x| in the sorted table of every non-negative finite value
 * (plus the first value past the largest, 2^16 or 2^128, which stands for
 * infinity exactly as IEEE's rounding of an unbounded exponent does) and
 * take the nearer, the even one on a tie. NaN: quiet, payload truncated
 * (F16C's rule, which kernels/elem.h documents). */
static inline double tk_f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0x1f) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp((double)m, -24);
  else v = ldexp((double)(1024 + m), e - 25);
  return (h & 0x8000) ? -v : v;
}
static inline double tk_bf16_value(uint16_t h) {
  int e = (h >> 7) & 0xff, m = h & 0x7f;
  double v;
  if (e == 0xff) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp((double)m, -133);
  else v = ldexp((double)(128 + m), e - 134);
  return (h & 0x8000) ? -v : v;
}

/* table[i] = value of the non-negative pattern i, i = 0 .. top (top is
 * the pattern of infinity, whose entry is the next power of two) */
static inline uint16_t tk_round_table(double a, const double *table, int top) {
  int lo = 0, hi = top; /* table[lo] <= a < table[hi] unless a >= table[top] */
  if (a >= table[top]) return (uint16_t)top;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (table[mid] <= a) lo = mid;
    else hi = mid;
  }
  double dl = a - table[lo], dh = table[hi] - a; /* exact in double */
  if (dl < dh) return (uint16_t)lo;
  if (dh < dl) return (uint16_t)hi;
  return (uint16_t)((lo & 1) ? hi : lo);
}

static double tk_f16_table[0x7c01], tk_bf16_table[0x7f81];
static int tk_tables_ready;
static inline void tk_tables(void) {
  if (tk_tables_ready) return;
  for (int i = 0; i < 0x7c00; i++) tk_f16_table[i] = tk_f16_value((uint16_t)i);
  tk_f16_table[0x7c00] = 65536.0;
  for (int i = 0; i < 0x7f80; i++) tk_bf16_table[i] = tk_bf16_value((uint16_t)i);
  tk_bf16_table[0x7f80] = ldexp(1.0, 128);
  tk_tables_ready = 1;
}

static inline uint16_t tk_ref_f16(float x) {
  uint32_t u = tk_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  if (isnan(x)) return (uint16_t)(sign | 0x7e00 | ((u >> 13) & 0x3ff));
  tk_tables();
  return (uint16_t)(sign | tk_round_table(fabs((double)x), tk_f16_table, 0x7c00));
}
static inline uint16_t tk_ref_bf16(float x) {
  uint32_t u = tk_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  if (isnan(x)) return (uint16_t)(sign | 0x40 | ((u >> 16) & 0x7fff));
  tk_tables();
  return (uint16_t)(sign | tk_round_table(fabs((double)x), tk_bf16_table, 0x7f80));
}
/* the fp32 bits a 16-bit pattern must widen to (NaN: quiet, payload kept) */
static inline uint32_t tk_ref_f16_to_f32_bits(uint16_t h) {
  if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
    return ((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u | ((uint32_t)(h & 0x3ff) << 13);
  return tk_bits((float)tk_f16_value(h));
}
static inline uint32_t tk_ref_bf16_to_f32_bits(uint16_t h) {
  if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) return (uint32_t)h << 16; /* NaN kept as is */
  return tk_bits((float)tk_bf16_value(h));
}

/* |a - b| <= atol + rtol*|b| */
static inline int tk_close(double a, double b, double rtol, double atol) {
  return fabs(a - b) <= atol + rtol * fabs(b);
}

/* Largest relative error of got against want over n, scaled by the
 * largest |want| (a norm-wise error that tiny entries cannot blow up). */
static inline double tk_relerr(const float *got, const double *want, size_t n) {
  double maxw = 0, maxd = 0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(want[i]) > maxw) maxw = fabs(want[i]);
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= maxd)) maxd = d; /* NaN sticks */
  }
  return maxw > 0 ? maxd / maxw : maxd;
}

static inline void *tk_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  REQUIRE(p);
  return p;
}

/* A table running code path isa, or NULL (with a note) if the CPU lacks it. */
static inline gs_kernels *tk_open(gs_cpu_isa isa) {
  if (!gs_cpu_isa_supported(isa)) {
    printf("note: this CPU lacks the %s path; its checks are skipped\n", gs_cpu_isa_name(isa));
    return NULL;
  }
  setenv("GS_ISA", gs_cpu_isa_name(isa), 1);
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  unsetenv("GS_ISA");
  if (!k) {
    fprintf(stderr, "gs_kernels_cpu(%s): %s\n", gs_cpu_isa_name(isa), e.msg);
    exit(1);
  }
  REQUIRE(gs_kernels_cpu_isa(k) == isa);
  return k;
}

/* sync() must report no error */
#define CHECK_SYNC_OK(k)                                                       \
  do {                                                                         \
    gs_err e_ = {0};                                                           \
    int rc_ = (k)->sync((k), &e_);                                             \
    CHECK(rc_ == 0, "sync reported %d: %s", rc_, e_.msg);                      \
  } while (0)

#endif
