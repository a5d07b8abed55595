/* sync.h: the one interface both synchronization backends implement.
 *
 * The training loop owns ONE flat parameter buffer and ONE flat gradient
 * buffer (on the kernels' device). Gradients are grouped in buckets:
 * contiguous ranges of the flat buffer, planned from the last layer
 * backwards as DDP does (first bucket ~1 MiB, then ~25 MiB, a parameter is
 * never split). One step, seen from the loop:
 *
 *     begin_step(step)
 *     forward; backward, and each time backward has written every gradient
 *     of bucket b:  bucket_ready(b)          (buckets become ready 0,1,2..)
 *     end_step(&stats)   -> returns when this rank's parameters hold the
 *                           step's update (or the step was skipped)
 *
 * What a backend does between those calls is its own business:
 *   ps    pushes gradients to the server (rank 0's thread or a dedicated
 *         process), which sums them in rank order, averages, runs SGD and
 *         sends each bucket's new parameters back;
 *   ring  all-reduces each bucket (sum, then / world) and runs the same SGD
 *         locally on every rank;
 *   nccl  the ring on GPUs;
 *   local world 1 without communication (the single-process reference).
 * With overlap a backend may start a bucket inside bucket_ready (a progress
 * thread), without it bucket_ready only records readiness and the work
 * happens in end_step. The parameters of bucket b may change as soon as
 * bucket_ready(b) returns: backward never reads them again in that step.
 *
 * Contracts every backend keeps (docs/architecture.md):
 *  - equivalence: the update equals one single-process step on the
 *    concatenated batch with the mean loss (up to summation order);
 *  - after end_step all ranks hold bitwise-identical parameters;
 *  - determinism: same inputs, same bits, whatever the timing or overlap;
 *  - mixed precision: gradients leave in cfg.wire; if any reduced gradient
 *    is inf/NaN the step is skipped on EVERY rank and the scaler backs off;
 *  - every wait has cfg.timeout_ms, and an error names the rank, the peer,
 *    the phase, the step and the bucket.
 *
 * Starting a job is not a backend's concern: the launcher (bench/) calls
 * prepare() on every rank, bootstrap() on rank 0, exchanges the endpoints and
 * the blob through its rendezvous, then calls open() with them filled in.
 *
 * The call order and the configuration are checked once for every backend
 * (sync.c: gs_sync_order, gs_sync_check_config), so every backend refuses
 * the same misuse with the same words. The configuration holds what every
 * backend uses; what only one takes is that backend's options (cfg.opts,
 * the struct its header names), and what it runs with them it declares
 * (gs_backend.caps), for the one check of a combination (caps.c). */
#ifndef GS_SYNC_H
#define GS_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compress/compress.h"
#include "kernels/kernels.h"
#include "worker/caps.h"

#define GS_ENDPOINT_MAX 256
#define GS_BOOTSTRAP_MAX 512

/* A view into the flat gradient (and parameter) buffer, in elements. */
typedef struct gs_bucket {
  size_t offset, count;
} gs_bucket;

/* Timeline hook: a span [t0, t1] (gs_now() seconds) on a track of this rank
 * (0: the training thread, 1: a backend's progress / server thread).
 * bucket < 0 when the span is not about one bucket. Must be thread-safe. */
typedef void (*gs_span_fn)(void *ctx, const char *name, int bucket, double t0, double t1,
                           int track);

/* ps ssp/async/backup: the server applied update `version` (1, 2, ...): the
 * gradients of ranks[i]'s step steps[i], computed on version bases[i], summed
 * in that order and averaged over n; params: the count parameters after it
 * (host memory, valid during the call). Called from the server's thread,
 * in order, in the process that holds the server: rank 0, rank 0's
 * dedicated process (forked with the hook and its context), the rank that
 * runs shard k of several (versions, bases and parameters are then that
 * shard's, of its range), or a server's own process: what an apply-order
 * log (worker.h gs_apply_log) records. */
typedef struct gs_applied {
  uint64_t version;
  int n;
  const int *ranks;
  const int64_t *steps;
  const uint64_t *bases;
  const float *params;
  size_t count;
} gs_applied;
typedef void (*gs_applied_fn)(void *ctx, const gs_applied *a);
/* That server served its job to the end (every rank said goodbye): the
 * process that holds it finishes the record (writes the log). An error
 * fails the server, and so the job. */
typedef int (*gs_applied_end_fn)(void *ctx, gs_err *e);
typedef struct gs_applied_hook {
  gs_applied_fn fn;         /* NULL: no hook */
  gs_applied_end_fn end;    /* may be NULL */
  void *ctx;
} gs_applied_hook;

/* What one step cost this rank, filled by end_step. Times are seconds. */
typedef struct gs_sync_stats {
  double wait_s;     /* exposed communication: the loop blocked in the backend */
  double reduce_s;   /* summing / averaging gradients done by this rank */
  double update_s;   /* optimizer done by this rank */
  uint64_t bytes_sent, bytes_recv; /* on the wire, headers included */
  bool skipped;      /* the step was skipped (inf/NaN); parameters unchanged (ps ssp,
                        async, backup: a version it received was a skipped update) */
  int staleness;     /* ps ssp/async/backup: this step's gradient's staleness
                        (updates it missed), -1: dropped (backup); 0 otherwise */
  float scale;       /* loss scale to use for the NEXT step */
  /* A dedicated ps server's share of the step (has_server on rank 0 only). */
  bool has_server;
  double server_reduce_s, server_update_s;
  uint64_t server_bytes_sent, server_bytes_recv;
} gs_sync_stats;

typedef struct gs_sync_config {
  int rank, world;
  int timeout_ms;           /* every wait; the error names who is missing */
  uint64_t job;             /* token every message of this job carries; rank 0
                               knows it from prepare() on, the others only at
                               open() (it comes with the rendezvous) */
  const char *host;         /* address to bind for peers (e.g. "127.0.0.1") */
  gs_cred cred;             /* the job's credential: every data socket
                               admits only peers that hold it */

  /* filled by the launcher after the rendezvous (open() only) */
  const char *const *endpoints;  /* world entries, what prepare() returned */
  const void *bootstrap;         /* what rank 0's bootstrap() produced */
  size_t bootstrap_len;

  /* the model's buffers, on k's device */
  gs_kernels *k;
  float *params, *grads;
  size_t n;
  const gs_bucket *buckets;
  int nbuckets;

  gs_sgd sgd;
  gs_dtype wire;            /* gradient dtype on the wire: F32, F16, BF16 */
  gs_scaler scaler;         /* initial state (scale 1, not dynamic, for fp32) */
  gs_compress compress;     /* what goes over the wire instead of the gradient
                               (compress.h); the zero value is none. fp16 and
                               bf16 are already in wire */
  const gs_compress_tensor *tensors;  /* powersgd: the model's tensors as
                               matrices, covering every bucket */
  int ntensors;
  bool overlap;             /* hand buckets over as backward fills them */
  /* Collective benchmark mode: no optimizer, no averaging. end_step leaves
   * the element-wise SUM over ranks of grads in params (ps: the server sums
   * and every worker pulls; the all-reduce: all-reduce, then copy). Every
   * backend runs it (the single-process one copies). */
  bool sum_only;
  int device;               /* GPU ordinal for the CUDA paths */
  int local_rank, local_world;  /* ranks on this host (NCCL GPU checks, the ring's spin) */

  gs_span_fn span;          /* may be NULL */
  void *span_ctx;

  /* The backend's own options: the struct its header names (ps.h
   * gs_ps_opts, allreduce.h gs_allreduce_opts), read only by it; NULL: its
   * defaults. */
  const void *opts;
} gs_sync_config;

typedef struct gs_sync gs_sync;
typedef struct gs_sync_ops {
  int (*begin_step)(gs_sync *s, int64_t step, gs_err *e);
  int (*bucket_ready)(gs_sync *s, int bucket, gs_err *e);
  int (*end_step)(gs_sync *s, gs_sync_stats *st, gs_err *e);
  /* ok: orderly goodbye to peers; !ok: abort (peers get an error, not a
   * hang). Frees s either way. */
  int (*close)(gs_sync *s, bool ok, gs_err *e);
} gs_sync_ops;

struct gs_sync {
  const gs_sync_ops *ops;
  const char *name;
};

/* A backend, as the launcher sees it. */
typedef struct gs_backend {
  const char *name;  /* "ps", "ring", "nccl", "local": the user's words (--mode), as
                        messages say them */
  /* What it runs with these options of its own (opts: as cfg.opts; NULL
   * its defaults), the words naming the flags that chose them. */
  void (*caps)(const void *opts, gs_caps *out);
  /* What those options ask (the consistency model), with the flags that
   * asked it, into w. May be NULL: they ask nothing of the axes. */
  void (*asks)(const void *opts, gs_want *w);
  /* Every rank, before the rendezvous: bind what peers connect to and write
   * its address to endpoint (may stay ""). *state is handed to open(). */
  int (*prepare)(const gs_sync_config *c, void **state, char endpoint[GS_ENDPOINT_MAX],
                 gs_err *e);
  /* Rank 0 only, after prepare: the blob every rank receives (NCCL unique
   * id, the ps server's address). May be NULL. */
  int (*bootstrap)(void *state, const gs_sync_config *c, void *blob, size_t *len, gs_err *e);
  /* Every rank, after the rendezvous filled endpoints and bootstrap. */
  int (*open)(void *state, const gs_sync_config *c, gs_sync **out, gs_err *e);
  /* Release a prepared state that will not be opened (an error before open). */
  void (*discard)(void *state);
} gs_backend;

/* The call order above, as every backend keeps it: begin_step, then
 * bucket_ready(0), (1), ... each once, then end_step. who names the
 * backend in messages ("ring", "nccl", "ps", "local"). Each call returns
 * GS_EINVAL with a message naming the rank, the step and what was due,
 * and changes nothing then. */
typedef struct gs_sync_order {
  const char *who;
  int rank, nbuckets;
  bool in_step;
  int64_t step;
  int next;                 /* the bucket due next */
} gs_sync_order;
void gs_sync_order_init(gs_sync_order *o, const char *who, int rank, int nbuckets);
int gs_sync_order_begin(gs_sync_order *o, int64_t step, gs_err *e);
int gs_sync_order_ready(gs_sync_order *o, int bucket, gs_err *e);
/* end_step: every bucket was ready; the step is over. */
int gs_sync_order_end(gs_sync_order *o, gs_err *e);

/* What every backend requires of a configuration, checked in prepare()
 * and open(): a rank of the world, a kernels table, model buffers, at
 * least one bucket, every bucket non-empty, inside the n elements and
 * disjoint from the others (an element reduced twice would be summed
 * twice), a wire dtype of fp32, fp16 or bf16 (fp64 and int32 for the
 * collective benchmark's one bucket, sum_only), tensors inside the buffer
 * for PowerSGD; and what be runs with c's options (gs_caps_check). who
 * names the backend in messages ("ring", "nccl", "ps", "local"). What a
 * backend needs beyond that (a device, a blob) it checks itself. */
int gs_sync_check_config(const gs_sync_config *c, const gs_backend *be, const char *who,
                         gs_err *e);
/* What a configuration asks, as a backend sees it: every axis but the
 * compute precision (unknown to it) and the consistency model (its
 * options': gs_backend.asks), with the flags that would have asked it. */
void gs_want_of_config(const gs_sync_config *c, gs_want *w);

/* Bucket plan over parameters given in model order (sizes in elements),
 * DDP's way: walk from the last parameter backwards, close a bucket when it
 * reaches cap bytes (first_cap for the first bucket); never split one
 * parameter. elem_bytes is the gradient dtype's size. Buckets come out in
 * readiness order (bucket 0 holds the last parameters). cap 0: a bucket per
 * parameter, the first too; first_cap 0: the first closes past cap as the
 * others do. *out is malloc'ed. */
int gs_plan_buckets(const size_t *param_sizes, int nparams, size_t elem_bytes,
                    size_t first_cap, size_t cap, gs_bucket **out, int *nbuckets, gs_err *e);

/* The ps backend's BytePS split (ps/split.c), here below both the ps and
 * the cost model (bench/costmodel), which predicts the same bytes: one
 * formula for both. */
/* BytePS' partitions: at most 4 MiB (BytePS' default size) and, by default,
 * at most a 32nd of the gradients, so that a step pipelines at least 32 of
 * them (a partition's answers travel while the next ones are pushed; with
 * 4 MiB partitions of a model of a few MB there would be two or three, and
 * the pushes and answers would take turns); never under 64 KiB. given > 0
 * (--ps-partition-mb): that, as given. */
#define GS_PS_PARTITION_BYTES ((size_t)4 << 20)
static inline size_t gs_ps_partition_bytes(size_t given, double gradient_bytes) {
  if (given) return given;
  double p = gradient_bytes / 32;
  if (p > (double)GS_PS_PARTITION_BYTES) p = (double)GS_PS_PARTITION_BYTES;
  if (p < 65536) p = 65536;
  return (size_t)p;
}

/* BytePS' split (Jiang et al., OSDI 2020) for n workers' hosts and k spare
 * hosts of equal links: a spare server sums 2(n-1)/(n^2+kn-2k) of the
 * parameters, the server on each workers' host (n-k)/(n^2+kn-2k), so that
 * every link carries 2n(n-1)/(n^2+kn-2k) of them each way, the least any
 * placement can (k = 0 is the ring's 2(n-1)/n; k = n is 1). With share > 0
 * (at most 1/k) each spare server sums that share instead and the workers'
 * hosts split the rest evenly. Into *spare and *colo; GS_EINVAL (naming
 * --ps-spare-share) when the numbers do not make a split. */
static inline int gs_ps_spare_shares(int n, int k, double share, double *spare, double *colo) {
  double d = (double)n * n + (double)k * n - 2.0 * k;
  *spare = *colo = 0;
  if (n < 1 || k < 0 || (k > 0 && share > 1.0 / k + 1e-12) || share < 0 || d <= 0) return -1;
  if (share > 0) {
    *spare = k > 0 ? share : 0;
    *colo = (1.0 - k * *spare) / n;
    if (*colo < 1e-12) *colo = 0;
    return 0;
  }
  if (k > n) return -1;
  *spare = k > 0 ? 2.0 * (n - 1) / d : 0;
  *colo = (double)(n - k) / d;
  return 0;
}

#endif
