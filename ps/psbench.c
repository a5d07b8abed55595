/* psbench.c: push-sum-pull throughput of the ps server, the workload
 * dmlc/ps-lite's benchmarks time. Built, not run as a test.
 *
 * For each world W and size S it forks W worker processes that run the ps
 * backend exactly as bench does (prepare / bootstrap / open), in sum_only
 * mode with a DEDICATED server process (so the server's numbers compare
 * with ps-lite's single server): every iteration each worker pushes S
 * bytes of float32, the server sums them in rank order, and every worker
 * pulls the sum. The server's aggregate throughput is its bytes in + out
 * per second, measured from the byte counts it reports (headers included)
 * over the timed iterations; the sums are checked exactly at the end.
 *
 *   psbench [-w 1,2,4] [-s 4,16,64] [-n 10] [-W 3] [-b 1] [-r 5] [-i] [-c]
 *     -w  worker counts          -s  sizes in MiB
 *     -n  timed iterations       -W  warm-up iterations
 *     -b  bucket size in MiB (0: one bucket of S; default 1)
 *     -r  runs per cell: the median, best and worst are printed
 *     -i  in-process server (rank 0's thread) instead of a dedicated one
 *     -c  CSV instead of the table
 *
 * It prints what it measured and nothing else: a comparison with ps-lite
 * belongs to a run of ps-lite on the same machine in the same sitting,
 * not to figures typed in here. On a machine shared with other jobs, run
 * it under `nice -n -20` (as root) or the numbers measure the neighbours. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ps/ps.h"

typedef struct shared {
  double seconds;          /* rank 0: timed iterations */
  uint64_t server_bytes;   /* rank 0: the server's in + out over them */
  uint64_t rank0_bytes;
  int ok[64];
  char err[64][1024];
  char blob[GS_BOOTSTRAP_MAX];
  size_t blob_len;
  volatile int blob_ready;
  int wrong;               /* elements whose sum was wrong */
} shared;

static int worker(shared *sh, int rank, int world, size_t n, size_t bucket, int warm, int iters,
                  bool inproc) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  if (!k) goto fail;
  float *params = k->alloc(k, n * sizeof(float)), *grads = k->alloc(k, n * sizeof(float));
  if (!params || !grads) {
    GS_FAIL(&e, GS_ENOMEM, "out of memory for %zu floats", n);
    goto fail;
  }
  /* small integers: every sum is exact in fp32, in any order */
  for (size_t i = 0; i < n; i++) grads[i] = (float)(rank + 1) + (float)(i % 7);
  int nb = (int)((n + bucket - 1) / bucket);
  gs_bucket *bk = calloc((size_t)nb, sizeof *bk);
  for (int b = 0; b < nb; b++) {
    size_t end = n - (size_t)b * bucket, c = end >= bucket ? bucket : end;
    bk[b].offset = end - c;
    bk[b].count = c;
  }
  gs_ps_opts po = {.dedicated = !inproc};
  gs_sync_config c = {
    .rank = rank, .world = world, .timeout_ms = 60000, .job = 0x70736265ull,
    .host = "127.0.0.1", .k = k, .params = params, .grads = grads, .n = n, .buckets = bk,
    .nbuckets = nb, .wire = GS_F32, .sum_only = true, .opts = &po,
  };
  gs_scaler_init(&c.scaler, 1.0f, false);
  void *state = NULL;
  char ep[GS_ENDPOINT_MAX];
  if (gs_ps_backend.prepare(&c, &state, ep, &e) < 0) goto fail;
  if (rank == 0) {
    size_t len = 0;
    if (gs_ps_backend.bootstrap(state, &c, sh->blob, &len, &e) < 0) {
      gs_ps_backend.discard(state);
      goto fail;
    }
    sh->blob_len = len;
    __atomic_store_n(&sh->blob_ready, 1, __ATOMIC_RELEASE);
  } else {
    double t0 = gs_now();
    while (!__atomic_load_n(&sh->blob_ready, __ATOMIC_ACQUIRE)) {
      if (gs_now() - t0 > 60) {
        GS_FAIL(&e, GS_ETIMEOUT, "no server address from rank 0");
        gs_ps_backend.discard(state);
        goto fail;
      }
      usleep(1000);
    }
  }
  c.bootstrap = sh->blob;
  c.bootstrap_len = sh->blob_len;
  gs_sync *s = NULL;
  if (gs_ps_backend.open(state, &c, &s, &e) < 0) goto fail;
  double t0 = 0;
  uint64_t srv = 0, own = 0;
  int rc = 0;
  for (int it = 0; it < warm + iters && rc == 0; it++) {
    if (it == warm) t0 = gs_now();
    gs_sync_stats st;
    rc = s->ops->begin_step(s, it, &e);
    for (int b = 0; b < nb && rc == 0; b++) rc = s->ops->bucket_ready(s, b, &e);
    if (rc == 0) rc = s->ops->end_step(s, &st, &e);
    if (rc == 0 && it >= warm) {
      srv += st.server_bytes_sent + st.server_bytes_recv;
      own += st.bytes_sent + st.bytes_recv;
    }
  }
  double t = gs_now() - t0;
  if (rc == 0) {
    int wrong = 0;
    for (size_t i = 0; i < n; i++) {
      float want = (float)(world * (world + 1) / 2) + (float)world * (float)(i % 7);
      wrong += params[i] != want;
    }
    __atomic_add_fetch(&sh->wrong, wrong, __ATOMIC_RELAXED);
  }
  if (rank == 0 && rc == 0) {
    sh->seconds = t;
    sh->server_bytes = srv;
    sh->rank0_bytes = own;
  }
  int cc = s->ops->close(s, rc == 0, rc == 0 ? &e : NULL);
  if (rc < 0 || cc < 0) goto fail;
  sh->ok[rank] = 1;
  return 0;
fail:
  snprintf(sh->err[rank], sizeof sh->err[rank], "%s", e.msg);
  return 1;
}

static int parse_list(const char *s, int *out, int max) {
  int n = 0;
  char *dup = strdup(s), *save = NULL;
  for (char *t = strtok_r(dup, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
    char *end;
    long v = strtol(t, &end, 10);
    if (*end || v <= 0 || v > 4096) {
      free(dup);
      return -1;
    }
    out[n++] = (int)v;
  }
  free(dup);
  return n;
}

/* One run of a cell; GB/s of the server's bytes in + out, < 0 on failure. */
static double run_cell(int world, int mib, size_t bucket, int warm, int iters, bool inproc,
                       double *ms) {
  size_t n = (size_t)mib * (1 << 20) / sizeof(float);
  shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    perror("psbench: mmap");
    return -1;
  }
  memset(sh, 0, sizeof *sh);
  fflush(NULL);
  pid_t pid[64];
  int bad = 0, started = 0;
  for (int r = 0; r < world; r++) {
    pid[r] = fork();
    if (pid[r] < 0) {
      perror("psbench: fork");
      bad = 1;
      break;
    }
    if (pid[r] == 0) _exit(worker(sh, r, world, n, bucket, warm, iters, inproc));
    started++;
  }
  for (int r = 0; r < started; r++) {
    int st;
    waitpid(pid[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !sh->ok[r]) {
      fprintf(stderr, "psbench: W=%d S=%d MiB: rank %d failed: %s\n", world, mib, r,
              sh->err[r][0] ? sh->err[r] : "(died)");
      bad = 1;
    }
  }
  if (!bad && sh->wrong) {
    fprintf(stderr, "psbench: W=%d S=%d MiB: %d wrong sums\n", world, mib, sh->wrong);
    bad = 1;
  }
  /* the in-process server's wire traffic is rank 0's own */
  uint64_t bytes = inproc ? sh->rank0_bytes : sh->server_bytes;
  double gbps = bad ? -1 : (double)bytes / sh->seconds / 1e9;
  *ms = sh->seconds / iters * 1e3;
  munmap(sh, sizeof *sh);
  return gbps;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int ws[16] = {1, 2, 4}, nw = 3, ss[16] = {4, 16, 64}, nsz = 3;
  int iters = 10, warm = 3, reps = 5, csv = 0, inproc = 0;
  double bucket_mib = 1;
  int opt;
  while ((opt = getopt(argc, argv, "w:s:n:W:b:r:ich")) != -1) {
    switch (opt) {
    case 'w': nw = parse_list(optarg, ws, 16); break;
    case 's': nsz = parse_list(optarg, ss, 16); break;
    case 'n': iters = atoi(optarg); break;
    case 'W': warm = atoi(optarg); break;
    case 'b': bucket_mib = atof(optarg); break;
    case 'r': reps = atoi(optarg); break;
    case 'i': inproc = 1; break;
    case 'c': csv = 1; break;
    default:
      fprintf(stderr, "usage: psbench [-w 1,2,4] [-s 4,16,64] [-n iters] [-W warmup] "
              "[-b bucket_mib] [-r repeats] [-i] [-c]\n");
      return opt == 'h' ? 0 : 2;
    }
  }
  if (nw <= 0 || nsz <= 0 || iters < 1 || warm < 0 || bucket_mib < 0 || reps < 1 || reps > 99) {
    fprintf(stderr, "psbench: bad arguments (-w and -s take comma-separated positive numbers; "
            "-n >= 1, -W >= 0, -b >= 0, -r 1..99)\n");
    return 2;
  }
  for (int i = 0; i < nw; i++)
    if (ws[i] > 64) {
      fprintf(stderr, "psbench: at most 64 workers\n");
      return 2;
    }
  if (csv)
    printf("workers,size_mib,bucket_mib,server,step_ms,median_gbps,best_gbps,worst_gbps\n");
  else
    printf("push-sum-pull, %s server, float32; each cell run %d times (%d iterations after %d "
           "warm-up);\nserver GB/s = its bytes in + out (headers included) / time, 1e9 bytes\n"
           "%7s %7s %9s %8s %8s %8s %8s\n",
           inproc ? "in-process (rank 0 thread)" : "dedicated", reps, iters, warm, "workers",
           "S (MiB)", "buckets", "step ms", "median", "best", "worst");
  int status = 0;
  for (int si = 0; si < nsz; si++)
    for (int wi = 0; wi < nw; wi++) {
      int world = ws[wi];
      size_t n = (size_t)ss[si] * (1 << 20) / sizeof(float);
      size_t bucket = bucket_mib > 0 ? (size_t)(bucket_mib * (1 << 20) / sizeof(float)) : n;
      if (bucket == 0 || bucket > n) bucket = n;
      double g[99], ms[99];
      int ok = 0;
      for (int r = 0; r < reps; r++) {
        double m;
        double v = run_cell(world, ss[si], bucket, warm, iters, inproc, &m);
        if (v < 0) {
          status = 1;
          continue;
        }
        ms[ok] = m;
        g[ok++] = v;
      }
      if (!ok) continue;
      qsort(g, (size_t)ok, sizeof *g, cmp_double);
      qsort(ms, (size_t)ok, sizeof *ms, cmp_double);
      double med = ok % 2 ? g[ok / 2] : (g[ok / 2 - 1] + g[ok / 2]) / 2;
      double mms = ok % 2 ? ms[ok / 2] : (ms[ok / 2 - 1] + ms[ok / 2]) / 2;
      int nb = (int)((n + bucket - 1) / bucket);
      char bk[32];
      snprintf(bk, sizeof bk, "%d x %.3g", nb, (double)bucket * 4 / (1 << 20));
      if (csv)
        printf("%d,%d,%.3g,%s,%.3f,%.3f,%.3f,%.3f\n", world, ss[si],
               (double)bucket * 4 / (1 << 20), inproc ? "inproc" : "dedicated", mms, med,
               g[ok - 1], g[0]);
      else
        printf("%7d %7d %9s %8.2f %8.3f %8.3f %8.3f\n", world, ss[si], bk, mms, med, g[ok - 1],
               g[0]);
      fflush(stdout);
    }
  return status;
}
