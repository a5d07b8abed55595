/* test_topk.c: top-k with error feedback (compress/topk.c), no network.
 *
 *   spec      topk:FRACTION in and out (the shortest decimal that reads
 *             back), bad fractions refused by name
 *   count     k = ceil(FRACTION x n), at least 1, at most n
 *   select    against a brute-force reference (sort by magnitude, then
 *             index) on data full of ties, sparse and dense forms: the kept
 *             set, increasing indices, the values g + residual, the residual
 *   ties      equal magnitudes keep the lowest indices; -0 ties +0; NaN
 *             ranks above inf
 *   feedback  over many steps, what was sent plus the residual is the sum
 *             of the gradients (each step exactly entry by entry, the sum
 *             to float rounding)
 *   topk:1    sends every gradient's own bits (-0 included), no residual
 *   unpack    a payload that lies (index out of range, repeated or
 *             decreasing indices, wrong size, more entries than the
 *             bucket) is refused by what is wrong; an unaligned one works */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"
#include "tests/check.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static uint32_t mag(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u & 0x7fffffffu;
}

static void test_spec(void) {
  gs_compress c;
  gs_err e = {0};
  char buf[64];
  gs_compress_default(&c);
  CHECK_OK(gs_compress_parse("topk:0.1", &c, &e), &e);
  CHECK(c.kind == GS_COMPRESS_TOPK && c.fraction == 0.1, "kind %d fraction %g", c.kind,
        c.fraction);
  CHECK(!strcmp(gs_compress_spec(&c, buf, sizeof buf), "topk:0.1"), "spec %s", buf);
  const double fr[] = {1.0 / 3, 1e-6, 0.25, 1, 0.999999999, 2.0 / 7};
  for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) {
    c.fraction = fr[i];
    gs_compress d;
    gs_compress_default(&d);
    gs_compress_spec(&c, buf, sizeof buf);
    CHECK_OK(gs_compress_parse(buf, &d, &e), &e);
    CHECK(d.kind == GS_COMPRESS_TOPK && d.fraction == fr[i], "%s read back as %.17g", buf,
          d.fraction);
  }
  const char *bad[] = {"topk:", "topk:0", "topk:1.5", "topk:-0.1", "topk:nan", "topk:inf",
                       "topk:0.1x", "topk:0x0.1", "topk", "topk:1e-400", "topk: 0.1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    gs_err be = {0};
    gs_compress d;
    gs_compress_default(&d);
    CHECK(gs_compress_parse(bad[i], &d, &be) == GS_EINVAL && strstr(be.msg, "topk"),
          "%s: accepted or unclear: %s", bad[i], be.msg);
    CHECK(d.kind == GS_COMPRESS_NONE, "%s changed the kind", bad[i]);
  }
}

static void test_count(void) {
  CHECK(gs_topk_count(0.1, 1000) == 100, "%zu", gs_topk_count(0.1, 1000));
  CHECK(gs_topk_count(0.1, 1001) == 101, "%zu", gs_topk_count(0.1, 1001));
  CHECK(gs_topk_count(0.1, 5) == 1, "%zu", gs_topk_count(0.1, 5));
  CHECK(gs_topk_count(1e-9, 10) == 1, "%zu", gs_topk_count(1e-9, 10));
  CHECK(gs_topk_count(1, 7) == 7, "%zu", gs_topk_count(1, 7));
  CHECK(gs_topk_count(0.5, 3) == 2, "%zu", gs_topk_count(0.5, 3));
  CHECK(gs_topk_count(0.5, 0) == 0, "%zu", gs_topk_count(0.5, 0));
  CHECK(gs_topk_sparse(49, 100) && !gs_topk_sparse(50, 100), "the sparse form's edge");
  CHECK(gs_topk_bytes(10, 100) == 80 && gs_topk_bytes(60, 100) == 400, "bytes");
}

/* reference order: larger magnitude first, then lower index */
static const float *ref_vals;
static int by_rank(const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  uint32_t x = mag(ref_vals[i]), y = mag(ref_vals[j]);
  if (x != y) return x > y ? -1 : 1;
  return i < j ? -1 : i > j;
}

/* Decode what select wrote into a dense vector and a kept mask. */
static void decode(const void *out, size_t k, size_t n, float *dense, unsigned char *kept) {
  gs_err e = {0};
  CHECK_OK(gs_topk_unpack(out, gs_topk_bytes(k, n), k, n, dense, &e), &e);
  memset(kept, 0, n);
  if (gs_topk_sparse(k, n)) {
    uint32_t prev = 0;
    for (size_t j = 0; j < k; j++) {
      uint32_t i;
      memcpy(&i, (const uint8_t *)out + 4 * j, 4);
      CHECK(j == 0 || i > prev, "index %u after %u", i, prev);
      prev = i;
      kept[i] = 1;
    }
  }
}

/* One bucket in the middle of a larger buffer, against the reference. */
static void test_select(double fraction) {
  const size_t n = 3000, off = 700, cnt = 1500;
  float *g = calloc(n, sizeof *g), *sum = calloc(n, sizeof *sum), *dense = malloc(cnt * 4);
  size_t *order = malloc(cnt * sizeof *order);
  unsigned char *kept = malloc(cnt), *want = malloc(cnt);
  uint8_t *out = malloc(cnt * 8 + 8);
  gs_topk *t;
  gs_err e = {0};
  REQUIRE(g && sum && dense && order && kept && want && out, "out of memory");
  CHECK_OK(gs_topk_create(fraction, n, cnt, &t, &e), &e);
  size_t k = gs_topk_count(fraction, cnt);
  for (int step = 0; step < 6; step++) {
    /* small integers: many equal magnitudes, both signs, zeros */
    for (size_t i = 0; i < n; i++) g[i] = (float)((int)(next() % 11) - 5) * 0.25f;
    for (size_t i = 0; i < cnt; i++) {
      float r = gs_topk_residual(t, off + i);
      sum[i] = r == 0.0f ? g[off + i] : g[off + i] + r;
      order[i] = i;
    }
    ref_vals = sum;
    qsort(order, cnt, sizeof *order, by_rank);
    memset(want, 0, cnt);
    for (size_t j = 0; j < k; j++) want[order[j]] = 1;
    CHECK(gs_topk_select(t, g, off, cnt, out) == k, "k");
    decode(out, k, cnt, dense, kept);
    bool sparse = gs_topk_sparse(k, cnt);
    size_t bad = 0;
    for (size_t i = 0; i < cnt; i++) {
      float r = gs_topk_residual(t, off + i);
      if (sparse && kept[i] != want[i]) bad++;
      if (want[i] && (mag(dense[i]) != mag(sum[i]) || dense[i] != sum[i] || r != 0.0f)) bad++;
      if (!want[i] && (dense[i] != 0.0f || memcmp(&r, &sum[i], 4))) bad++;
    }
    CHECK(bad == 0, "topk:%g step %d: %zu entries differ from the reference", fraction, step,
          bad);
  }
  /* the buffer outside the bucket has no residual */
  for (size_t i = 0; i < n; i++)
    if (i < off || i >= off + cnt) CHECK(gs_topk_residual(t, i) == 0.0f, "residual at %zu", i);
  gs_topk_destroy(t);
  free(g), free(sum), free(dense), free(order), free(kept), free(want), free(out);
}

static void test_ties(void) {
  const size_t n = 10;
  float g[10] = {1, -1, 1, -1, 1, -1, 1, -1, 1, -1};
  uint8_t out[80];
  gs_topk *t;
  gs_err e = {0};
  CHECK_OK(gs_topk_create(0.3, n, n, &t, &e), &e);
  CHECK(gs_topk_select(t, g, 0, n, out) == 3, "k 3");
  uint32_t idx[3];
  memcpy(idx, out, sizeof idx);
  CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2, "equal magnitudes kept %u %u %u", idx[0],
        idx[1], idx[2]);
  gs_topk_destroy(t);
  /* NaN above inf above everything; -0 and +0 are equal (the lower index) */
  float h[10] = {0.0f, -0.0f, 3, INFINITY, NAN, -2, 0, 0, 0, 0};
  CHECK_OK(gs_topk_create(0.2, n, n, &t, &e), &e);
  gs_topk_select(t, h, 0, n, out);
  memcpy(idx, out, 2 * sizeof *idx);
  CHECK(idx[0] == 3 && idx[1] == 4, "NaN and inf not kept first: %u %u", idx[0], idx[1]);
  gs_topk_destroy(t);
  float z[10] = {-0.0f, 0.0f, -0.0f, 0, 0, 0, 0, 0, 0, 0};
  CHECK_OK(gs_topk_create(0.1, n, n, &t, &e), &e);
  gs_topk_select(t, z, 0, n, out);
  memcpy(idx, out, sizeof *idx);
  CHECK(idx[0] == 0, "all zeros: kept %u, not the lowest index", idx[0]);
  gs_topk_destroy(t);
}

/* Error feedback: nothing is lost over the steps. */
static void test_feedback(void) {
  const size_t n = 4096;
  const int steps = 60;
  float *g = malloc(n * 4), *before = malloc(n * 4), *dense = malloc(n * 4);
  double *sent = calloc(n, sizeof *sent), *truth = calloc(n, sizeof *truth);
  uint8_t *out = malloc(n * 8);
  gs_topk *t;
  gs_err e = {0};
  REQUIRE(g && before && dense && sent && truth && out, "out of memory");
  CHECK_OK(gs_topk_create(0.05, n, n, &t, &e), &e);
  size_t k = gs_topk_count(0.05, n), exact_bad = 0;
  double scale = 0;
  for (int s = 0; s < steps; s++) {
    for (size_t i = 0; i < n; i++) {
      /* a few large coordinates and a drift everywhere */
      double u = (double)(next() >> 11) / 9007199254740992.0 - 0.5;
      g[i] = (float)(u * (i % 97 == 0 ? 10.0 : 1.0) + 0.01);
      truth[i] += g[i];
      scale += fabs(g[i]);
      before[i] = gs_topk_residual(t, i);
    }
    gs_topk_select(t, g, 0, n, out);
    CHECK_OK(gs_topk_unpack(out, gs_topk_bytes(k, n), k, n, dense, &e), &e);
    for (size_t i = 0; i < n; i++) {
      sent[i] += dense[i];
      float r = gs_topk_residual(t, i);
      float want = before[i] == 0.0f ? g[i] : g[i] + before[i];
      /* one of the two is zero, the other the float g + old residual */
      float got = dense[i] != 0.0f ? dense[i] : r;
      if ((dense[i] != 0.0f && r != 0.0f) || memcmp(&got, &want, 4)) exact_bad++;
    }
  }
  CHECK(exact_bad == 0, "%zu entries: sent + residual is not g + old residual", exact_bad);
  double worst = 0, moved = 0;
  size_t never = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs(sent[i] + gs_topk_residual(t, i) - truth[i]);
    if (d > worst) worst = d;
    moved += fabs(sent[i]);
    never += sent[i] == 0;
  }
  printf("feedback: %d steps of %zu gradients at topk:0.05: sent + residual - sum of gradients "
         "at most %.3g (sum of |g| %.3g); %zu entries never sent\n", steps, n, worst, scale,
         never);
  CHECK(worst <= 1e-4, "sent + residual is %.3g away from the sum of the gradients", worst);
  CHECK(moved > 0.5 * scale / steps, "too little was sent: %.3g", moved);
  gs_topk_destroy(t);
  free(g), free(before), free(dense), free(sent), free(truth), free(out);
}

static void test_all(void) {
  float g[6] = {-0.0f, 1.5f, -2.25f, 0.0f, 1e-30f, -7.0f};
  uint8_t out[48];
  gs_topk *t;
  gs_err e = {0};
  CHECK_OK(gs_topk_create(1.0, 6, 6, &t, &e), &e);
  for (int s = 0; s < 3; s++) {
    CHECK(gs_topk_select(t, g, 0, 6, out) == 6, "k 6");
    CHECK(!memcmp(out, g, sizeof g), "topk:1 step %d did not send the gradient's own bits", s);
    for (int i = 0; i < 6; i++) CHECK(gs_topk_residual(t, (size_t)i) == 0.0f, "residual");
  }
  gs_topk_destroy(t);
}

static void put(uint8_t *p, size_t j, uint32_t i, float v, size_t k) {
  memcpy(p + 4 * j, &i, 4);
  memcpy(p + 4 * k + 4 * j, &v, 4);
}

static void test_unpack(void) {
  const size_t n = 100, k = 3;
  uint8_t raw[8 * 3 + 1], *p = raw + 1; /* unaligned on purpose */
  float dense[100];
  gs_err e = {0};
  put(p, 0, 5, 1.0f, k), put(p, 1, 17, -2.0f, k), put(p, 2, 99, 3.0f, k);
  CHECK_OK(gs_topk_unpack(p, 24, k, n, dense, &e), &e);
  CHECK(dense[5] == 1.0f && dense[17] == -2.0f && dense[99] == 3.0f && dense[0] == 0.0f &&
        dense[98] == 0.0f, "unpacked wrong");
  struct {
    uint32_t i2;
    size_t bytes, k;
    const char *needle;
  } bad[] = {
    {100, 24, 3, "index 100, outside"},
    {17, 24, 3, "after 17"},
    {4, 24, 3, "after 17"},
    {99, 23, 3, "23 bytes"},
    {99, 16, 3, "16 bytes"},
    {99, 24, 2, "24 bytes"},
  };
  for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
    put(p, 2, bad[c].i2, 3.0f, k);
    gs_err be = {0};
    CHECK(gs_topk_unpack(p, bad[c].bytes, bad[c].k, n, dense, &be) == GS_EPROTO &&
          strstr(be.msg, bad[c].needle), "case %zu: accepted or unclear: %s", c, be.msg);
  }
  gs_err be = {0};
  CHECK(gs_topk_unpack(p, 24, 3, 2, dense, &be) == GS_EPROTO && strstr(be.msg, "no more"),
        "more entries than the bucket: %s", be.msg);
  CHECK(gs_topk_unpack(NULL, 0, 1, 10, dense, &be) == GS_EPROTO, "no payload accepted");
  /* the dense form: its size only */
  float d4[4] = {1, 2, 3, 4};
  CHECK_OK(gs_topk_unpack(d4, 16, 2, 4, dense, &e), &e);
  CHECK(dense[0] == 1 && dense[3] == 4, "dense form");
  CHECK(gs_topk_unpack(d4, 16, 1, 4, dense, &be) == GS_EPROTO, "dense bytes for a sparse k");
}

int main(void) {
  test_spec();
  test_count();
  test_select(0.01);
  test_select(0.1);
  test_select(0.45);
  test_select(0.7);
  test_select(1.0);
  test_ties();
  test_feedback();
  test_all();
  test_unpack();
  return check_done("test_topk");
}
