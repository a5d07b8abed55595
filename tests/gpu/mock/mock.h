/* mock/mock.h: the knobs of the CUDA / NCCL mock (see cuda_runtime.h and
 * nccl.h here) and its stand-in for a CUDA kernels table. Set the knobs
 * before starting rank threads; they are read, not written, meanwhile. */
#ifndef GS_MOCK_H
#define GS_MOCK_H

#include "cuda_runtime.h"
#include "kernels/kernels.h"
#include "nccl.h"

extern int mock_device_count;              /* what cudaGetDeviceCount reports (8) */
extern cudaError_t mock_device_count_error;  /* or this error (cudaSuccess) */
extern int mock_event_delay;               /* "not ready" answers per recorded event (0) */
extern int mock_events_hang;               /* events recorded now never complete (0) */
extern int mock_remote_error_after;        /* ncclRemoteError once a comm did this many
                                              collectives (0: never) */

/* Counters, read after the rank threads are joined. */
extern int mock_aborts, mock_finalizes, mock_allreduces;
/* Calls per collective, in allreduce.h's gs_coll order (all ranks). */
extern int mock_colls[5];

/* A CPU kernels table that says it is CUDA device dev (its memory is host
 * memory); gs_cuda_stream / gs_cuda_fork / ... of cuda_impl.h accept it. */
gs_kernels *mock_gpu_table(int dev);
/* Clear the counters and knobs. */
void mock_reset(void);
/* Rank 0's bootstrap blob of the NCCL backend (its unique id), as a
 * launcher passes it to every rank; exits the test if it cannot. */
void mock_nccl_blob(unsigned char *blob, size_t *len);

#endif
