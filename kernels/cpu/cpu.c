/* cpu.c: the CPU table of kernels.h.
 *
 * GEMM goes to OpenBLAS; everything else is a plain loop over the
 * per-element functions of kernels/elem.h (so the GPU and the CPU share the
 * arithmetic). Every op completes before it returns; errors are sticky and
 * reported by sync(). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/elem.h"
#include "kernels/kernels.h"

typedef struct cpu_impl {
  gs_err err;   /* sticky error, returned by sync() */
} cpu_impl;

static void cpu_fail(gs_kernels *k, int code, const char *msg) {
  cpu_impl *c = k->impl;
  GS_FAIL(&c->err, code, "%s", msg);
}

static void *cpu_alloc(gs_kernels *k, size_t bytes) {
  cpu_impl *c = k->impl;
  return gs_alloc(bytes, &c->err);
}
static void cpu_release(gs_kernels *k, void *p) { gs_free(p); }
static void cpu_copy(gs_kernels *k, void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
}
static void cpu_zero(gs_kernels *k, void *p, size_t bytes) {
  if (bytes) memset(p, 0, bytes);
}
static int cpu_sync(gs_kernels *k, gs_err *e) {
  cpu_impl *c = k->impl;
  if (c->err.code == 0) return GS_OK;
  int code = c->err.code;
  if (e && e->code == 0) *e = c->err;
  gs_err_clear(&c->err);
  return code;
}
static void cpu_set_threads(gs_kernels *k, int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}
static void cpu_destroy(gs_kernels *k) {
  if (!k) return;
  free(k->impl);
  free(k);
}

static void cpu_gemm(gs_kernels *k, bool ta, bool tb, int m, int n, int kk, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc) {
  if (m <= 0 || n <= 0) return;
  if (kk <= 0) {
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) c[(size_t)i * ldc + j] *= beta;
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Low-precision GEMM on a CPU without fast fp16 math: widen both operands
 * to fp32 and use sgemm, which is what "fp32 accumulation" means here. */
static void cpu_gemm_lp(gs_kernels *k, gs_dtype t, bool ta, bool tb, int m, int n, int kk,
                        float alpha, const void *a, int lda, const void *b, int ldb, float beta,
                        float *c, int ldc) {
  size_t arows = ta ? (size_t)kk : (size_t)m, brows = tb ? (size_t)n : (size_t)kk;
  size_t na = arows * (size_t)lda, nb = brows * (size_t)ldb;
  cpu_impl *ci = k->impl;
  float *fa = gs_alloc(na * sizeof(float), &ci->err);
  float *fb = gs_alloc(nb * sizeof(float), &ci->err);
  if (fa && fb) {
    k->convert(k, GS_F32, fa, t, a, na);
    k->convert(k, GS_F32, fb, t, b, nb);
    cpu_gemm(k, ta, tb, m, n, kk, alpha, fa, lda, fb, ldb, beta, c, ldc);
  }
  gs_free(fa);
  gs_free(fb);
}

static void cpu_bias_add(gs_kernels *k, int rows, int cols, const float *bias, float *y) {
  for (int r = 0; r < rows; r++) {
    float *row = y + (size_t)r * cols;
    for (int j = 0; j < cols; j++) row[j] += bias[j];
  }
}

static void cpu_bias_grad(gs_kernels *k, int rows, int cols, const float *dy, float *db) {
  for (int j = 0; j < cols; j++) db[j] = 0.0f;
  for (int r = 0; r < rows; r++) {
    const float *row = dy + (size_t)r * cols;
    for (int j = 0; j < cols; j++) db[j] += row[j];
  }
}

static void cpu_bias_add_nchw(gs_kernels *k, int n, int c, int plane, const float *bias,
                              float *y) {
  for (int i = 0; i < n; i++)
    for (int ch = 0; ch < c; ch++) {
      float *row = y + ((size_t)i * c + ch) * plane;
      for (int j = 0; j < plane; j++) row[j] += bias[ch];
    }
}

static void cpu_bias_grad_nchw(gs_kernels *k, int n, int c, int plane, const float *dy,
                               float *db) {
  for (int ch = 0; ch < c; ch++) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) {
      const float *row = dy + ((size_t)i * c + ch) * plane;
      for (int j = 0; j < plane; j++) s += row[j];
    }
    db[ch] = s;
  }
}

static void cpu_relu(gs_kernels *k, size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = gs_relu1(x[i]);
}

static void cpu_relu_grad(gs_kernels *k, size_t n, const float *y, const float *dy, float *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = gs_relu_grad1(y[i], dy[i]);
}

static void cpu_xent_forward(gs_kernels *k, int batch, int classes, const float *logits,
                             const int32_t *labels, float *probs, float *loss_host,
                             int *correct_host) {
  double loss = 0.0;
  int correct = 0;
  for (int i = 0; i < batch; i++) {
    const float *z = logits + (size_t)i * classes;
    float *p = probs + (size_t)i * classes;
    int y = labels[i];
    if (y < 0 || y >= classes) {
      cpu_fail(k, GS_EINVAL, "xent_forward: a label outside [0, classes)");
      return;
    }
    float mx = z[0];
    int arg = 0;
    for (int j = 1; j < classes; j++)
      if (z[j] > mx) { mx = z[j]; arg = j; }
    double sum = 0.0;
    for (int j = 0; j < classes; j++) sum += exp((double)(z[j] - mx));
    for (int j = 0; j < classes; j++) p[j] = (float)(exp((double)(z[j] - mx)) / sum);
    loss += log(sum) - (double)(z[y] - mx);
    correct += arg == y;
  }
  if (loss_host) *loss_host = batch > 0 ? (float)(loss / batch) : 0.0f;
  if (correct_host) *correct_host = correct;
}

static void cpu_xent_backward(gs_kernels *k, int batch, int classes, const float *probs,
                              const int32_t *labels, float scale, float *dlogits) {
  float f = scale / (float)batch;
  for (int i = 0; i < batch; i++) {
    const float *p = probs + (size_t)i * classes;
    float *d = dlogits + (size_t)i * classes;
    for (int j = 0; j < classes; j++) d[j] = (p[j] - (j == labels[i] ? 1.0f : 0.0f)) * f;
  }
}

static void cpu_im2col(gs_kernels *k, const gs_conv_desc *d, const float *img, float *col) {
  size_t plane = (size_t)d->oh * d->ow;
  for (int c = 0; c < d->c; c++)
    for (int i = 0; i < d->kh; i++)
      for (int j = 0; j < d->kw; j++) {
        float *dst = col + ((size_t)(c * d->kh + i) * d->kw + j) * plane;
        for (int oy = 0; oy < d->oh; oy++) {
          int y = oy * d->stride - d->pad + i;
          for (int ox = 0; ox < d->ow; ox++) {
            int x = ox * d->stride - d->pad + j;
            dst[(size_t)oy * d->ow + ox] =
                (y >= 0 && y < d->h && x >= 0 && x < d->w)
                    ? img[((size_t)c * d->h + y) * d->w + x] : 0.0f;
          }
        }
      }
}

static void cpu_col2im(gs_kernels *k, const gs_conv_desc *d, const float *col, float *img) {
  size_t plane = (size_t)d->oh * d->ow;
  for (int c = 0; c < d->c; c++)
    for (int i = 0; i < d->kh; i++)
      for (int j = 0; j < d->kw; j++) {
        const float *src = col + ((size_t)(c * d->kh + i) * d->kw + j) * plane;
        for (int oy = 0; oy < d->oh; oy++) {
          int y = oy * d->stride - d->pad + i;
          if (y < 0 || y >= d->h) continue;
          for (int ox = 0; ox < d->ow; ox++) {
            int x = ox * d->stride - d->pad + j;
            if (x >= 0 && x < d->w) img[((size_t)c * d->h + y) * d->w + x] += src[(size_t)oy * d->ow + ox];
          }
        }
      }
}

static void cpu_maxpool_forward(gs_kernels *k, int planes, int h, int w, const float *x,
                                float *y, int32_t *argmax) {
  int oh = h / 2, ow = w / 2;
  for (int p = 0; p < planes; p++) {
    const float *xp = x + (size_t)p * h * w;
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        int best = (2 * oy) * w + 2 * ox;
        for (int dy = 0; dy < 2; dy++)
          for (int dx = 0; dx < 2; dx++) {
            int idx = (2 * oy + dy) * w + 2 * ox + dx;
            if (xp[idx] > xp[best]) best = idx;
          }
        size_t o = ((size_t)p * oh + oy) * ow + ox;
        y[o] = xp[best];
        argmax[o] = best;
      }
  }
}

static void cpu_maxpool_backward(gs_kernels *k, int planes, int h, int w, const float *dy,
                                 const int32_t *argmax, float *dx) {
  int oh = h / 2, ow = w / 2;
  memset(dx, 0, (size_t)planes * h * w * sizeof(float));
  for (int p = 0; p < planes; p++)
    for (int o = 0; o < oh * ow; o++) {
      size_t i = (size_t)p * oh * ow + o;
      dx[(size_t)p * h * w + argmax[i]] += dy[i];
    }
}

static void cpu_sgd(gs_kernels *k, size_t n, float *p, const float *g, float *buf, gs_sgd h,
                    bool first) {
  float dummy = 0.0f;
  for (size_t i = 0; i < n; i++)
    gs_sgd1(&p[i], g[i], buf ? &buf[i] : &dummy, h.lr, buf ? h.momentum : 0.0f, h.weight_decay,
            first);
}

static void cpu_add(gs_kernels *k, size_t n, float *dst, const float *src) {
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}
static void cpu_axpy(gs_kernels *k, size_t n, float a, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}
static void cpu_scale(gs_kernels *k, size_t n, float a, float *x) {
  for (size_t i = 0; i < n; i++) x[i] *= a;
}

static void cpu_add_lp(gs_kernels *k, gs_dtype t, size_t n, float *dst, const void *src) {
  const uint16_t *s = src;
  switch (t) {
  case GS_F32: cpu_add(k, n, dst, src); break;
  case GS_F16: for (size_t i = 0; i < n; i++) dst[i] += gs_f16_to_f32(s[i]); break;
  case GS_BF16: for (size_t i = 0; i < n; i++) dst[i] += gs_bf16_to_f32(s[i]); break;
  }
}

static void cpu_convert(gs_kernels *k, gs_dtype to, void *dst, gs_dtype from, const void *src,
                        size_t n) {
  if (to == from) {
    cpu_copy(k, dst, src, n * gs_dtype_size(to));
    return;
  }
  if (from == GS_F32) {
    const float *s = src;
    uint16_t *d = dst;
    if (to == GS_F16) for (size_t i = 0; i < n; i++) d[i] = gs_f32_to_f16(s[i]);
    else for (size_t i = 0; i < n; i++) d[i] = gs_f32_to_bf16(s[i]);
  } else if (to == GS_F32) {
    const uint16_t *s = src;
    float *d = dst;
    if (from == GS_F16) for (size_t i = 0; i < n; i++) d[i] = gs_f16_to_f32(s[i]);
    else for (size_t i = 0; i < n; i++) d[i] = gs_bf16_to_f32(s[i]);
  } else { /* fp16 <-> bf16 through fp32 */
    const uint16_t *s = src;
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++) {
      float f = from == GS_F16 ? gs_f16_to_f32(s[i]) : gs_bf16_to_f32(s[i]);
      d[i] = to == GS_F16 ? gs_f32_to_f16(f) : gs_f32_to_bf16(f);
    }
  }
}

static size_t cpu_nonfinite(gs_kernels *k, gs_dtype t, size_t n, const void *x) {
  size_t bad = 0;
  if (t == GS_F32) {
    const float *f = x;
    for (size_t i = 0; i < n; i++) bad += !gs_f32_isfinite(f[i]);
  } else {
    const uint16_t *h = x;
    for (size_t i = 0; i < n; i++)
      bad += t == GS_F16 ? !gs_f16_isfinite(h[i]) : !gs_bf16_isfinite(h[i]);
  }
  return bad;
}

gs_kernels *gs_kernels_cpu(int threads, gs_err *e) {
  gs_kernels *k = calloc(1, sizeof *k);
  cpu_impl *c = calloc(1, sizeof *c);
  if (!k || !c) {
    free(k);
    free(c);
    GS_FAIL(e, GS_ENOMEM, "out of memory creating the CPU kernels");
    return NULL;
  }
  k->name = "cpu";
  k->device = GS_DEV_CPU;
  k->impl = c;
  k->alloc = cpu_alloc;
  k->release = cpu_release;
  k->alloc_host = cpu_alloc;
  k->release_host = cpu_release;
  k->to_device = cpu_copy;
  k->to_host = cpu_copy;
  k->copy = cpu_copy;
  k->zero = cpu_zero;
  k->sync = cpu_sync;
  k->set_threads = cpu_set_threads;
  k->destroy = cpu_destroy;
  k->gemm = cpu_gemm;
  k->gemm_lp = cpu_gemm_lp;
  k->bias_add = cpu_bias_add;
  k->bias_grad = cpu_bias_grad;
  k->bias_add_nchw = cpu_bias_add_nchw;
  k->bias_grad_nchw = cpu_bias_grad_nchw;
  k->relu = cpu_relu;
  k->relu_grad = cpu_relu_grad;
  k->xent_forward = cpu_xent_forward;
  k->xent_backward = cpu_xent_backward;
  k->im2col = cpu_im2col;
  k->col2im = cpu_col2im;
  k->maxpool_forward = cpu_maxpool_forward;
  k->maxpool_backward = cpu_maxpool_backward;
  k->sgd = cpu_sgd;
  k->add = cpu_add;
  k->axpy = cpu_axpy;
  k->scale = cpu_scale;
  k->add_lp = cpu_add_lp;
  k->convert = cpu_convert;
  k->nonfinite = cpu_nonfinite;
  cpu_set_threads(k, threads);
  return k;
}
