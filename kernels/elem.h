/* elem.h: per-element math shared by the CPU kernels and the CUDA kernels.
 *
 * Every function here is `GS_HD static inline`: __host__ __device__ under
 * nvcc, plain static inline under gcc. The CPU kernels loop over these and
 * the .cu kernels call them per thread, so the CPU test suite checks the
 * arithmetic the GPU runs (only the looping differs).
 *
 * Conversions are bit-exact round-to-nearest-even, and match F16C's
 * vcvtps2ph (imm 0) including NaN payloads (kept, quiet bit set), so the
 * SIMD paths and this reference give the same bits. */
#ifndef GS_ELEM_H
#define GS_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GS_HD __host__ __device__
#else
#define GS_HD
#endif

GS_HD static inline uint32_t gs_f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

GS_HD static inline float gs_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* Element i of a buffer at any byte address. Received frames and file
 * payloads have no alignment (kernels.h), so host code never reads them
 * through a cast to a wider type; memcpy compiles to one unaligned move.
 * Device memory comes from alloc() at whole-element offsets. */
GS_HD static inline float gs_load_f32(const void *p, size_t i) {
#ifdef __CUDA_ARCH__
  return ((const float *)p)[i];
#else
  float v;
  memcpy(&v, (const char *)p + i * sizeof v, sizeof v);
  return v;
#endif
}

GS_HD static inline void gs_store_f32(void *p, size_t i, float v) {
#ifdef __CUDA_ARCH__
  ((float *)p)[i] = v;
#else
  memcpy((char *)p + i * sizeof v, &v, sizeof v);
#endif
}

GS_HD static inline uint16_t gs_load_u16(const void *p, size_t i) {
#ifdef __CUDA_ARCH__
  return ((const uint16_t *)p)[i];
#else
  uint16_t v;
  memcpy(&v, (const char *)p + i * sizeof v, sizeof v);
  return v;
#endif
}

GS_HD static inline void gs_store_u16(void *p, size_t i, uint16_t v) {
#ifdef __CUDA_ARCH__
  ((uint16_t *)p)[i] = v;
#else
  memcpy((char *)p + i * sizeof v, &v, sizeof v);
#endif
}

/* fp32 -> IEEE binary16, round to nearest even. */
GS_HD static inline uint16_t gs_f32_to_f16(float f) {
  uint32_t x = gs_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {               /* inf or NaN */
    if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (ax < 0x38800000u) {                /* below 2^-14: subnormal or zero in fp16 */
    if (ax < 0x33000000u) return sign;   /* <= 2^-25: rounds to 0 (ties to even) */
    uint32_t e = ax >> 23;               /* 102..112 */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;           /* 14..24 */
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (uint16_t)(sign | r);
  }
  /* normal: rebias exponent 127 -> 15, round the 13 dropped bits */
  uint32_t r = (ax - 0x38000000u) >> 13;
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
  return (uint16_t)(sign | r);
}

/* IEEE binary16 -> fp32 (exact). */
GS_HD static inline float gs_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1fu) {                      /* inf, or NaN made quiet as F16C's vcvtph2ps does */
    x = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u);
  } else if (e != 0) {
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    x = sign;
  } else {                               /* subnormal: normalize */
    uint32_t ex = 113u;
    while (!(m & 0x400u)) { m <<= 1; ex--; }
    x = sign | (ex << 23) | ((m & 0x3ffu) << 13);
  }
  return gs_bits_f32(x);
}

/* fp32 -> bfloat16, round to nearest even; NaN stays NaN (quiet). */
GS_HD static inline uint16_t gs_f32_to_bf16(float f) {
  uint32_t x = gs_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

GS_HD static inline float gs_bf16_to_f32(uint16_t h) { return gs_bits_f32((uint32_t)h << 16); }

GS_HD static inline int gs_f32_isfinite(float f) {
  return (gs_f32_bits(f) & 0x7f800000u) != 0x7f800000u;
}
GS_HD static inline int gs_f16_isfinite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }
GS_HD static inline int gs_bf16_isfinite(uint16_t h) { return (h & 0x7f80u) != 0x7f80u; }

/* Softmax cross-entropy of one row i (classes logits): probabilities into
 * probs, the row's loss (log-sum-exp with the maximum subtracted, in
 * double, so logits of 1e4 give finite values), whether the argmax hits
 * the label, and bad = 1 for a label outside [0, classes). */
GS_HD static inline void gs_xent_row(int i, int classes, const float *logits,
                                        const int32_t *labels, float *probs, double *loss,
                                        int *hit, int *bad) {
  const float *z = logits + (size_t)i * classes;
  float *p = probs + (size_t)i * classes;
  int y = labels[i];
  float mx = z[0];
  int arg = 0;
  for (int j = 1; j < classes; j++)
    if (z[j] > mx) { mx = z[j]; arg = j; }
  double sum = 0.0;
  for (int j = 0; j < classes; j++) sum += exp((double)z[j] - (double)mx);
  for (int j = 0; j < classes; j++) p[j] = (float)(exp((double)z[j] - (double)mx) / sum);
  if (y < 0 || y >= classes) {
    *loss = 0.0;
    *hit = 0;
    *bad = 1;
    return;
  }
  *loss = log(sum) - ((double)z[y] - (double)mx);
  *hit = arg == y;
  *bad = 0;
}

/* dlogits[i, j] = (probs[i, j] - onehot) * f, f = scale / batch */
GS_HD static inline float gs_xent_grad1(float prob, int hit, float f) {
  return (prob - (hit ? 1.0f : 0.0f)) * f;
}

/* The winner of a 2x2 max-pool window at (oy, ox) of a plane of width w:
 * the first maximum in row-major order, or a NaN (PyTorch's rule: v > best
 * or isnan(v)); its index within the plane. */
GS_HD static inline int gs_maxpool1(const float *xp, int w, int oy, int ox) {
  int best = (2 * oy) * w + 2 * ox;
  float bv = xp[best];
  for (int dy = 0; dy < 2; dy++)
    for (int dx = 0; dx < 2; dx++) {
      int idx = (2 * oy + dy) * w + 2 * ox + dx;
      float v = xp[idx];
      if (v > bv || v != v) {
        best = idx;
        bv = v;
      }
    }
  return best;
}

/* ReLU as PyTorch's (clamp_min / threshold_backward): NaN passes through
 * forward and backward, so an overflow upstream still reaches the loss and
 * the loss scaler sees it; -0 stays -0. */
/* A pixel as torch's ToTensor makes it: img.float().div(255), a division
 * (not a multiplication by 1/255), so the same bits on every path. */
GS_HD static inline float gs_pixel1(uint8_t v) { return (float)v / 255.0f; }

GS_HD static inline float gs_relu1(float x) { return x < 0.0f ? 0.0f : x; }
GS_HD static inline float gs_relu_grad1(float y, float dy) { return y <= 0.0f ? 0.0f : dy; }

/* Separately rounded multiply and add. nvcc fuses a*b+c into an FMA unless
 * told otherwise (--fmad=true is its default); __fmul_rn / __fadd_rn are
 * never fused. The host kernels are built with -ffp-contract=off. */
#ifdef __CUDA_ARCH__
#define GS_MUL(a, b) __fmul_rn((a), (b))
#define GS_ADD(a, b) __fadd_rn((a), (b))
#else
#define GS_MUL(a, b) ((a) * (b))
#define GS_ADD(a, b) ((a) + (b))
#endif

/* One element of torch.optim.SGD (dampening 0, no Nesterov):
 *   d = g + wd*p; buf = first ? d : m*buf + d; p -= lr*buf.
 * Written as separate roundings in PyTorch's order (no FMA on any path), so
 * every device and every SIMD path gives the same bits. */
GS_HD static inline void gs_sgd1(float *p, float g, float *buf, float lr, float m, float wd,
                                 int first) {
  float d = g;
  if (wd != 0.0f) d = GS_ADD(d, GS_MUL(wd, *p));
  if (m != 0.0f) {
    d = first ? d : GS_ADD(GS_MUL(m, *buf), d);
    *buf = d;
  }
  *p = GS_ADD(*p, GS_MUL(-lr, d));
}

#endif
