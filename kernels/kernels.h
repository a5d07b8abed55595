/* kernels.h: the device-neutral compute contract of gradsync.
 *
 * Everything above this header computes through a table of functions
 * (gs_kernels), one per device: gs_kernels_cpu() (OpenBLAS + plain C with
 * run-time SIMD dispatch) and gs_kernels_cuda() (cuBLAS + .cu kernels).
 * The caller never branches on the device: model, optimizer, server and
 * ring all take a gs_kernels* and pointers that live on its device.
 *
 * Conventions
 *  - Matrices are row-major; gemm computes C = alpha*op(A)*op(B) + beta*C
 *    with op(A) m x k, op(B) k x n, C m x n, lda/ldb/ldc in elements.
 *  - Tensors are NCHW; a conv weight is [out, in, kh, kw] as PyTorch's.
 *  - Ops are void and asynchronous on devices that queue work; a failure is
 *    sticky and reported by sync(), which also waits for queued work.
 *    On the CPU every op completes before it returns.
 *  - Pointers passed to ops are device pointers from alloc(); host pointers
 *    appear only in to_device / to_host and where a signature says _host.
 *
 * Alignment: none. A pointer typed void * may hold any byte address, and
 * received frames and file payloads (which ZeroMQ and the loaders place
 * wherever they like) are only ever passed as void *: the streaming ops
 * (copy, zero, to_device, to_host, add, axpy, scale, sgd, add_lp, convert,
 * nonfinite) take void * for exactly that reason. Every CPU path (scalar,
 * AVX2, AVX-512) loads and stores unaligned, its tails through memcpy.
 * Typed pointers (float *, int32_t *) of the layer ops are the model's own
 * buffers and aligned for their type. On a CUDA device, pointers are alloc()
 * plus whole elements (the GPU faults on less; the CUDA table reports a
 * misaligned pointer as an error); host memory crosses with to_device /
 * to_host, which take any address.
 *  - Per-element math (ReLU, SGD, conversions, finite tests) lives in
 *    kernels/elem.h as inline functions shared by both devices, so the CPU
 *    tests exercise the code the GPU runs.
 *
 * Floating-point contract: fp32 everywhere except the _lp ops, which read
 * fp16 / bf16 storage and accumulate in fp32. Conversions round to nearest
 * even and give the same bits on every code path (F16C, AVX2, plain C). */
#ifndef GS_KERNELS_H
#define GS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* F64 and I32 are the collective benchmark's element types (its -d double
 * and int32): they travel as themselves and no table op takes them; only
 * gs_reduce_host below reduces them. Training and the table know the first
 * three (the wire dtypes). */
typedef enum gs_dtype { GS_F32 = 0, GS_F16 = 1, GS_BF16 = 2, GS_F64 = 3, GS_I32 = 4 } gs_dtype;
size_t gs_dtype_size(gs_dtype t);
const char *gs_dtype_name(gs_dtype t);   /* also "fp64", "int32" */
/* "fp32" / "fp16" / "bf16" (also "f32", "float16", "bfloat16"): the wire
 * dtypes only; -1 otherwise. */
int gs_dtype_parse(const char *s);
/* F16 and BF16: buffers hold fp32 and the wire rounds (the ring's and the
 * server's mixed precision); every other type is its own storage. */
static inline bool gs_dtype_lp(gs_dtype t) { return t == GS_F16 || t == GS_BF16; }

/* nccl-tests' -o. avg is the sum, then the caller's post-division
 * (gs_postdiv_host): NCCL divides after summing for integers and so do we
 * for every type, so avg is never an op a reduction runs. */
typedef enum gs_redop {
  GS_REDOP_SUM = 0, GS_REDOP_AVG = 1, GS_REDOP_PROD = 2, GS_REDOP_MIN = 3, GS_REDOP_MAX = 4
} gs_redop;

/* dst[i] = dst[i] op src[i], i < n, in host memory at any byte address (one
 * plain C loop per type, whatever gs_isa_select picked: it is the only path,
 * so there is nothing to force). t: F32, F64 or I32, dst and src both of
 * it; or F16 / BF16: dst fp32, src in t (the ring's mixed precision, as
 * add_lp). op: sum, prod, min or max (GS_EINVAL otherwise, or for another
 * type). Exact rules, so that every rank and every order agree:
 *  - I32 sum and prod wrap modulo 2^32 (NCCL's), never C's undefined overflow;
 *  - min and max are commutative bit for bit: a NaN wins over a number (of
 *    two NaNs the smaller bit pattern), min(-0, +0) = -0, max = +0; so the
 *    partners of recursive doubling, which apply op in opposite orders,
 *    hold the same bits;
 *  - floating sum and prod round once per element, as a + b and a * b. */
int gs_reduce_host(gs_redop op, gs_dtype t, size_t n, void *dst, const void *src, gs_err *e);
/* avg's post-division of a sum over world ranks, in place: F32 x *= the
 * fp32 1/world; F64 x *= the double 1/world; I32 x /= world truncated
 * toward zero (C's /), which is what NCCL's ncclAvg does for integers
 * (FuncSumPostDiv: the sum, then an integer division). */
int gs_postdiv_host(gs_dtype t, size_t n, void *x, int world, gs_err *e);
/* gather_batch (below) on host memory: the CPU table's, written once. */
void gs_gather_host(int count, size_t dim, const uint8_t *pixels, const int32_t *labels,
                    const int64_t *idx, float *x, int32_t *y);

typedef enum gs_device { GS_DEV_CPU = 0, GS_DEV_CUDA = 1 } gs_device;

/* One 2-D convolution (no dilation, groups = 1), per image of a batch. */
typedef struct gs_conv_desc {
  int n;          /* batch */
  int c, h, w;    /* input channels and size */
  int oc;         /* output channels */
  int kh, kw;     /* kernel */
  int stride, pad;
  int oh, ow;     /* output size, filled by gs_conv_init */
} gs_conv_desc;
/* Compute oh/ow; GS_EINVAL if the shape is impossible. */
int gs_conv_init(gs_conv_desc *d, gs_err *e);
/* Scratch floats conv2d_forward / conv2d_backward need (im2col columns). */
size_t gs_conv_workspace(const gs_conv_desc *d);

/* Dynamic loss scaling, torch.cuda.amp.GradScaler's rule: scale starts at
 * init; a step with any inf/NaN gradient is skipped and scale *= backoff;
 * after `interval` consecutive clean steps scale *= growth. A fixed scale
 * (dynamic = false) never changes but overflowing steps are still skipped. */
typedef struct gs_scaler {
  float scale;
  float growth, backoff;  /* 2.0, 0.5 */
  int interval;           /* 2000 */
  int clean;              /* consecutive clean steps so far */
  bool dynamic;
} gs_scaler;
void gs_scaler_init(gs_scaler *s, float init_scale, bool dynamic);
/* Apply one step's verdict; returns true when the step must be skipped. */
bool gs_scaler_update(gs_scaler *s, bool found_nonfinite);

/* torch.optim.SGD hyper-parameters (dampening 0, no Nesterov). */
typedef struct gs_sgd {
  float lr, momentum, weight_decay;
} gs_sgd;

typedef struct gs_kernels gs_kernels;
struct gs_kernels {
  const char *name;  /* "cpu" / "cuda" */
  gs_device device;
  void *impl;

  /* ---- memory ---- */
  void *(*alloc)(gs_kernels *k, size_t bytes);       /* zeroed; NULL + sticky error on failure */
  void (*release)(gs_kernels *k, void *p);
  void *(*alloc_host)(gs_kernels *k, size_t bytes);  /* pinned where it matters */
  void (*release_host)(gs_kernels *k, void *p);
  void (*to_device)(gs_kernels *k, void *dst, const void *src_host, size_t bytes);
  void (*to_host)(gs_kernels *k, void *dst_host, const void *src, size_t bytes);
  void (*copy)(gs_kernels *k, void *dst, const void *src, size_t bytes);
  void (*zero)(gs_kernels *k, void *p, size_t bytes);
  /* Wait for queued work; return the first error since the last sync. */
  int (*sync)(gs_kernels *k, gs_err *e);
  /* BLAS threads on the CPU (no-op on devices). */
  void (*set_threads)(gs_kernels *k, int threads);
  /* Another table on the same device and code path, with its own sticky
   * errors and queue (a second thread's, e.g. the ps server beside rank
   * 0's training); NULL + e on failure. */
  gs_kernels *(*clone)(gs_kernels *k, gs_err *e);
  void (*destroy)(gs_kernels *k);

  /* ---- dense algebra ---- */
  void (*gemm)(gs_kernels *k, bool ta, bool tb, int m, int n, int kk, float alpha,
               const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
  /* A and B in dtype t (fp16/bf16), C fp32, fp32 accumulation. */
  void (*gemm_lp)(gs_kernels *k, gs_dtype t, bool ta, bool tb, int m, int n, int kk, float alpha,
                  const void *a, int lda, const void *b, int ldb, float beta, float *c, int ldc);

  /* ---- layers ---- */
  /* y[r, :] += bias for each of rows rows of cols columns */
  void (*bias_add)(gs_kernels *k, int rows, int cols, const float *bias, float *y);
  /* db[c] = sum_r dy[r, c] (overwrites db) */
  void (*bias_grad)(gs_kernels *k, int rows, int cols, const float *dy, float *db);
  /* per-channel bias of NCHW tensors: y[i, c, :] += bias[c] */
  void (*bias_add_nchw)(gs_kernels *k, int n, int c, int plane, const float *bias, float *y);
  /* db[c] = sum over i and the plane of dy[i, c, :] (overwrites db) */
  void (*bias_grad_nchw)(gs_kernels *k, int n, int c, int plane, const float *dy, float *db);
  /* y = max(x, 0); in place allowed */
  void (*relu)(gs_kernels *k, size_t n, const float *x, float *y);
  /* dx = y > 0 ? dy : 0, from the forward output y; in place allowed */
  void (*relu_grad)(gs_kernels *k, size_t n, const float *y, const float *dy, float *dx);
  /* Softmax cross-entropy, mean over the batch. probs gets the softmax;
   * *loss_host the mean loss, *correct_host the argmax hits (either may be
   * NULL), written by the time the next sync() returns (at once on the
   * CPU): a GPU step need not stop for its loss. Labels outside [0,
   * classes) make the op fail (sticky; that sync reports it). */
  void (*xent_forward)(gs_kernels *k, int batch, int classes, const float *logits,
                       const int32_t *labels, float *probs, float *loss_host, int *correct_host);
  /* dlogits = (probs - onehot(labels)) * scale / batch; scale is the loss
   * scale of mixed precision (1 otherwise). */
  void (*xent_backward)(gs_kernels *k, int batch, int classes, const float *probs,
                        const int32_t *labels, float scale, float *dlogits);
  /* col[(c*kh + i)*kw + j][oy*ow + ox] for one image */
  void (*im2col)(gs_kernels *k, const gs_conv_desc *d, const float *img, float *col);
  /* img += col scattered back (img must be zeroed by the caller) */
  void (*col2im)(gs_kernels *k, const gs_conv_desc *d, const float *col, float *img);
  /* 2x2 max pool, stride 2, over planes = n*c planes of h x w; an odd last
   * row or column is dropped (PyTorch's floor mode). argmax (int32, one per
   * output, the index within its plane) records the winner for backward:
   * the first maximum in row-major order, or a NaN (PyTorch's rule). */
  void (*maxpool_forward)(gs_kernels *k, int planes, int h, int w, const float *x, float *y,
                          int32_t *argmax);
  /* dx = 0 then dx[argmax] += dy */
  void (*maxpool_backward)(gs_kernels *k, int planes, int h, int w, const float *dy,
                           const int32_t *argmax, float *dx);

  /* ---- optimizer and reductions (what the backends need) ---- */
  /* torch.optim.SGD on n elements: g += wd*p; buf = first ? g : m*buf + g;
   * p -= lr*buf. buf may be NULL when momentum is 0. */
  void (*sgd)(gs_kernels *k, size_t n, void *p, const void *g, void *buf, gs_sgd h, bool first);
  /* dst += src (fp32) */
  void (*add)(gs_kernels *k, size_t n, void *dst, const void *src);
  /* y += a*x (fp32) */
  void (*axpy)(gs_kernels *k, size_t n, float a, const void *x, void *y);
  /* x *= a (fp32) */
  void (*scale)(gs_kernels *k, size_t n, float a, void *x);
  /* dst (fp32) += src in dtype t: the fp32 accumulation of low-precision traffic */
  void (*add_lp)(gs_kernels *k, gs_dtype t, size_t n, void *dst, const void *src);
  /* Conversion between any two dtypes (same dtype: copy). */
  void (*convert)(gs_kernels *k, gs_dtype to, void *dst, gs_dtype from, const void *src, size_t n);
  /* Number of inf/NaN elements of x in dtype t (synchronous). */
  size_t (*nonfinite)(gs_kernels *k, gs_dtype t, size_t n, const void *x);

  /* ---- data ---- */
  /* A batch from a dataset held where the table computes: for i < count,
   * x[i, :] = pixels[idx[i], :] / 255 (gs_pixel1: ToTensor's bits) and
   * y[i] = labels[idx[i]]. pixels holds dim bytes per sample; idx must be
   * in range (the sampler's). On a GPU the dataset and indices are device
   * memory, so a step reads no host data. */
  void (*gather_batch)(gs_kernels *k, int count, size_t dim, const uint8_t *pixels,
                       const int32_t *labels, const int64_t *idx, float *x, int32_t *y);
};

/* ---- the end of a step, written once ----
 * Every backend (ps server, ring, NCCL) and the local mode finish a step
 * through gs_update_apply, so they round, check, skip and step alike
 * (docs/architecture.md, contracts 3 and 7). It holds the optimizer's state: the
 * momentum of every parameter (torch.optim.SGD's buffer, started at the
 * first step that is not skipped) and the loss scaler. Given the reduced
 * gradients (the SUM over world ranks, still carrying the loss scale):
 *
 *   1. with loss scaling only (fp16/bf16 wire, a scale != 1, or dynamic):
 *      the sum must fit the wire dtype (unless it already travelled in it),
 *      as DDP's sum must: a value that rounds to inf there is an overflow;
 *   2. g *= 1 / (world x scale)  (the mean, unscaled; in double, then float);
 *   3. with loss scaling: any inf/NaN left is an overflow, and the step's
 *      verdict is gs_scaler_update's: skip (parameters and momentum stay)
 *      or step. Every rank holds the same sum, so every rank agrees;
 *   4. SGD (the kernels' sgd) on each range.
 * Without loss scaling the ranges of a step may be applied one call at a
 * time as they complete (the ps server updates a bucket as soon as its sum
 * is in); with it, one call covers the whole step. */
typedef struct gs_update {
  gs_kernels *k;
  gs_sgd sgd;
  gs_scaler scaler;
  gs_dtype wire;
  int world;
  size_t n;            /* parameters */
  bool scaling;        /* loss scaling in play: a whole-step verdict */
  bool first;          /* no step taken yet: momentum starts at the next */
  bool stepped;        /* this step's SGD ran (so momentum starts after it) */
  void *momentum;      /* n floats on k's device, or NULL without momentum */
  void *fit;           /* wire-dtype scratch for the fit check */
  size_t fit_cap;      /* its elements */
} gs_update;

/* A range of the flat parameters and where its reduced gradients are (any
 * buffer on k's device: a received frame, the gradient buffer...). */
typedef struct gs_update_range {
  size_t offset, count;
  void *grad;
} gs_update_range;

typedef struct gs_update_result {
  bool skipped;        /* overflow: nothing changed */
  float scale;         /* the loss scale for the next step */
  double check_s;      /* fit check + unscale/average + finite check */
  double update_s;     /* SGD */
} gs_update_result;

/* n parameters; world ranks' gradients are summed into what apply gets. A
 * scaler with scale 0 means "none" (scale 1, fixed). */
int gs_update_init(gs_update *u, gs_kernels *k, size_t n, int world, gs_sgd sgd, gs_dtype wire,
                   gs_scaler scaler, gs_err *e);
void gs_update_free(gs_update *u);
/* Device bytes the optimizer holds (momentum, check scratch). */
size_t gs_update_bytes(const gs_update *u);
/* Apply ranges r[0..nr) of one step to params (n floats on k's device).
 * in_wire: the sums are already values of the wire dtype (they travelled
 * in it), so the fit check is not needed. last: this call ends the step.
 * With loss scaling, last must be true (one call per step). */
int gs_update_apply(gs_update *u, void *params, const gs_update_range *r, int nr, bool in_wire,
                    bool last, gs_update_result *out, gs_err *e);

/* The CPU table (always built). threads <= 0: leave BLAS as it is.
 * The streaming ops run the code path gs_isa_select() names. */
gs_kernels *gs_kernels_cpu(int threads, gs_err *e);

/* The CPU code path of this process: GS_ISA=scalar|avx2|avx512 forces one
 * for the whole program (every path gives the same bits); unset or "auto"
 * picks the best the CPU has (AVX-512, AVX2 + F16C, plain C). Naming an
 * unknown path is GS_EINVAL; one this CPU (or build) lacks is GS_EDEVICE,
 * with a message naming the missing instructions. *name gets "scalar" / "avx2" /
 * "avx512" on success. */
int gs_isa_select(const char **name, gs_err *e);
/* The CUDA table for device `device`, or GS_EDEVICE with the CUDA error
 * string and what to check (driver, CUDA_VISIBLE_DEVICES) when there is no
 * usable GPU or the build has no CUDA. */
gs_kernels *gs_kernels_cuda(int device, gs_err *e);
/* Number of usable CUDA devices (0 without CUDA or a driver). */
int gs_cuda_device_count(void);

/* Composite layers written once over the table, so both devices share them. */
/* y[n, oc, oh, ow] = conv(x, w) + b; ws has gs_conv_workspace(d) floats */
void gs_conv2d_forward(gs_kernels *k, const gs_conv_desc *d, const float *x, const float *w,
                       const float *b, float *y, float *ws);
/* dw, db overwritten; dx (may be NULL) overwritten */
void gs_conv2d_backward(gs_kernels *k, const gs_conv_desc *d, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db, float *ws);

#endif
