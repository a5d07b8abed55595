/* device.c: the kernels table a rank's --device gives it (job.h): cuda
 * (this local rank's GPU of those visible), cpu (with its BLAS threads),
 * or auto: cuda where a GPU is present. */
#include <string.h>

#include "bench/job/job.h"

int gs_bench_kernels(const gs_opts *o, int local_rank, int threads, gs_kernels **k, gs_err *e) {
  const char *dev = o->device;
  if (!strcmp(dev, "auto")) dev = gs_cuda_device_count() > 0 ? "cuda" : "cpu";
  if (!strcmp(dev, "cuda")) {
    int n = gs_cuda_device_count();
    *k = gs_kernels_cuda(n > 0 ? local_rank % n : 0, e);
  } else {
    *k = gs_kernels_cpu(threads, e);
  }
  return *k ? GS_OK : (e->code ? e->code : GS_EDEVICE);
}
