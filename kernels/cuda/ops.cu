/* ops.cu: the layer, optimizer and conversion ops of the CUDA table.
 *
 * Every kernel is a grid-stride loop around a per-thread body of ops.h
 * (which calls kernels/elem.h per element), or a block reduction whose
 * per-thread part and tree step are in ops.h too. No floating-point
 * atomics anywhere: every result is the same bits on every run, which the
 * determinism contract (docs/architecture.md, contract 2) needs. The CUDA sources are built with
 * --fmad=false so a*b+c rounds twice as on the CPU, and the element-wise
 * ops give the CPU table's bits exactly (tests/gpu checks it).
 *
 * Ops are queued on the table's stream and return at once, except the two
 * that hand a number to the host (xent_forward, nonfinite), which copy it
 * back through pinned memory and wait. */
#include <stdio.h>

#include "kernels/cuda/table.h"

#define GRID_LOOP(i, n)                                                        \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);      \
       i += (size_t)gridDim.x * blockDim.x)

/* ---- kernels ---- */

__global__ void k_bias_add(size_t n, int cols, const float *bias, float *y) {
  GRID_LOOP(i, n) gs_op_bias_add(i, cols, bias, y);
}

/* See gs_op_bias_grad_part: GS_BG_PARTS partial sums per column, then a
 * fixed tree over them in shared memory (column-major, so each column's
 * parts are contiguous for gs_op_tree_step). */
__global__ void k_bias_grad(int rows, int cols, const float *dy, float *db) {
  __shared__ float v[GS_BG_COLS * GS_BG_PARTS];
  int lane = (int)threadIdx.x % GS_BG_COLS, w = (int)threadIdx.x / GS_BG_COLS;
  for (int c0 = (int)blockIdx.x * GS_BG_COLS; c0 < cols; c0 += (int)gridDim.x * GS_BG_COLS) {
    int c = c0 + lane;
    v[lane * GS_BG_PARTS + w] = c < cols ? gs_op_bias_grad_part(c, w, rows, cols, dy) : 0.0f;
    __syncthreads();
    for (int s = GS_BG_PARTS / 2; s > 0; s >>= 1) {
      gs_op_tree_step(v + lane * GS_BG_PARTS, w, s);
      __syncthreads();
    }
    if (w == 0 && c < cols) db[c] = v[lane * GS_BG_PARTS];
    __syncthreads();
  }
}

__global__ void k_bias_add_nchw(size_t n, int c, int plane, const float *bias, float *y) {
  GRID_LOOP(i, n) gs_op_bias_add_nchw(i, c, plane, bias, y);
}

/* One block per channel: GS_CUDA_THREADS partials, then a fixed tree. */
__global__ void k_bias_grad_nchw(int n, int c, int plane, const float *dy, float *db) {
  __shared__ float v[GS_CUDA_THREADS];
  int t = (int)threadIdx.x;
  for (int ch = (int)blockIdx.x; ch < c; ch += (int)gridDim.x) {
    v[t] = gs_op_bias_grad_nchw_part(ch, t, GS_CUDA_THREADS, n, c, plane, dy);
    __syncthreads();
    for (int s = GS_CUDA_THREADS / 2; s > 0; s >>= 1) {
      gs_op_tree_step(v, t, s);
      __syncthreads();
    }
    if (t == 0) db[ch] = v[0];
    __syncthreads();
  }
}

__global__ void k_relu(size_t n, const float *x, float *y) {
  GRID_LOOP(i, n) gs_op_relu(i, x, y);
}

__global__ void k_relu_grad(size_t n, const float *y, const float *dy, float *dx) {
  GRID_LOOP(i, n) gs_op_relu_grad(i, y, dy, dx);
}

__global__ void k_xent_rows(int batch, int classes, const float *logits, const int32_t *labels,
                            float *probs, double *loss, int *hit, int *bad) {
  GRID_LOOP(i, (size_t)batch)
    gs_xent_row((int)i, classes, logits, labels, probs, &loss[i], &hit[i], &bad[i]);
}

/* One block: the rows are staged in shared memory by every thread, then
 * thread 0 adds them in row order (the CPU's bits) without waiting on
 * global memory for each. */
#define XT_ROWS 1024
__global__ void k_xent_total(int batch, const int32_t *labels, const double *loss,
                             const int *hit, const int *bad, gs_xent_result *r) {
  __shared__ double sl[XT_ROWS];
  __shared__ int sh[XT_ROWS], sb[XT_ROWS];
  gs_xent_acc a = gs_xent_acc_start();
  for (int i0 = 0; i0 < batch; i0 += XT_ROWS) {
    int n = batch - i0 < XT_ROWS ? batch - i0 : XT_ROWS;
    for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
      sl[i] = loss[i0 + i];
      sh[i] = hit[i0 + i];
      sb[i] = bad[i0 + i];
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int i = 0; i < n; i++) gs_xent_acc_row(&a, i0 + i, labels, sl[i], sh[i], sb[i]);
    __syncthreads();
  }
  if (threadIdx.x == 0) gs_xent_acc_end(&a, batch, r);
}

__global__ void k_xent_backward(size_t n, int classes, const float *probs,
                                const int32_t *labels, float f, float *dlogits) {
  GRID_LOOP(i, n) gs_op_xent_backward(i, classes, probs, labels, f, dlogits);
}

/* The descriptor travels by value: kernel parameters live in constant memory. */
__global__ void k_im2col(size_t n, gs_conv_desc d, const float *img, float *col) {
  GRID_LOOP(i, n) gs_op_im2col(i, &d, img, col);
}

__global__ void k_col2im(size_t n, gs_conv_desc d, const float *col, float *img) {
  GRID_LOOP(i, n) gs_op_col2im(i, &d, col, img);
}

__global__ void k_maxpool_forward(size_t n, int h, int w, const float *x, float *y,
                                  int32_t *argmax) {
  GRID_LOOP(o, n) gs_op_maxpool_forward(o, h, w, x, y, argmax);
}

__global__ void k_maxpool_backward(size_t n, int h, int w, const float *dy,
                                   const int32_t *argmax, float *dx) {
  GRID_LOOP(i, n) gs_op_maxpool_backward(i, h, w, dy, argmax, dx);
}

__global__ void k_sgd(size_t n, float *p, const float *g, float *buf, gs_sgd h, int first) {
  GRID_LOOP(i, n) gs_op_sgd(i, p, g, buf, h, first);
}

__global__ void k_add(size_t n, float *dst, const float *src) {
  GRID_LOOP(i, n) gs_op_add(i, dst, src);
}

__global__ void k_axpy(size_t n, float a, const float *x, float *y) {
  GRID_LOOP(i, n) gs_op_axpy(i, a, x, y);
}

__global__ void k_scale(size_t n, float a, float *x) {
  GRID_LOOP(i, n) gs_op_scale(i, a, x);
}

__global__ void k_add_lp(size_t n, gs_dtype t, float *dst, const void *src) {
  GRID_LOOP(i, n) gs_op_add_lp(i, t, dst, src);
}

__global__ void k_convert(size_t n, gs_dtype to, void *dst, gs_dtype from, const void *src) {
  GRID_LOOP(i, n) gs_op_convert(i, to, dst, from, src);
}

/* Integer counts: the atomic adds commute exactly. */
__global__ void k_gather(size_t n, int count, size_t dim, const uint8_t *pixels,
                         const int32_t *labels, const int64_t *idx, float *x, int32_t *y) {
  GRID_LOOP(e, n) gs_op_gather(e, count, dim, pixels, labels, idx, x, y);
}

__global__ void k_nonfinite(size_t n, gs_dtype t, const void *x, unsigned long long *count) {
  __shared__ unsigned long long v[GS_CUDA_THREADS];
  unsigned long long c = 0;
  GRID_LOOP(i, n) c += (unsigned long long)gs_op_nonfinite(t, x, i);
  int t0 = (int)threadIdx.x;
  v[t0] = c;
  __syncthreads();
  for (int s = GS_CUDA_THREADS / 2; s > 0; s >>= 1) {
    if (t0 < s) v[t0] += v[t0 + s];
    __syncthreads();
  }
  if (t0 == 0 && v[0]) atomicAdd(count, v[0]);
}

__global__ void k_gemm_beta(size_t n, int cols, float beta, float *c, int ldc) {
  GRID_LOOP(i, n) gs_op_gemm_beta(i, cols, beta, c, ldc);
}

/* ---- launchers ---- */

#define LAUNCH(k, op, n, kernel, ...)                                            \
  do {                                                                           \
    size_t n_ = (n);                                                             \
    if (n_ == 0) break;                                                          \
    cu_enter(k);                                                                 \
    kernel<<<cu_blocks(n_), GS_CUDA_THREADS, 0, cu_of(k)->stream>>>(__VA_ARGS__); \
    cu_launched(k, op);                                                          \
  } while (0)

void cu_bias_add(gs_kernels *k, int rows, int cols, const float *bias, float *y) {
  if (rows <= 0 || cols <= 0) return;
  size_t n = (size_t)rows * cols;
  LAUNCH(k, "bias_add", n, k_bias_add, n, cols, bias, y);
}

void cu_bias_grad(gs_kernels *k, int rows, int cols, const float *dy, float *db) {
  if (cols <= 0) return;
  cu_enter(k);
  int tiles = (cols + GS_BG_COLS - 1) / GS_BG_COLS;
  k_bias_grad<<<(unsigned)(tiles < 65535 ? tiles : 65535), GS_CUDA_THREADS, 0,
                cu_of(k)->stream>>>(rows < 0 ? 0 : rows, cols, dy, db);
  cu_launched(k, "bias_grad");
}

void cu_bias_add_nchw(gs_kernels *k, int n, int c, int plane, const float *bias, float *y) {
  if (n <= 0 || c <= 0 || plane <= 0) return;
  size_t total = (size_t)n * c * plane;
  LAUNCH(k, "bias_add_nchw", total, k_bias_add_nchw, total, c, plane, bias, y);
}

void cu_bias_grad_nchw(gs_kernels *k, int n, int c, int plane, const float *dy, float *db) {
  if (c <= 0) return;
  cu_enter(k);
  unsigned blocks = (unsigned)(c < 65535 ? c : 65535);
  k_bias_grad_nchw<<<blocks, GS_CUDA_THREADS, 0, cu_of(k)->stream>>>(
      n < 0 ? 0 : n, c, plane < 0 ? 0 : plane, dy, db);
  cu_launched(k, "bias_grad_nchw");
}

void cu_relu(gs_kernels *k, size_t n, const float *x, float *y) {
  LAUNCH(k, "relu", n, k_relu, n, x, y);
}

void cu_relu_grad(gs_kernels *k, size_t n, const float *y, const float *dy, float *dx) {
  LAUNCH(k, "relu_grad", n, k_relu_grad, n, y, dy, dx);
}

/* Per-row scratch grows to the largest batch seen (cudaFree waits for the
 * device, which only happens when the batch grows). */
static bool xent_scratch(gs_kernels *k, int batch) {
  cu_impl *c = cu_of(k);
  if (batch <= c->xent_rows) return true;
  cudaFree(c->d_loss);
  cudaFree(c->d_hit);
  cudaFree(c->d_bad);
  c->d_loss = NULL;
  c->d_hit = c->d_bad = NULL;
  c->xent_rows = 0;
  if (!cu_check(k, "xent_forward", cudaMalloc(&c->d_loss, (size_t)batch * sizeof(double))) ||
      !cu_check(k, "xent_forward", cudaMalloc(&c->d_hit, (size_t)batch * sizeof(int))) ||
      !cu_check(k, "xent_forward", cudaMalloc(&c->d_bad, (size_t)batch * sizeof(int))))
    return false;
  c->xent_rows = batch;
  return true;
}

void cu_xent_deliver(gs_kernels *k) {
  cu_impl *c = cu_of(k);
  if (!c->xent_pending) return;
  c->xent_pending = false;
  const gs_xent_result *r = c->h_xres;
  if (r->bad_row >= 0) {
    cu_fail(k, "xent_forward", GS_EINVAL,
            "xent_forward: label %d of row %d is outside [0, %d): a label outside [0, classes)",
            r->bad_label, r->bad_row, c->xent_classes);
    return;
  }
  if (c->xent_loss) *c->xent_loss = r->mean_loss;
  if (c->xent_correct) *c->xent_correct = r->correct;
}

void cu_xent_forward(gs_kernels *k, int batch, int classes, const float *logits,
                     const int32_t *labels, float *probs, float *loss_host, int *correct_host) {
  cu_impl *c = cu_of(k);
  if (batch <= 0) {
    if (loss_host) *loss_host = 0.0f;
    if (correct_host) *correct_host = 0;
    return;
  }
  if (classes <= 0) {
    cu_fail(k, "xent_forward", GS_EINVAL, "xent_forward: %d classes", classes);
    return;
  }
  cu_enter(k);
  if (c->xent_pending) {  /* one result in flight: the earlier one is handed over first */
    if (!cu_check(k, "xent_forward", cudaStreamSynchronize(c->stream))) return;
    cu_xent_deliver(k);
  }
  if (!xent_scratch(k, batch)) return;
  k_xent_rows<<<cu_blocks((size_t)batch), GS_CUDA_THREADS, 0, c->stream>>>(
      batch, classes, logits, labels, probs, c->d_loss, c->d_hit, c->d_bad);
  if (!cu_launched(k, "xent_forward")) return;
  k_xent_total<<<1, GS_CUDA_THREADS, 0, c->stream>>>(batch, labels, c->d_loss, c->d_hit, c->d_bad,
                                                      c->d_xres);
  if (!cu_launched(k, "xent_forward")) return;
  if (!cu_check(k, "xent_forward", cudaMemcpyAsync(c->h_xres, c->d_xres, sizeof *c->h_xres,
                                                   cudaMemcpyDeviceToHost, c->stream)))
    return;
  c->xent_pending = true;
  c->xent_classes = classes;
  c->xent_loss = loss_host;
  c->xent_correct = correct_host;
}

void cu_xent_backward(gs_kernels *k, int batch, int classes, const float *probs,
                      const int32_t *labels, float scale, float *dlogits) {
  if (batch <= 0 || classes <= 0) return;
  float f = scale / (float)batch;
  size_t n = (size_t)batch * classes;
  LAUNCH(k, "xent_backward", n, k_xent_backward, n, classes, probs, labels, f, dlogits);
}

void cu_im2col(gs_kernels *k, const gs_conv_desc *d, const float *img, float *col) {
  if (d->c <= 0 || d->kh <= 0 || d->kw <= 0 || d->oh <= 0 || d->ow <= 0) return;
  size_t n = (size_t)d->c * d->kh * d->kw * d->oh * d->ow;
  LAUNCH(k, "im2col", n, k_im2col, n, *d, img, col);
}

void cu_col2im(gs_kernels *k, const gs_conv_desc *d, const float *col, float *img) {
  if (d->c <= 0 || d->h <= 0 || d->w <= 0 || d->stride <= 0) return;
  size_t n = (size_t)d->c * d->h * d->w;
  LAUNCH(k, "col2im", n, k_col2im, n, *d, col, img);
}

void cu_maxpool_forward(gs_kernels *k, int planes, int h, int w, const float *x, float *y,
                        int32_t *argmax) {
  if (planes <= 0 || h < 2 || w < 2) return;
  size_t n = (size_t)planes * (h / 2) * (w / 2);
  LAUNCH(k, "maxpool_forward", n, k_maxpool_forward, n, h, w, x, y, argmax);
}

void cu_maxpool_backward(gs_kernels *k, int planes, int h, int w, const float *dy,
                         const int32_t *argmax, float *dx) {
  if (planes <= 0 || h <= 0 || w <= 0) return;
  size_t n = (size_t)planes * h * w;
  LAUNCH(k, "maxpool_backward", n, k_maxpool_backward, n, h, w, dy, argmax, dx);
}

/* Device pointers are alloc() plus whole elements (kernels.h): a GPU
 * faults on less, so a misaligned one is a sticky error here instead. */
static bool dev_aligned(gs_kernels *k, const char *op, const void *p, size_t elem) {
  if ((uintptr_t)p % elem == 0) return true;
  cu_fail(k, op, GS_EINVAL, "%s: device pointer %p is not %zu-byte aligned; device buffers "
          "are alloc() plus whole elements (host bytes go through to_device)", op, p, elem);
  return false;
}

void cu_sgd(gs_kernels *k, size_t n, void *p, const void *g, void *buf, gs_sgd h, bool first) {
  if (!dev_aligned(k, "sgd", p, 4) || !dev_aligned(k, "sgd", g, 4) ||
      (buf && !dev_aligned(k, "sgd", buf, 4)))
    return;
  LAUNCH(k, "sgd", n, k_sgd, n, (float *)p, (const float *)g, (float *)buf, h, first ? 1 : 0);
}

void cu_add(gs_kernels *k, size_t n, void *dst, const void *src) {
  if (!dev_aligned(k, "add", dst, 4) || !dev_aligned(k, "add", src, 4)) return;
  LAUNCH(k, "add", n, k_add, n, (float *)dst, (const float *)src);
}

void cu_axpy(gs_kernels *k, size_t n, float a, const void *x, void *y) {
  if (!dev_aligned(k, "axpy", x, 4) || !dev_aligned(k, "axpy", y, 4)) return;
  LAUNCH(k, "axpy", n, k_axpy, n, a, (const float *)x, (float *)y);
}

void cu_scale(gs_kernels *k, size_t n, float a, void *x) {
  if (!dev_aligned(k, "scale", x, 4)) return;
  LAUNCH(k, "scale", n, k_scale, n, a, (float *)x);
}

void cu_add_lp(gs_kernels *k, gs_dtype t, size_t n, void *dst, const void *src) {
  if (!dev_aligned(k, "add_lp", dst, 4) || !dev_aligned(k, "add_lp", src, gs_dtype_size(t)))
    return;
  LAUNCH(k, "add_lp", n, k_add_lp, n, t, (float *)dst, src);
}

void cu_convert(gs_kernels *k, gs_dtype to, void *dst, gs_dtype from, const void *src,
                size_t n) {
  if (n == 0) return;
  if (to == from) {
    if (dst == src) return;
    cu_enter(k);
    cu_check(k, "convert", cudaMemcpyAsync(dst, src, n * gs_dtype_size(to),
                                           cudaMemcpyDeviceToDevice, cu_of(k)->stream));
    return;
  }
  if (!dev_aligned(k, "convert", dst, gs_dtype_size(to)) ||
      !dev_aligned(k, "convert", src, gs_dtype_size(from)))
    return;
  LAUNCH(k, "convert", n, k_convert, n, to, dst, from, src);
}

/* On a device error every element is suspect: report n (at least 1), so a
 * caller deciding "skip the step?" skips rather than steps on garbage. */
size_t cu_nonfinite(gs_kernels *k, gs_dtype t, size_t n, const void *x) {
  cu_impl *c = cu_of(k);
  if (n == 0) return 0;
  if (!dev_aligned(k, "nonfinite", x, gs_dtype_size(t))) return n;
  cu_enter(k);
  if (!cu_check(k, "nonfinite", cudaMemsetAsync(c->d_count, 0, sizeof *c->d_count, c->stream)))
    return n;
  k_nonfinite<<<cu_blocks(n), GS_CUDA_THREADS, 0, c->stream>>>(n, t, x, c->d_count);
  if (!cu_launched(k, "nonfinite")) return n;
  if (!cu_check(k, "nonfinite", cudaMemcpyAsync(c->h_count, c->d_count, sizeof *c->h_count,
                                                cudaMemcpyDeviceToHost, c->stream)) ||
      !cu_check(k, "nonfinite", cudaStreamSynchronize(c->stream)))
    return n;
  return (size_t)*c->h_count;
}

void cu_gather_batch(gs_kernels *k, int count, size_t dim, const uint8_t *pixels,
                     const int32_t *labels, const int64_t *idx, float *x, int32_t *y) {
  if (count <= 0 || dim == 0) return;
  size_t n = (size_t)count * dim;
  LAUNCH(k, "gather_batch", n, k_gather, n, count, dim, pixels, labels, idx, x, y);
}

void cu_gemm_beta(gs_kernels *k, int m, int n, float beta, float *c, int ldc) {
  size_t total = (size_t)m * n;
  LAUNCH(k, "gemm", total, k_gemm_beta, total, n, beta, c, ldc);
}
