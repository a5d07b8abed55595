/* conv.c: 2-D convolution written once over the kernels table
 * (im2col + GEMM per image), so the CPU and CUDA paths share it. */
#include "kernels/kernels.h"

int gs_conv_init(gs_conv_desc *d, gs_err *e) {
  if (d->n <= 0 || d->c <= 0 || d->h <= 0 || d->w <= 0 || d->oc <= 0 || d->kh <= 0 ||
      d->kw <= 0 || d->stride <= 0 || d->pad < 0)
    return GS_FAIL(e, GS_EINVAL, "conv: non-positive dimension");
  if (d->h + 2 * d->pad < d->kh || d->w + 2 * d->pad < d->kw)
    return GS_FAIL(e, GS_EINVAL, "conv: kernel %dx%d larger than padded input %dx%d", d->kh,
                   d->kw, d->h + 2 * d->pad, d->w + 2 * d->pad);
  d->oh = (d->h + 2 * d->pad - d->kh) / d->stride + 1;
  d->ow = (d->w + 2 * d->pad - d->kw) / d->stride + 1;
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
