/* html.c: report.html, the run's results as one self-contained page.
 *
 * Everything is inside the file: the configuration and environment, the
 * ps-vs-ring comparison (with the peers measured in the same invocation,
 * and a notice when the ranks outnumber the cores), or the collective
 * benchmark's tables, one per-rank table per run (the master's extra
 * time, bytes and memory side by side with the workers'), the cost model
 * beside the measurement where a run has one, and every SVG chart of the
 * results directory inlined (no <img src>, no script, no font or style
 * sheet from the network), so it opens from a mail attachment or a CI
 * artifact as it opened here. It is rendered from report.json's document,
 * the same numbers the terminal and the JSON show. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/html.h"
#include "bench/results.h"

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

static const char *const rank_cols[] = {
    "rank", "host", "compute_s", "comm_wait_s", "reduce_s", "update_s", "busy_s", "idle_s",
    "step_s", "bytes_sent", "bytes_recv", "traffic_vs_model", "peak_rss_bytes"};
static const char *const rank_heads[] = {
    "rank", "host", "compute (s)", "wait (s)", "reduce (s)", "update (s)", "busy (s)",
    "idle (s)", "step (s)", "sent (B/step)", "recv (B/step)", "vs model", "peak RSS (B)"};

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

/* every *.svg of dir this user wrote inlined, its name as the caption;
 * the XML prologue is dropped (it is not allowed inside HTML) */
static int inline_charts(FILE *f, const char *dir) {
  struct dirent **ents = NULL;
  int n = scandir(dir, &ents, NULL, by_name), shown = 0;
  for (int i = 0; i < n; i++) {
    const char *name = ents[i]->d_name;
    size_t len = strlen(name);
    char path[4200];
    if (len > 4 && !strcmp(name + len - 4, ".svg") &&
        snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path) {
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
        shown++;
      }
      free(svg);
    }
    free(ents[i]);
  }
  free(ents);
  return shown;
}

static const char *style =
    "body{font-family:Helvetica,Arial,sans-serif;margin:2em;color:#222;max-width:1400px}"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;"
    "padding:3px 8px;text-align:right}th{background:#f3f3f3}table.kv th{text-align:left}"
    "td:nth-child(2){text-align:left}figure{display:inline-block;margin:1em}"
    "figcaption{text-align:center;color:#666;font-size:90%}p.notice{background:#fff4d6;"
    "border:1px solid #e0c060;padding:6px 10px}h2{border-bottom:1px solid #ddd}";

int gs_html_write(const char *dir, json_t *report, gs_err *e) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return GS_FAIL(e, GS_ENOMEM, "report.html: out of memory");
  json_t *runs = json_object_get(report, "runs");
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
             "<title>gradsync report</title>\n<style>%s</style></head><body>\n"
             "<h1>gradsync: %s</h1>\n<p>", style,
          json_object_get(report, "collective") ? "the collectives alone" : "ps vs ring");
  cell(f, json_object_get(json_object_get(report, "environment"), "hostname"));
  fprintf(f, " &middot; %zu run(s)%s</p>\n", json_array_size(runs) +
          json_array_size(json_object_get(report, "collective")),
          json_is_true(json_object_get(report, "interrupted")) ? " &middot; <b>interrupted: "
          "only the runs that completed</b>" : "");
  /* the measured runs, then the peers measured in the same invocation */
  json_t *rows = json_array(), *peers = json_object_get(report, "peers");
  json_array_extend(rows, runs);
  if (json_is_array(peers)) json_array_extend(rows, peers);
  if (json_array_size(rows)) {
    fprintf(f, "<h2>Comparison</h2>\n");
    const char *notice = json_string_value(json_object_get(report, "oversubscribed_notice"));
    if (notice) {
      fprintf(f, "<p class=\"notice\"><b>Note:</b> ");
      esc(f, notice);
      fprintf(f, ".</p>\n");
    }
    array_table(f, rows, run_cols, run_heads, NCOLS(run_cols));
    if (json_array_size(peers))
      fprintf(f, "<p>The rows after ps and ring are peers, measured in this same invocation on "
                 "the same model, batch per rank, world and synthetic data.</p>\n");
  }
  json_decref(rows);
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
  if (!inline_charts(f, dir)) fprintf(f, "<p>no charts in this results directory</p>\n");
  json_array_foreach(runs, i, r) {
    fprintf(f, "<h2>");
    const char *id = json_string_value(json_object_get(r, "id"));
    esc(f, id ? id : "run");
    fprintf(f, "</h2>\n<p>per rank, seconds per step and bytes per step (the measured steps' "
               "mean)</p>\n");
    array_table(f, json_object_get(r, "per_rank"), rank_cols, rank_heads, NCOLS(rank_cols));
    json_t *cm = json_object_get(r, "cost_model");
    if (json_is_object(cm)) kv_table(f, "cost model beside the measurement", cm);
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
