/* test_fit.c: the least-squares fits of bench/costmodel/fit.c.
 *  - gs_cm_lsq solves an exact system, and refuses collinear columns and
 *    fewer points than unknowns;
 *  - alpha and beta of a transport come back from synthetic point-to-point
 *    times with +-3% noise; exactly without noise; the residuals are the
 *    relative misfits they claim to be;
 *  - alpha and beta of a ring come back from all-reduce times at several
 *    worlds and sizes; gamma from reduction times;
 *  - bad points are rejected with a message naming them. */
#include <stdint.h>
#include <string.h>

#include "mt.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double noise(double amp) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  double u = (double)(rng >> 11) / 9007199254740992.0;
  return 1 + amp * (2 * u - 1);
}

static void lsq(void) {
  enum { N = 12 };
  double X[N * 3], y[N], c[3], want[3] = {2.5e-5, 7.0e-10, -3.0e-19};
  for (int i = 0; i < N; i++) {
    double m = 1024.0 * (1 << i);
    X[3 * i] = 1;
    X[3 * i + 1] = m;
    X[3 * i + 2] = m * m;
    y[i] = want[0] + want[1] * m + want[2] * m * m;
  }
  gs_err e = {0};
  CHECK_OK(gs_cm_lsq(X, y, NULL, N, 3, c, &e), &e);
  for (int k = 0; k < 3; k++) CHECK(mt_near(c[k], want[k], 1e-6), "coef %d: %g vs %g", k, c[k], want[k]);
  for (int i = 0; i < N; i++) X[3 * i + 2] = 2 * X[3 * i + 1];  /* collinear */
  CHECK(gs_cm_lsq(X, y, NULL, N, 3, c, &e) == GS_EINVAL);
  CHECK(strstr(e.msg, "do not determine"), "message: %s", e.msg);
  gs_err_clear(&e);
  CHECK(gs_cm_lsq(X, y, NULL, 2, 3, c, &e) == GS_EINVAL && strstr(e.msg, "2 points"));
}

static void p2p(void) {
  const double alpha = 25e-6, beta = 1 / 1.2e9;
  gs_cm_point pts[17 * 3];
  int n = 0;
  for (int k = 0; k < 17; k++)
    for (int rep = 0; rep < 3; rep++) {
      double m = 1024.0 * (1 << k);
      pts[n++] = (gs_cm_point){1, m, (alpha + beta * m) * noise(0.03)};
    }
  gs_cm_fit f;
  double resid[17 * 3];
  gs_err e = {0};
  CHECK_OK(gs_cm_fit_p2p(pts, n, &f, resid, &e), &e);
  CHECK(mt_near(f.alpha_s, alpha, 0.10), "alpha %g vs %g", f.alpha_s, alpha);
  CHECK(mt_near(f.beta_s, beta, 0.03), "beta %g vs %g", f.beta_s, beta);
  CHECK(f.rms_rel > 0.005 && f.rms_rel < 0.03 && f.max_rel < 0.07, "residuals rms %g max %g",
         f.rms_rel, f.max_rel);
  CHECK(f.npoints == n);
  double ss = 0;
  for (int i = 0; i < n; i++) {
    double pred = f.alpha_s + f.beta_s * pts[i].bytes;
    CHECK(mt_near(resid[i], (pts[i].seconds - pred) / pts[i].seconds, 1e-9));
    ss += resid[i] * resid[i];
  }
  CHECK(mt_near(sqrt(ss / n), f.rms_rel, 1e-12));
  for (int i = 0; i < n; i++) pts[i].seconds = alpha + beta * pts[i].bytes;
  CHECK_OK(gs_cm_fit_p2p(pts, n, &f, NULL, &e), &e);
  CHECK(mt_near(f.alpha_s, alpha, 1e-8) && mt_near(f.beta_s, beta, 1e-8) && f.max_rel < 1e-9);
}

static void ring(void) {
  gs_cm_machine known = mt_machine();
  const double alpha = 40e-6, beta = 1 / 2e9;
  double per_byte = 1 / known.reduce_Bps + 1 / known.copy_Bps;
  static const int worlds[] = {2, 3, 4, 8};
  gs_cm_point pts[4 * 14];
  int n = 0;
  for (int w = 0; w < 4; w++)
    for (int k = 0; k < 14; k++) {
      double N = worlds[w], m = 4096.0 * (1 << k);
      double t = 2 * (N - 1) * alpha + 2 * (N - 1) / N * m * beta + (N - 1) / N * m * per_byte;
      pts[n++] = (gs_cm_point){worlds[w], m, t * noise(0.02)};
    }
  gs_cm_fit f;
  gs_err e = {0};
  CHECK_OK(gs_cm_fit_ring(pts, n, &known, &f, NULL, &e), &e);
  CHECK(mt_near(f.alpha_s, alpha, 0.10), "ring alpha %g vs %g", f.alpha_s, alpha);
  CHECK(mt_near(f.beta_s, beta, 0.03), "ring beta %g vs %g", f.beta_s, beta);
  CHECK(f.rms_rel < 0.02 && mt_near(f.gamma_s, 1 / known.reduce_Bps, 1e-12));
  pts[0].world = 1;
  CHECK(gs_cm_fit_ring(pts, n, &known, &f, NULL, &e) == GS_EINVAL && strstr(e.msg, "point 0"));
}

static void reduce(void) {
  gs_cm_point pts[10];
  for (int k = 0; k < 10; k++) {
    double m = 65536.0 * (1 << k);
    pts[k] = (gs_cm_point){1, m, (2e-6 + m / 8e9) * noise(0.01)};
  }
  gs_cm_fit f;
  gs_err e = {0};
  CHECK_OK(gs_cm_fit_reduce(pts, 10, &f, NULL, &e), &e);
  CHECK(mt_near(f.gamma_s, 1 / 8e9, 0.02), "gamma %g", f.gamma_s);
  CHECK(f.beta_s == 0);
}

static void rejects(void) {
  gs_cm_point pts[3] = {{1, 1000, 1e-5}, {1, 1000, 2e-5}, {1, 1000, 3e-5}};
  gs_cm_fit f;
  gs_err e = {0};
  CHECK(gs_cm_fit_p2p(pts, 3, &f, NULL, &e) == GS_EINVAL && strstr(e.msg, "two sizes"));
  gs_err_clear(&e);
  CHECK(gs_cm_fit_p2p(pts, 1, &f, NULL, &e) == GS_EINVAL && strstr(e.msg, "at least 2"));
  pts[1] = (gs_cm_point){1, 5000, -1};
  gs_err_clear(&e);
  CHECK(gs_cm_fit_p2p(pts, 3, &f, NULL, &e) == GS_EINVAL && strstr(e.msg, "point 1"));
  pts[1] = (gs_cm_point){1, NAN, 1e-3};
  gs_err_clear(&e);
  CHECK(gs_cm_fit_p2p(pts, 3, &f, NULL, &e) == GS_EINVAL && strstr(e.msg, "point 1"));
}

int main(void) {
  lsq();
  p2p();
  ring();
  reduce();
  rejects();
  return check_done("model_fit");
}
