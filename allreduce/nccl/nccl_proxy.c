/* nccl_proxy.c: the "nccl" backend as the programs see it in a CUDA +
 * NCCL build. The real one (nccl.c) is in libgs_cuda.so with the CUDA
 * kernels, so that programs do not link NCCL, cudart and cuBLAS and a CPU
 * run does not carry their ~200 MB (kernels/cuda_loader.h). prepare()
 * loads the module (a clear GS_EDEVICE naming the paths tried when it
 * cannot) and every entry forwards to the module's backend; the state is
 * the module's, passed through untouched. */
#include <stdio.h>

#include "allreduce/allreduce.h"
#include "allreduce/nccl/nccl.h"
#include "kernels/cuda_loader.h"

static const gs_backend *real(int rank, gs_err *e) {
  static const gs_backend *be;  /* set once; the module is never unloaded */
  const gs_backend *b = __atomic_load_n(&be, __ATOMIC_ACQUIRE);
  if (b) return b;
  char what[64];
  snprintf(what, sizeof what, "rank %d: ring with --device cuda", rank);
  const gs_backend *(*entry)(void) = (const gs_backend *(*)(void))gs_cuda_module_sym(
      GS_CUDAMOD_NCCL_BACKEND, what, e);
  if (!entry) return NULL;
  b = entry();
  __atomic_store_n(&be, b, __ATOMIC_RELEASE);
  return b;
}

static int proxy_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                         gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  const gs_backend *b = real(c->rank, e);
  return b ? b->prepare(c, state, endpoint, e) : GS_EDEVICE;
}

static int proxy_bootstrap(void *state, const gs_sync_config *c, void *blob, size_t *len,
                           gs_err *e) {
  const gs_backend *b = real(c->rank, e);
  if (!b) return GS_EDEVICE;
  return b->bootstrap ? b->bootstrap(state, c, blob, len, e) : GS_OK;
}

static int proxy_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  const gs_backend *b = real(c->rank, e);
  return b ? b->open(state, c, out, e) : GS_EDEVICE;
}

static void proxy_discard(void *state) {
  /* a state exists only if prepare() reached the module */
  const gs_backend *b = state ? real(-1, NULL) : NULL;
  if (b) b->discard(state);
}

const gs_backend gs_nccl_backend = {
    .name = "nccl",
    .caps = gs_nccl_caps,
    .asks = gs_allreduce_asks,
    .prepare = proxy_prepare,
    .bootstrap = proxy_bootstrap,
    .open = proxy_open,
    .discard = proxy_discard,
};

/* gs_nccl_collective: the module's, on the module's session. */
int gs_nccl_collective(gs_sync *s, gs_coll c, gs_redop op, int root, const void *src, void *dst,
                       size_t count, int64_t iter, gs_err *e) {
  static gs_nccl_collective_fn *fn;  /* set once; the module is never unloaded */
  gs_nccl_collective_fn *f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
  if (!f) {
    gs_nccl_collective_fn *(*entry)(void) = (gs_nccl_collective_fn * (*)(void))
        gs_cuda_module_sym(GS_CUDAMOD_NCCL_COLLECTIVE, "the NCCL collective benchmark", e);
    if (!entry) return GS_EDEVICE;
    f = entry();
    __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
  }
  return f(s, c, op, root, src, dst, count, iter, e);
}
