/* tensors.c: what every model shares (model.h): its tensors laid out back
 * to back in one flat buffer, and their PyTorch initialization from the
 * seed's init streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/model.h"
#include "kernels/rng.h"

int gs_model_add_tensor(gs_model *m, const char *name, int ndim, const int64_t *shape,
                        bool uniform, float bound_or_const, gs_err *e) {
  gs_tensor *t = realloc(m->tensors, (size_t)(m->ntensors + 1) * sizeof *t);
  if (!t) return GS_FAIL(e, GS_ENOMEM, "out of memory describing the model");
  m->tensors = t;
  t = &m->tensors[m->ntensors];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = ndim;
  t->count = 1;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->count *= (size_t)shape[i];
  }
  t->offset = m->nparams;
  t->init_uniform = uniform;
  if (uniform) t->init_bound = bound_or_const;
  else t->init_const = bound_or_const;
  m->nparams += t->count;
  return m->ntensors++;
}

void gs_model_init_params(const gs_model *m, uint64_t seed, float *host) {
  for (int i = 0; i < m->ntensors; i++) {
    const gs_tensor *t = &m->tensors[i];
    float *p = host + t->offset;
    if (!t->init_uniform) {
      for (size_t j = 0; j < t->count; j++) p[j] = t->init_const;
      continue;
    }
    gs_rng r;
    gs_rng_seed(&r, seed, GS_STREAM_INIT + (uint64_t)i);
    float b = t->init_bound;
    for (size_t j = 0; j < t->count; j++) p[j] = b * (2.0f * gs_rng_uniform(&r) - 1.0f);
  }
}
