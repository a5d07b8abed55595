/* test_cuda_errors.c: `--device cuda` without a usable GPU, or in a build
 * without CUDA / NCCL, is a clear GS_EDEVICE error (never a crash), and
 * the NCCL backend's one-GPU-per-rank rule says what to do instead.
 * Runs in every build and on every machine: on a GPU machine it checks the
 * out-of-range device instead of the missing driver. */
#include "allreduce/allreduce.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_check.h"

static void test_kernels(void) {
  int n = gs_cuda_device_count();
  CHECK(n >= 0, "device count %d", n);
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cuda(n, &e);  /* ordinal n never exists */
  CHECK(k == NULL && e.code == GS_EDEVICE, "gs_kernels_cuda(%d): code %d", n, e.code);
  CHECK(strstr(e.msg, "--device cuda") != NULL, "message names the flag: %s", e.msg);
#ifdef GS_HAVE_CUDA
  if (n == 0) {
    /* the CUDA error string and what to check */
    CHECK(strstr(e.msg, "nvidia-smi") && strstr(e.msg, "CUDA_VISIBLE_DEVICES") &&
              strstr(e.msg, "--device cpu"),
          "no-GPU message says what to check: %s", e.msg);
    CHECK(strstr(e.msg, "cudaError") != NULL, "no-GPU message has the CUDA error: %s", e.msg);
  } else {
    CHECK(strstr(e.msg, "requested") != NULL, "out-of-range GPU: %s", e.msg);
  }
#else
  CHECK(n == 0, "no CUDA in the build but %d devices", n);
  CHECK(strstr(e.msg, "without CUDA") != NULL, "no-CUDA build message: %s", e.msg);
#endif
  printf("gs_kernels_cuda(%d) with %d GPU(s): %s\n", n, n, e.msg);
}

static void test_gpu_rule(void) {
  gs_err e = {0};
  int rc = gs_nccl_check_gpus(3, 3, 4, 3, 1, &e);
  CHECK(rc == GS_EDEVICE, "4 local ranks on 1 GPU accepted");
  CHECK(strstr(e.msg, "needs one GPU per rank: 4 local ranks but 1 GPU visible") &&
            strstr(e.msg, "--mode=ps") && strstr(e.msg, "rank 3"),
        "message: %s", e.msg);
  printf("4 ranks, 1 GPU: %s\n", e.msg);
  gs_err_clear(&e);
  CHECK(gs_nccl_check_gpus(1, 1, 2, 1, 2, &e) == GS_OK, "2 ranks on 2 GPUs refused: %s", e.msg);
  CHECK(gs_nccl_check_gpus(0, 0, 8, 7, 8, &e) == GS_OK, "8 ranks on 8 GPUs refused: %s", e.msg);
  gs_err_clear(&e);
  CHECK(gs_nccl_check_gpus(0, 0, 1, 2, 2, &e) == GS_EDEVICE && strstr(e.msg, "GPU 2"),
        "device out of range: %s", e.msg);
  gs_err_clear(&e);
  CHECK(gs_nccl_check_gpus(0, 0, 1, 0, 0, &e) == GS_EDEVICE && strstr(e.msg, "no GPU"),
        "no GPU: %s", e.msg);
}

/* The backend itself: on a machine without a GPU prepare() fails before
 * anything else, with the CUDA error (or the no-NCCL build's message). */
static void test_backend(void) {
  CHECK(!strcmp(gs_nccl_backend.name, "nccl"), "name %s", gs_nccl_backend.name);
  if (gs_cuda_device_count() > 0) return;  /* a GPU host: tests/gpu/test_nccl.c covers it */
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  c.rank = 0;
  c.world = 2;
  c.local_rank = 0;
  c.local_world = 2;
  c.timeout_ms = 1000;
  void *state = (void *)&c;
  char endpoint[GS_ENDPOINT_MAX] = "junk";
  gs_err e = {0};
  int rc = gs_nccl_backend.prepare(&c, &state, endpoint, &e);
  CHECK(rc == GS_EDEVICE && state == NULL, "prepare without a GPU: rc %d", rc);
#ifdef GS_HAVE_NCCL
  CHECK(strstr(e.msg, "no usable GPU") && strstr(e.msg, "nvidia-smi"), "message: %s", e.msg);
#else
  CHECK(strstr(e.msg, "without it") && strstr(e.msg, "--mode=ps"), "message: %s", e.msg);
#endif
  printf("nccl prepare without a GPU: %s\n", e.msg);
}

int main(void) {
  test_kernels();
  test_gpu_rule();
  test_backend();
  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  return 0;
}
