/* vec_scalar.c: the reference path of the CPU vector ops (see cpu.h).
 *
 * Plain loops over the per-element functions of kernels/elem.h, the very
 * functions the CUDA kernels call. The SIMD paths must give the same bits as
 * these loops, and the tests compare them bit for bit. This path is also the
 * one a CPU without AVX2 runs. Every element is read and written through
 * gs_load_* / gs_store_*: buffers may sit at any byte address. */
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/elem.h"

#define LD gs_load_f32
#define ST gs_store_f32

static void s_add(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) ST(dst, i, LD(dst, i) + LD(src, i));
}

static void s_axpy(size_t n, float a, const void *x, void *y) {
  for (size_t i = 0; i < n; i++) ST(y, i, LD(y, i) + a * LD(x, i));
}

static void s_scale(size_t n, float a, void *x) {
  for (size_t i = 0; i < n; i++) ST(x, i, LD(x, i) * a);
}

static void s_add_scalar(size_t n, float a, void *x) {
  for (size_t i = 0; i < n; i++) ST(x, i, LD(x, i) + a);
}

static float s_sum(size_t n, const void *x) {
  float acc[16] = {0};
  size_t q = n & ~(size_t)15;
  for (size_t i = 0; i < q; i += 16)
    for (size_t j = 0; j < 16; j++) acc[j] += LD(x, i + j);
  return gs_cpu_sum_finish(acc, n, x);
}

static void s_relu(size_t n, const void *x, void *y) {
  for (size_t i = 0; i < n; i++) ST(y, i, gs_relu1(LD(x, i)));
}

static void s_relu_grad(size_t n, const void *y, const void *dy, void *dx) {
  for (size_t i = 0; i < n; i++) ST(dx, i, gs_relu_grad1(LD(y, i), LD(dy, i)));
}

static void s_sgd(size_t n, void *p, const void *g, void *buf, float lr, float m, float wd,
                  int first) {
  for (size_t i = 0; i < n; i++) {
    float pi = LD(p, i), bi = m != 0.0f ? LD(buf, i) : 0.0f;
    gs_sgd1(&pi, LD(g, i), &bi, lr, m, wd, first);
    ST(p, i, pi);
    if (m != 0.0f) ST(buf, i, bi);
  }
}

static void s_add_f16(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) ST(dst, i, LD(dst, i) + gs_f16_to_f32(gs_load_u16(src, i)));
}

static void s_add_bf16(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) ST(dst, i, LD(dst, i) + gs_bf16_to_f32(gs_load_u16(src, i)));
}

static void s_f32_to_f16(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) gs_store_u16(dst, i, gs_f32_to_f16(LD(src, i)));
}

static void s_f32_to_bf16(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) gs_store_u16(dst, i, gs_f32_to_bf16(LD(src, i)));
}

static void s_f16_to_f32(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) ST(dst, i, gs_f16_to_f32(gs_load_u16(src, i)));
}

static void s_bf16_to_f32(size_t n, void *dst, const void *src) {
  for (size_t i = 0; i < n; i++) ST(dst, i, gs_bf16_to_f32(gs_load_u16(src, i)));
}

static size_t s_nonfinite_f32(size_t n, const void *x) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !gs_f32_isfinite(LD(x, i));
  return bad;
}

static size_t s_nonfinite_f16(size_t n, const void *x) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !gs_f16_isfinite(gs_load_u16(x, i));
  return bad;
}

static size_t s_nonfinite_bf16(size_t n, const void *x) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !gs_bf16_isfinite(gs_load_u16(x, i));
  return bad;
}

static void s_copy2d(size_t rows, size_t cols, void *dst, size_t dld, const void *src,
                     size_t sld) {
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)dst + r * dld * sizeof(float), (const char *)src + r * sld * sizeof(float),
           cols * sizeof(float));
}

static void s_add2d(size_t rows, size_t cols, void *dst, size_t dld, const void *src,
                    size_t sld) {
  for (size_t r = 0; r < rows; r++)
    s_add(cols, (char *)dst + r * dld * sizeof(float), (const char *)src + r * sld * sizeof(float));
}

const gs_cpu_vec gs_cpu_vec_scalar = {
  .name = "scalar",
  .add = s_add,
  .axpy = s_axpy,
  .scale = s_scale,
  .add_scalar = s_add_scalar,
  .sum = s_sum,
  .relu = s_relu,
  .relu_grad = s_relu_grad,
  .sgd = s_sgd,
  .add_f16 = s_add_f16,
  .add_bf16 = s_add_bf16,
  .f32_to_f16 = s_f32_to_f16,
  .f32_to_bf16 = s_f32_to_bf16,
  .f16_to_f32 = s_f16_to_f32,
  .bf16_to_f32 = s_bf16_to_f32,
  .nonfinite_f32 = s_nonfinite_f32,
  .nonfinite_f16 = s_nonfinite_f16,
  .nonfinite_bf16 = s_nonfinite_bf16,
  .copy2d = s_copy2d,
  .add2d = s_add2d,
};
