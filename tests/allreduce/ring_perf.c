/* ring_perf.c: the ZeroMQ ring's collective benchmark on one host, as
 * nccl-tests' all_reduce_perf: N forked ranks on loopback TCP, sizes from
 * -b to -e by factor -f, -n timed iterations after -w warm-up ones, every
 * iteration checked against the exact sum (gs_allreduce_perf).
 *
 *   ring_perf -N 2 -b 8 -e 256M -f 2 -n 20 -w 5 [--wire fp16] [--chunk 1M]
 *             [--small 16K|never] [--inflight 2] [--io-threads 1] [--sockbuf 4M]
 *             [--host A] [--bind core|none]
 *
 * --bind core (the default while there are no more ranks than cores, as
 * mpirun's) pins rank r and its ZeroMQ thread to core r.
 *
 * Built, not a test: bench --collective allreduce is the user's command;
 * this is the ring alone, for tuning and for bench/peers comparisons. */
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "bench/coll/coll.h"
#include "allreduce_harness.h"

typedef struct args {
  gs_perf_opts p;
  size_t chunk, small;
  int io_threads, sockbuf, timeout_ms, inflight;
  const char *host;
  gs_dtype wire;
  int bind, ncpu;
} args;

static size_t parse_size(const char *s) {
  if (!strcmp(s, "never")) return GS_COMM_NO_SMALL;
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
  case 'k': case 'K': v *= 1024; break;
  case 'm': case 'M': v *= 1024 * 1024; break;
  case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
  default: break;
  }
  return (size_t)v;
}

typedef struct ctx {
  gs_comm *r;
} ctx;

static int coll(void *c, const void *src, void *dst, size_t count, int64_t iter, gs_err *e) {
  return gs_comm_allreduce(((ctx *)c)->r, src, dst, count, iter, 0, NULL, e);
}

static int body(th_shared *sh, int rank, int world, void *arg) {
  const args *a = arg;
  if (a->bind) { /* as mpirun --bind-to core; threads made later inherit it */
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(rank % a->ncpu, &cs);
    if (sched_setaffinity(0, sizeof cs, &cs) < 0) perror("ring_perf: sched_setaffinity");
  }
  gs_kernels *k = gs_kernels_cpu(0, NULL);
  gs_err e = {0};
  gs_comm_opts o = {
    .rank = rank, .world = world, .timeout_ms = a->timeout_ms, .job = 0xbe7c4,
    .host = a->host, .k = k, .wire = a->wire,
    .chunk_bytes = a->chunk, .small_bytes = a->small, .io_threads = a->io_threads,
    .sockbuf = a->sockbuf, .inflight = a->inflight, .local_ranks = world,
  };
  gs_perf_opts p = a->p;
  p.rank = rank;
  p.world = world;
  o.max_count = gs_perf_max_count(&p);
  ctx c = {0};
  char ep[GS_ENDPOINT_MAX];
  const char *eps[TH_MAX_WORLD];
  int rc = gs_comm_prepare(&o, &c.r, ep, &e);
  if (rc == 0 && th_exchange(sh, 0, rank, ep, eps) < 0)
    rc = GS_FAIL(&e, GS_ETIMEOUT, "endpoint exchange timed out");
  if (rc == 0) rc = gs_comm_connect(c.r, eps, &e);
  int cap = gs_perf_sizes(&p), n = cap;
  gs_perf_row *rows = calloc((size_t)(cap > 0 ? cap : 1), sizeof *rows);
  if (rc == 0) rc = gs_allreduce_perf(coll, &c, &p, rows, &n, &e);
  if (rc < 0) {
    fprintf(stderr, "ring_perf: rank %d: %s\n", rank, e.msg);
  } else if (rank == 0) {
    char title[160];
    snprintf(title, sizeof title, "gradsync ring over ZeroMQ/TCP (%s wire, chunk %zu B, "
             "small <= %zu B)", gs_dtype_name(a->wire), gs_comm_chunk_bytes(c.r),
             gs_comm_small_bytes(c.r) == GS_COMM_NO_SMALL ? 0 : gs_comm_small_bytes(c.r));
    gs_perf_print(stdout, &p, title, rows, n);
  }
  bool wrong = false;
  for (int i = 0; i < n && p.check; i++) wrong |= rows[i].oop.wrong || rows[i].ip.wrong;
  gs_comm_close(c.r, rc == 0, NULL);
  free(rows);
  k->destroy(k);
  return rc < 0 || wrong;
}

int main(int argc, char **argv) {
  args a = {
    .p = {.min_bytes = 8, .max_bytes = 256u << 20, .factor = 2, .iters = 20, .warmup = 5,
          .check = true},
    .timeout_ms = 30000, .host = "127.0.0.1", .wire = GS_F32, .bind = -1,
  };
  int world = 2;
  gs_comm_tune_malloc(); /* as bench does */
  static const struct option lo[] = {
    {"wire", 1, 0, 'W'}, {"chunk", 1, 0, 'C'}, {"small", 1, 0, 'S'}, {"io-threads", 1, 0, 'I'},
    {"sockbuf", 1, 0, 'B'}, {"host", 1, 0, 'H'}, {"timeout", 1, 0, 'T'}, {"bind", 1, 0, 'P'},
    {"inflight", 1, 0, 'F'}, {"help", 0, 0, 'h'},
    {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "N:b:e:f:n:w:c:h", lo, NULL)) != -1) {
    switch (ch) {
    case 'N': world = atoi(optarg); break;
    case 'b': a.p.min_bytes = parse_size(optarg); break;
    case 'e': a.p.max_bytes = parse_size(optarg); break;
    case 'f': a.p.factor = atof(optarg); break;
    case 'n': a.p.iters = atoi(optarg); break;
    case 'w': a.p.warmup = atoi(optarg); break;
    case 'c': a.p.check = atoi(optarg) != 0; break;
    case 'W': {
      int t = gs_dtype_parse(optarg);
      if (t < 0) {
        fprintf(stderr, "ring_perf: --wire %s: use fp32, fp16 or bf16\n", optarg);
        return 2;
      }
      a.wire = (gs_dtype)t;
      break;
    }
    case 'C': a.chunk = parse_size(optarg); break;
    case 'S': a.small = parse_size(optarg); break;
    case 'I': a.io_threads = atoi(optarg); break;
    case 'B': a.sockbuf = (int)parse_size(optarg); break;
    case 'H': a.host = optarg; break;
    case 'T': a.timeout_ms = (int)(atof(optarg) * 1000); break;
    case 'P':
      if (strcmp(optarg, "core") && strcmp(optarg, "none")) {
        fprintf(stderr, "ring_perf: --bind %s: use core or none\n", optarg);
        return 2;
      }
      a.bind = !strcmp(optarg, "core");
      break;
    case 'F': a.inflight = atoi(optarg); break;
    default:
      fprintf(stderr, "usage: ring_perf [-N ranks] [-b min] [-e max] [-f factor] [-n iters] "
              "[-w warmup] [-c 0|1] [--wire fp32|fp16|bf16] [--chunk B] [--small B|never] "
              "[--inflight N] [--io-threads N] [--sockbuf B] [--host ADDR] [--timeout S] "
              "[--bind core|none]\n");
      return ch == 'h' ? 0 : 2;
    }
  }
  a.ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (a.ncpu < 1) a.ncpu = 1;
  if (a.bind < 0) a.bind = world <= a.ncpu; /* mpirun's default: cores while they last */
  if (world < 1 || world > TH_MAX_WORLD) {
    fprintf(stderr, "ring_perf: -N %d: between 1 and %d ranks\n", world, TH_MAX_WORLD);
    return 2;
  }
  if (gs_perf_sizes(&a.p) == 0) {
    fprintf(stderr, "ring_perf: no sizes between -b %zu and -e %zu\n", a.p.min_bytes,
            a.p.max_bytes);
    return 2;
  }
  th_shared *sh = th_run(world, body, &a, 3600, NULL);
  if (!sh) {
    fprintf(stderr, "ring_perf: cannot fork %d ranks\n", world);
    return 1;
  }
  int bad = th_failures(sh);
  th_free(sh);
  if (bad) fprintf(stderr, "ring_perf: %d ranks failed\n", bad);
  return bad ? 1 : 0;
}
