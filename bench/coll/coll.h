/* coll.h: the contract of bench/coll, the collective benchmark: `bench
 * --collective` (collective.c) over its harness, nccl-tests style: the
 * sizes, the timing, the exact check and the table of any collective a
 * backend runs (perf.c, perf_print.c). What a collective is
 * (its name, sizes, bus-bandwidth factor and reference) is its row in
 * allreduce.h (gs_coll_of); how a backend runs it is a gs_coll_fn the
 * caller plugs in (collective.c for `bench --collective`,
 * tests/allreduce/ring_perf.c, the GPU mock tests). The harness knows
 * allreduce.h's rows and kernels.h, nothing of a backend; collective.c
 * starts the backends through bench/job. */
#ifndef GS_BENCH_COLL_H
#define GS_BENCH_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allreduce/allreduce.h"
#include "bench/bench.h"
#include "kernels/kernels.h"

/* One collective over a backend, as gs_coll says (src == dst: in place). */
typedef int (*gs_coll_fn)(void *ctx, const void *src, void *dst, size_t count, int64_t iter,
                          gs_err *e);

/* nccl-tests' -o (kernels.h gs_redop): on the ZeroMQ ring avg is the sum,
 * then on every rank the post-division gs_postdiv_host (fp32 and double:
 * times 1/N; int32: divided by N, truncated, as NCCL's ncclAvg for
 * integers), timed with the collective; on NCCL it is ncclAvg itself
 * (gs_nccl_collective). prod, min and max run in the reduction itself. */
const char *gs_redop_name(gs_redop op);  /* "sum", "avg", "prod", "min", "max" */
int gs_redop_parse(const char *s);       /* -1 if not one of them */
/* nccl-tests' -d names: "float", "half", "bfloat16" (the wire dtypes of
 * fp32 buffers), "double", "int32" (buffers of that type, carried as is) */
const char *gs_perf_type_name(gs_dtype t);
int gs_perf_type_parse(const char *s);   /* -1 if not one of them */

typedef struct gs_perf_opts {
  int rank, world;
  size_t min_bytes, max_bytes;  /* -b, -e */
  double factor;                /* -f (>1); sizes min, min*f, ... <= max */
  int iters, warmup;            /* -n, -w */
  bool check;                   /* -c: exact check of every iteration */
  gs_redop op;                  /* -o */
  /* -d: the dtype the wire carries, which the table counts: a size is
   * count x its bytes, as nccl-tests counts its buffers. Buffers hold fp32
   * under the 16-bit wires (converted at the wire), else the wire's own
   * type (fp32, fp64, int32). The inputs are exact in every type and op. */
  gs_dtype wire;
  /* Where src/dst live: NULL = host memory; a device table = its memory
   * (filled and checked through to_device / to_host, outside the timing;
   * avg's post-division there: fp32 buffers only, else fn_avg). */
  gs_kernels *k;
  /* fn averages itself (-o avg: NCCL's ncclAvg), so nothing divides after
   * it; the check expects NCCL's arithmetic (perf.c). */
  bool fn_avg;
  /* Optional, untimed: called before the first collective on a new
   * (src, dst, count), e.g. to open a backend session for that size. */
  int (*setup)(void *ctx, const void *src, void *dst, size_t count, gs_err *e);
  /* Optional: the algorithm a size runs (a column of the table). */
  const char *(*algo_of)(void *ctx, size_t count);
  gs_coll coll;                 /* what fn runs (0: all_reduce) */
  int root;                     /* -r: broadcast's and reduce's root */
  /* The all-reduce the timings are exchanged through (NULL: fn, which must
   * then be one); setup is called for it as for fn. */
  gs_coll_fn sum;
} gs_perf_opts;

/* One placement's figures (nccl-tests' four columns). */
typedef struct gs_perf_time {
  double time_us;               /* mean per iteration, max over ranks */
  double algbw, busbw;          /* GB/s, 1e9 bytes per second */
  uint64_t wrong;               /* elements that differed, over every rank
                                   (UINT64_MAX: unchecked) */
} gs_perf_time;

typedef struct gs_perf_row {
  size_t bytes, count;          /* bytes: the full vector; count: elements of
                                   the wire dtype per rank, as nccl-tests
                                   prints (the part, for a parted one) */
  gs_perf_time oop, ip;         /* out of place (src != dst), in place */
  const char *algo;             /* what ran (gs_perf_opts.algo_of), or NULL */
} gs_perf_row;

/* Allocate src/dst for max_bytes, and for each size, out of place then in
 * place: warmup, then iters timed collectives back to back, then (check)
 * one more checked against the exact expected result (the inputs are small
 * integers, so every summation order is exact; the check is outside the
 * timed region). The time of a size is the mean over iterations of this
 * rank's time, then the max over ranks (exchanged with fn itself). rows
 * gets one row per size (at most *nrows; *nrows set to the number
 * written). */
int gs_allreduce_perf(gs_coll_fn fn, void *ctx, const gs_perf_opts *o, gs_perf_row *rows,
                      int *nrows, gs_err *e);

/* Number of sizes gs_allreduce_perf will run for o, and the largest count
 * it hands fn (the timing exchange included). */
int gs_perf_sizes(const gs_perf_opts *o);
size_t gs_perf_max_count(const gs_perf_opts *o);

/* Print the table to f (a FILE*) in nccl-tests' layout (perf_print.c):
 * our header lines, its two-line column header, one line per row, and its
 * "Out of bounds values" and "Avg bus bandwidth" lines. */
void gs_perf_print(void *f, const gs_perf_opts *o, const char *title, const gs_perf_row *rows,
                   int nrows);
/* Those two closing figures: the mean busbw over both placements (the
 * return) and the number of results with a wrong value. */
double gs_perf_summary(const gs_perf_row *rows, int nrows, int *errors);

/* ---- `bench --collective` (collective.c) ---- */
struct gs_rank_env;
/* --collective's -o and -d: nccl-tests' names to ours. */
int gs_collective_resolve(gs_opts *o, gs_err *e);
/* Why mode cannot run collective coll (NULL: it can): the sweep skips such
 * pairs of a --collective list. */
const char *gs_collective_skip(const gs_opts *o, int coll, gs_mode mode);
/* The collective benchmark as one rank of a job; an exit code. */
int gs_collective_rank(const gs_opts *o, gs_mode mode, const struct gs_rank_env *env);

#endif
