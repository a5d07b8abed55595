/* reduce.c: the reductions besides the fp32 sum, for the collectives
 * (kernels.h gs_reduce_host, gs_postdiv_host): prod, min and max of every
 * element type, and the sums of double and int32.
 *
 * The fp32 sum of training stays the table's add / add_lp (SIMD paths that
 * the tests compare bit for bit); these are one plain C path for every
 * ISA, elements read and written through memcpy (received frames sit at
 * any byte address), which the compiler vectorizes where it can. */
#include <string.h>

#include "kernels/elem.h"
#include "kernels/kernels.h"

static inline double ld_f64(const void *p, size_t i) {
  double v;
  memcpy(&v, (const char *)p + i * sizeof v, sizeof v);
  return v;
}
static inline void st_f64(void *p, size_t i, double v) {
  memcpy((char *)p + i * sizeof v, &v, sizeof v);
}
static inline uint64_t bits_f64(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}
static inline int32_t ld_i32(const void *p, size_t i) {
  int32_t v;
  memcpy(&v, (const char *)p + i * sizeof v, sizeof v);
  return v;
}
static inline void st_i32(void *p, size_t i, int32_t v) {
  memcpy((char *)p + i * sizeof v, &v, sizeof v);
}

/* min / max, commutative bit for bit (kernels.h): a NaN wins, of two NaNs
 * the smaller pattern; of equal values (only -0 and +0 differ in bits) the
 * one with the sign set (the larger pattern) is the min, the other the max. */
#define MINMAX(NAME, T, BITS, LESS_WINS)                                             \
  static inline T NAME(T a, T b) {                                                   \
    if (a != a || b != b) {                                                          \
      if (a != a && b != b) return BITS(a) < BITS(b) ? a : b;                        \
      return a != a ? a : b;                                                         \
    }                                                                                \
    if (a == b) return (BITS(a) > BITS(b)) == (LESS_WINS) ? a : b;                   \
    return (a < b) == (LESS_WINS) ? a : b;                                           \
  }
MINMAX(min_f32, float, gs_f32_bits, 1)
MINMAX(max_f32, float, gs_f32_bits, 0)
MINMAX(min_f64, double, bits_f64, 1)
MINMAX(max_f64, double, bits_f64, 0)

/* One loop per (type, op): dst op= the source element, loaded as LOAD. */
#define LOOP(T, LD, ST, LOAD, EXPR)                                                  \
  for (size_t i = 0; i < n; i++) {                                                   \
    T a = LD(dst, i), b = LOAD;                                                      \
    ST(dst, i, (EXPR));                                                              \
  }

static float src_f32(gs_dtype t, const void *src, size_t i) {
  switch (t) {
  case GS_F16: return gs_f16_to_f32(gs_load_u16(src, i));
  case GS_BF16: return gs_bf16_to_f32(gs_load_u16(src, i));
  default: return gs_load_f32(src, i);
  }
}

static int reduce_f32(gs_redop op, gs_dtype t, size_t n, void *dst, const void *src) {
  switch (op) {
  case GS_REDOP_SUM: LOOP(float, gs_load_f32, gs_store_f32, src_f32(t, src, i), a + b) break;
  case GS_REDOP_PROD: LOOP(float, gs_load_f32, gs_store_f32, src_f32(t, src, i), a * b) break;
  case GS_REDOP_MIN:
    LOOP(float, gs_load_f32, gs_store_f32, src_f32(t, src, i), min_f32(a, b)) break;
  case GS_REDOP_MAX:
    LOOP(float, gs_load_f32, gs_store_f32, src_f32(t, src, i), max_f32(a, b)) break;
  default: return -1;
  }
  return 0;
}

static int reduce_f64(gs_redop op, size_t n, void *dst, const void *src) {
  switch (op) {
  case GS_REDOP_SUM: LOOP(double, ld_f64, st_f64, ld_f64(src, i), a + b) break;
  case GS_REDOP_PROD: LOOP(double, ld_f64, st_f64, ld_f64(src, i), a * b) break;
  case GS_REDOP_MIN: LOOP(double, ld_f64, st_f64, ld_f64(src, i), min_f64(a, b)) break;
  case GS_REDOP_MAX: LOOP(double, ld_f64, st_f64, ld_f64(src, i), max_f64(a, b)) break;
  default: return -1;
  }
  return 0;
}

/* wrapping arithmetic in uint32_t, back through the two's complement */
static inline int32_t wrap(uint32_t u) {
  int32_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}

static int reduce_i32(gs_redop op, size_t n, void *dst, const void *src) {
  switch (op) {
  case GS_REDOP_SUM: LOOP(int32_t, ld_i32, st_i32, ld_i32(src, i), wrap((uint32_t)a + (uint32_t)b))
    break;
  case GS_REDOP_PROD: LOOP(int32_t, ld_i32, st_i32, ld_i32(src, i), wrap((uint32_t)a * (uint32_t)b))
    break;
  case GS_REDOP_MIN: LOOP(int32_t, ld_i32, st_i32, ld_i32(src, i), a < b ? a : b) break;
  case GS_REDOP_MAX: LOOP(int32_t, ld_i32, st_i32, ld_i32(src, i), a > b ? a : b) break;
  default: return -1;
  }
  return 0;
}

static const char *op_word(gs_redop op) {
  static const char *w[] = {"sum", "avg", "prod", "min", "max"};
  return (unsigned)op <= GS_REDOP_MAX ? w[op] : "unknown";
}

int gs_reduce_host(gs_redop op, gs_dtype t, size_t n, void *dst, const void *src, gs_err *e) {
  int bad;
  switch (t) {
  case GS_F32: case GS_F16: case GS_BF16: bad = reduce_f32(op, t, n, dst, src); break;
  case GS_F64: bad = reduce_f64(op, n, dst, src); break;
  case GS_I32: bad = reduce_i32(op, n, dst, src); break;
  default: bad = -1;
  }
  if (bad)
    return GS_FAIL(e, GS_EINVAL, "reduce: no %s of %s (sum, prod, min or max of fp32, fp16, "
                   "bf16, fp64 or int32; avg is a sum and a post-division)", op_word(op),
                   gs_dtype_name(t));
  return GS_OK;
}

int gs_postdiv_host(gs_dtype t, size_t n, void *x, int world, gs_err *e) {
  if (world < 1) return GS_FAIL(e, GS_EINVAL, "avg: world %d (>= 1)", world);
  switch (t) {
  case GS_F32: {
    float inv = 1.0f / (float)world;
    for (size_t i = 0; i < n; i++) gs_store_f32(x, i, gs_load_f32(x, i) * inv);
    return GS_OK;
  }
  case GS_F64: {
    double inv = 1.0 / (double)world;
    for (size_t i = 0; i < n; i++) st_f64(x, i, ld_f64(x, i) * inv);
    return GS_OK;
  }
  case GS_I32:
    for (size_t i = 0; i < n; i++) st_i32(x, i, ld_i32(x, i) / world);
    return GS_OK;
  default:
    return GS_FAIL(e, GS_EINVAL, "avg: no post-division of %s (fp32, fp64 or int32 buffers)",
                   gs_dtype_name(t));
  }
}
