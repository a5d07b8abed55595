/* evaluate.c: a trainer's model on data without training it: its own
 * training set (gs_trainer_evaluate), a held-out set under the current
 * parameters or under copies taken along the run
 * (gs_trainer_evaluate_data_at). The forward pass only, in the batches of
 * training, where the kernels run. */
#include <stdlib.h>

#include "worker/data.h"
#include "worker/model.h"
#include "worker/trainer.h"
#include "worker/worker.h"

/* the first n samples of d, whose bytes are at pixels / labels where the
 * kernels run, under params (where the kernels run) */
static int eval_set(gs_trainer *t, const float *params, const gs_dataset *d,
                    const uint8_t *pixels, const int32_t *labels, int64_t n, double *accuracy,
                    double *loss, gs_err *e) {
  int64_t *idx = malloc((size_t)t->o.batch * sizeof *idx);
  if (!idx) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  gs_kernels *k = t->k;
  double sum = 0.0;
  int64_t hits = 0;
  int rc = GS_OK;
  for (int64_t s = 0; s < n && rc == 0; s += t->o.batch) {
    int cnt = (int)(n - s < t->o.batch ? n - s : t->o.batch);
    for (int i = 0; i < cnt; i++) idx[i] = s + i;
    if (t->device_data) k->to_device(k, t->didx, idx, (size_t)cnt * sizeof *idx);
    k->gather_batch(k, cnt, d->dim, pixels, labels, t->device_data ? t->didx : idx,
                    t->m->input, t->m->labels);
    float l = 0.0f;
    int c = 0;
    rc = t->m->ops->forward(t->m, params, cnt, &l, &c, e);
    if (rc == 0) rc = k->sync(k, e);
    sum += (double)l * cnt;
    hits += c;
  }
  free(idx);
  if (rc) {
    gs_err_prefix(e, "evaluate: ");
    return rc;
  }
  *accuracy = (double)hits / (double)n;
  *loss = sum / (double)n;
  return GS_OK;
}

int gs_trainer_evaluate(gs_trainer *t, int64_t n, double *accuracy, double *loss, gs_err *e) {
  *accuracy = 0.0;
  *loss = 0.0;
  if (!t->d) return GS_OK;  /* profiles: dummy 0, see profile.c */
  if (n <= 0 || n > t->d->n) n = t->d->n;
  return eval_set(t, t->params, t->d, t->dpixels, t->dlabels, n, accuracy, loss, e);
}

int gs_trainer_evaluate_data(gs_trainer *t, const char *spec, double *accuracy, double *loss,
                             gs_err *e) {
  const float *now = NULL;
  return gs_trainer_evaluate_data_at(t, spec, &now, 1, accuracy, loss, e);
}

/* each snapshot in turn where the kernels run: a CPU's kernels read it
 * where it is, a device's from one scratch copy */
static int eval_snapshots(gs_trainer *t, const gs_dataset *d, const uint8_t *pix,
                          const int32_t *lab, const float *const *params, int n,
                          double *accuracy, double *loss, gs_err *e) {
  gs_kernels *k = t->k;
  size_t bytes = t->m->nparams * sizeof(float);
  float *scratch = NULL;
  int rc = GS_OK;
  for (int i = 0; i < n && rc == GS_OK; i++) {
    const float *p = params[i] ? params[i] : t->params;
    if (params[i] && k->device != GS_DEV_CPU) {
      if (!scratch && !(scratch = k->alloc(k, bytes ? bytes : 1))) {
        rc = k->sync(k, e);
        if (rc == GS_OK) rc = GS_FAIL(e, GS_ENOMEM, "out of device memory for a snapshot of "
                                      "the parameters (%zu bytes)", bytes);
        break;
      }
      k->to_device(k, scratch, params[i], bytes);
      p = scratch;
    }
    rc = eval_set(t, p, d, pix, lab, d->n, &accuracy[i], &loss[i], e);
  }
  if (scratch) k->release(k, scratch);
  return rc;
}

int gs_trainer_evaluate_data_at(gs_trainer *t, const char *spec, const float *const *params,
                                int n, double *accuracy, double *loss, gs_err *e) {
  for (int i = 0; i < n; i++) accuracy[i] = loss[i] = 0.0;
  if (!t->d)
    return GS_FAIL(e, GS_EINVAL, "--eval-data %s: the %s profile reads no data", spec,
                   t->model_spec);
  gs_data_want want = {.c = t->m->in_c, .h = t->m->in_h, .w = t->m->in_w, .flat = t->m->flat,
                       .classes = t->m->classes, .synthetic_n = t->o.synthetic_samples,
                       .seed = t->o.seed};
  gs_dataset *d = NULL;
  int rc = gs_data_open(spec, &want, &d, e);
  if (rc) {
    gs_err_prefix(e, "--eval-data: ");
    return rc;
  }
  gs_kernels *k = t->k;
  const uint8_t *pix = d->pixels;
  const int32_t *lab = d->labels;
  uint8_t *dpix = NULL;
  int32_t *dlab = NULL;
  size_t npix = (size_t)d->n * d->dim, nlab = (size_t)d->n * sizeof(int32_t);
  if (t->device_data) { /* the held-out set where the kernels run, as the training set */
    dpix = k->alloc(k, npix ? npix : 1);
    dlab = k->alloc(k, nlab ? nlab : 1);
    if (dpix && dlab) {
      k->to_device(k, dpix, d->pixels, npix);
      k->to_device(k, dlab, d->labels, nlab);
    }
    rc = k->sync(k, e);
    if (rc == 0 && (!dpix || !dlab))
      rc = GS_FAIL(e, GS_ENOMEM, "out of device memory for --eval-data (%zu bytes)", npix + nlab);
    pix = dpix;
    lab = dlab;
  }
  if (rc == 0) rc = eval_snapshots(t, d, pix, lab, params, n, accuracy, loss, e);
  if (dpix) k->release(k, dpix);
  if (dlab) k->release(k, dlab);
  gs_data_free(d);
  return rc;
}
