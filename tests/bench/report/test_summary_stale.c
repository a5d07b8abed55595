/* test_summary_stale.c: what a summary shows of stragglers and stale
 * models (report.h gs_stale_summary, bench/costmodel/stragglers.c), on rows
 * built by hand so that every figure is known:
 *  - throughput of a stale run: samples applied while every rank trains,
 *    over that window's wall time, not the sum of per-step maxima (which
 *    adds up steps of different ranks that did not run at the same time);
 *    a dropped gradient is not applied; a synchronous run keeps samples
 *    over the sum of step times;
 *  - the staleness histogram counts every applied gradient by staleness;
 *  - who waited for whom: the wait goes to the rank that was still
 *    computing, as long as it was, the rest to the backend; under ssp:K
 *    the awaited update is step s-K's; async waits only on the server;
 *  - the loss curve, the target from the synchronous run (1.10 x its final
 *    smoothed loss) or --target-loss, the time to it, never when missed;
 *  - the straggler model's figures for sync, backup, ssp and async, and
 *    that noise costs the synchronous models more than ssp;
 *  - the stale members go out to JSON and come back equal. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"
#include "tests/check.h"

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-9 * (1 + fabs((double)(b))))

static gs_rank_result *ranks_of(int world, int steps) {
  gs_rank_result *rr = calloc((size_t)world, sizeof *rr);
  for (int r = 0; r < world; r++) {
    rr[r].rank = r;
    rr[r].nrows = (size_t)steps;
    rr[r].rows = calloc((size_t)steps, sizeof(gs_step_row));
    for (int t = 0; t < steps; t++) {
      rr[r].rows[t].rank = r;
      rr[r].rows[t].step = t;
      rr[r].rows[t].loss = 1;
    }
  }
  return rr;
}

static void free_ranks(gs_rank_result *rr, int world) {
  for (int r = 0; r < world; r++) free(rr[r].rows);
  free(rr);
}

static gs_run_info info_of(gs_mode mode, int world) {
  gs_run_info in = {.mode = mode, .world = world, .model = "mlp:4-2", .data = "synthetic",
                    .batch = 10, .bucket_mb = 25, .nparams = 10, .nbuckets = 1,
                    .accuracy = NAN, .eval_loss = NAN, .heldout_accuracy = NAN,
                    .heldout_loss = NAN, .ring_period = 1, .ps_servers = 1};
  return in;
}

/* rank r's step t: every step of rank r takes len[r] seconds back to back
 * from 100 s, all of it computing but wait */
static void timed(gs_rank_result *rr, int world, int steps, const double *len) {
  for (int r = 0; r < world; r++)
    for (int t = 0; t < steps; t++) {
      gs_step_row *x = &rr[r].rows[t];
      x->t_start = 100 + t * len[r];
      x->step_s = len[r];
      x->t_end = x->t_start + len[r];
      x->forward_s = len[r];
      x->samples = 10;
    }
}

static void throughput(void) {
  gs_rank_result *rr = ranks_of(2, 10);
  double len[2] = {1, 2};
  timed(rr, 2, 10, len);
  gs_err e = {0};
  gs_summary s;
  /* ssp:1: the window is [100, 110]: rank 0's 10 steps, rank 1's first 5 */
  gs_run_info in = info_of(GS_MODE_PS, 2);
  in.ps_sync = (gs_ps_sync){.model = GS_PS_SSP, .staleness = 1};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  CHECK(!strcmp(s.stale.throughput_basis, "window"), "basis %s", s.stale.throughput_basis);
  CHECK(NEAR(s.throughput_samples_per_s, 150.0 / 10), "ssp throughput %g, expected 15",
        s.throughput_samples_per_s);
  CHECK(NEAR(s.repeat_throughput[0], s.throughput_samples_per_s));
  gs_summary_free(&s);
  /* a dropped gradient (backup workers) is not applied; a step half in
   * the window counts half */
  rr[0].rows[3].staleness = -1;
  rr[1].rows[5].t_start = 109;
  in.ps_sync = (gs_ps_sync){.backup_on = true, .backup = 1};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  CHECK(NEAR(s.throughput_samples_per_s, (90 + 50 + 10 * (1.0 / 3)) / 10), "backup %g",
        s.throughput_samples_per_s);
  CHECK(s.dropped_gradients == 1);
  gs_summary_free(&s);
  rr[1].rows[5].t_start = 110;
  rr[0].rows[3].staleness = 0;
  /* bsp: samples over the sum of per-step maxima, as before */
  in.ps_sync = (gs_ps_sync){0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  CHECK(!strcmp(s.stale.throughput_basis, "steps"));
  CHECK(NEAR(s.throughput_samples_per_s, 200.0 / 20), "bsp %g", s.throughput_samples_per_s);
  gs_summary_free(&s);
  /* ring averaging every 4 steps: ranks at different steps, the window */
  gs_run_info ring = info_of(GS_MODE_ALLREDUCE, 2);
  ring.ring_period = 4;
  CHECK_OK(gs_summarize(&ring, rr, &s, &e), &e);
  CHECK(NEAR(s.throughput_samples_per_s, 15), "ring period 4: %g", s.throughput_samples_per_s);
  gs_summary_free(&s);
  free_ranks(rr, 2);
}

static void histogram(void) {
  gs_rank_result *rr = ranks_of(3, 6);
  double len[3] = {1, 1, 1};
  timed(rr, 3, 6, len);
  int want[4] = {0};
  int dropped = 0;
  for (int r = 0; r < 3; r++)
    for (int t = 0; t < 6; t++) {
      int x = (r * 7 + t * 3) % 5 - 1; /* -1 .. 3 */
      rr[r].rows[t].staleness = x;
      if (x < 0) dropped++;
      else want[x]++;
    }
  gs_run_info in = info_of(GS_MODE_PS, 3);
  in.ps_sync = (gs_ps_sync){.model = GS_PS_ASYNC};
  gs_summary s;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  CHECK(s.stale.nhist == 4 && s.staleness_max == 3, "nhist %d", s.stale.nhist);
  for (int i = 0; i < 4 && s.stale.nhist == 4; i++)
    CHECK(s.stale.staleness_hist[i] == want[i], "staleness %d: %lld, expected %d", i,
          (long long)s.stale.staleness_hist[i], want[i]);
  CHECK(s.dropped_gradients == dropped);
  gs_summary_free(&s);
  free_ranks(rr, 3);
}

static void waits(void) {
  /* ring, world 3, one step: ready at 1, 2.5 and 3; each waits 3 s */
  gs_rank_result *rr = ranks_of(3, 2);
  double ready[3] = {1, 2.5, 3};
  for (int r = 0; r < 3; r++)
    for (int t = 0; t < 2; t++) {
      gs_step_row *x = &rr[r].rows[t];
      x->t_start = 10 * t;
      x->forward_s = ready[r];
      x->wait_s = 3;
      x->step_s = ready[r] + 3;
      x->t_end = x->t_start + x->step_s;
      x->samples = 10;
    }
  gs_run_info in = info_of(GS_MODE_ALLREDUCE, 3);
  gs_summary s;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  const double *w = s.stale.waited_for_s, *b = s.stale.waited_backend_s;
  /* rank 0 waited 2 s on rank 2, rank 1 0.5 s on rank 2, rank 2 on nobody */
  CHECK(NEAR(w[0 * 3 + 2], 2) && NEAR(b[0], 1) && w[0 * 3 + 1] == 0, "rank 0: %g %g", w[2],
        b[0]);
  CHECK(NEAR(w[1 * 3 + 2], 0.5) && NEAR(b[1], 2.5), "rank 1: %g %g", w[5], b[1]);
  CHECK(w[2 * 3 + 0] == 0 && w[2 * 3 + 1] == 0 && w[2 * 3 + 2] == 0 && NEAR(b[2], 3));
  gs_summary_free(&s);
  /* ssp:1: step 1's wait is for update 0, whose last gradient was rank
   * 2's; make rank 1 the latest of step 1 to see that step 0 decides */
  rr[1].rows[1].forward_s = 5;
  rr[2].rows[0].forward_s = 13;
  in = info_of(GS_MODE_PS, 3);
  in.ps_sync = (gs_ps_sync){.model = GS_PS_SSP, .staleness = 1};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  w = s.stale.waited_for_s;
  b = s.stale.waited_backend_s;
  /* step 0 (no update to wait for under the bound): the backend's; step 1:
   * ready 1 (rank 0) against rank 2's 3 at step 0 */
  CHECK(NEAR(w[0 * 3 + 2], 2.0 / 2) && w[0 * 3 + 1] == 0 && NEAR(b[0], (3 + 1) / 2.0),
        "ssp rank 0: on 2 %g, on 1 %g, server %g", w[2], w[1], b[0]);
  gs_summary_free(&s);
  /* async: every wait is the server's */
  in.ps_sync = (gs_ps_sync){.model = GS_PS_ASYNC};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  for (int r = 0; r < 3; r++) {
    CHECK(NEAR(s.stale.waited_backend_s[r], 3));
    for (int q = 0; q < 3; q++) CHECK(s.stale.waited_for_s[r * 3 + q] == 0);
  }
  gs_summary_free(&s);
  free_ranks(rr, 3);
}

/* a run whose loss falls from 2 by `fall` per step to `floor` */
static void summarize_falling(gs_mode mode, gs_ps_model m, double fall, double floor,
                              gs_summary *s) {
  int steps = 40;
  gs_rank_result *rr = ranks_of(2, steps);
  double len[2] = {1, 1};
  timed(rr, 2, steps, len);
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < steps; t++)
      rr[r].rows[t].loss = (float)fmax(floor, 2 - fall * t);
  gs_run_info in = info_of(mode, 2);
  in.ps_sync.model = m;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, s, &e), &e);
  free_ranks(rr, 2);
}

static void targets(void) {
  gs_summary runs[3];
  summarize_falling(GS_MODE_ALLREDUCE, GS_PS_BSP, 0.05, 0.5, &runs[0]);   /* 0.5 from step 30 */
  summarize_falling(GS_MODE_PS, GS_PS_ASYNC, 0.1, 0.5, &runs[1]);    /* 0.5 from step 15 */
  summarize_falling(GS_MODE_PS, GS_PS_SSP, 0.01, 1.0, &runs[2]);     /* never below 1.0 */
  /* the curve: 2 rows a step end together; the mean of the last 16 rows */
  const gs_stale_summary *c = &runs[0].stale;
  CHECK(c->nloss == 80 && NEAR(c->loss_t_s[0], 1) && NEAR(c->loss_t_s[79], 40) &&
        NEAR(c->loss[0], 2) && NEAR(c->loss[79], 0.5), "curve of %d points, last %g at %g",
        c->nloss, c->nloss ? c->loss[c->nloss - 1] : 0, c->nloss ? c->loss_t_s[c->nloss - 1]
        : 0);
  gs_stale_targets(runs, 3, 0);
  double target = 1.10 * 0.5;
  for (int i = 0; i < 3; i++) {
    CHECK(NEAR(runs[i].stale.target_loss, target), "run %d target %g", i,
          runs[i].stale.target_loss);
    CHECK(!strcmp(runs[i].stale.target_from, runs[0].id), "from %s", runs[i].stale.target_from);
  }
  /* independently: the first point whose mean of the last 16 rows is <= target */
  for (int i = 0; i < 2; i++) {
    const gs_stale_summary *st = &runs[i].stale;
    double want = NAN;
    for (int k = 0; k < st->nloss && isnan(want); k++) {
      double sum = 0;
      int n = 0;
      for (int j = k; j >= 0 && j > k - 16; j--, n++) {
        int t = j / 2;
        sum += fmax(0.5, 2 - (i ? 0.1 : 0.05) * t);
      }
      if (sum / n <= target) want = k / 2 + 1;
    }
    CHECK(NEAR(st->time_to_target_s, want), "run %d: to target %g, expected %g", i,
          st->time_to_target_s, want);
  }
  CHECK(runs[1].stale.time_to_target_s < runs[0].stale.time_to_target_s);
  CHECK(isnan(runs[2].stale.time_to_target_s), "never: %g", runs[2].stale.time_to_target_s);
  /* --target-loss */
  gs_stale_targets(runs, 3, 1.8);
  CHECK(!strcmp(runs[2].stale.target_from, "--target-loss") &&
        runs[2].stale.target_loss == 1.8 && isfinite(runs[2].stale.time_to_target_s));
  /* without a synchronous run there is no target */
  gs_stale_targets(runs + 1, 2, 0);
  CHECK(isnan(runs[1].stale.target_loss) && isnan(runs[1].stale.time_to_target_s) &&
        !strcmp(runs[1].stale.target_from, ""));
  /* out to JSON and back */
  gs_stale_targets(runs, 3, 0);
  gs_err e = {0};
  json_t *j = gs_summary_json(&runs[1], &e);
  CHECK(j != NULL);
  gs_summary back;
  CHECK_OK(gs_summary_from_json(j, &back, &e), &e);
  CHECK(back.stale.nloss == runs[1].stale.nloss && NEAR(back.stale.time_to_target_s,
        runs[1].stale.time_to_target_s) && !strcmp(back.stale.target_from, runs[0].id) &&
        back.stale.nhist == runs[1].stale.nhist);
  json_t *j2 = gs_summary_json(&back, &e);
  CHECK(json_equal(j, j2));
  json_decref(j);
  json_decref(j2);
  gs_summary_free(&back);
  for (int i = 0; i < 3; i++) gs_summary_free(&runs[i]);
}

/* --eval-data along the run: each point at the end of rank 0's step, on
 * the clock of the first step's start; out to JSON and back; a point
 * outside the run is an error */
static void heldout(void) {
  gs_rank_result *rr = ranks_of(2, 10);
  timed(rr, 2, 10, (double[]){1, 2});
  int64_t at[3] = {1, 4, 9};
  double acc[3] = {0.25, 0.5, 0.75}, loss[3] = {2, 1, NAN};
  gs_run_info in = info_of(GS_MODE_PS, 2);
  in.heldout_steps = at;
  in.heldout_curve_accuracy = acc;
  in.heldout_curve_loss = loss;
  in.nheldout = 3;
  gs_summary s;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  const gs_stale_summary *st = &s.stale;
  CHECK(st->nheldout == 3 && st->heldout_step[2] == 9 && st->heldout_accuracy[1] == 0.5);
  /* rank 0's steps take 1 s from 100 s: step 4 ends at 105 */
  CHECK(NEAR(st->heldout_t_s[0], 2) && NEAR(st->heldout_t_s[1], 5) &&
        NEAR(st->heldout_t_s[2], 10), "t_s %g %g %g", st->heldout_t_s[0], st->heldout_t_s[1],
        st->heldout_t_s[2]);
  json_t *j = gs_summary_json(&s, &e);
  CHECK(j != NULL);
  gs_summary back;
  CHECK_OK(gs_summary_from_json(j, &back, &e), &e);
  CHECK(back.stale.nheldout == 3 && back.stale.heldout_step[1] == 4 &&
        NEAR(back.stale.heldout_t_s[2], 10) && back.stale.heldout_accuracy[2] == 0.75 &&
        isnan(back.stale.heldout_loss[2]));
  /* steps out of order are refused */
  json_t *steps = json_object_get(json_object_get(j, "heldout_curve"), "step");
  json_array_set_new(steps, 1, json_integer(0));
  gs_summary bad;
  CHECK(gs_summary_from_json(j, &bad, &e) == GS_EPROTO && strstr(e.msg, "heldout_curve.step"),
        "%s", e.msg);
  gs_summary_free(&bad);
  json_decref(j);
  gs_summary_free(&back);
  gs_summary_free(&s);
  at[2] = 10;
  gs_summary out;
  gs_err oe = {0};
  CHECK(gs_summarize(&in, rr, &out, &oe) == GS_EINVAL && strstr(oe.msg, "held-out"), "%s",
        oe.msg);
  gs_summary_free(&out);
  free_ranks(rr, 2);
}

/* the host-aggregated ps under async: the model's workers are the hosts,
 * each as slow as its slowest rank, with its ranks' samples */
static void hosts_model(void) {
  gs_rank_result *rr = ranks_of(4, 10);
  timed(rr, 4, 10, (double[]){1, 1, 1, 3});
  gs_run_info in = info_of(GS_MODE_PS, 4);
  in.ps_sync = (gs_ps_sync){.model = GS_PS_ASYNC};
  in.straggle = (gs_straggle){.nslow = 1, .slow = {3}, .factor = 3};
  gs_summary flat, hosts;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &flat, &e), &e);
  in.ps_host_ranks = 2;
  CHECK_OK(gs_summarize(&in, rr, &hosts, &e), &e);
  /* compute per step 1 s at factor 1 (rank 3's 3 s is 3 x 1); 10 samples */
  double f[2] = {1, 3};
  gs_cm_straggle_in want = {.kind = GS_CM_STRAGGLE_ASYNC, .world = 2, .batch = 20, .factor = f,
                            .c0_s = 1, .comm_s = 0};
  gs_cm_straggle_out out;
  CHECK_OK(gs_cm_straggle(&want, &out, &e), &e);
  CHECK(NEAR(hosts.stale.model_samples_per_s, out.samples_per_s), "hosts of 2: model %g, "
        "expected %g", hosts.stale.model_samples_per_s, out.samples_per_s);
  /* flat: 3 ranks at 10 samples/s and one at 10/3; hosts: host 0 at 20, host 1 at 20/3 */
  CHECK(NEAR(flat.stale.model_samples_per_s, 30 + 10.0 / 3) &&
        NEAR(hosts.stale.model_samples_per_s, 20 + 20.0 / 3), "flat %g, hosts %g",
        flat.stale.model_samples_per_s, hosts.stale.model_samples_per_s);
  gs_summary_free(&flat);
  gs_summary_free(&hosts);
  free_ranks(rr, 4);
}

/* backup workers: an update waits for the N-B fastest ranks, so the
 * communication it pays is theirs, not the dropped straggler's (whose
 * own push and pull find the master's link idle) */
static void backup_comm(void) {
  gs_rank_result *rr = ranks_of(4, 10);
  timed(rr, 4, 10, (double[]){1, 1, 1, 3});
  for (int r = 0; r < 4; r++)
    for (int t = 0; t < 10; t++) rr[r].rows[t].wait_s = r == 3 ? 0.5 : 2;
  gs_run_info in = info_of(GS_MODE_PS, 4);
  in.warmup = 0;
  in.ps_sync = (gs_ps_sync){.model = GS_PS_BSP, .backup_on = true, .backup = 1};
  in.straggle = (gs_straggle){.nslow = 1, .slow = {3}, .factor = 3};
  gs_summary s;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  /* the 3rd fastest computes 1 s and waited 2 s: 3 x 10 samples per 3 s */
  CHECK(NEAR(s.stale.model_samples_per_s, 10), "backup 1: model %g, expected 10 (the fast "
        "ranks' 2 s of waiting, not the straggler's 0.5)", s.stale.model_samples_per_s);
  gs_summary_free(&s);
  /* bsp waits for everyone: the least any rank waited, the straggler's */
  in.ps_sync = (gs_ps_sync){.model = GS_PS_BSP};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  CHECK(NEAR(s.stale.model_samples_per_s, 40 / 3.5), "bsp: model %g, expected 40 / 3.5",
        s.stale.model_samples_per_s);
  gs_summary_free(&s);
  free_ranks(rr, 4);
}

/* async on 2 emulated hosts of 2 ranks, the server in rank 0: host 0's
 * ranks reach it over no link, each side at its own communication */
static void async_beside(void) {
  gs_rank_result *rr = ranks_of(4, 10);
  timed(rr, 4, 10, (double[]){1, 1, 1, 1});
  for (int r = 0; r < 4; r++) {
    rr[r].link_host = r / 2;
    rr[r].link_window_s = 10;
    for (int t = 0; t < 10; t++) rr[r].rows[t].wait_s = r < 2 ? 0.25 : 1;
  }
  gs_run_info in = info_of(GS_MODE_PS, 4);
  in.warmup = 0;
  in.hosts = 2;
  in.link_bps = 1e12; /* no bound from the link here */
  in.ps_sync = (gs_ps_sync){.model = GS_PS_ASYNC};
  gs_summary s;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  /* host 0: 2 x 10 samples per 1.25 s; host 1: 2 x 10 per 2 s */
  CHECK(NEAR(s.stale.model_samples_per_s, 16 + 10), "async on 2 hosts: model %g, expected 26",
        s.stale.model_samples_per_s);
  gs_summary_free(&s);
  /* servers of their own: every rank crosses a link, at the least wait */
  in.ps_server_hosts = true;
  rr[0].nserver_links = 0;
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  CHECK(NEAR(s.stale.model_samples_per_s, 32), "async, servers of their own: model %g, "
        "expected 32", s.stale.model_samples_per_s);
  gs_summary_free(&s);
  free_ranks(rr, 4);
}

/* async on links that bind: each of K servers' links carries S/K of an
 * update, so K servers carry K times the updates of one */
static void async_servers(void) {
  gs_rank_result *rr = ranks_of(4, 10);
  timed(rr, 4, 10, (double[]){1, 1, 1, 1});
  for (int r = 0; r < 4; r++) {
    rr[r].link_host = r;
    rr[r].link_window_s = 10;
    rr[r].nserver_links = 0;
    for (int t = 0; t < 10; t++) rr[r].rows[t].wait_s = 1;
  }
  gs_run_info in = info_of(GS_MODE_PS, 4);
  in.warmup = 0;
  in.hosts = 4;
  in.ps_server_hosts = true;
  in.link_bps = 1e12;
  in.ps_sync = (gs_ps_sync){.model = GS_PS_ASYNC};
  gs_summary s;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  double free_rate = s.stale.model_samples_per_s, S = s.cost_model.S_bytes;
  gs_summary_free(&s);
  /* 4 ranks, each 10 samples per 2 s, unbound */
  CHECK(NEAR(free_rate, 20) && S > 0, "async, links that do not bind: model %g (20), S %g",
        free_rate, S);
  /* a link that carries half an update per second */
  in.link_bps = S * 8 * 0.5;
  double got[2];
  for (int k = 1; k <= 2; k++) {
    in.ps_servers = k;
    CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
    got[k - 1] = s.stale.model_samples_per_s;
    gs_summary_free(&s);
  }
  CHECK(NEAR(got[0], 10 * 0.5) && NEAR(got[1], 10 * 1.0), "async over links of half an "
        "update per second: one server %g (5), two %g (10)", got[0], got[1]);
  free_ranks(rr, 4);
}

static double predict(gs_cm_straggle_kind kind, double cv, int period, double slow) {
  double f[4] = {1, 1, 1, slow};
  gs_cm_straggle_in in = {.kind = kind, .world = 4, .batch = 1, .backup = 1, .period = period,
                          .factor = f, .jitter_cv = cv, .c0_s = 1, .comm_s = 0};
  gs_cm_straggle_out out;
  gs_err e = {0};
  CHECK_OK(gs_cm_straggle(&in, &out, &e), &e);
  return out.samples_per_s;
}

static void model(void) {
  /* no noise: whom each waits for decides */
  CHECK(NEAR(predict(GS_CM_STRAGGLE_SYNC, 0, 1, 3), 4.0 / 3));
  CHECK(NEAR(predict(GS_CM_STRAGGLE_BACKUP, 0, 1, 3), 3.0));
  CHECK(NEAR(predict(GS_CM_STRAGGLE_SSP, 0, 1, 3), 4.0 / 3));
  CHECK(NEAR(predict(GS_CM_STRAGGLE_ASYNC, 0, 1, 3), 3 + 1.0 / 3));
  CHECK(NEAR(predict(GS_CM_STRAGGLE_SYNC, 0, 4, 3), 4.0 / 3));
  /* noise: waiting for the slowest each step costs more than its mean
   * rate; averaging every 4 steps less than every step; same figure twice */
  double sync = predict(GS_CM_STRAGGLE_SYNC, 0.5, 1, 1);
  double ssp = predict(GS_CM_STRAGGLE_SSP, 0.5, 1, 1);
  CHECK(sync < ssp * 0.9, "sync %g, ssp %g", sync, ssp);
  CHECK(fabs(ssp / (4 / (1 + 0.5 * sqrt(2 / M_PI))) - 1) < 0.03, "ssp %g", ssp);
  CHECK(predict(GS_CM_STRAGGLE_SYNC, 0.5, 4, 1) > sync * 1.05);
  CHECK(predict(GS_CM_STRAGGLE_SYNC, 0.5, 1, 1) == sync);
  /* a rank 3x slower every step: ssp gains nothing over waiting for it */
  CHECK(predict(GS_CM_STRAGGLE_SSP, 0.1, 1, 3) <= predict(GS_CM_STRAGGLE_SYNC, 0.1, 1, 3));
  /* async: no more updates than the master's link carries */
  double f[4] = {1, 1, 1, 3};
  gs_cm_straggle_in cap = {.kind = GS_CM_STRAGGLE_ASYNC, .world = 4, .batch = 10, .factor = f,
                           .c0_s = 1, .max_updates_per_s = 2};
  gs_cm_straggle_out got;
  gs_err ce = {0};
  CHECK_OK(gs_cm_straggle(&cap, &got, &ce), &ce);
  CHECK(NEAR(got.samples_per_s, 20), "async capped: %g", got.samples_per_s);
  /* ... but rank 0 beside the server uses no link: uncapped, 10 more */
  cap.beside = 1;
  CHECK_OK(gs_cm_straggle(&cap, &got, &ce), &ce);
  CHECK(NEAR(got.samples_per_s, 30), "async capped, one rank beside: %g", got.samples_per_s);
  /* ... at its own communication's pace: 1 s of compute and 1 s of it */
  cap.comm_beside_s = 1;
  CHECK_OK(gs_cm_straggle(&cap, &got, &ce), &ce);
  CHECK(NEAR(got.samples_per_s, 25), "async capped, one rank beside: %g", got.samples_per_s);
  cap.beside = 5;
  CHECK(gs_cm_straggle(&cap, &got, &ce) == GS_EINVAL && strstr(ce.msg, "beside"), "%s",
        ce.msg);
  /* bad input is an error naming it */
  gs_cm_straggle_in in = {.kind = GS_CM_STRAGGLE_SYNC, .world = 0, .batch = 1};
  gs_cm_straggle_out out;
  gs_err e = {0};
  CHECK(gs_cm_straggle(&in, &out, &e) == GS_EINVAL && strstr(e.msg, "world"));
}

int main(void) {
  throughput();
  histogram();
  waits();
  targets();
  heldout();
  hosts_model();
  backup_comm();
  async_beside();
  async_servers();
  model();
  return check_done("test_summary_stale");
}
