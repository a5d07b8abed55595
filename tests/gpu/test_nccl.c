/* test_nccl.c: the "nccl" backend on real GPUs (suite gpu; exit 77 =
 * skipped without one). One process per GPU, up to 4, forked by this
 * parent, which never creates a CUDA context itself (CUDA does not survive
 * fork; gs_cuda_device_count is safe to call first, which this checks) and
 * relays rank 0's NCCL unique id over pipes, as the launcher's rendezvous
 * would. Every child is killed by alarm() if it hangs.
 *
 * Cases (n = 1000003 elements in 3 uneven buckets):
 *  - sum_only, fp32 and fp16 wire: params == sum of the ranks' grads,
 *    exactly (small integers);
 *  - SGD with momentum, two steps, with and without overlap, fp32 wire:
 *    params equal, bit for bit, the CPU table's SGD on the exact average
 *    (sum of exact values, times 1/world, rounded once as the backend does);
 *  - fp16 wire overflow on one rank: every rank skips the step, parameters
 *    stay as they were, the scale halves (65536 -> 32768);
 *  - a missing rank: world 2 with only rank 0 started fails with
 *    GS_ETIMEOUT within the timeout (plus slack), not a hang. */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_check.h"

#define N 1000003
enum { CASE_SUM, CASE_SUM16, CASE_SGD, CASE_SGD_OVERLAP, CASE_OVERFLOW, NCASES };
static const char *case_name[] = {"sum_only fp32", "sum_only fp16", "sgd", "sgd+overlap",
                                  "fp16 overflow"};

static int read_full(int fd, void *buf, size_t len, int timeout_ms) {
  size_t got = 0;
  while (got < len) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return -1;
    ssize_t r = read(fd, (char *)buf + got, len - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

static float grad_of(int rank, size_t i) { return (float)(rank + 1) + (float)(i % 7); }

/* One rank of one case. Returns the process exit code. */
static int run_rank(int cs, int rank, int world, int blob_out, int blob_in) {
  alarm(120);
  gs_err e = {0};
  gs_kernels *cpu = gs_kernels_cpu(1, &e), *k = gs_kernels_cuda(rank, &e);
  if (!cpu || !k) {
    fprintf(stderr, "rank %d: %s\n", rank, e.msg);
    return 1;
  }
  gs_bucket buckets[3] = {{500000, N - 500000}, {1000, 499000}, {0, 1000}};
  float *hp = xmalloc(N * 4), *hg = xmalloc(N * 4);
  for (size_t i = 0; i < N; i++) {
    hp[i] = (float)(i % 13) * 0.125f - 0.5f;
    hg[i] = grad_of(rank, i);
  }
  if (cs == CASE_OVERFLOW && rank == world - 1) hg[N / 2] = 70000.0f;  /* inf in fp16 */
  float *params = k->alloc(k, N * 4), *grads = k->alloc(k, N * 4);
  k->to_device(k, params, hp, N * 4);
  k->to_device(k, grads, hg, N * 4);
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.world = world;
  c.local_rank = rank;
  c.local_world = world;
  c.device = rank;
  c.timeout_ms = 30000;
  c.k = k;
  c.params = params;
  c.grads = grads;
  c.n = N;
  c.buckets = buckets;
  c.nbuckets = 3;
  c.sgd = (gs_sgd){0.1f, 0.9f, 0.0f};
  c.wire = (cs == CASE_SUM16 || cs == CASE_OVERFLOW) ? GS_F16 : GS_F32;
  gs_scaler_init(&c.scaler, cs == CASE_OVERFLOW ? 65536.0f : 1.0f, cs == CASE_OVERFLOW);
  c.overlap = cs == CASE_SGD_OVERLAP;
  c.sum_only = cs == CASE_SUM || cs == CASE_SUM16;

  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  if (gs_nccl_backend.prepare(&c, &state, endpoint, &e) != GS_OK) goto fail;
  if (rank == 0) {
    if (gs_nccl_backend.bootstrap(state, &c, blob, &blen, &e) != GS_OK) goto fail;
    if (write(blob_out, &blen, sizeof blen) != (ssize_t)sizeof blen ||
        write(blob_out, blob, blen) != (ssize_t)blen) {
      fprintf(stderr, "rank 0: cannot hand the unique id to the parent\n");
      return 1;
    }
  } else if (read_full(blob_in, &blen, sizeof blen, 60000) || blen > sizeof blob ||
             read_full(blob_in, blob, blen, 60000)) {
    fprintf(stderr, "rank %d: no unique id from the parent\n", rank);
    return 1;
  }
  c.bootstrap = blob;
  c.bootstrap_len = blen;
  gs_sync *s = NULL;
  if (gs_nccl_backend.open(state, &c, &s, &e) != GS_OK) goto fail;

  int steps = (cs == CASE_SGD || cs == CASE_SGD_OVERLAP) ? 2 : 1;
  gs_sync_stats st;
  memset(&st, 0, sizeof st);
  for (int step = 0; step < steps; step++) {
    if (step > 0) k->to_device(k, grads, hg, N * 4);  /* a new backward */
    if (s->ops->begin_step(s, step, &e) != GS_OK) goto fail;
    for (int b = 0; b < 3; b++)
      if (s->ops->bucket_ready(s, b, &e) != GS_OK) goto fail;
    if (s->ops->end_step(s, &st, &e) != GS_OK) goto fail;
  }
  float *got = xmalloc(N * 4);
  k->to_host(k, got, params, N * 4);
  if (k->sync(k, &e) != GS_OK) goto fail;

  float *exp_ = xmalloc(N * 4);
  if (c.sum_only) {
    for (size_t i = 0; i < N; i++) {
      float s_ = 0;
      for (int r = 0; r < world; r++) s_ += grad_of(r, i);
      exp_[i] = s_;
    }
  } else if (cs == CASE_OVERFLOW) {
    memcpy(exp_, hp, N * 4);
    CHECK(st.skipped && st.scale == 32768.0f, "rank %d: overflow: skipped %d scale %g", rank,
          (int)st.skipped, st.scale);
  } else {
    float *avg = xmalloc(N * 4), *buf = xmalloc(N * 4);
    for (size_t i = 0; i < N; i++) {
      float s_ = 0;
      for (int r = 0; r < world; r++) s_ += grad_of(r, i);
      avg[i] = s_ * (1.0f / (float)world);
    }
    memcpy(exp_, hp, N * 4);
    for (int step = 0; step < steps; step++) cpu->sgd(cpu, N, exp_, avg, buf, c.sgd, step == 0);
    CHECK(!st.skipped && st.scale == 1.0f, "rank %d: skipped %d scale %g", rank,
          (int)st.skipped, st.scale);
    free(avg);
    free(buf);
  }
  CHECK(same_bits(case_name[cs], got, exp_, N, 4), "rank %d of %d", rank, world);
  CHECK(world == 1 || (st.bytes_sent > 0 && st.bytes_sent == st.bytes_recv),
        "bytes %llu / %llu", (unsigned long long)st.bytes_sent,
        (unsigned long long)st.bytes_recv);
  CHECK(st.wait_s >= 0 && st.reduce_s >= 0 && st.update_s >= 0, "negative times");
  if (s->ops->close(s, true, &e) != GS_OK) goto fail;
  k->release(k, params);
  k->release(k, grads);
  k->destroy(k);
  cpu->destroy(cpu);
  free(hp); free(hg); free(got); free(exp_);
  return check_failures ? 1 : 0;
fail:
  fprintf(stderr, "rank %d, case %s: %s (%s:%d)\n", rank, case_name[cs], e.msg,
          e.file ? e.file : "?", e.line);
  return 1;
}

/* Fork world ranks of one case, relay the unique id, collect exit codes. */
static int run_job(int cs, int world) {
  int up[2];
  int down[4][2];
  pid_t pid[4];
  if (pipe(up)) return 1;
  for (int r = 0; r < world; r++)
    if (pipe(down[r])) return 1;
  fflush(NULL);
  for (int r = 0; r < world; r++) {
    pid[r] = fork();
    if (pid[r] < 0) return 1;
    if (pid[r] == 0) {
      close(up[0]);
      _exit(run_rank(cs, r, world, up[1], down[r][0]));
    }
  }
  close(up[1]);
  size_t blen = 0;
  unsigned char blob[GS_BOOTSTRAP_MAX];
  int ok = !read_full(up[0], &blen, sizeof blen, 90000) && blen <= sizeof blob &&
           !read_full(up[0], blob, blen, 90000);
  for (int r = 1; r < world && ok; r++)
    if (write(down[r][1], &blen, sizeof blen) != (ssize_t)sizeof blen ||
        write(down[r][1], blob, blen) != (ssize_t)blen)
      ok = 0;
  int failed = !ok;
  for (int r = 0; r < world; r++) {
    int status = 0;
    if (!ok) kill(pid[r], SIGKILL);
    waitpid(pid[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "case %s: rank %d of %d failed (%s %d)\n", case_name[cs], r, world,
              WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      failed = 1;
    }
    close(down[r][0]);
    close(down[r][1]);
  }
  close(up[0]);
  printf("%-14s world %d: %s\n", case_name[cs], world, failed ? "FAILED" : "ok");
  return failed;
}

/* World 2 with only rank 0: open() must time out, not hang. */
static int missing_rank(void) {
  alarm(60);
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cuda(0, &e);
  if (!k) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  float *buf = k->alloc(k, 4096 * 4);
  gs_bucket b = {0, 4096};
  gs_sync_config c;
  memset(&c, 0, sizeof c);
  c.world = 2;
  c.local_world = 1;  /* the missing rank "lives" elsewhere */
  c.timeout_ms = 3000;
  c.k = k;
  c.params = c.grads = buf;
  c.n = 4096;
  c.buckets = &b;
  c.nbuckets = 1;
  c.wire = GS_F32;
  gs_scaler_init(&c.scaler, 1.0f, false);
  void *state = NULL;
  char endpoint[GS_ENDPOINT_MAX];
  unsigned char blob[GS_BOOTSTRAP_MAX];
  size_t blen = 0;
  if (gs_nccl_backend.prepare(&c, &state, endpoint, &e) != GS_OK ||
      gs_nccl_backend.bootstrap(state, &c, blob, &blen, &e) != GS_OK) {
    fprintf(stderr, "missing rank setup: %s\n", e.msg);
    return 1;
  }
  c.bootstrap = blob;
  c.bootstrap_len = blen;
  gs_sync *s = NULL;
  double t0 = gs_now();
  int rc = gs_nccl_backend.open(state, &c, &s, &e);
  double dt = gs_now() - t0;
  CHECK(rc == GS_ETIMEOUT && s == NULL, "open with a missing rank: %s (%s)", gs_strerror(rc),
        e.msg);
  CHECK(dt >= 2.9 && dt < 15.0, "timed out after %.1f s (timeout 3 s)", dt);
  CHECK(strstr(e.msg, "rank 0/2") && strstr(e.msg, "did not join"), "message: %s", e.msg);
  printf("missing rank   world 2: %s after %.1f s: %s\n", rc == GS_ETIMEOUT ? "ok" : "FAILED",
         dt, e.msg);
  k->release(k, buf);
  k->destroy(k);
  return check_failures ? 1 : 0;
}

static int in_child(int (*fn)(void)) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) _exit(fn());
  int status = 0;
  if (p < 0 || waitpid(p, &status, 0) < 0) return 1;
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

int main(void) {
  /* gs_cuda_device_count asks a child while this process has not used
   * CUDA, so the ranks forked below still get a working CUDA (a failure of
   * that promise fails every case here) */
  int ngpu = gs_cuda_device_count();
  if (ngpu <= 0) {
    printf("SKIP: no usable CUDA GPU on this machine; nothing was checked\n");
    return 77;
  }
  int world = ngpu < 4 ? ngpu : 4;
  int failed = 0;
  for (int cs = 0; cs < NCASES; cs++) {
    failed |= run_job(cs, world);
    if (world > 2) failed |= run_job(cs, 2);
  }
  failed |= in_child(missing_rank);
  printf("%s\n", failed ? "nccl backend: FAILED" : "nccl backend: all cases passed");
  return failed ? 1 : 0;
}
