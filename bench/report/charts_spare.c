/* charts_spare.c: BytePS' summation servers over their spare hosts k.
 *
 *   spare.svg of a sweep (--ps-spare-hosts 0,1,2,4 beside --mode ring, on
 *   emulated hosts): the measured step (median) and communication of the
 *   ps at each k, beside t_opt (the links' least time for the bytes the
 *   split puts on the busiest link: BytePS' 2n(n-1)S / ((n^2+kn-2k) b))
 *   and the ring's measured step and communication as level lines, one
 *   chart for the first world with such runs;
 *   spare.svg of bench --project --ps-spare-hosts K: the same, predicted,
 *   for the largest world projected.
 * A run's communication is the mean time from its first bucket's first
 * communication to its last bucket's last (bucket_timing): what the
 * links took, overlapped with backward or not. Drawn with svg.c's pieces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/hosts/hosts.h"
#include "bench/report/draw.h"
#include "bench/report/report.h"

#define C_STEP "#1b9e77"
#define C_COMM "#d95f02"
#define C_TOPT "#7570b3"

double gs_summary_comm_window(const gs_summary *s) {
  double a = INFINITY, z = -INFINITY;
  for (int i = 0; i < s->nbucket_timing; i++) {
    a = fmin(a, s->bucket_timing[i].comm_start_s);
    z = fmax(z, s->bucket_timing[i].comm_end_s);
  }
  return z > a ? z - a : NAN;
}

double gs_summary_link_time(const gs_summary *s) {
  double t = NAN;
  for (int i = 0; i < s->nlinks; i++) {
    const gs_hostlink_summary *l = &s->links[i];
    double b = gs_hosts_counted_Bps((uint64_t)l->rate_bps);
    double v = fmax(l->model_tx_bytes, l->model_rx_bytes) / b;
    if (isfinite(v) && b > 0) t = isfinite(t) ? fmax(t, v) : v;
  }
  return t;
}

/* One series of (k, ms) points, dots and a line. */
static void series(gs_svg *b, const double *k, const double *ms, int n, double kmax, double top,
                   int x0, int x1, int y0, int y1, const char *color, const char *what,
                   bool dashed) {
  gs_svg pts = {0};
  for (int i = 0; i < n; i++) {
    if (!isfinite(ms[i])) continue;
    double x = x0 + (kmax > 0 ? k[i] / kmax : 0.5) * (x1 - x0), y = y0 - ms[i] / top * (y0 - y1);
    gs_svg_put(&pts, "%.1f,%.1f ", x, y);
    gs_svg_put(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>k = %g: %s "
               "%.1f ms</title></circle>\n", x, y, color, k[i], what, ms[i]);
  }
  if (pts.s)
    gs_svg_put(b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
               pts.s, color, dashed ? " stroke-dasharray=\"6,4\"" : "");
  free(pts.s);
}

/* a level line across the chart: the ring's */
static void level(gs_svg *b, double ms, double top, int x0, int x1, int y0, int y1,
                  const char *color, const char *what) {
  if (!isfinite(ms)) return;
  double y = y0 - ms / top * (y0 - y1);
  gs_svg_put(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
             "stroke-width=\"2\" stroke-dasharray=\"2,3\"><title>%s %.1f ms</title></line>\n",
             x0, y, x1, y, color, what, ms);
}

typedef struct spare_data {
  int n;
  double k[66], step[66], comm[66], topt[66];
  double ring_step, ring_comm, ring_topt;
} spare_data;

static int draw(const char *dir, const char *title, const spare_data *d, const char *measured,
                gs_err *e) {
  int x0 = 90, x1 = 560, y1 = 50, y0 = 400;
  double kmax = 0, ymax = 0;
  for (int i = 0; i < d->n; i++) {
    kmax = fmax(kmax, d->k[i]);
    double v[3] = {d->step[i], d->comm[i], d->topt[i]};
    for (int j = 0; j < 3; j++)
      if (isfinite(v[j])) ymax = fmax(ymax, v[j]);
  }
  double r[3] = {d->ring_step, d->ring_comm, d->ring_topt};
  for (int j = 0; j < 3; j++)
    if (isfinite(r[j])) ymax = fmax(ymax, r[j]);
  if (!(ymax > 0)) return GS_OK;
  gs_svg b = {0};
  gs_svg_header(&b, 800, 470, title);
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax * 1.05, "ms per step");
  for (int k = 0; k <= (int)kmax; k++) {
    double x = x0 + (kmax > 0 ? k / kmax : 0.5) * (x1 - x0);
    gs_svg_put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x, y0 + 16, k);
  }
  gs_svg_put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">spare hosts k (summation "
             "servers of their own)</text>\n", (x0 + x1) / 2, y0 + 38);
  char what[64];
  snprintf(what, sizeof what, "ps step (%s)", measured);
  series(&b, d->k, d->step, d->n, kmax, top, x0, x1, y0, y1, C_STEP, what, false);
  snprintf(what, sizeof what, "ps communication (%s)", measured);
  series(&b, d->k, d->comm, d->n, kmax, top, x0, x1, y0, y1, C_COMM, what, false);
  series(&b, d->k, d->topt, d->n, kmax, top, x0, x1, y0, y1, C_TOPT, "t_opt", true);
  level(&b, d->ring_step, top, x0, x1, y0, y1, C_STEP, "ring step");
  level(&b, d->ring_comm, top, x0, x1, y0, y1, C_COMM, "ring communication");
  int ly = y1;
  snprintf(what, sizeof what, "ps step (%s)", measured);
  gs_svg_legend(&b, x1 + 20, ly, C_STEP, what);
  snprintf(what, sizeof what, "ps communication (%s)", measured);
  gs_svg_legend(&b, x1 + 20, ly + 20, C_COMM, what);
  gs_svg_legend(&b, x1 + 20, ly + 40, C_TOPT, "t_opt (dashed)");
  if (isfinite(d->ring_step)) {
    gs_svg_put(&b, "<text x=\"%d\" y=\"%d\">dotted: the ring's step and</text>\n", x1 + 20,
               ly + 75);
    gs_svg_put(&b, "<text x=\"%d\" y=\"%d\">communication (%.0f, %.0f ms)</text>\n",
               x1 + 20, ly + 92, d->ring_step, d->ring_comm);
  }
  return gs_svg_save(dir, "spare.svg", &b, e);
}

int gs_charts_spare(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  const gs_summary *first = NULL;
  for (size_t i = 0; i < n && !first; i++)
    if (runs[i].ps_spare_hosts >= 0 && runs[i].world > 1) first = &runs[i];
  if (!first) return GS_OK;
  spare_data d = {.ring_step = NAN, .ring_comm = NAN, .ring_topt = NAN};
  for (size_t i = 0; i < n && d.n < 66; i++) {
    const gs_summary *r = &runs[i];
    if (r->world != first->world || strcmp(r->model, first->model) || r->batch != first->batch)
      continue;
    if (r->ps_spare_hosts >= 0 && r->ps_partition_mb == first->ps_partition_mb) {
      d.k[d.n] = r->ps_spare_hosts;
      d.step[d.n] = r->step_time_s_median * 1e3;
      d.comm[d.n] = gs_summary_comm_window(r) * 1e3;
      d.topt[d.n++] = gs_summary_link_time(r) * 1e3;
    } else if (r->mode == GS_MODE_ALLREDUCE) {
      d.ring_step = r->step_time_s_median * 1e3;
      d.ring_comm = gs_summary_comm_window(r) * 1e3;
      d.ring_topt = gs_summary_link_time(r) * 1e3;
    }
  }
  /* in k order */
  for (int i = 1; i < d.n; i++)
    for (int j = i; j > 0 && d.k[j - 1] > d.k[j]; j--) {
      double *v[4] = {d.k, d.step, d.comm, d.topt};
      for (int q = 0; q < 4; q++) {
        double t = v[q][j];
        v[q][j] = v[q][j - 1];
        v[q][j - 1] = t;
      }
    }
  char title[256];
  snprintf(title, sizeof title, "BytePS: %s, %d hosts, %.3g Mbit/s (medians)", first->model,
           first->hosts, first->link_rate_bps / 1e6);
  return draw(dir, title, &d, "measured", e);
}

int gs_charts_spare_projection(const char *dir, const gs_cm_projection *p, gs_err *e) {
  if (p->nspare_worlds < 1) return GS_OK;
  int world = p->spare_worlds[p->nspare_worlds - 1], row = 0;
  while (row < p->nspare_rows && p->spare_rows[row].world != world) row++;
  const gs_cm_result *ring = &p->spare_rows[row];
  spare_data d = {.ring_step = ring->step_s * 1e3, .ring_comm = ring->comm_s * 1e3,
                  .ring_topt = ring->link_s * 1e3};
  for (int i = row + 1; i < p->nspare_rows && p->spare_rows[i].world == world && d.n < 66; i++) {
    const gs_cm_result *r = &p->spare_rows[i];
    d.k[d.n] = d.n;
    d.step[d.n] = r->step_s * 1e3;
    d.comm[d.n] = r->comm_s * 1e3;
    d.topt[d.n++] = r->link_s * 1e3;
  }
  char title[256];
  snprintf(title, sizeof title, "Cost model, BytePS: %s, %d hosts: best k = %d, %.2fx the ring",
           p->model, ring->hosts, p->spare_best[p->nspare_worlds - 1],
           p->spare_speedup[p->nspare_worlds - 1]);
  return draw(dir, title, &d, "predicted", e);
}
