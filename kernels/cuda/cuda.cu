/* cuda.cu: the CUDA table of kernels.h (first kernel: SGD over elem.h). */
#include <cuda_runtime.h>

extern "C" {
#include "kernels/elem.h"
#include "kernels/kernels.h"
}

__global__ void gs_sgd_kernel(size_t n, float *p, const float *g, float *buf, float lr, float m,
                              float wd, int first) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float dummy = 0.0f;
    gs_sgd1(&p[i], g[i], buf ? &buf[i] : &dummy, lr, buf ? m : 0.0f, wd, first);
  }
}

extern "C" int gs_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

extern "C" gs_kernels *gs_kernels_cuda(int device, gs_err *e) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    GS_FAIL(e, GS_EDEVICE, "--device cuda: no usable GPU (%s: %s); check the driver "
            "(nvidia-smi) and CUDA_VISIBLE_DEVICES, or use --device cpu",
            cudaGetErrorName(rc), cudaGetErrorString(rc));
    return NULL;
  }
  GS_FAIL(e, GS_EDEVICE, "--device cuda: the CUDA kernels table is not complete yet");
  return NULL;
}
