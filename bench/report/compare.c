/* compare.c: bench --compare DIR[,DIR...]: the runs of several sweeps side
 * by side, for comparisons one sweep cannot hold (a sweep runs one
 * --ps-sync, one --ps-backup and one --ring-period). Reads each DIR's
 * report.json (every metric must be there), takes its runs of more than
 * one rank, derives the target loss once over all of them (report.h
 * gs_stale_targets), prints the stragglers table and the verdict's
 * sentence on time to target, and writes loss.svg, accuracy.svg, staleness.svg and
 * compare.json (each run's figures and the directory it came from) into
 * out_dir, which must not hold a comparison already. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/report/report.h"

static json_t *nullable(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *run_json(const gs_summary *r, const char *dir) {
  const gs_stale_summary *st = &r->stale;
  return json_pack("{s:s, s:s, s:s, s:i, s:s, s:i, s:s, s:f, s:s, s:o, s:i, s:o, s:i, s:o, s:s, "
                   "s:o, s:o}", "dir", dir, "id", r->id, "mode", gs_mode_name(r->mode), "world",
                   r->world, "ps_sync", r->ps_sync, "ring_period", r->ring_period,
                   "compress", r->compress ? r->compress : "", "throughput_samples_per_s",
                   r->throughput_samples_per_s, "throughput_basis",
                   st->throughput_basis, "straggler_model_samples_per_s",
                   nullable(st->model_samples_per_s), "staleness_max", r->staleness_max,
                   "staleness_mean", nullable(r->staleness_mean), "dropped_gradients",
                   r->dropped_gradients, "target_loss", nullable(st->target_loss),
                   "target_from", st->target_from, "time_to_target_s",
                   nullable(st->time_to_target_s), "heldout_accuracy",
                   nullable(r->heldout_accuracy));
}

int gs_report_compare(const char *const *dirs, int ndirs, const char *out_dir, double target,
                      FILE *out, gs_err *e) {
  char path[4200];
  snprintf(path, sizeof path, "%s/compare.json", out_dir);
  struct stat sb;
  if (lstat(path, &sb) == 0)
    return GS_FAIL(e, GS_EINVAL, "%s already holds a comparison; give --out a new directory",
                   out_dir);
  gs_summary *all = NULL;
  const char **from = NULL;
  size_t n = 0;
  int rc = GS_OK;
  for (int d = 0; rc == GS_OK && d < ndirs; d++) {
    json_t *doc;
    gs_summary *runs;
    size_t k;
    if ((rc = gs_report_load(dirs[d], &doc, &runs, &k, e)) < 0) {
      gs_err_prefix(e, "--compare %s: ", dirs[d]);
      break;
    }
    json_decref(doc);
    gs_summary *more = realloc(all, (n + k) * sizeof *all);
    const char **more_from = more ? realloc(from, (n + k) * sizeof *from) : NULL;
    if (more) all = more;
    if (more_from) from = more_from;
    if (!more || !more_from) {
      gs_summaries_free(runs, k);
      rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
      break;
    }
    for (size_t i = 0; i < k; i++) {
      if (runs[i].world < 2) {
        gs_summary_free(&runs[i]);
        continue;
      }
      from[n] = dirs[d];
      all[n++] = runs[i]; /* moved: its members now belong to all */
    }
    free(runs);
  }
  if (rc == GS_OK && n == 0)
    rc = GS_FAIL(e, GS_EINVAL, "--compare: no run of more than one rank in %d report(s)", ndirs);
  if (rc == GS_OK) {
    gs_stale_targets(all, n, target);
    gs_stale_print_comparison(out, all, n);
    char verdict[2048] = "";
    gs_stale_verdict(all, n, verdict, sizeof verdict);
    if (verdict[0]) gs_verdict_print(out, verdict + (verdict[0] == ' '));
    rc = gs_mkdirs(out_dir, e);
    json_t *doc = json_pack("{s:s, s:s, s:[]}", "generator", "gradsync bench --compare", "verdict",
                            verdict + (verdict[0] == ' '), "runs");
    json_t *arr = json_object_get(doc, "runs");
    for (size_t i = 0; rc == GS_OK && i < n; i++)
      if (!doc || json_array_append_new(arr, run_json(&all[i], from[i])))
        rc = GS_FAIL(e, GS_ENOMEM, "out of memory writing compare.json");
    if (rc == GS_OK) rc = gs_json_write_atomic(path, doc, e);
    json_decref(doc);
    if (rc == GS_OK) rc = gs_charts_stale(out_dir, all, n, e);
    bool curves = false;
    for (size_t i = 0; i < n; i++) curves |= all[i].stale.nheldout > 0;
    if (rc == GS_OK)
      fprintf(out, "\nresults: %s/compare.json, loss.svg, %sstaleness.svg\n", out_dir,
              curves ? "accuracy.svg, " : "");
  }
  gs_summaries_free(all, n);
  free(from);
  return rc;
}
