/* fuzz_topk.c: a top-k push's raw frame as the ps server reads it
 * (compress/compress.h gs_topk_unpack).
 *
 * Input: u32 count (the bucket, taken mod 4096 + 1), u32 k (mod count + 2:
 * one more than the bucket may hold), then the frame. Accepted exactly when
 * an independent reading says so: the frame's size is gs_topk_bytes(k,
 * count) (k <= count) and, sparse, every index is below count and above the
 * one before. Accepted, the dense bucket holds each value at its index and
 * zeros elsewhere (the dense form: the frame as it is). */
#include <stdlib.h>
#include <string.h>

#include "compress/compress.h"
#include "fuzz.h"

static uint32_t u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  size_t count = u32(data) % 4096 + 1, k = u32(data + 4) % (count + 2);
  const uint8_t *frame = data + 8;
  size_t bytes = size - 8;
  bool sparse = k <= count && gs_topk_sparse(k, count);
  bool ok = k <= count && bytes == gs_topk_bytes(k, count);
  for (size_t j = 0; ok && sparse && j < k; j++) {
    uint32_t i = u32(frame + 4 * j);
    ok = i < count && (j == 0 || i > u32(frame + 4 * (j - 1)));
  }
  float *dense = malloc(count * sizeof *dense);
  FUZZ_CHECK(dense != NULL, "out of memory%s", "");
  gs_err e = {0};
  int rc = gs_topk_unpack(frame, bytes, k, count, dense, &e);
  fuzz_verdict(rc, &e, "topk");
  FUZZ_CHECK((rc == 0) == ok, "count %zu k %zu bytes %zu: rc %d, expected %s (%s)", count, k,
             bytes, rc, ok ? "accepted" : "refused", e.msg);
  if (rc == 0 && sparse) {
    float *want = calloc(count, sizeof *want);
    FUZZ_CHECK(want != NULL, "out of memory%s", "");
    for (size_t j = 0; j < k; j++)
      memcpy(&want[u32(frame + 4 * j)], frame + 4 * k + 4 * j, sizeof(float));
    FUZZ_CHECK(!memcmp(want, dense, count * sizeof *dense), "dense bucket differs%s", "");
    free(want);
  } else if (rc == 0) {
    FUZZ_CHECK(!memcmp(frame, dense, count * sizeof *dense), "dense form differs%s", "");
  }
  free(dense);
  return 0;
}
