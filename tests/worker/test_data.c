/* test_data.c: the dataset readers of worker/data.c on good files and on
 * every kind of broken one (truncated, bad magic, wrong element type,
 * count mismatch, label out of range, wrong shape for the model, gzip,
 * missing), checking that each error names the file and the problem; and
 * the synthetic set's determinism and shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "worker/data.h"

static char dir[64];

static const char *path_of(const char *name) {
  static char buf[8][256];
  static int i;
  i = (i + 1) % 8;
  snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
  return buf[i];
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) {
    perror(path);
    exit(1);
  }
  fclose(f);
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* IDX images: n x h x w (c = 0) or n x c x h x w, pixel i = (i * 7) & 255 */
static void write_idx_images(const char *path, uint32_t n, uint32_t c, uint32_t h, uint32_t w,
                             long cut) {
  int nd = c ? 4 : 3;
  size_t hdr = 4 + 4 * (size_t)nd, data = (size_t)n * (c ? c : 1) * h * w;
  uint8_t *b = calloc(1, hdr + data + 16);  /* cut < 0 writes extra zero bytes */
  put_be32(b, 0x800u | (uint32_t)nd);
  put_be32(b + 4, n);
  if (c) {
    put_be32(b + 8, c);
    put_be32(b + 12, h);
    put_be32(b + 16, w);
  } else {
    put_be32(b + 8, h);
    put_be32(b + 12, w);
  }
  for (size_t i = 0; i < data; i++) b[hdr + i] = (uint8_t)(i * 7);
  write_bytes(path, b, hdr + data - (size_t)cut);
  free(b);
}

static void write_idx_labels(const char *path, uint32_t n, uint32_t magic, int bad_at) {
  uint8_t *b = malloc(8 + n);
  put_be32(b, magic);
  put_be32(b + 4, n);
  for (uint32_t i = 0; i < n; i++) b[8 + i] = (uint8_t)(i % 10);
  if (bad_at >= 0) b[8 + bad_at] = 12;
  write_bytes(path, b, 8 + n);
  free(b);
}

static void write_cifar(const char *path, int n, int bad_label_at, long cut) {
  size_t len = (size_t)n * 3073;
  uint8_t *b = malloc(len);
  for (int r = 0; r < n; r++) {
    b[(size_t)r * 3073] = (uint8_t)((r * 3) % 10);
    for (int j = 0; j < 3072; j++) b[(size_t)r * 3073 + 1 + j] = (uint8_t)(r + j);
  }
  if (bad_label_at >= 0) b[(size_t)bad_label_at * 3073] = 10;
  write_bytes(path, b, len - (size_t)cut);
  free(b);
}

static gs_data_want flat(int dim) {
  return (gs_data_want){.c = 1, .h = 1, .w = dim, .flat = true, .classes = 10,
                        .synthetic_n = 100, .seed = 1};
}
static gs_data_want image(void) {
  return (gs_data_want){.c = 3, .h = 32, .w = 32, .flat = false, .classes = 10,
                        .synthetic_n = 50, .seed = 1};
}

/* opening spec must fail with a message holding every fragment */
static void expect_error(const char *spec, gs_data_want want, const char *frag1,
                         const char *frag2) {
  gs_err e = {0};
  gs_dataset *d = NULL;
  int rc = gs_data_open(spec, &want, &d, &e);
  CHECK(rc != 0 && d == NULL, "'%s' opened without error", spec);
  CHECK(frag1 == NULL || strstr(e.msg, frag1), "'%s': message '%s' lacks '%s'", spec, e.msg,
         frag1);
  CHECK(frag2 == NULL || strstr(e.msg, frag2), "'%s': message '%s' lacks '%s'", spec, e.msg,
         frag2);
  gs_data_free(d);
}

static void good_idx(void) {
  write_idx_images(path_of("img"), 5, 0, 4, 4, 0);
  write_idx_labels(path_of("lab"), 5, 0x801, -1);
  char spec[600];
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img"), path_of("lab"));
  gs_err e = {0};
  gs_dataset *d = NULL;
  gs_data_want want = flat(16);
  CHECK_OK(gs_data_open(spec, &want, &d, &e), &e);
  if (!d) return;
  CHECK(d->n == 5 && d->dim == 16 && d->h == 4 && d->w == 4);
  int64_t idx[2] = {3, 1};
  float x[32];
  int32_t y[2];
  gs_data_batch(d, idx, 2, x, y);
  CHECK(y[0] == 3 && y[1] == 1);
  for (int j = 0; j < 16; j++) {
    CHECK(x[j] == (float)(uint8_t)((3 * 16 + j) * 7) / 255.0f);
    CHECK(x[16 + j] == (float)(uint8_t)((16 + j) * 7) / 255.0f);
  }
  gs_data_free(d);

  /* 4-dimensional images for an image model */
  write_idx_images(path_of("img4"), 3, 3, 32, 32, 0);
  write_idx_labels(path_of("lab3"), 3, 0x801, -1);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img4"), path_of("lab3"));
  want = image();
  CHECK_OK(gs_data_open(spec, &want, &d, &e), &e);
  if (d) CHECK(d->n == 3 && d->c == 3 && d->dim == 3072);
  gs_data_free(d);
}

static void broken_idx(void) {
  char spec[600];
  write_idx_labels(path_of("lab"), 5, 0x801, -1);
  /* truncated images */
  write_idx_images(path_of("short"), 5, 0, 4, 4, 3);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("short"), path_of("lab"));
  expect_error(spec, flat(16), path_of("short"), "truncated");
  /* header itself cut */
  write_idx_images(path_of("tiny"), 5, 0, 4, 4, 80 + 6);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("tiny"), path_of("lab"));
  expect_error(spec, flat(16), path_of("tiny"), "truncated");
  /* too long */
  write_idx_images(path_of("long"), 5, 0, 4, 4, -2);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("long"), path_of("lab"));
  expect_error(spec, flat(16), path_of("long"), "longer");
  /* bad magic: the labels' magic on images, and garbage */
  write_idx_images(path_of("img"), 5, 0, 4, 4, 0);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("lab"), path_of("lab"));
  expect_error(spec, flat(16), path_of("lab"), "magic");
  write_bytes(path_of("junk"), "\x12\x34\x08\x03 and more bytes", 20);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("junk"), path_of("lab"));
  expect_error(spec, flat(16), path_of("junk"), "magic");
  /* labels file with an images magic */
  write_idx_labels(path_of("lab803"), 5, 0x803, -1);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img"), path_of("lab803"));
  expect_error(spec, flat(16), path_of("lab803"), "0x00000801");
  /* float element type */
  write_idx_labels(path_of("labf"), 5, 0xd01, -1);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img"), path_of("labf"));
  expect_error(spec, flat(16), path_of("labf"), "element type");
  /* counts disagree */
  write_idx_labels(path_of("lab4"), 4, 0x801, -1);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img"), path_of("lab4"));
  expect_error(spec, flat(16), "5 images", "4 labels");
  /* label out of range */
  write_idx_labels(path_of("labbad"), 5, 0x801, 2);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img"), path_of("labbad"));
  expect_error(spec, flat(16), path_of("labbad"), "record 2");
  /* shape against the model */
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("img"), path_of("lab"));
  expect_error(spec, flat(784), path_of("img"), "mlp:16-");
  expect_error(spec, image(), path_of("img"), "3x32x32");
  /* gzip, missing, malformed spec */
  write_bytes(path_of("gz"), "\x1f\x8b\x08\x00\x00\x00", 6);
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("gz"), path_of("lab"));
  expect_error(spec, flat(16), path_of("gz"), "gunzip");
  snprintf(spec, sizeof spec, "idx:%s,%s", path_of("nope"), path_of("lab"));
  expect_error(spec, flat(16), path_of("nope"), "cannot open");
  snprintf(spec, sizeof spec, "idx:%s", path_of("img"));
  expect_error(spec, flat(16), "two files", NULL);
  expect_error("mnist", flat(16), "unknown data", NULL);
}

static void cifar(void) {
  write_cifar(path_of("c1"), 3, -1, 0);
  write_cifar(path_of("c2"), 2, -1, 0);
  char spec[600];
  snprintf(spec, sizeof spec, "cifar10:%s,%s", path_of("c1"), path_of("c2"));
  gs_err e = {0};
  gs_dataset *d = NULL;
  gs_data_want want = image();
  CHECK_OK(gs_data_open(spec, &want, &d, &e), &e);
  if (d) {
    CHECK(d->n == 5 && d->dim == 3072);
    int64_t idx[1] = {4};  /* record 1 of the second file */
    float *x = malloc(3072 * sizeof(float));
    int32_t y;
    gs_data_batch(d, idx, 1, x, &y);
    CHECK(y == 3);
    CHECK(x[0] == 1.0f / 255.0f && x[3071] == (float)(uint8_t)(1 + 3071) / 255.0f);
    free(x);
  }
  gs_data_free(d);
  /* an MLP over CIFAR takes 3072 inputs */
  want = flat(3072);
  CHECK_OK(gs_data_open(spec, &want, &d, &e), &e);
  gs_data_free(d);
  d = NULL;
  expect_error(spec, flat(784), "3072", "mlp:3072-");

  write_cifar(path_of("cshort"), 2, -1, 100);
  snprintf(spec, sizeof spec, "cifar10:%s,%s", path_of("c1"), path_of("cshort"));
  expect_error(spec, image(), path_of("cshort"), "3073-byte records");
  write_cifar(path_of("cbad"), 3, 1, 0);
  snprintf(spec, sizeof spec, "cifar10:%s", path_of("cbad"));
  expect_error(spec, image(), path_of("cbad"), "record 1");
  write_bytes(path_of("cempty"), "", 0);
  snprintf(spec, sizeof spec, "cifar10:%s", path_of("cempty"));
  expect_error(spec, image(), path_of("cempty"), "empty");
  snprintf(spec, sizeof spec, "cifar10:%s,", path_of("c1"));
  expect_error(spec, image(), "empty file name", NULL);
  /* a model with fewer classes than CIFAR's labels */
  gs_data_want few = image();
  few.classes = 2;
  snprintf(spec, sizeof spec, "cifar10:%s", path_of("c1"));
  expect_error(spec, few, path_of("c1"), "out of range");
}

static void synthetic(void) {
  gs_err e = {0};
  gs_dataset *a = NULL, *b = NULL, *c = NULL;
  gs_data_want w = flat(20);
  CHECK_OK(gs_data_open("synthetic", &w, &a, &e), &e);
  CHECK_OK(gs_data_open(NULL, &w, &b, &e), &e);
  w.seed = 2;
  CHECK_OK(gs_data_open("synthetic", &w, &c, &e), &e);
  if (a && b && c) {
    CHECK(a->n == 100 && a->dim == 20);
    CHECK(!memcmp(a->pixels, b->pixels, 100 * 20) && !memcmp(a->labels, b->labels, 400));
    CHECK(memcmp(a->pixels, c->pixels, 100 * 20) != 0);
    int seen[10] = {0};
    for (int i = 0; i < 100; i++) {
      CHECK(a->labels[i] >= 0 && a->labels[i] < 10);
      if (a->labels[i] >= 0 && a->labels[i] < 10) seen[a->labels[i]] = 1;
    }
    int classes = 0;
    for (int i = 0; i < 10; i++) classes += seen[i];
    CHECK(classes == 10);
  }
  gs_data_free(a);
  gs_data_free(b);
  gs_data_free(c);
  w = image();
  CHECK_OK(gs_data_open("synthetic", &w, &a, &e), &e);
  if (a) CHECK(a->n == 50 && a->c == 3 && a->h == 32 && a->dim == 3072);
  gs_data_free(a);
  w.synthetic_n = 0;
  expect_error("synthetic", w, "positive", NULL);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/gs_test_data_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  good_idx();
  broken_idx();
  cifar();
  synthetic();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_done("test_data");
}
