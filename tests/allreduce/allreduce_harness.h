/* allreduce_harness.h: run one body in N forked processes (one rank each), as the
 * launcher would, but without it: ranks exchange endpoints through a shared
 * memory page, report results there, and the parent enforces a deadline
 * (it SIGKILLs every rank still running, so no test can hang).
 *
 * Each rank creates its own ZeroMQ context after the fork; the parent never
 * touches ZeroMQ. Endpoints are ephemeral (tcp://127.0.0.1:*). */
#ifndef GS_TEST_HARNESS_H
#define GS_TEST_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "allreduce/allreduce.h"
#include "tests/check.h"
#include "worker/sync.h"

#define TH_MAX_WORLD 16
#define TH_ROUNDS 32
#define TH_SLOTS 256

typedef struct th_shared {
  int world;
  atomic_int posted[TH_ROUNDS];
  char ep[TH_ROUNDS][TH_MAX_WORLD][GS_ENDPOINT_MAX];
  /* per-rank results the parent (or other ranks, after a barrier) reads */
  uint64_t u64[TH_MAX_WORLD][TH_SLOTS];
  double f64[TH_MAX_WORLD][TH_SLOTS];
  char msg[TH_MAX_WORLD][1024];
  atomic_int barrier[TH_ROUNDS];
  /* filled by the parent */
  double exit_at[TH_MAX_WORLD];   /* gs_now() when the rank exited */
  int status[TH_MAX_WORLD];       /* exit code, 128+signal, or -1 if killed at the deadline */
} th_shared;

typedef int (*th_body)(th_shared *sh, int rank, int world, void *arg);

/* Publish this rank's endpoint for round `round` and wait (up to 20 s) for
 * every rank's; eps[i] points into shared memory. */
int th_exchange(th_shared *sh, int round, int rank, const char *ep, const char *eps[]);
/* Wait until every rank reached barrier `round` (up to 60 s). */
int th_barrier(th_shared *sh, int round);

/* Fork world ranks running body; wait at most deadline_s. If on_start is
 * given the parent calls it with the children's pids once they run (to kill
 * or stop one). Returns the shared page (th_free it); NULL on fork failure. */
th_shared *th_run(int world, th_body body, void *arg, double deadline_s,
                  void (*on_start)(th_shared *sh, const pid_t *pids, void *arg));
void th_free(th_shared *sh);
/* Number of ranks whose status is not 0. */
int th_failures(const th_shared *sh);

uint64_t th_hash(const void *p, size_t n);

/* Run body at every world lo..hi: every rank must succeed, and each publish
 * in u64[rank][0..slots) the same results as rank 0 (slots, > 0, in rank
 * 0's u64[0][TH_SLOTS - 1]). Prints a line per world and one per failure;
 * returns the number of failures. */
int th_worlds_agree(int lo, int hi, th_body body, double deadline_s);

/* The tests' ring: options (loopback, job 0x5eed, fp32, 20 s timeout) for
 * rank of world on kernels k; prepare, exchange endpoints through the
 * shared page (round), connect. */
void th_ring_opts(gs_comm_opts *o, int rank, int world, size_t max_count, gs_kernels *k);
int th_ring_open(th_shared *sh, int round, gs_comm_opts *o, gs_comm **out, gs_err *e);
/* Keep a rank's error in the shared page (and on stderr); returns 1. */
int th_report(th_shared *sh, int rank, const gs_err *e);

/* Test values: small integers whose sum is exact in any order and dtype,
 * different on every rank (salt varies them per case) */
float th_contribution(int rank, size_t i, int salt);
/* splitmix64, and deterministic values in [-1, 1) per (seed, rank, i) */
uint64_t th_mix(uint64_t x);
float th_randf(uint64_t seed, int rank, size_t i);

/* A test's start: SIGPIPE ignored, one-thread CPU kernels (NULL, said on
 * stderr, when they cannot be made). */
gs_kernels *th_start(void);
/* The algorithm of that name in allreduce's table (exits when it has none:
 * the test would test nothing). */
gs_algo th_algo(const char *name);

#endif
