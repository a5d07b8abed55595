/* nocuda.c: the CUDA entry points of kernels.h in a build without the
 * toolkit, so `--device cuda` is a clear error rather than a link failure.
 * Where the toolkit is, cuda_loader.c takes this file's place. */
#include "kernels/kernels.h"

gs_kernels *gs_kernels_cuda(int device, gs_err *e) {
  GS_FAIL(e, GS_EDEVICE, "--device cuda: this gradsync was built without CUDA (the toolkit "
          "was not found at configure time); install it and reconfigure with -Dcuda=enabled, "
          "or use --device cpu");
  return NULL;
}

int gs_cuda_device_count(void) { return 0; }
