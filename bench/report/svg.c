/* svg.c: the drawing pieces the bench's charts share (draw.h). Plain SVG
 * 1.1 text; nice tick steps (1, 2, 5 x 10^k); written atomically. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

void gs_svg_put(gs_svg *b, const char *fmt, ...) {
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

const char *gs_svg_esc(const char *s, char *buf, size_t cap) {
  size_t n = 0;
  if (!cap) return "";
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    const char *rep = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
                      : c == '"' ? "&quot;" : c == '\'' ? "&#39;" : c < 0x20 || c == 0x7f ? "?"
                      : NULL;
    char one[2] = {(char)c, 0};
    if (!rep) rep = one;
    size_t k = strlen(rep);
    if (n + k >= cap) break;
    memcpy(buf + n, rep, k);
    n += k;
  }
  buf[n] = 0;
  return buf;
}

const char *const gs_svg_part_names[5] = {"compute (fwd+bwd)", "exposed communication",
                                          "reduction", "optimizer", "idle"};
const char *const gs_svg_part_colors[5] = {"#4c78a8", "#e45756", "#f58518", "#54a24b",
                                           "#bab0ac"};

double gs_svg_nice_step(double range, int ticks) {
  double raw = range / ticks, p = pow(10, floor(log10(raw > 0 ? raw : 1))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

const char *gs_svg_mode_color(const char *mode) {
  static const char *const color[] = {[GS_MODE_PS] = "#d95f02", [GS_MODE_ALLREDUCE] = "#1b9e77",
                                      [GS_MODE_SINGLE] = "#7570b3"};
  int m = gs_mode_parse(mode);
  return m >= 0 ? color[m] : "#e7298a";
}

void gs_svg_header(gs_svg *b, int w, int h, const char *title) {
  char t[1024];
  title = gs_svg_esc(title, t, sizeof t);
  gs_svg_put(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
                "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
                "font-weight=\"bold\">%s</text>\n", w, h, w, h, w / 2, title);
}

double gs_svg_y_axis(gs_svg *b, int x0, int y0, int x1, int y1, double ymax, const char *label) {
  char l[512];
  label = gs_svg_esc(label, l, sizeof l);
  double step = gs_svg_nice_step(ymax > 0 ? ymax : 1, 5);
  double top = ceil((ymax > 0 ? ymax : 1) / step) * step;
  for (double v = 0; v <= top * 1.0001; v += step) {
    double y = y0 - (v / top) * (y0 - y1);
    gs_svg_put(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", x0,
               y, x1, y);
    gs_svg_put(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y + 4, v);
  }
  gs_svg_put(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x1,
             y0);
  gs_svg_put(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0,
             y1);
  gs_svg_put(b, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">%s"
                "</text>\n", x0 - 50, (y0 + y1) / 2, label);
  return top;
}

void gs_svg_log2_x_axis(gs_svg *b, int x0, int y0, int x1, int y1, double lo, double hi,
                        gs_svg_tick_fn fmt_tick, const char *label, double *l2lo,
                        double *span) {
  char l[512];
  label = gs_svg_esc(label, l, sizeof l);
  double a = floor(log2(lo > 0 ? lo : 1)), z = ceil(log2(hi > lo ? hi : lo * 2));
  if (z <= a) z = a + 1;
  /* a tick every power of two, or every few when there are too many */
  int every = (int)ceil((z - a) / 12);
  if (every < 1) every = 1;
  *l2lo = a;
  *span = (x1 - x0) / (z - a);
  for (double p = a; p <= z + 1e-9; p += every) {
    double x = x0 + (p - a) * *span;
    char t[32];
    fmt_tick(exp2(p), t, sizeof t);
    gs_svg_put(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eeeeee\"/>\n", x,
               y0, x, y1);
    gs_svg_put(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, y0 + 18, t);
  }
  gs_svg_put(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", (x0 + x1) / 2,
             y0 + 40, label);
}

void gs_svg_legend(gs_svg *b, int x, int y, const char *color, const char *text) {
  char t[512];
  text = gs_svg_esc(text, t, sizeof t);
  gs_svg_put(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
                "y=\"%d\">%s</text>\n", x, y, color, x + 18, y + 10, text);
}

int gs_svg_save(const char *dir, const char *name, gs_svg *b, gs_err *e) {
  gs_svg_put(b, "</svg>\n");
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = b->s ? gs_write_atomic(path, b->s, b->n, e) : GS_FAIL(e, GS_ENOMEM, "out of memory");
  free(b->s);
  b->s = NULL;
  return rc;
}
