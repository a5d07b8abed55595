/* dtype.c: names and sizes of the element types, and GradScaler's rule.
 * Both are tiny, device-independent, and used by every part. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

size_t gs_dtype_size(gs_dtype t) {
  switch (t) {
  case GS_F16: case GS_BF16: return 2;
  case GS_F64: return 8;
  default: return 4;
  }
}

const char *gs_dtype_name(gs_dtype t) {
  switch (t) {
  case GS_F16: return "fp16";
  case GS_BF16: return "bf16";
  case GS_F64: return "fp64";
  case GS_I32: return "int32";
  default: return "fp32";
  }
}

int gs_dtype_parse(const char *s) {
  if (!s) return -1;
  if (!strcmp(s, "fp32") || !strcmp(s, "f32") || !strcmp(s, "float32")) return GS_F32;
  if (!strcmp(s, "fp16") || !strcmp(s, "f16") || !strcmp(s, "float16") || !strcmp(s, "half"))
    return GS_F16;
  if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) return GS_BF16;
  return -1;
}

void gs_scaler_init(gs_scaler *s, float init_scale, bool dynamic) {
  s->scale = init_scale;
  s->growth = 2.0f;
  s->backoff = 0.5f;
  s->interval = 2000;
  s->clean = 0;
  s->dynamic = dynamic;
}

/* torch.cuda.amp.GradScaler.update() (_amp_update_scale_): on overflow
 * scale *= backoff and the clean-step counter restarts; after `interval`
 * clean steps in a row scale *= growth, unless that would be infinite, and
 * the counter restarts. */
bool gs_scaler_update(gs_scaler *s, bool found_nonfinite) {
  if (found_nonfinite) {
    if (s->dynamic) s->scale *= s->backoff;
    s->clean = 0;
    return true;
  }
  if (s->dynamic && ++s->clean >= s->interval) {
    float grown = s->scale * s->growth;
    if (isfinite(grown)) s->scale = grown;
    s->clean = 0;
  }
  return false;
}
