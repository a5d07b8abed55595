/* charts_ranks.c: memory.svg, peak resident memory (the high-water mark
 * each rank measured, ru_maxrss) per rank, grouped by run: the ps master's
 * extra buffers at a glance. Drawn with svg.c's pieces. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/draw.h"
#include "bench/report/report.h"
#include "ps/ps.h"

#define put gs_svg_put

int gs_charts_memory(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  int nbars = 0;
  double ymax = 0, MiB = 1024.0 * 1024.0;
  for (size_t i = 0; i < n; i++)
    for (int r = 0; r < runs[i].world; r++) {
      nbars++;
      if (runs[i].per_rank[r].peak_rss_bytes / MiB > ymax)
        ymax = runs[i].per_rank[r].peak_rss_bytes / MiB;
    }
  int barw = 22, gap = 30, x0 = 90, y0 = 380, y1 = 50;
  int W = x0 + nbars * (barw + 4) + (int)n * gap + 160, H = 450;
  if (W < 640) W = 640;
  int x1 = W - 140;
  gs_svg b = {0};
  gs_svg_header(&b, W, H, "Peak memory per rank (resident set high-water mark)");
  double top = gs_svg_y_axis(&b, x0, y0, x1, y1, ymax, "peak RSS (MiB)");
  int x = x0 + 15;
  bool seen[4] = {0};
  for (size_t i = 0; i < n; i++) {
    const gs_summary *s = &runs[i];
    const char *mode = gs_mode_name(s->mode);
    int gx = x;
    for (int r = 0; r < s->world; r++) {
      double v = s->per_rank[r].peak_rss_bytes / MiB, h = v / top * (y0 - y1);
      char id[400];
      put(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>%s rank "
          "%d: %.1f MiB</title></rect>\n", x, y0 - h, barw, h, gs_svg_mode_color(mode),
          gs_svg_esc(s->id, id, sizeof id), r, v);
      put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%d</text>\n",
          x + barw / 2, y0 + 13, r);
      x += barw + 4;
    }
    seen[s->mode < 3 ? s->mode : 3] = true;
    put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%s w%d</text>\n",
        (gx + x - 4) / 2, y0 + 30, mode, s->world);
    x += gap;
  }
  put(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">rank, grouped by run</text>\n",
      (x0 + x1) / 2, y0 + 52);
  int legend = 0;
  for (int m = 0; m < 3; m++)
    if (seen[m])
      gs_svg_legend(&b, x1 + 20, y1 + 20 * legend++, gs_svg_mode_color(gs_mode_name(m)),
                    gs_mode_name(m));
  return gs_svg_save(dir, "memory.svg", &b, e);
}
