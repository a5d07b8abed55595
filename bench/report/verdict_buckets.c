/* verdict_buckets.c: what a --bucket-mb sweep found (report.h): for each
 * mode, world, model and batch that ran at several bucket sizes, the best
 * size measured (the lowest median step) and why the others lost, from
 * the runs' own bucket timings:
 *
 *   smaller: more buckets, each paying the collective's fixed costs
 *            (latency, per-message overhead, a thread hand-off) - the
 *            latency-bound side;
 *   larger:  fewer, larger buckets, and the last one is ready only when
 *            backward ends, so its whole communication is exposed: the
 *            time from the end of backward to the end of the last bucket
 *            is quoted.
 * Sizes that gave the same buckets (the model's tensors are larger than
 * both caps) are said to be the same plan, and their difference noise. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench/report/report.h"

typedef struct txt {
  char *s;
  size_t cap, n;
} txt;

static void say(txt *t, const char *fmt, ...) {
  if (t->n >= t->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  if (k > 0) t->n += (size_t)k < t->cap - t->n ? (size_t)k : t->cap - t->n - 1;
}

static bool same_series(const gs_summary *a, const gs_summary *b) {
  return a->mode == b->mode && a->world == b->world && a->batch == b->batch &&
         !strcmp(a->model, b->model) && a->hosts == b->hosts;
}

/* ms from the end of backward to the end of the last bucket's communication */
static double tail_ms(const gs_summary *r) {
  double end = -INFINITY;
  for (int i = 0; i < r->nbucket_timing; i++)
    if (r->bucket_timing[i].comm_end_s > end) end = r->bucket_timing[i].comm_end_s;
  return isfinite(end) && isfinite(r->backward_end_s) ? (end - r->backward_end_s) * 1e3 : NAN;
}

/* a time in ms, to 3 significant figures below 100 ms, whole above */
static const char *ms(double s, char *buf, size_t cap) {
  double v = s * 1e3;
  snprintf(buf, cap, fabs(v) >= 100 ? "%.0f" : "%.3g", v);
  return buf;
}

/* --bucket-mb 0 is no size: a bucket per tensor */
#define PER_TENSOR(mb) ((mb) == 0 ? " (a bucket per tensor)" : "")

/* one run against the other: within CLOSE they are not told apart */
#define CLOSE 0.05

static void why(txt *t, const gs_summary *best, const gs_summary *o) {
  double d = (o->step_time_s_median / best->step_time_s_median - 1) * 100;
  char a[32], b[32];
  say(t, " %g MiB%s: %s ms (%+.0f%%)", o->bucket_mb, PER_TENSOR(o->bucket_mb),
      ms(o->step_time_s_median, a, sizeof a), d);
  int reps = o->nrepeats < best->nrepeats ? o->nrepeats : best->nrepeats;
  if (d < CLOSE * 100 && reps <= 1) {
    say(t, ", within %.0f%% of the best: too close to call from one run each (--repeat K "
        "shows the spread)", CLOSE * 100);
  } else if (o->nbuckets == best->nbuckets) {
    say(t, ", the same %d bucket%s (the model's tensors decide them), so the difference is "
        "noise", o->nbuckets, o->nbuckets > 1 ? "s" : "");
  } else if (o->bucket_mb < best->bucket_mb) {
    say(t, ", %d buckets against %d: each pays the collective's fixed costs (latency-bound)",
        o->nbuckets, best->nbuckets);
  } else {
    double tl = tail_ms(o), tb = tail_ms(best);
    say(t, ", %d bucket%s against %d: the last is ready only when backward ends", o->nbuckets,
        o->nbuckets > 1 ? "s" : "", best->nbuckets);
    if (isfinite(tl) && isfinite(tb))
      say(t, " and its communication ends %s ms after backward (%s ms at %g MiB)",
          ms(tl / 1e3, a, sizeof a), ms(tb / 1e3, b, sizeof b), best->bucket_mb);
  }
  say(t, ";");
}

void gs_bucket_verdict(const gs_summary *runs, size_t n, char *text, size_t cap) {
  txt t = {text, cap, 0};
  if (cap) text[0] = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *a = &runs[i];
    if (a->world < 2) continue;
    bool first = true, several = false;
    const gs_summary *best = a;
    for (size_t j = 0; j < n; j++) {
      if (!same_series(a, &runs[j])) continue;
      if (j < i) first = false;
      if (runs[j].bucket_mb != a->bucket_mb) several = true;
      if (runs[j].step_time_s_median < best->step_time_s_median) best = &runs[j];
    }
    if (!first || !several) continue;
    char where[48];
    if (a->hosts > 0) snprintf(where, sizeof where, "%d hosts at %.4g Mbit/s", a->hosts,
                               a->link_rate_bps / 1e6);
    else snprintf(where, sizeof where, "loopback");
    char m1[32], m2[32];
    double wait = best->per_rank[0].comm_wait_s;
    say(&t, "%s%s world %d, %s, %s: best bucket size measured %g MiB%s (%d bucket%s, median "
        "step %s ms, exposed communication %s ms).", t.n ? " " : "", gs_mode_name(a->mode),
        a->world, a->model, where, best->bucket_mb, PER_TENSOR(best->bucket_mb), best->nbuckets,
        best->nbuckets > 1 ? "s" : "",
        ms(best->step_time_s_median, m1, sizeof m1), ms(wait, m2, sizeof m2));
    if (wait > 0.8 * best->step_time_s_median)
      say(&t, " Communication is most of the step (%.0f%%): the bytes take that long in any "
          "buckets, so the size can move the step only a little.",
          100 * wait / best->step_time_s_median);
    say(&t, " Against it:");
    for (size_t j = 0; j < n; j++)
      if (same_series(a, &runs[j]) && &runs[j] != best) why(&t, best, &runs[j]);
    if (t.n && t.n < t.cap && text[t.n - 1] == ';') text[t.n - 1] = '.';
  }
}
