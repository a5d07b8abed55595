/* topk_resolve.c: what --compress topk:FRACTION runs with, checked before
 * any rank starts: sparse pushes to one flat bsp ps server, fp32 gradients
 * on the CPU (compress/compress.h, ps/topk_push.c). Everything else is
 * refused with what to give instead. */
#include <string.h>

#include "bench/cli/cli.h"

int gs_topk_resolve(const gs_opts *o, const char *spec, gs_err *e) {
  for (int i = 0; i < o->nmodes; i++) {
    if (o->modes[i] == GS_MODE_RING)
      return GS_FAIL(e, GS_EINVAL, "--compress %s runs in --mode ps (sparse pushes); in the ring "
                     "top-k would be an all-gather of every rank's indices and values "
                     "(docs/compression.md): give --mode ps, or --compress powersgd:R for the "
                     "ring", spec);
    if (o->modes[i] == GS_MODE_LOCAL)
      return GS_FAIL(e, GS_EINVAL, "--compress %s compresses ps pushes; --mode local has none: "
                     "give --mode ps", spec);
  }
  if (o->ps_servers > 1 || o->ps_server_hosts)
    return GS_FAIL(e, GS_EINVAL, "--compress %s pushes to one ps server, not to a sharded ps: "
                   "drop --ps-servers/--ps-server-hosts (or give --compress none)", spec);
  if (gs_ps_sync_stale(&o->ps_sync))
    return GS_FAIL(e, GS_EINVAL, "--compress %s runs with --ps-sync bsp only (not ssp, async "
                   "or backup workers): drop --ps-sync/--ps-backup (or give --compress none)",
                   spec);
  if (o->ps_local_reduce == 1)
    return GS_FAIL(e, GS_EINVAL, "--compress %s: every rank pushes its own sparse gradient; "
                   "hosts do not sum their ranks first: drop --ps-local-reduce", spec);
  if (o->loss_scale_set)
    return GS_FAIL(e, GS_EINVAL, "--compress %s runs without loss scaling (fp32 gradients): "
                   "drop --loss-scale", spec);
  if (strcmp(o->device, "cuda") == 0)
    return GS_FAIL(e, GS_EINVAL, "--compress %s runs on the CPU: drop --device cuda (or give "
                   "--compress fp16 / bf16 on the GPU)", spec);
  return GS_OK;
}
