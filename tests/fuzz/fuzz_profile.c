/* fuzz_profile.c: the profile reader (worker/profile_read.h: what
 * tools/profile_model.py writes, and `--model profile:FILE` reads) on
 * arbitrary text.
 *
 * Input: the profile file's bytes. The reader must accept or refuse with a
 * message. An independent reading of the same JSON says what must be
 * refused: a readiness order that is not a permutation of the parameters,
 * a negative time, a shape that does not multiply out to its numel. An
 * accepted profile must hold what its checks promise (counts that are the
 * products of the shapes, layers in range, a permutation, finite times),
 * and build a model through `profile:FILE` (a memfd) whose tensors are the
 * parameters, last ready first, tiling the buffer. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kernels/kernels.h"
#include "worker/model.h"
#include "worker/profile_read.h"

#define ALLOC_LIMIT ((size_t)64 << 20)

static gs_kernels *k;
static void *(*real_alloc)(gs_kernels *, size_t);

static void *bounded_alloc(gs_kernels *kk, size_t bytes) {
  return bytes > ALLOC_LIMIT ? NULL : real_alloc(kk, bytes);
}

/* The independent reading: true when the JSON shows a fault the reader must
 * refuse (ready_order not a permutation of the parameters, a negative
 * time, a shape whose product is not its numel). */
static bool must_refuse(const uint8_t *data, size_t size) {
  json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(j)) {
    json_decref(j);
    return j == NULL;  /* not JSON: refused; JSON but not an object: refused too */
  }
  bool bad = false;
  json_t *params = json_object_get(j, "parameters"), *order = json_object_get(j, "ready_order");
  size_t n = json_array_size(params);
  if (json_is_array(order) && n > 0) {
    bool *seen = calloc(n, 1);
    bad = json_array_size(order) != n;
    for (size_t i = 0; !bad && i < n; i++) {
      json_t *v = json_array_get(order, i);
      json_int_t x = json_integer_value(v);
      bad = !json_is_integer(v) || x < 0 || (size_t)x >= n || seen[x];
      if (!bad) seen[x] = 1;
    }
    free(seen);
  }
  for (size_t i = 0; i < n; i++) {
    json_t *p = json_array_get(params, i), *shape = json_object_get(p, "shape");
    json_t *numel = json_object_get(p, "numel");
    double prod = 1;
    for (size_t d = 0; d < json_array_size(shape); d++)
      prod *= json_number_value(json_array_get(shape, d));
    if (json_is_array(shape) && json_is_integer(numel) && prod >= 1 && prod < 1e15 &&
        prod != (double)json_integer_value(numel))
      bad = true;
  }
  json_t *layers = json_object_get(j, "layers");
  for (size_t i = 0; i < json_array_size(layers); i++) {
    json_t *l = json_array_get(layers, i);
    json_t *f = json_object_get(l, "forward_s"), *b = json_object_get(l, "backward_s");
    if ((json_is_number(f) && json_number_value(f) < 0) ||
        (json_is_number(b) && json_number_value(b) < 0))
      bad = true;
  }
  json_t *ft = json_object_get(j, "forward_tail_s"), *bt = json_object_get(j, "backward_tail_s");
  if ((json_is_number(ft) && json_number_value(ft) < 0) ||
      (json_is_number(bt) && json_number_value(bt) < 0))
    bad = true;
  json_decref(j);
  return bad;
}

static void check_accepted(const gs_profile *p) {
  FUZZ_CHECK(p->nparams >= 1 && p->nlayers >= 1 && p->batch >= 1, "%d parameters, %d layers",
             p->nparams, p->nlayers);
  bool *seen = calloc((size_t)p->nparams, 1);
  FUZZ_CHECK(seen != NULL, "out of memory%s", "");
  size_t total = 0;
  for (int i = 0; i < p->nparams; i++) {
    const gs_prof_param *q = &p->params[i];
    size_t c = 1;
    for (int d = 0; d < q->ndim; d++) c *= (size_t)q->shape[d];
    FUZZ_CHECK(q->ndim >= 0 && q->ndim <= 4 && c == q->count && q->name[0],
               "parameter %d: %zu elements, its shape %zu", i, q->count, c);
    FUZZ_CHECK(q->layer >= 0 && q->layer < p->nlayers, "parameter %d in layer %d of %d", i,
               q->layer, p->nlayers);
    total += q->count;
    int r = p->ready[i];
    FUZZ_CHECK(r >= 0 && r < p->nparams && !seen[r], "ready[%d] = %d repeats or is out of range",
               i, r);
    seen[r] = 1;
  }
  free(seen);
  FUZZ_CHECK(total == p->total, "total %zu, the parameters hold %zu", p->total, total);
  for (int l = 0; l < p->nlayers; l++)
    FUZZ_CHECK(isfinite(p->layers[l].fwd_s) && p->layers[l].fwd_s >= 0 &&
                   isfinite(p->layers[l].bwd_s) && p->layers[l].bwd_s >= 0,
               "layer %d: %g s, %g s", l, p->layers[l].fwd_s, p->layers[l].bwd_s);
}

/* the model profile:FILE builds: the parameters, last ready first */
static void check_model(const gs_profile *p, const uint8_t *data, size_t size) {
  fuzz_file f;
  fuzz_file_open(&f, data, size);
  char spec[64];
  snprintf(spec, sizeof spec, "profile:%s", f.path);
  gs_model *m = NULL;
  gs_err e = {0};
  int rc = gs_model_create(spec, k, 1, GS_F32, 0.0, 1, &m, &e);
  fuzz_file_close(&f);
  fuzz_check_err(rc, &e, "gs_model_create(profile:)");
  /* the reader accepted it, so only memory may be missing */
  FUZZ_CHECK(rc == 0 || rc == GS_ENOMEM, "an accepted profile builds no model: %s", e.msg);
  if (!m) return;
  FUZZ_CHECK(m->ntensors == p->nparams, "%d tensors of %d parameters", m->ntensors, p->nparams);
  size_t off = 0;
  for (int i = 0; i < m->ntensors; i++) {
    const gs_tensor *t = &m->tensors[i];
    const gs_prof_param *q = &p->params[p->ready[p->nparams - 1 - i]];
    FUZZ_CHECK(!strcmp(t->name, q->name) && t->count == q->count && t->offset == off,
               "tensor %d: %s (%zu at %zu), expected %s (%zu at %zu)", i, t->name, t->count,
               t->offset, q->name, q->count, off);
    off += t->count;
  }
  FUZZ_CHECK(m->nparams == off, "nparams %zu, the tensors hold %zu", m->nparams, off);
  gs_model_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!k) {
    gs_err e = {0};
    k = gs_kernels_cpu(1, &e);
    FUZZ_CHECK(k != NULL, "no CPU kernels: %s", e.msg);
    real_alloc = k->alloc;
    k->alloc = bounded_alloc;
  }
  gs_profile p;
  gs_err e = {0};
  int rc = gs_profile_parse((const char *)data, size, "input", &p, &e);
  fuzz_verdict(rc, &e, "gs_profile_parse");
  if (rc == 0) {
    FUZZ_CHECK(!must_refuse(data, size), "accepted a profile with a fault%s", "");
    check_accepted(&p);
    check_model(&p, data, size);
    gs_profile_free(&p);
  }
  return 0;
}
