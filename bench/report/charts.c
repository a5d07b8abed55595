/* charts.c: the SVG charts of the runs' summaries, readable in any browser
 * (charts_ranks.c, timeline.c and charts_busbw.c draw the per-rank memory,
 * the timelines and the bus bandwidth):
 *   scaling.svg    throughput vs world size (log2 axis) per mode, with each
 *                  mode's ideal curve (N x its smallest world's throughput
 *                  per rank), and each peer measured in the same invocation
 *                  (report.json's "peers", e.g. torch-ddp) as its own line;
 *   efficiency.svg scaling efficiency (report.h) vs world size, ideal 1;
 *   breakdown.svg  per run, one stacked bar per rank: compute, exposed
 *                  communication, reduction, optimizer, idle (ms per step)
 *                  -> the ps master's imbalance at a glance;
 *   bytes.svg      per run, bytes sent + received per rank per step, with
 *                  the cost model's figure marked.
 * Drawn with svg.c's pieces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

typedef gs_svg buf;
#define put gs_svg_put

static void world_tick(double v, char *text, size_t cap) { snprintf(text, cap, "%g", v); }

/* the distinct worlds of the runs, ascending */
static int worlds_of(const gs_summary *runs, size_t n, int *worlds, int cap) {
  int nw = 0;
  for (size_t i = 0; i < n; i++) {
    bool seen = false;
    for (int k = 0; k < nw; k++) seen |= worlds[k] == runs[i].world;
    if (!seen && nw < cap) worlds[nw++] = runs[i].world;
  }
  for (int a = 0; a < nw; a++)
    for (int c = a + 1; c < nw; c++)
      if (worlds[c] < worlds[a]) { int t = worlds[a]; worlds[a] = worlds[c]; worlds[c] = t; }
  return nw;
}

static const gs_mode MODES[] = {GS_MODE_PS, GS_MODE_ALLREDUCE, GS_MODE_SINGLE};

/* measured worlds that are not powers of two get their own small label */
static void odd_world_ticks(buf *b, const int *worlds, int nw, int x0, int y0, double l2lo,
                            double span) {
  for (int k = 0; k < nw; k++)
    if (worlds[k] & (worlds[k] - 1))
      put(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\" fill=\"#666\">"
          "%d</text>\n", x0 + (log2(worlds[k]) - l2lo) * span, y0 + 30, worlds[k]);
}

/* The peers' throughput on scaling.svg: one line per peer label, a point
 * per world of the axis (the first row of that world: as the modes'). */
static void peer_lines(buf *b, json_t *peers, const int *worlds, int nw, int x0, int y0, int y1,
                       double l2lo, double span, double top, int x_legend, int legend) {
  const char *labels[4];
  int nl = 0;
  size_t i;
  json_t *p;
  json_array_foreach(peers, i, p) {
    const char *m = json_string_value(json_object_get(p, "mode"));
    bool seen = !m;
    for (int k = 0; m && k < nl; k++) seen |= !strcmp(labels[k], m);
    if (!seen && nl < 4) labels[nl++] = m;
  }
  for (int l = 0; l < nl; l++) {
    const char *col = gs_svg_mode_color(labels[l]);
    buf pts = {0};
    for (int k = 0; k < nw; k++)
      json_array_foreach(peers, i, p) {
        const char *m = json_string_value(json_object_get(p, "mode"));
        double v = json_number_value(json_object_get(p, "throughput_samples_per_s"));
        if (!m || strcmp(m, labels[l]) || json_integer_value(json_object_get(p, "world")) !=
            worlds[k] || !(v > 0))
          continue;
        double x = x0 + (log2(worlds[k]) - l2lo) * span, y = y0 - v / top * (y0 - y1);
        put(&pts, "%.1f,%.1f ", x, y);
        char lab[200];
        put(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"><title>%s "
            "world %d: %.3g samples/s</title></rect>\n", x - 4, y - 4, col,
            gs_svg_esc(labels[l], lab, sizeof lab), worlds[k], v);
        break;
      }
    if (pts.s)
      put(b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
          "stroke-dasharray=\"2,3\"/>\n", pts.s, col);
    free(pts.s);
    gs_svg_legend(b, x_legend, y1 + 20 * (legend + l), col, labels[l]);
  }
}

/* throughput (samples/s) or scaling efficiency against world size on a
 * log2 axis, one line per mode. Throughput's ideal is N x the mode's
 * smallest world's throughput per rank, sampled densely because a linear
 * law is a curve on a log axis; efficiency's ideal is the flat 1. peers:
 * report.json's, drawn on the throughput chart (NULL: none). */
/* the run of mode m at world w that its line draws: its own, or at world 1
 * the local step every mode runs there */
static const gs_summary *point(const gs_summary *runs, size_t n, gs_mode m, int w) {
  const gs_summary *local = NULL;
  for (size_t i = 0; i < n; i++) {
    if (runs[i].world != w) continue;
    if (runs[i].mode == m) return &runs[i];
    if (w == 1 && runs[i].mode == GS_MODE_SINGLE && !local) local = &runs[i];
  }
  return local;
}

static int scaling(const char *dir, const gs_summary *runs, size_t n, json_t *peers, bool eff,
                   gs_err *e) {
  int W = 720, H = 440, x0 = 80, x1 = 560, y0 = 370, y1 = 50;
  int worlds[64];
  int nw = worlds_of(runs, n, worlds, 64);
  bool any = false, others = false;
  for (size_t i = 0; i < n; i++) {
    any |= !isnan(runs[i].scaling_efficiency);
    others |= runs[i].mode != GS_MODE_SINGLE;
  }
  if (eff && !any) return GS_OK; /* no world-1 run to compare with: no chart */
  double ymax = eff ? 1 : 0;
  double base_t[3] = {0}, base_w[3] = {0};
  for (int m = 0; m < 3; m++)
    for (int k = 0; k < nw; k++) {
      const gs_summary *r = point(runs, n, MODES[m], worlds[k]);
      if (!r || (MODES[m] == GS_MODE_SINGLE && others)) continue;
      double v = eff ? r->scaling_efficiency : r->throughput_samples_per_s;
      if (!isnan(v) && v > ymax) ymax = v;
      if (base_w[m] == 0 || r->world < base_w[m]) {
        base_w[m] = r->world;
        base_t[m] = r->throughput_samples_per_s;
      }
    }
  for (int m = 0; m < 3 && !eff; m++)
    if (base_w[m] > 0 && base_t[m] / base_w[m] * worlds[nw - 1] > ymax)
      ymax = base_t[m] / base_w[m] * worlds[nw - 1];
  size_t pi;
  json_t *p;
  json_array_foreach(eff ? NULL : peers, pi, p) {
    double v = json_number_value(json_object_get(p, "throughput_samples_per_s"));
    if (v > ymax) ymax = v;
  }
  buf b = {0};
  gs_svg_header(&b, W, H, eff ? "Scaling efficiency vs world size (dashed: ideal 1.0)"
                              : "Throughput vs world size (dashed: ideal linear scaling)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax * (eff ? 1.1 : 1),
                             eff ? "throughput(N) / (N x throughput(1))" : "global samples / s");
  double l2lo, span;
  gs_svg_log2_x_axis(&b, x0, y0, x1, y1, worlds[0], worlds[nw - 1], world_tick,
                     "world size (ranks, log2 scale)", &l2lo, &span);
  odd_world_ticks(&b, worlds, nw, x0, y0, l2lo, span);
#define XW(w) (x0 + (log2(w) - l2lo) * span)
#define YV(v) (y0 - (v) / top * (y0 - y1))
  if (eff)
    put(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\" "
        "stroke-dasharray=\"5,4\"/>\n", x0, YV(1.0), x1, YV(1.0));
  int legend = 0;
  for (int m = 0; m < 3; m++) {
    if (base_w[m] == 0) continue;
    const char *name = gs_mode_name(MODES[m]), *col = gs_svg_mode_color(name);
    buf pts = {0}, ideal = {0};
    for (int k = 0; k < nw; k++) {
      const gs_summary *r = point(runs, n, MODES[m], worlds[k]);
      double v = !r ? NAN : eff ? r->scaling_efficiency : r->throughput_samples_per_s;
      if (isnan(v)) continue;
      put(&pts, "%.1f,%.1f ", XW(worlds[k]), YV(v));
      put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s world %d%s: %.3g"
          "%s</title></circle>\n", XW(worlds[k]), YV(v), col, name, worlds[k],
          r->mode != MODES[m] ? " (the local step)" : "", v, eff ? "" : " samples/s");
    }
    for (int k = 0; !eff && nw > 1 && k <= 48; k++) {
      double w = exp2(log2(base_w[m]) + (log2(worlds[nw - 1]) - log2(base_w[m])) * k / 48.0);
      put(&ideal, "%.1f,%.1f ", XW(w), YV(base_t[m] / base_w[m] * w));
    }
    if (pts.s)
      put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts.s,
          col);
    if (ideal.s && base_w[m] < worlds[nw - 1])
      put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1\" "
          "stroke-dasharray=\"5,4\"/>\n", ideal.s, col);
    free(pts.s);
    free(ideal.s);
    gs_svg_legend(&b, x1 + 30, y1 + 20 * legend++, col, name);
  }
  if (!eff && json_array_size(peers))
    peer_lines(&b, peers, worlds, nw, x0, y0, y1, l2lo, span, top, x1 + 30, legend);
#undef XW
#undef YV
  return gs_svg_save(dir, eff ? "efficiency.svg" : "scaling.svg", &b, e);
}

#define PART_NAMES gs_svg_part_names
#define PART_COLORS gs_svg_part_colors

/* one bar: a rank, or a dedicated server (which only reduces and updates) */
typedef struct bar {
  bool server;
  double sent, recv, model_sent, model_recv;
  double part[5]; /* ms per step in PART_NAMES' order */
  double height;  /* what the y axis must hold: time, or bytes (with the model's) */
} bar;

static bar bar_of(const gs_summary *r, int i, bool bytes) {
  bar b = {0};
  if (i < r->world) {
    const gs_rank_summary *p = &r->per_rank[i];
    b = (bar){false, p->bytes_sent, p->bytes_recv, p->model_bytes_sent, p->model_bytes_recv,
              {p->compute_s, p->comm_wait_s, p->reduce_s, p->update_s, p->idle_s}, 0};
    b.height = bytes ? b.sent + b.recv : p->busy_s + p->comm_wait_s + p->idle_s;
    if (bytes && b.model_sent + b.model_recv > b.height) b.height = b.model_sent + b.model_recv;
  } else {
    const gs_server_summary *v = &r->server;
    b = (bar){true, v->bytes_sent, v->bytes_recv, v->model_bytes_sent, v->model_bytes_recv,
              {0, 0, v->reduce_s, v->update_s, 0}, 0};
    b.height = bytes ? b.sent + b.recv : v->busy_s;
  }
  return b;
}

static int nbars_of(const gs_summary *r) { return r->world + r->has_server; }

/* one bar per rank (and per dedicated server), grouped by run */
static int bars(const char *dir, const gs_summary *runs, size_t nruns, bool bytes, gs_err *e) {
  int nbars = 0;
  double ymax = 0;
  for (size_t i = 0; i < nruns; i++) {
    nbars += nbars_of(&runs[i]);
    for (int k = 0; k < nbars_of(&runs[i]); k++) {
      double v = bar_of(&runs[i], k, bytes).height;
      if (v > ymax) ymax = v;
    }
  }
  double scale = bytes ? 1.0 / (1024 * 1024) : 1e3;
  int barw = 22, gap = 30;
  int x0 = 90, y0 = 380, y1 = 50;
  int W = x0 + nbars * (barw + 4) + (int)nruns * gap + 230, H = 450;
  if (W < 640) W = 640;
  buf b = {0};
  gs_svg_header(&b, W, H, bytes ? "Bytes on the wire per rank per step (sent + received; "
                           "black tick: cost model)"
                         : "Where each rank's step goes (ms per step)");
  int x1 = W - 210;
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax * scale,
                             bytes ? "MiB per step" : "ms per step");
  int x = x0 + 15;
  for (size_t i = 0; i < nruns; i++) {
    const gs_summary *r = &runs[i];
    const char *mode = gs_mode_name(r->mode);
    int gx = x;
    for (int bi = 0; bi < nbars_of(r); bi++) {
      bar row = bar_of(r, bi, bytes);
      double y = y0;
      if (bytes) {
        double v = (row.sent + row.recv) * scale;
        double h = v / top * (y0 - y1);
        char id[400];
        put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>%s "
            "%s: %.3f MiB/step</title></rect>\n", x, y0 - h, barw, h, gs_svg_mode_color(mode),
            gs_svg_esc(r->id, id, sizeof id), row.server ? "server" : "rank", v);
        double m = (row.model_sent + row.model_recv) * scale;
        double my = y0 - m / top * (y0 - y1);
        put(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\" "
            "stroke-width=\"2\"/>\n", x - 3, my, x + barw + 3, my);
      } else {
        for (int p = 0; p < 5; p++) {
          double v = row.part[p] * scale;
          double h = v / top * (y0 - y1);
          if (h <= 0) continue;
          y -= h;
          put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>%s: "
              "%.3f ms</title></rect>\n", x, y, barw, h, PART_COLORS[p], PART_NAMES[p], v);
        }
      }
      char lab[16];
      if (row.server) snprintf(lab, sizeof lab, "S");
      else snprintf(lab, sizeof lab, "%d", bi);
      put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%s</text>\n",
          x + barw / 2, y0 + 13, lab);
      x += barw + 4;
    }
    put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s w%d</text>\n",
        (gx + x - 4) / 2, y0 + 30, mode, r->world);
    x += gap;
  }
  bool server = false;
  for (size_t i = 0; i < nruns; i++) server |= runs[i].has_server;
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">rank%s, grouped by run</text>\n",
      (x0 + x1) / 2, y0 + 52, server ? " (S: dedicated server)" : "");
  if (!bytes)
    for (int p = 0; p < 5; p++)
      gs_svg_legend(&b, x1 + 20, y1 + 20 * p, PART_COLORS[p], PART_NAMES[p]);
  else
    for (int m = 0; m < 2; m++)
      gs_svg_legend(&b, x1 + 20, y1 + 20 * m, gs_svg_mode_color(m ? "ring" : "ps"),
                    m ? "ring" : "ps");
  return gs_svg_save(dir, bytes ? "bytes.svg" : "breakdown.svg", &b, e);
}

int gs_charts_write(const char *dir, const gs_summary *runs, size_t n, json_t *peers,
                    gs_err *e) {
  GS_TRY(scaling(dir, runs, n, peers, false, e));
  GS_TRY(scaling(dir, runs, n, NULL, true, e));
  GS_TRY(gs_charts_memory(dir, runs, n, e));
  GS_TRY(gs_charts_hosts(dir, runs, n, e));
  GS_TRY(gs_charts_buckets(dir, runs, n, e));
  GS_TRY(gs_charts_stale(dir, runs, n, e));
  GS_TRY(gs_charts_spare(dir, runs, n, e));
  GS_TRY(bars(dir, runs, n, false, e));
  return bars(dir, runs, n, true, e);
}
