/* charts.c: three SVG charts from the runs' summaries, readable in any browser:
 *   scaling.svg    throughput vs world size per mode, with each mode's
 *                  ideal line (N x its world-1 throughput, or its smallest
 *                  world scaled linearly);
 *   breakdown.svg  per run, one stacked bar per rank: compute, exposed
 *                  communication, reduction, optimizer, idle (ms per step)
 *                  -> the ps master's imbalance at a glance;
 *   bytes.svg      per run, bytes sent + received per rank per step, with
 *                  the cost model's figure marked.
 * Plain SVG 1.1 text, written atomically; nice tick steps (1, 2, 5 x 10^k). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/results.h"
#include "bench/summary.h"

typedef struct buf {
  char *s;
  size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (need < 0) return;
    if (b->s && b->n + (size_t)need < b->cap) {
      b->n += (size_t)need;
      return;
    }
    size_t cap = (b->cap ? b->cap * 2 : 8192) + (size_t)need;
    char *s = realloc(b->s, cap);
    if (!s) return;
    b->s = s;
    b->cap = cap;
  }
}


static double nice_step(double range, int ticks) {
  double raw = range / ticks, p = pow(10, floor(log10(raw > 0 ? raw : 1))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static const char *mode_color(const char *mode) {
  return !strcmp(mode, "ps") ? "#d95f02" : !strcmp(mode, "ring") ? "#1b9e77" : "#7570b3";
}

static void header(buf *b, int w, int h, const char *title) {
  put(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
         "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
         "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
         "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s"
         "</text>\n", w, h, w, h, w / 2, title);
}

/* axes with a y scale from 0 to ymax; returns the rounded ymax */
static double y_axis(buf *b, int x0, int y0, int x1, int y1, double ymax, const char *label) {
  double step = nice_step(ymax > 0 ? ymax : 1, 5);
  double top = ceil((ymax > 0 ? ymax : 1) / step) * step;
  for (double v = 0; v <= top * 1.0001; v += step) {
    double y = y0 - (v / top) * (y0 - y1);
    put(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", x0, y, x1, y);
    put(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y + 4, v);
  }
  put(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x1, y0);
  put(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y1);
  put(b, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
      x0 - 50, (y0 + y1) / 2, label);
  return top;
}

static int save(const char *dir, const char *name, buf *b, gs_err *e) {
  put(b, "</svg>\n");
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = b->s ? gs_write_atomic(path, b->s, b->n, e) : GS_FAIL(e, GS_ENOMEM, "out of memory");
  free(b->s);
  return rc;
}

static int scaling(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  int W = 720, H = 440, x0 = 80, x1 = 560, y0 = 380, y1 = 50;
  int worlds[64], nw = 0;
  double ymax = 0;
  for (size_t i = 0; i < n; i++) {
    int w = runs[i].world;
    bool seen = false;
    for (int k = 0; k < nw; k++) seen |= worlds[k] == w;
    if (!seen && nw < 64) worlds[nw++] = w;
    double t = runs[i].throughput_samples_per_s;
    if (t > ymax) ymax = t;
  }
  for (int a = 0; a < nw; a++)
    for (int c = a + 1; c < nw; c++)
      if (worlds[c] < worlds[a]) { int t = worlds[a]; worlds[a] = worlds[c]; worlds[c] = t; }
  /* ideal lines may reach above the measurements */
  const gs_mode modes[] = {GS_MODE_PS, GS_MODE_RING, GS_MODE_LOCAL};
  double base_t[3] = {0}, base_w[3] = {0};
  for (int m = 0; m < 3; m++)
    for (size_t i = 0; i < n; i++) {
      if (runs[i].mode != modes[m]) continue;
      if (base_w[m] == 0 || runs[i].world < base_w[m]) {
        base_w[m] = runs[i].world;
        base_t[m] = runs[i].throughput_samples_per_s;
      }
    }
  for (int m = 0; m < 3; m++)
    if (base_w[m] > 0) {
      double ideal = base_t[m] / base_w[m] * worlds[nw - 1];
      if (ideal > ymax) ymax = ideal;
    }
  buf b = {0};
  header(&b, W, H, "Throughput vs world size (dashed: ideal linear scaling)");
  double top = y_axis(&b, x0, y0, x1, y1, ymax, "global samples / s");
  double span = nw > 1 ? (double)(x1 - x0 - 60) / (nw - 1) : 0;
#define XPOS(idx) (x0 + 30 + (idx) * span + (nw == 1 ? (x1 - x0 - 60) / 2.0 : 0))
  for (int k = 0; k < nw; k++)
    put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", XPOS(k), y0 + 18,
        worlds[k]);
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">world size (ranks)</text>\n",
      (x0 + x1) / 2, y0 + 40);
  int legend = 0;
  for (int m = 0; m < 3; m++) {
    if (base_w[m] == 0) continue;
    const char *name = gs_mode_name(modes[m]), *col = mode_color(name);
    buf pts = {0}, ideal = {0};
    for (int k = 0; k < nw; k++) {
      for (size_t i = 0; i < n; i++) {
        const gs_summary *r = &runs[i];
        if (r->mode != modes[m] || r->world != worlds[k]) continue;
        double y = y0 - r->throughput_samples_per_s / top * (y0 - y1);
        put(&pts, "%.1f,%.1f ", XPOS(k), y);
        put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s world %d: %.1f "
            "samples/s</title></circle>\n", XPOS(k), y, col, name, worlds[k],
            r->throughput_samples_per_s);
        break;
      }
      double iy = y0 - base_t[m] / base_w[m] * worlds[k] / top * (y0 - y1);
      put(&ideal, "%.1f,%.1f ", XPOS(k), iy);
    }
    if (pts.s)
      put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts.s, col);
    if (ideal.s && nw > 1)
      put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1\" "
          "stroke-dasharray=\"5,4\"/>\n", ideal.s, col);
    free(pts.s);
    free(ideal.s);
    put(&b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
        "%s</text>\n", x1 + 30, y1 + 20 * legend + 6, col, x1 + 50, y1 + 20 * legend + 12, name);
    legend++;
  }
#undef XPOS
  return save(dir, "scaling.svg", &b, e);
}

static const char *PART_NAMES[] = {"compute (fwd+bwd)", "exposed communication", "reduction",
                                   "optimizer", "idle"};
static const char *PART_COLORS[] = {"#4c78a8", "#e45756", "#f58518", "#54a24b", "#bab0ac"};

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
  header(&b, W, H, bytes ? "Bytes on the wire per rank per step (sent + received; "
                           "black tick: cost model)"
                         : "Where each rank's step goes (ms per step)");
  int x1 = W - 210;
  double top = y_axis(&b, x0, y0, x1, y1, ymax * scale, bytes ? "MiB per step" : "ms per step");
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
        put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>%s "
            "%s: %.3f MiB/step</title></rect>\n", x, y0 - h, barw, h, mode_color(mode), r->id,
            row.server ? "server" : "rank", v);
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
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">rank (S: dedicated server), grouped by "
      "run</text>\n", (x0 + x1) / 2, y0 + 52);
  if (!bytes)
    for (int p = 0; p < 5; p++)
      put(&b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
          "y=\"%d\">%s</text>\n", x1 + 20, y1 + 20 * p, PART_COLORS[p], x1 + 38, y1 + 20 * p + 10,
          PART_NAMES[p]);
  else
    for (int m = 0; m < 2; m++)
      put(&b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
          "y=\"%d\">%s</text>\n", x1 + 20, y1 + 20 * m, mode_color(m ? "ring" : "ps"), x1 + 38,
          y1 + 20 * m + 10, m ? "ring" : "ps");
  return save(dir, bytes ? "bytes.svg" : "breakdown.svg", &b, e);
}

int gs_charts_write(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  GS_TRY(scaling(dir, runs, n, e));
  GS_TRY(bars(dir, runs, n, false, e));
  return bars(dir, runs, n, true, e);
}
