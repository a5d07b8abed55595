/* test_cuda_loader.c: the CUDA module and its loader (kernels/cuda_loader.h),
 * in every CUDA build, GPU or not.
 *
 *  - the program does not carry CUDA: no cudart / cuBLAS / NCCL / module
 *    in /proc/self/maps at start, and still none after
 *    gs_cuda_device_count(), whose child does the loading;
 *  - the search path: the build's absolute path first, no duplicates,
 *    $GS_CUDA_MODULE last;
 *  - a module that cannot be loaded is GS_EDEVICE naming every path tried
 *    and why (missing file, not ELF, not our module), never a crash;
 *  - gs_kernels_cuda() loads the real module, which shares the program's
 *    gs_interrupted and answers the same device count. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "kernels/cuda_loader.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_check.h"

/* Is a file whose name contains `part` mapped into this process? */
static bool mapped(const char *part) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, part) != NULL;
  fclose(f);
  return found;
}

static const char *const cuda_libs[] = {"libcudart", "libcublas", "libnccl", "libgs_cuda"};

static void no_cuda_mapped(const char *when) {
  for (size_t i = 0; i < sizeof cuda_libs / sizeof cuda_libs[0]; i++)
    CHECK(!mapped(cuda_libs[i]), "%s: %s is mapped into the process", when, cuda_libs[i]);
}

static int test_count(void) {
  no_cuda_mapped("at start");
  int n = gs_cuda_device_count();
  CHECK(n >= 0, "device count %d", n);
  no_cuda_mapped("after gs_cuda_device_count");
  CHECK(gs_cuda_module_loaded() == NULL, "counting GPUs loaded the module into this process");
  CHECK(gs_cuda_device_count() == n, "a second count differs");
  printf("%d GPU(s), counted by a child: this process maps no CUDA library\n", n);
  return n;
}

static void test_paths(void) {
  char paths[GS_CUDA_MODULE_MAX_PATHS][GS_CUDA_MODULE_PATH_MAX];
  setenv(GS_CUDA_MODULE_ENV, "/nonexistent/gs-test/libgs_cuda.so", 1);
  int n = gs_cuda_module_paths(paths, GS_CUDA_MODULE_MAX_PATHS);
  unsetenv(GS_CUDA_MODULE_ENV);
  CHECK(n >= 2, "%d candidate paths", n);
  if (n < 2) return;
  CHECK(paths[0][0] == '/' && strstr(paths[0], "/" GS_CUDA_MODULE_FILE) &&
            access(paths[0], R_OK) == 0,
        "first candidate is the build's module: %s", paths[0]);
  CHECK(!strcmp(paths[n - 1], "/nonexistent/gs-test/libgs_cuda.so"),
        "$GS_CUDA_MODULE is the last candidate: %s", paths[n - 1]);
  for (int i = 0; i < n; i++) {
    printf("candidate %d: %s\n", i, paths[i]);
    for (int j = 0; j < i; j++) CHECK(strcmp(paths[i], paths[j]), "duplicate %s", paths[i]);
  }
  /* the build tree seen from here (tests/gpu/x) is ../../, the same file
   * as the baked path: listed once */
  char exe[GS_CUDA_MODULE_PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(len > 0, "readlink /proc/self/exe");
  if (len > 0) {
    exe[len] = '\0';
    CHECK(strncmp(paths[1], exe, (size_t)(strrchr(exe, '/') - exe)) == 0,
          "second candidate is next to the program (%s): %s", exe, paths[1]);
  }
}

static void test_load_failures(void) {
  char junk[] = "/tmp/gs-test-notelf-XXXXXX";
  int fd = mkstemp(junk);
  CHECK(fd >= 0, "mkstemp");
  if (fd < 0) return;
  CHECK(write(fd, "not a shared object\n", 20) == 20, "write");
  close(fd);
  char paths[3][GS_CUDA_MODULE_PATH_MAX];
  snprintf(paths[0], sizeof paths[0], "/nonexistent/gs-test/libgs_cuda.so");
  snprintf(paths[1], sizeof paths[1], "%s", junk);
  snprintf(paths[2], sizeof paths[2], "libm.so.6");  /* loads, but is not ours */
  gs_err e = {0};
  void *h = NULL;
  const gs_cudamod_api *api = gs_cuda_module_load_from(paths, 3, "--device cuda", &h, &e);
  unlink(junk);
  CHECK(api == NULL && h == NULL && e.code == GS_EDEVICE, "bad candidates loaded (code %d)",
        e.code);
  static const char head[] = "--device cuda: cannot load gradsync's CUDA module";
  CHECK(!strncmp(e.msg, head, sizeof head - 1),
        "message starts with what failed: %s", e.msg);
  CHECK(strstr(e.msg, paths[0]) && strstr(e.msg, "No such file"), "missing file: %s", e.msg);
  CHECK(strstr(e.msg, junk) && (strstr(e.msg, "ELF") || strstr(e.msg, "too short")),
        "not an ELF file: %s", e.msg);
  CHECK(strstr(e.msg, "libm.so.6 (not a gradsync CUDA module"), "foreign library: %s", e.msg);
  CHECK(strstr(e.msg, GS_CUDA_MODULE_ENV) && strstr(e.msg, "--device cpu"),
        "says what to do: %s", e.msg);
  printf("bad candidates: %s\n", e.msg);

  gs_err_clear(&e);
  api = gs_cuda_module_load_from(paths, 0, "--device cuda", &h, &e);
  CHECK(api == NULL && e.code == GS_EDEVICE && strstr(e.msg, "no candidate path"),
        "no candidates: %s", e.msg);
}

static void test_module(int ngpu) {
  /* a missing first candidate does not stop the search */
  char paths[2][GS_CUDA_MODULE_PATH_MAX];
  char all[GS_CUDA_MODULE_MAX_PATHS][GS_CUDA_MODULE_PATH_MAX];
  CHECK(gs_cuda_module_paths(all, GS_CUDA_MODULE_MAX_PATHS) >= 1, "no candidates");
  snprintf(paths[0], sizeof paths[0], "/nonexistent/gs-test/libgs_cuda.so");
  snprintf(paths[1], sizeof paths[1], "%s", all[0]);
  gs_err e = {0};
  void *h = NULL;
  const gs_cudamod_api *api = gs_cuda_module_load_from(paths, 2, "test", &h, &e);
  CHECK(api != NULL && h != NULL, "the build's module does not load: %s", e.msg);
  if (!api) return;
  CHECK(api->abi == GS_CUDAMOD_ABI, "abi %u", (unsigned)api->abi);
  CHECK(api->interrupted == &gs_interrupted,
        "the module's gs_interrupted (%p) is not the program's (%p)", (void *)api->interrupted,
        (void *)&gs_interrupted);

  /* through kernels.h: the ordinal ngpu never exists, so this loads the
   * module and fails inside it, with CUDA's own message */
  gs_err_clear(&e);
  gs_kernels *k = gs_kernels_cuda(ngpu, &e);
  CHECK(k == NULL && e.code == GS_EDEVICE && strstr(e.msg, "--device cuda"),
        "gs_kernels_cuda(%d): %s", ngpu, e.msg);
  CHECK(!strstr(e.msg, "cannot load"), "the module did not load: %s", e.msg);
  CHECK(gs_cuda_module_loaded() == api, "the process's module is another copy");
  CHECK(mapped("libgs_cuda"), "module not mapped after gs_kernels_cuda");
  CHECK(gs_cuda_device_count() == ngpu, "the module counts %d GPUs, the child %d",
        gs_cuda_device_count(), ngpu);

  /* the NCCL proxy: a state that was never prepared is not the module's */
  gs_nccl_backend.discard(NULL);
#ifdef GS_HAVE_NCCL
  CHECK(gs_cuda_module_sym("gs_cudamod_nccl_backend", "test", &e) != NULL,
        "the module has no NCCL backend: %s", e.msg);
  CHECK(gs_cuda_module_sym("gs_cudamod_nccl_collective", "test", &e) != NULL,
        "the module has no NCCL collectives: %s", e.msg);
#endif
  gs_err_clear(&e);
  CHECK(gs_cuda_module_sym("gs_no_such_symbol", "test", &e) == NULL && e.code == GS_EDEVICE &&
            strstr(e.msg, "gs_no_such_symbol"),
        "missing symbol: %s", e.msg);
  printf("module: %s loaded on first use; %s\n", all[0], ngpu ? "GPU present" : "no GPU");
}

int main(void) {
  int n = test_count();
  test_paths();
  test_load_failures();
  no_cuda_mapped("after the failed loads");
  test_module(n);
  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  return 0;
}
