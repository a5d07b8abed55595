/* allreduce_harness.c: forked ranks, shared-memory endpoint exchange, deadlines
 * (allreduce_harness.h). */
#include "allreduce_harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"


static void nap(void) {
  struct timespec ts = {0, 200000};
  nanosleep(&ts, NULL);
}

int th_exchange(th_shared *sh, int round, int rank, const char *ep, const char *eps[]) {
  if (round < 0 || round >= TH_ROUNDS) return -1;
  snprintf(sh->ep[round][rank], GS_ENDPOINT_MAX, "%s", ep);
  atomic_fetch_add(&sh->posted[round], 1);
  double deadline = gs_now() + 20;
  while (atomic_load(&sh->posted[round]) < sh->world) {
    if (gs_now() > deadline) {
      fprintf(stderr, "rank %d: endpoint exchange %d timed out\n", rank, round);
      return -1;
    }
    nap();
  }
  for (int i = 0; i < sh->world; i++) eps[i] = sh->ep[round][i];
  return 0;
}

int th_barrier(th_shared *sh, int round) {
  if (round < 0 || round >= TH_ROUNDS) return -1;
  atomic_fetch_add(&sh->barrier[round], 1);
  double deadline = gs_now() + 60;
  while (atomic_load(&sh->barrier[round]) < sh->world) {
    if (gs_now() > deadline) return -1;
    nap();
  }
  return 0;
}

th_shared *th_run(int world, th_body body, void *arg, double deadline_s,
                  void (*on_start)(th_shared *sh, const pid_t *pids, void *arg)) {
  if (world < 1 || world > TH_MAX_WORLD) return NULL;
  th_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
  if (sh == MAP_FAILED) return NULL;
  memset(sh, 0, sizeof *sh);
  sh->world = world;
  fflush(stdout);
  fflush(stderr);
  pid_t pids[TH_MAX_WORLD];
  for (int r = 0; r < world; r++) {
    pid_t p = fork();
    if (p < 0) {
      for (int i = 0; i < r; i++) kill(pids[i], SIGKILL);
      for (int i = 0; i < r; i++) waitpid(pids[i], NULL, 0);
      munmap(sh, sizeof *sh);
      return NULL;
    }
    if (p == 0) {
      int rc = body(sh, r, world, arg);
      fflush(stdout);
      fflush(stderr);
      exit(rc == 0 ? 0 : 1); /* not _exit: LeakSanitizer checks each rank */
    }
    pids[r] = p;
  }
  if (on_start) on_start(sh, pids, arg);
  double deadline = gs_now() + deadline_s;
  int left = world;
  bool done[TH_MAX_WORLD] = {0};
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < world; r++) {
        if (pids[r] != p || done[r]) continue;
        done[r] = true;
        left--;
        sh->exit_at[r] = gs_now();
        sh->status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      continue;
    }
    if (gs_now() > deadline) {
      for (int r = 0; r < world; r++) {
        if (done[r]) continue;
        fprintf(stderr, "harness: rank %d still running after %.0f s: killed (a hang)\n", r,
                deadline_s);
        kill(pids[r], SIGKILL);
        kill(pids[r], SIGCONT);
        waitpid(pids[r], NULL, 0);
        done[r] = true;
        left--;
        sh->exit_at[r] = gs_now();
        sh->status[r] = -1;
      }
      break;
    }
    /* the parent stays out of the way of the ranks it measures */
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return sh;
}

void th_free(th_shared *sh) {
  if (sh) munmap(sh, sizeof *sh);
}

int th_failures(const th_shared *sh) {
  int n = 0;
  for (int r = 0; r < sh->world; r++) n += sh->status[r] != 0;
  return n;
}

uint64_t th_hash(const void *p, size_t n) { return gs_hash_bytes(GS_HASH_INIT, p, n); }

int th_worlds_agree(int lo, int hi, th_body body, double deadline_s) {
  int bad = 0;
  for (int w = lo; w <= hi; w++) {
    double t0 = gs_now();
    th_shared *sh = th_run(w, body, NULL, deadline_s, NULL);
    if (!sh) {
      printf("FAIL: world %d: fork failed\n", w);
      return bad + 1;
    }
    int failed = th_failures(sh), slots = (int)sh->u64[0][TH_SLOTS - 1];
    if (failed) printf("FAIL: world %d: %d ranks failed\n", w, failed);
    if (slots <= 0) printf("FAIL: world %d: no results\n", w);
    bad += failed > 0 || slots <= 0;
    for (int c = 0; c < slots; c++)
      for (int r = 1; r < w; r++)
        if (sh->u64[r][c] != sh->u64[0][c]) {
          printf("FAIL: world %d, case %d: rank %d's result differs from rank 0's\n", w, c, r);
          bad++;
        }
    printf("world %d: %d cases, %.1f s\n", w, slots, gs_now() - t0);
    th_free(sh);
  }
  return bad;
}

void th_ring_opts(gs_comm_opts *o, int rank, int world, size_t max_count, gs_kernels *k) {
  memset(o, 0, sizeof *o);
  o->rank = rank;
  o->world = world;
  o->timeout_ms = 20000;
  o->job = 0x5eed;
  o->host = "127.0.0.1";
  o->k = k;
  o->wire = GS_F32;
  o->max_count = max_count;
}

int th_ring_open(th_shared *sh, int round, gs_comm_opts *o, gs_comm **out, gs_err *e) {
  char ep[GS_ENDPOINT_MAX];
  int rc = gs_comm_prepare(o, out, ep, e);
  if (rc < 0) return rc;
  const char *eps[TH_MAX_WORLD];
  if (th_exchange(sh, round, o->rank, ep, eps) < 0)
    return GS_FAIL(e, GS_ETIMEOUT, "endpoint exchange failed");
  return gs_comm_connect(*out, eps, e);
}

int th_report(th_shared *sh, int rank, const gs_err *e) {
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e->msg);
  fprintf(stderr, "rank %d: %s (%s:%d)\n", rank, e->msg, e->file ? e->file : "?", e->line);
  return 1;
}

float th_contribution(int rank, size_t i, int salt) {
  return (float)((int)((i + 7u * (size_t)rank + 3u * (size_t)salt) % 11u) - 5);
}

/* splitmix64: deterministic per (seed, rank, i) values */
uint64_t th_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
float th_randf(uint64_t seed, int rank, size_t i) {
  uint64_t x = th_mix(seed * 1000003u + (uint64_t)rank * 7919u + th_mix(i));
  return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

gs_algo th_algo(const char *name) {
  int a = gs_algo_parse(name);
  if (a < 0) {
    fprintf(stderr, "allreduce has no algorithm '%s'\n", name);
    exit(1);
  }
  return a;
}

gs_kernels *th_start(void) {
  signal(SIGPIPE, SIG_IGN);
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  if (!k) fprintf(stderr, "%s\n", e.msg);
  return k;
}
