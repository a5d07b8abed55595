/* test_summary_buckets.c: each bucket's timing (bench/report/summary_buckets.c) on
 * synthetic rows and spans whose answer is known by construction.
 *
 *  - 2 ranks, 4 steps (the first one warm-up), 2 buckets; every step lasts
 *    1 s from t_start, compute (data + forward + backward) ends at 0.6 s;
 *    bucket 0 is ready at 0.4 s and communicates in two spans 0.45-0.5 and
 *    0.55-0.7 (0.15 of its 0.2 s inside compute); bucket 1 is ready at 0.6
 *    and communicates 0.62-0.9; rank 1 runs 0.01 s later in every mark,
 *    the warm-up step at other times, and the optimizer span (bucket 0)
 *    must not count;
 *  - the means over steps and ranks, backward's start and end;
 *  - world 1 and a run without spans have no timings;
 *  - each bucket's readiness as a fraction of backward, for the cost model;
 *  - report.json's "bucket_timing" goes out and comes back, null stays
 *    null, and a missing or malformed one is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"
#include "tests/check.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9)

enum { STEPS = 4, NSP = 5 };

static void span(gs_span *s, const char *name, int bucket, double t0, double t1, int track) {
  *s = (gs_span){.t0 = t0, .t1 = t1, .track = track, .bucket = bucket};
  snprintf(s->name, sizeof s->name, "%s", name);
}

static void make(gs_rank_result *r, int rank) {
  memset(r, 0, sizeof *r);
  r->rank = rank;
  r->nrows = STEPS;
  r->rows = calloc(STEPS, sizeof *r->rows);
  r->spans = calloc(STEPS * NSP + 1, sizeof *r->spans);
  double d = 0.01 * rank;
  for (int s = 0; s < STEPS; s++) {
    double a = 100 + s;
    r->rows[s] = (gs_step_row){.step = s, .t_start = a, .t_end = a + 1, .step_s = 1,
                               .data_s = 0.1, .forward_s = 0.2, .backward_s = 0.3, .samples = 1};
    double w = s == 0 ? 0.2 : 0; /* the warm-up step's marks differ */
    gs_span *sp = &r->spans[r->nspans];
    span(sp++, "ready", 0, a + 0.4 + d + w, a + 0.4 + d + w, 0);
    span(sp++, "reduce-scatter", 0, a + 0.45 + d, a + 0.5 + d, 1);
    span(sp++, "all-gather", 0, a + 0.55 + d, a + 0.7 + d, 1);
    span(sp++, "ready", 1, a + 0.6 + d, a + 0.6 + d, 0);
    span(sp++, "reduce-scatter", 1, a + 0.62 + d, a + 0.9 + d, 1);
    r->nspans += NSP;
  }
  /* the optimizer, tagged with a bucket: not communication */
  span(&r->spans[r->nspans++], "optimizer", 0, 100 + 1.9, 100 + 1.99, 1);
}

/* a run of the sweep: its bucket size, buckets, median step, wait (s) */
static gs_summary sweep_run(double mb, int nb, double step, double wait, gs_rank_summary *pr,
                            gs_bucket_timing *bt) {
  *pr = (gs_rank_summary){.comm_wait_s = wait};
  *bt = (gs_bucket_timing){.bucket = 0, .comm_end_s = step};
  return (gs_summary){.mode = GS_MODE_ALLREDUCE, .world = 2, .model = "m", .batch = 8,
                      .bucket_mb = mb, .nbuckets = nb, .step_time_s_median = step,
                      .per_rank = pr, .nrepeats = 1, .bucket_timing = bt, .nbucket_timing = 1,
                      .backward_end_s = step / 2};
}

/* the verdict names the lowest median and gives each other size its reason */
static void verdict(void) {
  gs_rank_summary pr[4];
  gs_bucket_timing bt[4];
  gs_summary runs[4] = {sweep_run(1, 30, 0.200, 0.05, &pr[0], &bt[0]),
                        sweep_run(5, 10, 0.100, 0.02, &pr[1], &bt[1]),
                        sweep_run(25, 10, 0.103, 0.02, &pr[2], &bt[2]),
                        sweep_run(100, 2, 0.150, 0.06, &pr[3], &bt[3])};
  char text[4096];
  gs_bucket_verdict(runs, 4, text, sizeof text);
  printf("%s\n", text);
  CHECK(strstr(text, "ring world 2, m, loopback: best bucket size measured 5 MiB"));
  CHECK(strstr(text, "1 MiB: 200 ms (+100%), 30 buckets against 10: each pays the collective's "
                     "fixed costs"));
  CHECK(strstr(text, "25 MiB: 103 ms (+3%), within 5% of the best: too close to call"));
  CHECK(strstr(text, "100 MiB: 150 ms (+50%), 2 buckets against 10: the last is ready only "
                     "when backward ends and its communication ends 75 ms after backward "
                     "(50 ms at 5 MiB)."), "%s", text);
  CHECK(!strstr(text, "most of the step"));
  /* repetitions: 3% apart is then a measured difference of the same plan */
  for (int i = 0; i < 4; i++) runs[i].nrepeats = 3;
  gs_bucket_verdict(runs, 4, text, sizeof text);
  CHECK(strstr(text, "25 MiB: 103 ms (+3%), the same 10 buckets"), "%s", text);
  /* communication-bound: said so */
  pr[1].comm_wait_s = 0.09;
  gs_bucket_verdict(runs, 4, text, sizeof text);
  CHECK(strstr(text, "Communication is most of the step (90%)"), "%s", text);
  /* one size only: nothing to say */
  gs_bucket_verdict(runs, 1, text, sizeof text);
  CHECK(text[0] == 0);
}

int main(void) {
  verdict();
  gs_rank_result rr[2];
  make(&rr[0], 0);
  make(&rr[1], 1);
  size_t bytes[2] = {1000, 3000};
  gs_run_info info = {.mode = GS_MODE_ALLREDUCE, .world = 2, .nbuckets = 2, .bucket_bytes = bytes};
  gs_summary s;
  memset(&s, 0, sizeof s);
  gs_err e = {0};
  CHECK_OK(gs_summary_buckets(&info, rr, 1, STEPS, &s, &e), &e);
  CHECK(s.nbucket_timing == 2);
  if (s.nbucket_timing == 2) {
    const gs_bucket_timing *b0 = &s.bucket_timing[0], *b1 = &s.bucket_timing[1];
    CHECK(b0->bucket == 0 && b1->bucket == 1 && b0->bytes == 1000 && b1->bytes == 3000);
    CHECK(NEAR(b0->ready_s, 0.405) && NEAR(b1->ready_s, 0.605), "%g %g", b0->ready_s,
          b1->ready_s);
    CHECK(NEAR(b0->comm_start_s, 0.455) && NEAR(b0->comm_end_s, 0.705), "%g %g",
          b0->comm_start_s, b0->comm_end_s);
    CHECK(NEAR(b0->comm_s, 0.2), "%g", b0->comm_s);
    /* inside [0, 0.6]: rank 0 0.05 + 0.05, rank 1 0.05 + 0.04 */
    CHECK(NEAR(b0->hidden_s, 0.095), "%g", b0->hidden_s);
    CHECK(NEAR(b1->comm_start_s, 0.625) && NEAR(b1->comm_end_s, 0.905) &&
          NEAR(b1->comm_s, 0.28) && NEAR(b1->hidden_s, 0), "%g %g %g %g", b1->comm_start_s,
          b1->comm_end_s, b1->comm_s, b1->hidden_s);
    CHECK(NEAR(s.backward_start_s, 0.3) && NEAR(s.backward_end_s, 0.6));
    /* as fractions of backward for the cost model: bucket 1's mark came
       5 ms after backward's end, and counts as its end */
    double fr[2];
    CHECK_OK(gs_bucket_ready_fractions(&s, 2, fr, &e), &e);
    CHECK(NEAR(fr[0], 0.35) && fr[1] == 1.0, "%g %g", fr[0], fr[1]);
    CHECK(gs_bucket_ready_fractions(&s, 3, fr, &e) == GS_EINVAL && strstr(e.msg, "2 of 3"));
    gs_err_clear(&e);
  }

  json_t *j = gs_bucket_timing_json(&s);
  json_t *run = json_pack("{s:o}", "bucket_timing", j);
  gs_summary back;
  memset(&back, 0, sizeof back);
  CHECK_OK(gs_bucket_timing_read(run, "r", &back, &e), &e);
  CHECK(back.nbucket_timing == s.nbucket_timing && back.backward_end_s == s.backward_end_s);
  for (int i = 0; i < back.nbucket_timing && i < s.nbucket_timing; i++)
    CHECK(!memcmp(&back.bucket_timing[i], &s.bucket_timing[i], sizeof back.bucket_timing[i]),
          "bucket %d differs after JSON", i);
  free(back.bucket_timing);
  json_object_set_new(json_object_get(run, "bucket_timing"), "buckets", json_string("x"));
  CHECK(gs_bucket_timing_read(run, "r", &back, &e) == GS_EPROTO &&
        strstr(e.msg, "bucket_timing"));
  free(back.bucket_timing);
  json_object_del(run, "bucket_timing");
  gs_err_clear(&e);
  CHECK(gs_bucket_timing_read(run, "r", &back, &e) == GS_EPROTO && strstr(e.msg, "missing"));
  json_decref(run);
  free(s.bucket_timing);

  /* world 1, and spans of no bucket: nothing, and null in JSON */
  info.world = 1;
  CHECK_OK(gs_summary_buckets(&info, rr, 1, STEPS, &s, &e), &e);
  CHECK(s.nbucket_timing == 0 && !s.bucket_timing);
  info.world = 2;
  for (int r = 0; r < 2; r++)
    for (size_t i = 0; i < rr[r].nspans; i++) rr[r].spans[i].bucket = -1;
  CHECK_OK(gs_summary_buckets(&info, rr, 1, STEPS, &s, &e), &e);
  CHECK(s.nbucket_timing == 0);
  j = gs_bucket_timing_json(&s);
  CHECK(json_is_null(j));
  run = json_pack("{s:o}", "bucket_timing", j);
  CHECK_OK(gs_bucket_timing_read(run, "r", &back, &e), &e);
  CHECK(back.nbucket_timing == 0);
  json_decref(run);
  for (int r = 0; r < 2; r++) {
    free(rr[r].rows);
    free(rr[r].spans);
  }
  return check_done("bench_buckets");
}
