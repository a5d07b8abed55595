/* nccl_internal.h: allreduce/nccl/, the NCCL backend. Its contract is
 * nccl.h (and allreduce.h's gs_nccl_backend, gs_nccl_collective and
 * gs_nccl_check_gpus); this header is the session (nccl.c) as the files
 * beside it see it: nccl_wait.c holds its error and wait machinery (never
 * a hang, the communicator aborted on any error, messages naming the rank
 * and the phase), nccl_coll.c runs the collective benchmark's other
 * collectives on its communicator, streams and wire buffer. nccl_proxy.c
 * (or nonccl.c without NCCL) is the backend as the programs see it;
 * nccl_check.c the one-GPU-per-rank rule. */
#ifndef GS_NCCL_INTERNAL_H
#define GS_NCCL_INTERNAL_H

#include <cuda_runtime.h>
#include <nccl.h>

#include "allreduce/allreduce.h"

typedef struct bucket_events {
  cudaEvent_t ready;           /* compute stream: backward wrote the bucket */
  cudaEvent_t t0, t1, t2, t3;  /* comm stream: [to wire] t1 allreduce t2 [widen, average] t3 */
} bucket_events;

typedef struct nccl_sync {
  gs_sync base;
  gs_sync_config cfg;          /* a copy; the pointers in it are the launcher's */
  gs_kernels *k;               /* compute (cfg.k) */
  gs_kernels *kc;              /* communication: a fork of k on its own stream */
  cudaStream_t compute, comm_stream;
  ncclComm_t comm;
  bool dead;                   /* aborted: every later call fails */
  bucket_events *ev;
  cudaEvent_t done, anchor, u0, u1;
  cudaEvent_t coll_ready;      /* compute stream: a collective's inputs are written */
  void *wire;                  /* n elements of cfg.wire (fp16 / bf16 wire only) */
  gs_update u;                 /* the optimizer and the loss scaler */
  int64_t step;
  gs_sync_order order;         /* sync.h's call order */
  int enqueued;                /* buckets queued on the comm stream this step */
  double blocked_s;            /* host time spent waiting inside bucket_ready this step */
  double t_anchor;             /* gs_now() when the anchor event completed (spans) */
  bool have_anchor;
} nccl_sync;

/* The session behind s, or NULL when another backend opened it. */
nccl_sync *gs_nccl_of(gs_sync *s);

/* Record the error with "nccl rank R/N (GPU g), step S[, bucket b/B]: "
 * before it (bucket < 0: none), abort the communicator, return code. */
int gs_nccl_fail(nccl_sync *s, int bucket, gs_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The error of every call after an abort. */
int gs_nccl_dead(nccl_sync *s, gs_err *e);
/* A non-blocking NCCL call named phase returned r: an error, or wait (under
 * cfg.timeout_ms) until the communicator takes the next call. */
int gs_nccl_settle(nccl_sync *s, ncclResult_t r, int bucket, const char *phase, gs_err *e);
/* Wait until s->done (recorded on the comm stream) completes, polling
 * NCCL's asynchronous errors under cfg.timeout_ms; what names the phase. */
int gs_nccl_wait(nccl_sync *s, const char *what, gs_err *e);
/* "nccl rank R/N (GPU g), step S[, bucket b/B (n elements)]: " into buf. */
void gs_nccl_where(const nccl_sync *s, int bucket, char *buf, size_t len);
/* Abort the communicator (once; the session is dead after it). */
void gs_nccl_abort(nccl_sync *s);
/* One pause of a polling wait: spin a little, then yield, then sleep. */
void gs_nccl_pause(int *spins);
/* NCCL's type for a wire dtype: ncclFloat32, ncclFloat16, ncclBfloat16,
 * ncclFloat64, ncclInt32. */
ncclDataType_t gs_nccl_type(gs_dtype t);

/* A failed CUDA call inside session s (bucket b, or -1): gs_nccl_fail. */
#define GS_NCCL_CU(s, b, e, call)                                                          \
  do {                                                                                     \
    cudaError_t rc_ = (call);                                                              \
    if (rc_ != cudaSuccess) {                                                              \
      (void)cudaGetLastError();                                                            \
      return gs_nccl_fail((s), (b), (e), GS_EDEVICE, "%s: %s (%s)", #call,                 \
                          cudaGetErrorName(rc_), cudaGetErrorString(rc_));                 \
    }                                                                                      \
  } while (0)

#endif
