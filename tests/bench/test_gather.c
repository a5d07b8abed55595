/* test_gather.c: the measurements' wire form (bench/gather.c).
 *
 *  - rows and spans packed by a rank come back bit for bit at rank 0
 *    (names that fill their 24 bytes included);
 *  - rank 0 refuses, with a reason and without a crash, measurements whose
 *    counts disagree with the header, rows of another rank or out of step
 *    order, malformed spans, truncated or corrupted bytes, and counts that
 *    would overflow a size computation. */
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"
#include "tests/check.h"

static gs_rank_result mine(int rank, size_t nrows, size_t nspans) {
  gs_rank_result r = {.rank = rank, .nrows = nrows, .nspans = nspans};
  r.rows = calloc(nrows + 1, sizeof *r.rows);
  r.spans = calloc(nspans + 1, sizeof *r.spans);
  for (size_t i = 0; i < nrows; i++) {
    gs_step_row *x = &r.rows[i];
    x->step = (int64_t)i;
    x->rank = rank;
    x->epoch = (int32_t)(i / 7);
    x->t_start = 1.7e9 + (double)i / 3;
    x->t_end = x->t_start + 0.125;
    x->step_s = 0.1 / (double)(i + 1);
    x->data_s = 1e-9 * (double)i;
    x->forward_s = 3.25e-3;
    x->backward_s = 1.0 / 7;
    x->wait_s = 2e-4;
    x->reduce_s = 5e-5;
    x->update_s = 6e-6;
    x->bytes_sent = 1ull << 40 | i;
    x->bytes_recv = UINT64_MAX - i;
    x->loss = 2.5f / (float)(i + 1);
    x->scale = 65536.0f;
    x->skipped = i % 3 == 0;
    x->correct = (int32_t)i;
    x->samples = 64;
    x->rss_bytes = 123456789ull * i;
    x->has_server = i % 2;
    x->server_reduce_s = 1e-3;
    x->server_update_s = 2e-3;
    x->server_bytes_sent = 77;
    x->server_bytes_recv = 88;
    x->param_hash = 0x9e3779b97f4a7c15ull * (i + 1); /* --verify's, all 64 bits */
  }
  for (size_t i = 0; i < nspans; i++) {
    gs_span *s = &r.spans[i];
    s->t0 = 1.7e9 + (double)i;
    s->t1 = s->t0 + 1e-6;
    s->track = (int32_t)(i % 2);
    s->bucket = (int32_t)i % 5 - 1;
    if (i % 4 == 0) memcpy(s->name, "a-name-of-24-characters!", 24); /* no NUL */
    else snprintf(s->name, sizeof s->name, "span%d", (int)(i % 1000));
  }
  return r;
}

static void round_trip(void) {
  gs_rank_result a = mine(3, 100, 57), b = {.rank = 3};
  uint8_t *buf;
  size_t len;
  gs_err e = {0};
  char why[256] = "";
  CHECK_OK(gs_measurements_pack(&a, &buf, &len, &e), &e);
  CHECK(gs_measurements_unpack(buf, len, 100, 57, 3, &b, why, sizeof why) == GS_OK, "%s", why);
  CHECK(b.nrows == 100 && b.nspans == 57);
  CHECK(b.rows && !memcmp(a.rows, b.rows, 100 * sizeof *a.rows));
  CHECK(b.spans && !memcmp(a.spans, b.spans, 57 * sizeof *a.spans));
  gs_rank_result_free(&b);

  /* the header's counts must match */
  b = (gs_rank_result){.rank = 3};
  CHECK(gs_measurements_unpack(buf, len, 99, 57, 3, &b, why, sizeof why) == GS_EPROTO &&
        strstr(why, "header") && !b.rows);
  CHECK(gs_measurements_unpack(buf, len, 100, UINT64_MAX, 3, &b, why, sizeof why) == GS_EPROTO);
  /* another rank's rows */
  CHECK(gs_measurements_unpack(buf, len, 100, 57, 2, &b, why, sizeof why) == GS_EPROTO &&
        strstr(why, "rank"));
  /* truncated: every prefix is refused or, where protobuf allows it, a
   * shorter report that the header's counts then refuse */
  for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
    b = (gs_rank_result){.rank = 3};
    CHECK(gs_measurements_unpack(buf, cut, 100, 57, 3, &b, why, sizeof why) == GS_EPROTO,
           "%zu of %zu bytes accepted", cut, len);
    gs_rank_result_free(&b);
  }
  /* corrupted bytes: never a crash; whatever passes holds the counts */
  uint64_t x = 88172645463325252ull;
  for (int k = 0; k < 2000; k++) {
    uint8_t *c = malloc(len);
    memcpy(c, buf, len);
    for (int n = 0; n < 4; n++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c[x % len] ^= (uint8_t)(x >> 32);
    }
    b = (gs_rank_result){.rank = 3};
    if (gs_measurements_unpack(c, len, 100, 57, 3, &b, why, sizeof why) == GS_OK)
      CHECK(b.nrows == 100 && b.nspans == 57);
    gs_rank_result_free(&b);
    free(c);
  }
  free(buf);
  gs_rank_result_free(&a);
}

/* a's measurements, packed and read back as rank 1's, must be refused
 * with a reason that says what */
static void refused(const gs_rank_result *a, const char *what) {
  char why[256] = "";
  uint8_t *buf;
  size_t len;
  gs_err e = {0};
  gs_rank_result b = {.rank = 1};
  CHECK_OK(gs_measurements_pack(a, &buf, &len, &e), &e);
  int rc = gs_measurements_unpack(buf, len, a->nrows, a->nspans, 1, &b, why, sizeof why);
  CHECK(rc == GS_EPROTO && strstr(why, what) && !b.rows, "%s: rc %d, \"%s\"", what, rc, why);
  gs_rank_result_free(&b);
  free(buf);
}

static void malformed(void) {
  gs_rank_result a = mine(1, 5, 2);
  a.rows[3].step = 7; /* rows out of step order */
  refused(&a, "step 7");
  a.rows[3].step = 3;
  a.spans[1].track = -3; /* a span of a negative track, or a bucket below -1 */
  refused(&a, "span 1");
  a.spans[1].track = 0;
  a.spans[0].bucket = -2;
  refused(&a, "span 0");
  gs_rank_result_free(&a);
  /* nothing at all is zero rows and zero spans, and only that */
  char why[256];
  gs_rank_result b = {.rank = 1};
  CHECK(gs_measurements_unpack(NULL, 0, 0, 0, 1, &b, why, sizeof why) == GS_OK && b.nrows == 0);
  gs_rank_result_free(&b);
  CHECK(gs_measurements_unpack(NULL, 0, 1, 0, 1, &b, why, sizeof why) == GS_EPROTO);
}

int main(void) {
  round_trip();
  malformed();
  return check_done("test_gather");
}
