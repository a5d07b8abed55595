/* backends.c: the table of synchronization backends the launcher can
 * start, by name. "local" wraps the single-process gs_sync_local so that
 * world 1 without communication goes through the same path as the rest. */
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/results.h"
#include "ps/ps.h"

static int local_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                         gs_err *e) {
  if (c->world != 1)
    return GS_FAIL(e, GS_EINVAL, "the local backend is one process (world %d asked)", c->world);
  *state = NULL;
  endpoint[0] = 0;
  return GS_OK;
}

static int local_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  return gs_sync_local(c, out, e);
}

static const gs_backend local_backend = {
  .name = "local", .prepare = local_prepare, .bootstrap = NULL, .open = local_open,
  .discard = NULL,
};

const gs_backend *gs_bench_backend(const char *name, gs_err *e) {
  if (!strcmp(name, "local")) return &local_backend;
  if (!strcmp(name, "ps")) return &gs_ps_backend;
  if (!strcmp(name, "ring")) return &gs_ring_backend;
  if (!strcmp(name, "nccl")) return &gs_nccl_backend;
  GS_FAIL(e, GS_EINVAL, "no backend named %s", name);
  return NULL;
}
