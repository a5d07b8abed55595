/* profile.c: training a network from its profile (profile_read.h), for
 * measuring communication at real model sizes without running the real
 * network.
 *
 * A profile is what tools/profile_model.py measured of a PyTorch network:
 * its parameters, the order in which backward made their gradients ready,
 * and each layer's forward and backward time. --model profile:FILE reads
 * one; resnet50, vgg16, bert-base and vgg11 are the same files, shipped
 * inside the program (worker/profiles/, made by the profiler: torchvision's
 * resnet50 and vgg16, Hugging Face's BertModel with bert-base-uncased's
 * config, and tools/models/cifar_vgg11.py, VGG-11 with batch norm for
 * CIFAR-10, UW-Madison CS744's model).
 *
 * The tensors are laid out in the order backward makes them, reversed:
 * tensor 0 is the parameter whose gradient is ready last, so backward walks
 * from the last tensor to the first, as model.h promises, and DDP's rule
 * over the tensors in that order (buckets.c) gives the buckets DDP builds
 * after its first iteration, when it regroups the parameters in the order
 * their gradients became ready. Names and shapes are the parameters' own
 * (checkpoints are by name).
 *
 * Compute is emulated with real work: 128x128x128 GEMMs through the kernels
 * table (gemm_lp in mixed precision), run until the pass's schedule says
 * the layer is done. Each layer's forward and backward time goes to one
 * tensor of it: its backward time to the first of its tensors backward
 * reaches, as the work done before that gradient is ready. The schedule is
 * kept from the start of each pass (a layer that ran long is made up by the
 * next ones), so a pass lasts what the profile says to within one GEMM
 * whatever else the machine runs, as a device of its own would; the hooks'
 * own time is part of it. How long a step is:
 *   compute_scale > 0  every measured time x compute_scale x the batch over
 *                      the profile's batch (another device, another batch);
 *   else               compute_ms per step in all, split over the layers in
 *                      proportion to their measured times.
 * Backward walks the tensors from the last to the first: each tensor's
 * share of GEMMs, then its pseudo-gradient, then the hook, so buckets
 * become ready when they would in the profiled network.
 *
 * Pseudo-gradients are deterministic: a fixed pattern of 65,536 values
 * uniform in (-1e-3, 1e-3) from the seed, times the loss scale, copied in at
 * a phase that depends on the tensor, the step and the rank (so ranks push
 * different gradients and every step differs). The loss is a dummy 0 and
 * accuracy 0: profiles measure time and bytes, not learning. Parameters
 * still go through the optimizer, initialized close to PyTorch's defaults
 * (matrices and kernels uniform(+-1/sqrt(fan_in)), 1-D weights 1, other
 * 1-D parameters 0). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/model.h"
#include "worker/profile_read.h"
#include "kernels/rng.h"

#define UNIT 128
#define PATTERN 65536
#define PREFIX "profile:"

typedef struct prof_model {
  gs_model base;
  double *fwd_t, *bwd_t;        /* seconds of emulated compute per tensor */
  double fwd_tail, bwd_tail;    /* after the last layer's forward, after the last gradient */
  float *a, *b, *c;             /* UNIT x UNIT operands, fp32 */
  void *alp, *blp;              /* ... in the compute dtype */
  float *pattern;               /* device, PATTERN values times pattern_scale */
  float *pattern_host;          /* unscaled */
  float pattern_scale;
} prof_model;

bool gs_profile_known(const char *name) {
  size_t len;
  return !strncmp(name, PREFIX, strlen(PREFIX)) || gs_profile_builtin(name, &len) != NULL;
}

static int load(const char *name, gs_profile *p, gs_err *e) {
  if (!strncmp(name, PREFIX, strlen(PREFIX))) {
    int rc = gs_profile_load(name + strlen(PREFIX), p, e);
    if (rc) gs_err_prefix(e, "--model %s", PREFIX);
    return rc;
  }
  size_t len = 0;
  const char *text = gs_profile_builtin(name, &len);
  if (!text) return GS_FAIL(e, GS_EINVAL, "--model %s: no such profile", name);
  return gs_profile_parse(text, len, name, p, e);
}

/* ---- the tensors ---- */

/* The parameters in reverse readiness order, each layer's times on one
 * tensor of it (forward on its first in the layout, backward on the first
 * backward reaches). */
static int build(gs_model *gm, const gs_profile *p, gs_err *e) {
  int n = p->nparams;
  bool *fwd_done = calloc((size_t)p->nlayers, sizeof *fwd_done);
  bool *bwd_done = calloc((size_t)p->nlayers, sizeof *bwd_done);
  int rc = fwd_done && bwd_done ? GS_OK : GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int i = 0; i < n && rc == GS_OK; i++) {
    const gs_prof_param *q = &p->params[p->ready[n - 1 - i]];
    size_t len = strlen(q->name);
    bool weight = len >= 7 && !strcmp(q->name + len - 7, ".weight");
    bool uniform = q->ndim >= 2;
    float v = uniform ? 1.0f / sqrtf((float)(q->count / (size_t)q->shape[0]))
                      : weight ? 1.0f : 0.0f;
    int t = gs_model_add_tensor(gm, q->name, q->ndim, q->shape, uniform, v, e);
    rc = t < 0 ? t : GS_OK;
    if (rc == GS_OK && !fwd_done[q->layer]) {
      fwd_done[q->layer] = true;
      gm->tensors[t].fwd_s = p->layers[q->layer].fwd_s;
    }
  }
  for (int i = n - 1; i >= 0 && rc == GS_OK; i--) {
    const gs_prof_param *q = &p->params[p->ready[n - 1 - i]];
    const gs_prof_layer *l = &p->layers[q->layer];
    if (bwd_done[q->layer]) continue;
    bwd_done[q->layer] = true;
    gm->tensors[i].bwd_s = l->bwd_s;
    gm->tensors[i].macs = l->macs > 0 ? l->macs : 0;
  }
  free(fwd_done);
  free(bwd_done);
  return rc;
}

/* ---- emulated compute ---- */

static void unit_gemm(prof_model *m) {
  gs_kernels *k = m->base.k;
  if (m->base.compute == GS_F32)
    k->gemm(k, false, false, UNIT, UNIT, UNIT, 1.0f, m->a, UNIT, m->b, UNIT, 0.0f, m->c, UNIT);
  else
    k->gemm_lp(k, m->base.compute, false, false, UNIT, UNIT, UNIT, 1.0f, m->alp, UNIT, m->blp,
               UNIT, 0.0f, m->c, UNIT);
}

/* The step's seconds over the tensors in proportion to the measured times
 * (the tails apart). */
static void split_time(prof_model *m, const gs_profile *p, double step_s) {
  gs_model *gm = &m->base;
  double total = p->fwd_tail_s + p->bwd_tail_s;
  for (int i = 0; i < gm->ntensors; i++) total += gm->tensors[i].fwd_s + gm->tensors[i].bwd_s;
  double f = step_s / total;
  for (int i = 0; i < gm->ntensors; i++) {
    m->fwd_t[i] = gm->tensors[i].fwd_s * f;
    m->bwd_t[i] = gm->tensors[i].bwd_s * f;
  }
  m->fwd_tail = p->fwd_tail_s * f;
  m->bwd_tail = p->bwd_tail_s * f;
}

/* GEMMs until `upto` seconds of the pass that began at t0 have gone */
static int work_until(prof_model *m, double t0, double upto, gs_err *e) {
  gs_kernels *k = m->base.k;
  while (gs_now() - t0 < upto) {
    unit_gemm(m);
    GS_TRY(k->sync(k, e));
  }
  return GS_OK;
}

static int prof_forward(gs_model *gm, const float *params, int batch, float *loss, int *correct,
                        gs_err *e) {
  prof_model *m = (prof_model *)gm;
  double t0 = gs_now(), upto = 0;
  for (int i = 0; i < gm->ntensors; i++) {
    upto += m->fwd_t[i];
    GS_TRY(work_until(m, t0, upto, e));
  }
  GS_TRY(work_until(m, t0, upto + m->fwd_tail, e));
  if (loss) *loss = 0.0f;
  if (correct) *correct = 0;
  return gm->k->sync(gm->k, e);
}

static int set_pattern_scale(prof_model *m, float scale, gs_err *e) {
  gs_kernels *k = m->base.k;
  float *tmp = malloc(PATTERN * sizeof(float));
  if (!tmp) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int i = 0; i < PATTERN; i++) tmp[i] = m->pattern_host[i] * scale;
  k->to_device(k, m->pattern, tmp, PATTERN * sizeof(float));
  int rc = k->sync(k, e);
  free(tmp);
  if (rc == 0) m->pattern_scale = scale;
  return rc;
}

static int prof_backward(gs_model *gm, const float *params, float *grads, int batch, float scale,
                         gs_grad_hook hook, void *ctx, gs_err *e) {
  prof_model *m = (prof_model *)gm;
  gs_kernels *k = gm->k;
  if (scale != m->pattern_scale) GS_TRY(set_pattern_scale(m, scale, e));
  double t0 = gs_now(), upto = 0;
  for (int i = gm->ntensors - 1; i >= 0; i--) {
    const gs_tensor *t = &gm->tensors[i];
    upto += m->bwd_t[i];
    GS_TRY(work_until(m, t0, upto, e));
    size_t phase = (size_t)((t->offset * 2654435761ull + (uint64_t)gm->step * 7919ull +
                             (uint64_t)gm->rank * 104729ull) % PATTERN);
    for (size_t done = 0; done < t->count;) {
      size_t n = PATTERN - phase;
      if (n > t->count - done) n = t->count - done;
      k->copy(k, grads + t->offset + done, m->pattern + phase, n * sizeof(float));
      done += n;
      phase = 0;
    }
    GS_TRY(k->sync(k, e));
    if (hook) GS_TRY(hook(ctx, i, e));
  }
  GS_TRY(work_until(m, t0, upto + m->bwd_tail, e));
  return k->sync(k, e);
}

static void prof_destroy(gs_model *gm) {
  prof_model *m = (prof_model *)gm;
  gs_kernels *k = gm->k;
  k->release(k, m->a);
  k->release(k, m->b);
  k->release(k, m->c);
  k->release(k, m->alp);
  k->release(k, m->blp);
  k->release(k, m->pattern);
  free(m->pattern_host);
  free(m->fwd_t);
  free(m->bwd_t);
  free(gm->tensors);
  free(m);
}

static const gs_model_ops prof_ops = {prof_forward, prof_backward, prof_destroy};

/* the GEMM operands, the gradient pattern and the times per tensor */
static int make_buffers(prof_model *m, const char *name, uint64_t seed, gs_err *e) {
  gs_model *gm = &m->base;
  gs_kernels *k = gm->k;
  size_t esz = gs_dtype_size(gm->compute);
  m->fwd_t = calloc((size_t)gm->ntensors, sizeof(double));
  m->bwd_t = calloc((size_t)gm->ntensors, sizeof(double));
  m->pattern_host = malloc(PATTERN * sizeof(float));
  m->a = k->alloc(k, UNIT * UNIT * sizeof(float));
  m->b = k->alloc(k, UNIT * UNIT * sizeof(float));
  m->c = k->alloc(k, UNIT * UNIT * sizeof(float));
  m->alp = k->alloc(k, UNIT * UNIT * esz);
  m->blp = k->alloc(k, UNIT * UNIT * esz);
  m->pattern = k->alloc(k, PATTERN * sizeof(float));
  GS_TRY(k->sync(k, e));
  if (!m->fwd_t || !m->bwd_t || !m->pattern_host || !m->a || !m->b || !m->c || !m->alp ||
      !m->blp || !m->pattern)
    return GS_FAIL(e, GS_ENOMEM, "out of memory for the %s profile", name);
  gs_rng r;
  gs_rng_seed(&r, seed, GS_STREAM_PROFILE);
  float *tmp = malloc(UNIT * UNIT * sizeof(float));
  if (!tmp) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int i = 0; i < UNIT * UNIT; i++) tmp[i] = gs_rng_uniform(&r) - 0.5f;
  k->to_device(k, m->a, tmp, UNIT * UNIT * sizeof(float));
  k->to_device(k, m->b, tmp, UNIT * UNIT * sizeof(float));
  k->convert(k, gm->compute, m->alp, GS_F32, m->a, UNIT * UNIT);
  k->convert(k, gm->compute, m->blp, GS_F32, m->b, UNIT * UNIT);
  free(tmp);
  for (int i = 0; i < PATTERN; i++) m->pattern_host[i] = 1e-3f * (2.0f * gs_rng_uniform(&r) - 1.0f);
  m->pattern_scale = 0.0f;  /* set on first use */
  return k->sync(k, e);
}

/* the step's emulated compute in seconds, and the model's description */
static int plan_compute(prof_model *m, const gs_profile *p, const char *name, double compute_ms,
                        double compute_scale, double *step_s, gs_err *e) {
  gs_model *gm = &m->base;
  double measured = gm->prof_fwd_s + gm->prof_bwd_s; /* per sample */
  if (compute_scale > 0) {
    *step_s = measured * gm->max_batch * compute_scale;
    if (!(*step_s <= 1e3))
      return GS_FAIL(e, GS_EINVAL, "--compute-scale %g: %.3g s of emulated compute per step of "
                     "%d samples (the profile measured %.3g s at batch %d); at most 1000 s",
                     compute_scale, *step_s, gm->max_batch, measured * p->batch, p->batch);
    snprintf(gm->desc, sizeof gm->desc, "%s (profile, %.1f ms of emulated compute: measured x %g "
             "at batch %d)", name, *step_s * 1e3, compute_scale, gm->max_batch);
  } else {
    *step_s = compute_ms * 1e-3;
    snprintf(gm->desc, sizeof gm->desc, "%s (profile, %.1f ms of emulated compute)", name,
             compute_ms);
  }
  return GS_OK;
}

int gs_model_create_scaled(const char *name, gs_kernels *k, int max_batch, gs_dtype compute,
                           double compute_ms, double compute_scale, uint64_t seed, gs_model **out,
                           gs_err *e) {
  *out = NULL;
  if (!(compute_ms >= 0) || compute_ms > 1e6)
    return GS_FAIL(e, GS_EINVAL, "--compute-ms %g: must be between 0 and 1e6", compute_ms);
  if (!(compute_scale >= 0) || compute_scale > 1e6)
    return GS_FAIL(e, GS_EINVAL, "--compute-scale %g: must be between 0 and 1e6", compute_scale);
  gs_profile p;
  GS_TRY(load(name, &p, e));
  prof_model *m = calloc(1, sizeof *m);
  if (!m) {
    gs_profile_free(&p);
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  gs_model *gm = &m->base;
  gm->ops = &prof_ops;
  gm->k = k;
  gm->compute = compute;
  gm->max_batch = max_batch;
  gm->classes = 1;
  gm->prof_batch = p.batch;
  gm->prof_fwd_s = p.fwd_tail_s / p.batch;
  gm->prof_bwd_s = p.bwd_tail_s / p.batch;
  for (int i = 0; i < p.nlayers; i++) {
    gm->prof_fwd_s += p.layers[i].fwd_s / p.batch;
    gm->prof_bwd_s += p.layers[i].bwd_s / p.batch;
  }
  double step_s = 0;
  int rc = build(gm, &p, e);
  if (rc == 0) rc = plan_compute(m, &p, name, compute_ms, compute_scale, &step_s, e);
  if (rc == 0) rc = make_buffers(m, name, seed, e);
  if (rc == 0 && step_s > 0) split_time(m, &p, step_s);
  gs_profile_free(&p);
  if (rc) {
    prof_destroy(gm);
    return rc;
  }
  *out = gm;
  return GS_OK;
}

int gs_model_create_profile(const char *name, gs_kernels *k, int max_batch, gs_dtype compute,
                            double compute_ms, uint64_t seed, gs_model **out, gs_err *e) {
  return gs_model_create_scaled(name, k, max_batch, compute, compute_ms, 0, seed, out, e);
}
