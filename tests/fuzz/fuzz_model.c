/* fuzz_model.c: the --model spec parser (worker/model.h: mlp:IN-H1-...-OUT,
 * lenet, the profiles) on arbitrary text.
 *
 * Input: one byte (bits 0-1 the compute dtype, bits 2-4 the batch - 1),
 * then the spec (up to the first NUL). Creation must succeed or fail with
 * a message; device allocations above 64 MiB are refused here, as a full
 * device would, so that huge specs test the out-of-memory path instead of
 * exhausting the fuzzer. An accepted mlp spec must be what an independent
 * reading of the documented grammar (decimal sizes 1..2^24 joined by '-',
 * at least two) says, with PyTorch's tensors; every accepted model's
 * tensors tile its parameter buffer; small models run one forward and
 * backward pass. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kernels/kernels.h"
#include "worker/model.h"

#define ALLOC_LIMIT ((size_t)64 << 20)

static gs_kernels *k;
static void *(*real_alloc)(gs_kernels *, size_t);

static void *bounded_alloc(gs_kernels *kk, size_t bytes) {
  return bytes > ALLOC_LIMIT ? NULL : real_alloc(kk, bytes);
}

/* The documented mlp grammar, read independently: the sizes, or -1. */
static int mlp_sizes(const char *s, long *n, int max) {
  int cnt = 0;
  for (;;) {
    if (!isdigit((unsigned char)*s) || cnt == max) return -1;
    long v = 0;
    while (isdigit((unsigned char)*s)) {
      v = v * 10 + (*s++ - '0');
      if (v > (1L << 24)) return -1;
    }
    if (v == 0) return -1;
    n[cnt++] = v;
    if (!*s) break;
    if (*s++ != '-') return -1;
  }
  return cnt >= 2 ? cnt : -1;
}

static void check_tensors(const gs_model *m) {
  FUZZ_CHECK(m->ntensors > 0, "a model without tensors%s", "");
  size_t off = 0;
  for (int i = 0; i < m->ntensors; i++) {
    const gs_tensor *t = &m->tensors[i];
    size_t count = 1;
    for (int j = 0; j < t->ndim; j++) {
      FUZZ_CHECK(t->shape[j] > 0, "%s: dimension %d is %lld", t->name, j, (long long)t->shape[j]);
      count *= (size_t)t->shape[j];
    }
    FUZZ_CHECK(t->name[0] && t->count == count && t->offset == off,
               "tensor %d '%s': %zu elements at %zu, expected %zu at %zu", i, t->name, t->count,
               t->offset, count, off);
    off += t->count;
  }
  FUZZ_CHECK(m->nparams == off, "nparams %zu, the tensors hold %zu", m->nparams, off);
}

static void check_mlp(const gs_model *m, const long *n, int cnt) {
  FUZZ_CHECK(m->flat && m->in_size == (size_t)n[0] && m->classes == n[cnt - 1] &&
                 m->ntensors == 2 * (cnt - 1),
             "mlp with %zu inputs, %d classes, %d tensors", m->in_size, m->classes, m->ntensors);
  for (int i = 1; i < cnt; i++) {
    const gs_tensor *w = &m->tensors[2 * (i - 1)], *b = w + 1;
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "fc%d.weight", i);
    snprintf(bn, sizeof bn, "fc%d.bias", i);
    FUZZ_CHECK(!strcmp(w->name, wn) && w->ndim == 2 && w->shape[0] == n[i] &&
                   w->shape[1] == n[i - 1] && !strcmp(b->name, bn) && b->ndim == 1 &&
                   b->shape[0] == n[i],
               "layer %d: %s %lldx%lld, %s %lld", i, w->name, (long long)w->shape[0],
               (long long)w->shape[1], b->name, (long long)b->shape[0]);
  }
}

/* One forward and backward pass on zero inputs, every label 0. */
static void run_once(gs_model *m, int batch) {
  float *params = malloc(m->nparams * sizeof(float));
  float *grads = malloc(m->nparams * sizeof(float));
  FUZZ_CHECK(params && grads, "out of memory%s", "");
  gs_model_init_params(m, 1, params);
  float loss = NAN;
  int correct = -1;
  gs_err e = {0};
  int rc = m->ops->forward(m, params, batch, &loss, &correct, &e);
  if (rc == 0) rc = m->ops->backward(m, params, grads, batch, 1.0f, NULL, NULL, &e);
  FUZZ_CHECK(rc == 0, "%s: a pass on zero inputs failed: %s", m->desc, e.msg);
  FUZZ_CHECK(isfinite(loss) && correct >= 0 && correct <= batch, "%s: loss %g, %d correct",
             m->desc, loss, correct);
  free(params);
  free(grads);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!k) {
    gs_err e = {0};
    k = gs_kernels_cpu(1, &e);
    FUZZ_CHECK(k != NULL, "no CPU kernels: %s", e.msg);
    real_alloc = k->alloc;
    k->alloc = bounded_alloc;
  }
  gs_dtype dt = (gs_dtype)(data[0] & 3);
  if (dt > GS_BF16) dt = GS_F32;
  int batch = 1 + ((data[0] >> 2) & 7);
  char *spec = strndup((const char *)data + 1, size - 1);
  FUZZ_CHECK(spec != NULL, "out of memory%s", "");
  gs_model *m = NULL;
  gs_err e = {0};
  int rc = gs_model_create(spec, k, batch, dt, 0.0, 1, &m, &e);
  fuzz_verdict(rc, &e, "gs_model_create");
  FUZZ_CHECK((rc == 0) == (m != NULL), "rc %d with model %p", rc, (void *)m);
  long n[65];
  int cnt = strncmp(spec, "mlp:", 4) ? -1 : mlp_sizes(spec + 4, n, 64);
  if (m) {
    FUZZ_CHECK(!strncmp(spec, "mlp:", 4) ? cnt > 0 : (!strcmp(spec, "lenet") ||
                                                      gs_profile_known(spec)),
               "accepted the spec '%s'", spec);
    check_tensors(m);
    if (cnt > 0) check_mlp(m, n, cnt);
    if (m->in_size > 0 && m->nparams <= (1u << 16)) run_once(m, batch);
    gs_model_destroy(m);
  } else if (cnt > 0) {
    /* a valid mlp spec may only fail for want of memory */
    FUZZ_CHECK(rc == GS_ENOMEM, "refused the valid spec '%s': %s", spec, e.msg);
  }
  gs_err ke = {0};
  FUZZ_CHECK(k->sync(k, &ke) == 0, "the kernels keep an error: %s", ke.msg);
  free(spec);
  return 0;
}
