/* verdict_stale.c: the verdict's sentence on stragglers and stale models
 * (report.h gs_stale_verdict): how long each run of several ranks took to
 * the target loss, which got there first, and how often the straggler
 * model's samples/s came within 25% of the measured; nothing when the runs
 * are not about stragglers or staleness. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/report/report.h"

void gs_stale_verdict(const gs_summary *runs, size_t n, char *buf, size_t cap) {
  size_t len = strlen(buf);
  if (!gs_stale_about_stragglers(runs, n) || len + 1 >= cap) return;
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
