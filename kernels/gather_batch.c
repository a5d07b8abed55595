/* gather_batch.c: a batch gathered from a dataset in host memory (kernels.h,
 * gs_gather_host): the CPU table's gather_batch, and the data part's host
 * copy for evaluation and its readers' tests. */
#include "kernels/elem.h"
#include "kernels/kernels.h"

void gs_gather_host(int count, size_t dim, const uint8_t *pixels, const int32_t *labels,
                    const int64_t *idx, float *x, int32_t *y) {
  for (int i = 0; i < count; i++) {
    const uint8_t *px = pixels + (size_t)idx[i] * dim;
    float *dst = x + (size_t)i * dim;
    for (size_t j = 0; j < dim; j++) dst[j] = gs_pixel1(px[j]);
    y[i] = labels[idx[i]];
  }
}
