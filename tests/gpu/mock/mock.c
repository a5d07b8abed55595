/* mock.c: a CPU stand-in for the CUDA runtime, NCCL and the CUDA kernels
 * table's internal API (kernels/cuda/cuda_impl.h), so that
 * allreduce/nccl.c runs in test_nccl_mock on any machine, under ASan too.
 * Work on a stream happens at once; ranks are threads; see nccl.h here for
 * the communicator's behaviour. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_impl.h"
#include "kernels/elem.h"
#include "mock.h"

int mock_device_count = 8;
cudaError_t mock_device_count_error = cudaSuccess;
int mock_event_delay, mock_events_hang, mock_remote_error_after;
int mock_aborts, mock_finalizes, mock_allreduces;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread cudaError_t last_error;

void mock_reset(void) {
  mock_device_count = 8;
  mock_device_count_error = cudaSuccess;
  mock_event_delay = mock_events_hang = mock_remote_error_after = 0;
  mock_aborts = mock_finalizes = mock_allreduces = 0;
}

/* ---- CUDA runtime ---- */

struct mock_stream { int id; };
struct mock_event { double t; int delay, hang; };

cudaError_t mock_cudaGetDeviceCount(int *n) {
  if (mock_device_count_error != cudaSuccess) return last_error = mock_device_count_error;
  *n = mock_device_count;
  return cudaSuccess;
}
cudaError_t mock_cudaSetDevice(int dev) {
  return dev >= 0 && dev < mock_device_count ? cudaSuccess : (last_error = cudaErrorInvalidValue);
}
cudaError_t mock_cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
const char *mock_cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  default: return "cudaErrorInvalidValue";
  }
}
const char *mock_cudaGetErrorString(cudaError_t e) { return "mock CUDA error"; }
cudaError_t mock_cudaEventCreate(cudaEvent_t *ev) {
  *ev = calloc(1, sizeof **ev);
  return *ev ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t mock_cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags) {
  return mock_cudaEventCreate(ev);
}
cudaError_t mock_cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
  if (!ev || !s) return last_error = cudaErrorInvalidValue;
  ev->t = gs_now();
  ev->delay = mock_event_delay;
  ev->hang = mock_events_hang;
  return cudaSuccess;
}
cudaError_t mock_cudaEventQuery(cudaEvent_t ev) {
  if (ev->hang) return last_error = cudaErrorNotReady;
  if (ev->delay > 0) {
    ev->delay--;
    return last_error = cudaErrorNotReady;
  }
  return cudaSuccess;
}
cudaError_t mock_cudaEventSynchronize(cudaEvent_t ev) {
  ev->delay = 0;
  return cudaSuccess;
}
cudaError_t mock_cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = (float)((b->t - a->t) * 1e3);
  return cudaSuccess;
}
cudaError_t mock_cudaEventDestroy(cudaEvent_t ev) {
  free(ev);
  return cudaSuccess;
}
cudaError_t mock_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags) {
  return s && ev ? cudaSuccess : (last_error = cudaErrorInvalidValue);
}

cudaError_t mock_cudaStreamQuery(cudaStream_t s) {
  return mock_events_hang ? (last_error = cudaErrorNotReady) : cudaSuccess;
}

/* ---- the kernels table's internal API ---- */

#define MAX_TABLES 256
static struct reg {
  gs_kernels *k;
  int dev;
  struct mock_stream stream;
  void (*destroy)(gs_kernels *);
} regs[MAX_TABLES];

static struct reg *find(gs_kernels *k) {
  pthread_mutex_lock(&mu);
  struct reg *r = NULL;
  for (int i = 0; i < MAX_TABLES && !r; i++)
    if (regs[i].k == k) r = &regs[i];
  pthread_mutex_unlock(&mu);
  if (!r) abort();  /* a table the mock never made: a test bug */
  return r;
}

static void mock_destroy(gs_kernels *k) {
  struct reg *r = find(k);
  void (*destroy)(gs_kernels *) = r->destroy;
  pthread_mutex_lock(&mu);
  r->k = NULL;
  pthread_mutex_unlock(&mu);
  destroy(k);
}

gs_kernels *mock_gpu_table(int dev) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  if (!k) abort();
  k->name = "mock-cuda";
  k->device = GS_DEV_CUDA;
  pthread_mutex_lock(&mu);
  int i = 0;
  while (i < MAX_TABLES && regs[i].k) i++;
  if (i == MAX_TABLES) abort();
  regs[i].k = k;
  regs[i].dev = dev;
  regs[i].stream.id = i;
  regs[i].destroy = k->destroy;
  pthread_mutex_unlock(&mu);
  k->destroy = mock_destroy;
  return k;
}

cudaStream_t gs_cuda_stream(gs_kernels *k) { return &find(k)->stream; }
int gs_cuda_device(gs_kernels *k) { return find(k)->dev; }
gs_kernels *gs_cuda_fork(gs_kernels *k, gs_err *e) { return mock_gpu_table(find(k)->dev); }
int gs_cuda_stream_wait(gs_kernels *waiter, gs_kernels *producer, gs_err *e) { return GS_OK; }
void gs_cuda_mem(gs_kernels *k, size_t *now, size_t *peak) {
  if (now) *now = 0;
  if (peak) *peak = 0;
}
int gs_cuda_fail(cudaError_t rc, gs_err *e, const char *what) {
  if (rc == cudaSuccess) return GS_OK;
  return GS_FAIL(e, GS_EDEVICE, "%s: %s", what, mock_cudaGetErrorName(rc));
}

/* ---- NCCL ---- */

#define MAX_GROUPS 64
#define MAX_RANKS 16
struct group {
  int used, world, joined, refs;
  int arrived;
  unsigned gen;
  const void *send[MAX_RANKS];
  void *recv[MAX_RANKS];
  pthread_cond_t cv;
};
static struct group groups[MAX_GROUPS];

struct mock_comm {
  struct group *g;
  int rank, first_call, finalizing, allreduces;
};

ncclResult_t mock_ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  pthread_mutex_lock(&mu);
  int i = 0;
  while (i < MAX_GROUPS && groups[i].used) i++;
  if (i == MAX_GROUPS) {
    pthread_mutex_unlock(&mu);
    return ncclInternalError;
  }
  memset(&groups[i], 0, sizeof groups[i]);
  groups[i].used = 1;
  pthread_cond_init(&groups[i].cv, NULL);
  pthread_mutex_unlock(&mu);
  id->internal[0] = (char)(i + 1);
  return ncclSuccess;
}

ncclResult_t mock_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                         ncclConfig_t *config) {
  int i = id.internal[0] - 1;
  if (i < 0 || i >= MAX_GROUPS || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  struct mock_comm *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  pthread_mutex_lock(&mu);
  struct group *g = &groups[i];
  if (!g->used || (g->world && g->world != nranks)) {
    pthread_mutex_unlock(&mu);
    free(c);
    return ncclInvalidUsage;
  }
  g->world = nranks;
  g->joined++;
  g->refs++;
  pthread_mutex_unlock(&mu);
  c->g = g;
  c->rank = rank;
  c->first_call = 1;
  *comm = c;
  return config->blocking ? ncclInvalidUsage : ncclInProgress;  /* the backend must ask 0 */
}

ncclResult_t mock_ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err) {
  pthread_mutex_lock(&mu);
  int complete = c->g->joined == c->g->world;
  pthread_mutex_unlock(&mu);
  if (!complete) *err = ncclInProgress;
  else if (mock_remote_error_after && c->allreduces >= mock_remote_error_after)
    *err = ncclRemoteError;
  else if (c->finalizing == 1) {
    c->finalizing = 2;
    *err = ncclInProgress;
  } else
    *err = ncclSuccess;
  return ncclSuccess;
}

static float load(ncclDataType_t t, const void *p, size_t i) {
  if (t == ncclFloat16) return gs_f16_to_f32(((const uint16_t *)p)[i]);
  if (t == ncclBfloat16) return gs_bf16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}
static void store(ncclDataType_t t, void *p, size_t i, float v) {
  if (t == ncclFloat16) ((uint16_t *)p)[i] = gs_f32_to_f16(v);
  else if (t == ncclBfloat16) ((uint16_t *)p)[i] = gs_f32_to_bf16(v);
  else ((float *)p)[i] = v;
}

ncclResult_t mock_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                                ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  if (op != ncclSum || !s) return ncclInvalidArgument;
  struct group *g = c->g;
  pthread_mutex_lock(&mu);
  mock_allreduces++;
  g->send[c->rank] = send;
  g->recv[c->rank] = recv;
  unsigned gen = g->gen;
  if (++g->arrived == g->world) {
    /* everyone is blocked here: sum in rank order, round once, write all */
    float *acc = calloc(count ? count : 1, sizeof *acc);
    if (!acc) abort();
    for (int r = 0; r < g->world; r++)
      for (size_t i = 0; i < count; i++) acc[i] += load(t, g->send[r], i);
    for (int r = 0; r < g->world; r++)
      for (size_t i = 0; i < count; i++) store(t, g->recv[r], i, acc[i]);
    free(acc);
    g->arrived = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv);
  } else {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 20;
    while (g->gen == gen)
      if (pthread_cond_timedwait(&g->cv, &mu, &dl)) {
        pthread_mutex_unlock(&mu);
        return ncclSystemError;  /* a rank never came: fail instead of hanging the test */
      }
  }
  pthread_mutex_unlock(&mu);
  c->allreduces++;
  if (c->first_call) {
    c->first_call = 0;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t mock_ncclCommFinalize(ncclComm_t c) {
  pthread_mutex_lock(&mu);
  mock_finalizes++;
  pthread_mutex_unlock(&mu);
  c->finalizing = 1;
  return ncclInProgress;
}

static void release(ncclComm_t c) {
  pthread_mutex_lock(&mu);
  if (--c->g->refs == 0) {
    pthread_cond_destroy(&c->g->cv);
    c->g->used = 0;
  }
  pthread_mutex_unlock(&mu);
  free(c);
}

ncclResult_t mock_ncclCommDestroy(ncclComm_t c) {
  if (c->finalizing != 2) abort();  /* destroy before finalize completed: a backend bug */
  release(c);
  return ncclSuccess;
}

ncclResult_t mock_ncclCommAbort(ncclComm_t c) {
  pthread_mutex_lock(&mu);
  mock_aborts++;
  pthread_mutex_unlock(&mu);
  release(c);
  return ncclSuccess;
}

const char *mock_ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  case ncclSystemError: return "unhandled system error";
  default: return "mock NCCL error";
  }
}
const char *mock_ncclGetLastError(ncclComm_t comm) { return "mock: see the test"; }
