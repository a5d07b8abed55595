/* charts_busbw.c: busbw.svg, bus bandwidth vs message size (log2) from
 * the collective benchmark's tables (collective-<mode>-w<N>.json for
 * all_reduce, <collective>-<mode>-w<N>.json for the others), one line per
 * collective, mode and world. Drawn with svg.c's pieces. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"
#include "ps/ps.h"

#define put gs_svg_put

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
                              : other[ci][gs_mode_parse(mode) == GS_MODE_PS];
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
