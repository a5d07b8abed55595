/* summary_stale.c: what a run shows when ranks are slow or updates stale
 * (report.h gs_stale_summary; the definitions are docs/metrics.md's and
 * docs/stragglers.md's):
 *
 *   throughput       synchronous runs (every rank ends each step together):
 *                    samples / sum of step times, as summary.c computes it.
 *                    ps ssp/async/backup and ring --ring-period H > 1 (ranks
 *                    at different steps at one instant): samples applied
 *                    (ps: by the server, a dropped gradient is not; ring:
 *                    by each rank) in the window where every rank trains,
 *                    from the last rank's start of its first measured step
 *                    to the first rank's end of its last step, over the
 *                    window's wall time; a step partly inside counts by
 *                    the share of its time inside.
 *   staleness        applied gradients counted by their staleness.
 *   who waited       a rank's wait in a step goes to the rank whose
 *                    gradient the awaited update needed last (ready: the
 *                    end of its backward), for as long as that one was
 *                    still computing after this rank was ready; the rest
 *                    is the backend's (the server or the collective
 *                    itself). The awaited update: ring, ps bsp: this
 *                    step's; ssp:K: step s-K's (what step s+1 may start
 *                    on); async and backup answer each push alone: all the
 *                    backend's.
 *   loss curve       every rank's batch loss, the mean of the latest 8 x
 *                    world rows in the order they ended, against seconds
 *                    from the run's first step (at most CURVE_MAX points).
 *   held-out curve   --eval-data's accuracy and loss of rank 0's parameters
 *                    after the steps it copied them (bench/job/heldout.c),
 *                    each at the time its step ended, on the loss curve's
 *                    clock.
 *   target           1.10 x the final smoothed loss of the synchronous run
 *                    of the same world, model, data and batch (ring every
 *                    step, else ps bsp), or --target-loss; time to target:
 *                    the first point of the curve at or below it.
 *   straggler model  bench/costmodel/stragglers.c with c0 the ranks' measured
 *                    compute over their expected factor, the batch the
 *                    measured samples per rank and step, and comm the least
 *                    any rank an update needs waited plus its reduction and
 *                    optimizer (the communication no rank avoids; ps: of
 *                    the ranks on the wire; backup workers: of the N-B
 *                    fastest), which isolates whom each update waits for
 *                    from how fast the links are (the cost model of the
 *                    links predicts that part on its own); async: the ranks
 *                    off the server's host at most the updates the master's
 *                    link carries (rate / S), those on it with their own
 *                    communication, which crosses no link. The
 *                    host-aggregated ps' workers are its hosts: each as
 *                    slow as its slowest rank, with its ranks' samples. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"
#include "ps/ps.h"

#define CURVE_MAX 600
#define HELDOUT_MAX (1 << 20)
#define TARGET_OVER_SYNC 1.10

static bool stale_run(const gs_run_info *info) {
  return (info->mode == GS_MODE_PS && info->world > 1 && gs_ps_sync_stale(&info->ps_sync)) ||
         (info->mode == GS_MODE_ALLREDUCE && info->ring_period > 1);
}

static double overlap(double a0, double a1, double b0, double b1) {
  double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0;
}

/* applied samples per second of the window where every rank trains; NaN
 * when there is no such window */
static double window_throughput(const gs_run_info *info, const gs_rank_result *ranks,
                                size_t first, size_t steps) {
  if (steps <= first) return NAN;
  double w0 = -INFINITY, w1 = INFINITY;
  for (int r = 0; r < info->world; r++) {
    if (ranks[r].rows[first].t_start > w0) w0 = ranks[r].rows[first].t_start;
    if (ranks[r].rows[steps - 1].t_end < w1) w1 = ranks[r].rows[steps - 1].t_end;
  }
  if (!(w1 > w0)) return NAN;
  double applied = 0;
  for (int r = 0; r < info->world; r++)
    for (size_t t = first; t < steps; t++) {
      const gs_step_row *row = &ranks[r].rows[t];
      double len = row->t_end - row->t_start;
      if (row->staleness < 0 || !(len > 0)) continue;
      applied += row->samples * overlap(row->t_start, row->t_end, w0, w1) / len;
    }
  return applied / (w1 - w0);
}

static double ready_at(const gs_step_row *row) {
  return row->t_start + row->data_s + row->forward_s + row->backward_s;
}

static void waits(const gs_run_info *info, const gs_rank_result *ranks, size_t first,
                  size_t steps, gs_stale_summary *st) {
  int N = info->world;
  bool ps = info->mode == GS_MODE_PS;
  bool alone = ps && (info->ps_sync.model == GS_PS_ASYNC || info->ps_sync.backup_on);
  int lag = ps && info->ps_sync.model == GS_PS_SSP ? info->ps_sync.staleness : 0;
  double m = steps > first ? (double)(steps - first) : 1;
  for (int r = 0; r < N; r++)
    for (size_t t = first; t < steps; t++) {
      const gs_step_row *row = &ranks[r].rows[t];
      double w = row->wait_s, mine = ready_at(row), on = 0;
      int who = -1;
      if (!alone && info->mode != GS_MODE_SINGLE && t >= (size_t)lag) {
        size_t u = t - (size_t)lag;
        double last = -INFINITY;
        for (int q = 0; q < N; q++) {
          double at = ready_at(&ranks[q].rows[u]);
          if (at > last) last = at, who = q;
        }
        on = who != r && last > mine ? last - mine : 0;
        if (on > w) on = w;
      }
      if (who >= 0 && on > 0) st->waited_for_s[(size_t)r * N + who] += on / m;
      st->waited_backend_s[r] += (w - on) / m;
    }
}

static int cmp_end(const void *a, const void *b) {
  const gs_step_row *x = *(const gs_step_row *const *)a, *y = *(const gs_step_row *const *)b;
  return x->t_end < y->t_end ? -1 : x->t_end > y->t_end;
}

/* the run's first step's start on any rank: the curves' zero */
static double run_start(int N, const gs_rank_result *ranks, size_t steps) {
  double t0 = INFINITY;
  for (int r = 0; r < N; r++)
    for (size_t t = 0; t < steps; t++)
      if (ranks[r].rows[t].t_start < t0) t0 = ranks[r].rows[t].t_start;
  return t0;
}

static int loss_curve(const gs_run_info *info, const gs_rank_result *ranks, size_t steps,
                      double t0, gs_stale_summary *st, gs_err *e) {
  int N = info->world;
  size_t n = 0, rows = (size_t)N * steps;
  if (!rows) return GS_OK;
  const gs_step_row **by = malloc(rows * sizeof *by);
  st->loss_t_s = malloc((CURVE_MAX + 1) * sizeof *st->loss_t_s);
  st->loss = malloc((CURVE_MAX + 1) * sizeof *st->loss);
  if (!by || !st->loss_t_s || !st->loss) {
    free(by);
    return GS_FAIL(e, GS_ENOMEM, "out of memory for the loss curve");
  }
  for (int r = 0; r < N; r++)
    for (size_t t = 0; t < steps; t++)
      if (isfinite(ranks[r].rows[t].loss)) by[n++] = &ranks[r].rows[t];
  qsort(by, n, sizeof *by, cmp_end);
  size_t win = 8 * (size_t)N, every = (n + CURVE_MAX - 1) / CURVE_MAX;
  if (every < 1) every = 1;
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    sum += by[i]->loss;
    if (i >= win) sum -= by[i - win]->loss;
    size_t k = i + 1 < win ? i + 1 : win;
    if ((i + 1) % every && i + 1 != n) continue;
    st->loss_t_s[st->nloss] = by[i]->t_end - t0;
    st->loss[st->nloss++] = sum / (double)k;
  }
  free(by);
  return GS_OK;
}

static int heldout_curve(const gs_run_info *info, const gs_rank_result *ranks, size_t steps,
                         double t0, gs_stale_summary *st, gs_err *e) {
  int n = info->nheldout;
  if (n < 1 || !info->heldout_steps) return GS_OK;
  st->heldout_step = calloc((size_t)n, sizeof *st->heldout_step);
  st->heldout_t_s = calloc((size_t)n, sizeof *st->heldout_t_s);
  st->heldout_accuracy = calloc((size_t)n, sizeof *st->heldout_accuracy);
  st->heldout_loss = calloc((size_t)n, sizeof *st->heldout_loss);
  if (!st->heldout_step || !st->heldout_t_s || !st->heldout_accuracy || !st->heldout_loss)
    return GS_FAIL(e, GS_ENOMEM, "out of memory for the held-out curve");
  for (int i = 0; i < n; i++) {
    int64_t at = info->heldout_steps[i];
    if (at < 0 || (size_t)at >= steps)
      return GS_FAIL(e, GS_EINVAL, "the held-out curve's point %d is after step %lld, outside "
                     "the run's %zu", i, (long long)at, steps);
    st->heldout_step[i] = at;
    st->heldout_t_s[i] = ranks[0].rows[at].t_end - t0;
    st->heldout_accuracy[i] = info->heldout_curve_accuracy[i];
    st->heldout_loss[i] = info->heldout_curve_loss[i];
  }
  st->nheldout = n;
  return GS_OK;
}

static void model(const gs_run_info *info, const gs_rank_result *ranks, size_t steps,
                  gs_summary *s) {
  gs_stale_summary *st = &s->stale;
  st->model_samples_per_s = NAN;
  int N = info->world;
  if (info->mode == GS_MODE_SINGLE || N < 2) return;
  double *f = malloc((size_t)N * sizeof *f);
  if (!f) return;
  double ez = 1 + info->straggle.jitter_cv * sqrt(2 / M_PI), c0 = 0;
  bool ps = info->mode == GS_MODE_PS;
  const gs_ps_sync *y = &info->ps_sync;
  int L = ps && info->ps_host_ranks > 1 && N % info->ps_host_ranks == 0 ? info->ps_host_ranks : 1;
  for (int r = 0; r < N; r++) {
    const gs_rank_summary *p = &s->per_rank[r];
    f[r] = p->slow_factor >= 1 ? p->slow_factor : 1;
    c0 += p->compute_s / (f[r] * ez) / N;
  }
  gs_cm_straggle_kind kind = info->mode == GS_MODE_ALLREDUCE || !gs_ps_sync_stale(y)
                                ? GS_CM_STRAGGLE_SYNC
                            : y->backup_on          ? GS_CM_STRAGGLE_BACKUP
                            : y->model == GS_PS_SSP ? GS_CM_STRAGGLE_SSP
                                                    : GS_CM_STRAGGLE_ASYNC;
  /* comm: what the rank an update waits for last waited itself (the others
   * also wait for its compute): the least any rank waited, among the ranks
   * an update needs; with backup workers the N-B that compute fastest (the
   * dropped straggler's own wait is no update's); ps: rank 0 beside its
   * server talks over inproc, not the wire */
  int need = ps && L == 1 && y->backup_on && y->backup > 0 && y->backup < N ? N - y->backup : N;
  /* async, where nobody waits for anybody: with one server on host 0 (in
   * rank 0 or a dedicated process there) the workers of host 0 reach it
   * over no link, and each side has its own least communication */
  int beside = kind == GS_CM_STRAGGLE_ASYNC && s->hosts > 0 && info->ps_servers <= 1 &&
                       !info->ps_server_hosts
                   ? (L > 1 ? 1 : N / s->hosts)
                   : 0;
  double floor = INFINITY, near = INFINITY, far = INFINITY;
  for (int r = 0; r < N; r++) {
    const gs_rank_summary *p = &s->per_rank[r];
    int faster = 0;
    for (int q = 0; q < N; q++)
      faster += s->per_rank[q].compute_s < p->compute_s ||
                (s->per_rank[q].compute_s == p->compute_s && q < r);
    double rest = p->comm_wait_s + p->reduce_s + p->update_s;
    if (r < beside * L) near = fmin(near, rest);
    else if (!(ps && r == 0)) far = fmin(far, rest);
    if (faster < need && !(ps && r == 0)) floor = fmin(floor, rest);
  }
  int H = info->mode == GS_MODE_ALLREDUCE && info->ring_period > 1 ? info->ring_period : 1;
  /* the ranks' means are per step: one averaging per H */
  double comm = (beside > 0 ? far : floor) * H;
  double samples = 0, rows = 0;
  for (int r = 0; r < N; r++)
    for (size_t t = (size_t)s->warmup_steps; t < steps; t++, rows++)
      samples += ranks[r].rows[t].samples;
  /* the host-aggregated ps: the server's workers are its hosts of L ranks,
   * each as slow as its slowest rank, pushing L ranks' samples at once */
  for (int h = 0; L > 1 && h < N / L; h++) {
    f[h] = 1;
    for (int r = h * L; r < h * L + L; r++) f[h] = fmax(f[h], s->per_rank[r].slow_factor);
  }
  gs_cm_straggle_in in = {
    .kind = kind, .world = N / L, .batch = L * (rows > 0 ? samples / rows : info->batch),
    .backup = y->backup_on ? y->backup : 0, .period = H, .factor = f,
    .jitter_cv = info->straggle.jitter_cv, .c0_s = c0, .comm_s = isfinite(comm) ? comm : 0,
    /* each of K servers' links carries S/K of every update */
    .max_updates_per_s = ps && s->hosts > 0 && s->cost_model.S_bytes > 0
                             ? (info->ps_servers > 1 ? info->ps_servers : 1) *
                                   s->link_rate_bps / 8 / s->cost_model.S_bytes
                             : 0,
    .beside = beside, .comm_beside_s = isfinite(near) ? near : 0};
  gs_cm_straggle_out out;
  gs_err e = {0};
  if (gs_cm_straggle(&in, &out, &e) == GS_OK) {
    st->model_samples_per_s = out.samples_per_s;
    free(st->model_formula);
    st->model_formula = strdup(out.formula);
  }
  free(f);
}

int gs_stale_summarize(const gs_run_info *info, const gs_rank_result *ranks, size_t steps,
                       gs_summary *s, gs_err *e) {
  gs_stale_summary *st = &s->stale;
  int N = info->world;
  size_t first = (size_t)s->warmup_steps;
  st->target_loss = st->time_to_target_s = st->model_samples_per_s = NAN;
  st->nhist = s->staleness_max + 1;
  st->throughput_basis = strdup(stale_run(info) ? "window" : "steps");
  st->target_from = strdup("");
  st->model_formula = strdup("");
  st->staleness_hist = calloc((size_t)st->nhist, sizeof *st->staleness_hist);
  st->waited_for_s = calloc((size_t)N * N, sizeof *st->waited_for_s);
  st->waited_backend_s = calloc((size_t)N, sizeof *st->waited_backend_s);
  if (!st->throughput_basis || !st->target_from || !st->model_formula || !st->staleness_hist ||
      !st->waited_for_s || !st->waited_backend_s)
    return GS_FAIL(e, GS_ENOMEM, "out of memory summarising the run");
  for (int r = 0; r < N; r++)
    for (size_t t = 0; t < steps; t++) {
      int x = ranks[r].rows[t].staleness;
      if (x >= 0 && x < st->nhist) st->staleness_hist[x]++;
    }
  if (stale_run(info)) {
    double tp = window_throughput(info, ranks, first, steps);
    if (isfinite(tp)) s->throughput_samples_per_s = tp;
    else strcpy(st->throughput_basis, "steps");
    s->repeat_throughput[0] = s->throughput_samples_per_s;
  }
  waits(info, ranks, first, steps, st);
  double t0 = run_start(N, ranks, steps);
  GS_TRY(loss_curve(info, ranks, steps, t0, st, e));
  GS_TRY(heldout_curve(info, ranks, steps, t0, st, e));
  model(info, ranks, steps, s);
  return GS_OK;
}

void gs_stale_free(gs_stale_summary *st) {
  free(st->throughput_basis);
  free(st->staleness_hist);
  free(st->waited_for_s);
  free(st->waited_backend_s);
  free(st->loss_t_s);
  free(st->loss);
  free(st->heldout_step);
  free(st->heldout_t_s);
  free(st->heldout_accuracy);
  free(st->heldout_loss);
  free(st->target_from);
  free(st->model_formula);
  memset(st, 0, sizeof *st);
}

/* ---- the sweep's targets ---- */

static bool synchronous(const gs_summary *r) {
  return (r->mode == GS_MODE_ALLREDUCE && r->ring_period <= 1) ||
         (r->mode == GS_MODE_PS && (!r->ps_sync[0] || !strcmp(r->ps_sync, "bsp")));
}

static const gs_summary *reference(const gs_summary *runs, size_t n, const gs_summary *x) {
  const gs_summary *ps = NULL;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->world != x->world || strcmp(r->model, x->model) || strcmp(r->data, x->data) ||
        r->batch != x->batch || !synchronous(r) || r->stale.nloss < 1)
      continue;
    if (r->mode == GS_MODE_ALLREDUCE) return r;
    if (!ps) ps = r;
  }
  return ps;
}

void gs_stale_targets(gs_summary *runs, size_t n, double target) {
  for (size_t i = 0; i < n; i++) {
    gs_stale_summary *st = &runs[i].stale;
    const gs_summary *ref = target > 0 ? NULL : reference(runs, n, &runs[i]);
    const char *from = target > 0 ? "--target-loss" : ref ? ref->id : "";
    char *dup = strdup(from);
    if (!dup) continue;
    free(st->target_from);
    st->target_from = dup;
    st->target_loss = target > 0 ? target
                      : ref ? TARGET_OVER_SYNC * ref->stale.loss[ref->stale.nloss - 1] : NAN;
    st->time_to_target_s = NAN;
    for (int k = 0; isfinite(st->target_loss) && k < st->nloss; k++)
      if (st->loss[k] <= st->target_loss) {
        st->time_to_target_s = st->loss_t_s[k];
        break;
      }
  }
}

/* ---- report.json ---- */

static json_t *reals(const double *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null())) {
      json_decref(a);
      return NULL;
    }
  return a;
}

static json_t *nullable(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int gs_stale_json_put(json_t *j, const gs_summary *s, gs_err *e) {
  const gs_stale_summary *st = &s->stale;
  int N = s->world;
  json_t *hist = json_array(), *waits = json_array();
  for (int i = 0; hist && i < st->nhist; i++)
    json_array_append_new(hist, json_integer((json_int_t)st->staleness_hist[i]));
  for (int r = 0; waits && r < N; r++)
    json_array_append_new(waits, reals(st->waited_for_s + (size_t)r * N, (size_t)N));
  json_t *curve = json_pack("{s:o?, s:o?}", "t_s", reals(st->loss_t_s, (size_t)st->nloss),
                            "loss", reals(st->loss, (size_t)st->nloss));
  json_t *mdl = isfinite(st->model_samples_per_s)
                    ? json_pack("{s:f, s:s}", "samples_per_s", st->model_samples_per_s,
                                "formula", st->model_formula ? st->model_formula : "")
                    : json_null();
  json_t *held = json_null();
  if (st->nheldout > 0) {
    json_t *at = json_array();
    for (int i = 0; at && i < st->nheldout; i++)
      json_array_append_new(at, json_integer((json_int_t)st->heldout_step[i]));
    size_t n = (size_t)st->nheldout;
    held = json_pack("{s:o?, s:o?, s:o?, s:o?}", "step", at, "t_s", reals(st->heldout_t_s, n),
                     "accuracy", reals(st->heldout_accuracy, n), "loss",
                     reals(st->heldout_loss, n));
  }
  int bad = !hist || !waits || !curve || !mdl || !held;
  bad |= json_object_set_new(j, "heldout_curve", held);
  bad |= json_object_set_new(j, "throughput_basis", json_string(st->throughput_basis ?
                             st->throughput_basis : "steps"));
  bad |= json_object_set_new(j, "staleness_histogram", hist);
  bad |= json_object_set_new(j, "waited_for_s", waits);
  bad |= json_object_set_new(j, "waited_backend_s", reals(st->waited_backend_s, (size_t)N));
  bad |= json_object_set_new(j, "loss_curve", curve);
  bad |= json_object_set_new(j, "target_loss", nullable(st->target_loss));
  bad |= json_object_set_new(j, "target_from", json_string(st->target_from ? st->target_from
                                                           : ""));
  bad |= json_object_set_new(j, "time_to_target_s", nullable(st->time_to_target_s));
  bad |= json_object_set_new(j, "straggler_model", mdl);
  return bad ? GS_FAIL(e, GS_ENOMEM, "out of memory writing run %s", s->id) : GS_OK;
}

/* a JSON array of n numbers (null for NaN where nulls may be) into v */
static int get_reals(json_t *a, size_t n, double *v, bool nulls, const char *where,
                     const char *key, gs_err *e) {
  if (!json_is_array(a) || json_array_size(a) != n)
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is not an array of %zu numbers", where, key, n);
  for (size_t i = 0; i < n; i++) {
    json_t *x = json_array_get(a, i);
    if (json_is_number(x)) v[i] = json_number_value(x);
    else if (nulls && json_is_null(x)) v[i] = NAN;
    else return GS_FAIL(e, GS_EPROTO, "run %s: %s[%zu] is not a number", where, key, i);
  }
  return GS_OK;
}

static int get_text(json_t *j, const char *key, char **out, const char *where, gs_err *e) {
  json_t *v = json_object_get(j, key);
  if (!json_is_string(v))
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is missing or not a string (a report of another "
                   "gradsync version? every metric must be there)", where, key);
  return (*out = strdup(json_string_value(v))) ? GS_OK
                                               : GS_FAIL(e, GS_ENOMEM, "out of memory");
}

static int get_nullable(json_t *j, const char *key, double *out, const char *where, gs_err *e) {
  json_t *v = json_object_get(j, key);
  if (!v || !(json_is_number(v) || json_is_null(v)))
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is missing or not a number or null", where, key);
  *out = json_is_null(v) ? NAN : json_number_value(v);
  return GS_OK;
}

/* null, or {step, t_s, accuracy, loss} of as many points, steps ascending */
static int get_heldout(json_t *h, gs_stale_summary *st, const char *where, gs_err *e) {
  if (json_is_null(h)) return GS_OK;
  json_t *at = json_object_get(h, "step");
  size_t n = json_array_size(at);
  if (!json_is_object(h) || !json_is_array(at) || n < 1 || n > HELDOUT_MAX)
    return GS_FAIL(e, GS_EPROTO, "run %s: heldout_curve is neither null nor {step, t_s, "
                   "accuracy, loss} of 1 to %d points", where, HELDOUT_MAX);
  st->heldout_step = calloc(n, sizeof *st->heldout_step);
  st->heldout_t_s = calloc(n, sizeof *st->heldout_t_s);
  st->heldout_accuracy = calloc(n, sizeof *st->heldout_accuracy);
  st->heldout_loss = calloc(n, sizeof *st->heldout_loss);
  if (!st->heldout_step || !st->heldout_t_s || !st->heldout_accuracy || !st->heldout_loss)
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *x = json_array_get(at, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 ||
        (i > 0 && json_integer_value(x) <= st->heldout_step[i - 1]))
      return GS_FAIL(e, GS_EPROTO, "run %s: heldout_curve.step[%zu] is not a step after the "
                     "one before it", where, i);
    st->heldout_step[i] = (int64_t)json_integer_value(x);
  }
  GS_TRY(get_reals(json_object_get(h, "t_s"), n, st->heldout_t_s, false, where,
                   "heldout_curve.t_s", e));
  GS_TRY(get_reals(json_object_get(h, "accuracy"), n, st->heldout_accuracy, false, where,
                   "heldout_curve.accuracy", e));
  GS_TRY(get_reals(json_object_get(h, "loss"), n, st->heldout_loss, true, where,
                   "heldout_curve.loss", e));
  st->nheldout = (int)n;
  return GS_OK;
}

int gs_stale_json_get(json_t *j, gs_summary *s, const char *where, gs_err *e) {
  gs_stale_summary *st = &s->stale;
  int N = s->world;
  GS_TRY(get_text(j, "throughput_basis", &st->throughput_basis, where, e));
  GS_TRY(get_text(j, "target_from", &st->target_from, where, e));
  GS_TRY(get_nullable(j, "target_loss", &st->target_loss, where, e));
  GS_TRY(get_nullable(j, "time_to_target_s", &st->time_to_target_s, where, e));
  json_t *hist = json_object_get(j, "staleness_histogram");
  if (!json_is_array(hist) || json_array_size(hist) > (size_t)1 << 20)
    return GS_FAIL(e, GS_EPROTO, "run %s: staleness_histogram is missing or not an array",
                   where);
  /* the rows are checked before anything of world x world is allocated */
  json_t *waits = json_object_get(j, "waited_for_s");
  bool square = json_is_array(waits) && json_array_size(waits) == (size_t)N;
  for (int r = 0; square && r < N; r++)
    square = json_array_size(json_array_get(waits, (size_t)r)) == (size_t)N;
  if (!square) return GS_FAIL(e, GS_EPROTO, "run %s: waited_for_s is not %d rows of %d", where,
                              N, N);
  st->nhist = (int)json_array_size(hist);
  st->staleness_hist = calloc((size_t)st->nhist + 1, sizeof *st->staleness_hist);
  st->waited_for_s = calloc((size_t)N * N, sizeof *st->waited_for_s);
  st->waited_backend_s = calloc((size_t)N, sizeof *st->waited_backend_s);
  if (!st->staleness_hist || !st->waited_for_s || !st->waited_backend_s)
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int i = 0; i < st->nhist; i++) {
    json_t *x = json_array_get(hist, (size_t)i);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return GS_FAIL(e, GS_EPROTO, "run %s: staleness_histogram[%d] is not a count", where, i);
    st->staleness_hist[i] = (int64_t)json_integer_value(x);
  }
  for (int r = 0; r < N; r++)
    GS_TRY(get_reals(json_array_get(waits, (size_t)r), (size_t)N,
                     st->waited_for_s + (size_t)r * N, false, where, "waited_for_s", e));
  GS_TRY(get_reals(json_object_get(j, "waited_backend_s"), (size_t)N, st->waited_backend_s, false,
                   where, "waited_backend_s", e));
  json_t *curve = json_object_get(j, "loss_curve"), *t = json_object_get(curve, "t_s");
  size_t n = json_array_size(t);
  if (!json_is_object(curve) || !json_is_array(t) || n > CURVE_MAX + 1)
    return GS_FAIL(e, GS_EPROTO, "run %s: loss_curve is not {t_s, loss} of at most %d points",
                   where, CURVE_MAX + 1);
  st->loss_t_s = calloc(n + 1, sizeof *st->loss_t_s);
  st->loss = calloc(n + 1, sizeof *st->loss);
  if (!st->loss_t_s || !st->loss) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  GS_TRY(get_reals(t, n, st->loss_t_s, false, where, "loss_curve.t_s", e));
  GS_TRY(get_reals(json_object_get(curve, "loss"), n, st->loss, false, where, "loss_curve.loss",
                   e));
  st->nloss = (int)n;
  GS_TRY(get_heldout(json_object_get(j, "heldout_curve"), st, where, e));
  json_t *mdl = json_object_get(j, "straggler_model");
  st->model_samples_per_s = NAN;
  if (json_is_null(mdl)) return (st->model_formula = strdup("")) ? GS_OK
                                : GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (!json_is_object(mdl) || !json_is_number(json_object_get(mdl, "samples_per_s")))
    return GS_FAIL(e, GS_EPROTO, "run %s: straggler_model is missing or not {samples_per_s, "
                   "formula} or null", where);
  st->model_samples_per_s = json_number_value(json_object_get(mdl, "samples_per_s"));
  return get_text(mdl, "formula", &st->model_formula, where, e);
}

/* ---- the terminal ---- */

void gs_stale_print(FILE *f, const gs_summary *s) {
  const gs_stale_summary *st = &s->stale;
  int N = s->world;
  if (s->mode == GS_MODE_SINGLE || N < 2 || !st->waited_backend_s) return;
  fprintf(f, "  who waited for whom (ms per step: on the rank whose gradient the awaited "
          "update needed last, while it still computed; %s: the rest):\n",
          s->mode == GS_MODE_PS ? "server" : "collective");
  for (int r = 0; r < N; r++) {
    fprintf(f, "    rank %-4d %s %.2f", r, s->mode == GS_MODE_PS ? "server" : "collective",
            1e3 * st->waited_backend_s[r]);
    for (int q = 0; q < N; q++)
      if (st->waited_for_s[(size_t)r * N + q] > 0)
        fprintf(f, "  rank %d %.2f", q, 1e3 * st->waited_for_s[(size_t)r * N + q]);
    fprintf(f, "\n");
  }
  if (st->nhist > 1 || (st->nhist == 1 && s->ps_sync[0] && strcmp(s->ps_sync, "bsp"))) {
    fprintf(f, "  staleness of applied gradients (updates: count, where not 0):");
    for (int i = 0; i < st->nhist; i++)
      if (st->staleness_hist[i]) fprintf(f, " %d: %lld", i, (long long)st->staleness_hist[i]);
    fprintf(f, "; dropped: %d\n", s->dropped_gradients);
  }
  if (!strcmp(st->throughput_basis, "window"))
    fprintf(f, "  samples/s: gradients applied while every rank trained, over that wall "
            "time (docs/metrics.md)\n");
}

static void target_text(const gs_stale_summary *st, char *buf, size_t cap) {
  if (!isfinite(st->target_loss)) snprintf(buf, cap, "no target");
  else if (isfinite(st->time_to_target_s)) snprintf(buf, cap, "%.2f", st->time_to_target_s);
  else snprintf(buf, cap, "never");
}

/* the runs are about stragglers or staleness: the comparison and the
 * verdict say how long each took to the target */
static bool about_stragglers(const gs_summary *runs, size_t n) {
  bool any = false;
  for (size_t i = 0; i < n; i++)
    any |= runs[i].world > 1 && (runs[i].slow[0] || runs[i].jitter_cv > 0 ||
                                 strcmp(runs[i].stale.throughput_basis, "steps") ||
                                 !strcmp(runs[i].stale.target_from, "--target-loss"));
  return any;
}

void gs_stale_label(const gs_summary *r, char *buf, size_t cap) {
  if (r->mode == GS_MODE_ALLREDUCE)
    snprintf(buf, cap, r->ring_period > 1 ? "ring period %d" : "ring", r->ring_period);
  else if (r->mode == GS_MODE_PS)
    snprintf(buf, cap, "ps %s", r->ps_sync[0] ? r->ps_sync : "bsp");
  else
    snprintf(buf, cap, "%s", gs_mode_name(r->mode));
  /* the knob compared across sweeps (--compare of one run per --compress) */
  size_t len = strlen(buf);
  if (r->compress && r->compress[0] && strcmp(r->compress, "none") && len + 1 < cap)
    snprintf(buf + len, cap - len, " %s", r->compress);
}

void gs_stale_verdict(const gs_summary *runs, size_t n, char *buf, size_t cap) {
  size_t len = strlen(buf);
  if (!about_stragglers(runs, n) || len + 1 >= cap) return;
  const gs_summary *best = NULL;
  int within = 0, modelled = 0;
  double target = NAN;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->world < 2) continue;
    if (isfinite(r->stale.target_loss)) target = r->stale.target_loss;
    if (isfinite(r->stale.time_to_target_s) &&
        (!best || r->stale.time_to_target_s < best->stale.time_to_target_s))
      best = r;
    if (isfinite(r->stale.model_samples_per_s) && r->stale.model_samples_per_s > 0) {
      modelled++;
      within += fabs(r->throughput_samples_per_s / r->stale.model_samples_per_s - 1) <= 0.25;
    }
  }
  if (!isfinite(target)) {
    snprintf(buf + len, cap - len, " Time to a target loss: no synchronous run (ring every "
             "step or ps bsp) of the same world to derive one from; --target-loss X sets it.");
    return;
  }
  len += (size_t)snprintf(buf + len, cap - len, " Time to the training loss %.4g:", target);
  bool first = true;
  for (size_t i = 0; i < n && len < cap; i++) {
    const gs_summary *r = &runs[i];
    if (r->world < 2) continue;
    char name[48];
    gs_stale_label(r, name, sizeof name);
    if (isfinite(r->stale.time_to_target_s))
      len += (size_t)snprintf(buf + len, cap - len, "%s %s %.2f s", first ? "" : ",", name,
                              r->stale.time_to_target_s);
    else
      len += (size_t)snprintf(buf + len, cap - len, "%s %s never reached it", first ? "" : ",",
                              name);
    first = false;
  }
  if (len < cap && best) {
    char name[48];
    gs_stale_label(best, name, sizeof name);
    len += (size_t)snprintf(buf + len, cap - len, "; first there: %s.", name);
  } else if (len < cap) {
    len += (size_t)snprintf(buf + len, cap - len, "; no run reached it.");
  }
  if (len < cap && modelled)
    snprintf(buf + len, cap - len, " The straggler model's samples/s is within 25%% of the "
             "measured for %d of %d runs.", within, modelled);
}

void gs_stale_print_comparison(FILE *f, const gs_summary *runs, size_t n) {
  if (!about_stragglers(runs, n)) return;
  fprintf(f, "\n== stragglers: time to the target loss ==\n");
  fprintf(f, "  target: %s; time: seconds from the run's first step until the smoothed "
          "training loss first reaches it; vs model: measured samples/s over the straggler "
          "model's\n", isfinite(runs[0].stale.target_loss) &&
          !strcmp(runs[0].stale.target_from, "--target-loss") ? "--target-loss"
          : "1.10 x the final smoothed loss of the synchronous run of the same world");
  fprintf(f, "  %-20s %5s %12s %10s %10s %10s %10s %9s %9s\n", "run", "world", "samples/s",
          "model", "vs model", "stale max", "target", "to target", "held-out");
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    const gs_stale_summary *st = &r->stale;
    if (r->world < 2) continue;
    char name[64], mdl[24] = "-", vs[16] = "-", tg[24] = "-", tt[24], ho[16] = "-";
    gs_stale_label(r, name, sizeof name);
    if (isfinite(st->model_samples_per_s)) {
      snprintf(mdl, sizeof mdl, "%.1f", st->model_samples_per_s);
      snprintf(vs, sizeof vs, "%.2fx", r->throughput_samples_per_s / st->model_samples_per_s);
    }
    if (isfinite(st->target_loss)) snprintf(tg, sizeof tg, "%.4f", st->target_loss);
    target_text(st, tt, sizeof tt);
    if (isfinite(r->heldout_accuracy)) snprintf(ho, sizeof ho, "%.1f%%",
                                                100 * r->heldout_accuracy);
    fprintf(f, "  %-20.20s %5d %12.1f %10s %10s %10d %10s %9s %9s\n", name, r->world,
            r->throughput_samples_per_s, mdl, vs, r->staleness_max, tg, tt, ho);
  }
}
