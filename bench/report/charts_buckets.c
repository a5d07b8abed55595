/* charts_buckets.c: the pictures of --bucket-mb (report.h).
 *
 *   buckets-<id>.svg   one run: the mean step on a time axis, backward as a
 *                      band, and per bucket its ready mark and its
 *                      communication from first start to last end (the
 *                      part that ran while the rank computed is drawn
 *                      solid, the rest pale): a bucket that leaves during
 *                      backward hides, the last one cannot;
 *   bucket-sweep.svg   a sweep of several bucket sizes: the median step
 *                      against the bucket size (log2) per mode and world,
 *                      and the cost model's step dashed where the run had
 *                      one (emulated hosts).
 * Nothing is drawn for a run without bucket timings (world 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"

static int run_chart(const char *dir, const gs_summary *r, gs_err *e) {
  int nb = r->nbucket_timing;
  double tmax = r->backward_end_s;
  for (int i = 0; i < nb; i++)
    if (r->bucket_timing[i].comm_end_s > tmax) tmax = r->bucket_timing[i].comm_end_s;
  if (!(tmax > 0)) return GS_OK;
  tmax *= 1e3;
  gs_svg b = {0};
  int rowh = 26, W = 760, x0 = 130, x1 = W - 30, y1 = 60, H = y1 + rowh * nb + 90;
  int y0 = H - 60;
  char title[200];
  snprintf(title, sizeof title, "Buckets against backward: %s world %d, %g MiB buckets, mean "
           "step %.3g ms", gs_mode_name(r->mode), r->world, r->bucket_mb,
           r->step_time_s_mean * 1e3);
  gs_svg_header(&b, W, H, title);
  double step = gs_svg_nice_step(tmax, 8), top = ceil(tmax / step) * step;
#define X(ms) (x0 + (ms) / top * (x1 - x0))
  for (double t = 0; t <= top + step / 2; t += step) {
    gs_svg_put(&b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", X(t),
               y1, X(t), y0);
    gs_svg_put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X(t), y0 + 16,
               t);
  }
  gs_svg_put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">ms from the step's start (means "
             "over the measured steps and the ranks)</text>\n", (x0 + x1) / 2, y0 + 36);
  gs_svg_put(&b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
             "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x1,
             y0, x0, y0, x0, y1);
  gs_svg_put(&b, "<text transform=\"translate(16,%d) rotate(-90)\" text-anchor=\"middle\">"
             "bucket</text>\n", (y0 + y1) / 2);
  double bs = r->backward_start_s * 1e3, be = r->backward_end_s * 1e3;
  gs_svg_put(&b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#9ecae1\" "
             "opacity=\"0.35\"><title>backward: %.3g to %.3g ms</title></rect>\n", X(bs), y1,
             X(be) - X(bs), y0 - y1, bs, be);
  gs_svg_put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#3182bd\">backward"
             "</text>\n", (X(bs) + X(be)) / 2, y1 - 6);
  const char *col = gs_svg_mode_color(gs_mode_name(r->mode));
  for (int i = 0; i < nb; i++) {
    const gs_bucket_timing *t = &r->bucket_timing[i];
    int y = y1 + 6 + rowh * i;
    double s0 = t->comm_start_s * 1e3, s1 = t->comm_end_s * 1e3;
    double hid = t->comm_s > 0 ? t->hidden_s / t->comm_s : 0;
    gs_svg_put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">bucket %d, %.3g MiB</text>\n",
               x0 - 6, y + 14, t->bucket, t->bytes / (1 << 20));
    gs_svg_put(&b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
               "opacity=\"%.2f\"><title>bucket %d: communication %.3g to %.3g ms (%.3g ms of "
               "it busy, %.0f%% of that behind compute)</title></rect>\n", X(s0), y,
               fmax(X(s1) - X(s0), 1), rowh - 8, col, 0.3 + 0.7 * hid, t->bucket, s0, s1,
               t->comm_s * 1e3, 100 * hid);
    if (isfinite(t->ready_s))
      gs_svg_put(&b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" "
                 "stroke-width=\"2\"><title>bucket %d ready at %.3g ms</title></line>\n",
                 X(t->ready_s * 1e3), y - 2, X(t->ready_s * 1e3), y + rowh - 6, t->bucket,
                 t->ready_s * 1e3);
  }
#undef X
  gs_svg_legend(&b, x0, H - 18, col, "communication (solid: the share behind compute)");
  gs_svg_put(&b, "<text x=\"%d\" y=\"%d\">| ready</text>\n", x0 + 380, H - 8);
  char name[200];
  snprintf(name, sizeof name, "buckets-%s.svg", r->id ? r->id : "run");
  return gs_svg_save(dir, name, &b, e);
}

static void mib_tick(double v, char *buf, size_t cap) { snprintf(buf, cap, "%g", v); }

static int sweep_chart(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  double lo = 0, hi = 0, ymax = 0;
  bool several = false;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    if (r->world < 2 || !(r->bucket_mb > 0)) continue; /* a bucket per tensor: no size */
    if (lo && r->bucket_mb != lo) several = true;
    if (!lo || r->bucket_mb < lo) lo = r->bucket_mb;
    if (r->bucket_mb > hi) hi = r->bucket_mb;
    double m = r->step_time_s_median * 1e3, p = r->cost_model.step_s_predicted * 1e3;
    if (m > ymax) ymax = m;
    if (isfinite(p) && p > ymax) ymax = p;
  }
  if (!several) return GS_OK;
  gs_svg b = {0};
  int W = 760, H = 440, x0 = 80, y0 = H - 60, x1 = W - 200, y1 = 50;
  gs_svg_header(&b, W, H, "Step time against the bucket size (--bucket-mb)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax * 1.05, "step time, median (ms)");
  double l2lo, span;
  gs_svg_log2_x_axis(&b, x0, y0, x1, y1, lo, hi, mib_tick, "bucket size, MiB (log2 scale)",
                     &l2lo, &span);
#define XB(v) (x0 + (log2(v) - l2lo) * span)
#define YV(v) (y0 - (v) / top * (y0 - y1))
  int legend = 0;
  /* one series per (mode, world, model, batch): the runs in bucket order */
  bool *done = calloc(n ? n : 1, sizeof *done);
  if (!done) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    const gs_summary *a = &runs[i];
    if (done[i] || a->world < 2 || !(a->bucket_mb > 0)) continue;
    const char *col = gs_svg_mode_color(gs_mode_name(a->mode));
    gs_svg meas = {0}, model = {0};
    double last = 0;
    for (;;) { /* the next larger bucket size of this series */
      const gs_summary *nx = NULL;
      size_t k = 0;
      for (size_t j = i; j < n; j++) {
        const gs_summary *r = &runs[j];
        if (r->mode != a->mode || r->world != a->world || r->batch != a->batch ||
            strcmp(r->model, a->model) || r->bucket_mb <= last)
          continue;
        if (!nx || r->bucket_mb < nx->bucket_mb) nx = r, k = j;
      }
      if (!nx) break;
      done[k] = true;
      last = nx->bucket_mb;
      double v = nx->step_time_s_median * 1e3, p = nx->cost_model.step_s_predicted * 1e3;
      gs_svg_put(&meas, "%.1f,%.1f ", XB(last), YV(v));
      gs_svg_put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s world %d, "
                 "%g MiB buckets (%d): %.4g ms measured</title></circle>\n", XB(last), YV(v),
                 col, gs_mode_name(nx->mode), nx->world, last, nx->nbuckets, v);
      if (isfinite(p)) gs_svg_put(&model, "%.1f,%.1f ", XB(last), YV(p));
    }
    if (meas.s)
      gs_svg_put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                 meas.s, col);
    if (model.s)
      gs_svg_put(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                 "stroke-dasharray=\"6,4\"/>\n", model.s, col);
    char text[96];
    snprintf(text, sizeof text, "%s w%d %.24s", gs_mode_name(a->mode), a->world, a->model);
    gs_svg_legend(&b, x1 + 20, y1 + 20 * legend++, col, text);
    if (model.s) gs_svg_legend(&b, x1 + 20, y1 + 20 * legend++, col, "  model (dashed)");
    free(meas.s);
    free(model.s);
  }
#undef XB
#undef YV
  free(done);
  return gs_svg_save(dir, "bucket-sweep.svg", &b, e);
}

int gs_charts_buckets(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  for (size_t i = 0; i < n; i++)
    if (runs[i].nbucket_timing > 0) GS_TRY(run_chart(dir, &runs[i], e));
  return sweep_chart(dir, runs, n, e);
}
