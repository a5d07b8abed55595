/* data.h: datasets held in memory as bytes, and batches made of them
 * (internal to worker/).
 *
 * Specs (the --data flag):
 *   synthetic                   class-conditional blobs, deterministic from the
 *                               seed, shaped for the model (see data.c)
 *   idx:IMAGES,LABELS           MNIST-family IDX files (magic 0x803 or 0x804
 *                               for unsigned-byte images, 0x801 for labels)
 *   cifar10:FILE[,FILE...]      CIFAR-10 binary batches: records of one label
 *                               byte and 3072 pixel bytes (CHW, 32x32)
 * Every sample is stored as bytes and becomes float byte/255 when batched,
 * as torchvision's ToTensor does (no mean/std normalization).
 *
 * Every header, size and label is checked when the data is opened; an error
 * names the file, the record and what is wrong. */
#ifndef GS_DATA_H
#define GS_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* What the model takes. An image model (flat false) needs exactly c x h x w
 * samples; a flat one (an MLP) any shape with c*h*w features. */
typedef struct gs_data_want {
  int c, h, w;
  bool flat;
  int classes;           /* labels must be below this */
  int64_t synthetic_n;   /* samples of the synthetic set */
  uint64_t seed;
} gs_data_want;

typedef struct gs_dataset {
  int64_t n;
  int c, h, w;           /* per-sample shape as stored */
  size_t dim;            /* c*h*w */
  uint8_t *pixels;       /* n * dim */
  int32_t *labels;       /* n, each < classes */
  char desc[320];        /* one line for logs */
} gs_dataset;

int gs_data_open(const char *spec, const gs_data_want *want, gs_dataset **out, gs_err *e);
/* x[i*dim + j] = pixel/255 and y[i] = label of sample idx[i], host memory. */
void gs_data_batch(const gs_dataset *d, const int64_t *idx, int count, float *x, int32_t *y);
void gs_data_free(gs_dataset *d);

#endif
