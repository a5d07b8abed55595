/* nccl_check.c: the one-GPU-per-rank rule of the NCCL backend, checked
 * before NCCL sees the ranks (NCCL itself reports "Duplicate GPU detected"
 * late, or hangs with older versions). Built in every configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"

int gs_nccl_check_gpus(int rank, int local_rank, int local_world, int device, int ngpus,
                       gs_err *e) {
  const char *vis = getenv("CUDA_VISIBLE_DEVICES");
  if (!vis) vis = "(unset)";
  if (ngpus <= 0)
    return GS_FAIL(e, GS_EDEVICE,
                   "rank %d: ring with --device cuda needs one GPU per rank, but no GPU is "
                   "visible (CUDA_VISIBLE_DEVICES=%s); check the driver (nvidia-smi), or use "
                   "--device cpu",
                   rank, vis);
  if (local_world > ngpus)
    return GS_FAIL(e, GS_EDEVICE,
                   "rank %d: ring with --device cuda needs one GPU per rank: %d local ranks but "
                   "%d GPU%s visible (CUDA_VISIBLE_DEVICES=%s); use --mode=ps to share a GPU, "
                   "or fewer ranks",
                   rank, local_world, ngpus, ngpus == 1 ? "" : "s", vis);
  if (device < 0 || device >= ngpus)
    return GS_FAIL(e, GS_EDEVICE,
                   "rank %d (local rank %d): GPU %d requested but %d GPU%s visible "
                   "(CUDA_VISIBLE_DEVICES=%s)",
                   rank, local_rank, device, ngpus, ngpus == 1 ? " is" : "s are", vis);
  return GS_OK;
}

/* NCCL on GPUs: every step synchronous, 16-bit traffic with loss scaling,
 * no compression of our own (topk and PowerSGD run their math on the CPU),
 * no periodic averaging (the CPU ring's so far). */
void gs_nccl_caps(const void *opts, gs_caps *c) {
  (void)opts;
  gs_caps_everything(c);
  snprintf(c->what, sizeof c->what, "the GPU all-reduce (NCCL: --mode ring --device cuda)");
  c->runs[GS_AXIS_COMPRESS] = GS_CAP(GS_COMPRESS_NONE) | GS_CAP(GS_COMPRESS_FP16) |
                              GS_CAP(GS_COMPRESS_BF16);
  c->runs[GS_AXIS_SYNC] = GS_CAP(GS_SYNC_BSP);
  c->runs[GS_AXIS_DEVICE] = GS_CAP(GS_DEV_CUDA);
}
