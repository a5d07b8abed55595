/* nonccl.c: the "nccl" backend in a build without NCCL or CUDA: every
 * entry fails with a message saying why, so `--mode ring --device cuda` is
 * a clear error rather than a link failure. */
#include "allreduce/allreduce.h"

static int no_nccl(gs_err *e) {
  return GS_FAIL(e, GS_EDEVICE,
                 "ring with --device cuda needs NCCL, and this gradsync was built without it "
                 "(NCCL or the CUDA toolkit was not found at configure time); install them and "
                 "reconfigure (meson setup -Dcuda=enabled -Dnccl=enabled), or use --mode=ps "
                 "or --device cpu");
}

static int nonccl_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                          gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  return no_nccl(e);
}

static int nonccl_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  return no_nccl(e);
}

static void nonccl_discard(void *state) {}

const gs_backend gs_nccl_backend = {
    .name = "nccl",
    .caps = gs_nccl_caps,
    .asks = gs_allreduce_asks,
    .prepare = nonccl_prepare,
    .bootstrap = NULL,
    .open = nonccl_open,
    .discard = nonccl_discard,
};

int gs_nccl_collective(gs_sync *s, gs_coll c, gs_redop op, int root, const void *src, void *dst,
                       size_t count, int64_t iter, gs_err *e) {
  return no_nccl(e);
}
