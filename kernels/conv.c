/* conv.c: 2-D convolution written once over the kernels table, so the CPU
 * and CUDA paths share it.
 *
 * Per image: im2col into the workspace ([c*kh*kw, oh*ow] floats), one GEMM
 * with the weight for the output, and for backward one GEMM into dw
 * (accumulated over the batch with beta = 1) and one into the columns that
 * col2im scatters back into dx. One image at a time, not the batch in one
 * wider GEMM: one image's columns stay in L2, a whole batch's (tens of MB
 * for LeNet's conv1 at batch 256) fall out of every cache, and the GEMMs
 * are already large enough to run at full speed. */
#include <stdint.h>

#include "kernels/kernels.h"

int gs_conv_init(gs_conv_desc *d, gs_err *e) {
  if (d->n <= 0 || d->c <= 0 || d->h <= 0 || d->w <= 0 || d->oc <= 0 || d->kh <= 0 ||
      d->kw <= 0 || d->stride <= 0 || d->pad < 0)
    return GS_FAIL(e, GS_EINVAL, "conv: non-positive dimension (n=%d c=%d h=%d w=%d oc=%d "
                   "kernel %dx%d stride %d) or negative pad %d", d->n, d->c, d->h, d->w, d->oc,
                   d->kh, d->kw, d->stride, d->pad);
  if (d->h > INT32_MAX / 4 || d->w > INT32_MAX / 4 || d->pad > INT32_MAX / 4)
    return GS_FAIL(e, GS_EINVAL, "conv: shape too large (%dx%d, pad %d)", d->h, d->w, d->pad);
  if (d->h + 2 * d->pad < d->kh || d->w + 2 * d->pad < d->kw)
    return GS_FAIL(e, GS_EINVAL, "conv: kernel %dx%d larger than padded input %dx%d", d->kh,
                   d->kw, d->h + 2 * d->pad, d->w + 2 * d->pad);
  d->oh = (d->h + 2 * d->pad - d->kh) / d->stride + 1;
  d->ow = (d->w + 2 * d->pad - d->kw) / d->stride + 1;
  /* GEMM sizes are ints: the column matrix and each tensor must fit */
  int64_t kdim = (int64_t)d->c * d->kh * d->kw, plane = (int64_t)d->oh * d->ow;
  int64_t in = (int64_t)d->c * d->h * d->w, out = (int64_t)d->oc * plane;
  if (kdim * plane > INT32_MAX || in * d->n > INT32_MAX || out * d->n > INT32_MAX ||
      (int64_t)d->oc * kdim > INT32_MAX)
    return GS_FAIL(e, GS_EINVAL, "conv: shape too large (n=%d c=%d %dx%d oc=%d kernel %dx%d): "
                   "a tensor or the im2col matrix exceeds 2^31 elements", d->n, d->c, d->h,
                   d->w, d->oc, d->kh, d->kw);
  return GS_OK;
}

size_t gs_conv_workspace(const gs_conv_desc *d) {
  return (size_t)d->c * d->kh * d->kw * d->oh * d->ow;
}

void gs_conv2d_forward(gs_kernels *k, const gs_conv_desc *d, const float *x, const float *w,
                       const float *b, float *y, float *ws) {
  int kdim = d->c * d->kh * d->kw, plane = d->oh * d->ow;
  for (int i = 0; i < d->n; i++) {
    k->im2col(k, d, x + (size_t)i * d->c * d->h * d->w, ws);
    /* y[oc, plane] = w[oc, kdim] * col[kdim, plane] */
    k->gemm(k, false, false, d->oc, plane, kdim, 1.0f, w, kdim, ws, plane, 0.0f,
            y + (size_t)i * d->oc * plane, plane);
  }
  if (b) k->bias_add_nchw(k, d->n, d->oc, plane, b, y);
}

void gs_conv2d_backward(gs_kernels *k, const gs_conv_desc *d, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db, float *ws) {
  int kdim = d->c * d->kh * d->kw, plane = d->oh * d->ow;
  if (db) k->bias_grad_nchw(k, d->n, d->oc, plane, dy, db);
  for (int i = 0; i < d->n; i++) {
    const float *dyi = dy + (size_t)i * d->oc * plane;
    k->im2col(k, d, x + (size_t)i * d->c * d->h * d->w, ws);
    /* dw[oc, kdim] (+)= dy[oc, plane] * col[kdim, plane]^T */
    k->gemm(k, false, true, d->oc, kdim, plane, 1.0f, dyi, plane, ws, plane,
            i == 0 ? 0.0f : 1.0f, dw, kdim);
    if (dx) {
      float *dxi = dx + (size_t)i * d->c * d->h * d->w;
      /* col[kdim, plane] = w[oc, kdim]^T * dy[oc, plane] */
      k->gemm(k, true, false, kdim, plane, d->oc, 1.0f, w, kdim, dyi, plane, 0.0f, ws, plane);
      k->zero(k, dxi, (size_t)d->c * d->h * d->w * sizeof(float));
      k->col2im(k, d, ws, dxi);
    }
  }
}
