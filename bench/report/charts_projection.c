/* charts_projection.c: projection.svg, what the cost model predicts for
 * big worlds (bench --project): global samples per second and scaling
 * efficiency against log2 world size, one line per mode. Drawn with
 * svg.c's pieces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

static const char *mode_color(gs_cm_mode m) {
  switch (m) {
  case GS_CM_PS: return gs_svg_mode_color("ps");
  case GS_CM_RING: return gs_svg_mode_color("ring");
  case GS_CM_SPS_COLO: return "#e7298a";
  case GS_CM_SPS_HOSTS: return "#7570b3";
  default: return "#666666";
  }
}

static void world_tick(double v, char *buf, size_t cap) { snprintf(buf, cap, "%.0f", v); }

/* one panel: samples/s (eff = false) or efficiency against log2 world */
static void panel(gs_svg *b, const gs_cm_projection *p, int nmodes, bool eff, int y1, int y0) {
  int x0 = 90, x1 = 560;
  double ymax = eff ? 1.1 : 0, lo = INFINITY, hi = 0;
  for (int i = 0; i < p->nrows; i++) {
    if (!eff) ymax = fmax(ymax, p->rows[i].samples_per_s);
    lo = fmin(lo, p->rows[i].world);
    hi = fmax(hi, p->rows[i].world);
  }
  double top = gs_svg_y_axis(b, x0, y0, x1, y1, ymax,
                             eff ? "scaling efficiency" : "global samples / s");
  double l2lo, span;
  gs_svg_log2_x_axis(b, x0, y0, x1, y1, lo, hi, world_tick, "world size (ranks, log2 scale)",
                     &l2lo, &span);
  for (int k = 0; k < nmodes; k++) {
    gs_cm_mode m = p->rows[k].mode;
    gs_svg pts = {0};
    for (int i = k; i < p->nrows; i += nmodes) {
      const gs_cm_result *r = &p->rows[i];
      double v = eff ? r->efficiency : r->samples_per_s;
      double x = x0 + (log2(r->world) - l2lo) * span, y = y0 - v / top * (y0 - y1);
      gs_svg_put(&pts, "%.1f,%.1f ", x, y);
      gs_svg_put(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s world %d: "
                 "%.3g%s, step %.4g ms, %s</title></circle>\n", x, y, mode_color(m),
                 gs_cm_mode_name(m), r->world, v, eff ? "" : " samples/s", r->step_s * 1e3,
                 gs_cm_bottleneck_name(r->bottleneck));
    }
    if (pts.s)
      gs_svg_put(b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                 pts.s, mode_color(m));
    free(pts.s);
    if (!eff) gs_svg_legend(b, x1 + 30, y1 + 20 * k, mode_color(m), gs_cm_mode_name(m));
  }
}

int gs_charts_projection(const char *dir, const gs_cm_projection *p, int nmodes, gs_err *e) {
  gs_svg b = {0};
  char title[256];
  snprintf(title, sizeof title, "Cost model: %s, %.3g Gbit/s links, %d rank%s per host",
           p->model, p->machine.link_Bps * 8 / 1e9, p->ranks_per_host,
           p->ranks_per_host == 1 ? "" : "s");
  gs_svg_header(&b, 720, 800, title);
  panel(&b, p, nmodes, false, 50, 370);
  panel(&b, p, nmodes, true, 450, 770);
  return gs_svg_save(dir, "projection.svg", &b, e);
}
