/* vec_scalar.c: the reference path of the CPU vector ops (see cpu.h).
 *
 * Plain loops over the per-element functions of kernels/elem.h, the very
 * functions the CUDA kernels call. The SIMD paths must give the same bits as
 * these loops, and the tests compare them bit for bit. This path is also the
 * one a CPU without AVX2 runs. */
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/elem.h"

static void s_add(size_t n, float *dst, const float *src) {
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

static void s_axpy(size_t n, float a, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void s_scale(size_t n, float a, float *x) {
  for (size_t i = 0; i < n; i++) x[i] *= a;
}

static void s_add_scalar(size_t n, float a, float *x) {
  for (size_t i = 0; i < n; i++) x[i] += a;
}

static float s_sum(size_t n, const float *x) {
  float acc[16] = {0};
  size_t q = n & ~(size_t)15;
  for (size_t i = 0; i < q; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j];
  return gs_cpu_sum_finish(acc, n, x);
}

static void s_relu(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = gs_relu1(x[i]);
}

static void s_relu_grad(size_t n, const float *y, const float *dy, float *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = gs_relu_grad1(y[i], dy[i]);
}

static void s_sgd(size_t n, float *p, const float *g, float *buf, float lr, float m, float wd,
                  int first) {
  float dummy = 0.0f;
  for (size_t i = 0; i < n; i++)
    gs_sgd1(&p[i], g[i], m != 0.0f ? &buf[i] : &dummy, lr, m, wd, first);
}

static void s_add_f16(size_t n, float *dst, const uint16_t *src) {
  for (size_t i = 0; i < n; i++) dst[i] += gs_f16_to_f32(src[i]);
}

static void s_add_bf16(size_t n, float *dst, const uint16_t *src) {
  for (size_t i = 0; i < n; i++) dst[i] += gs_bf16_to_f32(src[i]);
}

static void s_f32_to_f16(size_t n, uint16_t *dst, const float *src) {
  for (size_t i = 0; i < n; i++) dst[i] = gs_f32_to_f16(src[i]);
}

static void s_f32_to_bf16(size_t n, uint16_t *dst, const float *src) {
  for (size_t i = 0; i < n; i++) dst[i] = gs_f32_to_bf16(src[i]);
}

static void s_f16_to_f32(size_t n, float *dst, const uint16_t *src) {
  for (size_t i = 0; i < n; i++) dst[i] = gs_f16_to_f32(src[i]);
}

static void s_bf16_to_f32(size_t n, float *dst, const uint16_t *src) {
  for (size_t i = 0; i < n; i++) dst[i] = gs_bf16_to_f32(src[i]);
}

static size_t s_nonfinite_f32(size_t n, const float *x) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !gs_f32_isfinite(x[i]);
  return bad;
}

static size_t s_nonfinite_f16(size_t n, const uint16_t *x) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !gs_f16_isfinite(x[i]);
  return bad;
}

static size_t s_nonfinite_bf16(size_t n, const uint16_t *x) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += !gs_bf16_isfinite(x[i]);
  return bad;
}

static void s_copy2d(size_t rows, size_t cols, float *dst, size_t dld, const float *src,
                     size_t sld) {
  for (size_t r = 0; r < rows; r++) memcpy(dst + r * dld, src + r * sld, cols * sizeof(float));
}

static void s_add2d(size_t rows, size_t cols, float *dst, size_t dld, const float *src,
                    size_t sld) {
  for (size_t r = 0; r < rows; r++) s_add(cols, dst + r * dld, src + r * sld);
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
