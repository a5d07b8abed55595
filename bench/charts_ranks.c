/* charts_ranks.c: the charts that look at ranks one by one, and the
 * collective benchmark's chart:
 *   memory.svg            peak resident memory (the high-water mark each
 *                         rank measured, ru_maxrss) per rank, grouped by
 *                         run: the ps master's extra buffers at a glance;
 *   timeline-<run>.svg    a few measured steps of one run, one lane per
 *                         rank, each step's compute, exposed communication
 *                         wait, reduction and optimizer at the time the rank
 *                         did them (its own wall clock), idle as the gaps,
 *                         and under each lane what its backend thread was
 *                         moving (push / pull, reduce-scatter / all-gather,
 *                         overlapped or not): the imbalance as it happens;
 *   busbw.svg             bus bandwidth vs message size (log2) from the
 *                         collective benchmark's tables (collective-<mode>-
 *                         w<N>.json for all_reduce, <collective>-<mode>-
 *                         w<N>.json for the others), one line per
 *                         collective, mode and world.
 * Drawn with svg.c's pieces. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/results.h"
#include "bench/summary.h"
#include "bench/svg.h"
#include "ps/ps.h"

#define put gs_svg_put

int gs_charts_memory(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  int nbars = 0;
  double ymax = 0, MiB = 1024.0 * 1024.0;
  for (size_t i = 0; i < n; i++)
    for (int r = 0; r < runs[i].world; r++) {
      nbars++;
      if (runs[i].per_rank[r].peak_rss_bytes / MiB > ymax)
        ymax = runs[i].per_rank[r].peak_rss_bytes / MiB;
    }
  int barw = 22, gap = 30, x0 = 90, y0 = 380, y1 = 50;
  int W = x0 + nbars * (barw + 4) + (int)n * gap + 160, H = 450;
  if (W < 640) W = 640;
  int x1 = W - 140;
  gs_svg b = {0};
  gs_svg_header(&b, W, H, "Peak memory per rank (resident set high-water mark)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax, "peak RSS (MiB)");
  int x = x0 + 15;
  bool seen[4] = {0};
  for (size_t i = 0; i < n; i++) {
    const gs_summary *s = &runs[i];
    const char *mode = gs_mode_name(s->mode);
    int gx = x;
    for (int r = 0; r < s->world; r++) {
      double v = s->per_rank[r].peak_rss_bytes / MiB, h = v / top * (y0 - y1);
      char id[400];
      put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>%s rank "
          "%d: %.1f MiB</title></rect>\n", x, y0 - h, barw, h, gs_svg_mode_color(mode),
          gs_svg_esc(s->id, id, sizeof id), r, v);
      put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%d</text>\n",
          x + barw / 2, y0 + 13, r);
      x += barw + 4;
    }
    seen[s->mode < 3 ? s->mode : 3] = true;
    put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s w%d</text>\n",
        (gx + x - 4) / 2, y0 + 30, mode, s->world);
    x += gap;
  }
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">rank, grouped by run</text>\n",
      (x0 + x1) / 2, y0 + 52);
  int legend = 0;
  for (int m = 0; m < 3; m++)
    if (seen[m])
      gs_svg_legend(&b, x1 + 20, y1 + 20 * legend++, gs_svg_mode_color(gs_mode_name(m)),
                    gs_mode_name(m));
  return gs_svg_save(dir, "memory.svg", &b, e);
}

/* the last few measured steps: enough to see a pattern, few enough to
 * read each phase */
#define TIMELINE_STEPS 4
#define COMM_COLOR "#9467bd"

json_t *gs_timeline_json(const gs_run_info *info, const gs_rank_result *ranks) {
  int N = info->world;
  size_t steps = SIZE_MAX;
  for (int r = 0; r < N; r++)
    if (ranks[r].nrows < steps) steps = ranks[r].nrows;
  if (steps == 0 || steps == SIZE_MAX) return NULL;
  size_t first = steps > TIMELINE_STEPS ? steps - TIMELINE_STEPS : 0;
  if (info->warmup > 0 && first < (size_t)info->warmup && (size_t)info->warmup < steps)
    first = (size_t)info->warmup;
  double t0 = INFINITY, t1 = -INFINITY;
  for (int r = 0; r < N; r++)
    for (size_t t = first; t < steps; t++) {
      const gs_step_row *row = &ranks[r].rows[t];
      if (row->t_start < t0) t0 = row->t_start;
      /* the parts as the rank timed them may add up past its step time */
      double parts = row->data_s + row->forward_s + row->backward_s + row->wait_s +
                     row->reduce_s + row->update_s;
      double end = row->t_start + (parts > row->step_s ? parts : row->step_s);
      if (end > t1) t1 = end;
    }
  if (!(t1 > t0)) return NULL;
  json_t *rk = json_array();
  for (int r = 0; r < N; r++) {
    json_t *st = json_array(), *cm = json_array();
    for (size_t t = first; t < steps; t++) {
      const gs_step_row *row = &ranks[r].rows[t];
      json_array_append_new(st, json_pack("[I, f, f, f, f, f]", (json_int_t)row->step,
                                          row->t_start - t0,
                                          row->data_s + row->forward_s + row->backward_s,
                                          row->wait_s, row->reduce_s, row->update_s));
    }
    /* what the backend thread moved meanwhile (overlapped or not) */
    for (size_t i = 0; i < ranks[r].nspans; i++) {
      const gs_span *sp = &ranks[r].spans[i];
      double a = sp->t0 > t0 ? sp->t0 : t0, z = sp->t1 < t1 ? sp->t1 : t1;
      if (sp->track != 1 || !(z > a)) continue;
      char nm[sizeof sp->name + 1];
      memcpy(nm, sp->name, sizeof sp->name);
      nm[sizeof sp->name] = 0;
      json_array_append_new(cm, json_pack("[f, f, f, s]", a - t0, z - t0, sp->t1 - sp->t0, nm));
    }
    json_array_append_new(rk, json_pack("{s:o, s:o}", "steps", st, "comm", cm));
  }
  return json_pack("{s:s, s:i, s:s, s:b, s:b, s:i, s:b, s:I, s:I, s:f, s:o}", "mode",
                   gs_mode_name(info->mode), "world", N, "precision",
                   gs_dtype_name(info->precision), "overlap", info->overlap, "dedicated",
                   info->dedicated, "ps_servers", info->ps_servers, "ps_server_hosts",
                   info->ps_server_hosts, "first", (json_int_t)first, "last",
                   (json_int_t)steps - 1, "span_s", t1 - t0, "ranks", rk);
}

double gs_timeline_span(json_t *tl) { return json_number_value(json_object_get(tl, "span_s")); }

/* a name read back from a file, as SVG text */
static void put_text(gs_svg *b, const char *s) {
  char esc[6 * 64 + 1];
  put(b, "%s", gs_svg_esc(s, esc, sizeof esc));
}

static double num_at(json_t *a, size_t i) { return json_number_value(json_array_get(a, i)); }

int gs_charts_timeline(const char *dir, const char *id, json_t *tl, double span_s, gs_err *e) {
  json_t *rk = json_object_get(tl, "ranks");
  int N = (int)json_array_size(rk);
  const char *mode = json_string_value(json_object_get(tl, "mode"));
  const char *prec = json_string_value(json_object_get(tl, "precision"));
  bool ps = mode && !strcmp(mode, "ps"), local = mode && !strcmp(mode, "local");
  bool overlap = json_is_true(json_object_get(tl, "overlap"));
  bool dedicated = json_is_true(json_object_get(tl, "dedicated"));
  bool own = json_is_true(json_object_get(tl, "ps_server_hosts"));
  int K = (int)json_integer_value(json_object_get(tl, "ps_servers"));
  double own_span = gs_timeline_span(tl);
  if (!(span_s >= own_span)) span_s = own_span;
  double span_ms = span_s * 1e3;
  /* read back from a file: only names this bench writes reach the SVG */
  bool known = mode && prec && (ps || local || !strcmp(mode, "ring")) &&
               gs_dtype_parse(prec) >= 0;
  if (N < 1 || !known || !(span_ms > 0) || !isfinite(span_ms)) return GS_OK;
  int lane = N > 16 ? 14 : 26, pitch = lane + 12, x0 = 90, x1 = 700, y1 = 50;
  int y0 = y1 + N * pitch + 10, W = 960, H = y0 + 70;
  if (H < y1 + 6 * 20 + 20) H = y1 + 6 * 20 + 20; /* room for the legend */
  char title[600], name[600];
  snprintf(title, sizeof title, "%s world %d, %s, %s: steps %lld-%lld, rank by rank (gaps: idle)",
           mode, N, prec, local ? "one process" : overlap ? "overlap (each bucket leaves once "
           "backward wrote it)" : "no overlap (buckets leave after backward)",
           (long long)json_integer_value(json_object_get(tl, "first")),
           (long long)json_integer_value(json_object_get(tl, "last")));
  gs_svg b = {0};
  gs_svg_header(&b, W, H, title);
  double step = gs_svg_nice_step(span_ms, 6);
#define XT(s) (x0 + (s) * 1e3 / span_ms * (x1 - x0))
  for (double v = 0; v <= span_ms * 1.0001; v += step) {
    double x = x0 + v / span_ms * (x1 - x0);
    put(&b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e0e0e0\"/>\n", x, y0, x,
        y1);
    put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, y0 + 16, v);
  }
  put(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x1, y0);
  put(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y1);
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (ms, from the first shown step's "
      "start; one scale for the runs of this world)</text>\n", (x0 + x1) / 2, y0 + 38);
  put(&b, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">rank</text>\n",
      x0 - 60, (y0 + y1) / 2);
  for (int r = 0; r < N; r++) {
    json_t *x = json_array_get(rk, (size_t)r);
    double y = y1 + 6 + r * pitch;
    put(&b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%s</text>\n", x0 - 6,
        y + lane / 2.0 + 4, r,
        ps && !dedicated && !own && gs_ps_runs_server(r, N, K > 1 ? K : 1) ? " (ps)" : "");
    put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"%s\" "
        "fill-opacity=\"0.35\"/>\n", x0, y, (int)(XT(own_span) - x0), lane,
        gs_svg_part_colors[4]);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(x, "steps"), i, row) {
      double at = num_at(row, 1);
      long long stepno = (long long)json_integer_value(json_array_get(row, 0));
      put(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
          XT(at), y, XT(at), y + lane);
      for (int p = 0; p < 4; p++) {
        double v = num_at(row, 2 + (size_t)p);
        if (!(v > 0)) continue;
        put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>"
            "rank %d step %lld %s: %.3f ms</title></rect>\n", XT(at), y, XT(at + v) - XT(at),
            lane, gs_svg_part_colors[p], r, stepno, gs_svg_part_names[p], v * 1e3);
        at += v;
      }
    }
    json_array_foreach(json_object_get(x, "comm"), i, row) {
      double a = num_at(row, 0), z = num_at(row, 1);
      put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"5\" fill=\"%s\"><title>rank "
          "%d backend: ", XT(a), y + lane + 1, XT(z) - XT(a), COMM_COLOR, r);
      put_text(&b, json_string_value(json_array_get(row, 3)));
      put(&b, ", %.3f ms</title></rect>\n", num_at(row, 2) * 1e3);
    }
  }
#undef XT
  for (int p = 0; p < 5; p++)
    gs_svg_legend(&b, x1 + 20, y1 + 20 * p, gs_svg_part_colors[p], gs_svg_part_names[p]);
  gs_svg_legend(&b, x1 + 20, y1 + 100, COMM_COLOR, "backend thread (strip)");
  snprintf(name, sizeof name, "timeline-%s.svg", id);
  return gs_svg_save(dir, name, &b, e);
}

static void size_tick(double v, char *buf, size_t cap) {
  const char *u[] = {"B", "K", "M", "G"};
  int i = 0;
  while (v >= 1024 && i < 3) {
    v /= 1024;
    i++;
  }
  snprintf(buf, cap, "%g%s", v, u[i]);
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* The collectives' names in the tables (all_reduce's is "allreduce"), in
 * allreduce.h's order: a table's series colour. */
static const char *COLLS[] = {"allreduce", "reduce_scatter", "all_gather", "broadcast", "reduce"};
#define NCOLLS 5

static int is_table(const struct dirent *d) {
  size_t n = strlen(d->d_name);
  if (n < 10 || strcmp(d->d_name + n - 5, ".json")) return 0;
  if (!strncmp(d->d_name, "collective-", 11)) return 1;
  for (int c = 1; c < NCOLLS; c++) {
    size_t l = strlen(COLLS[c]);
    if (!strncmp(d->d_name, COLLS[c], l) && d->d_name[l] == '-') return 1;
  }
  return 0;
}

json_t *gs_collective_tables(const char *dir, const char *run_id) {
  struct dirent **ents = NULL;
  int n = scandir(dir, &ents, is_table, by_name);
  json_t *all = json_array();
  for (int i = 0; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
    json_t *t = json_load_file(path, 0, NULL);
    const char *rid = json_string_value(json_object_get(t, "run_id"));
    bool mine = !run_id || (rid && !strcmp(rid, run_id));
    if (mine && json_is_array(json_object_get(t, "rows"))) json_array_append(all, t);
    json_decref(t);
    free(ents[i]);
  }
  free(ents);
  return all;
}

int gs_charts_busbw(const char *dir, json_t *tables, gs_err *e) {
  double lo = INFINITY, hi = 0, ymax = 0;
  size_t i, k;
  json_t *t, *row;
  json_array_foreach(tables, i, t) json_array_foreach(json_object_get(t, "rows"), k, row) {
    double s = json_number_value(json_object_get(row, "size_bytes"));
    double bw = json_number_value(json_object_get(row, "busbw_gbps"));
    if (s > 0 && s < lo) lo = s;
    if (s > hi) hi = s;
    if (bw > ymax) ymax = bw;
  }
  if (!(hi > 0)) return GS_OK;
  int W = 840, H = 440, x0 = 80, x1 = 580, y0 = 370, y1 = 50;
  gs_svg b = {0};
  gs_svg_header(&b, W, H, "Bus bandwidth vs message size (busbw = algbw x nccl-tests' factor "
                          "of the collective)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax, "bus bandwidth (GB/s)");
  double l2lo, span;
  gs_svg_log2_x_axis(&b, x0, y0, x1, y1, lo, hi, size_tick, "message size (bytes, log2 scale)",
                     &l2lo, &span);
  /* all_reduce in its mode's colour, the others in their own, one per
   * collective and mode; every other series dashed */
  static const char *other[NCOLLS][2] = {{"", ""}, {"#1f78b4", "#a6cee3"},
                                         {"#6a3d9a", "#cab2d6"}, {"#b15928", "#fdbf6f"},
                                         {"#e31a1c", "#fb9a99"}};
  json_array_foreach(tables, i, t) {
    const char *mode = json_string_value(json_object_get(t, "mode"));
    const char *name = json_string_value(json_object_get(t, "collective"));
    int world = (int)json_integer_value(json_object_get(t, "world"));
    int ci = 0;
    for (int c = 0; name && c < NCOLLS; c++)
      if (!strcmp(name, COLLS[c])) ci = c;
    const char *col = ci == 0 ? gs_svg_mode_color(mode ? mode : "")
                              : other[ci][mode && !strcmp(mode, "ps")];
    const char *shown = ci == 0 ? "all_reduce" : COLLS[ci];
    gs_svg pts = {0};
    json_array_foreach(json_object_get(t, "rows"), k, row) {
      double s = json_number_value(json_object_get(row, "size_bytes"));
      double bw = json_number_value(json_object_get(row, "busbw_gbps"));
      if (!(s > 0)) continue;
      double x = x0 + (log2(s) - l2lo) * span, y = y0 - bw / top * (y0 - y1);
      put(&pts, "%.1f,%.1f ", x, y);
      char m[200];
      put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %s w%d, %.0f "
          "bytes: %.4g GB/s</title></circle>\n", x, y, col, shown,
          gs_svg_esc(mode ? mode : "?", m, sizeof m), world, s, bw);
    }
    if (pts.s)
      put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
          pts.s, col, i % 2 ? " stroke-dasharray=\"6,3\"" : "");
    free(pts.s);
    char lab[96];
    snprintf(lab, sizeof lab, "%s, %s, world %d", shown, mode ? mode : "?", world);
    gs_svg_legend(&b, x1 + 20, y1 + 20 * (int)i, col, lab);
  }
  return gs_svg_save(dir, "busbw.svg", &b, e);
}
