/* draw.h (internal to bench/report): what the report's pictures are drawn
 * with. The few pieces every SVG chart is made of (svg.c): a growing text
 * buffer, the title, a y axis with nice ticks, a log2 x axis, the modes'
 * colours, and the atomic save; and the page that holds them all,
 * report.html (html.c). */
#ifndef GS_BENCH_DRAW_H
#define GS_BENCH_DRAW_H

#include <stddef.h>

#include <jansson.h>

#include "base/base.h"

typedef struct gs_svg {
  char *s;
  size_t n, cap;
} gs_svg;

void gs_svg_put(gs_svg *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as SVG (XML) text or attribute: & < > " ' as entities, control bytes
 * as '?', cut to fit cap; returns buf. Every string a rank or a file gave
 * goes through it (the functions below escape their text themselves). */
const char *gs_svg_esc(const char *s, char *buf, size_t cap);
/* the XML prologue, the white page and the chart's title */
void gs_svg_header(gs_svg *b, int w, int h, const char *title);
/* grid, ticks and the y axis from 0 to ymax (rounded up to a nice tick,
 * returned) between y0 (bottom) and y1 (top), with its label */
double gs_svg_y_axis(gs_svg *b, int x0, int y0, int x1, int y1, double ymax, const char *label);
/* a log2 x axis from lo to hi (powers of two at least lo..hi, widened to
 * whole powers): ticks at each power of two, labelled by fmt_tick; returns
 * the x of a value through *pos_lo / *pos_span (x = x0 + (log2 v - lo) *
 * span) */
typedef void (*gs_svg_tick_fn)(double v, char *buf, size_t cap);
void gs_svg_log2_x_axis(gs_svg *b, int x0, int y0, int x1, int y1, double lo, double hi,
                        gs_svg_tick_fn fmt_tick, const char *label, double *l2lo,
                        double *span);
double gs_svg_nice_step(double range, int ticks);
const char *gs_svg_mode_color(const char *mode);
/* a legend swatch and its text at (x, y) */
void gs_svg_legend(gs_svg *b, int x, int y, const char *color, const char *text);
/* a step's parts, in the order the bars and the timeline stack them:
 * compute (data+fwd+bwd), exposed communication wait, reduction, optimizer,
 * idle */
extern const char *const gs_svg_part_names[5];
extern const char *const gs_svg_part_colors[5];
/* close the document and write dir/name atomically; frees the buffer */
int gs_svg_save(const char *dir, const char *name, gs_svg *b, gs_err *e);

/* Write dir/report.html (atomically) from report.json's document, with
 * every SVG chart of dir inlined. */
int gs_html_write(const char *dir, json_t *report, gs_err *e);

#endif
