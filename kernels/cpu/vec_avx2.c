/* vec_avx2.c: the AVX2 + F16C path of the CPU vector ops (see cpu.h).
 *
 * Compiled for the baseline x86-64 like the rest; only the functions here
 * carry target("avx2,f16c,popcnt"), and gs_kernels_cpu() installs them only
 * when __builtin_cpu_supports says the CPU has all three.
 *
 * Same bits as vec_scalar.c: fp16 goes through the F16C instructions with
 * round-to-nearest-even (elem.h matches them, NaN payloads included); bf16
 * rounding is integer arithmetic, the same formula as elem.h (the AVX-512
 * BF16 instruction would flush subnormals, so it is not used); arithmetic is
 * multiply then add, never fused. Tails run the scalar elem.h functions. */
#include <immintrin.h>

#include "kernels/cpu/cpu.h"
#include "kernels/elem.h"

#define AVX2 __attribute__((target("avx2,f16c,popcnt")))

/* 16 fp32 in two registers -> 16 bf16, round to nearest even, NaN quiet:
 * elem.h's gs_f32_to_bf16 eight lanes at a time. */
AVX2 static inline __m256i bf16_round8(__m256i x) {
  const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), q, nan);
}

AVX2 static inline __m256 bf16_widen8(const uint16_t *p) {
  __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

AVX2 static void v_add(size_t n, float *dst, const float *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_add_ps(_mm256_loadu_ps(dst + i), _mm256_loadu_ps(src + i));
    __m256 b = _mm256_add_ps(_mm256_loadu_ps(dst + i + 8), _mm256_loadu_ps(src + i + 8));
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  if (i + 8 <= n) { /* short rows (im2col, bias) are common: one more vector */
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), _mm256_loadu_ps(src + i)));
    i += 8;
  }
  for (; i < n; i++) dst[i] += src[i];
}

AVX2 static void v_axpy(size_t n, float a, const float *x, float *y) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 s = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    __m256 t = _mm256_add_ps(_mm256_loadu_ps(y + i + 8),
                             _mm256_mul_ps(va, _mm256_loadu_ps(x + i + 8)));
    _mm256_storeu_ps(y + i, s);
    _mm256_storeu_ps(y + i + 8, t);
  }
  if (i + 8 <= n) {
    __m256 s = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(y + i, s);
    i += 8;
  }
  for (; i < n; i++) y[i] += a * x[i];
}

AVX2 static void v_scale(size_t n, float a, float *x) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
  for (; i < n; i++) x[i] *= a;
}

AVX2 static void v_add_scalar(size_t n, float a, float *x) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), va));
  for (; i < n; i++) x[i] += a;
}

AVX2 static float v_sum(size_t n, const float *x) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  size_t q = n & ~(size_t)15;
  for (size_t i = 0; i < q; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(x + i));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(x + i + 8));
  }
  float acc[16];
  _mm256_storeu_ps(acc, lo);
  _mm256_storeu_ps(acc + 8, hi);
  return gs_cpu_sum_finish(acc, n, x);
}

AVX2 static void v_relu(size_t n, const float *x, float *y) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, _mm256_andnot_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), v));
  }
  for (; i < n; i++) y[i] = gs_relu1(x[i]);
}

AVX2 static void v_relu_grad(size_t n, const float *y, const float *dy, float *dx) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 le = _mm256_cmp_ps(_mm256_loadu_ps(y + i), zero, _CMP_LE_OQ);
    _mm256_storeu_ps(dx + i, _mm256_andnot_ps(le, _mm256_loadu_ps(dy + i)));
  }
  for (; i < n; i++) dx[i] = gs_relu_grad1(y[i], dy[i]);
}

/* One loop per case, so the inner loop has no branches; each case does
 * gs_sgd1's operations in gs_sgd1's order. */
AVX2 static void v_sgd(size_t n, float *p, const float *g, float *buf, float lr, float m,
                       float wd, int first) {
  const __m256 vlr = _mm256_set1_ps(-lr), vm = _mm256_set1_ps(m), vwd = _mm256_set1_ps(wd);
  const int has_wd = wd != 0.0f, has_m = m != 0.0f;
  size_t i = 0;
  if (!has_m) {
    for (; i + 8 <= n; i += 8) {
      __m256 vp = _mm256_loadu_ps(p + i), d = _mm256_loadu_ps(g + i);
      if (has_wd) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, vp));
      _mm256_storeu_ps(p + i, _mm256_add_ps(vp, _mm256_mul_ps(vlr, d)));
    }
  } else if (first) {
    for (; i + 8 <= n; i += 8) {
      __m256 vp = _mm256_loadu_ps(p + i), d = _mm256_loadu_ps(g + i);
      if (has_wd) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, vp));
      _mm256_storeu_ps(buf + i, d);
      _mm256_storeu_ps(p + i, _mm256_add_ps(vp, _mm256_mul_ps(vlr, d)));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      __m256 vp = _mm256_loadu_ps(p + i), d = _mm256_loadu_ps(g + i);
      if (has_wd) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, vp));
      d = _mm256_add_ps(_mm256_mul_ps(vm, _mm256_loadu_ps(buf + i)), d);
      _mm256_storeu_ps(buf + i, d);
      _mm256_storeu_ps(p + i, _mm256_add_ps(vp, _mm256_mul_ps(vlr, d)));
    }
  }
  float dummy = 0.0f;
  for (; i < n; i++) gs_sgd1(&p[i], g[i], has_m ? &buf[i] : &dummy, lr, m, wd, first);
}

AVX2 static void v_add_f16(size_t n, float *dst, const uint16_t *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 h = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), h));
  }
  for (; i < n; i++) dst[i] += gs_f16_to_f32(src[i]);
}

AVX2 static void v_add_bf16(size_t n, float *dst, const uint16_t *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), bf16_widen8(src + i)));
  for (; i < n; i++) dst[i] += gs_bf16_to_f32(src[i]);
}

AVX2 static void v_f32_to_f16(size_t n, uint16_t *dst, const float *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(dst + i), a);
    _mm_storeu_si128((__m128i *)(dst + i + 8), b);
  }
  if (i + 8 <= n) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(dst + i), a);
    i += 8;
  }
  for (; i < n; i++) dst[i] = gs_f32_to_f16(src[i]);
}

AVX2 static void v_f32_to_bf16(size_t n, uint16_t *dst, const float *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i)));
    __m256i b = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
    /* packus works per 128-bit lane: [a0-3 b0-3 a4-7 b4-7]; put it in order */
    __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256((__m256i *)(dst + i), h);
  }
  if (i + 8 <= n) {
    __m256i a = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i)));
    __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, a), 0xd8);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(h));
    i += 8;
  }
  for (; i < n; i++) dst[i] = gs_f32_to_bf16(src[i]);
}

AVX2 static void v_f16_to_f32(size_t n, float *dst, const uint16_t *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i + 8)));
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  if (i + 8 <= n) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    i += 8;
  }
  for (; i < n; i++) dst[i] = gs_f16_to_f32(src[i]);
}

AVX2 static void v_bf16_to_f32(size_t n, float *dst, const uint16_t *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16_widen8(src + i));
  for (; i < n; i++) dst[i] = gs_bf16_to_f32(src[i]);
}

AVX2 static size_t v_nonfinite_f32(size_t n, const float *x) {
  const __m256i e = _mm256_set1_epi32(0x7f800000);
  size_t bad = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), e);
    bad += (size_t)__builtin_popcount(
        (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, e))));
  }
  for (; i < n; i++) bad += !gs_f32_isfinite(x[i]);
  return bad;
}

/* 16 halves per step; movemask gives two bits per match. */
AVX2 static size_t nonfinite16(size_t n, const uint16_t *x, uint16_t expo) {
  const __m256i e = _mm256_set1_epi16((short)expo);
  size_t bad = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), e);
    bad += (size_t)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi16(v, e)))
           / 2;
  }
  for (; i < n; i++) bad += (x[i] & expo) == expo;
  return bad;
}

AVX2 static size_t v_nonfinite_f16(size_t n, const uint16_t *x) {
  return nonfinite16(n, x, 0x7c00u);
}

AVX2 static size_t v_nonfinite_bf16(size_t n, const uint16_t *x) {
  return nonfinite16(n, x, 0x7f80u);
}

/* Short rows (LeNet's are 28 and 10 floats): inline vector copies, no
 * memcpy call per row. */
AVX2 static void v_copy2d(size_t rows, size_t cols, float *dst, size_t dld, const float *src,
                          size_t sld) {
  for (size_t r = 0; r < rows; r++, dst += dld, src += sld) {
    size_t i = 0;
    for (; i + 8 <= cols; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
    if (i + 4 <= cols) {
      _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i));
      i += 4;
    }
    for (; i < cols; i++) dst[i] = src[i];
  }
}

AVX2 static void v_add2d(size_t rows, size_t cols, float *dst, size_t dld, const float *src,
                         size_t sld) {
  for (size_t r = 0; r < rows; r++, dst += dld, src += sld) {
    size_t i = 0;
    for (; i + 8 <= cols; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), _mm256_loadu_ps(src + i)));
    if (i + 4 <= cols) {
      _mm_storeu_ps(dst + i, _mm_add_ps(_mm_loadu_ps(dst + i), _mm_loadu_ps(src + i)));
      i += 4;
    }
    for (; i < cols; i++) dst[i] += src[i];
  }
}

const gs_cpu_vec gs_cpu_vec_avx2 = {
  .name = "avx2",
  .add = v_add,
  .axpy = v_axpy,
  .scale = v_scale,
  .add_scalar = v_add_scalar,
  .sum = v_sum,
  .relu = v_relu,
  .relu_grad = v_relu_grad,
  .sgd = v_sgd,
  .add_f16 = v_add_f16,
  .add_bf16 = v_add_bf16,
  .f32_to_f16 = v_f32_to_f16,
  .f32_to_bf16 = v_f32_to_bf16,
  .f16_to_f32 = v_f16_to_f32,
  .bf16_to_f32 = v_bf16_to_f32,
  .nonfinite_f32 = v_nonfinite_f32,
  .nonfinite_f16 = v_nonfinite_f16,
  .nonfinite_bf16 = v_nonfinite_bf16,
  .copy2d = v_copy2d,
  .add2d = v_add2d,
};
