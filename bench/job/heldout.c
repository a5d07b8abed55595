/* heldout.c: held-out accuracy along the run (--eval-data, --eval-every).
 * Rank 0 copies its parameters after every K-th step and after the last,
 * and evaluates every copy on the held-out data once training is over: the
 * steps are measured without evaluation in them (a copy is one memcpy, or
 * one device-to-host transfer), and the curve still shows accuracy against
 * the wall-clock time of the step it belongs to. The copies are capped at
 * GS_HELDOUT_BYTES in all: a large model gets fewer points, never an
 * allocation failure halfway. */
#include <stdlib.h>
#include <string.h>

#include "bench/job/job.h"
#include "kernels/kernels.h"

#define GS_HELDOUT_POINTS 20
#define GS_HELDOUT_BYTES ((size_t)1 << 30)

int gs_heldout_start(gs_heldout *h, const gs_opts *o, int64_t steps, size_t nparams,
                     gs_err *e) {
  memset(h, 0, sizeof *h);
  if (!o->eval_data || steps < 1) return GS_OK;
  size_t bytes = nparams * sizeof(float), fit = bytes ? GS_HELDOUT_BYTES / bytes : 0;
  int64_t every = o->eval_every > 0 ? o->eval_every
                  : steps > GS_HELDOUT_POINTS ? (steps + GS_HELDOUT_POINTS - 1) / GS_HELDOUT_POINTS
                                              : 1;
  if (fit < 2) return GS_OK; /* no room for a curve: the end's figure alone */
  if ((uint64_t)(steps / every + 1) > fit) every = steps / (int64_t)(fit - 1) + 1;
  h->every = every;
  h->cap = (int)(steps / every + 1);
  h->nparams = nparams;
  h->snap = calloc((size_t)h->cap + 1, sizeof *h->snap);
  h->step = calloc((size_t)h->cap + 1, sizeof *h->step);
  if (!h->snap || !h->step) return GS_FAIL(e, GS_ENOMEM, "out of memory for --eval-every");
  return GS_OK;
}

int gs_heldout_take(gs_heldout *h, gs_kernels *k, const float *params, int64_t step,
                    int64_t steps, gs_err *e) {
  if (!h->every || ((step + 1) % h->every && step + 1 != steps) || h->n >= h->cap)
    return GS_OK;
  size_t bytes = h->nparams * sizeof(float);
  float *copy = malloc(bytes ? bytes : 1);
  if (!copy)
    return GS_FAIL(e, GS_ENOMEM, "out of memory copying the parameters after step %lld for "
                   "--eval-data (%zu bytes)", (long long)step + 1, bytes);
  if (k->device == GS_DEV_CPU) {
    memcpy(copy, params, bytes);
  } else {
    k->to_host(k, copy, params, bytes);
    int rc = k->sync(k, e);
    if (rc < 0) {
      free(copy);
      return rc;
    }
  }
  h->snap[h->n] = copy;
  h->step[h->n++] = step;
  return GS_OK;
}

int gs_heldout_finish(gs_heldout *h, gs_trainer *t, const char *spec, gs_run_info *info,
                      gs_err *e) {
  int n = h->n;
  h->acc = calloc((size_t)n + 1, sizeof *h->acc);
  h->loss = calloc((size_t)n + 1, sizeof *h->loss);
  if (!h->acc || !h->loss) return GS_FAIL(e, GS_ENOMEM, "out of memory for --eval-data");
  const float *now = NULL; /* NULL: the parameters the run ends with */
  if (h->snap) h->snap[n] = NULL;
  GS_TRY(gs_trainer_evaluate_data_at(t, spec, h->snap ? (const float *const *)h->snap : &now,
                                     n + 1, h->acc, h->loss, e));
  info->heldout_accuracy = h->acc[n];
  info->heldout_loss = h->loss[n];
  info->heldout_steps = h->step;
  info->heldout_curve_accuracy = h->acc;
  info->heldout_curve_loss = h->loss;
  info->nheldout = n;
  return GS_OK;
}

void gs_heldout_free(gs_heldout *h) {
  for (int i = 0; h->snap && i < h->n; i++) free(h->snap[i]);
  free(h->snap);
  free(h->step);
  free(h->acc);
  free(h->loss);
  memset(h, 0, sizeof *h);
}
