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
 * multiply then add, never fused. Tails run the scalar elem.h functions.
 *
 * No alignment is assumed (cpu.h): vectors move with loadu / storeu, and
 * FP(p, i) / HP(p, i) only form the address of element i for them; tails
 * read and write through gs_load_* / gs_store_*. */
#include <immintrin.h>

#include "kernels/cpu/cpu.h"
#include "kernels/elem.h"

#define AVX2 __attribute__((target("avx2,f16c,popcnt")))
#define FP(p, i) ((float *)((char *)(p) + (i) * 4))
#define CFP(p, i) ((const float *)((const char *)(p) + (i) * 4))
#define HP(p, i) ((__m128i *)((char *)(p) + (i) * 2))
#define CHP(p, i) ((const __m128i *)((const char *)(p) + (i) * 2))
#define LD gs_load_f32
#define ST gs_store_f32

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

AVX2 static inline __m256 bf16_widen8(const void *p, size_t i) {
  __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(CHP(p, i)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

AVX2 static inline __m256 ld8(const void *p, size_t i) { return _mm256_loadu_ps(CFP(p, i)); }
AVX2 static inline void st8(void *p, size_t i, __m256 v) { _mm256_storeu_ps(FP(p, i), v); }
AVX2 static inline __m256 f16_widen8(const void *p, size_t i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(CHP(p, i)));
}

AVX2 static void v_add(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_add_ps(ld8(dst, i), ld8(src, i));
    __m256 b = _mm256_add_ps(ld8(dst, i + 8), ld8(src, i + 8));
    st8(dst, i, a);
    st8(dst, i + 8, b);
  }
  if (i + 8 <= n) { /* short rows (im2col, bias) are common: one more vector */
    st8(dst, i, _mm256_add_ps(ld8(dst, i), ld8(src, i)));
    i += 8;
  }
  for (; i < n; i++) ST(dst, i, LD(dst, i) + LD(src, i));
}

AVX2 static void v_axpy(size_t n, float a, const void *x, void *y) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 s = _mm256_add_ps(ld8(y, i), _mm256_mul_ps(va, ld8(x, i)));
    __m256 t = _mm256_add_ps(ld8(y, i + 8), _mm256_mul_ps(va, ld8(x, i + 8)));
    st8(y, i, s);
    st8(y, i + 8, t);
  }
  if (i + 8 <= n) {
    st8(y, i, _mm256_add_ps(ld8(y, i), _mm256_mul_ps(va, ld8(x, i))));
    i += 8;
  }
  for (; i < n; i++) ST(y, i, LD(y, i) + a * LD(x, i));
}

AVX2 static void v_scale(size_t n, float a, void *x) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) st8(x, i, _mm256_mul_ps(ld8(x, i), va));
  for (; i < n; i++) ST(x, i, LD(x, i) * a);
}

AVX2 static void v_add_scalar(size_t n, float a, void *x) {
  __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) st8(x, i, _mm256_add_ps(ld8(x, i), va));
  for (; i < n; i++) ST(x, i, LD(x, i) + a);
}

AVX2 static float v_sum(size_t n, const void *x) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  size_t q = n & ~(size_t)15;
  for (size_t i = 0; i < q; i += 16) {
    lo = _mm256_add_ps(lo, ld8(x, i));
    hi = _mm256_add_ps(hi, ld8(x, i + 8));
  }
  float acc[16];
  _mm256_storeu_ps(acc, lo);
  _mm256_storeu_ps(acc + 8, hi);
  return gs_cpu_sum_finish(acc, n, x);
}

AVX2 static void v_relu(size_t n, const void *x, void *y) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = ld8(x, i);
    st8(y, i, _mm256_andnot_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), v));
  }
  for (; i < n; i++) ST(y, i, gs_relu1(LD(x, i)));
}

AVX2 static void v_relu_grad(size_t n, const void *y, const void *dy, void *dx) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 le = _mm256_cmp_ps(ld8(y, i), zero, _CMP_LE_OQ);
    st8(dx, i, _mm256_andnot_ps(le, ld8(dy, i)));
  }
  for (; i < n; i++) ST(dx, i, gs_relu_grad1(LD(y, i), LD(dy, i)));
}

/* One loop per case, so the inner loop has no branches; each case does
 * gs_sgd1's operations in gs_sgd1's order. */
AVX2 static void v_sgd(size_t n, void *p, const void *g, void *buf, float lr, float m,
                       float wd, int first) {
  const __m256 vlr = _mm256_set1_ps(-lr), vm = _mm256_set1_ps(m), vwd = _mm256_set1_ps(wd);
  const int has_wd = wd != 0.0f, has_m = m != 0.0f;
  size_t i = 0;
  if (!has_m) {
    for (; i + 8 <= n; i += 8) {
      __m256 vp = ld8(p, i), d = ld8(g, i);
      if (has_wd) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, vp));
      st8(p, i, _mm256_add_ps(vp, _mm256_mul_ps(vlr, d)));
    }
  } else if (first) {
    for (; i + 8 <= n; i += 8) {
      __m256 vp = ld8(p, i), d = ld8(g, i);
      if (has_wd) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, vp));
      st8(buf, i, d);
      st8(p, i, _mm256_add_ps(vp, _mm256_mul_ps(vlr, d)));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      __m256 vp = ld8(p, i), d = ld8(g, i);
      if (has_wd) d = _mm256_add_ps(d, _mm256_mul_ps(vwd, vp));
      d = _mm256_add_ps(_mm256_mul_ps(vm, ld8(buf, i)), d);
      st8(buf, i, d);
      st8(p, i, _mm256_add_ps(vp, _mm256_mul_ps(vlr, d)));
    }
  }
  for (; i < n; i++) {
    float pi = LD(p, i), bi = has_m ? LD(buf, i) : 0.0f;
    gs_sgd1(&pi, LD(g, i), &bi, lr, m, wd, first);
    ST(p, i, pi);
    if (has_m) ST(buf, i, bi);
  }
}

AVX2 static void v_add_f16(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) st8(dst, i, _mm256_add_ps(ld8(dst, i), f16_widen8(src, i)));
  for (; i < n; i++) ST(dst, i, LD(dst, i) + gs_f16_to_f32(gs_load_u16(src, i)));
}

AVX2 static void v_add_bf16(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) st8(dst, i, _mm256_add_ps(ld8(dst, i), bf16_widen8(src, i)));
  for (; i < n; i++) ST(dst, i, LD(dst, i) + gs_bf16_to_f32(gs_load_u16(src, i)));
}

AVX2 static void v_f32_to_f16(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm256_cvtps_ph(ld8(src, i), _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(ld8(src, i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(HP(dst, i), a);
    _mm_storeu_si128(HP(dst, i + 8), b);
  }
  if (i + 8 <= n) {
    _mm_storeu_si128(HP(dst, i), _mm256_cvtps_ph(ld8(src, i), _MM_FROUND_TO_NEAREST_INT));
    i += 8;
  }
  for (; i < n; i++) gs_store_u16(dst, i, gs_f32_to_f16(LD(src, i)));
}

AVX2 static void v_f32_to_bf16(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i a = bf16_round8(_mm256_castps_si256(ld8(src, i)));
    __m256i b = bf16_round8(_mm256_castps_si256(ld8(src, i + 8)));
    /* packus works per 128-bit lane: [a0-3 b0-3 a4-7 b4-7]; put it in order */
    __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256((__m256i *)HP(dst, i), h);
  }
  if (i + 8 <= n) {
    __m256i a = bf16_round8(_mm256_castps_si256(ld8(src, i)));
    __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, a), 0xd8);
    _mm_storeu_si128(HP(dst, i), _mm256_castsi256_si128(h));
    i += 8;
  }
  for (; i < n; i++) gs_store_u16(dst, i, gs_f32_to_bf16(LD(src, i)));
}

AVX2 static void v_f16_to_f32(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = f16_widen8(src, i), b = f16_widen8(src, i + 8);
    st8(dst, i, a);
    st8(dst, i + 8, b);
  }
  if (i + 8 <= n) {
    st8(dst, i, f16_widen8(src, i));
    i += 8;
  }
  for (; i < n; i++) ST(dst, i, gs_f16_to_f32(gs_load_u16(src, i)));
}

AVX2 static void v_bf16_to_f32(size_t n, void *dst, const void *src) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) st8(dst, i, bf16_widen8(src, i));
  for (; i < n; i++) ST(dst, i, gs_bf16_to_f32(gs_load_u16(src, i)));
}

AVX2 static size_t v_nonfinite_f32(size_t n, const void *x) {
  const __m256i e = _mm256_set1_epi32(0x7f800000);
  size_t bad = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_and_si256(_mm256_castps_si256(ld8(x, i)), e);
    bad += (size_t)__builtin_popcount(
        (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, e))));
  }
  for (; i < n; i++) bad += !gs_f32_isfinite(LD(x, i));
  return bad;
}

/* 16 halves per step; movemask gives two bits per match. */
AVX2 static size_t nonfinite16(size_t n, const void *x, uint16_t expo) {
  const __m256i e = _mm256_set1_epi16((short)expo);
  size_t bad = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)CHP(x, i)), e);
    bad += (size_t)__builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi16(v, e)))
           / 2;
  }
  for (; i < n; i++) bad += (gs_load_u16(x, i) & expo) == expo;
  return bad;
}

AVX2 static size_t v_nonfinite_f16(size_t n, const void *x) { return nonfinite16(n, x, 0x7c00u); }

AVX2 static size_t v_nonfinite_bf16(size_t n, const void *x) {
  return nonfinite16(n, x, 0x7f80u);
}

/* Short rows (LeNet's are 28 and 10 floats): inline vector copies, no
 * memcpy call per row. */
AVX2 static void v_copy2d(size_t rows, size_t cols, void *dst, size_t dld, const void *src,
                          size_t sld) {
  for (size_t r = 0; r < rows; r++) {
    void *d = FP(dst, r * dld);
    const void *s = CFP(src, r * sld);
    size_t i = 0;
    for (; i + 8 <= cols; i += 8) st8(d, i, ld8(s, i));
    if (i + 4 <= cols) {
      _mm_storeu_ps(FP(d, i), _mm_loadu_ps(CFP(s, i)));
      i += 4;
    }
    for (; i < cols; i++) ST(d, i, LD(s, i));
  }
}

AVX2 static void v_add2d(size_t rows, size_t cols, void *dst, size_t dld, const void *src,
                         size_t sld) {
  for (size_t r = 0; r < rows; r++) {
    void *d = FP(dst, r * dld);
    const void *s = CFP(src, r * sld);
    size_t i = 0;
    for (; i + 8 <= cols; i += 8) st8(d, i, _mm256_add_ps(ld8(d, i), ld8(s, i)));
    if (i + 4 <= cols) {
      _mm_storeu_ps(FP(d, i), _mm_add_ps(_mm_loadu_ps(CFP(d, i)), _mm_loadu_ps(CFP(s, i))));
      i += 4;
    }
    for (; i < cols; i++) ST(d, i, LD(d, i) + LD(s, i));
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
