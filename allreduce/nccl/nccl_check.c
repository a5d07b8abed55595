/* nccl_check.c: the one-GPU-per-rank rule of the NCCL backend, checked
 * before NCCL sees the ranks (NCCL itself reports "Duplicate GPU detected"
 * late, or hangs with older versions). Built in every configuration. */
#include <stdlib.h>

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
