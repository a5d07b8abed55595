/* ops.h: the per-thread bodies of the CUDA kernels, in plain C.
 *
 * Each .cu kernel in ops.cu is a grid-stride loop (or a block reduction)
 * around one of these GS_HD functions, so the index arithmetic a GPU thread
 * runs is ordinary C that the CPU test suite can run too:
 * tests/gpu/test_cuda_ops_host.c loops over every "thread" on the host and
 * compares with the CPU table, with no GPU and under ASan. Only the launch
 * configuration, the shared-memory trees and cuBLAS stay GPU-only.
 *
 * Gathers instead of scatters: col2im and maxpool backward compute each
 * output element from its inputs (no atomics), adding in the same order
 * as the CPU loops, so both give the same bits and every run is
 * deterministic. The per-element arithmetic itself is kernels/elem.h. */
#ifndef GS_CUDA_OPS_H
#define GS_CUDA_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/elem.h"
#include "kernels/kernels.h"
#ifdef __cplusplus
}
#endif

/* Threads per block of every kernel, and of the block reductions' trees. */
#define GS_CUDA_THREADS 256

/* y[r, :] += bias, one element per index of rows*cols */
GS_HD static inline void gs_op_bias_add(size_t i, int cols, const float *bias, float *y) {
  y[i] += bias[i % (size_t)cols];
}

/* bias_grad: a block takes 32 columns; each of its GS_BG_PARTS warps sums
 * rows w, w + GS_BG_PARTS, ... of a column (one lane per column, so every
 * load of a warp is one coalesced row segment, and the whole block keeps
 * many loads in flight), then the parts are added in a fixed tree
 * (gs_op_tree_step). Deterministic, not the CPU's sequential order: a
 * column summed in row order by one thread waits on one load after
 * another, which at batch 1024 cost a training step several times what
 * the GEMM beside it did. */
#define GS_BG_COLS 32
#define GS_BG_PARTS (GS_CUDA_THREADS / GS_BG_COLS)
GS_HD static inline float gs_op_bias_grad_part(int j, int w, int rows, int cols,
                                               const float *dy) {
  float s = 0.0f;
  for (int r = w; r < rows; r += GS_BG_PARTS) s += dy[(size_t)r * cols + j];
  return s;
}

/* y[i, ch, :] += bias[ch], one element per index of n*c*plane */
GS_HD static inline void gs_op_bias_add_nchw(size_t i, int c, int plane, const float *bias,
                                             float *y) {
  y[i] += bias[(i / (size_t)plane) % (size_t)c];
}

/* One thread's share of channel ch's sum for bias_grad_nchw: elements
 * t, t+nt, t+2nt ... of the n*plane values of that channel. The block then
 * adds the nt partials in a fixed tree (deterministic, not the CPU order). */
GS_HD static inline float gs_op_bias_grad_nchw_part(int ch, int t, int nt, int n, int c,
                                                    int plane, const float *dy) {
  float s = 0.0f;
  size_t total = (size_t)n * plane;
  for (size_t e = (size_t)t; e < total; e += (size_t)nt) {
    size_t i = e / (size_t)plane, j = e % (size_t)plane;
    s += dy[(i * c + ch) * (size_t)plane + j];
  }
  return s;
}

/* The shared-memory tree of a block reduction, written once so the host
 * simulation in the tests and the kernel add in the same order:
 * for s = nt/2 .. 1: v[t] += v[t + s]. Step `s` of thread t. */
GS_HD static inline void gs_op_tree_step(float *v, int t, int s) {
  if (t < s) v[t] += v[t + s];
}

/* Softmax cross-entropy of row i, in double as the CPU table does:
 * probs, the row's loss log(sum) - (z[y] - max), and whether argmax == y.
 * *bad = 1 when the label is outside [0, classes) (loss and hit 0 then). */
/* What xent_forward copies back to the host. */
typedef struct gs_xent_result {
  double loss;      /* sum over rows, in row order */
  int correct;
  int bad_row;      /* first row with a label out of range, -1 if none */
  int bad_label;
  float mean_loss;  /* (float)(loss / batch), as the CPU table rounds it */
} gs_xent_result;

/* The batch total, summed in row order so that it matches the CPU bit for
 * bit: one row at a time into an accumulator (the kernel stages the rows
 * in shared memory and one thread adds them), then the result. */
typedef struct gs_xent_acc {
  double s;
  int correct, bad_row, bad_label;
} gs_xent_acc;

GS_HD static inline gs_xent_acc gs_xent_acc_start(void) {
  gs_xent_acc a = {0.0, 0, -1, 0};
  return a;
}

GS_HD static inline void gs_xent_acc_row(gs_xent_acc *a, int i, const int32_t *labels,
                                         double loss, int hit, int bad) {
  if (bad) {
    if (a->bad_row < 0) { a->bad_row = i; a->bad_label = labels[i]; }
    return;
  }
  a->s += loss;
  a->correct += hit;
}

GS_HD static inline void gs_xent_acc_end(const gs_xent_acc *a, int batch, gs_xent_result *r) {
  r->loss = a->s;
  r->correct = a->correct;
  r->bad_row = a->bad_row;
  r->bad_label = a->bad_label;
  r->mean_loss = batch > 0 ? (float)(a->s / batch) : 0.0f;
}

GS_HD static inline void gs_op_xent_total(int batch, const int32_t *labels, const double *loss,
                                          const int *hit, const int *bad, gs_xent_result *r) {
  gs_xent_acc a = gs_xent_acc_start();
  for (int i = 0; i < batch; i++) gs_xent_acc_row(&a, i, labels, loss[i], hit[i], bad[i]);
  gs_xent_acc_end(&a, batch, r);
}

/* dlogits = (probs - onehot) * f with f = scale / batch computed once on
 * the host, one element per index of batch*classes */
GS_HD static inline void gs_op_xent_backward(size_t idx, int classes, const float *probs,
                                             const int32_t *labels, float f, float *dlogits) {
  size_t i = idx / (size_t)classes;
  int j = (int)(idx % (size_t)classes);
  dlogits[idx] = gs_xent_grad1(probs[idx], j == labels[i], f);
}

/* col[(c*kh + i)*kw + j][oy*ow + ox], one element per index of
 * c*kh*kw*oh*ow (that index is exactly the element's offset in col) */
GS_HD static inline void gs_op_im2col(size_t idx, const gs_conv_desc *d, const float *img,
                                      float *col) {
  size_t plane = (size_t)d->oh * d->ow;
  size_t r = idx / plane, pos = idx % plane;
  int j = (int)(r % (size_t)d->kw);
  int i = (int)((r / (size_t)d->kw) % (size_t)d->kh);
  int c = (int)(r / ((size_t)d->kw * d->kh));
  int oy = (int)(pos / (size_t)d->ow), ox = (int)(pos % (size_t)d->ow);
  int y = oy * d->stride - d->pad + i, x = ox * d->stride - d->pad + j;
  col[idx] = (y >= 0 && y < d->h && x >= 0 && x < d->w)
                 ? img[((size_t)c * d->h + y) * d->w + x] : 0.0f;
}

/* img[c, y, x] += every col entry that im2col took from it, gathered in
 * (j, i) order, which is the order the CPU's scatter adds them in. One
 * element per index of c*h*w. */
GS_HD static inline void gs_op_col2im(size_t idx, const gs_conv_desc *d, const float *col,
                                      float *img) {
  size_t plane = (size_t)d->oh * d->ow;
  int x = (int)(idx % (size_t)d->w);
  int y = (int)((idx / (size_t)d->w) % (size_t)d->h);
  int c = (int)(idx / ((size_t)d->w * d->h));
  float v = img[idx];
  for (int j = 0; j < d->kw; j++) {
    int tx = x + d->pad - j;
    if (tx < 0 || tx % d->stride) continue;
    int ox = tx / d->stride;
    if (ox >= d->ow) continue;
    for (int i = 0; i < d->kh; i++) {
      int ty = y + d->pad - i;
      if (ty < 0 || ty % d->stride) continue;
      int oy = ty / d->stride;
      if (oy >= d->oh) continue;
      v += col[((size_t)(c * d->kh + i) * d->kw + j) * plane + (size_t)oy * d->ow + ox];
    }
  }
  img[idx] = v;
}

/* 2x2 / stride 2 max pool, one output per index of planes*(h/2)*(w/2),
 * the window's winner as the CPU picks it (elem.h gs_maxpool1). */
GS_HD static inline void gs_op_maxpool_forward(size_t o, int h, int w, const float *x, float *y,
                                               int32_t *argmax) {
  int oh = h / 2, ow = w / 2;
  int ox = (int)(o % (size_t)ow);
  int oy = (int)((o / (size_t)ow) % (size_t)oh);
  size_t p = o / ((size_t)ow * oh);
  const float *xp = x + p * (size_t)h * w;
  int best = gs_maxpool1(xp, w, oy, ox);
  y[o] = xp[best];
  argmax[o] = best;
}

/* dx for one input element (index of planes*h*w): dy of its window if it
 * was the window's argmax, else 0. "0 + dy" as the CPU's zero-then-add
 * (so -0 becomes +0 on both). Windows do not overlap: no atomics. */
GS_HD static inline void gs_op_maxpool_backward(size_t idx, int h, int w, const float *dy,
                                                const int32_t *argmax, float *dx) {
  int oh = h / 2, ow = w / 2;
  int xx = (int)(idx % (size_t)w);
  int yy = (int)((idx / (size_t)w) % (size_t)h);
  size_t p = idx / ((size_t)w * h);
  float v = 0.0f;
  int oy = yy / 2, ox = xx / 2;
  if (oy < oh && ox < ow) {
    size_t o = (p * oh + oy) * ow + ox;
    if (argmax[o] == yy * w + xx) v = 0.0f + dy[o];
  }
  dx[idx] = v;
}

/* C[r, :] *= beta for a GEMM with k = 0 (the CPU table's rule), one
 * element per index of m*n */
GS_HD static inline void gs_op_gemm_beta(size_t idx, int n, float beta, float *c, int ldc) {
  size_t r = idx / (size_t)n, j = idx % (size_t)n;
  c[r * (size_t)ldc + j] *= beta;
}

/* Element e of a gathered batch: x[e] of row e / dim, and that row's label
 * from the threads of the first dim elements' rows (e < count). */
GS_HD static inline void gs_op_gather(size_t e, int count, size_t dim, const uint8_t *pixels,
                                      const int32_t *labels, const int64_t *idx, float *x,
                                      int32_t *y) {
  size_t i = e / dim, j = e % dim;
  x[e] = gs_pixel1(pixels[(size_t)idx[i] * dim + j]);
  if (e < (size_t)count) y[e] = labels[idx[e]];
}

GS_HD static inline void gs_op_relu(size_t i, const float *x, float *y) { y[i] = gs_relu1(x[i]); }

GS_HD static inline void gs_op_relu_grad(size_t i, const float *y, const float *dy, float *dx) {
  dx[i] = gs_relu_grad1(y[i], dy[i]);
}

GS_HD static inline void gs_op_add(size_t i, float *dst, const float *src) { dst[i] += src[i]; }

GS_HD static inline void gs_op_axpy(size_t i, float a, const float *x, float *y) {
  y[i] += a * x[i];
}

GS_HD static inline void gs_op_scale(size_t i, float a, float *x) { x[i] *= a; }

GS_HD static inline void gs_op_sgd(size_t i, float *p, const float *g, float *buf, gs_sgd h,
                                   int first) {
  float dummy = 0.0f;
  gs_sgd1(&p[i], g[i], buf ? &buf[i] : &dummy, h.lr, buf ? h.momentum : 0.0f, h.weight_decay,
          first);
}

/* fp16 / bf16 element i of src widened to fp32 (fp32: as is) */
GS_HD static inline float gs_op_load(gs_dtype t, const void *src, size_t i) {
  switch (t) {
  case GS_F16: return gs_f16_to_f32(gs_load_u16(src, i));
  case GS_BF16: return gs_bf16_to_f32(gs_load_u16(src, i));
  default: return gs_load_f32(src, i);
  }
}

/* element i of dst = v, rounded to t */
GS_HD static inline void gs_op_store(gs_dtype t, void *dst, size_t i, float v) {
  switch (t) {
  case GS_F16: gs_store_u16(dst, i, gs_f32_to_f16(v)); break;
  case GS_BF16: gs_store_u16(dst, i, gs_f32_to_bf16(v)); break;
  default: gs_store_f32(dst, i, v); break;
  }
}

GS_HD static inline void gs_op_add_lp(size_t i, gs_dtype t, float *dst, const void *src) {
  dst[i] += gs_op_load(t, src, i);
}

GS_HD static inline void gs_op_convert(size_t i, gs_dtype to, void *dst, gs_dtype from,
                                       const void *src) {
  gs_op_store(to, dst, i, gs_op_load(from, src, i));
}

GS_HD static inline int gs_op_nonfinite(gs_dtype t, const void *x, size_t i) {
  switch (t) {
  case GS_F16: return !gs_f16_isfinite(gs_load_u16(x, i));
  case GS_BF16: return !gs_bf16_isfinite(gs_load_u16(x, i));
  default: return !gs_f32_isfinite(gs_load_f32(x, i));
  }
}

/* A row-major GEMM C = op(A) op(B) as the column-major call cuBLAS takes:
 * C^T = op(B)^T op(A)^T, i.e. swap the operands and m with n; ldc stays. */
typedef struct gs_colmajor_gemm {
  bool trans_a, trans_b;   /* of the column-major call's first / second operand */
  int m, n, k;
  const void *a, *b;
  int lda, ldb;
} gs_colmajor_gemm;

static inline gs_colmajor_gemm gs_gemm_as_colmajor(bool ta, bool tb, int m, int n, int k,
                                                   const void *a, int lda, const void *b,
                                                   int ldb) {
  gs_colmajor_gemm g;
  g.trans_a = tb;
  g.trans_b = ta;
  g.m = n;
  g.n = m;
  g.k = k;
  g.a = b;
  g.lda = ldb;
  g.b = a;
  g.ldb = lda;
  return g;
}

#endif
