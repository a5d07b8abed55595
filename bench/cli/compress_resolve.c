/* compress_resolve.c: what --compress runs with, checked before any rank
 * starts. fp16 / bf16 are a wire dtype and run wherever 16-bit traffic
 * does. powersgd:R runs in the CPU ring, in local and in a flat bsp ps
 * (one server that sums the parts, compress.h, ps/powersgd_recv.c);
 * topk:FRACTION in that ps (sparse pushes) and in the plain ring (an
 * all-gather, allreduce/topk_gather.h). Both work on fp32
 * gradients without loss scaling. Everything else is refused with what to
 * give instead. */
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/cli/cli.h"

/* what a compressing ps runs with: one server, bsp, every rank pushing */
static int ps_flat(const gs_opts *o, const char *spec, gs_err *e) {
  if (o->ps_servers > 1 || o->ps_server_hosts)
    return GS_FAIL(e, GS_EINVAL, "--compress %s pushes to one ps server, not to a sharded ps: "
                   "drop --ps-servers/--ps-server-hosts (or give --compress none)", spec);
  if (gs_ps_sync_stale(&o->ps_sync))
    return GS_FAIL(e, GS_EINVAL, "--compress %s runs with --ps-sync bsp only (not ssp, async "
                   "or backup workers): drop --ps-sync/--ps-backup (or give --compress none)",
                   spec);
  if (o->ps_hostagg == 1)
    return GS_FAIL(e, GS_EINVAL, "--compress %s: every rank pushes its own compressed gradient; "
                   "hosts do not sum their ranks first: drop --ps-local-reduce", spec);
  return GS_OK;
}

static int topk(const gs_opts *o, const char *spec, gs_err *e) {
  bool ps = false;
  for (int i = 0; i < o->nmodes; i++) {
    ps |= o->modes[i] == GS_MODE_PS;
    if (o->modes[i] == GS_MODE_SINGLE)
      return GS_FAIL(e, GS_EINVAL, "--compress %s compresses what ranks exchange; --mode local "
                     "has one rank: give --mode ps or ring", spec);
    if (o->modes[i] != GS_MODE_ALLREDUCE) continue;
    /* the ring's top-k is an all-gather on the plain ring (allreduce/topk_gather.h) */
    if (o->algo != GS_ALGO_AUTO && o->algo != GS_ALGO_RING)
      return GS_FAIL(e, GS_EINVAL, "--compress %s in the ring is an all-gather of every rank's "
                     "indices and values on the plain ring, not --algo %s: drop --algo", spec,
                     gs_algo_name((gs_algo)o->algo));
    if (o->ring_period > 1)
      return GS_FAIL(e, GS_EINVAL, "--compress %s compresses gradients; --ring-period %d "
                     "averages parameters: drop one of them", spec, o->ring_period);
  }
  return ps ? ps_flat(o, spec, e) : GS_OK;
}

int gs_compress_resolve(const gs_opts *o, gs_err *e) {
  const gs_compress *c = &o->train.compress;
  if (c->kind == GS_COMPRESS_NONE) return GS_OK;
  char spec[32];
  gs_compress_spec(c, spec, sizeof spec);
  if (o->train.precision != GS_F32)
    return GS_FAIL(e, GS_EINVAL, "--compress %s with --precision %s: compression works on fp32 "
                   "gradients; give --precision fp32", spec, gs_dtype_name(o->train.precision));
  if (o->collective)
    return GS_FAIL(e, GS_EINVAL, "--compress %s: the collective benchmark moves raw buffers "
                   "(its -d picks the dtype); drop --compress", spec);
  if (c->kind != GS_COMPRESS_TOPK && c->kind != GS_COMPRESS_POWERSGD) return GS_OK;
  if (o->loss_scale_set)
    return GS_FAIL(e, GS_EINVAL, "--compress %s runs without loss scaling (fp32 gradients): "
                   "drop --loss-scale", spec);
  if (strcmp(o->device, "cuda") == 0)
    return GS_FAIL(e, GS_EINVAL, "--compress %s runs on the CPU: drop --device cuda (or give "
                   "--compress fp16 / bf16 on the GPU)", spec);
  if (c->kind == GS_COMPRESS_TOPK) return topk(o, spec, e);
  for (int i = 0; i < o->nmodes; i++)
    if (o->modes[i] == GS_MODE_PS) return ps_flat(o, spec, e);
  return GS_OK;
}
