/* cuda_loader.c: gs_kernels_cuda(), gs_cuda_device_count() and the
 * cuda_impl.h functions in a CUDA build, as forwards into libgs_cuda.so,
 * which is dlopen()ed on first use (see cuda_loader.h for why and where
 * it is looked for). A build without the toolkit has nocuda.c instead.
 *
 * The tables the module makes are its own (their ops point into it), so
 * after gs_kernels_cuda() nothing goes through here but the few
 * cuda_impl.h calls.
 *
 * Counting GPUs stays cheap and fork-safe, as the module's own
 * gs_cuda_device_count promises: until this process loads the module, the
 * question goes to a short-lived child that loads it and asks
 * cudaGetDeviceCount, so neither CUDA's state nor its ~200 MB of libraries
 * reach this process (a launcher forks its ranks afterwards; `--device
 * auto` on a machine without a GPU stays a CPU-sized process). Once the
 * module is loaded the module answers. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda_loader.h"
#include "kernels/cuda_module_path.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *module_handle;
static const gs_cudamod_api *module_api;  /* set once, under mu */
static bool module_failed;
static char module_why[sizeof ((gs_err *)0)->msg];  /* the failure, kept */
static int probed = -1;  /* the child's answer (before the module is loaded) */

/* ---- finding it ---- */

static bool seen(char paths[][GS_CUDA_MODULE_PATH_MAX], int n, const char *p) {
  char want[PATH_MAX], have[PATH_MAX];
  bool real = realpath(p, want) != NULL;
  for (int i = 0; i < n; i++) {
    if (!strcmp(paths[i], p)) return true;
    if (real && realpath(paths[i], have) && !strcmp(have, want)) return true;
  }
  return false;
}

static void add(char paths[][GS_CUDA_MODULE_PATH_MAX], int *n, int max, const char *p) {
  if (*n >= max || !p || !*p || strlen(p) >= GS_CUDA_MODULE_PATH_MAX || seen(paths, *n, p))
    return;
  strcpy(paths[(*n)++], p);
}

int gs_cuda_module_paths(char paths[][GS_CUDA_MODULE_PATH_MAX], int max) {
  int n = 0;
  add(paths, &n, max, GS_CUDA_MODULE_BUILD_PATH);
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    /* the program's directory, its parent and grandparent */
    char *slash;
    for (int up = 0; up < 3 && (slash = strrchr(exe, '/')) != NULL; up++) {
      *slash = '\0';
      char p[GS_CUDA_MODULE_PATH_MAX];
      int w = snprintf(p, sizeof p, "%s/%s", exe, GS_CUDA_MODULE_FILE);
      if (w > 0 && (size_t)w < sizeof p) add(paths, &n, max, p);
    }
  }
  add(paths, &n, max, getenv(GS_CUDA_MODULE_ENV));
  return n;
}

/* dlerror() usually starts with the path it was given: drop that. */
static const char *reason(const char *path, const char *err) {
  if (!err) return "unknown dlopen error";
  size_t pl = strlen(path);
  if (!strncmp(err, path, pl) && err[pl] == ':' && err[pl + 1] == ' ') return err + pl + 2;
  return err;
}

/* Open one candidate and check it is a module of this build's ABI. */
static const gs_cudamod_api *open_one(const char *path, void **handle, char *why, size_t n) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, n, "%s", reason(path, dlerror()));
    return NULL;
  }
  const gs_cudamod_api *api = dlsym(h, "gs_cudamod_entry");
  if (!api) {
    snprintf(why, n, "not a gradsync CUDA module (%s)", reason(path, dlerror()));
  } else if (api->abi != GS_CUDAMOD_ABI || api->kernels_size != sizeof(gs_kernels) ||
             api->err_size != sizeof(gs_err)) {
    snprintf(why, n, "built for another gradsync (module ABI %u, this program's %u)",
             (unsigned)api->abi, (unsigned)GS_CUDAMOD_ABI);
    api = NULL;
  } else if (api->interrupted != &gs_interrupted) {
    /* a program linked without kernels_dep's dynamic list */
    snprintf(why, n, "the module does not share this program's gs_interrupted (link the "
             "program with kernels_dep)");
    api = NULL;
  } else {
    *handle = h;
    return api;
  }
  dlclose(h);
  return NULL;
}

/* Try each path; on failure why says, for each, why it did not load. */
static const gs_cudamod_api *load_from(char paths[][GS_CUDA_MODULE_PATH_MAX], int n,
                                       void **handle, char *why, size_t whylen) {
  char tried[sizeof ((gs_err *)0)->msg] = "";
  size_t used = 0;
  for (int i = 0; i < n; i++) {
    char one[512];
    const gs_cudamod_api *api = open_one(paths[i], handle, one, sizeof one);
    if (api) return api;
    int w = snprintf(tried + used, sizeof tried - used, "%s%s (%s)", i ? "; " : "", paths[i],
                     one);
    if (w > 0) used += (size_t)w < sizeof tried - used ? (size_t)w : sizeof tried - used - 1;
  }
  /* what to do first: a long list of paths may be cut */
  snprintf(why, whylen,
           "cannot load gradsync's CUDA module %s (rebuild gradsync with ninja so it is next "
           "to the program, set %s to its path, or use --device cpu); %s%s",
           GS_CUDA_MODULE_FILE, GS_CUDA_MODULE_ENV, n ? "tried " : "no candidate path", tried);
  return NULL;
}

const gs_cudamod_api *gs_cuda_module_load_from(char paths[][GS_CUDA_MODULE_PATH_MAX], int n,
                                               const char *what, void **handle, gs_err *e) {
  char why[sizeof e->msg];
  const gs_cudamod_api *api = load_from(paths, n, handle, why, sizeof why);
  if (!api) GS_FAIL(e, GS_EDEVICE, "%s: %s", what, why);
  return api;
}

/* Load without the lock: the caller holds mu, or is a forked child. */
static const gs_cudamod_api *load(void **handle, char *why, size_t whylen) {
  char paths[GS_CUDA_MODULE_MAX_PATHS][GS_CUDA_MODULE_PATH_MAX];
  int n = gs_cuda_module_paths(paths, GS_CUDA_MODULE_MAX_PATHS);
  return load_from(paths, n, handle, why, whylen);
}

const gs_cudamod_api *gs_cuda_module(const char *what, gs_err *e) {
  pthread_mutex_lock(&mu);
  if (!module_api && !module_failed) {
    const gs_cudamod_api *api = load(&module_handle, module_why, sizeof module_why);
    if (api) __atomic_store_n(&module_api, api, __ATOMIC_RELEASE);
    else module_failed = true;
  }
  const gs_cudamod_api *api = module_api;
  pthread_mutex_unlock(&mu);
  if (!api) GS_FAIL(e, GS_EDEVICE, "%s: %s", what, module_why);
  return api;
}

const gs_cudamod_api *gs_cuda_module_loaded(void) {
  return __atomic_load_n(&module_api, __ATOMIC_ACQUIRE);
}

void *gs_cuda_module_sym(const char *name, const char *what, gs_err *e) {
  if (!gs_cuda_module(what, e)) return NULL;
  void *p = dlsym(module_handle, name);
  if (!p)
    GS_FAIL(e, GS_EDEVICE, "%s: gradsync's CUDA module lacks %s (%s); rebuild gradsync", what,
            name, dlerror());
  return p;
}

/* ---- kernels.h ---- */

gs_kernels *gs_kernels_cuda(int device, gs_err *e) {
  const gs_cudamod_api *api = gs_cuda_module("--device cuda", e);
  return api ? api->kernels(device, e) : NULL;
}

/* The child loads the module and asks; it writes -2 when the module does
 * not load (no GPU can be used then either). */
static int count_in_child(void) {
  int fd[2];
  if (pipe(fd)) return -3;
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    void *h = NULL;
    char why[sizeof ((gs_err *)0)->msg];
    const gs_cudamod_api *api = load(&h, why, sizeof why);
    int n = api ? api->count_here() : -2;
    ssize_t w = write(fd[1], &n, sizeof n);
    _exit(w == (ssize_t)sizeof n ? 0 : 1);
  }
  close(fd[1]);
  if (pid < 0) {
    close(fd[0]);
    return -3;
  }
  int n = -1;
  struct pollfd p = {fd[0], POLLIN, 0};
  int r;
  do r = poll(&p, 1, 30000); while (r < 0 && errno == EINTR);
  if (r != 1 || read(fd[0], &n, sizeof n) != (ssize_t)sizeof n) {
    kill(pid, SIGKILL);  /* a wedged driver: no GPU rather than a hang */
    n = 0;
  }
  close(fd[0]);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
  return n;
}

int gs_cuda_device_count(void) {
  const gs_cudamod_api *api = gs_cuda_module_loaded();
  if (api) return api->device_count();
  pthread_mutex_lock(&mu);
  if (probed < 0) {
    int n = count_in_child();
    if (n == -3) {
      /* no child could be made: ask here, paying for the libraries */
      pthread_mutex_unlock(&mu);
      gs_err e = {0};
      api = gs_cuda_module("--device cuda", &e);
      return api ? api->device_count() : 0;
    }
    probed = n < 0 ? 0 : n;
  }
  int n = probed;
  pthread_mutex_unlock(&mu);
  return n;
}

/* ---- cuda_impl.h: only ever called with a CUDA table, so loaded ---- */

cudaStream_t gs_cuda_stream(gs_kernels *k) {
  const gs_cudamod_api *api = gs_cuda_module_loaded();
  return api ? (cudaStream_t)api->stream(k) : NULL;
}

int gs_cuda_device(gs_kernels *k) {
  const gs_cudamod_api *api = gs_cuda_module_loaded();
  return api ? api->device(k) : -1;
}

gs_kernels *gs_cuda_fork(gs_kernels *k, gs_err *e) {
  const gs_cudamod_api *api = gs_cuda_module("fork", e);
  return api ? api->fork(k, e) : NULL;
}

int gs_cuda_stream_wait(gs_kernels *waiter, gs_kernels *producer, gs_err *e) {
  const gs_cudamod_api *api = gs_cuda_module("stream_wait", e);
  return api ? api->stream_wait(waiter, producer, e) : GS_EDEVICE;
}

void gs_cuda_mem(gs_kernels *k, size_t *now, size_t *peak) {
  const gs_cudamod_api *api = gs_cuda_module_loaded();
  if (api) {
    api->mem(k, now, peak);
    return;
  }
  if (now) *now = 0;
  if (peak) *peak = 0;
}

int gs_cuda_fail(cudaError_t rc, gs_err *e, const char *what) {
  if (rc == cudaSuccess) return GS_OK;
  const gs_cudamod_api *api = gs_cuda_module(what, e);
  return api ? api->fail((int)rc, e, what) : GS_EDEVICE;
}
