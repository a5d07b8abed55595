/* stragglers.c: the step time of each consistency model when ranks compute
 * at different speeds (costmodel.h gs_cm_straggle; docs/model.md).
 *
 * Rank r's compute in a step is c0 x f_r x (1 + cv |z|), z standard
 * normal, as --slow and --jitter make it (worker/straggle.c). The models
 * differ only in whom an update waits for:
 *   sync (ring, ps bsp)   every rank: E[max_r compute] + comm;
 *   ring period H         every rank, once per H steps: E[max_r sum of H
 *                         computes] / H + comm / H;
 *   backup B              the (N-B)-th arrival: E[(N-B)-th smallest] + comm,
 *                         applying (N-B) batches per update;
 *   ssp:K                 in the long run every rank does every step, so
 *                         the slowest rank's mean rate: max_r E[compute] +
 *                         comm (the window K absorbs noise, not a rank that
 *                         is slow every step);
 *   async                 no one: each rank at its own rate,
 *                         sum_r 1 / (E[compute_r] + comm), the ranks off
 *                         the server's host at most the updates the
 *                         servers' links carry (max_updates_per_s); those
 *                         on it with their own comm (no link).
 * The expectations over z are means over one fixed set of draws from a
 * fixed seed (every model's from the same draws, so that E[max] is never
 * below the largest mean), and the prediction is a pure function of its
 * inputs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"

#define DRAWS 4096

/* splitmix64: the draws' source (fixed seed: same inputs, same figure) */
static uint64_t next(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double normal(uint64_t *x) {
  double u = ((double)(next(x) >> 11) + 0.5) / 9007199254740992.0;
  double v = ((double)(next(x) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int gs_cm_straggle(const gs_cm_straggle_in *in, gs_cm_straggle_out *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  int N = in->world;
  if (N < 1 || N > 65536 || !in->factor || !(in->c0_s >= 0) || !(in->comm_s >= 0) ||
      !(in->jitter_cv >= 0) || !(in->batch > 0) || !(in->c0_s + in->comm_s > 0) ||
      !(in->max_updates_per_s >= 0))
    return GS_FAIL(e, GS_EINVAL, "straggler model: world %d, compute %g s, comm %g s, jitter "
                   "%g, batch %g: each must be positive (compute, comm, jitter >= 0)", N,
                   in->c0_s, in->comm_s, in->jitter_cv, in->batch);
  if (in->beside < 0 || in->beside > N || !(in->comm_beside_s >= 0) ||
      (in->beside > 0 && !(in->c0_s + in->comm_beside_s > 0)))
    return GS_FAIL(e, GS_EINVAL, "straggler model: %d workers beside the server in a world of "
                   "%d, communicating %g s each (0 .. world, >= 0)", in->beside, N,
                   in->comm_beside_s);
  int H = in->period > 1 ? in->period : 1;
  int need = N - in->backup;
  if (need < 1) need = 1;
  double *t = malloc((size_t)N * sizeof *t), *mean = calloc((size_t)N, sizeof *mean);
  if (!t || !mean) {
    free(t);
    free(mean);
    return GS_FAIL(e, GS_ENOMEM, "straggler model: out of memory");
  }
  uint64_t seed = 0x5eed5eed5eedull;
  double sum_max = 0, sum_kth = 0;
  for (int d = 0; d < DRAWS; d++) {
    double mx = 0;
    for (int r = 0; r < N; r++) {
      double c = 0;
      for (int h = 0; h < H; h++) c += in->factor[r] * (1 + in->jitter_cv * fabs(normal(&seed)));
      t[r] = c * in->c0_s;
      mean[r] += t[r] / H / DRAWS;
      if (t[r] > mx) mx = t[r];
    }
    sum_max += mx / H;
    if (in->kind == GS_CM_STRAGGLE_BACKUP) {
      qsort(t, (size_t)N, sizeof *t, cmp_double);
      sum_kth += t[need - 1];
    }
  }
  free(t);
  double slowest = 0, rate = 0, near = 0;
  for (int r = 0; r < N; r++) {
    if (mean[r] > slowest) slowest = mean[r];
    if (r < in->beside) near += 1 / (mean[r] + in->comm_beside_s);
    else rate += 1 / (mean[r] + in->comm_s);
  }
  free(mean);
  switch (in->kind) {
  case GS_CM_STRAGGLE_SYNC:
    out->samples_per_s = N * in->batch / (sum_max / DRAWS + in->comm_s / H);
    out->formula = H > 1 ? "E[max over ranks of H steps' compute]/H + comm/H"
                         : "E[max over ranks of compute] + comm";
    break;
  case GS_CM_STRAGGLE_BACKUP:
    out->samples_per_s = need * in->batch / (sum_kth / DRAWS + in->comm_s);
    out->formula = "E[(N-B)-th fastest compute] + comm, N-B batches per update";
    break;
  case GS_CM_STRAGGLE_SSP:
    out->samples_per_s = N * in->batch / (slowest + in->comm_s);
    out->formula = "the slowest rank's mean compute + comm";
    break;
  case GS_CM_STRAGGLE_ASYNC:
    if (in->max_updates_per_s > 0 && rate > in->max_updates_per_s) rate = in->max_updates_per_s;
    out->samples_per_s = in->batch * (near + rate);
    out->formula = "sum over ranks of batch / (mean compute + comm)";
    break;
  default:
    return GS_FAIL(e, GS_EINVAL, "straggler model: unknown kind %d", (int)in->kind);
  }
  out->step_s = N * in->batch / out->samples_per_s;
  return GS_OK;
}
