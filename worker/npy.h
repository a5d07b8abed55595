/* npy.h: NumPy .npy files of float32 tensors (internal to worker/).
 *
 * Written as format 1.0: the magic "\x93NUMPY", version 1.0, a little-endian
 * uint16 header length, and a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (6, 3, 5, 5), }
 * padded with spaces and a newline so the data starts at a multiple of 64
 * bytes, then the data in C order. numpy.load and torch (via numpy) read it.
 * The reader takes versions 1.0, 2.0 and 3.0, and checks the dtype, the
 * order and the shape against what the caller expects, naming the file. */
#ifndef GS_NPY_H
#define GS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define GS_NPY_MAXDIM 8

/* Write data (count = product of shape) to path and fsync it. */
int gs_npy_write(const char *path, const float *data, int ndim, const int64_t *shape, gs_err *e);
/* Read a '<f4' C-order array whose shape must equal (ndim, shape). */
int gs_npy_read(const char *path, float *data, int ndim, const int64_t *shape, gs_err *e);
/* Header only: the shape of a float32 array (for tools and tests). */
int gs_npy_shape(const char *path, int *ndim, int64_t shape[GS_NPY_MAXDIM], gs_err *e);

#endif
