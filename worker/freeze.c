/* freeze.c: parameters that do not train (--freeze LAYER[,LAYER...]), as
 * PyTorch's requires_grad=False under DDP: DDP builds its buckets over the
 * parameters that require a gradient, so a frozen one never travels, is
 * never reduced and never updated; it keeps its initial bits, and the loss
 * and every other parameter are what one process computes with it frozen.
 *
 * Backends own the parameters they are given whole (the optimizer state,
 * the ps' key ranges, a server's Init), so a frozen layer is not a hole in
 * their buffer: they are given a compact copy of the parameters that train
 * (t->tparams, t->tgrads, in model order), never the frozen ones. Backward
 * still writes every gradient into the model's buffer; as each trainable
 * tensor's gradient is final it is copied into the compact one before its
 * bucket can leave (DDP copies gradients into its buckets the same way),
 * and the compact parameters are copied back into the model's buffer
 * whenever a backend may have changed them (after begin_step and
 * end_step), before anything reads them. Without --freeze nothing here
 * runs: the backends get the model's own buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/trainer.h"

/* tensor name n belongs to layer l: "fc1" holds fc1.weight and fc1.bias,
 * "features.0.weight" names one tensor */
static bool in_layer(const char *n, const char *l, size_t len) {
  return !strncmp(n, l, len) && (n[len] == 0 || n[len] == '.');
}

/* "fc1, fc2, fc3": the model's layers (its tensors' names without the last
 * part), as --freeze takes them, for a message */
static void layers_of(const gs_model *m, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = 0;
  char prev[64] = "";
  for (int i = 0; i < m->ntensors && used + 8 < cap; i++) {
    char l[64];
    snprintf(l, sizeof l, "%s", m->tensors[i].name);
    char *dot = strrchr(l, '.');
    if (dot) *dot = 0;
    if (!strcmp(l, prev)) continue;
    snprintf(prev, sizeof prev, "%s", l);
    if (used + strlen(l) + 8 >= cap) {
      snprintf(buf + used, cap - used, ", ...");
      return;
    }
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", l);
  }
}

/* which tensors spec freezes (frozen[i]), each name of it matching at
 * least one, and at least one tensor left to train */
static int mark(const gs_model *m, const char *model_spec, const char *spec, bool *frozen,
                gs_err *e) {
  const char *p = spec;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int hits = 0;
    for (int i = 0; len && i < m->ntensors; i++)
      if (in_layer(m->tensors[i].name, p, len)) {
        frozen[i] = true;
        hits++;
      }
    if (!hits) {
      char layers[400];
      layers_of(m, layers, sizeof layers);
      return GS_FAIL(e, GS_EINVAL, "--freeze %s: %s has no layer '%.*s' (its layers: %s)",
                     spec, model_spec, (int)len, p, layers);
    }
    p = end ? end + 1 : p + len;
  }
  size_t left = 0;
  for (int i = 0; i < m->ntensors; i++) left += frozen[i] ? 0 : m->tensors[i].count;
  if (left == 0)
    return GS_FAIL(e, GS_EINVAL, "--freeze %s: every parameter of %s would be frozen, and "
                   "nothing would train", spec, model_spec);
  return GS_OK;
}

int gs_freeze_check(const char *model, const char *spec, gs_err *e) {
  if (!spec || !*spec) return GS_OK;
  gs_kernels *k = gs_kernels_cpu(1, e);
  if (!k) return e && e->code ? e->code : GS_EDEVICE;
  gs_model *m = NULL;
  int rc = gs_model_create(model, k, 1, GS_F32, 0, 1, &m, e);
  bool *frozen = rc == GS_OK ? calloc((size_t)m->ntensors, sizeof *frozen) : NULL;
  if (rc == GS_OK && !frozen) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (rc == GS_OK) rc = mark(m, model, spec, frozen, e);
  free(frozen);
  gs_model_destroy(m);
  k->destroy(k);
  return rc;
}

int gs_freeze_setup(gs_trainer *t, const char *spec, gs_err *e) {
  if (!spec || !*spec) return GS_OK;
  const gs_model *m = t->m;
  gs_kernels *k = t->k;
  t->frozen = calloc((size_t)m->ntensors, sizeof *t->frozen);
  t->toff = calloc((size_t)m->ntensors, sizeof *t->toff);
  if (!t->frozen || !t->toff) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  GS_TRY(mark(m, t->model_spec, spec, t->frozen, e));
  size_t n = 0;
  for (int i = 0; i < m->ntensors; i++) {
    t->toff[i] = n;
    if (!t->frozen[i]) n += m->tensors[i].count;
  }
  t->ntrain = n;
  t->tparams = k->alloc(k, n * sizeof(float));
  t->tgrads = k->alloc(k, n * sizeof(float));
  if (!t->tparams || !t->tgrads) {
    k->sync(k, e);
    return GS_FAIL(e, GS_ENOMEM, "out of memory for %zu parameters that train", n);
  }
  for (int i = 0; i < m->ntensors; i++)
    if (!t->frozen[i])
      k->copy(k, t->tparams + t->toff[i], t->params + m->tensors[i].offset,
              m->tensors[i].count * sizeof(float));
  return k->sync(k, e);
}

void gs_freeze_grad(gs_trainer *t, int i) {
  const gs_tensor *x = &t->m->tensors[i];
  t->k->copy(t->k, t->tgrads + t->toff[i], t->grads + x->offset, x->count * sizeof(float));
}

void gs_freeze_params_out(const gs_trainer *t) {
  if (!t->tparams) return;
  const gs_model *m = t->m;
  for (int i = 0; i < m->ntensors; i++)
    if (!t->frozen[i])
      t->k->copy(t->k, t->params + m->tensors[i].offset, t->tparams + t->toff[i],
                 m->tensors[i].count * sizeof(float));
}

void gs_freeze_free(gs_trainer *t) {
  if (t->k) {
    t->k->release(t->k, t->tparams);
    t->k->release(t->k, t->tgrads);
  }
  free(t->frozen);
  free(t->toff);
}
