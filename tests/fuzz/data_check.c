/* data_check.c: opening a dataset and checking what was accepted, shared
 * by the IDX and CIFAR-10 harnesses (fuzz.h). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "worker/data.h"

gs_dataset *fuzz_open_dataset(const char *spec, const gs_data_want *want, const char *what) {
  gs_dataset *d = NULL;
  gs_err e = {0};
  int rc = gs_data_open(spec, want, &d, &e);
  fuzz_verdict(rc, &e, what);
  FUZZ_CHECK((rc == 0) == (d != NULL), "%s: rc %d with dataset %p", what, rc, (void *)d);
  return d;
}

void fuzz_check_dataset(const gs_dataset *d, int64_t n, int c, int h, int w,
                        const uint8_t *pixels, const uint8_t *labels, int classes) {
  FUZZ_CHECK(n >= 1, "accepted a dataset of %lld samples", (long long)n);
  FUZZ_CHECK(d->n == n && d->c == c && d->h == h && d->w == w,
             "read %lld samples of %dx%dx%d, the file holds %lld of %dx%dx%d", (long long)d->n,
             d->c, d->h, d->w, (long long)n, c, h, w);
  size_t dim = (size_t)c * h * w;
  FUZZ_CHECK(d->dim == dim, "dim %zu, not %zu", d->dim, dim);
  FUZZ_CHECK(!memcmp(d->pixels, pixels, (size_t)n * dim), "pixels differ from the file%s", "");
  for (int64_t i = 0; i < n; i++) {
    FUZZ_CHECK(d->labels[i] == labels[i] && d->labels[i] >= 0 && d->labels[i] < classes,
               "sample %lld: label %d, the file says %u (%d classes)", (long long)i,
               d->labels[i], labels[i], classes);
  }
  /* the first and the last sample, batched */
  int64_t idx[2] = {0, n - 1};
  float *x = malloc(2 * dim * sizeof *x);
  int32_t y[2];
  FUZZ_CHECK(x != NULL, "out of memory%s", "");
  gs_data_batch(d, idx, 2, x, y);
  for (int s = 0; s < 2; s++) {
    FUZZ_CHECK(y[s] == labels[idx[s]], "batched label %d of sample %lld", y[s],
               (long long)idx[s]);
    for (size_t j = 0; j < dim; j++)
      FUZZ_CHECK(x[(size_t)s * dim + j] == (float)pixels[(size_t)idx[s] * dim + j] / 255.0f,
                 "batched pixel %zu of sample %lld", j, (long long)idx[s]);
  }
  free(x);
}
