/* repeats.c: --repeat K. The launcher runs every configuration once, then
 * again, K times over (interleaved, so a slow minute of a shared machine
 * lands on every configuration alike rather than on one). Here the K runs
 * of each configuration become one record: the run of median throughput
 * (for even K the lower of the two middle ones, a run that happened rather
 * than an average of two), which keeps its per-rank rows, links and
 * timeline, and carries the throughput, step median and id of every
 * repetition, so a report shows the median with its min-max. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"

/* the same configuration, whatever the repetition */
static bool same_config(const gs_summary *a, const gs_summary *b) {
  return a->mode == b->mode && a->world == b->world && !strcmp(a->model, b->model) &&
         a->batch == b->batch && a->bucket_mb == b->bucket_mb && a->precision == b->precision &&
         a->ps_servers == b->ps_servers && a->ps_server_hosts == b->ps_server_hosts &&
         a->ps_spare_hosts == b->ps_spare_hosts && a->ps_partition_mb == b->ps_partition_mb &&
         a->ps_dedicated == b->ps_dedicated && a->overlap == b->overlap && a->hosts == b->hosts;
}

static int by_throughput(const void *a, const void *b) {
  const gs_summary *x = *(const gs_summary *const *)a, *y = *(const gs_summary *const *)b;
  double u = x->throughput_samples_per_s, v = y->throughput_samples_per_s;
  if (u != v) return u < v ? -1 : 1;
  return x->repeat - y->repeat;
}

static int by_repeat(const void *a, const void *b) {
  return (*(const gs_summary *const *)a)->repeat - (*(const gs_summary *const *)b)->repeat;
}

int gs_summary_repeats(gs_summary *runs, size_t n, gs_summary **out, size_t *nout, gs_err *e) {
  *out = NULL;
  *nout = 0;
  gs_summary *res = calloc(n + 1, sizeof *res);
  gs_summary **group = calloc(n + 1, sizeof *group);
  bool *taken = calloc(n + 1, sizeof *taken);
  if (!res || !group || !taken) {
    free(res);
    free(group);
    free(taken);
    return GS_FAIL(e, GS_ENOMEM, "out of memory gathering the repetitions");
  }
  size_t m = 0;
  int rc = GS_OK;
  for (size_t i = 0; i < n && rc == GS_OK; i++) {
    if (taken[i]) continue;
    size_t g = 0;
    for (size_t j = i; j < n; j++)
      if (!taken[j] && same_config(&runs[i], &runs[j])) {
        taken[j] = true;
        group[g++] = &runs[j];
      }
    qsort(group, g, sizeof *group, by_throughput);
    gs_summary *mid = group[(g - 1) / 2];
    double *tp = calloc(g, sizeof *tp), *st = calloc(g, sizeof *st);
    char **ids = calloc(g, sizeof *ids);
    if (!tp || !st || !ids) {
      free(tp);
      free(st);
      free(ids);
      rc = GS_FAIL(e, GS_ENOMEM, "out of memory gathering the repetitions");
      break;
    }
    qsort(group, g, sizeof *group, by_repeat);
    for (size_t k = 0; k < g; k++) {
      tp[k] = group[k]->throughput_samples_per_s;
      st[k] = group[k]->step_time_s_median;
      ids[k] = group[k]->id ? strdup(group[k]->id) : NULL;
      if (!ids[k]) rc = GS_FAIL(e, GS_ENOMEM, "out of memory gathering the repetitions");
    }
    /* the median run keeps its rows; its repetition lists become all of them */
    for (int k = 0; k < mid->nrepeats; k++) free(mid->repeat_ids[k]);
    free(mid->repeat_ids);
    free(mid->repeat_throughput);
    free(mid->repeat_step_median);
    mid->repeat_ids = ids;
    mid->repeat_throughput = tp;
    mid->repeat_step_median = st;
    mid->nrepeats = (int)g;
    res[m++] = *mid;
    memset(mid, 0, sizeof *mid);
    for (size_t k = 0; k < g; k++) gs_summary_free(group[k]);
  }
  free(group);
  free(taken);
  for (size_t i = 0; i < n; i++) gs_summary_free(&runs[i]);
  if (rc < 0) {
    for (size_t i = 0; i < m; i++) gs_summary_free(&res[i]);
    free(res);
    return rc;
  }
  *out = res;
  *nout = m;
  return GS_OK;
}

void gs_summary_spread(const gs_summary *s, double *lo, double *hi) {
  *lo = *hi = s->throughput_samples_per_s;
  for (int k = 0; k < s->nrepeats; k++) {
    double v = s->repeat_throughput[k];
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
}
