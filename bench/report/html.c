/* html.c: report.html, the run's results as one self-contained page.
 *
 * A training sweep's page opens with what a reader came for, on its first
 * screen: the verdict (report.json's), where the ranks talked, the one chart
 * that shows the comparison (step time against emulated hosts with the
 * cost model dashed, or throughput against the world on loopback), and the
 * comparison table, its numbers for people (3 significant digits, whole
 * numbers from 100, units in the headings, shares as %). Then the peers, or
 * the collective benchmark's tables, every other SVG chart of the results
 * directory inlined, each run's per-rank table (ms and MiB per step), its
 * links and its cost model, and the configuration and environment.
 * Nothing comes from outside the file (no <img src>, no script, no font or
 * style sheet from the network), so it opens from a mail attachment or a CI
 * artifact as it opened here. It is rendered from report.json's document,
 * the same numbers the terminal and the JSON show. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

static void esc(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default: fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
    }
  }
}

/* a JSON value as table text: numbers with sensible precision, null as
 * "n/a" (a value that could not be measured), objects as "…" */
static void cell(FILE *f, json_t *v) {
  if (json_is_integer(v)) fprintf(f, "%lld", (long long)json_integer_value(v));
  else if (json_is_real(v)) {
    double x = json_real_value(v);
    fprintf(f, x != 0 && (x < 1e-3 && x > -1e-3) ? "%.3g" : x < 100 && x > -100 ? "%.4g" : "%.1f", x);
  } else if (json_is_string(v)) esc(f, json_string_value(v));
  else if (json_is_true(v)) fputs("yes", f);
  else if (json_is_false(v)) fputs("no", f);
  else if (json_is_null(v) || !v) fputs("n/a", f);
  else fputs("&hellip;", f);
}

/* every scalar member of an object as a two-column table (nested objects
 * one level down, as "outer.inner") */
static void kv_table(FILE *f, const char *title, json_t *o) {
  if (!json_is_object(o)) return;
  fprintf(f, "<h3>");
  esc(f, title);
  fprintf(f, "</h3>\n<table class=\"kv\">\n");
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (json_is_object(v)) {
      const char *k2;
      json_t *v2;
      json_object_foreach(v, k2, v2) {
        if (json_is_object(v2) || json_is_array(v2)) continue;
        fprintf(f, "<tr><th>");
        esc(f, k);
        fputc('.', f);
        esc(f, k2);
        fprintf(f, "</th><td>");
        cell(f, v2);
        fprintf(f, "</td></tr>\n");
      }
      continue;
    }
    if (json_is_array(v)) {
      size_t i, n = json_array_size(v);
      bool scalars = true;
      json_t *x;
      json_array_foreach(v, i, x) scalars = scalars && !json_is_object(x) && !json_is_array(x);
      if (!scalars || n > 32) continue;
      fprintf(f, "<tr><th>");
      esc(f, k);
      fprintf(f, "</th><td>");
      json_array_foreach(v, i, x) {
        if (i) fputs(", ", f);
        cell(f, x);
      }
      fprintf(f, "</td></tr>\n");
      continue;
    }
    fprintf(f, "<tr><th>");
    esc(f, k);
    fprintf(f, "</th><td>");
    cell(f, v);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

/* rows x columns from an array of objects; a missing member is "n/a" */
static void array_table(FILE *f, json_t *rows, const char *const *cols, const char *const *heads,
                        int ncols) {
  fprintf(f, "<table>\n<tr>");
  for (int c = 0; c < ncols; c++) {
    fprintf(f, "<th>");
    esc(f, heads[c]);
    fprintf(f, "</th>");
  }
  fprintf(f, "</tr>\n");
  size_t i;
  json_t *r;
  json_array_foreach(rows, i, r) {
    fprintf(f, "<tr>");
    for (int c = 0; c < ncols; c++) {
      fprintf(f, "<td>");
      cell(f, json_object_get(r, cols[c]));
      fprintf(f, "</td>");
    }
    fprintf(f, "</tr>\n");
  }
  fprintf(f, "</table>\n");
}

static const char *const run_cols[] = {
    "mode", "model", "batch", "world", "throughput_samples_per_s", "step_time_s_median",
    "imbalance", "scaling_efficiency", "master_traffic_share", "skipped_steps", "final_loss"};
static const char *const run_heads[] = {
    "mode", "model", "batch/rank", "world", "samples/s", "step (s, median)", "imbalance",
    "scaling", "master share", "skipped", "final loss"};

static const char *const coll_cols[] = {"size_bytes", "count", "time_us", "algbw_gbps",
                                        "busbw_gbps", "wrong"};
static const char *const coll_heads[] = {"size (B)", "count", "time (us)", "algbw (GB/s)",
                                         "busbw (GB/s)", "wrong"};

#define NCOLS(a) ((int)(sizeof(a) / sizeof(a[0])))

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* A chart of dir this user wrote: a regular file, not a link, of this
 * user (a results directory may be shared: what someone else put there is
 * not inlined). NULL otherwise. */
static FILE *open_own(const char *path) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
    FILE *f = fdopen(fd, "r");
    if (f) return f;
  }
  if (fd >= 0) close(fd);
  return NULL;
}

/* dir/name inlined as a figure, its name as the caption; the XML prologue
 * is dropped (it is not allowed inside HTML). Whether it was there. */
static bool inline_chart(FILE *f, const char *dir, const char *name) {
  char path[4200];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return false;
  FILE *in = open_own(path);
  char *svg = NULL;
  size_t cap = 0;
  ssize_t got = in ? getdelim(&svg, &cap, '\0', in) : -1;
  if (in) fclose(in);
  const char *start = got > 0 ? strstr(svg, "<svg") : NULL;
  if (start) {
    fprintf(f, "<figure>\n%s\n<figcaption>", start);
    esc(f, name);
    fprintf(f, "</figcaption></figure>\n");
  }
  free(svg);
  return start != NULL;
}

/* every *.svg of dir this user wrote inlined but skip (NULL: none) */
static int inline_charts(FILE *f, const char *dir, const char *skip) {
  struct dirent **ents = NULL;
  int n = scandir(dir, &ents, NULL, by_name), shown = 0;
  for (int i = 0; i < n; i++) {
    const char *name = ents[i]->d_name;
    size_t len = strlen(name);
    if (len > 4 && !strcmp(name + len - 4, ".svg") && !(skip && !strcmp(name, skip)))
      shown += inline_chart(f, dir, name);
    free(ents[i]);
  }
  free(ents);
  return shown;
}

/* ---- numbers for people: 3 significant digits (whole numbers from 100),
 * with their unit ---- */

static double num(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static void fmt3(FILE *f, double x, double scale, const char *unit) {
  if (!isfinite(x)) {
    fputs("n/a", f);
    return;
  }
  x *= scale;
  if (fabs(x) >= 100) fprintf(f, "%.0f%s", x, unit);
  else if (x == 0) fprintf(f, "0%s", unit);
  else fprintf(f, "%#.3g%s", x, unit);
}

/* a cell: <td> value </td> */
static void td(FILE *f, double x, double scale, const char *unit) {
  fputs("<td>", f);
  fmt3(f, x, scale, unit);
  fputs("</td>", f);
}

/* a count: a whole number */
static void td_count(FILE *f, double x) {
  if (isfinite(x)) fprintf(f, "<td>%.0f</td>", x);
  else fputs("<td>n/a</td>", f);
}

static void th_row(FILE *f, const char *const *heads, int n) {
  fputs("<tr>", f);
  for (int i = 0; i < n; i++) {
    fputs("<th>", f);
    esc(f, heads[i]);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
}

/* the chart that shows the comparison: step time against hosts where the
 * ranks were on emulated hosts, else throughput against the world */
static const char *first_chart(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/hosts.svg", dir);
  FILE *t = fopen(path, "r");
  if (t) fclose(t);
  return t ? "hosts.svg" : "scaling.svg";
}

/* the ring's throughput over ps's at the run's world (NaN: no ps there) */
static double vs_ps(json_t *runs, json_t *r) {
  size_t i;
  json_t *q;
  json_array_foreach(runs, i, q) {
    const char *m = json_string_value(json_object_get(q, "mode"));
    const char *mine = json_string_value(json_object_get(r, "mode"));
    if (gs_mode_parse(m) == GS_MODE_PS && mine && gs_mode_parse(mine) != GS_MODE_PS &&
        num(q, "world") == num(r, "world") &&
        num(q, "ps_servers") == 1 && json_is_false(json_object_get(q, "ps_server_hosts")) &&
        num(q, "ps_spare_hosts") < 0 &&
        num(q, "batch") == num(r, "batch") && num(r, "world") > 1)
      return num(r, "throughput_samples_per_s") / num(q, "throughput_samples_per_s");
  }
  return NAN;
}

static void comparison(FILE *f, json_t *runs) {
  static const char *const heads[] = {
      "mode", "world", "hosts", "samples/s (median)", "runs: slowest-fastest", "vs ps",
      "step (ms, median)", "exposed comm (ms)", "hidden comm (ms)", "imbalance", "scaling",
      "master/worker bytes", "host 0 link busy", "other links busy"};
  fputs("<table class=\"cmp\">\n", f);
  th_row(f, heads, (int)(sizeof heads / sizeof heads[0]));
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) {
    json_t *pr = json_object_get(r, "per_rank"), *links = json_object_get(r, "links"), *x;
    size_t k;
    double wait = 0, hidden = 0, busy0 = NAN, lo = NAN, hi = NAN;
    json_array_foreach(pr, k, x) {
      wait += num(x, "comm_wait_s") / json_array_size(pr);
      hidden += num(x, "comm_hidden_s") / json_array_size(pr);
    }
    json_array_foreach(links, k, x) {
      double b = num(x, "busy");
      if (k == 0) busy0 = b;
      else {
        lo = isfinite(lo) && lo < b ? lo : b;
        hi = isfinite(hi) && hi > b ? hi : b;
      }
    }
    json_t *reps = json_object_get(r, "repeats");
    json_t *tp = json_object_get(reps, "throughput_samples_per_s");
    double tlo = INFINITY, thi = 0;
    json_array_foreach(tp, k, x) {
      tlo = json_number_value(x) < tlo ? json_number_value(x) : tlo;
      thi = json_number_value(x) > thi ? json_number_value(x) : thi;
    }
    fputs("<tr><td>", f);
    cell(f, json_object_get(r, "mode"));
    fputs("</td>", f);
    td_count(f, num(r, "world"));
    td_count(f, num(r, "hosts"));
    td(f, num(r, "throughput_samples_per_s"), 1, "");
    if (json_array_size(tp) > 1) {
      fputs("<td>", f);
      fmt3(f, tlo, 1, "");
      fputs("&ndash;", f);
      fmt3(f, thi, 1, "");
      fprintf(f, " (%zu runs)</td>", json_array_size(tp));
    } else {
      fputs("<td>one run</td>", f);
    }
    td(f, vs_ps(runs, r), 1, "x");
    td(f, num(r, "step_time_s_median"), 1e3, "");
    td(f, wait, 1e3, "");
    td(f, hidden, 1e3, "");
    td(f, num(r, "imbalance"), 1, "");
    td(f, num(r, "scaling_efficiency"), 1, "");
    td(f, num(r, "master_bytes_vs_worker"), 1, "x");
    td(f, busy0, 100, "%");
    if (isfinite(lo) && hi - lo >= 0.005) {
      fputs("<td>", f);
      fmt3(f, lo, 100, "");
      fputs("&ndash;", f);
      fmt3(f, hi, 100, "%");
      fputs("</td>", f);
    } else {
      td(f, lo, 100, "%");
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n<p class=\"note\">samples/s: global samples per second over the measured "
        "steps, the median of the runs of each configuration; step: the median step of that "
        "run; exposed communication: the mean time per step a rank waited for it; hidden: "
        "communication that ran while the rank computed (overlap); master/worker bytes: the "
        "single master's bytes per step over a worker's (n/a: no single master); busy: the "
        "share of the measured steps a link carried data, either direction.</p>\n", f);
}

static void rank_table(FILE *f, json_t *r) {
  static const char *const heads[] = {
      "rank", "host", "compute (ms)", "wait (ms)", "hidden (ms)", "reduce (ms)", "update (ms)",
      "busy (ms)", "idle (ms)", "step (ms, mean)", "sent (MiB)", "recv (MiB)", "vs model",
      "peak RSS (MiB)"};
  static const char *const keys[] = {"compute_s", "comm_wait_s", "comm_hidden_s", "reduce_s",
                                     "update_s", "busy_s", "idle_s", "step_s"};
  const double MiB = 1.0 / (1024.0 * 1024.0);
  fputs("<table>\n", f);
  th_row(f, heads, (int)(sizeof heads / sizeof heads[0]));
  size_t i;
  json_t *x;
  json_array_foreach(json_object_get(r, "per_rank"), i, x) {
    fputs("<tr>", f);
    td_count(f, num(x, "rank"));
    fputs("<td>", f);
    cell(f, json_object_get(x, "host"));
    fputs("</td>", f);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) td(f, num(x, keys[k]), 1e3, "");
    td(f, num(x, "bytes_sent"), MiB, "");
    td(f, num(x, "bytes_recv"), MiB, "");
    double model = num(x, "model_bytes_sent") + num(x, "model_bytes_recv");
    td(f, model > 0 ? num(x, "traffic_vs_model") : NAN, 1, "x");
    td(f, num(x, "peak_rss_bytes"), MiB, "");
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
}

/* stragglers: who waited for whom (ms per step), staleness, time to the
 * target loss and the straggler model, for a run of several ranks */
static void stale_table(FILE *f, json_t *r) {
  json_t *waits = json_object_get(r, "waited_for_s"), *row;
  size_t n = json_array_size(waits), i, q;
  if (n < 2) return;
  bool ps = !strcmp(json_string_value(json_object_get(r, "mode")) ?: "", "ps");
  fprintf(f, "<p>who waited for whom, ms per step: on the rank whose gradient the awaited "
             "update needed last, while it still computed; %s: the rest</p>\n<table>\n"
             "<tr><th>rank</th><th>%s</th>", ps ? "server" : "collective",
          ps ? "server" : "collective");
  for (q = 0; q < n; q++) fprintf(f, "<th>on rank %zu</th>", q);
  fputs("</tr>\n", f);
  json_array_foreach(waits, i, row) {
    fprintf(f, "<tr><td>%zu</td>", i);
    td(f, json_number_value(json_array_get(json_object_get(r, "waited_backend_s"), i)), 1e3, "");
    for (q = 0; q < n; q++) td(f, json_number_value(json_array_get(row, q)), 1e3, "");
    fputs("</tr>\n", f);
  }
  fputs("</table>\n<p>staleness of applied gradients (count by updates): ", f);
  json_array_foreach(json_object_get(r, "staleness_histogram"), i, row)
    fprintf(f, "%s%zu: %lld", i ? ", " : "", i, (long long)json_integer_value(row));
  fputs("; samples/s basis: ", f);
  cell(f, json_object_get(r, "throughput_basis"));
  fputs("; target loss ", f);
  cell(f, json_object_get(r, "target_loss"));
  fputs(" (", f);
  cell(f, json_object_get(r, "target_from"));
  fputs("), reached after ", f);
  json_t *tt = json_object_get(r, "time_to_target_s");
  if (json_is_number(tt)) fmt3(f, json_number_value(tt), 1, " s");
  else fputs(json_is_number(json_object_get(r, "target_loss")) ? "never" : "n/a", f);
  json_t *m = json_object_get(r, "straggler_model");
  if (json_is_object(m)) {
    fputs("; straggler model ", f);
    fmt3(f, num(m, "samples_per_s"), 1, " samples/s");
    fputs(" (", f);
    cell(f, json_object_get(m, "formula"));
    fputs(")", f);
  }
  fputs("</p>\n", f);
}

static void links_table(FILE *f, json_t *r) {
  json_t *links = json_object_get(r, "links");
  if (!json_array_size(links)) return;
  static const char *const heads[] = {"host", "sent (MiB/step)", "model", "recv (MiB/step)",
                                      "model", "busy sending", "receiving", "either"};
  const double MiB = 1.0 / (1024.0 * 1024.0);
  fputs("<table>\n", f);
  th_row(f, heads, (int)(sizeof heads / sizeof heads[0]));
  size_t i;
  json_t *x;
  json_array_foreach(links, i, x) {
    fputs("<tr>", f);
    td_count(f, num(x, "host"));
    td(f, num(x, "tx_bytes"), MiB, "");
    td(f, num(x, "model_tx_bytes"), MiB, "");
    td(f, num(x, "rx_bytes"), MiB, "");
    td(f, num(x, "model_rx_bytes"), MiB, "");
    td(f, num(x, "busy_tx"), 100, "%");
    td(f, num(x, "busy_rx"), 100, "%");
    td(f, num(x, "busy"), 100, "%");
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
}

static void cost_table(FILE *f, json_t *r) {
  json_t *cm = json_object_get(r, "cost_model");
  if (!json_is_object(cm) || num(r, "world") < 2) return;
  const double MiB = 1.0 / (1024.0 * 1024.0);
  fputs("<table class=\"kv\">\n<tr><th>formula</th><td>", f);
  cell(f, json_object_get(cm, "formula"));
  fputs("</td></tr>\n<tr><th>S, the gradients (MiB per step)</th>", f);
  td(f, num(cm, "S_bytes"), MiB, "");
  fputs("</tr>\n<tr><th>master, each way (MiB per step)</th>", f);
  td(f, num(cm, "master_bytes_sent"), MiB, "");
  fputs("</tr>\n<tr><th>other ranks, each way (MiB per step)</th>", f);
  td(f, num(cm, "worker_bytes_sent"), MiB, "");
  if (isfinite(num(cm, "comm_s_predicted"))) {
    fputs("</tr>\n<tr><th>exposed communication per step: model (ms)</th>", f);
    td(f, num(cm, "comm_s_predicted"), 1e3, "");
    fputs("</tr>\n<tr><th>exposed communication per step: measured (ms)</th>", f);
    td(f, num(cm, "comm_s_measured"), 1e3, "");
    fputs("</tr>\n<tr><th>all communication, overlapped or not: model (ms)</th>", f);
    td(f, num(cm, "comm_s_without_overlap"), 1e3, "");
    fputs("</tr>\n<tr><th>step: model (ms)</th>", f);
    td(f, num(cm, "step_s_predicted"), 1e3, "");
    fputs("</tr>\n<tr><th>busiest link, busiest direction: model</th>", f);
    td(f, num(cm, "link_one_way_busy_predicted"), 100, "%");
    fputs("</tr>\n<tr><th>the model's bottleneck</th><td>", f);
    cell(f, json_object_get(cm, "bottleneck"));
    fputs("</td>", f);
  }
  fputs("</tr>\n</table>\n", f);
}

static const char *style =
    "body{font-family:Helvetica,Arial,sans-serif;margin:2em;color:#222;max-width:1400px}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;"
    "padding:3px 8px;text-align:right}th{background:#f3f3f3}table.kv th{text-align:left}"
    "td:nth-child(2){text-align:left}table.cmp td:nth-child(2){text-align:right}"
    "table.cmp td:first-child{text-align:left}figure{display:inline-block;margin:1em}"
    "figcaption{text-align:center;color:#666;font-size:90%}p.notice{background:#fff4d6;"
    "border:1px solid #e0c060;padding:6px 10px}h2{border-bottom:1px solid #ddd}"
    "div.verdict{background:#eef6ee;border:1px solid #8c8;padding:8px 14px;font-size:110%;"
    "max-width:1100px}p.note{color:#555;font-size:90%;max-width:1100px}"
    "p.where{color:#444;margin:0.2em 0 0.8em}";

int gs_html_write(const char *dir, json_t *report, gs_err *e) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return GS_FAIL(e, GS_ENOMEM, "report.html: out of memory");
  json_t *runs = json_object_get(report, "runs");
  bool training = json_array_size(runs) > 0;
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
             "<title>gradsync report</title>\n<style>%s</style></head><body>\n"
             "<h1>gradsync: %s</h1>\n", style,
          json_object_get(report, "collective") ? "the collectives alone" : "ps vs ring");
  if (json_is_true(json_object_get(report, "interrupted")))
    fprintf(f, "<p class=\"notice\"><b>Interrupted:</b> only the runs that completed.</p>\n");
  json_t *verdict = json_object_get(report, "verdict");
  const char *chart = first_chart(dir);
  if (training) {
    /* the first screen: what the run found, the chart that shows it, the
     * comparison; everything else after */
    fprintf(f, "<div class=\"verdict\" id=\"verdict\"><b>Verdict.</b> ");
    cell(f, json_object_get(verdict, "text"));
    fprintf(f, "</div>\n<p class=\"where\">");
    cell(f, json_object_get(json_object_get(report, "links_chosen"), "sentence"));
    fprintf(f, " &middot; ");
    cell(f, json_object_get(json_object_get(report, "environment"), "hostname"));
    fprintf(f, ", %lld cores</p>\n",
            (long long)num(json_object_get(report, "environment"), "cores"));
    inline_chart(f, dir, chart);
    const char *notice = json_string_value(json_object_get(report, "oversubscribed_notice"));
    if (notice) {
      fprintf(f, "<p class=\"notice\"><b>Note:</b> ");
      esc(f, notice);
      fprintf(f, ".</p>\n");
    }
    comparison(f, runs);
  }
  json_t *peers = json_object_get(report, "peers");
  if (json_array_size(peers)) {
    fprintf(f, "<h2>Peers</h2>\n<p>Measured in this same invocation on the same model, batch "
               "per rank, world and synthetic data.</p>\n");
    array_table(f, peers, run_cols, run_heads, NCOLS(run_cols));
  }
  size_t i;
  json_t *r;
  json_array_foreach(json_object_get(report, "collective"), i, r) {
    fprintf(f, "<h2>");
    const char *name = json_string_value(json_object_get(r, "collective"));
    esc(f, !name || !strcmp(name, "allreduce") ? "all_reduce" : name);
    fprintf(f, ": ");
    cell(f, json_object_get(r, "mode"));
    fprintf(f, ", world ");
    cell(f, json_object_get(r, "world"));
    fprintf(f, ", ");
    cell(f, json_object_get(r, "type"));
    fprintf(f, ", ");
    cell(f, json_object_get(r, "redop"));
    fprintf(f, "</h2>\n<p>");
    cell(f, json_object_get(r, "busbw_formula"));
    fprintf(f, "; ");
    cell(f, json_object_get(r, "units"));
    fprintf(f, "</p>\n");
    array_table(f, json_object_get(r, "rows"), coll_cols, coll_heads, NCOLS(coll_cols));
  }
  fprintf(f, "<h2>Charts</h2>\n");
  if (!inline_charts(f, dir, training ? chart : NULL) && !training)
    fprintf(f, "<p>no charts in this results directory</p>\n");
  json_array_foreach(runs, i, r) {
    fprintf(f, "<h2>");
    const char *id = json_string_value(json_object_get(r, "id"));
    esc(f, id ? id : "run");
    fprintf(f, "</h2>\n<p>per rank, per step: times in ms and bytes in MiB, the measured "
               "steps' mean");
    if (num(json_object_get(r, "repeats"), "count") > 1)
      fprintf(f, " (of the median run of %.0f)", num(json_object_get(r, "repeats"), "count"));
    fprintf(f, "</p>\n");
    rank_table(f, r);
    stale_table(f, r);
    links_table(f, r);
    cost_table(f, r);
  }
  fprintf(f, "<h2>Configuration and environment</h2>\n");
  kv_table(f, "configuration", json_object_get(report, "config"));
  kv_table(f, "environment", json_object_get(report, "environment"));
  fprintf(f, "</body></html>\n");
  if (fclose(f) != 0 || !text) {
    free(text);
    return GS_FAIL(e, GS_ENOMEM, "report.html: out of memory");
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/report.html", dir);
  int rc = gs_write_atomic(path, text, len, e);
  free(text);
  return rc;
}
