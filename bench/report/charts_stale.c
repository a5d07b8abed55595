/* charts_stale.c: the pictures of convergence under stragglers, drawn
 * with svg.c's pieces: loss.svg, every run's smoothed training loss against
 * wall-clock seconds on one pair of axes (the target loss as a dashed line,
 * each run's time to it and held-out accuracy in its legend);
 * accuracy.svg, the held-out accuracy along each run (--eval-data) on the
 * same clock; and staleness.svg, how many applied gradients were how
 * stale, per stale run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

#define put gs_svg_put

static const char *const COLORS[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e",
                                     "#e6ab02", "#a6761d", "#666666"};

/* "ps ssp:2 w4, batch 180" (escaped): the runs of one chart differ in these */
static void name_of(const gs_summary *r, char *buf, size_t cap) {
  char label[160], text[200];
  gs_stale_label(r, label, sizeof label);
  snprintf(text, sizeof text, "%s w%d, batch %d", label, r->world, r->batch);
  gs_svg_esc(text, buf, cap);
}

/* the x axis of seconds from the run's first step, 0..tmax rounded up
 * (returned) */
static double time_axis(gs_svg *b, int x0, int y0, int x1, double tmax) {
  double step = gs_svg_nice_step(tmax, 6), right = ceil(tmax / step) * step;
  for (double t = 0; t <= right * 1.0001; t += step) {
    double x = x0 + t / right * (x1 - x0);
    put(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\"/>\n<text x=\"%.1f"
        "\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, y0, x, y0 + 5, x, y0 + 18, t);
  }
  put(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">seconds from the run's first "
      "step</text>\n", (x0 + x1) / 2, y0 + 40);
  return right;
}

/* one run's line through (t[k], v[k]) on axes of 0..right seconds and
 * 0..top, a value above the top drawn at it */
static void curve(gs_svg *b, const char *color, const double *t, const double *v, int n, int x0,
                  int y0, int x1, int y1, double right, double top) {
  put(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", color);
  for (int k = 0; k < n; k++)
    put(b, "%.1f,%.1f ", x0 + t[k] / right * (x1 - x0), y0 - (v[k] < top ? v[k] : top) / top *
        (y0 - y1));
  put(b, "\"/>\n");
}

/* the c-th line of the legend right of a chart whose plot ends at x1 */
static void legend(gs_svg *b, int x1, int y1, int c, const char *color, const char *text) {
  put(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n<text x=\"%d\" "
      "y=\"%d\" font-size=\"11\">%s</text>\n", x1 + 15, y1 + 18 * c, color, x1 + 32,
      y1 + 18 * c + 10, text);
}

static int loss_chart(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  double tmax = 0, lmax = 0, target = NAN;
  int shown = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_stale_summary *st = &runs[i].stale;
    if (st->nloss < 1) continue;
    shown++;
    for (int k = 0; k < st->nloss; k++) {
      if (st->loss_t_s[k] > tmax) tmax = st->loss_t_s[k];
      if (st->loss[k] > lmax) lmax = st->loss[k];
    }
    if (isfinite(st->target_loss)) target = st->target_loss;
  }
  if (!shown || !(tmax > 0) || !(lmax > 0)) return GS_OK;
  int x0 = 80, y0 = 380, x1 = 620, y1 = 50, W = 1040, H = 450 + 18 * (shown > 8 ? shown - 8 : 0);
  gs_svg b = {0};
  gs_svg_header(&b, W, H, "Training loss against wall-clock time (smoothed over 8 steps)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, lmax, "training loss");
  double right = time_axis(&b, x0, y0, x1, tmax);
  if (isfinite(target) && target < top) {
    double y = y0 - target / top * (y0 - y1);
    put(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
        "stroke-dasharray=\"6,4\"/>\n<text x=\"%d\" y=\"%.1f\" font-size=\"11\">target "
        "%.4g</text>\n", x0, y, x1, y, x1 - 80, y - 4, target);
  }
  int c = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    const gs_stale_summary *st = &r->stale;
    if (st->nloss < 1) continue;
    const char *color = COLORS[c % 8];
    curve(&b, color, st->loss_t_s, st->loss, st->nloss, x0, y0, x1, y1, right, top);
    if (isfinite(st->time_to_target_s))
      put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n",
          x0 + st->time_to_target_s / right * (x1 - x0),
          y0 - st->target_loss / top * (y0 - y1), color);
    char name[300], text[420], tt[40] = "never reached the target", ho[40] = "";
    name_of(r, name, sizeof name);
    if (!isfinite(st->target_loss)) snprintf(tt, sizeof tt, "no target");
    else if (isfinite(st->time_to_target_s))
      snprintf(tt, sizeof tt, "target at %.2f s", st->time_to_target_s);
    if (isfinite(r->heldout_accuracy))
      snprintf(ho, sizeof ho, ", held-out %.1f%%", 100 * r->heldout_accuracy);
    snprintf(text, sizeof text, "%.60s: %s%s", name, tt, ho);
    legend(&b, x1, y1, c, color, text);
    c++;
  }
  return gs_svg_save(dir, "loss.svg", &b, e);
}

static int accuracy_chart(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  double tmax = 0;
  int shown = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_stale_summary *st = &runs[i].stale;
    if (st->nheldout < 1) continue;
    shown++;
    for (int k = 0; k < st->nheldout; k++)
      if (st->heldout_t_s[k] > tmax) tmax = st->heldout_t_s[k];
  }
  if (!shown || !(tmax > 0)) return GS_OK;
  int x0 = 80, y0 = 380, x1 = 620, y1 = 50, W = 1040, H = 450 + 18 * (shown > 8 ? shown - 8 : 0);
  gs_svg b = {0};
  gs_svg_header(&b, W, H, "Held-out accuracy against wall-clock time (--eval-data)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, 1.0, "held-out accuracy");
  double right = time_axis(&b, x0, y0, x1, tmax);
  int c = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    const gs_stale_summary *st = &r->stale;
    if (st->nheldout < 1) continue;
    const char *color = COLORS[c % 8];
    curve(&b, color, st->heldout_t_s, st->heldout_accuracy, st->nheldout, x0, y0, x1, y1, right,
          top);
    for (int k = 0; k < st->nheldout; k++)
      put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>step %lld: "
          "%.1f%%</title></circle>\n", x0 + st->heldout_t_s[k] / right * (x1 - x0),
          y0 - st->heldout_accuracy[k] / top * (y0 - y1), color,
          (long long)st->heldout_step[k] + 1, 100 * st->heldout_accuracy[k]);
    char name[300], text[420];
    name_of(r, name, sizeof name);
    snprintf(text, sizeof text, "%.60s: %.1f%% after %.2f s", name,
             100 * st->heldout_accuracy[st->nheldout - 1], st->heldout_t_s[st->nheldout - 1]);
    legend(&b, x1, y1, c, color, text);
    c++;
  }
  return gs_svg_save(dir, "accuracy.svg", &b, e);
}

static int staleness_chart(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  int shown = 0, width = 0;
  double ymax = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (!r->ps_sync[0] || !strcmp(r->ps_sync, "bsp")) continue;
    shown++;
    width += r->stale.nhist + 1 + (r->dropped_gradients > 0);
    for (int k = 0; k < r->stale.nhist; k++)
      if (r->stale.staleness_hist[k] > ymax) ymax = (double)r->stale.staleness_hist[k];
    if (r->dropped_gradients > ymax) ymax = r->dropped_gradients;
  }
  if (!shown) return GS_OK;
  int barw = 24, gap = 36, x0 = 80, y0 = 380, y1 = 50;
  int W = x0 + width * (barw + 4) + shown * gap + 60, H = 450;
  if (W < 640) W = 640;
  gs_svg b = {0};
  gs_svg_header(&b, W, H, "Staleness of applied gradients (updates between read and apply)");
  double top = gs_svg_y_axis(&b, x0, y0, W - 40, y1, ymax > 0 ? ymax : 1, "gradients");
  int x = x0 + 15, c = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (!r->ps_sync[0] || !strcmp(r->ps_sync, "bsp")) continue;
    int gx = x;
    const char *color = COLORS[c++ % 8];
    for (int k = 0; k <= r->stale.nhist; k++) {
      bool dropped = k == r->stale.nhist;
      if (dropped && r->dropped_gradients <= 0) break;
      double v = dropped ? r->dropped_gradients : (double)r->stale.staleness_hist[k];
      double h = v / top * (y0 - y1);
      char lab[16] = "drop";
      if (!dropped) snprintf(lab, sizeof lab, "%d", k);
      put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"%s><title>%.0f"
          "</title></rect>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">"
          "%s</text>\n", x, y0 - h, barw, h, color, dropped ? " fill-opacity=\"0.4\"" : "",
          v, x + barw / 2, y0 + 13, lab);
      x += barw + 4;
    }
    char name[300];
    name_of(r, name, sizeof name);
    put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s</text>\n",
        (gx + x - 4) / 2, y0 + 30, name);
    x += gap;
  }
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">staleness (updates), grouped by "
      "run; drop: gradients a backup-worker update left out</text>\n", W / 2, y0 + 52);
  return gs_svg_save(dir, "staleness.svg", &b, e);
}

int gs_charts_stale(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  GS_TRY(loss_chart(dir, runs, n, e));
  GS_TRY(accuracy_chart(dir, runs, n, e));
  return staleness_chart(dir, runs, n, e);
}
