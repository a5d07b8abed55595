/* fuzz_idx.c: the IDX (MNIST family) reader of worker/data.h.
 *
 * Input: 5 bytes of what the model takes (c, h, w, classes, then bit 0
 * "flat" and bits 1-2 the spec's shape: idx:IMAGES,LABELS, one file,
 * three files, an empty first name), then two parts (fuzz.h): the images
 * file and the labels file. An accepted pair must hold exactly what its
 * headers say, every label below the model's classes, and the samples
 * must match the model's input. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "worker/data.h"

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  gs_data_want want = {.c = data[0], .h = data[1], .w = data[2], .classes = data[3],
                       .flat = data[4] & 1, .synthetic_n = 1, .seed = 1};
  int variant = (data[4] >> 1) & 3;
  fuzz_part parts[2] = {{0}};
  fuzz_split(data + 5, size - 5, parts, 2);
  fuzz_file img, lab;
  fuzz_file_open(&img, parts[0].data, parts[0].len);
  fuzz_file_open(&lab, parts[1].data, parts[1].len);
  char spec[160];
  switch (variant) {
  case 0: snprintf(spec, sizeof spec, "idx:%s,%s", img.path, lab.path); break;
  case 1: snprintf(spec, sizeof spec, "idx:%s", img.path); break;
  case 2: snprintf(spec, sizeof spec, "idx:%s,%s,%s", img.path, lab.path, lab.path); break;
  default: snprintf(spec, sizeof spec, "idx:,%s", lab.path); break;
  }
  gs_dataset *d = fuzz_open_dataset(spec, &want, "gs_data_open(idx)");
  if (d) {
    FUZZ_CHECK(variant == 0, "accepted the spec %s", spec);
    const uint8_t *ib = parts[0].data, *lb = parts[1].data;
    size_t il = parts[0].len, ll = parts[1].len;
    FUZZ_CHECK(il >= 16 && ll >= 8 && ib[3] >= 3 && ib[3] <= 4 && lb[3] == 1,
               "accepted files too short for their headers (%zu, %zu bytes)", il, ll);
    int nd = ib[3];
    size_t off = 4 + 4 * (size_t)nd;
    FUZZ_CHECK(il >= off, "an images file of %zu bytes, shorter than its header", il);
    uint32_t n = be32(ib + 4);
    int c = nd == 4 ? (int)be32(ib + 8) : 1;
    int h = (int)be32(ib + off - 8), w = (int)be32(ib + off - 4);
    FUZZ_CHECK(be32(lb + 4) == n && ll == 8 + (size_t)n,
               "%u images but a labels file of %zu bytes", n, ll);
    FUZZ_CHECK(il == off + (size_t)n * c * h * w, "an images file of %zu bytes for %u of %dx%dx%d",
               il, n, c, h, w);
    if (want.flat)
      FUZZ_CHECK((size_t)c * h * w == (size_t)want.c * want.h * want.w,
                 "%dx%dx%d samples for a model of %d inputs", c, h, w, want.c * want.h * want.w);
    else
      FUZZ_CHECK(c == want.c && h == want.h && w == want.w,
                 "%dx%dx%d samples for a model of %dx%dx%d", c, h, w, want.c, want.h, want.w);
    fuzz_check_dataset(d, n, c, h, w, ib + off, lb + 8, want.classes);
    gs_data_free(d);
  }
  fuzz_file_close(&img);
  fuzz_file_close(&lab);
  return 0;
}
