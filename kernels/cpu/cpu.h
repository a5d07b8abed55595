/* cpu.h: internal to kernels/cpu (and its tests and microbenchmark).
 *
 * The CPU table keeps its streaming loops (the vector ops, conversions,
 * finite checks, SGD) in a small table of plain functions, gs_cpu_vec, of
 * which there is one per instruction set: scalar (plain C over elem.h, the
 * reference), avx2 (AVX2 + F16C) and avx512 (AVX-512 F/BW). gs_kernels_cpu()
 * picks one once, from __builtin_cpu_supports, or from GS_ISA when the
 * environment names one (scalar | avx2 | avx512 | auto).
 *
 * No path assumes any alignment: every pointer may be at any byte address
 * (received frames are), so the SIMD paths load and store unaligned and the
 * scalar loops and tails go through elem.h's gs_load_* / gs_store_*.
 *
 * Every path gives the same bits as the scalar one for every op listed here:
 * element-wise ops do the same separately rounded operations (never an FMA;
 * the kernels are built with -ffp-contract=off), and sum() adds in one fixed
 * order (16 lanes, then a fixed tree) whatever the vector width. */
#ifndef GS_KERNELS_CPU_H
#define GS_KERNELS_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/elem.h"
#include "kernels/kernels.h"

typedef enum gs_cpu_isa {
  GS_ISA_SCALAR = 0,
  GS_ISA_AVX2 = 1,
  GS_ISA_AVX512 = 2,
  GS_ISA_COUNT
} gs_cpu_isa;

typedef struct gs_cpu_vec {
  const char *name;
  void (*add)(size_t n, void *dst, const void *src);             /* dst += src */
  void (*axpy)(size_t n, float a, const void *x, void *y);       /* y += a*x */
  void (*scale)(size_t n, float a, void *x);                     /* x *= a */
  void (*add_scalar)(size_t n, float a, void *x);                /* x += a */
  float (*sum)(size_t n, const void *x);                         /* 16-lane order */
  void (*relu)(size_t n, const void *x, void *y);
  void (*relu_grad)(size_t n, const void *y, const void *dy, void *dx);
  /* gs_sgd1 over n elements; m = 0 leaves buf alone (it may be NULL) */
  void (*sgd)(size_t n, void *p, const void *g, void *buf, float lr, float m, float wd,
              int first);
  void (*add_f16)(size_t n, void *dst, const void *src);
  void (*add_bf16)(size_t n, void *dst, const void *src);
  void (*f32_to_f16)(size_t n, void *dst, const void *src);
  void (*f32_to_bf16)(size_t n, void *dst, const void *src);
  void (*f16_to_f32)(size_t n, void *dst, const void *src);
  void (*bf16_to_f32)(size_t n, void *dst, const void *src);
  size_t (*nonfinite_f32)(size_t n, const void *x);
  size_t (*nonfinite_f16)(size_t n, const void *x);
  size_t (*nonfinite_bf16)(size_t n, const void *x);
  /* rows x cols blocks with row strides in elements (im2col / col2im at
   * stride 1): dst[r*dld + c] = src[r*sld + c], and += */
  void (*copy2d)(size_t rows, size_t cols, void *dst, size_t dld, const void *src, size_t sld);
  void (*add2d)(size_t rows, size_t cols, void *dst, size_t dld, const void *src, size_t sld);
} gs_cpu_vec;

extern const gs_cpu_vec gs_cpu_vec_scalar;
extern const gs_cpu_vec gs_cpu_vec_avx2;
extern const gs_cpu_vec gs_cpu_vec_avx512;

/* "scalar" / "avx2" / "avx512" */
const char *gs_cpu_isa_name(gs_cpu_isa isa);
/* Whether this CPU (and OS) can run the path. */
bool gs_cpu_isa_supported(gs_cpu_isa isa);
/* The best supported path: what GS_ISA=auto (or unset) picks. */
gs_cpu_isa gs_cpu_isa_best(void);
/* The path's function table. */
const gs_cpu_vec *gs_cpu_vec_of(gs_cpu_isa isa);
/* The path a CPU table runs (k from gs_kernels_cpu). */
gs_cpu_isa gs_kernels_cpu_isa(const gs_kernels *k);

/* The 16-lane summation order shared by every path's sum(): lane j holds
 * x[j], x[j+16], ...; the tail x[16q + j] goes to lane j; then
 * lane[j] += lane[j + w] for w = 8, 4, 2, 1. */
static inline float gs_cpu_sum_finish(float acc[16], size_t n, const void *x) {
  size_t q = n & ~(size_t)15;
  for (size_t j = 0; q + j < n; j++) acc[j] += gs_load_f32(x, q + j);
  for (int w = 8; w >= 1; w /= 2)
    for (int j = 0; j < w; j++) acc[j] += acc[j + w];
  return acc[0];
}

#endif
