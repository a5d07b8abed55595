/* table.h: private to kernels/cuda: the state behind a CUDA gs_kernels
 * and the helpers cuda.cu (setup, memory, GEMM) and ops.cu (the .cu
 * kernels) share. C++ (nvcc) only.
 *
 * Errors are sticky, as kernels.h asks: the first failure of an op (a
 * launch error, a cuBLAS status, a bad label) is kept with the op's name
 * and returned by the next sync(); later ones are consequences. CUDA's own
 * "last error" is cleared whenever we record one, so a failed cudaMalloc is
 * never blamed on the next kernel launch. */
#ifndef GS_CUDA_TABLE_H
#define GS_CUDA_TABLE_H

#include <pthread.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/ops.h"

/* Device allocations of one table and its forks (for gs_cuda_mem). */
struct cu_mem {
  pthread_mutex_t mu;
  int refs;
  size_t now, peak;
  struct cu_rec { void *p; size_t bytes; } *recs;
  size_t nrecs, cap;
};

struct cu_impl {
  int dev;
  cudaStream_t stream;
  cublasHandle_t blas;     /* made at creation (root) or on first GEMM (fork) */
  cu_mem *mem;             /* shared with forks */
  pthread_mutex_t mu;      /* err, last_op */
  gs_err err;
  const char *last_op;
  /* xent_forward scratch: per-row loss / hit / bad, and the result */
  double *d_loss;
  int *d_hit, *d_bad;
  int xent_rows;
  gs_xent_result *d_xres, *h_xres;        /* h_ pinned */
  /* a result on its way to h_xres, for the next sync to hand over */
  bool xent_pending;
  int xent_classes;
  float *xent_loss;
  int *xent_correct;
  unsigned long long *d_count, *h_count;  /* nonfinite */
};

static inline cu_impl *cu_of(gs_kernels *k) { return (cu_impl *)k->impl; }

/* Make k's GPU current for this thread (cheap when it already is). */
void cu_enter(gs_kernels *k);
/* Record an op's failure (first one wins) and clear CUDA's last error. */
void cu_fail(gs_kernels *k, const char *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Record rc (if not cudaSuccess) as op's failure; returns rc == success. */
bool cu_check(gs_kernels *k, const char *op, cudaError_t rc);
/* After a kernel launch: remember op as the last queued, check the launch. */
bool cu_launched(gs_kernels *k, const char *op);

/* Blocks for a grid-stride loop over n items (n > 0). */
static inline unsigned cu_blocks(size_t n) {
  size_t b = (n + GS_CUDA_THREADS - 1) / GS_CUDA_THREADS;
  const size_t cap = (size_t)65535 * 16;
  return (unsigned)(b > cap ? cap : b);
}

/* The ops of ops.cu, put in the table by cuda.cu. */
void cu_bias_add(gs_kernels *k, int rows, int cols, const float *bias, float *y);
void cu_bias_grad(gs_kernels *k, int rows, int cols, const float *dy, float *db);
void cu_bias_add_nchw(gs_kernels *k, int n, int c, int plane, const float *bias, float *y);
void cu_bias_grad_nchw(gs_kernels *k, int n, int c, int plane, const float *dy, float *db);
void cu_relu(gs_kernels *k, size_t n, const float *x, float *y);
void cu_relu_grad(gs_kernels *k, size_t n, const float *y, const float *dy, float *dx);
void cu_xent_forward(gs_kernels *k, int batch, int classes, const float *logits,
                     const int32_t *labels, float *probs, float *loss_host, int *correct_host);
void cu_xent_backward(gs_kernels *k, int batch, int classes, const float *probs,
                      const int32_t *labels, float scale, float *dlogits);
void cu_im2col(gs_kernels *k, const gs_conv_desc *d, const float *img, float *col);
void cu_col2im(gs_kernels *k, const gs_conv_desc *d, const float *col, float *img);
void cu_maxpool_forward(gs_kernels *k, int planes, int h, int w, const float *x, float *y,
                        int32_t *argmax);
void cu_maxpool_backward(gs_kernels *k, int planes, int h, int w, const float *dy,
                         const int32_t *argmax, float *dx);
void cu_sgd(gs_kernels *k, size_t n, void *p, const void *g, void *buf, gs_sgd h, bool first);
void cu_add(gs_kernels *k, size_t n, void *dst, const void *src);
void cu_axpy(gs_kernels *k, size_t n, float a, const void *x, void *y);
void cu_scale(gs_kernels *k, size_t n, float a, void *x);
void cu_add_lp(gs_kernels *k, gs_dtype t, size_t n, void *dst, const void *src);
void cu_convert(gs_kernels *k, gs_dtype to, void *dst, gs_dtype from, const void *src, size_t n);
size_t cu_nonfinite(gs_kernels *k, gs_dtype t, size_t n, const void *x);
/* After the stream has drained: hand a pending xent_forward result to its
 * host pointers, or record its bad label as the table's failure. */
void cu_xent_deliver(gs_kernels *k);
void cu_gather_batch(gs_kernels *k, int count, size_t dim, const uint8_t *pixels,
                     const int32_t *labels, const int64_t *idx, float *x, int32_t *y);
void cu_gemm_beta(gs_kernels *k, int m, int n, float beta, float *c, int ldc);

#endif
