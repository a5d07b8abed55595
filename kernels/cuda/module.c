/* module.c: the entry point of libgs_cuda.so, the CUDA module that
 * kernels/cuda_loader.c dlopen()s (see kernels/cuda_loader.h). It hands the
 * loader the module's gs_kernels_cuda, gs_cuda_device_count and cuda_impl.h
 * functions in one table, with the ABI figures the loader checks.
 * module.map keeps every other symbol of the module local, so the
 * module's own copies (base/base.c, the real gs_kernels_cuda) never clash with
 * the program's, except gs_interrupted, which must be the program's. */
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda_loader.h"

/* cudaGetDeviceCount here and now: the loader's probe child asks this. */
static int count_here(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return n;
}

static void *stream(gs_kernels *k) { return (void *)gs_cuda_stream(k); }

static int fail(int rc, gs_err *e, const char *what) {
  return gs_cuda_fail((cudaError_t)rc, e, what);
}

__attribute__((visibility("default"))) const gs_cudamod_api gs_cudamod_entry = {
    .abi = GS_CUDAMOD_ABI,
    .kernels_size = sizeof(gs_kernels),
    .err_size = sizeof(gs_err),
    .kernels = gs_kernels_cuda,
    .device_count = gs_cuda_device_count,
    .count_here = count_here,
    .stream = stream,
    .device = gs_cuda_device,
    .fork = gs_cuda_fork,
    .stream_wait = gs_cuda_stream_wait,
    .mem = gs_cuda_mem,
    .fail = fail,
    .interrupted = &gs_interrupted,
};
