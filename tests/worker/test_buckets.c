/* test_buckets.c: gs_plan_buckets against DDP's rule, transcribed
 * independently here from reducer.cpp (walk the parameters backwards, add
 * each one, close the bucket once its size reaches the limit: the first
 * limit, then the regular one), plus the properties every plan must have:
 * contiguous buckets that tile the buffer from the end, parameters never
 * split, readiness order. Cases: sizes that do not divide the model, a
 * model smaller than one bucket, one huge parameter, fp16 buckets holding
 * twice the elements, the real MLP and LeNet; and gradsync's two caps of 0
 * (a bucket per parameter; a first bucket that closes as the others). */
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "worker/sync.h"

/* DDP: list of parameter indices per bucket, parameters in reverse order */
static int ddp_plan(const size_t *sz, int n, size_t eb, size_t first, size_t cap, int *bucket_of) {
  int nb = 0;
  size_t bytes = 0, limit = first;
  bool open = false;
  for (int i = n - 1; i >= 0; i--) {
    bucket_of[i] = nb;
    open = true;
    bytes += sz[i] * eb;
    if (bytes >= limit) {
      nb++;
      bytes = 0;
      limit = cap;
      open = false;
    }
  }
  return nb + (open ? 1 : 0);
}

static void check_plan(const char *what, const size_t *sz, int n, size_t eb, size_t first,
                       size_t cap) {
  gs_bucket *b = NULL;
  int nb = 0;
  gs_err e = {0};
  CHECK_OK(gs_plan_buckets(sz, n, eb, first, cap, &b, &nb, &e), &e);
  if (!b) return;
  int *want = malloc((size_t)n * sizeof *want);
  int wnb = ddp_plan(sz, n, eb, first, cap, want);
  CHECK(nb == wnb, "%s: %d buckets, DDP makes %d", what, nb, wnb);
  size_t total = 0, *off = malloc((size_t)n * sizeof *off);
  for (int i = 0; i < n; i++) {
    off[i] = total;
    total += sz[i];
  }
  /* tiling from the end: bucket 0 ends at total, each one ends where the previous begins */
  size_t end = total;
  for (int i = 0; i < nb; i++) {
    CHECK(b[i].offset + b[i].count == end, "%s: bucket %d [%zu, +%zu) does not end at %zu",
           what, i, b[i].offset, b[i].count, end);
    end = b[i].offset;
  }
  CHECK(end == 0, "%s: buckets do not reach the start (%zu)", what, end);
  /* each parameter lies wholly inside the bucket DDP gives it */
  for (int p = 0; p < n && nb == wnb; p++) {
    int k = want[p];
    if (sz[p] == 0) continue;
    CHECK(off[p] >= b[k].offset && off[p] + sz[p] <= b[k].offset + b[k].count,
           "%s: parameter %d [%zu, +%zu) not inside bucket %d [%zu, +%zu)", what, p, off[p],
           sz[p], k, b[k].offset, b[k].count);
  }
  free(want);
  free(off);
  free(b);
}

static void one_case(const char *what, const size_t *sz, int n, size_t eb, size_t first,
                     size_t cap, int expect_nb) {
  check_plan(what, sz, n, eb, first, cap);
  gs_bucket *b = NULL;
  int nb = 0;
  gs_err e = {0};
  CHECK_OK(gs_plan_buckets(sz, n, eb, first, cap, &b, &nb, &e), &e);
  CHECK(nb == expect_nb, "%s: %d buckets, expected %d", what, nb, expect_nb);
  free(b);
}

int main(void) {
  const size_t MiB = 1 << 20;
  /* the real MLP 784-2048-2048-10, fp32: bucket 0 = fc2.w..fc3.b (crosses 1 MiB at fc2.w) */
  size_t mlp[6] = {2048 * 784, 2048, 2048 * 2048, 2048, 10 * 2048, 10};
  one_case("mlp fp32", mlp, 6, 4, 1 * MiB, 25 * MiB, 2);
  gs_bucket *b = NULL;
  int nb = 0;
  gs_err e = {0};
  CHECK_OK(gs_plan_buckets(mlp, 6, 4, MiB, 25 * MiB, &b, &nb, &e), &e);
  if (b && nb == 2) {
    CHECK(b[0].offset == 2048 * 784 + 2048 && b[0].count == 2048 * 2048 + 2048 + 20480 + 10);
    CHECK(b[1].offset == 0 && b[1].count == 2048 * 784 + 2048);
  }
  free(b);
  /* LeNet is smaller than the first bucket: one bucket */
  size_t lenet[10] = {450, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10};
  one_case("lenet", lenet, 10, 4, MiB, 25 * MiB, 1);
  /* sizes that do not divide: 10 params of 300 elements, caps of 1000 / 2000 bytes */
  size_t ten[10];
  for (int i = 0; i < 10; i++) ten[i] = 300 + (size_t)i * 7;
  one_case("uneven fp32", ten, 10, 4, 1000, 2000, 6);
  /* fp16 halves the bytes: fewer buckets for the same caps */
  one_case("uneven fp16", ten, 10, 2, 1000, 2000, 4);
  /* one huge parameter in the middle: its own bucket, never split */
  size_t huge[5] = {10, 20, 10 * MiB, 300000, 40};
  one_case("huge", huge, 5, 4, MiB, 2 * MiB, 3);
  CHECK_OK(gs_plan_buckets(huge, 5, 4, MiB, 2 * MiB, &b, &nb, &e), &e);
  if (b && nb == 3) {
    CHECK(b[0].offset == 30 + 10 * MiB && b[0].count == 300040);
    CHECK(b[1].offset == 30 && b[1].count == 10 * MiB);  /* 40 MiB > the 2 MiB cap, whole */
    CHECK(b[2].offset == 0 && b[2].count == 30);
  }
  free(b);
  /* ... and a huge parameter that arrives while the first bucket is open joins it */
  size_t late[3] = {10, 10 * MiB, 40};
  one_case("huge joins", late, 3, 4, MiB, 2 * MiB, 2);
  /* cap 0: every parameter its own bucket */
  one_case("per tensor", ten, 10, 4, 0, 0, 10);
  /* the two caps of 0 (docs/buckets.md): cap 0 is a bucket per parameter even with a
   * first cap; first cap 0 is the plan whose first cap is the cap (uniform buckets) */
  CHECK_OK(gs_plan_buckets(ten, 10, 4, 1000, 0, &b, &nb, &e), &e);
  CHECK(nb == 10, "cap 0 with a first cap: %d buckets, expected 10", nb);
  for (int i = 0; b && i < nb && nb == 10; i++)
    CHECK(b[i].count == ten[9 - i], "cap 0: bucket %d holds %zu elements, not parameter %d",
          i, b[i].count, 9 - i);
  free(b);
  static const size_t caps[3] = {2000, 5000, 1 << 20};
  static const int want[3] = {5, 3, 1};
  for (int c = 0; c < 3; c++) {
    gs_bucket *u = NULL;
    int nu = 0;
    CHECK_OK(gs_plan_buckets(ten, 10, 4, 0, caps[c], &b, &nb, &e), &e);
    CHECK_OK(gs_plan_buckets(ten, 10, 4, caps[c], caps[c], &u, &nu, &e), &e);
    CHECK(nb == nu && nb == want[c] && b && u && !memcmp(b, u, (size_t)nb * sizeof *b),
          "first cap 0, cap %zu: %d buckets, the uniform plan %d (expected %d)", caps[c], nb,
          nu, want[c]);
    free(b);
    free(u);
  }
  /* a single parameter */
  size_t one[1] = {12345};
  one_case("single", one, 1, 4, MiB, 25 * MiB, 1);
  /* empty parameters do not break the tiling */
  size_t holes[5] = {100, 0, 200, 0, 300};
  check_plan("holes", holes, 5, 4, 400, 400);
  /* errors */
  CHECK(gs_plan_buckets(one, 0, 4, MiB, MiB, &b, &nb, &e) == GS_EINVAL);
  return check_done("test_buckets");
}
