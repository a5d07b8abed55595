/* cuda_impl.h: the contract of kernels/cuda, the CUDA table of kernels.h
 * (cuda.cu: setup, memory, streams, errors and the cuBLAS GEMMs; ops.cu:
 * the .cu kernels around ops.h's per-thread bodies and kernels/elem.h;
 * table.h: the state those two share; module.c: the entry of the module
 * libgs_cuda.so), and what the other parts of gradsync may know about a
 * CUDA table beyond kernels.h: its stream, a second table on its own
 * stream, and how much GPU memory it holds. C and C++.
 *
 * Who uses it: kernels/cuda_loader.c (these functions, as forwards into the
 * module), allreduce/nccl (nccl.c, nccl_wait.c: a comm stream of its own)
 * and tests/gpu; only from code built where the toolkit is (#ifdef
 * GS_HAVE_CUDA). What kernels/cuda may include: kernels/ and base/ (it is
 * built as the part kernels, kernels/cuda/meson.build) and the toolkit's
 * headers (the CUDA runtime, cuBLAS); nothing above kernels.
 *
 * Rules: its code is built into libgs_cuda.so only, never into a program;
 * the element-wise ops give the CPU table's bits (--fmad=false, no
 * floating-point atomics: ops.cu), errors are sticky as kernels.h asks,
 * and nothing calls exit().
 *
 * Streams. A CUDA table queues every op on ONE non-blocking stream (its
 * "compute" stream); ops on one table run in the order they were called.
 * Work that should overlap with it (NCCL's all-reduce, device-to-host
 * copies of ready buckets) goes to a second table made by gs_cuda_fork():
 * same GPU, its own stream, the same ops. Ordering between the two is
 * explicit: gs_cuda_stream_wait(a, b) makes a's stream wait for what b has
 * queued so far (an event, no host blocking). Memory from either table's
 * alloc() is usable by both.
 *
 * Host memory. alloc_host() is cudaMallocHost (pinned, page-locked): copies
 * from and to it run at full PCIe speed. to_device() and to_host() return
 * only when the host buffer may be reused / read (they wait for the stream),
 * so callers treat host buffers as on the CPU table; sync() is still what
 * reports a failed op. For a copy that overlaps, queue it on a fork with
 * cudaMemcpyAsync(..., gs_cuda_stream(fork)) and wait on its stream.
 *
 * Threads. A table is used by one thread at a time (a ps server thread
 * takes its own fork or its own gs_kernels_cuda()). Every op selects the
 * table's GPU first, so any thread may call it.
 *
 * Where these live. The CUDA code is the module libgs_cuda.so
 * (kernels/cuda_loader.h); in the programs these functions are forwards
 * into it (kernels/cuda_loader.c). The programs do not link cudart, so
 * code outside the module may use the types of cuda_runtime.h but must not
 * call the CUDA runtime itself (the link fails if it does): copies go
 * through the table's ops, anything else through a new entry of
 * gs_cudamod_api. */
#ifndef GS_CUDA_IMPL_H
#define GS_CUDA_IMPL_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/kernels.h"

/* The stream every op of k is queued on (k must be a CUDA table). */
cudaStream_t gs_cuda_stream(gs_kernels *k);
/* The GPU ordinal of k. */
int gs_cuda_device(gs_kernels *k);
/* A new table on k's GPU with its own non-blocking stream (and its own
 * cuBLAS handle, made on its first GEMM). Destroy it before k. NULL and
 * GS_EDEVICE on failure. */
gs_kernels *gs_cuda_fork(gs_kernels *k, gs_err *e);
/* waiter's stream waits for everything queued on producer's stream so far. */
int gs_cuda_stream_wait(gs_kernels *waiter, gs_kernels *producer, gs_err *e);
/* Device bytes held through alloc() by k and every fork of it (or of its
 * parent), now and at the peak: the rank's GPU memory for the reports. */
void gs_cuda_mem(gs_kernels *k, size_t *now, size_t *peak);
/* Fill e with GS_EDEVICE: "<what>: <cudaErrorName> (<string>)". Returns
 * GS_EDEVICE, or GS_OK when rc is cudaSuccess. Clears CUDA's last error. */
int gs_cuda_fail(cudaError_t rc, gs_err *e, const char *what);

#ifdef __cplusplus
}
#endif

#endif
