/* ps_harness.h: drive ps jobs without the launcher, for the ps tests.
 *
 * A job is `world` ranks, each with its own gs_sync, its own CPU kernels
 * table and its own parameter / gradient buffers, run either as threads of
 * the test process or as fork()ed processes. The harness plays the
 * launcher's part: prepare() on every rank, bootstrap() on rank 0, the blob
 * handed to every rank, open(). Gradients are a deterministic function of
 * (seed, rank, step, index), so reference() can recompute the exact update
 * with the same kernel calls the server makes (sum in rank order, average
 * or unscale, finite check, SGD) and the tests compare bits.
 *
 * Results live in a MAP_SHARED mapping so processes can report them:
 * parameters of every rank after open() and after every step, the step
 * stats, each rank's return code, error text and the gs_now() time it
 * failed (CLOCK_MONOTONIC is shared by processes of one host). */
#ifndef GS_TEST_PS_HARNESS_H
#define GS_TEST_PS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "proto/proto.h"
#include "ps/ps.h"
#include "worker/sync.h"
#include "tests/check.h"

#define MAXW 8

typedef struct job_opts {
  int world;
  size_t n;
  gs_bucket *buckets;  /* NULL: plan_buckets(n, bucket_elems) */
  int nbuckets;
  size_t bucket_elems; /* used when buckets is NULL */
  int steps;
  gs_sgd sgd;
  gs_dtype wire;
  gs_scaler scaler;
  bool overlap, dedicated, sum_only;
  int host_ranks;          /* > 1: hosts of this many ranks sum first (cfg.ps_host_ranks;
                              fp32 only in reference()) */
  int ps_servers;          /* > 1: the sharded ps (threads only: the servers' addresses
                              are the ranks' endpoints) */
  gs_ps_sync ps_sync;      /* the consistency model (zero: bsp; reference() is bsp's) */
  /* BytePS' summation servers (threads only): spare servers served by
   * gs_ps_serve_alone in threads of the test, one per workers' host in the
   * ranks (hosts: 0, every rank a host) */
  bool summation;
  int spare, hosts;
  double spare_share;
  size_t partition_bytes, credit_bytes;
  int timeout_ms;
  uint64_t job, seed;
  uint64_t jitter_seed;  /* varies arrival order between runs */
  int jitter_us;         /* up to this long between bucket_ready calls */
  int inf_rank, inf_step;   /* that rank's gradient holds +inf in that step (-1: none) */
  int kill_rank, kill_step, kill_bucket; /* processes: SIGKILL before that bucket_ready */
  bool fake_device;        /* ranks compute on fakedev (a checking fake GPU) */
  int abort_rank, abort_step; /* that rank gives up (close(ok=false)) in that step */
  int odd_rank;             /* this rank plans buckets of odd_bucket_elems (-1: none) */
  size_t odd_bucket_elems;
  float grad_scale;
  gs_span_fn span;         /* given to every rank's config, ctx = &rank_ids[rank] */
  /* run_threads: called with the server's address after bootstrap, before
   * any rank opens (to aim raw sockets at the live server) */
  void (*on_blob)(const char *endpoint, void *ctx);
  void *on_blob_ctx;      /* gradients are uniform in +-grad_scale (times the loss scale) */
  /* run_threads: called with every rank's published endpoint after every
   * prepare, before any rank opens (to change what the ranks learn) */
  void (*on_endpoints)(char (*ep)[GS_ENDPOINT_MAX], int world);
} job_opts;

typedef struct job_result {
  int world, steps;
  size_t n;
  float *params;          /* [(steps + 1) * world * n]: after open, after each step */
  gs_sync_stats *stats;   /* [steps * world] */
  int *steps_done;        /* [world] */
  int rc[MAXW];
  double fail_t[MAXW], kill_t;
  char err[MAXW][1024];
  uint64_t mem_dev[MAXW], mem_host[MAXW];
} job_result;

extern int rank_ids[MAXW];  /* rank_ids[r] == r: span contexts */

void job_defaults(job_opts *o);
/* Buckets of `elems` elements from the end of the buffer backwards (as
 * backward fills them); the first bucket holds the tail. malloc'ed. */
gs_bucket *plan_buckets(size_t n, size_t elems, int *nbuckets);

job_result *result_new(const job_opts *o);
void result_free(job_result *r);
float *result_params(job_result *r, int step_plus_1, int rank);

/* Run the job; 0 when every rank succeeded. */
int run_threads(const job_opts *o, job_result *r);
int run_procs(const job_opts *o, job_result *r);

/* Gradient of rank r at step s (fp32, already multiplied by the loss
 * scale the trainer would use: the scaler's state is tracked by the
 * caller) and the initial parameters of a rank. */
void make_grads(const job_opts *o, int rank, int step, float scale, float *g);
void make_params(const job_opts *o, int rank, float *p);

/* Reference: parameters after every step ([(steps + 1) * n]), whether each
 * step was skipped, the scale each step used. */
void reference(const job_opts *o, float *ref, bool *skipped, float *scales);

/* Bitwise comparison; prints the first difference. */
bool same_bits(const float *a, const float *b, size_t n, const char *what);

/* CHECK every rank after every step of r against reference(); returns the
 * reference (the caller frees it) and fills skipped and scales when given
 * (o->steps entries each). */
float *check_reference(const job_opts *o, job_result *r, const char *what, bool *skipped,
                       float *scales);

/* A Push header for step / bucket / [off, off + cnt) of float32, claiming
 * `rank` of job `job` (for tests that speak to a server by hand). */
void push_env(Gradsync__Envelope *env, Gradsync__Push *p, uint64_t job, uint32_t rank,
              uint64_t step, uint32_t bucket, uint64_t off, uint64_t cnt);
/* env packed and sent on s, then bytes of payload: one Push as a rank
 * sends it */
void push_send(void *s, const Gradsync__Envelope *env, const void *payload, size_t bytes);

/* ---- a real rank 0 and a raw rank 1 (the wire tests: a raw rank speaks
 * to rank 0's in-process server by hand) ---- */

/* Rank 0 of a world of 2: its config (CPU kernels k, fp32, SGD at lr
 * without momentum, a 1.5 s timeout, job JOB, n zero parameters and
 * gradients in nb buckets bk; the caller sets compression) and, after
 * wire_rank0_prepare, the server's address for the raw rank in blob. */
typedef struct wire_rank0 {
  gs_sync_config cfg;
  void *state;
  char ep[GS_ENDPOINT_MAX], blob[GS_BOOTSTRAP_MAX];
  int steps_wanted;
  int rc, steps;
  gs_err e;
} wire_rank0;
void wire_rank0_config(wire_rank0 *z, gs_kernels *k, uint64_t job, size_t n,
                       const gs_bucket *bk, int nb, float lr, int steps);
void wire_rank0_prepare(wire_rank0 *z);
/* Its thread: open, steps_wanted steps that hand every bucket over in
 * order, close; rc, steps and e say how it went. */
void *wire_rank0_main(void *arg);
/* The raw rank 1: a DEALER connected to blob that said Hello for n
 * parameters in nb buckets. */
void *wire_raw_join(void *zctx, const wire_rank0 *z);
/* The end of a case: without a lie (needle NULL) the raw rank says
 * goodbye and rank 0 must have run every step; after a lie at step 1
 * bucket 0, rank 0 must have stopped by step 1 within 1.4 s, its error
 * saying needle and naming rank 1, step 1 and bucket 0, and the raw socket
 * s must get an Error. Then s is closed and rank 0's buffers and kernels
 * freed. what names the case. */
void wire_finish(wire_rank0 *z, pthread_t th, void *s, const char *what, const char *needle);

#endif
