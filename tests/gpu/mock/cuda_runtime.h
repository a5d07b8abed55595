/* mock/cuda_runtime.h: the part of the CUDA runtime API allreduce/nccl/nccl.c
 * uses, for test_nccl_mock (CPU only). Streams run their work at once (the
 * kernels are the CPU table); events can be told to stay "not ready" for a
 * number of queries, or forever, to drive the backend's wait loops. Names
 * map to mock_ functions so nothing clashes with a real libcudart. */
#ifndef GS_MOCK_CUDA_RUNTIME_H
#define GS_MOCK_CUDA_RUNTIME_H

typedef int cudaError_t;
enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNotReady = 600,
};
typedef struct mock_stream *cudaStream_t;
typedef struct mock_event *cudaEvent_t;
#define cudaEventDisableTiming 2
#define cudaStreamNonBlocking 1

#define cudaGetDeviceCount mock_cudaGetDeviceCount
#define cudaSetDevice mock_cudaSetDevice
#define cudaGetLastError mock_cudaGetLastError
#define cudaGetErrorName mock_cudaGetErrorName
#define cudaGetErrorString mock_cudaGetErrorString
#define cudaEventCreate mock_cudaEventCreate
#define cudaEventCreateWithFlags mock_cudaEventCreateWithFlags
#define cudaEventRecord mock_cudaEventRecord
#define cudaEventQuery mock_cudaEventQuery
#define cudaEventSynchronize mock_cudaEventSynchronize
#define cudaEventElapsedTime mock_cudaEventElapsedTime
#define cudaEventDestroy mock_cudaEventDestroy
#define cudaStreamWaitEvent mock_cudaStreamWaitEvent
#define cudaStreamQuery mock_cudaStreamQuery

cudaError_t mock_cudaGetDeviceCount(int *n);
cudaError_t mock_cudaSetDevice(int dev);
cudaError_t mock_cudaGetLastError(void);
const char *mock_cudaGetErrorName(cudaError_t e);
const char *mock_cudaGetErrorString(cudaError_t e);
cudaError_t mock_cudaEventCreate(cudaEvent_t *ev);
cudaError_t mock_cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags);
cudaError_t mock_cudaEventRecord(cudaEvent_t ev, cudaStream_t s);
cudaError_t mock_cudaEventQuery(cudaEvent_t ev);
cudaError_t mock_cudaEventSynchronize(cudaEvent_t ev);
cudaError_t mock_cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t mock_cudaEventDestroy(cudaEvent_t ev);
cudaError_t mock_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags);
/* "not ready" while mock_events_hang is set, idle otherwise */
cudaError_t mock_cudaStreamQuery(cudaStream_t s);

#endif
