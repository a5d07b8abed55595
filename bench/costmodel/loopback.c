/* loopback.c: the loopback transport a launcher measured before a sweep,
 * handed to the ranks it starts (and to the report they write) through
 * the environment, so that every reader takes the same figures or none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/costmodel/costmodel.h"

#define VAR "GS_LOOPBACK_MODEL"

void gs_loopback_costmodel_set(double alpha_s, double Bps) {
  if (!(alpha_s >= 0 && isfinite(alpha_s) && Bps > 0 && isfinite(Bps))) {
    unsetenv(VAR);
    return;
  }
  char v[64];
  snprintf(v, sizeof v, "%.6g,%.6g", alpha_s, Bps);
  setenv(VAR, v, 1);
}

bool gs_loopback_costmodel(double *alpha_s, double *Bps) {
  const char *v = getenv(VAR);
  double a = 0, b = 0;
  char end = 0;
  *alpha_s = *Bps = 0;
  /* a value we did not write (set by hand, cut short) is no measurement */
  if (!v || sscanf(v, "%lg,%lg%c", &a, &b, &end) != 2 || !(a >= 0 && isfinite(a)) ||
      !(b > 0 && isfinite(b)))
    return false;
  *alpha_s = a;
  *Bps = b;
  return true;
}
