/* mock/nccl.h: the NCCL API allreduce/nccl/nccl.c and nccl_coll.c use, for
 * test_nccl_mock and test_nccl_coll_mock: ranks are threads of one
 * process; a communicator is complete once all ranks joined (until then
 * ncclCommGetAsyncError says ncclInProgress, so a missing rank looks
 * exactly like a real one that never starts); a collective waits for every
 * rank and computes on the CPU, in rank order: fp32 and fp64 in their own
 * type, each step rounded; fp16 and bf16 in float, rounded once to the
 * type at the end; int32 wrapping modulo 2^32 as NCCL does. ncclAvg is
 * NCCL's: integers sum, then divide by N truncated; floating types
 * multiply each contribution by 1/N (rounded to the type) and sum. Every
 * rank must make the same call (kind, count, type, op, root), else all get
 * ncclInvalidUsage; bad arguments are ncclInvalidArgument at once. The
 * first collective of a communicator returns ncclInProgress, as NCCL's
 * lazy connection setup may in non-blocking mode. */
#ifndef GS_MOCK_NCCL_H
#define GS_MOCK_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h"

typedef struct mock_comm *ncclComm_t;
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum {
  ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef struct { int blocking; } ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1}

#define ncclGetUniqueId mock_ncclGetUniqueId
#define ncclCommInitRankConfig mock_ncclCommInitRankConfig
#define ncclCommGetAsyncError mock_ncclCommGetAsyncError
#define ncclAllReduce mock_ncclAllReduce
#define ncclReduceScatter mock_ncclReduceScatter
#define ncclAllGather mock_ncclAllGather
#define ncclBroadcast mock_ncclBroadcast
#define ncclReduce mock_ncclReduce
#define ncclCommFinalize mock_ncclCommFinalize
#define ncclCommDestroy mock_ncclCommDestroy
#define ncclCommAbort mock_ncclCommAbort
#define ncclGetErrorString mock_ncclGetErrorString
#define ncclGetLastError mock_ncclGetLastError

ncclResult_t mock_ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t mock_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                         ncclConfig_t *config);
ncclResult_t mock_ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err);
ncclResult_t mock_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t s);
ncclResult_t mock_ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                    ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                                    cudaStream_t s);
ncclResult_t mock_ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t,
                                ncclComm_t comm, cudaStream_t s);
ncclResult_t mock_ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t,
                                int root, ncclComm_t comm, cudaStream_t s);
ncclResult_t mock_ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                             ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s);
ncclResult_t mock_ncclCommFinalize(ncclComm_t comm);
ncclResult_t mock_ncclCommDestroy(ncclComm_t comm);
ncclResult_t mock_ncclCommAbort(ncclComm_t comm);
const char *mock_ncclGetErrorString(ncclResult_t r);
const char *mock_ncclGetLastError(ncclComm_t comm);

#endif
