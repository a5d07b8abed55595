/* perf_print.c: the collective benchmark's table in nccl-tests' layout, so
 * that a script written for all_reduce_perf's output reads ours: the same
 * two-line column header ("out-of-place" / "in-place" groups), the same
 * column widths and number formats per row, and the same closing
 * "# Out of bounds values" and "# Avg bus bandwidth" lines. Our own lines
 * (what ran, the formulas) are comments above it; the ring's algorithm per
 * size is an optional last column, where nccl-tests puts its -T
 * timestamp. */
#include <inttypes.h>
#include <stdio.h>

#include "bench/coll/coll.h"

/* nccl-tests' number format: two decimals, fewer where the width is
 * short, then an exponent */
static const char *num(double v, int width, char *buf) {
  if (snprintf(buf, (size_t)width + 1, "%*.2f", width, v) <= width) return buf;
  if (snprintf(buf, (size_t)width + 1, "%*.1f", width, v) <= width) return buf;
  if (snprintf(buf, (size_t)width + 1, "%*.0f", width, v) <= width) return buf;
  snprintf(buf, (size_t)width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

static void body(FILE *f, const gs_perf_time *t) {
  char a[16], b[16], c[16];
  fprintf(f, "  %7s  %6s  %6s", num(t->time_us, 7, a), num(t->algbw, 6, b),
          num(t->busbw, 6, c));
  if (t->wrong == UINT64_MAX) fprintf(f, "    N/A");
  else fprintf(f, "  %6g", (double)t->wrong);
}

/* as nccl-tests: the results (size and placement) with a wrong value, the
 * mean busbw of both placements */
double gs_perf_summary(const gs_perf_row *rows, int nrows, int *errors) {
  double bw = 0;
  *errors = 0;
  for (int i = 0; i < nrows; i++)
    for (int p = 0; p < 2; p++) {
      const gs_perf_time *t = p ? &rows[i].ip : &rows[i].oop;
      *errors += t->wrong && t->wrong != UINT64_MAX;
      bw += t->busbw;
    }
  return nrows ? bw / (2.0 * nrows) : 0.0;
}

void gs_perf_print(void *fp, const gs_perf_opts *o, const char *title, const gs_perf_row *rows,
                     int nrows) {
  FILE *f = fp;
  const char *type = gs_perf_type_name(o->wire);
  /* nccl-tests' columns: the op only for a reduction, the root only
   * where there is one */
  const gs_coll_desc *d = gs_coll_of(o->coll);
  bool has_op = d->has_op, parted = d->parted;
  const char *op = has_op ? gs_redop_name(o->op) : "none";
  int root = d->has_root ? o->root : -1;
  char rooted[32] = "";
  if (root >= 0) snprintf(rooted, sizeof rooted, ", root %d", root);
  fprintf(f, "# %s: %s (%s) of %s%s, %d ranks, %d iterations after %d warm-up\n",
          title ? title : "collective", gs_coll_name(o->coll), op, type, rooted, o->world,
          o->iters, o->warmup);
  fprintf(f, "# algbw = size / time; busbw = algbw x %s = algbw x %.3f "
          "(GB/s = 1e9 bytes/s); size = count x %s%zu bytes (%s)\n", d->factor,
          gs_coll_busbw_factor(o->coll, o->world),
          parted ? "n x " : "", gs_dtype_size(o->wire), type);
  char want[64];
  if (has_op) snprintf(want, sizeof want, "the exact %s%s", op, d->what);
  else snprintf(want, sizeof want, "%s", d->what);
  fprintf(f, "# time: mean of the timed iterations, run back to back, max over ranks; #wrong: "
          "elements differing from %s in one more, checked, iteration, over every "
          "rank (integer inputs%s: tolerance 0)\n", want,
          !has_op || o->op != GS_REDOP_AVG ? ""
          : o->wire == GS_I32 ? ", the sum divided by N, truncated (NCCL's integer avg)"
          : o->wire == GS_F64 ? ", the sum times the double 1/N" : ", the sum times the fp32 1/N");
  /* the algorithm column only where the backend names one */
  bool algo = false;
  for (int i = 0; i < nrows; i++) algo |= rows[i].algo != NULL;
  fprintf(f, "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
          "in-place          \n", "", "", "", "", "");
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s\n", "size",
          "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
          "busbw", "#wrong", algo ? "  algo" : "");
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
          "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
          "");
  for (int i = 0; i < nrows; i++) {
    const gs_perf_row *r = &rows[i];
    fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, type, op, root);
    body(f, &r->oop);
    body(f, &r->ip);
    if (algo) fprintf(f, "  %6s", r->algo ? r->algo : "-");
    fputc('\n', f);
  }
  int errors;
  double bw = gs_perf_summary(rows, nrows, &errors);
  fprintf(f, "# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  fprintf(f, "# %-20s : %g \n", "Avg bus bandwidth", bw);
  fprintf(f, "#\n");
  fflush(f);
}
