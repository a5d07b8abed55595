/* test_powersgd.c: compress/'s words and PowerSGD's arithmetic, without a
 * network: two ranks are two threads whose all-reduce sums through shared
 * memory (in rank order, as the ring's result is the same on every rank).
 *
 *   spec      --compress words in and out, bad words refused by name
 *   rule      which tensors PyTorch's min_compression_rate compresses
 *   exact     a bucket whose matrices are rank <= R comes out as the exact
 *             sum over ranks; vectors come out bitwise the sum
 *   ranks     both ranks end with the same bits
 *   feedback  a rank-4 matrix sent at rank 1 for many steps: the mean of
 *             what came out approaches the matrix (error feedback), and
 *             without the error it would not (first step's error is large)
 *   start     steps before `start` are not compressed */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"
#include "tests/check.h"

/* ---- an all-reduce over threads ---- */

#define WORLD 2
typedef struct shared {
  pthread_barrier_t bar;
  float *slot[WORLD];
  size_t count[WORLD];
} shared;

typedef struct rankctx {
  shared *sh;
  int rank;
} rankctx;

static int thread_allreduce(void *ctx, float *buf, size_t count, int part, gs_err *e) {
  (void)part;
  rankctx *r = ctx;
  r->sh->slot[r->rank] = buf;
  r->sh->count[r->rank] = count;
  pthread_barrier_wait(&r->sh->bar);
  if (r->sh->count[0] != r->sh->count[1])
    return GS_FAIL(e, GS_EMISMATCH, "ranks disagree on the count");
  float *tmp = malloc(count * sizeof *tmp);
  for (size_t i = 0; i < count; i++) tmp[i] = r->sh->slot[0][i] + r->sh->slot[1][i];
  pthread_barrier_wait(&r->sh->bar);  /* every rank has read every slot */
  memcpy(buf, tmp, count * sizeof *tmp);
  free(tmp);
  pthread_barrier_wait(&r->sh->bar);
  return GS_OK;
}

static int alone(void *ctx, float *buf, size_t count, int part, gs_err *e) {
  (void)ctx, (void)buf, (void)count, (void)part, (void)e;
  return GS_OK;
}

/* ---- the spec ---- */

static void test_spec(void) {
  gs_compress c;
  gs_err e = {0};
  char buf[32];
  gs_compress_default(&c);
  CHECK(c.kind == GS_COMPRESS_NONE && c.start == 2 && c.min_rate == 2.0);
  CHECK_OK(gs_compress_parse("powersgd:4", &c, &e), &e);
  CHECK(c.kind == GS_COMPRESS_POWERSGD && c.rank == 4);
  CHECK(!strcmp(gs_compress_spec(&c, buf, sizeof buf), "powersgd:4"), "%s", buf);
  CHECK(gs_compress_wire(&c, GS_F32) == GS_F32);
  CHECK_OK(gs_compress_parse("fp16", &c, &e), &e);
  CHECK(gs_compress_wire(&c, GS_F32) == GS_F16);
  CHECK_OK(gs_compress_parse("bf16", &c, &e), &e);
  CHECK(gs_compress_wire(&c, GS_F32) == GS_BF16);
  CHECK_OK(gs_compress_parse("none", &c, &e), &e);
  CHECK(gs_compress_wire(&c, GS_F32) == GS_F32);
  const char *bad[] = {"", "powersgd", "powersgd:", "powersgd:0", "powersgd:2x", "topk:0",
                       "FP16", "powersgd:-1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    gs_err e2 = {0};
    CHECK(gs_compress_parse(bad[i], &c, &e2) == GS_EINVAL, "'%s' accepted", bad[i]);
    CHECK(strstr(e2.msg, "--compress") != NULL, "'%s': %s", bad[i], e2.msg);
  }
}

static void test_rule(void) {
  gs_compress c;
  gs_compress_default(&c);
  c.kind = GS_COMPRESS_POWERSGD;
  c.rank = 2;
  gs_compress_tensor vec = {0, 256, 1}, big = {0, 256, 784}, tiny = {0, 4, 4},
                     edge = {0, 8, 8};  /* (8 + 8) x 2 x 2 = 64 = 8 x 8: not strictly less */
  CHECK(!gs_powersgd_compresses(&c, &vec));
  CHECK(gs_powersgd_compresses(&c, &big));
  CHECK(!gs_powersgd_compresses(&c, &tiny));
  CHECK(!gs_powersgd_compresses(&c, &edge));
  gs_compress_tensor nine = {0, 9, 9};  /* 18 x 2 x 2 = 72 < 81 */
  CHECK(gs_powersgd_compresses(&c, &nine));
}

/* ---- one bucket: a 40 x 30 matrix, a 30-vector, a 12 x 9 matrix ---- */

enum { R1 = 40, C1 = 30, NV = 30, R2 = 12, C2 = 9 };
#define NTOT (R1 * C1 + NV + R2 * C2)
static const gs_compress_tensor TENSORS[] = {
  {0, R1, C1}, {R1 * C1, NV, 1}, {R1 * C1 + NV, R2, C2}};

/* rank r's gradient: the matrices of rank `rk` (sum of rk outer products
 * with columns shared by both ranks, so the sum keeps rank rk), the
 * vector arbitrary */
static void fill(float *g, int r, int rk, int salt) {
  memset(g, 0, NTOT * sizeof *g);
  for (int t = 0; t < rk; t++)
    for (int i = 0; i < R1; i++)
      for (int j = 0; j < C1; j++)
        g[i * C1 + j] += sinf(0.3f * (float)(i + 1) * (float)(t + 1)) *
                         cosf(0.2f * (float)(j + 1) * (float)(t + 1) + (float)r * 0.1f * (float)t);
  for (int i = 0; i < NV; i++) g[R1 * C1 + i] = 0.01f * (float)(i * (r + 2) + salt);
  for (int t = 0; t < rk; t++)
    for (int i = 0; i < R2; i++)
      for (int j = 0; j < C2; j++)
        g[R1 * C1 + NV + i * C2 + j] += cosf((float)(i + t + 1)) * sinf((float)(j * (t + 1) + r));
}

typedef struct job {
  shared *sh;
  int rank, rk, R, steps;
  float *g;        /* out: the last step's result */
  gs_powersgd_stats st;
  int rc;
  gs_err e;
} job;

static void *rank_main(void *arg) {
  job *j = arg;
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  gs_compress c;
  gs_compress_default(&c);
  c.kind = GS_COMPRESS_POWERSGD;
  c.rank = j->R;
  c.seed = 5;
  gs_powersgd *p = NULL;
  j->rc = gs_powersgd_create(&c, k, TENSORS, 3, 1, WORLD, &p, &j->e);
  rankctx ctx = {j->sh, j->rank};
  for (int s = 0; j->rc == 0 && s < j->steps; s++) {
    fill(j->g, j->rank, j->rk, 0);
    j->rc = gs_powersgd_bucket(p, 0, j->g, 0, NTOT, thread_allreduce, &ctx, &j->st, &j->e);
  }
  gs_powersgd_destroy(p);
  k->destroy(k);
  return NULL;
}

static void run2(int rk, int R, int steps, float *out0, float *out1, gs_powersgd_stats *st) {
  shared sh;
  pthread_barrier_init(&sh.bar, NULL, WORLD);
  job j[WORLD] = {{&sh, 0, rk, R, steps, out0, {0}, 0, {0}},
                  {&sh, 1, rk, R, steps, out1, {0}, 0, {0}}};
  pthread_t th[WORLD];
  for (int r = 0; r < WORLD; r++) pthread_create(&th[r], NULL, rank_main, &j[r]);
  for (int r = 0; r < WORLD; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&sh.bar);
  for (int r = 0; r < WORLD; r++) CHECK(j[r].rc == 0, "rank %d: %s", r, j[r].e.msg);
  *st = j[0].st;
}

static double rel_err(const float *a, const float *b, size_t off, size_t n) {
  double num = 0, den = 0;
  for (size_t i = off; i < off + n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

static void test_exact(void) {
  float *o0 = malloc(NTOT * sizeof *o0), *o1 = malloc(NTOT * sizeof *o1);
  float *a = malloc(NTOT * sizeof *a), *b = malloc(NTOT * sizeof *b), *sum = malloc(NTOT * 4);
  gs_powersgd_stats st;
  /* rank-1 matrices at R = 1, and rank-2 at R = 2: the approximation is exact */
  for (int rk = 1; rk <= 2; rk++) {
    run2(rk, rk, 1, o0, o1, &st);
    fill(a, 0, rk, 0);
    fill(b, 1, rk, 0);
    for (size_t i = 0; i < NTOT; i++) sum[i] = a[i] + b[i];
    double e1 = rel_err(o0, sum, 0, R1 * C1), e2 = rel_err(o0, sum, R1 * C1 + NV, R2 * C2);
    CHECK(e1 < 1e-5 && e2 < 1e-5, "rank %d at R %d: relative error %g, %g", rk, rk, e1, e2);
    CHECK(!memcmp(o0 + R1 * C1, sum + R1 * C1, NV * sizeof(float)),
          "the vector is not bitwise the plain sum");
    CHECK(!memcmp(o0, o1, NTOT * sizeof(float)), "ranks disagree (rank %d)", rk);
    /* what went over the wire: the vector, P and Q of both matrices */
    size_t after = NV + (size_t)(R1 + C1) * rk + (size_t)(R2 + C2) * rk;
    CHECK(st.elems_before == NTOT && st.elems_after == after, "%llu -> %llu, expected %zu",
          (unsigned long long)st.elems_before, (unsigned long long)st.elems_after, after);
  }
  /* a rank-3 sum at R = 1 is not exact (so the check above can fail) */
  run2(3, 1, 1, o0, o1, &st);
  fill(a, 0, 3, 0);
  fill(b, 1, 3, 0);
  for (size_t i = 0; i < NTOT; i++) sum[i] = a[i] + b[i];
  double e1 = rel_err(o0, sum, 0, R1 * C1);
  CHECK(e1 > 1e-2, "rank 3 at R 1 came out exact (%g)?", e1);
  CHECK(!memcmp(o0, o1, NTOT * sizeof(float)), "ranks disagree at rank 3");
  free(o0), free(o1), free(a), free(b), free(sum);
}

/* error feedback on one rank: the same rank-4 gradient every step at R = 1 */
static void test_feedback(void) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  REQUIRE(k != NULL, "%s", e.msg);
  gs_compress c;
  gs_compress_default(&c);
  c.kind = GS_COMPRESS_POWERSGD;
  c.rank = 1;
  c.start = 3;
  gs_powersgd *p = NULL;
  CHECK_OK(gs_powersgd_create(&c, k, TENSORS, 3, 1, 1, &p, &e), &e);
  REQUIRE(p != NULL);
  CHECK(!gs_powersgd_active(p, 2) && gs_powersgd_active(p, 3) && gs_powersgd_active(p, 100));
  float *g = malloc(NTOT * sizeof *g), *m = malloc(NTOT * sizeof *m);
  double *acc = calloc(NTOT, sizeof *acc);
  fill(m, 0, 4, 0);
  const int T = 200;
  double first = 0;
  for (int s = 0; s < T; s++) {
    memcpy(g, m, NTOT * sizeof *g);
    CHECK_OK(gs_powersgd_bucket(p, 0, g, 0, NTOT, alone, NULL, NULL, &e), &e);
    if (s == 0) first = rel_err(g, m, 0, R1 * C1);
    for (size_t i = 0; i < NTOT; i++) acc[i] += g[i];
  }
  float *mean = malloc(NTOT * sizeof *mean);
  for (size_t i = 0; i < NTOT; i++) mean[i] = (float)(acc[i] / T);
  double last = rel_err(mean, m, 0, R1 * C1);
  printf("feedback: one step's relative error %.3g, mean of %d steps %.3g\n", first, T, last);
  CHECK(first > 0.1, "a rank-4 matrix at rank 1 should lose much in one step (%g)", first);
  CHECK(last < 0.05 && last < first / 5, "error feedback did not bring the mean back: %g", last);
  /* bad calls are refused, not crashed */
  gs_err e2 = {0};
  CHECK(gs_powersgd_bucket(p, 1, g, 0, NTOT, alone, NULL, NULL, &e2) == GS_EINVAL);
  gs_err e3 = {0};
  CHECK(gs_powersgd_bucket(p, 0, g, 0, NTOT - 1, alone, NULL, NULL, &e3) == GS_EINVAL);
  gs_powersgd_destroy(p);
  /* a bucket its tensors do not cover */
  gs_powersgd *q = NULL;
  CHECK_OK(gs_powersgd_create(&c, k, TENSORS, 1, 1, 1, &q, &e), &e);
  gs_err e4 = {0};
  CHECK(gs_powersgd_bucket(q, 0, g, 0, NTOT, alone, NULL, NULL, &e4) == GS_EINVAL);
  CHECK(strstr(e4.msg, "cover") != NULL, "%s", e4.msg);
  gs_powersgd_destroy(q);
  free(g), free(m), free(acc), free(mean);
  k->destroy(k);
}

int main(void) {
  test_spec();
  test_rule();
  test_exact();
  test_feedback();
  return check_done("test_powersgd");
}
