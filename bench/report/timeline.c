/* timeline.c: timeline-<run>.svg, a few measured steps of one run, one
 * lane per rank, each step's compute, exposed communication wait,
 * reduction and optimizer at the time the rank did them (its own wall
 * clock), idle as the gaps, and under each lane what its backend thread was
 * moving (push / pull, reduce-scatter / all-gather, overlapped or not): the
 * imbalance as it happens. Its data (runs/<id>/timeline.json) is made as the
 * run ends, and drawn by the report, so that the runs of one comparison
 * share one time scale. Drawn with svg.c's pieces. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"
#include "ps/ps.h"

#define put gs_svg_put

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
  int m = gs_mode_parse(mode);
  bool ps = m == GS_MODE_PS, local = m == GS_MODE_SINGLE;
  bool overlap = json_is_true(json_object_get(tl, "overlap"));
  bool dedicated = json_is_true(json_object_get(tl, "dedicated"));
  bool own = json_is_true(json_object_get(tl, "ps_server_hosts"));
  int K = (int)json_integer_value(json_object_get(tl, "ps_servers"));
  double own_span = gs_timeline_span(tl);
  if (!(span_s >= own_span)) span_s = own_span;
  double span_ms = span_s * 1e3;
  /* read back from a file: only names this bench writes reach the SVG */
  bool known = m >= 0 && prec &&
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
      /* BytePS' partitions (ps/sched.c) tile the strip: every other one lighter */
      const char *nm = json_string_value(json_array_get(row, 3));
      bool light = nm && !strncmp(nm, "partition ", 10) && atoi(nm + 10) % 2;
      put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"5\" fill=\"%s\"><title>rank "
          "%d backend: ", XT(a), y + lane + 1, XT(z) - XT(a), light ? "#c5b0d5" : COMM_COLOR, r);
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
