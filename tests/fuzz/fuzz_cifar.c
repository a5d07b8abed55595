/* fuzz_cifar.c: the CIFAR-10 binary reader of worker/data.h.
 *
 * Input: 2 bytes (the model's classes; then bits 0-1 its input: 3x32x32
 * images, 3072 flat inputs, or 1x28x28 images that no CIFAR file fits,
 * and bits 2-3 the number of files, 1 to 3, or 0 for an empty name in the
 * list), then the files as parts (fuzz.h). Accepted files must be whole
 * 3073-byte records with labels below 10 and below the model's classes,
 * read back exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "worker/data.h"

#define REC 3073

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  static const int shapes[4][4] = {{3, 32, 32, 0}, {1, 1, 3072, 1}, {1, 28, 28, 0}, {3, 32, 32, 1}};
  const int *s = shapes[data[1] & 3];
  gs_data_want want = {.c = s[0], .h = s[1], .w = s[2], .flat = s[3], .classes = data[0],
                       .synthetic_n = 1, .seed = 1};
  int nfiles = (data[1] >> 2) & 3;
  fuzz_part parts[3] = {{0}};
  fuzz_split(data + 2, size - 2, parts, 3);
  fuzz_file files[3];
  char spec[256] = "cifar10:";
  int nf = nfiles ? nfiles : 2;
  for (int i = 0; i < nf; i++) {
    fuzz_file_open(&files[i], parts[i].data, parts[i].len);
    size_t at = strlen(spec);
    snprintf(spec + at, sizeof spec - at, "%s%s", i ? (nfiles ? "," : ",,") : "", files[i].path);
  }
  gs_dataset *d = fuzz_open_dataset(spec, &want, "gs_data_open(cifar10)");
  if (d) {
    FUZZ_CHECK(nfiles > 0, "accepted the spec %s", spec);
    FUZZ_CHECK(want.flat ? (want.c * want.h * want.w == 3072)
                         : (want.c == 3 && want.h == 32 && want.w == 32),
               "CIFAR-10 images for a model of %dx%dx%d", want.c, want.h, want.w);
    size_t n = 0;
    for (int i = 0; i < nf; i++) {
      FUZZ_CHECK(parts[i].len > 0 && parts[i].len % REC == 0,
                 "accepted file %d of %zu bytes, not whole records", i, parts[i].len);
      n += parts[i].len / REC;
    }
    uint8_t *pix = malloc(n * 3072), *lab = malloc(n);
    FUZZ_CHECK(pix && lab, "out of memory%s", "");
    size_t k = 0;
    for (int i = 0; i < nf; i++)
      for (size_t r = 0; r < parts[i].len / REC; r++, k++) {
        lab[k] = parts[i].data[r * REC];
        FUZZ_CHECK(lab[k] < 10, "accepted label %u (CIFAR-10 has 10 classes)", lab[k]);
        memcpy(pix + k * 3072, parts[i].data + r * REC + 1, 3072);
      }
    fuzz_check_dataset(d, (int64_t)n, 3, 32, 32, pix, lab, want.classes);
    free(pix);
    free(lab);
    gs_data_free(d);
  }
  for (int i = 0; i < nf; i++) fuzz_file_close(&files[i]);
  return 0;
}
