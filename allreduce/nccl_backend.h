/* nccl_backend.h: the "nccl" backend of sync.h: ring all-reduce on GPUs
 * through NCCL, as DistributedDataParallel does. (Not "nccl.h": that name
 * would shadow NCCL's own header.) Declared in every build: where NCCL or
 * CUDA was not found, prepare() and open() fail with GS_EDEVICE saying so,
 * so the launcher needs no #ifdef.
 *
 * The launcher's part (bench/): prepare() on every rank; bootstrap() on
 * rank 0 writes NCCL's unique id (128 bytes) into the blob; the rendezvous
 * hands the blob to every rank; open(). The config must carry device (the
 * GPU of this rank), local_rank / local_world (ranks on this host), and k,
 * params, grads, buckets on that GPU (a CUDA table). */
#ifndef GS_ALLREDUCE_NCCL_BACKEND_H
#define GS_ALLREDUCE_NCCL_BACKEND_H

#include "worker/sync.h"

extern const gs_backend gs_backend_nccl;

/* NCCL runs one rank per GPU: with local_world ranks on this host and
 * ngpus GPUs visible, fail with a message that says what to do instead
 * (--mode=ps shares a GPU) before NCCL reports a duplicate GPU or hangs.
 * Pure function (no CUDA call), so CPU tests cover the messages. */
int gs_nccl_check_gpus(int rank, int local_rank, int local_world, int device, int ngpus,
                       gs_err *e);

#endif
