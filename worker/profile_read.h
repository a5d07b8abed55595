/* profile_read.h: a network's profile as tools/profile_model.py writes it
 * (JSON, "gradsync-profile" version 1), read and checked (internal to
 * worker/; profile.c trains it, tests/fuzz/fuzz_profile.c feeds it).
 *
 * What a profile holds (docs/model.md, "Bring your own model"): the
 * trainable parameters in state_dict order (name, shape, element count,
 * dtype, owning layer); the layers, each with the forward and backward
 * time measured at the profile's batch and its multiply-adds per sample
 * where counted; what the step spent after the last layer's forward and
 * after the last gradient; and the order in which backward made the
 * gradients ready, a permutation of the parameters. */
#ifndef GS_WORKER_PROFILE_READ_H
#define GS_WORKER_PROFILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct gs_prof_param {
  char name[64];
  int ndim;                 /* 0 to 4 */
  int64_t shape[4];
  size_t count;             /* the product of shape, as the file's "numel" says */
  int layer;                /* index into layers */
  char dtype[16];           /* float32, float16, bfloat16, float64 */
} gs_prof_param;

typedef struct gs_prof_layer {
  char name[128];
  double fwd_s, bwd_s;      /* >= 0, at the profile's batch */
  double macs;              /* per sample; < 0: not counted */
} gs_prof_layer;

typedef struct gs_profile {
  char model[128];          /* what was profiled: torchvision:vgg16, net.py:Net, ... */
  char device[128];         /* where: environment.device_name (or "") */
  int batch;
  int nparams, nlayers;
  gs_prof_param *params;    /* state_dict order */
  gs_prof_layer *layers;
  int *ready;               /* nparams: parameter indices, first ready first */
  double fwd_tail_s, bwd_tail_s;
  size_t total;             /* elements of all parameters */
} gs_profile;

/* what: the source in messages (a path, or a built-in's name). Every
 * refusal is GS_EINVAL naming the field ("parameters[3].shape", "ready_order
 * [7]"); *out is left empty then. */
int gs_profile_parse(const char *text, size_t len, const char *what, gs_profile *out, gs_err *e);
int gs_profile_load(const char *path, gs_profile *out, gs_err *e);
void gs_profile_free(gs_profile *p);

/* The profiles shipped inside the program (profiles_builtin.c, made from
 * worker/profiles/NAME.json): the text of `name`, or NULL. */
const char *gs_profile_builtin(const char *name, size_t *len);

#endif
