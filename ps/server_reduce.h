/* server_reduce.h: internal to ps/: the server's reduction, without sockets.
 *
 * Pushes arrive as ZeroMQ messages (zmq_msg_t) in any order; bucket b's
 * sum adds them in rank order 0, 1, ..., world-1 whatever the arrival
 * order (the same bits every run), straight out of the messages: a push
 * that arrives early waits in its slot (moved, not copied) until every
 * lower rank's is in. The first push of a bucket is adopted as the sum
 * where it can be (fp32 on the CPU, a buffer of ZeroMQ's own): the others
 * are added into it in place, so the master needs no accumulator and
 * copies nothing.
 *
 *   bucket b:  next = 2, sum = rank 0's buffer + r1    waiting: rank 3
 *   rank 2 arrives ->  sum += r2;  sum += r3;  next = 4 = world: complete
 *
 * With pair_start, rank 0's push is its own gradient buffer handed over
 * inproc (the server beside rank 0): the sum starts from rank 1's push
 * with rank 0's added to it. fp32 addition is commutative, so r1 + r0 has
 * the bits of r0 + r1 (NaN payloads aside), and rank 1's buffer can be
 * adopted. Messages are zmq_msg_t only: a test can build them with
 * zmq_msg_init_data and drive the reduction without any socket. */
#ifndef GS_PS_REDUCE_H
#define GS_PS_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "worker/sync.h"

typedef struct gs_ps_reduce_cfg {
  gs_kernels *k;             /* the server's table (the sums live on its device) */
  int world, nb;
  const size_t *off, *cnt;   /* bucket b = [off[b], off[b] + cnt[b]) of n parameters */
  size_t n;
  gs_dtype wire;             /* the pushes' dtype; sums are fp32 */
  bool inproc;               /* a rank beside the server pushes its own gradient
                                buffer (inproc): never adopted */
  int inproc_rank;           /* that rank */
  bool pair_start;           /* inproc_rank 0: sums start from rank 1 + rank 0 (see
                                above) */
  gs_span_fn span;           /* "reduce" spans on track 1; may be NULL */
  void *span_ctx;
} gs_ps_reduce_cfg;

typedef struct gs_ps_reduce gs_ps_reduce;

int gs_ps_reduce_create(const gs_ps_reduce_cfg *c, gs_ps_reduce **out, gs_err *e);
void gs_ps_reduce_destroy(gs_ps_reduce *r);

/* Rank's push of bucket b (its bytes already checked: cnt[b] elements of
 * the wire dtype); msg is moved in. Adds what rank order allows; *done
 * when bucket b's sum now holds every rank's push. *reduce_s grows by the
 * time spent adding. The caller makes sure nothing it sent still points
 * at bucket b's previous sum (gs_ps_reduce_sum) before pushing into it. */
int gs_ps_reduce_push(gs_ps_reduce *r, int rank, int b, zmq_msg_t *msg, bool *done,
                      double *reduce_s, gs_err *e);
/* Bucket b's fp32 sum (cnt[b] floats on the device), valid until the
 * bucket's next push or gs_ps_reduce_release. */
float *gs_ps_reduce_sum(gs_ps_reduce *r, int b);
/* The caller is done with bucket b's sum: an adopted message goes back. */
void gs_ps_reduce_release(gs_ps_reduce *r, int b);
/* A new round: every bucket starts from rank 0 again. */
void gs_ps_reduce_round(gs_ps_reduce *r);
/* Bytes: device memory of the reduction (accumulator, staging), and the
 * peak of pushes held in ZeroMQ's buffers (waiting, or adopted). Safe from
 * another thread. */
void gs_ps_reduce_bytes(gs_ps_reduce *r, uint64_t *device, uint64_t *held_peak);

#endif
