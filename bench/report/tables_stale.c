/* tables_stale.c: the terminal's lines on stragglers and stale models,
 * from gs_stale_summary (summary_stale.c computes it): a run's who waited
 * for whom and its staleness (under the run's table, tables.c), the
 * comparison of the runs' time to the target loss, and the name a run goes
 * by in those and in the verdict. */
#include <math.h>
#include <string.h>

#include "bench/report/report.h"

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

void gs_stale_print_comparison(FILE *f, const gs_summary *runs, size_t n) {
  if (!gs_stale_about_stragglers(runs, n)) return;
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
