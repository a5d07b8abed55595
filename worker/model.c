/* model.c: the model a --model spec names (model.h): seq.c's layered
 * nets (mlp, lenet) or profile.c's profiles (built-in or profile:FILE),
 * both built on tensors.c's tensor list, so neither needs the other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/model.h"

void gs_model_destroy(gs_model *m) {
  if (m && m->ops) m->ops->destroy(m);
}

int gs_model_create(const char *spec, gs_kernels *k, int max_batch, gs_dtype compute,
                    double compute_ms, uint64_t seed, gs_model **out, gs_err *e) {
  *out = NULL;
  if (!spec) spec = "";
  if (!strncmp(spec, "mlp:", 4)) return gs_model_create_mlp(spec + 4, k, max_batch, compute, out, e);
  if (!strcmp(spec, "lenet")) return gs_model_create_lenet(k, max_batch, compute, out, e);
  if (gs_profile_known(spec))
    return gs_model_create_profile(spec, k, max_batch, compute, compute_ms, seed, out, e);
  return GS_FAIL(e, GS_EINVAL,
                 "--model %s: unknown model; use mlp:IN-H1-...-OUT (e.g. mlp:784-2048-2048-10), "
                 "lenet, resnet50, vgg16, bert-base, vgg11 or profile:FILE (tools/profile_model.py)",
                 spec);
}
