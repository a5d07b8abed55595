/* mock/nccl.h: the NCCL API allreduce/nccl.c uses, for test_nccl_mock:
 * ranks are threads of one process; a communicator is complete once all
 * ranks joined (until then ncclCommGetAsyncError says ncclInProgress, so a
 * missing rank looks exactly like a real one that never starts); an
 * all-reduce waits for every rank, sums in float in rank order and rounds
 * once to the wire type. The first all-reduce of a communicator returns
 * ncclInProgress, as NCCL's lazy connection setup may in non-blocking mode. */
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
typedef enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclAvg = 4 } ncclRedOp_t;
typedef struct { int blocking; } ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1}

#define ncclGetUniqueId mock_ncclGetUniqueId
#define ncclCommInitRankConfig mock_ncclCommInitRankConfig
#define ncclCommGetAsyncError mock_ncclCommGetAsyncError
#define ncclAllReduce mock_ncclAllReduce
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
ncclResult_t mock_ncclCommFinalize(ncclComm_t comm);
ncclResult_t mock_ncclCommDestroy(ncclComm_t comm);
ncclResult_t mock_ncclCommAbort(ncclComm_t comm);
const char *mock_ncclGetErrorString(ncclResult_t r);
const char *mock_ncclGetLastError(ncclComm_t comm);

#endif
