/* nccl_wait.c: the NCCL backend's errors and waits (nccl_internal.h):
 * every failure names the rank, GPU, step, bucket and phase and aborts the
 * communicator (so the peers' kernels stop too); every wait polls CUDA
 * events and ncclCommGetAsyncError under cfg.timeout_ms, never blocking in
 * NCCL, so a dead or stalled peer ends in an error, not a hang. */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "allreduce/allreduce.h"
#include "allreduce/nccl/nccl_internal.h"
#include "kernels/cuda/cuda_impl.h"

/* ---- errors ---- */

static const char *nccl_hint =
    "a peer rank is dead, stalled or behind, or the network failed; NCCL cannot tell which "
    "peer: look for the first error among the other ranks, or rerun with NCCL_DEBUG=WARN";

/* Where we are, for every message: "nccl rank 2/4, step 14, bucket 3/7: " */
void gs_nccl_where(const nccl_sync *s, int bucket, char *buf, size_t len) {
  if (s->step < 0)
    snprintf(buf, len, "nccl rank %d/%d (GPU %d), opening: ", s->cfg.rank, s->cfg.world,
             s->cfg.device);
  else if (bucket >= 0)
    snprintf(buf, len, "nccl rank %d/%d (GPU %d), step %lld, bucket %d/%d (%zu elements): ",
             s->cfg.rank, s->cfg.world, s->cfg.device, (long long)s->step, bucket,
             s->cfg.nbuckets, s->cfg.buckets[bucket].count);
  else
    snprintf(buf, len, "nccl rank %d/%d (GPU %d), step %lld: ", s->cfg.rank, s->cfg.world,
             s->cfg.device, (long long)s->step);
}

/* Abort the communicator so peers stop too; after this every call fails. */
void gs_nccl_abort(nccl_sync *s) {
  if (s->comm) (void)ncclCommAbort(s->comm);  /* ncclInProgress: it finishes on its own */
  s->comm = NULL;
  s->dead = true;
}

/* Record the error with its context, abort, return code. */
int gs_nccl_fail(nccl_sync *s, int bucket, gs_err *e, int code, const char *fmt, ...) {
  char pre[160], msg[768];
  gs_nccl_where(s, bucket, pre, sizeof pre);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  gs_nccl_abort(s);
  return GS_FAIL(e, code, "%s%s", pre, msg);
}

int gs_nccl_dead(nccl_sync *s, gs_err *e) {
  char pre[160];
  gs_nccl_where(s, -1, pre, sizeof pre);
  return GS_FAIL(e, GS_EPEER, "%sthe NCCL communicator was aborted by an earlier error", pre);
}

/* ---- waiting ---- */

/* Yield for the first ~millisecond (short collectives), then sleep 50 us. */
void gs_nccl_pause(int *spins) {
  if (++*spins < 2000) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 50 * 1000};
  nanosleep(&ts, NULL);
}

/* NCCL's own asynchronous error, as a message (empty string when fine). */
static int async_error(nccl_sync *s, int bucket, const char *phase, gs_err *e) {
  ncclResult_t st = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(s->comm, &st);
  if (r != ncclSuccess) st = r;
  if (st == ncclSuccess || st == ncclInProgress) return GS_OK;
  return gs_nccl_fail(s, bucket, e, st == ncclRemoteError ? GS_EPEER : GS_EDEVICE,
      "%s: NCCL reported %s (%s; last NCCL error: %s); %s", phase,
      ncclGetErrorString(st), st == ncclRemoteError ? "a peer process exited or the "
      "network failed" : "asynchronous error", ncclGetLastError(s->comm), nccl_hint);
}

/* A non-blocking NCCL call returned r: wait until the communicator is ready
 * for the next call (NCCL's rule for ncclInProgress). */
int gs_nccl_settle(nccl_sync *s, ncclResult_t r, int bucket, const char *phase, gs_err *e) {
  if (r == ncclSuccess) return GS_OK;
  if (r != ncclInProgress)
    return gs_nccl_fail(s, bucket, e, r == ncclRemoteError ? GS_EPEER : GS_EDEVICE,
                        "%s: %s (last NCCL error: %s)", phase, ncclGetErrorString(r),
                        ncclGetLastError(s->comm));
  double t0 = gs_now(), limit = s->cfg.timeout_ms / 1000.0;
  int spins = 0;
  for (;;) {
    ncclResult_t st = ncclInProgress;
    ncclResult_t q = ncclCommGetAsyncError(s->comm, &st);
    if (q != ncclSuccess) st = q;
    if (st == ncclSuccess) break;
    if (st != ncclInProgress) GS_TRY(async_error(s, bucket, phase, e));
    if (gs_interrupted)
      return gs_nccl_fail(s, bucket, e, GS_EINTR, "%s: interrupted", phase);
    if (gs_now() - t0 > limit)
      return gs_nccl_fail(s, bucket, e, GS_ETIMEOUT, "%s did not complete within %d ms; %s", phase,
                          s->cfg.timeout_ms, nccl_hint);
    gs_nccl_pause(&spins);
  }
  s->blocked_s += gs_now() - t0;
  return GS_OK;
}

/* The first bucket of this step whose all-reduce has not finished. */
static int pending_bucket(nccl_sync *s) {
  int pending = s->enqueued - 1;
  for (int b = 0; b < s->enqueued; b++)
    if (cudaEventQuery(s->ev[b].t2) == cudaErrorNotReady) {
      pending = b;
      break;
    }
  (void)cudaGetLastError();  /* "not ready" is not an error: do not leave it behind */
  return pending;
}

/* Wait for everything queued on the comm stream up to s->done; what: the
 * phase for messages ("all-reduce", or a collective's NCCL call). */
int gs_nccl_wait(nccl_sync *s, const char *what, gs_err *e) {
  double t0 = gs_now(), limit = s->cfg.timeout_ms / 1000.0;
  int spins = 0;
  for (;;) {
    cudaError_t q = cudaEventQuery(s->done);
    if (q == cudaSuccess) return GS_OK;
    (void)cudaGetLastError();
    if (q != cudaErrorNotReady) {
      int b = pending_bucket(s);
      return gs_nccl_fail(s, b, e, GS_EDEVICE, "waiting for the %s: %s (%s)", what,
                          cudaGetErrorName(q), cudaGetErrorString(q));
    }
    GS_TRY(async_error(s, pending_bucket(s), what, e));
    if (gs_interrupted) return gs_nccl_fail(s, pending_bucket(s), e, GS_EINTR, "interrupted");
    if (gs_now() - t0 > limit) {
      int b = pending_bucket(s);
      char buckets[96] = "";
      if (s->enqueued > 0)
        snprintf(buckets, sizeof buckets, " (%d of the step's %d buckets completed on this "
                 "rank)", b < 0 ? 0 : b, s->cfg.nbuckets);
      return gs_nccl_fail(s, b, e, GS_ETIMEOUT, "%s did not finish within %d ms%s; %s", what,
                          s->cfg.timeout_ms, buckets, nccl_hint);
    }
    gs_nccl_pause(&spins);
  }
}
