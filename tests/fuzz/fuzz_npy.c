/* fuzz_npy.c: the .npy reader (worker/npy.h) on arbitrary file contents.
 *
 * The input is the file. When gs_npy_shape accepts it, the shape must
 * describe exactly the bytes after the header (computed here without
 * overflow), gs_npy_read with that shape must return those bytes, and a
 * read with a different shape must be refused with a message. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "worker/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_file f;
  fuzz_file_open(&f, data, size);
  int ndim = -1;
  int64_t shape[GS_NPY_MAXDIM];
  gs_err e = {0};
  int rc = gs_npy_shape(f.path, &ndim, shape, &e);
  fuzz_verdict(rc, &e, "gs_npy_shape");
  if (rc == 0) {
    FUZZ_CHECK(ndim >= 0 && ndim <= GS_NPY_MAXDIM, "%d dimensions", ndim);
    size_t count = 1;
    bool fits = true;
    for (int i = 0; i < ndim; i++) {
      FUZZ_CHECK(shape[i] >= 0, "dimension %d is %lld", i, (long long)shape[i]);
      fits = fits && !__builtin_mul_overflow(count, (size_t)shape[i], &count);
    }
    size_t bytes = 0;
    fits = fits && !__builtin_mul_overflow(count, sizeof(float), &bytes);
    FUZZ_CHECK(fits && bytes <= size, "accepted a shape of more data than the %zu-byte file holds",
               size);
    float *buf = malloc(bytes ? bytes : 1);
    FUZZ_CHECK(buf != NULL, "out of memory for %zu bytes", bytes);
    gs_err e2 = {0};
    rc = gs_npy_read(f.path, buf, ndim, shape, &e2);
    FUZZ_CHECK(rc == 0, "gs_npy_shape accepted the file but gs_npy_read refused it: %s", e2.msg);
    FUZZ_CHECK(!bytes || !memcmp(buf, data + size - bytes, bytes),
               "gs_npy_read returned other bytes than the file's last %zu", bytes);
    /* the same file read as another shape */
    int64_t other[GS_NPY_MAXDIM + 1];
    memcpy(other, shape, sizeof shape);
    int ondim = ndim;
    if (ndim > 0) other[0] = shape[0] > 0 ? shape[0] - 1 : 1;
    else other[ondim++] = 1;
    gs_err e3 = {0};
    rc = gs_npy_read(f.path, buf, ondim, other, &e3);
    FUZZ_CHECK(rc < 0, "gs_npy_read accepted a shape that differs from the header%s", "");
    fuzz_check_err(rc, &e3, "gs_npy_read with another shape");
    FUZZ_CHECK(strstr(e3.msg, "shape"), "a shape mismatch that does not say so: %s", e3.msg);
    free(buf);
  }
  fuzz_file_close(&f);
  return 0;
}
