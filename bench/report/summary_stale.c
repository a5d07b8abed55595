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
 *                    from the run's first step (at most GS_LOSS_CURVE_MAX points).
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
 *                    slow as its slowest rank, with its ranks' samples.
 *
 * Pure, like summary.c. The other sides of these members have files of
 * their own, as the run's do: report.json summary_json_stale.c, the
 * terminal tables_stale.c, the verdict verdict_stale.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"
#include "ps/ps.h"

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
  st->loss_t_s = malloc((GS_LOSS_CURVE_MAX + 1) * sizeof *st->loss_t_s);
  st->loss = malloc((GS_LOSS_CURVE_MAX + 1) * sizeof *st->loss);
  if (!by || !st->loss_t_s || !st->loss) {
    free(by);
    return GS_FAIL(e, GS_ENOMEM, "out of memory for the loss curve");
  }
  for (int r = 0; r < N; r++)
    for (size_t t = 0; t < steps; t++)
      if (isfinite(ranks[r].rows[t].loss)) by[n++] = &ranks[r].rows[t];
  qsort(by, n, sizeof *by, cmp_end);
  size_t win = 8 * (size_t)N, every = (n + GS_LOSS_CURVE_MAX - 1) / GS_LOSS_CURVE_MAX;
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

/* the runs are about stragglers or staleness: the comparison and the
 * verdict say how long each took to the target */
bool gs_stale_about_stragglers(const gs_summary *runs, size_t n) {
  bool any = false;
  for (size_t i = 0; i < n; i++)
    any |= runs[i].world > 1 && (runs[i].slow[0] || runs[i].jitter_cv > 0 ||
                                 strcmp(runs[i].stale.throughput_basis, "steps") ||
                                 !strcmp(runs[i].stale.target_from, "--target-loss"));
  return any;
}
