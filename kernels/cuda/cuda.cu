/* cuda.cu: the CUDA table of kernels.h: setup, memory, streams, errors and
 * the cuBLAS GEMMs (the other ops are in ops.cu).
 *
 * One table = one GPU, one non-blocking stream, one cuBLAS handle bound to
 * that stream. Every op is queued on the stream and returns; sync() waits
 * and returns the first failure since the last sync (sticky, with the op's
 * name), as kernels.h asks. See cuda_impl.h for what other parts may use
 * (the stream, forks on their own streams, memory figures).
 *
 * GEMMs: kernels.h is row-major, cuBLAS column-major. A row-major C is the
 * column-major C^T, and C^T = op(B)^T op(A)^T, so the call swaps the
 * operands and m with n (gs_gemm_as_colmajor in ops.h, tested on the CPU
 * against cblas). TF32 is left off (CUBLAS_DEFAULT_MATH): fp32 GEMMs are
 * fp32, so the GPU agrees with the CPU table to fp32 rounding. gemm_lp is
 * cublasGemmEx with fp16 / bf16 A and B, fp32 C and CUBLAS_COMPUTE_32F.
 *
 * Without a usable GPU (no driver, none visible, device busy) the table is
 * not made: gs_kernels_cuda returns NULL with GS_EDEVICE, the CUDA error
 * and what to check. Nothing here calls exit(). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/table.h"

/* ---- errors ---- */

static const char *visible_devices(void) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  return v ? v : "(unset)";
}

extern "C" int gs_cuda_fail(cudaError_t rc, gs_err *e, const char *what) {
  if (rc == cudaSuccess) return GS_OK;
  (void)cudaGetLastError();
  return GS_FAIL(e, GS_EDEVICE, "%s: %s (%s)", what, cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
}

void cu_fail(gs_kernels *k, const char *op, int code, const char *fmt, ...) {
  cu_impl *c = cu_of(k);
  char msg[sizeof c->err.msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  (void)cudaGetLastError();
  pthread_mutex_lock(&c->mu);
  GS_FAIL(&c->err, code, "GPU %d: %s", c->dev, msg);
  c->last_op = op;
  pthread_mutex_unlock(&c->mu);
}

bool cu_check(gs_kernels *k, const char *op, cudaError_t rc) {
  if (rc == cudaSuccess) return true;
  int code = rc == cudaErrorMemoryAllocation ? GS_ENOMEM : GS_EDEVICE;
  cu_fail(k, op, code, "%s: %s (%s)", op, cudaGetErrorName(rc), cudaGetErrorString(rc));
  return false;
}

bool cu_launched(gs_kernels *k, const char *op) {
  cu_impl *c = cu_of(k);
  c->last_op = op;  /* only read for messages; a torn read names an older op */
  cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) return true;
  cu_fail(k, op, GS_EDEVICE, "%s: kernel launch failed: %s (%s)", op, cudaGetErrorName(rc),
          cudaGetErrorString(rc));
  return false;
}

/* Also clears CUDA's per-thread last error: NCCL and our own polls may
 * leave a harmless one (cudaErrorNotReady) that the launch check after the
 * next kernel would otherwise report. Sticky device errors survive this. */
void cu_enter(gs_kernels *k) {
  (void)cudaGetLastError();
  int cur = -1;
  int dev = cu_of(k)->dev;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != dev) {
    (void)cudaGetLastError();
    cu_check(k, "cudaSetDevice", cudaSetDevice(dev));
  }
}

static const char *blas_name(cublasStatus_t s) { return cublasGetStatusName(s); }
static const char *blas_string(cublasStatus_t s) { return cublasGetStatusString(s); }

/* ---- memory accounting (shared by a table and its forks) ---- */

static cu_mem *mem_new(void) {
  cu_mem *m = (cu_mem *)calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  m->refs = 1;
  return m;
}

static void mem_unref(cu_mem *m) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  int left = --m->refs;
  pthread_mutex_unlock(&m->mu);
  if (left) return;
  pthread_mutex_destroy(&m->mu);
  free(m->recs);
  free(m);
}

static bool mem_add(cu_mem *m, void *p, size_t bytes) {
  bool ok = true;
  pthread_mutex_lock(&m->mu);
  if (m->nrecs == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    cu_mem::cu_rec *r = (cu_mem::cu_rec *)realloc(m->recs, cap * sizeof *r);
    if (r) {
      m->recs = r;
      m->cap = cap;
    } else {
      ok = false;
    }
  }
  if (ok) {
    m->recs[m->nrecs].p = p;
    m->recs[m->nrecs].bytes = bytes;
    m->nrecs++;
    m->now += bytes;
    if (m->now > m->peak) m->peak = m->now;
  }
  pthread_mutex_unlock(&m->mu);
  return ok;
}

static void mem_remove(cu_mem *m, void *p) {
  pthread_mutex_lock(&m->mu);
  for (size_t i = m->nrecs; i-- > 0;)
    if (m->recs[i].p == p) {
      m->now -= m->recs[i].bytes;
      m->recs[i] = m->recs[--m->nrecs];
      break;
    }
  pthread_mutex_unlock(&m->mu);
}

/* ---- memory ops ---- */

static void *cu_alloc(gs_kernels *k, size_t bytes) {
  cu_impl *c = cu_of(k);
  cu_enter(k);
  void *p = NULL;
  cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
  if (rc != cudaSuccess) {
    size_t free_b = 0, total_b = 0, mine = 0;
    (void)cudaGetLastError();
    (void)cudaMemGetInfo(&free_b, &total_b);
    gs_cuda_mem(k, &mine, NULL);
    cu_fail(k, "alloc", rc == cudaErrorMemoryAllocation ? GS_ENOMEM : GS_EDEVICE,
            "alloc: cudaMalloc of %zu bytes failed: %s (%s); this rank holds %zu bytes, "
            "%zu of %zu bytes free on the GPU (other processes on it count too: nvidia-smi)",
            bytes, cudaGetErrorName(rc), cudaGetErrorString(rc), mine, free_b, total_b);
    return NULL;
  }
  /* Zeroed as the contract says, and finished before any other stream
   * (a fork, NCCL) can touch the buffer. */
  if (!cu_check(k, "alloc", cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->stream)) ||
      !cu_check(k, "alloc", cudaStreamSynchronize(c->stream)) || !mem_add(c->mem, p, bytes)) {
    if (c->err.code == 0) cu_fail(k, "alloc", GS_ENOMEM, "alloc: out of host memory");
    cudaFree(p);
    return NULL;
  }
  return p;
}

static void cu_release(gs_kernels *k, void *p) {
  if (!p) return;
  cu_enter(k);
  mem_remove(cu_of(k)->mem, p);
  cu_check(k, "release", cudaFree(p));
}

static void *cu_alloc_host(gs_kernels *k, size_t bytes) {
  cu_enter(k);
  void *p = NULL;
  cudaError_t rc = cudaMallocHost(&p, bytes ? bytes : 1);
  if (rc != cudaSuccess) {
    cu_fail(k, "alloc_host", GS_ENOMEM,
            "alloc_host: cudaMallocHost (pinned) of %zu bytes failed: %s (%s); pinned memory "
            "is limited by RAM and `ulimit -l`",
            bytes, cudaGetErrorName(rc), cudaGetErrorString(rc));
    return NULL;
  }
  memset(p, 0, bytes ? bytes : 1);
  return p;
}

static void cu_release_host(gs_kernels *k, void *p) {
  if (!p) return;
  cu_enter(k);
  cu_check(k, "release_host", cudaFreeHost(p));
}

/* Host copies wait for the stream: see cuda_impl.h ("Host memory"). */
static void cu_to_device(gs_kernels *k, void *dst, const void *src_host, size_t bytes) {
  if (!bytes) return;
  cu_impl *c = cu_of(k);
  cu_enter(k);
  if (cu_check(k, "to_device",
               cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream)))
    cu_check(k, "to_device", cudaStreamSynchronize(c->stream));
  c->last_op = "to_device";
}

static void cu_to_host(gs_kernels *k, void *dst_host, const void *src, size_t bytes) {
  if (!bytes) return;
  cu_impl *c = cu_of(k);
  cu_enter(k);
  if (cu_check(k, "to_host",
               cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, c->stream)))
    cu_check(k, "to_host", cudaStreamSynchronize(c->stream));
  c->last_op = "to_host";
}

/* The CPU table's copy is memmove; cudaMemcpy of overlapping ranges is
 * undefined, so an overlap (rare) goes through a temporary buffer. */
static void cu_copy(gs_kernels *k, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return;
  cu_impl *c = cu_of(k);
  cu_enter(k);
  uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  if (d < s + bytes && s < d + bytes) {
    void *tmp = NULL;
    if (cu_check(k, "copy", cudaMalloc(&tmp, bytes)) &&
        cu_check(k, "copy", cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice,
                                            c->stream)))
      cu_check(k, "copy", cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice,
                                          c->stream));
    if (tmp) cudaFree(tmp);  /* waits for the copies */
  } else {
    cu_check(k, "copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
  }
  c->last_op = "copy";
}

static void cu_zero(gs_kernels *k, void *p, size_t bytes) {
  if (!bytes) return;
  cu_enter(k);
  cu_check(k, "zero", cudaMemsetAsync(p, 0, bytes, cu_of(k)->stream));
  cu_of(k)->last_op = "zero";
}

static int cu_sync(gs_kernels *k, gs_err *e) {
  cu_impl *c = cu_of(k);
  cu_enter(k);
  cudaError_t rc = cudaStreamSynchronize(c->stream);
  if (rc != cudaSuccess)
    cu_fail(k, "sync", GS_EDEVICE,
            "a queued op failed: %s (%s), seen at sync; last op queued: %s (run with "
            "CUDA_LAUNCH_BLOCKING=1 to find the failing op)",
            cudaGetErrorName(rc), cudaGetErrorString(rc), c->last_op ? c->last_op : "none");
  else
    cu_xent_deliver(k);
  pthread_mutex_lock(&c->mu);
  int code = c->err.code;
  if (code != 0) {
    if (e && e->code == 0) *e = c->err;
    gs_err_clear(&c->err);
  }
  pthread_mutex_unlock(&c->mu);
  return code;
}

static void cu_set_threads(gs_kernels *k, int threads) {}

static void impl_free(cu_impl *c) {
  if (!c) return;
  if (c->stream) cudaStreamSynchronize(c->stream);
  if (c->blas) cublasDestroy(c->blas);
  if (c->stream) cudaStreamDestroy(c->stream);
  cudaFree(c->d_loss);
  cudaFree(c->d_hit);
  cudaFree(c->d_bad);
  cudaFree(c->d_xres);
  cudaFree(c->d_count);
  if (c->h_xres) cudaFreeHost(c->h_xres);
  if (c->h_count) cudaFreeHost(c->h_count);
  mem_unref(c->mem);
  pthread_mutex_destroy(&c->mu);
  (void)cudaGetLastError();
  free(c);
}

static void cu_destroy(gs_kernels *k) {
  if (!k) return;
  cu_enter(k);
  impl_free(cu_of(k));
  free(k);
}

/* ---- GEMM ---- */

static bool blas_ready(gs_kernels *k, const char *op) {
  cu_impl *c = cu_of(k);
  if (c->blas) return true;
  cublasStatus_t s = cublasCreate(&c->blas);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(c->blas, c->stream);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cu_fail(k, op, GS_EDEVICE, "%s: cuBLAS handle: %s (%s)", op, blas_name(s), blas_string(s));
    if (c->blas) cublasDestroy(c->blas);
    c->blas = NULL;
    return false;
  }
  return true;
}

static void blas_status(gs_kernels *k, const char *op, cublasStatus_t s, bool ta, bool tb, int m,
                        int n, int kk, int lda, int ldb, int ldc) {
  if (s == CUBLAS_STATUS_SUCCESS) {
    cu_of(k)->last_op = op;
    return;
  }
  cu_fail(k, op, GS_EDEVICE, "%s: %s (%s) for ta=%d tb=%d m=%d n=%d k=%d lda=%d ldb=%d ldc=%d",
          op, blas_name(s), blas_string(s), (int)ta, (int)tb, m, n, kk, lda, ldb, ldc);
}

static void cu_gemm(gs_kernels *k, bool ta, bool tb, int m, int n, int kk, float alpha,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c,
                    int ldc) {
  if (m <= 0 || n <= 0) return;
  cu_enter(k);
  if (kk <= 0) {
    cu_gemm_beta(k, m, n, beta, c, ldc);
    return;
  }
  if (!blas_ready(k, "gemm")) return;
  gs_colmajor_gemm g = gs_gemm_as_colmajor(ta, tb, m, n, kk, a, lda, b, ldb);
  cublasStatus_t s = cublasSgemm(cu_of(k)->blas, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
                                 (const float *)g.a, g.lda, (const float *)g.b, g.ldb, &beta, c,
                                 ldc);
  blas_status(k, "gemm", s, ta, tb, m, n, kk, lda, ldb, ldc);
}

static void cu_gemm_lp(gs_kernels *k, gs_dtype t, bool ta, bool tb, int m, int n, int kk,
                       float alpha, const void *a, int lda, const void *b, int ldb, float beta,
                       float *c, int ldc) {
  if (t == GS_F32) {
    cu_gemm(k, ta, tb, m, n, kk, alpha, (const float *)a, lda, (const float *)b, ldb, beta, c,
            ldc);
    return;
  }
  if (m <= 0 || n <= 0) return;
  cu_enter(k);
  if (kk <= 0) {
    cu_gemm_beta(k, m, n, beta, c, ldc);
    return;
  }
  if (!blas_ready(k, "gemm_lp")) return;
  cudaDataType in = t == GS_F16 ? CUDA_R_16F : CUDA_R_16BF;
  gs_colmajor_gemm g = gs_gemm_as_colmajor(ta, tb, m, n, kk, a, lda, b, ldb);
  cublasStatus_t s = cublasGemmEx(
      cu_of(k)->blas, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.m, g.n, g.k, &alpha, g.a, in, g.lda, g.b, in, g.ldb, &beta, c, CUDA_R_32F, ldc,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  blas_status(k, "gemm_lp", s, ta, tb, m, n, kk, lda, ldb, ldc);
}

/* ---- creation ---- */

static const char *const check_hint =
    "check the driver (nvidia-smi), CUDA_VISIBLE_DEVICES, and that the GPU is not in "
    "exclusive-process mode held by another process; or use --device cpu";

static void fill_table(gs_kernels *k, cu_impl *c) {
  k->name = "cuda";
  k->device = GS_DEV_CUDA;
  k->impl = c;
  k->alloc = cu_alloc;
  k->release = cu_release;
  k->alloc_host = cu_alloc_host;
  k->release_host = cu_release_host;
  k->to_device = cu_to_device;
  k->to_host = cu_to_host;
  k->copy = cu_copy;
  k->zero = cu_zero;
  k->sync = cu_sync;
  k->set_threads = cu_set_threads;
  k->clone = gs_cuda_fork;
  k->destroy = cu_destroy;
  k->gemm = cu_gemm;
  k->gemm_lp = cu_gemm_lp;
  k->bias_add = cu_bias_add;
  k->bias_grad = cu_bias_grad;
  k->bias_add_nchw = cu_bias_add_nchw;
  k->bias_grad_nchw = cu_bias_grad_nchw;
  k->relu = cu_relu;
  k->relu_grad = cu_relu_grad;
  k->xent_forward = cu_xent_forward;
  k->xent_backward = cu_xent_backward;
  k->im2col = cu_im2col;
  k->col2im = cu_col2im;
  k->maxpool_forward = cu_maxpool_forward;
  k->maxpool_backward = cu_maxpool_backward;
  k->sgd = cu_sgd;
  k->add = cu_add;
  k->axpy = cu_axpy;
  k->scale = cu_scale;
  k->add_lp = cu_add_lp;
  k->convert = cu_convert;
  k->nonfinite = cu_nonfinite;
  k->gather_batch = cu_gather_batch;
}

/* The stream, the small result buffers; cuBLAS when eager_blas. The GPU
 * must be current. */
static int make_table(int dev, cu_mem *mem, bool eager_blas, gs_kernels **out, gs_err *e) {
  gs_kernels *k = (gs_kernels *)calloc(1, sizeof *k);
  cu_impl *c = (cu_impl *)calloc(1, sizeof *c);
  if (!k || !c) {
    free(k);
    free(c);
    return GS_FAIL(e, GS_ENOMEM, "out of memory creating the CUDA kernels");
  }
  pthread_mutex_init(&c->mu, NULL);
  c->dev = dev;
  c->mem = mem;
  fill_table(k, c);
  char what[96];
  snprintf(what, sizeof what, "--device cuda: GPU %d: creating a stream", dev);
  int rc = gs_cuda_fail(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), e, what);
  if (rc == GS_OK) {
    snprintf(what, sizeof what, "--device cuda: GPU %d: small result buffers", dev);
    rc = gs_cuda_fail(cudaMalloc(&c->d_xres, sizeof *c->d_xres), e, what);
    if (rc == GS_OK) rc = gs_cuda_fail(cudaMalloc(&c->d_count, sizeof *c->d_count), e, what);
    if (rc == GS_OK)
      rc = gs_cuda_fail(cudaMallocHost(&c->h_xres, sizeof *c->h_xres), e, what);
    if (rc == GS_OK)
      rc = gs_cuda_fail(cudaMallocHost(&c->h_count, sizeof *c->h_count), e, what);
  }
  if (rc == GS_OK && eager_blas && !blas_ready(k, "cuBLAS")) {
    rc = GS_FAIL(e, GS_EDEVICE, "--device cuda: %s; %s", c->err.msg, check_hint);
  }
  if (rc != GS_OK) {
    c->mem = NULL;  /* the caller still owns its reference */
    impl_free(c);
    free(k);
    return rc;
  }
  *out = k;
  return GS_OK;
}

/* ---- counting GPUs ----
 * CUDA does not survive fork(), so a launcher must not touch the driver
 * before it forks its ranks. That is the loader's concern
 * (kernels/cuda_loader.c): until the module is loaded it asks a
 * short-lived child (module.c's count_here). Once the module is loaded this
 * process uses CUDA anyway: ask here. */
extern "C" int gs_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

extern "C" gs_kernels *gs_kernels_cuda(int device, gs_err *e) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    GS_FAIL(e, GS_EDEVICE, "--device cuda: no usable GPU (%s: %s); %s", cudaGetErrorName(rc),
            cudaGetErrorString(rc), check_hint);
    return NULL;
  }
  if (n <= 0) {
    GS_FAIL(e, GS_EDEVICE, "--device cuda: no GPU visible (CUDA_VISIBLE_DEVICES=%s); %s",
            visible_devices(), check_hint);
    return NULL;
  }
  if (device < 0 || device >= n) {
    GS_FAIL(e, GS_EDEVICE,
            "--device cuda: GPU %d requested but %d GPU%s visible (ordinals 0..%d, "
            "CUDA_VISIBLE_DEVICES=%s)",
            device, n, n == 1 ? " is" : "s are", n - 1, visible_devices());
    return NULL;
  }
  rc = cudaSetDevice(device);
  if (rc == cudaSuccess) rc = cudaFree(NULL);  /* create the context now, not in the first op */
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    GS_FAIL(e, GS_EDEVICE, "--device cuda: GPU %d unusable (%s: %s); %s", device,
            cudaGetErrorName(rc), cudaGetErrorString(rc), check_hint);
    return NULL;
  }
  cu_mem *mem = mem_new();
  if (!mem) {
    GS_FAIL(e, GS_ENOMEM, "out of memory creating the CUDA kernels");
    return NULL;
  }
  gs_kernels *k = NULL;
  if (make_table(device, mem, true, &k, e) != GS_OK) {
    mem_unref(mem);
    return NULL;
  }
  return k;
}

/* ---- cuda_impl.h ---- */

extern "C" cudaStream_t gs_cuda_stream(gs_kernels *k) { return cu_of(k)->stream; }

extern "C" int gs_cuda_device(gs_kernels *k) { return cu_of(k)->dev; }

extern "C" gs_kernels *gs_cuda_fork(gs_kernels *k, gs_err *e) {
  cu_impl *c = cu_of(k);
  int rc = gs_cuda_fail(cudaSetDevice(c->dev), e, "fork: cudaSetDevice");
  if (rc != GS_OK) return NULL;
  pthread_mutex_lock(&c->mem->mu);
  c->mem->refs++;
  pthread_mutex_unlock(&c->mem->mu);
  gs_kernels *f = NULL;
  if (make_table(c->dev, c->mem, false, &f, e) != GS_OK) {
    mem_unref(c->mem);
    return NULL;
  }
  return f;
}

extern "C" int gs_cuda_stream_wait(gs_kernels *waiter, gs_kernels *producer, gs_err *e) {
  cu_enter(waiter);
  cudaEvent_t ev;
  int rc = gs_cuda_fail(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), e,
                        "stream_wait: cudaEventCreate");
  if (rc != GS_OK) return rc;
  rc = gs_cuda_fail(cudaEventRecord(ev, cu_of(producer)->stream), e, "stream_wait: record");
  if (rc == GS_OK)
    rc = gs_cuda_fail(cudaStreamWaitEvent(cu_of(waiter)->stream, ev, 0), e, "stream_wait: wait");
  cudaEventDestroy(ev);  /* released once the device has passed it */
  return rc;
}

extern "C" void gs_cuda_mem(gs_kernels *k, size_t *now, size_t *peak) {
  cu_mem *m = cu_of(k)->mem;
  pthread_mutex_lock(&m->mu);
  if (now) *now = m->now;
  if (peak) *peak = m->peak;
  pthread_mutex_unlock(&m->mu);
}
