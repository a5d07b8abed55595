/* nccl.c: the "nccl" backend of sync.h: DDP's ring all-reduce on GPUs.
 *
 * Every rank owns one GPU (gs_nccl_check_gpus says so before NCCL starts),
 * its model buffers on it, and two streams: the kernels table's compute
 * stream, where forward and backward run, and a communication stream of
 * its own (a fork of the table, kernels/cuda/cuda_impl.h). A bucket that
 * backward has filled is handed over with an event, so its all-reduce runs
 * while backward goes on with the earlier layers:
 *
 *   compute  |--backward: bucket 0 grads--|ev0|--bucket 1 grads--|ev1|--...  |wait done|update|
 *   comm                                   |[to wire] allreduce 0 [widen]|
 *                                                                  |... bucket 1 ...|done|
 *
 * One ncclAllReduce (ncclSum) per bucket, in bucket order on every rank
 * (NCCL needs the same order everywhere; sync.h's order check enforces
 * 0, 1, 2..).
 * Gradients are summed in place. With a low-precision wire (cfg.wire fp16 /
 * bf16) the bucket is first rounded into a device wire buffer, all-reduced
 * in that type (NCCL adds in it: half the bytes, more rounding than the
 * ZeroMQ ring's fp32 accumulation), and widened back. end_step then ends
 * the step on the compute stream as every backend does, gs_update_apply
 * (kernels.h): the mean, the overflow verdict on reduced gradients that
 * are identical on every rank (so every rank skips or steps alike), SGD.
 * sum_only (the collective benchmark) all-reduces grads straight into
 * params, out of place, and stops there.
 *
 * Never a hang: the communicator is created non-blocking
 * (ncclCommInitRankConfig, blocking = 0) and every wait polls
 * cudaEventQuery + ncclCommGetAsyncError under cfg.timeout_ms. A missing
 * rank at init, a dead or stalled peer, an async NCCL error or SIGINT
 * aborts the communicator (ncclCommAbort, so the peers' kernels stop too)
 * and returns an error naming this rank, the step, the bucket and the
 * phase; NCCL cannot say which peer, so the message says where to look.
 * Those errors and waits are nccl_wait.c's.
 *
 * Timing: CUDA events around each bucket's pieces give reduce_s (wire
 * conversion and averaging on this GPU) and the "allreduce" spans; events
 * around the optimizer give update_s; wait_s is the host time end_step is
 * blocked waiting for the communication. Bytes are the ring algorithm's
 * 2(N-1)/N of each bucket per direction (what busbw assumes; NCCL may pick
 * a tree or NVLS instead). */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "allreduce/allreduce.h"
#include "allreduce/nccl/nccl.h"
#include "allreduce/nccl/nccl_internal.h"
#include "kernels/cuda/cuda_impl.h"

_Static_assert(sizeof(ncclUniqueId) <= GS_BOOTSTRAP_MAX, "NCCL unique id fits the blob");

typedef struct nccl_state {
  int ngpus;
} nccl_state;

/* ---- one bucket ---- */

ncclDataType_t gs_nccl_type(gs_dtype t) {
  switch (t) {
  case GS_F16: return ncclFloat16;
  case GS_BF16: return ncclBfloat16;
  case GS_F64: return ncclFloat64;
  case GS_I32: return ncclInt32;
  default: return ncclFloat32;
  }
}

static int enqueue(nccl_sync *s, int b, gs_err *e) {
  const gs_sync_config *c = &s->cfg;
  size_t off = c->buckets[b].offset, cnt = c->buckets[b].count;
  bool lp = gs_dtype_lp(c->wire);
  size_t es = gs_dtype_size(c->wire), bs = lp ? sizeof(float) : es;  /* wire, buffers */
  bucket_events *ev = &s->ev[b];
  char *g = (char *)c->grads + off * bs;
  char *out = c->sum_only ? (char *)c->params + off * bs : g;
  GS_NCCL_CU(s, b, e, cudaEventRecord(ev->ready, s->compute));
  GS_NCCL_CU(s, b, e, cudaStreamWaitEvent(s->comm_stream, ev->ready, 0));
  GS_NCCL_CU(s, b, e, cudaEventRecord(ev->t0, s->comm_stream));
  const void *send = g;
  void *recv = out;
  if (lp) {
    void *w = (char *)s->wire + off * es;
    s->kc->convert(s->kc, c->wire, w, GS_F32, g, cnt);
    send = recv = w;
  }
  GS_NCCL_CU(s, b, e, cudaEventRecord(ev->t1, s->comm_stream));
  ncclResult_t r =
      ncclAllReduce(send, recv, cnt, gs_nccl_type(c->wire), ncclSum, s->comm, s->comm_stream);
  GS_TRY(gs_nccl_settle(s, r, b, "ncclAllReduce", e));
  GS_NCCL_CU(s, b, e, cudaEventRecord(ev->t2, s->comm_stream));
  if (lp) s->kc->convert(s->kc, GS_F32, out, c->wire, recv, cnt);
  GS_NCCL_CU(s, b, e, cudaEventRecord(ev->t3, s->comm_stream));
  s->enqueued++;
  return GS_OK;
}

/* ---- gs_sync_ops ---- */

static int nccl_begin_step(gs_sync *base, int64_t step, gs_err *e) {
  nccl_sync *s = (nccl_sync *)base;
  if (s->dead) return gs_nccl_dead(s, e);
  GS_TRY(gs_sync_order_begin(&s->order, step, e));
  s->step = step;
  s->enqueued = 0;
  s->blocked_s = 0;
  s->have_anchor = false;
  if (s->cfg.span) {
    /* the comm stream is idle here: the anchor completes at once and maps
     * event times to gs_now() for the spans */
    GS_NCCL_CU(s, -1, e, cudaEventRecord(s->anchor, s->comm_stream));
    GS_NCCL_CU(s, -1, e, cudaEventSynchronize(s->anchor));
    s->t_anchor = gs_now();
    s->have_anchor = true;
  }
  return GS_OK;
}

static int nccl_bucket_ready(gs_sync *base, int bucket, gs_err *e) {
  nccl_sync *s = (nccl_sync *)base;
  if (s->dead) return gs_nccl_dead(s, e);
  GS_TRY(gs_sync_order_ready(&s->order, bucket, e));
  if (s->cfg.overlap) return enqueue(s, bucket, e);
  return GS_OK;
}

static double ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.0f;
  if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0.0;
  }
  return ms;
}

static void span(nccl_sync *s, const char *name, int bucket, cudaEvent_t a, cudaEvent_t b) {
  if (!s->cfg.span || !s->have_anchor) return;
  double t0 = s->t_anchor + ms_between(s->anchor, a) / 1e3;
  double t1 = s->t_anchor + ms_between(s->anchor, b) / 1e3;
  s->cfg.span(s->cfg.span_ctx, name, bucket, t0, t1, 1);
}

static int nccl_end_step(gs_sync *base, gs_sync_stats *st, gs_err *e) {
  nccl_sync *s = (nccl_sync *)base;
  const gs_sync_config *c = &s->cfg;
  memset(st, 0, sizeof *st);
  if (s->dead) return gs_nccl_dead(s, e);
  GS_TRY(gs_sync_order_end(&s->order, e));
  double t_enter = gs_now(), blocked_before = s->blocked_s;
  while (s->enqueued < c->nbuckets) GS_TRY(enqueue(s, s->enqueued, e));
  GS_NCCL_CU(s, -1, e, cudaEventRecord(s->done, s->comm_stream));
  GS_TRY(gs_nccl_wait(s, "all-reduce", e));
  st->wait_s = gs_now() - t_enter + blocked_before;
  GS_NCCL_CU(s, -1, e, cudaStreamWaitEvent(s->compute, s->done, 0));

  size_t es = gs_dtype_size(c->wire);
  double reduce_ms = 0.0;
  for (int b = 0; b < c->nbuckets; b++) {
    bucket_events *ev = &s->ev[b];
    reduce_ms += ms_between(ev->t0, ev->t1) + ms_between(ev->t2, ev->t3);
    if (gs_dtype_lp(c->wire)) span(s, "to_wire", b, ev->t0, ev->t1);
    span(s, "allreduce", b, ev->t1, ev->t2);
    if (gs_dtype_lp(c->wire)) span(s, "widen", b, ev->t2, ev->t3);
    uint64_t bytes = c->world > 1 ? (uint64_t)(2.0 * (c->world - 1) / c->world *
                                               (double)(c->buckets[b].count * es))
                                  : 0;
    st->bytes_sent += bytes;
    st->bytes_recv += bytes;
  }
  st->reduce_s = reduce_ms / 1e3;

  gs_update_result res = {.scale = s->u.scaler.scale};
  if (!c->sum_only) {
    GS_NCCL_CU(s, -1, e, cudaEventRecord(s->u0, s->compute));
    gs_update_range r = {.offset = 0, .count = c->n, .grad = c->grads};
    gs_err ue = {0};
    if (gs_update_apply(&s->u, c->params, &r, 1, true, true, &res, &ue) < 0)
      return gs_nccl_fail(s, -1, e, ue.code, "%s", ue.msg);
    st->skipped = res.skipped;
    GS_NCCL_CU(s, -1, e, cudaEventRecord(s->u1, s->compute));
  }
  gs_err ke = {0};
  if (s->k->sync(s->k, &ke) != GS_OK || s->kc->sync(s->kc, &ke) != GS_OK)
    return gs_nccl_fail(s, -1, e, ke.code ? ke.code : GS_EDEVICE, "%s", ke.msg);
  if (!c->sum_only) {
    st->update_s = ms_between(s->u0, s->u1) / 1e3;
    span(s, st->skipped ? "skip" : "update", -1, s->u0, s->u1);
  }
  st->scale = res.scale;
  return GS_OK;
}

/* After an abort the comm stream may still hold an NCCL kernel that has
 * not seen the abort flag yet, and cudaFree or a stream sync would wait for
 * it. So wait for the stream to drain, but only as long as any other wait
 * (at most 10 s); if it does not, the device buffers, events and the fork
 * are left to process exit (an error path) rather than risk a hang. */
static bool drained(nccl_sync *s) {
  if (!s->comm_stream) return true;
  double t0 = gs_now(), limit = s->cfg.timeout_ms / 1000.0;
  if (limit > 10.0) limit = 10.0;
  int spins = 0;
  for (;;) {
    cudaError_t q = cudaStreamQuery(s->comm_stream);
    (void)cudaGetLastError();
    if (q != cudaErrorNotReady) return true;  /* idle, or failed: nothing left to wait for */
    if (gs_now() - t0 > limit) return false;
    gs_nccl_pause(&spins);
  }
}

static void free_sync(nccl_sync *s) {
  if (s->k && (!s->dead || drained(s))) {
    (void)cudaSetDevice(s->cfg.device);
    if (s->ev) {
      for (int b = 0; b < s->cfg.nbuckets; b++) {
        cudaEvent_t *all[] = {&s->ev[b].ready, &s->ev[b].t0, &s->ev[b].t1, &s->ev[b].t2,
                              &s->ev[b].t3};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
          if (*all[i]) cudaEventDestroy(*all[i]);
      }
    }
    cudaEvent_t one[] = {s->done, s->anchor, s->u0, s->u1, s->coll_ready};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
      if (one[i]) cudaEventDestroy(one[i]);
    if (s->wire) s->k->release(s->k, s->wire);
    gs_update_free(&s->u);
    if (s->kc) s->kc->destroy(s->kc);
    gs_err ignored = {0};
    (void)s->k->sync(s->k, &ignored);
    (void)cudaGetLastError();
  }
  free(s->ev);
  free(s);
}

static int nccl_close(gs_sync *base, bool ok, gs_err *e) {
  nccl_sync *s = (nccl_sync *)base;
  int rc = GS_OK;
  if (s->comm && !s->dead) {
    if (ok) {
      ncclResult_t r = ncclCommFinalize(s->comm);
      rc = gs_nccl_settle(s, r, -1, "ncclCommFinalize (orderly close)", e);
      if (rc == GS_OK) {
        (void)ncclCommDestroy(s->comm);
        s->comm = NULL;
      }
    } else {
      gs_nccl_abort(s);
    }
  }
  free_sync(s);
  return rc;
}

static const gs_sync_ops nccl_ops = {
    .begin_step = nccl_begin_step,
    .bucket_ready = nccl_bucket_ready,
    .end_step = nccl_end_step,
    .close = nccl_close,
};

nccl_sync *gs_nccl_of(gs_sync *s) { return s && s->ops == &nccl_ops ? (nccl_sync *)s : NULL; }

/* ---- gs_backend ---- */

static int nccl_prepare(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                        gs_err *e) {
  *state = NULL;
  endpoint[0] = '\0';
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return GS_FAIL(e, GS_EDEVICE,
                   "rank %d: ring with --device cuda: no usable GPU (%s: %s); check the driver "
                   "(nvidia-smi) and CUDA_VISIBLE_DEVICES, or use --device cpu",
                   c->rank, cudaGetErrorName(rc), cudaGetErrorString(rc));
  }
  GS_TRY(gs_nccl_check_gpus(c->rank, c->local_rank, c->local_world, c->device, n, e));
  nccl_state *st = calloc(1, sizeof *st);
  if (!st) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
  st->ngpus = n;
  *state = st;
  return GS_OK;
}

static int nccl_bootstrap(void *state, const gs_sync_config *c, void *blob, size_t *len,
                          gs_err *e) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    return GS_FAIL(e, GS_EDEVICE,
                   "rank %d: ncclGetUniqueId: %s (%s); NCCL found no usable network interface "
                   "for its bootstrap: set NCCL_SOCKET_IFNAME (e.g. lo for one host)",
                   c->rank, ncclGetErrorString(r), ncclGetLastError(NULL));
  memcpy(blob, &id, sizeof id);
  *len = sizeof id;
  return GS_OK;
}

static void nccl_discard(void *state) { free(state); }

/* sync.h's checks, and NCCL's own: the model on a GPU, the unique id. */
static int check_config(const gs_sync_config *c, gs_err *e) {
  if (c && c->k && c->k->device != GS_DEV_CUDA)
    return GS_FAIL(e, GS_EINVAL,
                   "rank %d: the nccl backend needs the model on a GPU (--device cuda); for "
                   "--device cpu the ring is the ZeroMQ one",
                   c->rank);
  GS_TRY(gs_sync_check_config(c, &gs_nccl_backend, "nccl", e));
  if (c->bootstrap_len != sizeof(ncclUniqueId) || !c->bootstrap)
    return GS_FAIL(e, GS_EPROTO,
                   "rank %d: the NCCL unique id from the rendezvous is %zu bytes, expected %zu "
                   "(what rank 0's bootstrap() wrote)",
                   c->rank, c->bootstrap_len, sizeof(ncclUniqueId));
  if (gs_cuda_device(c->k) != c->device)
    return GS_FAIL(e, GS_EINVAL,
                   "rank %d: the model is on GPU %d but the backend was given GPU %d",
                   c->rank, gs_cuda_device(c->k), c->device);
  if (c->timeout_ms <= 0)
    return GS_FAIL(e, GS_EINVAL, "rank %d: timeout_ms %d must be positive", c->rank,
                   c->timeout_ms);
  return GS_OK;
}

/* Create the communicator without blocking, then poll it under the timeout:
 * a rank that never joins is a timeout error, not a hang. */
static int init_comm(nccl_sync *s, const void *blob, gs_err *e) {
  const gs_sync_config *c = &s->cfg;
  ncclUniqueId id;
  memcpy(&id, blob, sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, c->world, id, c->rank, &config);
  s->comm = comm;
  if (r != ncclSuccess && r != ncclInProgress)
    return gs_nccl_fail(s, -1, e, GS_EDEVICE,
        "ncclCommInitRankConfig (world %d): %s (last NCCL error: %s); NCCL_DEBUG=WARN "
        "says more",
        c->world, ncclGetErrorString(r), ncclGetLastError(comm));
  double t0 = gs_now(), limit = c->timeout_ms / 1000.0;
  int spins = 0;
  for (;;) {
    ncclResult_t st = ncclInProgress;
    ncclResult_t q = ncclCommGetAsyncError(comm, &st);
    if (q != ncclSuccess) st = q;
    if (st == ncclSuccess) return GS_OK;
    if (st != ncclInProgress)
      return gs_nccl_fail(s, -1, e, st == ncclRemoteError ? GS_EPEER : GS_EDEVICE,
                          "creating the NCCL communicator (world %d): %s (last NCCL error: %s); if "
                          "two ranks share a GPU use --mode=ps; NCCL_DEBUG=WARN says more",
                          c->world, ncclGetErrorString(st), ncclGetLastError(comm));
    if (gs_interrupted) return gs_nccl_fail(s, -1, e, GS_EINTR, "creating the NCCL communicator: "
                                            "interrupted");
    if (gs_now() - t0 > limit)
      return gs_nccl_fail(s, -1, e, GS_ETIMEOUT,
          "creating the NCCL communicator (world %d) did not complete within %d ms: a "
          "rank did not join (not started, dead, or unable to reach rank 0's NCCL "
          "bootstrap address; NCCL_SOCKET_IFNAME picks the interface, NCCL_DEBUG=INFO "
          "shows it)",
          c->world, c->timeout_ms);
    gs_nccl_pause(&spins);
  }
}

static int nccl_open(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e) {
  *out = NULL;
  free(state);
  GS_TRY(check_config(c, e));
  nccl_sync *s = calloc(1, sizeof *s);
  if (!s) return GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
  s->base.ops = &nccl_ops;
  s->base.name = "nccl";
  s->cfg = *c;
  s->cfg.endpoints = NULL;   /* the launcher's, not kept past open */
  s->cfg.bootstrap = NULL;
  s->k = c->k;
  s->step = -1;
  gs_sync_order_init(&s->order, "nccl", c->rank, c->nbuckets);
  int rc = GS_OK;
#define OPEN_CU(call)                                                                       \
  do {                                                                                      \
    if (rc == GS_OK) {                                                                      \
      cudaError_t q_ = (call);                                                              \
      if (q_ != cudaSuccess) {                                                              \
        (void)cudaGetLastError();                                                           \
        rc = GS_FAIL(e, GS_EDEVICE, "rank %d (GPU %d): %s: %s (%s)", c->rank, c->device,     \
                     #call, cudaGetErrorName(q_), cudaGetErrorString(q_));                  \
      }                                                                                     \
    }                                                                                       \
  } while (0)
  OPEN_CU(cudaSetDevice(c->device));
  if (rc == GS_OK) {
    s->kc = gs_cuda_fork(c->k, e);
    if (!s->kc) rc = e && e->code ? e->code : GS_EDEVICE;
  }
  if (rc == GS_OK) {
    s->compute = gs_cuda_stream(s->k);
    s->comm_stream = gs_cuda_stream(s->kc);
    s->ev = calloc((size_t)(c->nbuckets > 0 ? c->nbuckets : 1), sizeof *s->ev);
    if (!s->ev) rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory", c->rank);
  }
  for (int b = 0; rc == GS_OK && b < c->nbuckets; b++) {
    OPEN_CU(cudaEventCreateWithFlags(&s->ev[b].ready, cudaEventDisableTiming));
    OPEN_CU(cudaEventCreate(&s->ev[b].t0));
    OPEN_CU(cudaEventCreate(&s->ev[b].t1));
    OPEN_CU(cudaEventCreate(&s->ev[b].t2));
    OPEN_CU(cudaEventCreate(&s->ev[b].t3));
  }
  OPEN_CU(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
  OPEN_CU(cudaEventCreate(&s->anchor));
  OPEN_CU(cudaEventCreate(&s->u0));
  OPEN_CU(cudaEventCreate(&s->u1));
  OPEN_CU(cudaEventCreateWithFlags(&s->coll_ready, cudaEventDisableTiming));
#undef OPEN_CU
  if (rc == GS_OK && gs_dtype_lp(c->wire) && c->n > 0)
    s->wire = c->k->alloc(c->k, c->n * gs_dtype_size(c->wire));
  if (rc == GS_OK) {
    gs_sgd sgd = c->sgd;
    if (c->sum_only) sgd.momentum = 0.0f;
    /* sum_only never applies an update; the optimizer knows the wire dtypes */
    gs_dtype uw = gs_dtype_lp(c->wire) ? c->wire : GS_F32;
    rc = gs_update_init(&s->u, c->k, c->n, c->world, sgd, uw, c->scaler, e);
  }
  if (rc == GS_OK) {
    gs_err ke = {0};
    if (c->k->sync(c->k, &ke) != GS_OK)
      rc = GS_FAIL(e, ke.code, "rank %d: allocating the NCCL buffers: %s", c->rank, ke.msg);
  }
  if (rc == GS_OK) rc = init_comm(s, c->bootstrap, e);
  if (rc != GS_OK) {
    if (s->comm) gs_nccl_abort(s);
    free_sync(s);
    return rc;
  }
  *out = &s->base;
  return GS_OK;
}

const gs_backend gs_nccl_backend = {
    .name = "nccl",
    .caps = gs_nccl_caps,
    .asks = gs_allreduce_asks,
    .prepare = nccl_prepare,
    .bootstrap = nccl_bootstrap,
    .open = nccl_open,
    .discard = nccl_discard,
};

/* The module's entry for nccl_proxy.c (nccl.h): in a CUDA build this file
 * lives in libgs_cuda.so (kernels/cuda_loader.h), where gs_nccl_backend
 * above is local; the programs' gs_nccl_backend is the proxy. */
const gs_backend *gs_cudamod_nccl_backend(void) { return &gs_nccl_backend; }
