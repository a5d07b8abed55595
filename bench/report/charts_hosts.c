/* charts_hosts.c: the charts of runs on emulated hosts (--hosts, --link).
 *
 *   hosts.svg   step time against the number of hosts at the run's link,
 *               ps and ring: measured points joined by solid lines, the
 *               cost model's step time (summary_links.c) dashed beside them;
 *   links.svg   every host's link, busy (either direction) as a fraction of
 *               the measured steps, one group of bars per run: in ps mode
 *               host 0's link carries every other host's gradients and
 *               parameters, and it is the one that saturates.
 * Nothing is drawn for a sweep without emulated hosts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

static void hosts_tick(double v, char *buf, size_t cap) { snprintf(buf, cap, "%g", v); }

static int step_chart(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  double lo = 0, hi = 0, ymax = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->hosts <= 0) continue;
    if (!lo || r->hosts < lo) lo = r->hosts;
    if (r->hosts > hi) hi = r->hosts;
    double m = r->step_time_s_median * 1e3, p = r->cost_model.step_s_predicted * 1e3;
    if (m > ymax) ymax = m;
    if (isfinite(p) && p > ymax) ymax = p;
  }
  if (!hi) return GS_OK;
  const gs_summary *first = NULL;
  for (size_t i = 0; i < n && !first; i++)
    if (runs[i].hosts > 0) first = &runs[i];
  gs_svg b = {0};
  int W = 760, H = 440, x0 = 80, y0 = H - 60, x1 = W - 170, y1 = 50;
  char title[160], rate[32];
  gs_rate_text(first->link_rate_bps, rate, sizeof rate);
  if (first->link_latency_s > 0)
    snprintf(title, sizeof title, "Step time against emulated hosts: %s links, %g us one way",
             rate, first->link_latency_s * 1e6);
  else
    snprintf(title, sizeof title, "Step time against emulated hosts: %s links", rate);
  gs_svg_header(&b, W, H, title);
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax * 1.05, "step time, median (ms)");
  double l2lo, span;
  gs_svg_log2_x_axis(&b, x0, y0, x1, y1, lo, hi > lo ? hi : lo * 2, hosts_tick,
                     "emulated hosts (one link each, log2 scale)", &l2lo, &span);
#define XH(h) (x0 + (log2(h) - l2lo) * span)
#define YV(v) (y0 - (v) / top * (y0 - y1))
  static const gs_mode modes[] = {GS_MODE_PS, GS_MODE_ALLREDUCE};
  int legend = 0;
  for (int m = 0; m < 2; m++) {
    const char *name = gs_mode_name(modes[m]), *col = gs_svg_mode_color(name);
    gs_svg meas = {0}, model = {0};
    int npts = 0;
    for (int h = 1; h <= (int)hi; h++)
      for (size_t i = 0; i < n; i++) {
        const gs_summary *r = &runs[i];
        if (r->mode != modes[m] || r->hosts != h) continue;
        double v = r->step_time_s_median * 1e3, p = r->cost_model.step_s_predicted * 1e3;
        gs_svg_put(&meas, "%.1f,%.1f ", XH(h), YV(v));
        gs_svg_put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s, %d "
                   "hosts, world %d: %.4g ms measured</title></circle>\n", XH(h), YV(v), col,
                   name, h, r->world, v);
        if (isfinite(p)) gs_svg_put(&model, "%.1f,%.1f ", XH(h), YV(p));
        npts++;
        break;
      }
    if (npts) {
      gs_svg_put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                 meas.s, col);
      if (model.s)
        gs_svg_put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                   "stroke-dasharray=\"6,4\"/>\n", model.s, col);
      char text[64];
      snprintf(text, sizeof text, "%s measured", name);
      gs_svg_legend(&b, x1 + 20, y1 + 20 * legend++, col, text);
      snprintf(text, sizeof text, "%s model (dashed)", name);
      gs_svg_legend(&b, x1 + 20, y1 + 20 * legend++, col, text);
    }
    free(meas.s);
    free(model.s);
  }
#undef XH
#undef YV
  return gs_svg_save(dir, "hosts.svg", &b, e);
}

static int links_chart(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  int bars = 0, groups = 0;
  for (size_t i = 0; i < n; i++)
    if (runs[i].nlinks > 0) {
      bars += runs[i].nlinks;
      groups++;
    }
  if (!bars) return GS_OK;
  gs_svg b = {0};
  int W = 760, H = 440, x0 = 80, y0 = H - 90, x1 = W - 30, y1 = 50;
  gs_svg_header(&b, W, H, "Each host's link: busy share of the measured steps");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, 100, "link busy, either direction (%)");
  double slot = (double)(x1 - x0) / (bars + groups + 1), x = x0 + slot;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->nlinks == 0) continue;
    const char *col = gs_svg_mode_color(gs_mode_name(r->mode));
    double gx = x;
    for (int k = 0; k < r->nlinks; k++, x += slot) {
      const gs_hostlink_summary *l = &r->links[k];
      double h = l->busy * 100 / top * (y0 - y1);
      gs_svg_put(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                 "opacity=\"%s\"><title>%s world %d, host %d: busy %.0f%% (sending %.0f%%, "
                 "receiving %.0f%%)</title></rect>\n", x + slot * 0.1, y0 - h, slot * 0.8, h,
                 col, l->host == 0 ? "1" : "0.6", gs_mode_name(r->mode), r->world, l->host,
                 100 * l->busy, 100 * l->busy_tx, 100 * l->busy_rx);
      gs_svg_put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">h%d"
                 "</text>\n", x + slot / 2, y0 + 14, l->host);
    }
    gs_svg_put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s, %d hosts</text>\n",
               (gx + x) / 2, y0 + 34, gs_mode_name(r->mode), r->hosts);
    x += slot;
  }
  gs_svg_put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">host (h0 holds rank 0, the ps "
             "master), grouped by run</text>\n", (x0 + x1) / 2, H - 20);
  return gs_svg_save(dir, "links.svg", &b, e);
}

int gs_charts_hosts(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  GS_TRY(step_chart(dir, runs, n, e));
  return links_chart(dir, runs, n, e);
}
