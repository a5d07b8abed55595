/* nccl.h: the contract of allreduce/nccl, the "nccl" backend of sync.h:
 * DDP's all-reduce on GPUs through NCCL, one rank per GPU, a bucket's
 * all-reduce overlapping backward on a stream of its own; and the
 * collective benchmark's NCCL calls. Always spelled
 * "allreduce/nccl/nccl.h": <nccl.h> is NCCL's own.
 *
 * What it is to the rest of gradsync is declared in allreduce.h, in every
 * build: gs_nccl_backend, gs_nccl_caps (what it runs, so the command line
 * refuses a combination before any rank loads CUDA), gs_nccl_check_gpus
 * (one GPU per rank) and gs_nccl_collective. Its users: bench/job's table
 * of backends (--mode ring --device cuda), bench/coll (`bench --collective
 * --device cuda`), and tests/gpu (the GPU tests and the CPU mocks of CUDA
 * and NCCL, which run nccl.c's logic in every build).
 *
 * What it may include: it is a sub-part of allreduce, built as allreduce
 * (its view: allreduce/ and what allreduce sees, worker/sync.h, compress,
 * proto, shm, kernels, base), plus kernels/cuda/cuda_impl.h (streams, the
 * fork of a kernels table) and the toolkit's cuda_runtime.h and nccl.h.
 * Nothing of ps/ or bench/.
 *
 * Its module split. cudart, cuBLAS and NCCL stay out of the programs
 * (kernels/cuda_loader.h says why), so its files build in two places:
 *   libgs_cuda.so, with NCCL   nccl.c (the session: streams, events,
 *                              buckets, the optimizer), nccl_wait.c (its
 *                              errors and waits), nccl_coll.c (the
 *                              collective benchmark's calls), and the
 *                              module's own copies of nccl_check.c,
 *                              allreduce/family.c and coll.c, sync.h's
 *                              code and compress/spec.c (allreduce/meson.build);
 *   every program              nccl_check.c (the one-GPU-per-rank rule);
 *                              with NCCL nccl_proxy.c, the backend and
 *                              gs_nccl_collective as forwards into the
 *                              module, loaded on first use; without it
 *                              nonccl.c, the same names failing with a
 *                              message that says why, so the launcher
 *                              needs no #ifdef.
 * nccl_internal.h is the session as the module's files see it.
 *
 * Rules: no wait blocks in NCCL (each polls CUDA events and NCCL's
 * asynchronous error under cfg.timeout_ms); any failure aborts the
 * communicator, so the peers' kernels stop too, and names the rank, the
 * GPU, the step, the bucket and the phase. */
#ifndef GS_NCCL_H
#define GS_NCCL_H

#include "allreduce/allreduce.h"

/* The module's two entries for nccl_proxy.c, which looks them up by these
 * names (kernels/cuda/module.map exports them): the real "nccl" backend
 * (nccl.c) and the real gs_nccl_collective (nccl_coll.c), both local to
 * the module otherwise. */
#define GS_CUDAMOD_NCCL_BACKEND "gs_cudamod_nccl_backend"
#define GS_CUDAMOD_NCCL_COLLECTIVE "gs_cudamod_nccl_collective"
__attribute__((visibility("default"))) const gs_backend *gs_cudamod_nccl_backend(void);
__attribute__((visibility("default"))) gs_nccl_collective_fn *gs_cudamod_nccl_collective(void);

#endif
