/* vec_avx512.c: the AVX-512 (F, BW, VL) path of the CPU vector ops (see cpu.h).
 *
 * The AVX2 path with 16 lanes, and masked loads/stores instead of scalar
 * tails. Installed only when __builtin_cpu_supports reports avx512f, avx512bw
 * and avx512vl (which also means the OS saves the registers). Same bits as
 * vec_scalar.c, for the reasons given in vec_avx2.c; vcvtneps2bf16 (AVX-512
 * BF16) is not used because it flushes subnormals to zero. No alignment is
 * assumed (cpu.h): masked and plain loads and stores are the unaligned
 * forms, and FP(p, i) only forms the address of element i for them. */
#include <immintrin.h>

#include "kernels/cpu/cpu.h"
#include "kernels/elem.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,popcnt")))
#define FP(p, i) ((float *)((char *)(p) + (i) * 4))
#define CFP(p, i) ((const float *)((const char *)(p) + (i) * 4))
#define HP(p, i) ((void *)((char *)(p) + (i) * 2))
#define CHP(p, i) ((const void *)((const char *)(p) + (i) * 2))

AVX512 static inline __mmask16 tail16(size_t left) {
  return (__mmask16)(left >= 16 ? 0xffffu : (1u << left) - 1u);
}

AVX512 static inline __m512i bf16_round16(__m512i x) {
  const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs), inf);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(r, nan, q);
}

/* Every op below is one masked 16-lane loop: full vectors, then one masked
 * vector for the tail (masked-off lanes are neither read nor written). */
#define LOOP16(n) for (size_t i = 0; i < (n); i += 16)
#define MASK(n) __mmask16 k = tail16((n) - i)

AVX512 static inline __m512 mld(__mmask16 k, const void *p, size_t i) {
  return _mm512_maskz_loadu_ps(k, CFP(p, i));
}
AVX512 static inline void mst(void *p, size_t i, __mmask16 k, __m512 v) {
  _mm512_mask_storeu_ps(FP(p, i), k, v);
}

AVX512 static void v_add(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    mst(dst, i, k, _mm512_add_ps(mld(k, dst, i), mld(k, src, i)));
  }
}

AVX512 static void v_axpy(size_t n, float a, const void *x, void *y) {
  const __m512 va = _mm512_set1_ps(a);
  LOOP16(n) {
    MASK(n);
    mst(y, i, k, _mm512_add_ps(mld(k, y, i), _mm512_mul_ps(va, mld(k, x, i))));
  }
}

AVX512 static void v_scale(size_t n, float a, void *x) {
  const __m512 va = _mm512_set1_ps(a);
  LOOP16(n) {
    MASK(n);
    mst(x, i, k, _mm512_mul_ps(mld(k, x, i), va));
  }
}

AVX512 static void v_add_scalar(size_t n, float a, void *x) {
  const __m512 va = _mm512_set1_ps(a);
  LOOP16(n) {
    MASK(n);
    mst(x, i, k, _mm512_add_ps(mld(k, x, i), va));
  }
}

AVX512 static float v_sum(size_t n, const void *x) {
  __m512 acc = _mm512_setzero_ps();
  size_t q = n & ~(size_t)15;
  for (size_t i = 0; i < q; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(CFP(x, i)));
  float lanes[16];
  _mm512_storeu_ps(lanes, acc);
  return gs_cpu_sum_finish(lanes, n, x);
}

AVX512 static void v_relu(size_t n, const void *x, void *y) {
  const __m512 zero = _mm512_setzero_ps();
  LOOP16(n) {
    MASK(n);
    __m512 v = mld(k, x, i);
    __mmask16 neg = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
    mst(y, i, k, _mm512_mask_mov_ps(v, neg, zero));
  }
}

AVX512 static void v_relu_grad(size_t n, const void *y, const void *dy, void *dx) {
  const __m512 zero = _mm512_setzero_ps();
  LOOP16(n) {
    MASK(n);
    __mmask16 le = _mm512_cmp_ps_mask(mld(k, y, i), zero, _CMP_LE_OQ);
    mst(dx, i, k, _mm512_mask_mov_ps(mld(k, dy, i), le, zero));
  }
}

AVX512 static void v_sgd(size_t n, void *p, const void *g, void *buf, float lr, float m,
                         float wd, int first) {
  const __m512 vlr = _mm512_set1_ps(-lr), vm = _mm512_set1_ps(m), vwd = _mm512_set1_ps(wd);
  const int has_wd = wd != 0.0f, has_m = m != 0.0f;
  if (!has_m) {
    LOOP16(n) {
      MASK(n);
      __m512 vp = mld(k, p, i), d = mld(k, g, i);
      if (has_wd) d = _mm512_add_ps(d, _mm512_mul_ps(vwd, vp));
      mst(p, i, k, _mm512_add_ps(vp, _mm512_mul_ps(vlr, d)));
    }
  } else if (first) {
    LOOP16(n) {
      MASK(n);
      __m512 vp = mld(k, p, i), d = mld(k, g, i);
      if (has_wd) d = _mm512_add_ps(d, _mm512_mul_ps(vwd, vp));
      mst(buf, i, k, d);
      mst(p, i, k, _mm512_add_ps(vp, _mm512_mul_ps(vlr, d)));
    }
  } else {
    LOOP16(n) {
      MASK(n);
      __m512 vp = mld(k, p, i), d = mld(k, g, i);
      if (has_wd) d = _mm512_add_ps(d, _mm512_mul_ps(vwd, vp));
      d = _mm512_add_ps(_mm512_mul_ps(vm, mld(k, buf, i)), d);
      mst(buf, i, k, d);
      mst(p, i, k, _mm512_add_ps(vp, _mm512_mul_ps(vlr, d)));
    }
  }
}

AVX512 static inline __m512 f16_widen16(__mmask16 k, const void *p, size_t i) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, CHP(p, i)));
}

AVX512 static inline __m512 bf16_widen16(__mmask16 k, const void *p, size_t i) {
  __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, CHP(p, i)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

AVX512 static void v_add_f16(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    mst(dst, i, k, _mm512_add_ps(mld(k, dst, i), f16_widen16(k, src, i)));
  }
}

AVX512 static void v_add_bf16(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    mst(dst, i, k, _mm512_add_ps(mld(k, dst, i), bf16_widen16(k, src, i)));
  }
}

AVX512 static void v_f32_to_f16(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    __m256i h = _mm512_cvtps_ph(mld(k, src, i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(HP(dst, i), k, h);
  }
}

AVX512 static void v_f32_to_bf16(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    __m512i h = bf16_round16(_mm512_castps_si512(mld(k, src, i)));
    _mm256_mask_storeu_epi16(HP(dst, i), k, _mm512_cvtepi32_epi16(h));
  }
}

AVX512 static void v_f16_to_f32(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    mst(dst, i, k, f16_widen16(k, src, i));
  }
}

AVX512 static void v_bf16_to_f32(size_t n, void *dst, const void *src) {
  LOOP16(n) {
    MASK(n);
    mst(dst, i, k, bf16_widen16(k, src, i));
  }
}

AVX512 static size_t v_nonfinite_f32(size_t n, const void *x) {
  const __m512i e = _mm512_set1_epi32(0x7f800000);
  size_t bad = 0;
  LOOP16(n) {
    MASK(n);
    __m512i v = _mm512_and_si512(_mm512_castps_si512(mld(k, x, i)), e);
    bad += (size_t)__builtin_popcount(_mm512_mask_cmpeq_epi32_mask(k, v, e));
  }
  return bad;
}

AVX512 static size_t nonfinite16(size_t n, const void *x, uint16_t expo) {
  const __m512i e = _mm512_set1_epi16((short)expo);
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 32) {
    size_t left = n - i;
    __mmask32 k = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1u);
    __m512i v = _mm512_and_si512(_mm512_maskz_loadu_epi16(k, CHP(x, i)), e);
    bad += (size_t)__builtin_popcount(_mm512_mask_cmpeq_epi16_mask(k, v, e));
  }
  return bad;
}

AVX512 static size_t v_nonfinite_f16(size_t n, const void *x) {
  return nonfinite16(n, x, 0x7c00u);
}

AVX512 static size_t v_nonfinite_bf16(size_t n, const void *x) {
  return nonfinite16(n, x, 0x7f80u);
}

/* Short rows (im2col / col2im: LeNet's are 28 and 10 floats) use plain
 * 16-, 8- and 4-lane moves and scalar tails, not masked stores: a load
 * that overlaps a recent masked store waits for it to retire (no store
 * forwarding), and col2im reads what its previous call just wrote; masked
 * stores made it 3x slower. */
AVX512 static void v_copy2d(size_t rows, size_t cols, void *dst, size_t dld, const void *src,
                            size_t sld) {
  for (size_t r = 0; r < rows; r++) {
    void *d = FP(dst, r * dld);
    const void *s = CFP(src, r * sld);
    size_t i = 0;
    for (; i + 16 <= cols; i += 16) _mm512_storeu_ps(FP(d, i), _mm512_loadu_ps(CFP(s, i)));
    if (i + 8 <= cols) {
      _mm256_storeu_ps(FP(d, i), _mm256_loadu_ps(CFP(s, i)));
      i += 8;
    }
    if (i + 4 <= cols) {
      _mm_storeu_ps(FP(d, i), _mm_loadu_ps(CFP(s, i)));
      i += 4;
    }
    for (; i < cols; i++) gs_store_f32(d, i, gs_load_f32(s, i));
  }
}

AVX512 static void v_add2d(size_t rows, size_t cols, void *dst, size_t dld, const void *src,
                           size_t sld) {
  for (size_t r = 0; r < rows; r++) {
    void *d = FP(dst, r * dld);
    const void *s = CFP(src, r * sld);
    size_t i = 0;
    for (; i + 16 <= cols; i += 16)
      _mm512_storeu_ps(FP(d, i),
                       _mm512_add_ps(_mm512_loadu_ps(CFP(d, i)), _mm512_loadu_ps(CFP(s, i))));
    if (i + 8 <= cols) {
      _mm256_storeu_ps(FP(d, i),
                       _mm256_add_ps(_mm256_loadu_ps(CFP(d, i)), _mm256_loadu_ps(CFP(s, i))));
      i += 8;
    }
    if (i + 4 <= cols) {
      _mm_storeu_ps(FP(d, i), _mm_add_ps(_mm_loadu_ps(CFP(d, i)), _mm_loadu_ps(CFP(s, i))));
      i += 4;
    }
    for (; i < cols; i++) gs_store_f32(d, i, gs_load_f32(d, i) + gs_load_f32(s, i));
  }
}

const gs_cpu_vec gs_cpu_vec_avx512 = {
  .name = "avx512",
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
