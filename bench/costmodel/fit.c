/* fit.c: least-squares fits of the cost model's constants (alpha,
 * beta, gamma) to measured (world, bytes, seconds) points (costmodel.h).
 *
 * Times span orders of magnitude (a 4 KiB message and a 64 MiB one), so
 * the fits weight every point by 1/t: they minimise relative residuals,
 * and the per-message term is not drowned by the large messages. The
 * solver is Householder QR on column-scaled data: the columns (a count of
 * messages, a count of bytes) differ by many orders of magnitude, which
 * the normal equations would square. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"

enum { MAXP = 8 };

int gs_cm_lsq(const double *X, const double *y, const double *w, int n, int p, double *coef,
              gs_err *e) {
  if (p < 1 || p > MAXP) return GS_FAIL(e, GS_EINVAL, "fit: %d unknowns (1 to %d)", p, MAXP);
  if (n < p)
    return GS_FAIL(e, GS_EINVAL, "fit: %d points for %d unknowns: measure at least %d", n, p, p);
  double *A = malloc((size_t)n * (size_t)p * sizeof *A), *b = malloc((size_t)n * sizeof *b);
  if (!A || !b) {
    free(A);
    free(b);
    return GS_FAIL(e, GS_ENOMEM, "fit: out of memory for %d points", n);
  }
  int rc = GS_OK;
  double scale[MAXP] = {0};
  for (int i = 0; i < n && rc == GS_OK; i++) {
    double wi = w ? w[i] : 1;
    if (!isfinite(wi) || !isfinite(y[i])) rc = GS_FAIL(e, GS_EINVAL, "fit: point %d is not finite", i);
    b[i] = wi * y[i];
    for (int k = 0; k < p && rc == GS_OK; k++) {
      double v = wi * X[(size_t)i * (size_t)p + (size_t)k];
      if (!isfinite(v)) rc = GS_FAIL(e, GS_EINVAL, "fit: point %d is not finite", i);
      A[(size_t)i * (size_t)p + (size_t)k] = v;
      scale[k] += v * v;
    }
  }
  for (int k = 0; k < p && rc == GS_OK; k++) {
    scale[k] = sqrt(scale[k]);
    if (!(scale[k] > 0))
      rc = GS_FAIL(e, GS_EINVAL, "fit: unknown %d has no weight in any point (all zero)", k);
    for (int i = 0; i < n && rc == GS_OK; i++) A[(size_t)i * (size_t)p + (size_t)k] /= scale[k];
  }
  /* Householder: A = QR, b <- Q^T b */
  double rdiag[MAXP] = {0}, rmax = 0;
  for (int k = 0; k < p && rc == GS_OK; k++) {
    double norm = 0;
    for (int i = k; i < n; i++) norm += A[(size_t)i * p + k] * A[(size_t)i * p + k];
    norm = sqrt(norm);
    double akk = A[(size_t)k * p + k];
    double alpha = akk > 0 ? -norm : norm;
    rdiag[k] = alpha;
    if (fabs(alpha) > rmax) rmax = fabs(alpha);
    if (norm == 0) continue;
    /* v = a_k - alpha e_k, stored in column k from row k */
    A[(size_t)k * p + k] = akk - alpha;
    double vnorm2 = 0;
    for (int i = k; i < n; i++) vnorm2 += A[(size_t)i * p + k] * A[(size_t)i * p + k];
    if (vnorm2 == 0) continue;
    for (int c = k + 1; c < p; c++) {
      double dot = 0;
      for (int i = k; i < n; i++) dot += A[(size_t)i * p + k] * A[(size_t)i * p + c];
      double f = 2 * dot / vnorm2;
      for (int i = k; i < n; i++) A[(size_t)i * p + c] -= f * A[(size_t)i * p + k];
    }
    double dot = 0;
    for (int i = k; i < n; i++) dot += A[(size_t)i * p + k] * b[i];
    double f = 2 * dot / vnorm2;
    for (int i = k; i < n; i++) b[i] -= f * A[(size_t)i * p + k];
  }
  for (int k = 0; k < p && rc == GS_OK; k++)
    if (!(fabs(rdiag[k]) > 1e-9 * rmax))
      rc = GS_FAIL(e, GS_EINVAL, "fit: the points do not determine unknown %d (it moves in "
                   "step with another): measure more distinct sizes or worlds", k);
  for (int k = p - 1; k >= 0 && rc == GS_OK; k--) {
    double v = b[k];
    for (int c = k + 1; c < p; c++) v -= A[(size_t)k * p + c] * coef[c];
    coef[k] = v / rdiag[k];
  }
  for (int k = 0; k < p && rc == GS_OK; k++) coef[k] /= scale[k];  /* back from scaled columns */
  free(A);
  free(b);
  return rc;
}

static int check_points(const gs_cm_point *pts, int n, int min_world, gs_err *e) {
  if (!pts || n < 2) return GS_FAIL(e, GS_EINVAL, "fit: %d points: need at least 2", n);
  for (int i = 0; i < n; i++) {
    if (!(pts[i].seconds > 0) || !isfinite(pts[i].seconds))
      return GS_FAIL(e, GS_EINVAL, "fit: point %d has time %g s: must be positive and finite", i,
                     pts[i].seconds);
    if (!(pts[i].bytes >= 0) || !isfinite(pts[i].bytes))
      return GS_FAIL(e, GS_EINVAL, "fit: point %d has %g bytes: must be >= 0 and finite", i,
                     pts[i].bytes);
    if (pts[i].world < min_world)
      return GS_FAIL(e, GS_EINVAL, "fit: point %d has world %d: need at least %d", i,
                     pts[i].world, min_world);
  }
  return GS_OK;
}

/* Residuals relative to the measurement, and their summary. */
static void residuals(const gs_cm_point *pts, int n, const double *pred, gs_cm_fit *f,
                      double *resid) {
  double ss = 0, mx = 0;
  for (int i = 0; i < n; i++) {
    double r = (pts[i].seconds - pred[i]) / pts[i].seconds;
    if (resid) resid[i] = r;
    ss += r * r;
    if (fabs(r) > mx) mx = fabs(r);
  }
  f->rms_rel = sqrt(ss / n);
  f->max_rel = mx;
  f->npoints = n;
}

/* The common shape of the fits: y = c0 * x0 + c1 * x1 (+ known), weighted
 * by 1 / t. */
static int fit2(const gs_cm_point *pts, int n, const double *x0, const double *x1,
                const double *known, double *c, gs_cm_fit *f, double *resid, gs_err *e) {
  double *X = calloc((size_t)n * 2, sizeof *X), *y = calloc((size_t)n, sizeof *y);
  double *w = calloc((size_t)n, sizeof *w), *pred = calloc((size_t)n, sizeof *pred);
  int rc = (!X || !y || !w || !pred) ? GS_FAIL(e, GS_ENOMEM, "fit: out of memory") : GS_OK;
  for (int i = 0; i < n && rc == GS_OK; i++) {
    X[2 * i] = x0[i];
    X[2 * i + 1] = x1[i];
    y[i] = pts[i].seconds - (known ? known[i] : 0);
    w[i] = 1 / pts[i].seconds;
  }
  if (rc == GS_OK) rc = gs_cm_lsq(X, y, w, n, 2, c, e);
  if (rc == GS_OK) {
    for (int i = 0; i < n; i++) pred[i] = c[0] * x0[i] + c[1] * x1[i] + (known ? known[i] : 0);
    residuals(pts, n, pred, f, resid);
  }
  free(X);
  free(y);
  free(w);
  free(pred);
  return rc;
}

static int distinct_sizes(const gs_cm_point *pts, int n, gs_err *e) {
  for (int i = 1; i < n; i++)
    if (pts[i].bytes != pts[0].bytes) return GS_OK;
  return GS_FAIL(e, GS_EINVAL, "fit: every point has %g bytes: measure at least two sizes to "
                 "separate the per-message and per-byte costs", pts[0].bytes);
}

int gs_cm_fit_p2p(const gs_cm_point *pts, int n, gs_cm_fit *f, double *resid, gs_err *e) {
  memset(f, 0, sizeof *f);
  GS_TRY(check_points(pts, n, 1, e));
  GS_TRY(distinct_sizes(pts, n, e));
  double *x0 = malloc((size_t)n * sizeof *x0), *x1 = malloc((size_t)n * sizeof *x1);
  int rc = (!x0 || !x1) ? GS_FAIL(e, GS_ENOMEM, "fit: out of memory") : GS_OK;
  for (int i = 0; i < n && rc == GS_OK; i++) {
    x0[i] = 1;
    x1[i] = pts[i].bytes;
  }
  double c[2] = {0};
  if (rc == GS_OK) rc = fit2(pts, n, x0, x1, NULL, c, f, resid, e);
  f->alpha_s = c[0];
  f->beta_s = c[1];
  free(x0);
  free(x1);
  return rc;
}

int gs_cm_fit_reduce(const gs_cm_point *pts, int n, gs_cm_fit *f, double *resid, gs_err *e) {
  GS_TRY(gs_cm_fit_p2p(pts, n, f, resid, e));
  f->gamma_s = f->beta_s;
  f->beta_s = 0;
  return GS_OK;
}

int gs_cm_fit_ring(const gs_cm_point *pts, int n, const gs_cm_machine *known, gs_cm_fit *f,
                   double *resid, gs_err *e) {
  memset(f, 0, sizeof *f);
  GS_TRY(check_points(pts, n, 2, e));
  GS_TRY(distinct_sizes(pts, n, e));
  double per_byte = 0;
  if (known) {
    if (!(known->reduce_Bps > 0) || !(known->copy_Bps > 0) || !isfinite(known->reduce_Bps) ||
        !isfinite(known->copy_Bps))
      return GS_FAIL(e, GS_EINVAL, "fit: the ring fit needs positive reduction and copy rates "
                     "(got %g and %g bytes/s)", known->reduce_Bps, known->copy_Bps);
    per_byte = 1 / known->reduce_Bps + 1 / known->copy_Bps;
  }
  double *x0 = malloc((size_t)n * sizeof *x0), *x1 = malloc((size_t)n * sizeof *x1);
  double *kn = malloc((size_t)n * sizeof *kn);
  int rc = (!x0 || !x1 || !kn) ? GS_FAIL(e, GS_ENOMEM, "fit: out of memory") : GS_OK;
  for (int i = 0; i < n && rc == GS_OK; i++) {
    double N = pts[i].world, m = pts[i].bytes;
    x0[i] = 2 * (N - 1);
    x1[i] = 2 * (N - 1) / N * m;
    kn[i] = (N - 1) / N * m * per_byte;
  }
  double c[2] = {0};
  if (rc == GS_OK) rc = fit2(pts, n, x0, x1, kn, c, f, resid, e);
  f->alpha_s = c[0];
  f->beta_s = c[1];
  f->gamma_s = known ? 1 / known->reduce_Bps : 0;
  free(x0);
  free(x1);
  free(kn);
  return rc;
}
