/* test_summary.c: the one summary (bench/report/report.h) on synthetic rows.
 *
 *  - every metric of gs_summarize against the README's definition,
 *    computed here independently from the same rows (ps in rank 0, a
 *    dedicated ps server, ring; warm-up left out, or not when it covers
 *    every step; ranks with fewer rows than others);
 *  - a rank that failed, or a rank missing, is an error, not a summary;
 *  - gs_summarize is pure: the same rows give the same bits twice;
 *  - hidden communication: the backend thread's spans (track 1) inside
 *    each step's compute, but a ps server's optimizer, summed by brute
 *    force here;
 *  - scaling efficiency against the world-1 run, else the local step's,
 *    NaN without either;
 *  - --repeat: the repetitions of a configuration become the median one,
 *    carrying every repetition's throughput, step median and id;
 *  - JSON: a summary goes out and comes back bit for bit, and reading
 *    fails, naming the key, when any key of the run, of a rank, of the
 *    server or of the cost model is missing, renamed or of another type;
 *    null is read only where the schema allows it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"
#include "tests/check.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * (1 + fabs(b)))

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static double rnd(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (double)(rs >> 11) / 9007199254740992.0;
}

/* world ranks of steps rows each (rank 1 one fewer when short), random
 * times and bytes; rank 0 carries a server's share when server */
static gs_rank_result *make_ranks(int world, int steps, bool short1, bool server) {
  gs_rank_result *rr = calloc((size_t)world, sizeof *rr);
  for (int r = 0; r < world; r++) {
    rr[r].rank = r;
    snprintf(rr[r].host, sizeof rr[r].host, "host%d", r);
    rr[r].peak_rss = (uint64_t)(1e6 * (r + 1));
    rr[r].nrows = (size_t)steps - (short1 && r == 1);
    rr[r].rows = calloc((size_t)steps + 1, sizeof(gs_step_row));
    /* the backend thread's spans, back to back, unsorted pairs */
    rr[r].nspans = (size_t)steps * 4;
    rr[r].spans = calloc(rr[r].nspans + 1, sizeof(gs_span));
    double t = 100.0, bt = 100.0;
    for (size_t i = 0; i < rr[r].nspans; i++) {
      gs_span *sp = &rr[r].spans[i ^ 1]; /* pairs swapped: not sorted */
      double gap = 0.01 * rnd(), len = 0.01 * rnd();
      *sp = (gs_span){.t0 = bt + gap, .t1 = bt + gap + len, .track = (int)(i % 3 != 2),
                      .bucket = -1};
      /* a ps server's optimizer runs on that thread too: not communication */
      snprintf(sp->name, sizeof sp->name, i % 5 == 4 ? "optimizer" : "reduce-scatter");
      if (sp->track == 1) bt += gap + len;
    }
    for (int s = 0; s < steps; s++) {
      gs_step_row *x = &rr[r].rows[s];
      x->rank = r;
      x->step = s;
      x->t_start = t;
      x->step_s = 0.01 + 0.05 * rnd();
      t += x->step_s;
      x->data_s = 0.001 * rnd();
      x->forward_s = 0.004 * rnd();
      x->backward_s = 0.006 * rnd();
      x->wait_s = 0.03 * rnd();
      x->reduce_s = 0.002 * rnd();
      x->update_s = 0.001 * rnd();
      x->bytes_sent = (uint64_t)(1e6 * rnd());
      x->bytes_recv = (uint64_t)(1e6 * rnd());
      x->loss = (float)(1 + rnd());
      x->scale = 1024.0f * (float)(s + 1);
      x->skipped = rnd() < 0.25;
      x->samples = 8 + r;
      x->rss_bytes = (uint64_t)(3e6 * rnd());
      if (server && r == 0) {
        x->has_server = 1;
        x->server_reduce_s = 0.004 * rnd();
        x->server_update_s = 0.002 * rnd();
        x->server_bytes_sent = (uint64_t)(4e6 * rnd());
        x->server_bytes_recv = (uint64_t)(4e6 * rnd());
      }
    }
  }
  return rr;
}

static void free_ranks(gs_rank_result *rr, int world) {
  for (int r = 0; r < world; r++) gs_rank_result_free(&rr[r]);
  free(rr);
}

static gs_run_info info_of(gs_mode mode, int world, int warmup, bool dedicated) {
  return (gs_run_info){.mode = mode, .world = world, .model = "mlp:784-32-10",
                       .data = "synthetic", .batch = 8, .bucket_mb = 25, .first_bucket_mb = 1,
                       .precision = GS_F16, .wire = GS_F16, .warmup = warmup,
                       .overlap = mode == GS_MODE_ALLREDUCE, .dedicated = dedicated,
                       .device = "cpu", .launcher = "gradsync", .threads = 1,
                       .nparams = 1000, .nbuckets = 2, .wall_start = 10, .wall_end = 12.5,
                       .accuracy = NAN, .eval_loss = NAN, .heldout_accuracy = NAN,
                       .heldout_loss = NAN};
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* the README's definitions, written out again, against s */
static void check_definitions(const gs_run_info *in, const gs_rank_result *rr,
                              const gs_summary *s) {
  int N = in->world;
  size_t steps = rr[0].nrows;
  for (int r = 1; r < N; r++) steps = rr[r].nrows < steps ? rr[r].nrows : steps;
  size_t first = (size_t)in->warmup < steps ? (size_t)in->warmup : 0, m = steps - first;
  CHECK(s->steps == (int64_t)steps && s->warmup_steps == (int64_t)first &&
             s->measured_steps == (int64_t)m,
         "steps %lld warmup %lld measured %lld", (long long)s->steps,
         (long long)s->warmup_steps, (long long)s->measured_steps);
  double *st = calloc(steps + 1, sizeof *st), total = 0, samples = 0;
  int skipped = 0;
  for (size_t t = 0; t < steps; t++) {
    for (int r = 0; r < N; r++) st[t] = fmax(st[t], rr[r].rows[t].step_s);
    CHECK(s->step_time_s[t] == st[t]);
    skipped += rr[0].rows[t].skipped != 0;
    if (t < first) continue;
    total += st[t];
    for (int r = 0; r < N; r++) samples += rr[r].rows[t].samples;
  }
  CHECK(s->skipped_steps == skipped);
  CHECK(NEAR(s->throughput_samples_per_s, samples / total), "throughput %g vs %g",
         s->throughput_samples_per_s, samples / total);
  CHECK(NEAR(s->step_time_s_mean, total / (double)m));
  qsort(st + first, m, sizeof *st, cmp_d);
  double med = m % 2 ? st[first + m / 2] : (st[first + m / 2 - 1] + st[first + m / 2]) / 2;
  CHECK(NEAR(s->step_time_s_median, med), "median %g vs %g", s->step_time_s_median, med);
  CHECK(s->step_time_s_p95 >= s->step_time_s_median && s->step_time_s_p95 <= st[steps - 1]);

  double S = (double)in->nparams * 2; /* fp16 on the wire */
  CHECK(s->gradient_bytes == S && s->cost_model.S_bytes == S);
  bool ded = in->dedicated && in->mode == GS_MODE_PS;
  double master = in->mode == GS_MODE_ALLREDUCE ? 2.0 * (N - 1) / N * S : ded ? N * S : (N - 1) * S;
  double worker = in->mode == GS_MODE_ALLREDUCE ? master : N > 1 || ded ? S : 0;
  CHECK(NEAR(s->cost_model.master_bytes_sent, master) &&
             NEAR(s->cost_model.worker_bytes_recv, worker),
         "cost model master %g (want %g) worker %g (want %g)", s->cost_model.master_bytes_sent,
         master, s->cost_model.worker_bytes_recv, worker);

  double busy_max = 0, busy_sum = 0, traffic = 0, master_traffic = 0;
  for (int r = 0; r < N; r++) {
    double compute = 0, wait = 0, reduce = 0, update = 0, idle = 0, sent = 0, recv = 0;
    uint64_t rss = rr[r].peak_rss;
    for (size_t t = first; t < steps; t++) {
      const gs_step_row *x = &rr[r].rows[t];
      double step = 0;
      for (int q = 0; q < N; q++) step = fmax(step, rr[q].rows[t].step_s);
      double c = x->data_s + x->forward_s + x->backward_s, b = c + x->reduce_s + x->update_s;
      compute += c;
      wait += x->wait_s;
      reduce += x->reduce_s;
      update += x->update_s;
      idle += fmax(0, step - b - x->wait_s);
      sent += (double)x->bytes_sent;
      recv += (double)x->bytes_recv;
      if (x->rss_bytes > rss) rss = x->rss_bytes;
    }
    const gs_rank_summary *p = &s->per_rank[r];
    double busy = (compute + reduce + update) / (double)m;
    CHECK(p->rank == r && !strcmp(p->host, rr[r].host), "rank %d host %s", p->rank, p->host);
    CHECK(NEAR(p->compute_s, compute / (double)m) && NEAR(p->comm_wait_s, wait / (double)m) &&
               NEAR(p->reduce_s, reduce / (double)m) && NEAR(p->update_s, update / (double)m) &&
               NEAR(p->idle_s, idle / (double)m) && NEAR(p->busy_s, busy),
           "rank %d: compute %g wait %g reduce %g update %g idle %g busy %g", r, p->compute_s,
           p->comm_wait_s, p->reduce_s, p->update_s, p->idle_s, p->busy_s);
    CHECK(NEAR(p->busy_s, p->compute_s + p->reduce_s + p->update_s));
    CHECK(p->busy_s + p->comm_wait_s + p->idle_s >= p->step_s * (1 - 1e-12));
    CHECK(NEAR(p->step_s, s->step_time_s_mean));
    double hidden = 0;
    for (size_t t = first; t < steps; t++) {
      const gs_step_row *x = &rr[r].rows[t];
      double a = x->t_start, z = a + x->data_s + x->forward_s + x->backward_s;
      for (size_t i = 0; i < rr[r].nspans; i++) {
        const gs_span *sp = &rr[r].spans[i];
        double lo = fmax(sp->t0, a), hi = fmin(sp->t1, z);
        if (sp->track == 1 && strcmp(sp->name, "optimizer") && hi > lo) hidden += hi - lo;
      }
    }
    CHECK(NEAR(p->comm_hidden_s, hidden / (double)m) && (r > 0 || hidden > 0),
           "rank %d: hidden communication %g, want %g", r, p->comm_hidden_s, hidden / m);
    CHECK(NEAR(p->bytes_sent, sent / (double)m) && NEAR(p->bytes_recv, recv / (double)m));
    CHECK(p->peak_rss_bytes == (int64_t)rss);
    bool is_master = r == 0 && !ded;
    double model = is_master ? 2 * master : 2 * worker;
    CHECK(NEAR(p->model_bytes_sent + p->model_bytes_recv, model));
    CHECK(model > 0 ? NEAR(p->traffic_vs_model, (sent + recv) / (double)m / model)
                    : p->traffic_vs_model == 0);
    busy_max = fmax(busy_max, busy);
    busy_sum += busy;
    traffic += (sent + recv) / (double)m;
    if (r == 0) master_traffic = (sent + recv) / (double)m;
  }
  CHECK(NEAR(s->imbalance, busy_max / (busy_sum / N)), "imbalance %g vs %g", s->imbalance,
         busy_max / (busy_sum / N));
  CHECK(s->has_server == ded);
  if (ded) {
    double ss = 0, sr = 0, red = 0, upd = 0;
    for (size_t t = first; t < steps; t++) {
      ss += (double)rr[0].rows[t].server_bytes_sent;
      sr += (double)rr[0].rows[t].server_bytes_recv;
      red += rr[0].rows[t].server_reduce_s;
      upd += rr[0].rows[t].server_update_s;
    }
    CHECK(NEAR(s->server.bytes_sent, ss / (double)m) && NEAR(s->server.reduce_s, red / (double)m));
    CHECK(NEAR(s->server.busy_s, (red + upd) / (double)m));
    traffic += (ss + sr) / (double)m;
    master_traffic = (ss + sr) / (double)m;
  }
  /* one master (ps with one server, N > 1): its share of all traffic, and
   * its bytes over a worker's (the mean of the other ranks', or of every
   * rank with a dedicated server); none (NaN) in a ring or at world 1 */
  bool one_master = in->mode == GS_MODE_PS && N > 1;
  double others = 0;
  for (int r = ded ? 0 : 1; r < N; r++)
    for (size_t t = first; t < steps; t++)
      others += (double)(rr[r].rows[t].bytes_sent + rr[r].rows[t].bytes_recv) / (double)m /
                (ded ? N : N - 1);
  if (one_master) {
    CHECK(NEAR(s->master_traffic_share, master_traffic / traffic), "master share %g vs %g",
           s->master_traffic_share, master_traffic / traffic);
    CHECK(NEAR(s->master_bytes_vs_worker, master_traffic / others), "master/worker %g vs %g",
           s->master_bytes_vs_worker, master_traffic / others);
  } else {
    CHECK(isnan(s->master_traffic_share) && isnan(s->master_bytes_vs_worker),
           "%s world %d: master share %g, bytes over a worker's %g: there is no single master",
           gs_mode_name(in->mode), N, s->master_traffic_share, s->master_bytes_vs_worker);
  }
  CHECK(s->final_loss == (double)rr[0].rows[steps - 1].loss);
  CHECK(s->final_loss_scale == (double)rr[0].rows[steps - 1].scale);
  CHECK(s->world == N && s->global_batch == 8 * N && s->nparams == 1000 && s->nbuckets == 2);
  CHECK(NEAR(s->wall_time_s, 2.5) && isnan(s->scaling_efficiency) && isnan(s->accuracy));
  free(st);
}

static void definitions(void) {
  struct { gs_mode mode; int world, steps, warmup; bool dedicated, short1; } cases[] = {
    {GS_MODE_PS, 4, 30, 5, false, false},   {GS_MODE_PS, 3, 20, 2, true, false},
    {GS_MODE_ALLREDUCE, 4, 25, 3, false, true},  {GS_MODE_ALLREDUCE, 1, 9, 0, false, false},
    {GS_MODE_PS, 2, 4, 10, false, false},   /* warm-up longer than the run: all measured */
    {GS_MODE_SINGLE, 1, 7, 1, false, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int N = cases[i].world;
    gs_rank_result *rr = make_ranks(N, cases[i].steps, cases[i].short1, cases[i].dedicated);
    gs_run_info in = info_of(cases[i].mode, N, cases[i].warmup, cases[i].dedicated);
    gs_summary a, b;
    gs_err e = {0};
    CHECK_OK(gs_summarize(&in, rr, &a, &e), &e);
    check_definitions(&in, rr, &a);
    /* pure: the same rows, the same bits (the JSON has every member) */
    CHECK_OK(gs_summarize(&in, rr, &b, &e), &e);
    json_t *ja = gs_summary_json(&a, &e), *jb = gs_summary_json(&b, &e);
    char *sa = json_dumps(ja, JSON_REAL_PRECISION(17)), *sb = json_dumps(jb, JSON_REAL_PRECISION(17));
    CHECK(sa && sb && !strcmp(sa, sb));
    free(sa);
    free(sb);
    json_decref(ja);
    json_decref(jb);
    gs_summary_free(&a);
    gs_summary_free(&b);
    free_ranks(rr, N);
  }
}

static void failures(void) {
  gs_rank_result *rr = make_ranks(3, 5, false, false);
  gs_run_info in = info_of(GS_MODE_ALLREDUCE, 3, 1, false);
  gs_summary s;
  gs_err e = {0};
  rr[2].failed = 1;
  snprintf(rr[2].error, sizeof rr[2].error, "training: boom");
  CHECK(gs_summarize(&in, rr, &s, &e) == GS_EINVAL && strstr(e.msg, "rank 2") &&
        strstr(e.msg, "boom"));
  gs_summary_free(&s);
  rr[2].failed = 0;
  rr[2].rank = 1; /* measurements in the wrong place */
  gs_err_clear(&e);
  CHECK(gs_summarize(&in, rr, &s, &e) == GS_EINVAL);
  gs_summary_free(&s);
  free_ranks(rr, 3);
}

static void scaling(void) {
  gs_summary runs[4];
  memset(runs, 0, sizeof runs);
  int worlds[] = {1, 2, 4, 2};
  double thr[] = {100, 150, 200, 50};
  char *models[] = {"m", "m", "m", "other"};
  for (int i = 0; i < 4; i++) {
    runs[i].mode = GS_MODE_PS;
    runs[i].world = worlds[i];
    runs[i].model = models[i];
    runs[i].batch = 8;
    runs[i].global_batch = 8 * worlds[i];
    runs[i].bucket_mb = 25;
    runs[i].throughput_samples_per_s = thr[i];
  }
  gs_summary_scaling(runs, 4, false);
  CHECK(runs[0].scaling_efficiency == 1 && NEAR(runs[1].scaling_efficiency, 0.75) &&
        NEAR(runs[2].scaling_efficiency, 0.5) && isnan(runs[3].scaling_efficiency));
  /* strong scaling compares the global batch: no world-1 run has 16 */
  runs[1].batch = 4;
  runs[1].global_batch = 8;
  gs_summary_scaling(runs, 4, true);
  CHECK(NEAR(runs[1].scaling_efficiency, 0.75) && isnan(runs[2].scaling_efficiency));
  /* a sweep of several modes runs world 1 once, as local: the baseline of
   * every mode; a mode's own world-1 run comes first where there is one */
  runs[1].batch = 8;
  runs[1].global_batch = 16;
  runs[0].mode = GS_MODE_SINGLE;
  runs[2].mode = GS_MODE_ALLREDUCE;
  gs_summary_scaling(runs, 4, false);
  CHECK(NEAR(runs[1].scaling_efficiency, 0.75) && NEAR(runs[2].scaling_efficiency, 0.5) &&
        runs[0].scaling_efficiency == 1);
  CHECK(gs_summary_find(runs, 4, GS_MODE_ALLREDUCE, 1, &runs[2]) == &runs[0] &&
        gs_summary_find(runs, 4, GS_MODE_PS, 4, &runs[2]) == NULL &&
        gs_summary_find(runs, 4, GS_MODE_ALLREDUCE, 4, &runs[1]) == &runs[2]);
}

/* --repeat 3 of two configurations, interleaved: each becomes its median */
static void repeats(void) {
  gs_rank_result *rr = make_ranks(2, 6, false, false);
  gs_summary all[6];
  gs_err e = {0};
  double thr[6];
  for (int i = 0; i < 6; i++) {
    gs_run_info in = info_of(i % 2 ? GS_MODE_ALLREDUCE : GS_MODE_PS, 2, 1, false);
    in.repeats = 3;
    in.repeat = i / 2 + 1;
    CHECK_OK(gs_summarize(&in, rr, &all[i], &e), &e);
    all[i].throughput_samples_per_s = thr[i] = 100 + 10 * ((i * 7) % 5);
    all[i].repeat_throughput[0] = thr[i];
    CHECK(strstr(all[i].id, i < 2 ? "-r1" : i < 4 ? "-r2" : "-r3"), "id %s", all[i].id);
  }
  gs_summary *rec = NULL;
  size_t n = 0;
  CHECK_OK(gs_summary_repeats(all, 6, &rec, &n, &e), &e);
  CHECK(n == 2 && rec[0].mode == GS_MODE_PS && rec[1].mode == GS_MODE_ALLREDUCE, "%zu records", n);
  for (size_t k = 0; k < n && n == 2; k++) {
    double v[3] = {thr[k], thr[k + 2], thr[k + 4]};
    qsort(v, 3, sizeof *v, cmp_d);
    double lo, hi;
    gs_summary_spread(&rec[k], &lo, &hi);
    CHECK(rec[k].nrepeats == 3 && rec[k].throughput_samples_per_s == v[1] && lo == v[0] &&
          hi == v[2], "record %zu: %g [%g, %g], want %g [%g, %g]", k,
          rec[k].throughput_samples_per_s, lo, hi, v[1], v[0], v[2]);
    for (int r = 0; r < 3; r++)
      CHECK(rec[k].repeat_throughput[r] == thr[k + 2 * (size_t)r] &&
            strstr(rec[k].repeat_ids[r], r == 0 ? "-r1" : r == 1 ? "-r2" : "-r3"),
            "record %zu repetition %d: %g %s", k, r, rec[k].repeat_throughput[r],
            rec[k].repeat_ids[r]);
    /* and it goes out and comes back with them */
    json_t *j = gs_summary_json(&rec[k], &e);
    gs_summary back;
    CHECK_OK(gs_summary_from_json(j, &back, &e), &e);
    CHECK(back.nrepeats == 3 && back.repeat_throughput[2] == rec[k].repeat_throughput[2] &&
          !strcmp(back.repeat_ids[1], rec[k].repeat_ids[1]));
    gs_summary_free(&back);
    json_decref(j);
  }
  for (size_t k = 0; k < n; k++) gs_summary_free(&rec[k]);
  free(rec);
  free_ranks(rr, 2);
}

/* every key path of a run object: "imbalance", "per_rank[1].busy_s", ... */
static int collect_keys(json_t *run, char keys[][64], int max) {
  int n = 0;
  const char *k;
  json_t *v;
  json_object_foreach(run, k, v) {
    if (n < max) snprintf(keys[n++], 64, "%s", k);
    if (!strcmp(k, "per_rank")) {
      const char *k2;
      json_t *v2;
      json_object_foreach(json_array_get(v, 1), k2, v2) if (n < max)
          snprintf(keys[n++], 64, "per_rank[1].%s", k2);
    } else if (json_is_object(v)) {
      const char *k2;
      json_t *v2;
      json_object_foreach(v, k2, v2) if (n < max) snprintf(keys[n++], 64, "%s.%s", k, k2);
    }
  }
  return n;
}

/* the object holding path's last key, and that key */
static json_t *parent_of(json_t *run, const char *path, const char **key) {
  const char *dot = strchr(path, '.');
  if (!dot) {
    *key = path;
    return run;
  }
  *key = dot + 1;
  if (!strncmp(path, "per_rank[1]", 11)) return json_array_get(json_object_get(run, "per_rank"), 1);
  char head[64];
  snprintf(head, sizeof head, "%.*s", (int)(dot - path), path);
  return json_object_get(run, head);
}

static void json_round_trip_and_strictness(void) {
  gs_rank_result *rr = make_ranks(3, 12, false, true);
  gs_run_info in = info_of(GS_MODE_PS, 3, 2, true);
  in.accuracy = 0.75;
  in.eval_loss = 0.5;
  gs_summary s, back;
  gs_err e = {0};
  CHECK_OK(gs_summarize(&in, rr, &s, &e), &e);
  s.scaling_efficiency = 0.4;
  json_t *j = gs_summary_json(&s, &e);
  CHECK(j != NULL);
  CHECK_OK(gs_summary_from_json(j, &back, &e), &e);
  json_t *j2 = gs_summary_json(&back, &e);
  CHECK(json_equal(j, j2));
  CHECK(back.has_server && back.accuracy == 0.75 && back.per_rank[2].peak_rss_bytes ==
        s.per_rank[2].peak_rss_bytes && back.step_time_s[11] == s.step_time_s[11]);
  json_decref(j2);
  gs_summary_free(&back);

  char keys[128][64];
  int n = collect_keys(j, keys, 128);
  CHECK(n > 60, "only %d keys", n);
  for (int i = 0; i < n; i++) {
    const char *key;
    /* missing, renamed, or of another type: each an error naming the key */
    for (int how = 0; how < 3; how++) {
      json_t *c = json_deep_copy(j);
      json_t *obj = parent_of(c, keys[i], &key);
      json_t *v = json_incref(json_object_get(obj, key));
      json_object_del(obj, key);
      if (how == 1) json_object_set(obj, "renamed_key", v);
      if (how == 2) json_object_set_new(obj, key, json_is_string(v) ? json_integer(3)
                                                                    : json_string("3"));
      json_decref(v);
      gs_err ee = {0};
      int rc = gs_summary_from_json(c, &back, &ee);
      CHECK(rc == GS_EPROTO && strstr(ee.msg, key), "%s %s: rc %d, \"%s\"", keys[i],
             how == 0 ? "missing" : how == 1 ? "renamed" : "mistyped", rc, ee.msg);
      if (rc == GS_OK) gs_summary_free(&back);
      json_decref(c);
    }
  }
  /* null: fine where the schema says so, an error elsewhere */
  const char *nullable[] = {"scaling_efficiency", "final_loss", "final_loss_scale", "accuracy",
                            "eval_loss", "server", "master_traffic_share",
                            "master_bytes_vs_worker"};
  for (size_t i = 0; i < sizeof nullable / sizeof nullable[0]; i++) {
    json_t *c = json_deep_copy(j);
    json_object_set_new(c, nullable[i], json_null());
    gs_err ee = {0};
    CHECK(gs_summary_from_json(c, &back, &ee) == GS_OK, "%s null: %s", nullable[i], ee.msg);
    gs_summary_free(&back);
    json_decref(c);
  }
  const char *not_nullable[] = {"imbalance", "throughput_samples_per_s", "world", "id",
                                "cost_model", "per_rank", "step_time_s"};
  for (size_t i = 0; i < sizeof not_nullable / sizeof not_nullable[0]; i++) {
    json_t *c = json_deep_copy(j);
    json_object_set_new(c, not_nullable[i], json_null());
    gs_err ee = {0};
    CHECK(gs_summary_from_json(c, &back, &ee) == GS_EPROTO, "%s null accepted",
           not_nullable[i]);
    json_decref(c);
  }
  /* a value JSON cannot hold is an error when writing, never a silent null */
  s.imbalance = INFINITY;
  gs_err ee = {0};
  CHECK(gs_summary_json(&s, &ee) == NULL && strstr(ee.msg, "imbalance"));
  /* a short series or a missing rank is not a run */
  json_t *c = json_deep_copy(j);
  json_array_remove(json_object_get(c, "step_time_s"), 0);
  gs_err_clear(&ee);
  CHECK(gs_summary_from_json(c, &back, &ee) == GS_EPROTO && strstr(ee.msg, "step_time_s"));
  json_decref(c);
  c = json_deep_copy(j);
  json_array_remove(json_object_get(c, "per_rank"), 2);
  gs_err_clear(&ee);
  CHECK(gs_summary_from_json(c, &back, &ee) == GS_EPROTO && strstr(ee.msg, "per_rank"));
  json_decref(c);
  json_decref(j);
  gs_summary_free(&s);
  free_ranks(rr, 3);
}

int main(void) {
  definitions();
  failures();
  scaling();
  repeats();
  json_round_trip_and_strictness();
  return check_done("test_summary");
}
