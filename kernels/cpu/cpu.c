/* cpu.c: the CPU table of kernels.h.
 *
 * GEMM goes to OpenBLAS (sgemm; the low-precision GEMM widens its operands
 * into a scratch buffer kept in the table and calls sgemm, which is what
 * "fp32 accumulation" means on a CPU without fast fp16 math). The streaming
 * ops (vector sums, SGD, ReLU, bias, conversions, finite checks) go through
 * a gs_cpu_vec table chosen once here: AVX-512, AVX2 + F16C, or plain C,
 * from __builtin_cpu_supports or GS_ISA (see cpu.h); im2col / col2im
 * move one 2-D block per kernel offset through it too. Softmax
 * cross-entropy and max-pool are plain C loops: they touch little memory
 * next to the GEMMs around them.
 *
 * Every op completes before it returns. Errors (bad labels, bad GEMM
 * arguments, failed allocations) are sticky and reported by sync(). */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#ifdef GS_HAVE_X86_SIMD
#include <cpuid.h>
#endif

#include "kernels/cpu/cpu.h"
#include "kernels/elem.h"
#include "kernels/kernels.h"

typedef struct cpu_impl {
  gs_err err;                /* sticky error, returned by sync() */
  gs_cpu_isa isa;
  const gs_cpu_vec *v;
  /* gemm_lp widens its operands here. The buffer only grows, so a training
   * loop allocates once. A second thread that finds it busy allocates its
   * own for that call rather than wait. */
  pthread_mutex_t scratch_mu;
  float *scratch;
  size_t scratch_floats;
} cpu_impl;

#define IMPL(k) ((cpu_impl *)(k)->impl)
#define VEC(k) (IMPL(k)->v)

/* ---- instruction sets ---- */

static const char *const isa_names[GS_ISA_COUNT] = {"scalar", "avx2", "avx512"};
static const char *const isa_needs[GS_ISA_COUNT] = {"", "avx2, f16c and popcnt",
                                                    "avx512f, avx512bw and avx512vl"};

const char *gs_cpu_isa_name(gs_cpu_isa isa) {
  return (unsigned)isa < GS_ISA_COUNT ? isa_names[isa] : "unknown";
}

#ifdef GS_HAVE_X86_SIMD
/* F16C from CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know
 * the name, so a clang build would not compile with it) */
static bool has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

bool gs_cpu_isa_supported(gs_cpu_isa isa) {
  switch (isa) {
  case GS_ISA_SCALAR: return true;
#ifdef GS_HAVE_X86_SIMD
  case GS_ISA_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && has_f16c() && __builtin_cpu_supports("popcnt");
  case GS_ISA_AVX512:
    __builtin_cpu_init();
    return gs_cpu_isa_supported(GS_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
  default: return false;
  }
}

gs_cpu_isa gs_cpu_isa_best(void) {
  if (gs_cpu_isa_supported(GS_ISA_AVX512)) return GS_ISA_AVX512;
  if (gs_cpu_isa_supported(GS_ISA_AVX2)) return GS_ISA_AVX2;
  return GS_ISA_SCALAR;
}

const gs_cpu_vec *gs_cpu_vec_of(gs_cpu_isa isa) {
  switch (isa) {
#ifdef GS_HAVE_X86_SIMD
  case GS_ISA_AVX2: return &gs_cpu_vec_avx2;
  case GS_ISA_AVX512: return &gs_cpu_vec_avx512;
#endif
  default: return &gs_cpu_vec_scalar;
  }
}

gs_cpu_isa gs_kernels_cpu_isa(const gs_kernels *k) { return IMPL(k)->isa; }

/* GS_ISA=scalar|avx2|avx512|auto, unset meaning auto. */
static int choose_isa(gs_cpu_isa *isa, gs_err *e) {
  const char *s = getenv("GS_ISA");
  if (!s || !*s || !strcmp(s, "auto")) {
    *isa = gs_cpu_isa_best();
    return GS_OK;
  }
  for (int i = 0; i < GS_ISA_COUNT; i++) {
    if (strcmp(s, isa_names[i]) != 0) continue;
    if (!gs_cpu_isa_supported((gs_cpu_isa)i))
      return GS_FAIL(e, GS_EDEVICE,
                     "GS_ISA=%s: this CPU (or build) lacks %s; use GS_ISA=%s, or unset it to "
                     "let the kernels choose", s, isa_needs[i], isa_names[gs_cpu_isa_best()]);
    *isa = (gs_cpu_isa)i;
    return GS_OK;
  }
  return GS_FAIL(e, GS_EINVAL, "GS_ISA=%s is not a CPU code path; use scalar, avx2, avx512 or "
                 "auto", s);
}

int gs_isa_select(const char **name, gs_err *e) {
  gs_cpu_isa isa = GS_ISA_SCALAR;
  GS_TRY(choose_isa(&isa, e));
  if (name) *name = isa_names[isa];
  return GS_OK;
}

/* ---- memory and control ---- */

static void cpu_fail(gs_kernels *k, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cpu_fail(gs_kernels *k, int code, const char *fmt, ...) {
  gs_err *e = &IMPL(k)->err;
  if (e->code != 0) return;
  char msg[sizeof e->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  GS_FAIL(e, code, "cpu kernels: %s", msg);
}

static void *cpu_alloc(gs_kernels *k, size_t bytes) { return gs_alloc(bytes, &IMPL(k)->err); }
static void cpu_release(gs_kernels *k, void *p) { gs_free(p); }
static void cpu_copy(gs_kernels *k, void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
}
static void cpu_zero(gs_kernels *k, void *p, size_t bytes) {
  if (bytes) memset(p, 0, bytes);
}
static int cpu_sync(gs_kernels *k, gs_err *e) {
  cpu_impl *c = IMPL(k);
  if (c->err.code == 0) return GS_OK;
  int code = c->err.code;
  if (e && e->code == 0) *e = c->err;
  gs_err_clear(&c->err);
  return code;
}
/* openblas_set_num_threads, not OPENBLAS_NUM_THREADS alone: Debian's
 * OpenBLAS starts one thread per core whatever else the process says. */
static void cpu_set_threads(gs_kernels *k, int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}
static void cpu_destroy(gs_kernels *k) {
  if (!k) return;
  cpu_impl *c = IMPL(k);
  if (c) {
    pthread_mutex_destroy(&c->scratch_mu);
    gs_free(c->scratch);
    free(c);
  }
  free(k);
}

/* ---- dense algebra ---- */

static int imax1(int a) { return a > 1 ? a : 1; }

/* BLAS argument rules (row-major): a row of op's stored matrix is no wider
 * than its leading dimension. OpenBLAS would print to stderr and return;
 * here it is a sticky error naming the argument. */
static bool gemm_args_ok(gs_kernels *k, const char *op, bool ta, bool tb, int m, int n, int kk,
                         int lda, int ldb, int ldc) {
  if (m < 0 || n < 0 || kk < 0) {
    cpu_fail(k, GS_EINVAL, "%s: negative size m=%d n=%d k=%d", op, m, n, kk);
    return false;
  }
  int acols = ta ? m : kk, bcols = tb ? kk : n;
  if (lda < imax1(acols) || ldb < imax1(bcols) || ldc < imax1(n)) {
    cpu_fail(k, GS_EINVAL,
             "%s: leading dimension smaller than a row (lda=%d for %d columns, ldb=%d for "
             "%d, ldc=%d for %d)", op, lda, acols, ldb, bcols, ldc, n);
    return false;
  }
  return true;
}

static void gemm_run(bool ta, bool tb, int m, int n, int kk, float alpha, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  if (m == 0 || n == 0) return;
  if (kk == 0 || alpha == 0.0f) { /* C = beta*C; beta = 0 clears NaN too, as BLAS does */
    for (int i = 0; i < m; i++) {
      float *row = c + (size_t)i * ldc;
      if (beta == 0.0f) memset(row, 0, (size_t)n * sizeof(float));
      else for (int j = 0; j < n; j++) row[j] *= beta;
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_gemm(gs_kernels *k, bool ta, bool tb, int m, int n, int kk, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc) {
  if (!gemm_args_ok(k, "gemm", ta, tb, m, n, kk, lda, ldb, ldc)) return;
  gemm_run(ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* rows x cols of src (row stride ld, dtype t) -> packed fp32. Only the
 * cols first elements of each row are read: the last row of a sub-matrix
 * may end where its buffer does. */
static void widen(const gs_cpu_vec *v, gs_dtype t, size_t rows, size_t cols, const void *src,
                  size_t ld, float *dst) {
  const char *s = src;
  for (size_t r = 0; r < rows; r++) {
    if (t == GS_F16) v->f16_to_f32(cols, dst + r * cols, s + r * ld * 2);
    else v->bf16_to_f32(cols, dst + r * cols, s + r * ld * 2);
  }
}

static void cpu_gemm_lp(gs_kernels *k, gs_dtype t, bool ta, bool tb, int m, int n, int kk,
                        float alpha, const void *a, int lda, const void *b, int ldb, float beta,
                        float *c, int ldc) {
  if (!gemm_args_ok(k, "gemm_lp", ta, tb, m, n, kk, lda, ldb, ldc)) return;
  if (t == GS_F32) {
    gemm_run(ta, tb, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (t != GS_F16 && t != GS_BF16) {
    cpu_fail(k, GS_EINVAL, "gemm_lp: unknown dtype %d", (int)t);
    return;
  }
  if (m == 0 || n == 0 || kk == 0) {
    gemm_run(ta, tb, m, n, kk, alpha, NULL, 1, NULL, 1, beta, c, ldc);
    return;
  }
  cpu_impl *ci = IMPL(k);
  size_t arows = ta ? (size_t)kk : (size_t)m, acols = ta ? (size_t)m : (size_t)kk;
  size_t brows = tb ? (size_t)n : (size_t)kk, bcols = tb ? (size_t)kk : (size_t)n;
  size_t need = arows * acols + brows * bcols;
  float *buf = NULL;
  bool locked = pthread_mutex_trylock(&ci->scratch_mu) == 0;
  if (locked) {
    if (ci->scratch_floats < need) {
      gs_free(ci->scratch);
      ci->scratch = gs_alloc(need * sizeof(float), &ci->err);
      ci->scratch_floats = ci->scratch ? need : 0;
    }
    buf = ci->scratch;
  } else {
    buf = gs_alloc(need * sizeof(float), &ci->err);
  }
  if (buf) {
    float *fa = buf, *fb = buf + arows * acols;
    widen(ci->v, t, arows, acols, a, (size_t)lda, fa);
    widen(ci->v, t, brows, bcols, b, (size_t)ldb, fb);
    gemm_run(ta, tb, m, n, kk, alpha, fa, (int)acols, fb, (int)bcols, beta, c, ldc);
  }
  if (locked) pthread_mutex_unlock(&ci->scratch_mu);
  else gs_free(buf);
}

/* ---- layers ---- */

static void cpu_bias_add(gs_kernels *k, int rows, int cols, const float *bias, float *y) {
  for (int r = 0; r < rows; r++) VEC(k)->add((size_t)cols, y + (size_t)r * cols, bias);
}

static void cpu_bias_grad(gs_kernels *k, int rows, int cols, const float *dy, float *db) {
  if (cols > 0) memset(db, 0, (size_t)cols * sizeof(float));
  for (int r = 0; r < rows; r++) VEC(k)->add((size_t)cols, db, dy + (size_t)r * cols);
}

static void cpu_bias_add_nchw(gs_kernels *k, int n, int c, int plane, const float *bias,
                              float *y) {
  for (int i = 0; i < n; i++)
    for (int ch = 0; ch < c; ch++)
      VEC(k)->add_scalar((size_t)plane, bias[ch], y + ((size_t)i * c + ch) * plane);
}

/* Each plane is summed in the fixed 16-lane order (same bits on every
 * path), the planes of a channel in double. */
static void cpu_bias_grad_nchw(gs_kernels *k, int n, int c, int plane, const float *dy,
                               float *db) {
  for (int ch = 0; ch < c; ch++) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += VEC(k)->sum((size_t)plane, dy + ((size_t)i * c + ch) * plane);
    db[ch] = (float)s;
  }
}

static void cpu_relu(gs_kernels *k, size_t n, const float *x, float *y) {
  VEC(k)->relu(n, x, y);
}

static void cpu_relu_grad(gs_kernels *k, size_t n, const float *y, const float *dy, float *dx) {
  VEC(k)->relu_grad(n, y, dy, dx);
}

static bool labels_ok(gs_kernels *k, const char *op, int batch, int classes,
                      const int32_t *labels) {
  for (int i = 0; i < batch; i++)
    if (labels[i] < 0 || labels[i] >= classes) {
      cpu_fail(k, GS_EINVAL,
               "%s: label %d of sample %d is outside [0, %d); check the data's labels "
               "against the model's number of classes", op, (int)labels[i], i, classes);
      return false;
    }
  return true;
}

/* Each row through elem.h's gs_xent_row (the GPU's too), summed in row
 * order. */
static void cpu_xent_forward(gs_kernels *k, int batch, int classes, const float *logits,
                             const int32_t *labels, float *probs, float *loss_host,
                             int *correct_host) {
  if (!labels_ok(k, "xent_forward", batch, classes, labels)) return;
  double loss = 0.0;
  int correct = 0;
  for (int i = 0; i < batch; i++) {
    double l;
    int hit, bad;
    gs_xent_row(i, classes, logits, labels, probs, &l, &hit, &bad);
    loss += l;
    correct += hit;
  }
  if (loss_host) *loss_host = batch > 0 ? (float)(loss / batch) : 0.0f;
  if (correct_host) *correct_host = correct;
}

static void cpu_xent_backward(gs_kernels *k, int batch, int classes, const float *probs,
                              const int32_t *labels, float scale, float *dlogits) {
  if (!labels_ok(k, "xent_backward", batch, classes, labels)) return;
  float f = scale / (float)batch;
  for (int i = 0; i < batch; i++) {
    const float *p = probs + (size_t)i * classes;
    float *d = dlogits + (size_t)i * classes;
    for (int j = 0; j < classes; j++) d[j] = gs_xent_grad1(p[j], j == labels[i], f);
  }
}

/* Output positions o (along one axis of size on) whose input coordinate
 * o*stride + off lies in [0, size): [*lo, *hi). */
static void valid_range(int off, int stride, int size, int on, int *lo, int *hi) {
  int a = off >= 0 ? 0 : (-off + stride - 1) / stride;
  int b = size - off <= 0 ? 0 : (size - off + stride - 1) / stride;
  if (b > on) b = on;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

/* For each (c, i, j) the column row is an oh x ow plane; at stride 1 its
 * non-padding part is one rectangle of the input channel, moved with one
 * copy2d / add2d call (short rows, so no memcpy call per row). Other
 * strides gather element by element. */
static void cpu_im2col(gs_kernels *k, const gs_conv_desc *d, const float *img, float *col) {
  size_t plane = (size_t)d->oh * d->ow;
  for (int c = 0; c < d->c; c++)
    for (int i = 0; i < d->kh; i++)
      for (int j = 0; j < d->kw; j++) {
        float *dst = col + ((size_t)(c * d->kh + i) * d->kw + j) * plane;
        const float *chan = img + (size_t)c * d->h * d->w;
        int ylo, yhi, xlo, xhi, yoff = i - d->pad, xoff = j - d->pad;
        valid_range(yoff, d->stride, d->h, d->oh, &ylo, &yhi);
        valid_range(xoff, d->stride, d->w, d->ow, &xlo, &xhi);
        if (ylo > 0 || yhi < d->oh || xlo > 0 || xhi < d->ow) /* padding: zeros first */
          memset(dst, 0, plane * sizeof(float));
        if (ylo >= yhi || xlo >= xhi) continue;
        if (d->stride == 1) {
          VEC(k)->copy2d((size_t)(yhi - ylo), (size_t)(xhi - xlo),
                         dst + (size_t)ylo * d->ow + xlo, (size_t)d->ow,
                         chan + (size_t)(ylo + yoff) * d->w + (xlo + xoff), (size_t)d->w);
          continue;
        }
        for (int oy = ylo; oy < yhi; oy++) {
          const float *src = chan + (size_t)(oy * d->stride + yoff) * d->w;
          float *row = dst + (size_t)oy * d->ow;
          for (int ox = xlo; ox < xhi; ox++) row[ox] = src[ox * d->stride + xoff];
        }
      }
}

/* j is the outer loop: consecutive add2d calls with j and j+1 would load
 * vectors that overlap, one float off, what the previous call just stored,
 * and a store that partly overlaps a load cannot be forwarded (a stall per
 * vector). */
static void cpu_col2im(gs_kernels *k, const gs_conv_desc *d, const float *col, float *img) {
  size_t plane = (size_t)d->oh * d->ow;
  for (int j = 0; j < d->kw; j++)
    for (int c = 0; c < d->c; c++)
      for (int i = 0; i < d->kh; i++) {
        const float *src = col + ((size_t)(c * d->kh + i) * d->kw + j) * plane;
        float *chan = img + (size_t)c * d->h * d->w;
        int ylo, yhi, xlo, xhi, yoff = i - d->pad, xoff = j - d->pad;
        valid_range(yoff, d->stride, d->h, d->oh, &ylo, &yhi);
        valid_range(xoff, d->stride, d->w, d->ow, &xlo, &xhi);
        if (ylo >= yhi || xlo >= xhi) continue;
        if (d->stride == 1) {
          VEC(k)->add2d((size_t)(yhi - ylo), (size_t)(xhi - xlo),
                        chan + (size_t)(ylo + yoff) * d->w + (xlo + xoff), (size_t)d->w,
                        src + (size_t)ylo * d->ow + xlo, (size_t)d->ow);
          continue;
        }
        for (int oy = ylo; oy < yhi; oy++) {
          float *dst = chan + (size_t)(oy * d->stride + yoff) * d->w;
          const float *row = src + (size_t)oy * d->ow;
          for (int ox = xlo; ox < xhi; ox++) dst[ox * d->stride + xoff] += row[ox];
        }
      }
}

/* 2x2, stride 2, floor mode as PyTorch's max_pool2d: an odd last row or
 * column is dropped; each window's winner is elem.h's gs_maxpool1. */
static void cpu_maxpool_forward(gs_kernels *k, int planes, int h, int w, const float *x,
                                float *y, int32_t *argmax) {
  int oh = h / 2, ow = w / 2;
  for (int p = 0; p < planes; p++) {
    const float *xp = x + (size_t)p * h * w;
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++) {
        int best = gs_maxpool1(xp, w, oy, ox);
        size_t o = ((size_t)p * oh + oy) * ow + ox;
        y[o] = xp[best];
        argmax[o] = best;
      }
  }
}

static void cpu_maxpool_backward(gs_kernels *k, int planes, int h, int w, const float *dy,
                                 const int32_t *argmax, float *dx) {
  int oh = h / 2, ow = w / 2;
  size_t area = (size_t)h * w, oarea = (size_t)oh * ow;
  if (planes > 0 && area > 0) memset(dx, 0, (size_t)planes * area * sizeof(float));
  for (int p = 0; p < planes; p++)
    for (size_t o = 0; o < oarea; o++) {
      size_t i = (size_t)p * oarea + o;
      int32_t a = argmax[i];
      if (a < 0 || (size_t)a >= area) {
        cpu_fail(k, GS_EINVAL, "maxpool_backward: argmax %d of output %zu is outside the "
                 "%dx%d plane (not from maxpool_forward of this shape?)", (int)a, i, h, w);
        return;
      }
      dx[(size_t)p * area + (size_t)a] += dy[i];
    }
}

/* ---- optimizer and reductions ---- */

static void cpu_sgd(gs_kernels *k, size_t n, void *p, const void *g, void *buf, gs_sgd h,
                    bool first) {
  if (h.momentum != 0.0f && !buf) {
    cpu_fail(k, GS_EINVAL, "sgd: momentum %g needs a momentum buffer (buf is NULL)",
             (double)h.momentum);
    return;
  }
  VEC(k)->sgd(n, p, g, buf, h.lr, h.momentum, h.weight_decay, first);
}

static void cpu_add(gs_kernels *k, size_t n, void *dst, const void *src) {
  VEC(k)->add(n, dst, src);
}
static void cpu_axpy(gs_kernels *k, size_t n, float a, const void *x, void *y) {
  VEC(k)->axpy(n, a, x, y);
}
static void cpu_scale(gs_kernels *k, size_t n, float a, void *x) { VEC(k)->scale(n, a, x); }

static void cpu_add_lp(gs_kernels *k, gs_dtype t, size_t n, void *dst, const void *src) {
  switch (t) {
  case GS_F32: VEC(k)->add(n, dst, src); break;
  case GS_F16: VEC(k)->add_f16(n, dst, src); break;
  case GS_BF16: VEC(k)->add_bf16(n, dst, src); break;
  default: cpu_fail(k, GS_EINVAL, "add_lp: unknown dtype %d", (int)t);
  }
}

static bool dtype_ok(gs_dtype t) { return t == GS_F32 || t == GS_F16 || t == GS_BF16; }

static void cpu_convert(gs_kernels *k, gs_dtype to, void *dst, gs_dtype from, const void *src,
                        size_t n) {
  const gs_cpu_vec *v = VEC(k);
  if (!dtype_ok(to) || !dtype_ok(from)) {
    cpu_fail(k, GS_EINVAL, "convert: unknown dtype (%d -> %d)", (int)from, (int)to);
    return;
  }
  if (to == from) {
    cpu_copy(k, dst, src, n * gs_dtype_size(to));
  } else if (from == GS_F32) {
    if (to == GS_F16) v->f32_to_f16(n, dst, src);
    else v->f32_to_bf16(n, dst, src);
  } else if (to == GS_F32) {
    if (from == GS_F16) v->f16_to_f32(n, dst, src);
    else v->bf16_to_f32(n, dst, src);
  } else { /* fp16 <-> bf16 through fp32 (exact), so one rounding */
    float tmp[1024];
    const char *s = src;
    char *d = dst;
    for (size_t i = 0; i < n; i += 1024) {
      size_t m = n - i < 1024 ? n - i : 1024;
      if (from == GS_F16) v->f16_to_f32(m, tmp, s + 2 * i);
      else v->bf16_to_f32(m, tmp, s + 2 * i);
      if (to == GS_F16) v->f32_to_f16(m, d + 2 * i, tmp);
      else v->f32_to_bf16(m, d + 2 * i, tmp);
    }
  }
}

static void cpu_gather_batch(gs_kernels *k, int count, size_t dim, const uint8_t *pixels,
                             const int32_t *labels, const int64_t *idx, float *x, int32_t *y) {
  gs_gather_host(count, dim, pixels, labels, idx, x, y);
}

static size_t cpu_nonfinite(gs_kernels *k, gs_dtype t, size_t n, const void *x) {
  switch (t) {
  case GS_F32: return VEC(k)->nonfinite_f32(n, x);
  case GS_F16: return VEC(k)->nonfinite_f16(n, x);
  case GS_BF16: return VEC(k)->nonfinite_bf16(n, x);
  default: cpu_fail(k, GS_EINVAL, "nonfinite: unknown dtype %d", (int)t); return n;
  }
}

static gs_kernels *cpu_create(gs_cpu_isa isa, int threads, gs_err *e);

static gs_kernels *cpu_clone(gs_kernels *k, gs_err *e) { return cpu_create(IMPL(k)->isa, 0, e); }

gs_kernels *gs_kernels_cpu(int threads, gs_err *e) {
  gs_cpu_isa isa = GS_ISA_SCALAR;
  if (choose_isa(&isa, e) < 0) return NULL;
  return cpu_create(isa, threads, e);
}

static gs_kernels *cpu_create(gs_cpu_isa isa, int threads, gs_err *e) {
  gs_kernels *k = calloc(1, sizeof *k);
  cpu_impl *c = calloc(1, sizeof *c);
  if (!k || !c) {
    free(k);
    free(c);
    GS_FAIL(e, GS_ENOMEM, "out of memory creating the CPU kernels");
    return NULL;
  }
  pthread_mutex_init(&c->scratch_mu, NULL);
  c->isa = isa;
  c->v = gs_cpu_vec_of(isa);
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
  k->clone = cpu_clone;
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
  k->gather_batch = cpu_gather_batch;
  cpu_set_threads(k, threads);
  return k;
}
