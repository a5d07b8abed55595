/* test_gather.c: the measurements' wire form (bench/job/gather.c).
 *
 *  - rows and spans packed by a rank in parts come back bit for bit at
 *    rank 0 (names that fill their 24 bytes included);
 *  - rank 0 refuses, with a reason and without a crash, reports of more
 *    rows or spans than the job makes, counts that disagree between parts
 *    or with what came, parts out of order, rows of another rank or out of
 *    step order, malformed spans, truncated or corrupted bytes;
 *  - no part is larger than a rendezvous frame. */
#include <stdlib.h>
#include <string.h>

#include "bench/job/job.h"
#include "proto/proto.h"
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

/* A's report as it travels: parts of at most cap bytes, each with its
 * Stats header. */
typedef struct report {
  Gradsync__Stats st[512];
  uint8_t *data[512];
  size_t len[512];
  int n;
} report;

static void pack_report(const gs_rank_result *a, size_t cap, report *r) {
  size_t row = 0, span = 0;
  gs_err e = {0};
  r->n = 0;
  do {
    REQUIRE(r->n < 512, "too many parts");
    Gradsync__Stats *st = &r->st[r->n];
    gradsync__stats__init(st);
    st->steps = a->nrows;
    st->spans = a->nspans;
    st->host = "h";
    st->part = (uint32_t)r->n;
    r->data[r->n] = malloc(cap);
    CHECK_OK(gs_measurements_pack_part(a, &row, &span, r->data[r->n], cap, &r->len[r->n], &e),
             &e);
    st->last = row == a->nrows && span == a->nspans;
    r->n++;
  } while (!r->st[r->n - 1].last);
}

static void free_report(report *r) {
  for (int i = 0; i < r->n; i++) free(r->data[i]);
}

static const gs_gather_limits roomy = {.rows = 1000, .spans = 1000};

/* Rank `rank`'s report r into b: 1 accepted whole, 0 refused (b->error
 * says why), -1 still waiting for parts. */
static int take_all(const report *r, int rank, const gs_gather_limits *lim, gs_rank_result *b) {
  *b = (gs_rank_result){.rank = rank};
  gs_err e = {0};
  for (int i = 0; i < r->n; i++) {
    int rc = gs_gather_take(&r->st[i], r->data[i], r->len[i], lim, b, &e);
    CHECK(rc >= 0, "%s", e.msg);
    if (rc == 1) return b->failed ? 0 : 1;
  }
  return -1;
}

static void round_trip(void) {
  gs_rank_result a = mine(3, 100, 57), b;
  report r;
  pack_report(&a, 1000, &r);
  CHECK(r.n > 10, "only %d parts of at most 1000 bytes", r.n);
  CHECK(take_all(&r, 3, &roomy, &b) == 1, "%s", b.error);
  CHECK(b.nrows == 100 && b.nspans == 57);
  CHECK(b.rows && !memcmp(a.rows, b.rows, 100 * sizeof *a.rows));
  CHECK(b.spans && !memcmp(a.spans, b.spans, 57 * sizeof *a.spans));
  gs_rank_result_free(&b);

  /* the counts must stay within what the job makes */
  gs_gather_limits few = {.rows = 99, .spans = 1000};
  CHECK(take_all(&r, 3, &few, &b) == 0 && strstr(b.error, "more than this job makes") &&
        !b.rows, "%s", b.error);
  /* another rank's rows */
  CHECK(take_all(&r, 2, &roomy, &b) == 0 && strstr(b.error, "rank"), "%s", b.error);
  /* the header's counts must match what comes */
  for (int i = 0; i < r.n; i++) r.st[i].steps = 101;
  CHECK(take_all(&r, 3, &roomy, &b) == 0 && strstr(b.error, "promised"), "%s", b.error);
  for (int i = 0; i < r.n; i++) r.st[i].steps = 100;
  r.st[r.n - 1].spans = 58; /* a later part promising more than the first */
  CHECK(take_all(&r, 3, &roomy, &b) == 0 && strstr(b.error, "part 0"), "%s", b.error);
  r.st[r.n - 1].spans = 57;
  /* parts out of order, or missing */
  Gradsync__Stats keep = r.st[1];
  r.st[1] = r.st[2];
  CHECK(take_all(&r, 3, &roomy, &b) == 0 && strstr(b.error, "was due"), "%s", b.error);
  r.st[1] = keep;
  /* truncated parts: refused, or a shorter part the counts then refuse */
  for (int p = 0; p < r.n; p += 3) {
    size_t len = r.len[p];
    for (size_t cut = 0; cut < len; cut += 1 + cut / 4) {
      r.len[p] = cut;
      CHECK(take_all(&r, 3, &roomy, &b) == 0, "part %d cut to %zu of %zu bytes accepted", p,
            cut, len);
      gs_rank_result_free(&b);
    }
    r.len[p] = len;
  }
  /* corrupted bytes: never a crash; whatever passes holds the counts */
  uint64_t x = 88172645463325252ull;
  for (int k = 0; k < 2000; k++) {
    int p = (int)(x % (uint64_t)r.n);
    uint8_t *c = r.data[p], *saved = malloc(r.len[p] + 1);
    memcpy(saved, c, r.len[p]);
    for (int n = 0; n < 4; n++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c[x % r.len[p]] ^= (uint8_t)(x >> 32);
    }
    if (take_all(&r, 3, &roomy, &b) == 1) CHECK(b.nrows == 100 && b.nspans == 57);
    gs_rank_result_free(&b);
    memcpy(c, saved, r.len[p]);
    free(saved);
  }
  free_report(&r);
  gs_rank_result_free(&a);
}

/* a's measurements, packed and read back as rank 1's, must be refused
 * with a reason that says what */
static void refused(const gs_rank_result *a, const char *what) {
  report r;
  gs_rank_result b;
  pack_report(a, GS_RDV_FRAME_MAX, &r);
  CHECK(take_all(&r, 1, &roomy, &b) == 0 && strstr(b.error, what) && !b.rows, "%s: \"%s\"",
        what, b.error);
  gs_rank_result_free(&b);
  free_report(&r);
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
  /* nothing at all is zero rows and zero spans, in one part */
  gs_rank_result none = {.rank = 1}, b;
  report r;
  pack_report(&none, 64, &r);
  CHECK(r.n == 1 && take_all(&r, 1, &roomy, &b) == 1 && b.nrows == 0);
  gs_rank_result_free(&b);
  r.st[0].steps = 1;
  CHECK(take_all(&r, 1, &roomy, &b) == 0);
  gs_rank_result_free(&b);
  free_report(&r);
}

/* A part is at most a frame: however many rows a rank made, none of its
 * parts is larger, and a part whose rows protobuf expands most (empty
 * rows, two bytes each) stays a few MiB once decoded. */
static void parts_are_small(void) {
  gs_rank_result a = mine(2, 3000, 5000);
  report r;
  pack_report(&a, GS_RDV_FRAME_MAX - 64, &r);
  for (int i = 0; i < r.n; i++) CHECK(r.len[i] <= GS_RDV_FRAME_MAX - 64);
  gs_rank_result b;
  gs_gather_limits lim = {.rows = 3000, .spans = 5000};
  CHECK(take_all(&r, 2, &lim, &b) == 1 && b.nrows == 3000 && b.nspans == 5000, "%s", b.error);
  gs_rank_result_free(&b);
  free_report(&r);
  gs_rank_result_free(&a);
}

int main(void) {
  round_trip();
  malformed();
  parts_are_small();
  return check_done("test_gather");
}
