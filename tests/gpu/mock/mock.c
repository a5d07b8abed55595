/* mock.c: a CPU stand-in for the CUDA runtime, NCCL and the CUDA kernels
 * table's internal API (kernels/cuda/cuda_impl.h), so that
 * allreduce/nccl/nccl.c runs in test_nccl_mock on any machine, under ASan too.
 * Work on a stream happens at once; ranks are threads; see nccl.h here for
 * the communicator's behaviour. */
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allreduce/allreduce.h"
#include "kernels/cuda/cuda_impl.h"
#include "kernels/elem.h"
#include "mock.h"

int mock_device_count = 8;
cudaError_t mock_device_count_error = cudaSuccess;
int mock_event_delay, mock_events_hang, mock_remote_error_after;
int mock_aborts, mock_finalizes, mock_allreduces;
int mock_colls[5];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread cudaError_t last_error;

void mock_reset(void) {
  mock_device_count = 8;
  mock_device_count_error = cudaSuccess;
  mock_event_delay = mock_events_hang = mock_remote_error_after = 0;
  mock_aborts = mock_finalizes = mock_allreduces = 0;
  memset(mock_colls, 0, sizeof mock_colls);
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
/* the collectives, in allreduce.h's gs_coll order */
enum { K_ALL_REDUCE, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST, K_REDUCE };

/* One call as a rank made it; every rank must make the same. */
struct call {
  int kind, type, op, root;
  size_t count;  /* NCCL's count argument: per rank for reduce-scatter / all-gather */
};

struct group {
  int used, world, joined, refs;
  int arrived, mismatch;
  unsigned gen;
  struct call call;  /* the first arriver's */
  ncclResult_t result;  /* of the last completed collective */
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

static size_t type_size(int t) {
  return t == ncclFloat16 || t == ncclBfloat16 ? 2 : t == ncclFloat64 ? 8 : 4;
}
static bool valid_type(int t) {
  return t == ncclInt32 || t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 ||
         t == ncclBfloat16;
}
/* fp16 / bf16 element i as float, and a float rounded into one */
static float load16(int t, const void *p, size_t i) {
  uint16_t v;
  memcpy(&v, (const char *)p + 2 * i, 2);
  return t == ncclFloat16 ? gs_f16_to_f32(v) : gs_bf16_to_f32(v);
}
static float round16(int t, float x) {
  return t == ncclFloat16 ? gs_f16_to_f32(gs_f32_to_f16(x)) : gs_bf16_to_f32(gs_f32_to_bf16(x));
}

#define REDUCE_AS(T, load, term)                                                 \
  do {                                                                           \
    T acc = 0;                                                                   \
    for (int r = 0; r < N; r++) {                                                \
      T x = load;                                                                \
      if (op == ncclAvg) x = term;                                               \
      if (r == 0) acc = x;                                                       \
      else if (op == ncclSum || op == ncclAvg) acc = acc + x;                    \
      else if (op == ncclProd) acc = acc * x;                                    \
      else if (op == ncclMin) acc = x < acc ? x : acc;                           \
      else acc = x > acc ? x : acc;                                              \
    }                                                                            \
    res = acc;                                                                   \
  } while (0)

/* out[oi] = the op over ranks (rank order) of element si of every send */
static void reduce_at(const struct group *g, size_t si, void *out, size_t oi) {
  const int N = g->world, op = g->call.op, t = g->call.type;
  char *o = (char *)out + oi * type_size(t);
  if (t == ncclInt32) {
    /* unsigned: wraps modulo 2^32 (NCCL's), never C's signed overflow */
    uint32_t acc = 0;
    for (int r = 0; r < N; r++) {
      int32_t x;
      memcpy(&x, (const char *)g->send[r] + si * 4, 4);
      int32_t a;
      memcpy(&a, &acc, 4);
      if (r == 0) acc = (uint32_t)x;
      else if (op == ncclSum || op == ncclAvg) acc += (uint32_t)x;
      else if (op == ncclProd) acc *= (uint32_t)x;
      else if (op == ncclMin) acc = x < a ? (uint32_t)x : acc;
      else acc = x > a ? (uint32_t)x : acc;
    }
    int32_t v;
    memcpy(&v, &acc, 4);
    if (op == ncclAvg) v /= N;  /* FuncSumPostDiv: the sum, then a truncating division */
    memcpy(o, &v, 4);
  } else if (t == ncclFloat64) {
    double res, f = 1.0 / N, x0;
    REDUCE_AS(double, (memcpy(&x0, (const char *)g->send[r] + si * 8, 8), x0), x * f);
    memcpy(o, &res, 8);
  } else if (t == ncclFloat32) {
    float res, f = (float)(1.0 / N), x0;
    REDUCE_AS(float, (memcpy(&x0, (const char *)g->send[r] + si * 4, 4), x0), x * f);
    memcpy(o, &res, 4);
  } else {
    float res, f = round16(t, (float)(1.0 / N));
    REDUCE_AS(float, load16(t, g->send[r], si), round16(t, x * f));
    uint16_t v = t == ncclFloat16 ? gs_f32_to_f16(res) : gs_f32_to_bf16(res);
    memcpy(o, &v, 2);
  }
}

/* Everyone has arrived with the same call: compute every rank's output
 * into scratch first (buffers may alias: in place), then write them. */
static void compute(struct group *g) {
  const struct call *k = &g->call;
  const int N = g->world;
  const size_t es = type_size(k->type), n = k->count;
  size_t out_n = k->kind == K_ALL_GATHER ? n * (size_t)N : n;
  char *tmp[MAX_RANKS] = {0};
  for (int q = 0; q < N; q++) {
    tmp[q] = malloc(out_n * es + 1);
    if (!tmp[q]) abort();
    for (size_t i = 0; i < out_n; i++) {
      switch (k->kind) {
      case K_ALL_REDUCE:
      case K_REDUCE: reduce_at(g, i, tmp[q], i); break;
      case K_REDUCE_SCATTER: reduce_at(g, (size_t)q * n + i, tmp[q], i); break;
      case K_ALL_GATHER:
        memcpy(tmp[q] + i * es, (const char *)g->send[i / n] + (i % n) * es, es);
        break;
      case K_BROADCAST: memcpy(tmp[q] + i * es, (const char *)g->send[k->root] + i * es, es); break;
      }
    }
  }
  for (int q = 0; q < N; q++) {
    if (k->kind != K_REDUCE || q == k->root) memcpy(g->recv[q], tmp[q], out_n * es);
    free(tmp[q]);
  }
}

static ncclResult_t collective(struct call k, const void *send, void *recv, ncclComm_t c,
                               cudaStream_t s) {
  struct group *g = c->g;
  bool reduces = k.kind != K_ALL_GATHER && k.kind != K_BROADCAST;
  if (!s || !valid_type(k.type) || (reduces && (k.op < ncclSum || k.op > ncclAvg)) ||
      k.root < 0 || k.root >= g->world || (k.count && (!send || !recv)))
    return ncclInvalidArgument;
  pthread_mutex_lock(&mu);
  if (k.kind == K_ALL_REDUCE) mock_allreduces++;
  mock_colls[k.kind]++;
  if (g->arrived == 0) {
    g->call = k;
    g->mismatch = 0;
  } else if (memcmp(&g->call, &k, sizeof k)) {
    g->mismatch = 1;
  }
  g->send[c->rank] = send;
  g->recv[c->rank] = recv;
  unsigned gen = g->gen;
  if (++g->arrived == g->world) {
    /* everyone is blocked here */
    if (!g->mismatch) compute(g);
    g->result = g->mismatch ? ncclInvalidUsage : ncclSuccess;
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
  ncclResult_t res = g->result;
  pthread_mutex_unlock(&mu);
  if (res != ncclSuccess) return res;
  c->allreduces++;
  if (c->first_call) {
    c->first_call = 0;
    return ncclInProgress;
  }
  return ncclSuccess;
}

/* root 0 and op sum where a call has none, so that the calls compare */
static struct call mk(int kind, size_t count, ncclDataType_t t, int op, int root) {
  struct call k;
  memset(&k, 0, sizeof k);  /* padding too: calls are compared with memcmp */
  k.kind = kind;
  k.count = count;
  k.type = (int)t;
  k.op = op;
  k.root = root;
  return k;
}

ncclResult_t mock_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                                ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  return collective(mk(K_ALL_REDUCE, count, t, (int)op, 0), send, recv, c, s);
}
ncclResult_t mock_ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                    ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                                    cudaStream_t s) {
  return collective(mk(K_REDUCE_SCATTER, recvcount, t, (int)op, 0), send, recv, c, s);
}
ncclResult_t mock_ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t,
                                ncclComm_t c, cudaStream_t s) {
  return collective(mk(K_ALL_GATHER, sendcount, t, ncclSum, 0), send, recv, c, s);
}
ncclResult_t mock_ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t,
                                int root, ncclComm_t c, cudaStream_t s) {
  return collective(mk(K_BROADCAST, count, t, ncclSum, root), send, recv, c, s);
}
ncclResult_t mock_ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                             ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t s) {
  return collective(mk(K_REDUCE, count, t, (int)op, root), send, recv, c, s);
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
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  default: return "mock NCCL error";
  }
}
const char *mock_ncclGetLastError(ncclComm_t comm) { return "mock: see the test"; }

void mock_nccl_blob(unsigned char *blob, size_t *len) {
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  gs_err e = {0};
  if (gs_nccl_backend.bootstrap(NULL, &c, blob, len, &e)) {
    fprintf(stderr, "bootstrap: %s\n", e.msg);
    exit(1);
  }
}
