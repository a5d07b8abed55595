/* topk_gather.h: internal to allreduce/: top-k with error feedback in the
 * ring (--compress topk:FRACTION, compress.h), for allreduce/backend.c.
 *
 * Sparse vectors cannot be summed on the way round a ring (two ranks'
 * kept indices differ), so a bucket's exchange is an all-gather: every
 * rank selects its k = ceil(FRACTION x n) largest entries of gradient +
 * residual (compress/topk.c: k u32 indices then k f32 values, or the
 * dense bucket where that is not smaller), the ring gathers the N
 * payloads (N - 1 payloads through every link, against 2(N-1)/N of the
 * dense bucket for the all-reduce: f x N x 2 as many bytes, so it pays for
 * f x N below about a half), and every rank sums them densely in rank
 * order 0, 1, ..., N-1, as the ps server sums top-k pushes: the same bits
 * on every rank, and the ps' bits. */
#ifndef GS_TOPK_GATHER_H
#define GS_TOPK_GATHER_H

#include "allreduce/allreduce.h"

typedef struct gs_topk_gather gs_topk_gather;

/* Floats the all-gather of c's largest bucket takes (the ring's
 * max_count must hold it). */
size_t gs_topk_gather_count(const gs_sync_config *c);
/* The residual (zero) and buffers for c's buckets. */
int gs_topk_gather_create(const gs_sync_config *c, gs_topk_gather **out, gs_err *e);
void gs_topk_gather_destroy(gs_topk_gather *t);
/* Bucket b of step `step` of grads (host memory): its exchange; on return
 * the bucket holds the sum over ranks of what each kept, as an all-reduce
 * would leave it. k: the ring thread's CPU table (the sum); the time of
 * the selection and the sum is added to st->reduce_s. */
int gs_topk_gather_bucket(gs_topk_gather *t, gs_comm *comm, gs_kernels *k, float *grads, int b,
                        int64_t step, gs_comm_stats *st, gs_err *e);

#endif
