/* cuda_loader.h: the CUDA module of gradsync and the loader that finds it.
 * Internal: kernels/cuda_loader.c (the host side, in every CUDA build),
 * kernels/cuda/module.c (the module side), allreduce/nccl/nccl_proxy.c and the
 * tests include it. Plain C, no CUDA headers.
 *
 * Why a module. cudart, cuBLAS and NCCL cost about 200 MB of resident
 * memory in every process that merely has them as DT_NEEDED libraries, and
 * gradsync reports peak RSS per rank (DataParallel's master imbalance must
 * be visible), so a CPU run must not pay for CUDA. The .cu files of kernels/cuda and
 * allreduce/nccl/ are therefore built into libgs_cuda.so (a meson
 * shared_module, top-level meson.build) and the programs link none of the
 * CUDA libraries: the first gs_kernels_cuda() or NCCL prepare() dlopen()s
 * the module and goes through the entry points below.
 *
 * The module exports exactly three symbols (kernels/cuda/module.map):
 *   gs_cudamod_entry          a gs_cudamod_api: the kernels' entry points
 *   gs_cudamod_nccl_backend() the "nccl" gs_backend (NCCL builds only;
 *                             allreduce/nccl/nccl.h)
 *   gs_cudamod_nccl_collective() gs_nccl_collective (allreduce.h), the
 *                             collective benchmark's NCCL calls (NCCL builds only)
 * plus gs_interrupted, which the programs export too (kernels_dep links
 * them with kernels/cuda/programs.dynlist) so that by ELF interposition the
 * module's NCCL waits see the program's SIGINT flag, not a copy. The
 * loader checks that (api->interrupted == &gs_interrupted).
 *
 * Where it is looked for, in order:
 *   1. the absolute path of the build that made the program (configure time);
 *   2. next to the program: /proc/self/exe's directory and its parents up
 *      to two levels (bench/bench and tests/gpu/x in a moved build tree);
 *   3. $GS_CUDA_MODULE.
 * If none loads, the caller gets GS_EDEVICE naming every path tried and
 * dlerror()'s reason, never a crash. The module is never unloaded. */
#ifndef GS_CUDA_LOADER_H
#define GS_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* Bump on any change to gs_cudamod_api or to what the entry points mean. */
#define GS_CUDAMOD_ABI 1
#define GS_CUDA_MODULE_ENV "GS_CUDA_MODULE"
#define GS_CUDA_MODULE_FILE "libgs_cuda.so"
#define GS_CUDA_MODULE_MAX_PATHS 5
#define GS_CUDA_MODULE_PATH_MAX 1024

/* What the module hands the loader. CUDA types are erased (a stream is a
 * pointer, a cudaError_t an int) so the host side needs no CUDA header. */
typedef struct gs_cudamod_api {
  uint32_t abi;           /* GS_CUDAMOD_ABI of the module's build */
  uint32_t kernels_size;  /* sizeof(gs_kernels) there */
  uint32_t err_size;      /* sizeof(gs_err) there */
  gs_kernels *(*kernels)(int device, gs_err *e);       /* gs_kernels_cuda */
  int (*device_count)(void);                           /* gs_cuda_device_count */
  int (*count_here)(void);  /* cudaGetDeviceCount in this process, -1 on a CUDA error */
  /* cuda_impl.h */
  void *(*stream)(gs_kernels *k);
  int (*device)(gs_kernels *k);
  gs_kernels *(*fork)(gs_kernels *k, gs_err *e);
  int (*stream_wait)(gs_kernels *waiter, gs_kernels *producer, gs_err *e);
  void (*mem)(gs_kernels *k, size_t *now, size_t *peak);
  int (*fail)(int cuda_rc, gs_err *e, const char *what);
  volatile int *interrupted;  /* the module's gs_interrupted */
} gs_cudamod_api;

/* The module, loaded on first use (thread-safe; a failure is remembered
 * and reported the same way every time). NULL and GS_EDEVICE on failure:
 * "<what>: cannot load gradsync's CUDA module: tried <path> (<reason>);
 * ... ; what to do". */
const gs_cudamod_api *gs_cuda_module(const char *what, gs_err *e);
/* The module if this process has loaded it already, else NULL (no load). */
const gs_cudamod_api *gs_cuda_module_loaded(void);
/* dlsym() in the loaded module (loading it first). NULL and GS_EDEVICE
 * when the module cannot be loaded or lacks the symbol. */
void *gs_cuda_module_sym(const char *name, const char *what, gs_err *e);

/* The pieces, for the tests. */
/* The candidate paths in search order (duplicates removed); returns how many. */
int gs_cuda_module_paths(char paths[][GS_CUDA_MODULE_PATH_MAX], int max);
/* Try paths in order; the first that dlopen()s and passes the ABI checks
 * wins (*handle, its api). Otherwise NULL and GS_EDEVICE naming each path
 * and why it failed. Does not make it the process's module. */
const gs_cudamod_api *gs_cuda_module_load_from(char paths[][GS_CUDA_MODULE_PATH_MAX], int n,
                                               const char *what, void **handle, gs_err *e);

#endif
