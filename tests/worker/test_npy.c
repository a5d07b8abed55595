/* test_npy.c: .npy files of worker/npy.c: round trips of several ranks,
 * the exact header numpy writes (64-byte aligned data), version 2.0
 * headers, and errors (shape mismatch, wrong dtype, Fortran order, bad
 * magic, truncated data) that name the file. numpy itself reading and
 * writing these files is tested by tests/worker/cli.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/check.h"
#include "worker/npy.h"

static char dir[64];

static const char *path_of(const char *name) {
  static char buf[4][256];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
  return buf[i];
}

static long file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void write_raw(const char *path, const char *hdr_dict, int major, const float *data,
                      size_t n) {
  FILE *f = fopen(path, "wb");
  size_t hl = strlen(hdr_dict);
  fwrite("\x93NUMPY", 1, 6, f);
  fputc(major, f);
  fputc(0, f);
  fputc((int)(hl & 0xff), f);
  fputc((int)(hl >> 8), f);
  if (major >= 2) {
    fputc(0, f);
    fputc(0, f);
  }
  fwrite(hdr_dict, 1, hl, f);
  fwrite(data, sizeof(float), n, f);
  fclose(f);
}

static void round_trip(int ndim, const int64_t *shape) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
  float *a = malloc((n ? n : 1) * sizeof(float)), *b = calloc(n ? n : 1, sizeof(float));
  for (size_t i = 0; i < n; i++) a[i] = (float)i * 0.37f - 5.0f;
  if (n > 2) {
    a[1] = -0.0f;
    a[2] = 1e-40f;  /* subnormal survives bit for bit */
  }
  gs_err e = {0};
  const char *p = path_of("t.npy");
  CHECK_OK(gs_npy_write(p, a, ndim, shape, &e), &e);
  CHECK_OK(gs_npy_read(p, b, ndim, shape, &e), &e);
  CHECK(!memcmp(a, b, n * sizeof(float)));
  long size = file_size(p);
  CHECK((size - (long)(n * sizeof(float))) % 64 == 0, "header of %ld bytes",
         size - (long)(n * sizeof(float)));
  int got_nd = -1;
  int64_t got[GS_NPY_MAXDIM];
  CHECK_OK(gs_npy_shape(p, &got_nd, got, &e), &e);
  CHECK(got_nd == ndim);
  for (int i = 0; i < ndim && i < got_nd; i++) CHECK(got[i] == shape[i]);
  free(a);
  free(b);
}

static void header_text(void) {
  float w[6 * 3 * 5 * 5] = {0};
  gs_err e = {0};
  const char *p = path_of("conv.npy");
  CHECK_OK(gs_npy_write(p, w, 4, (int64_t[]){6, 3, 5, 5}, &e), &e);
  char buf[129] = {0};
  FILE *f = fopen(p, "rb");
  CHECK(f && fread(buf, 1, 128, f) == 128);
  if (f) fclose(f);
  CHECK(!memcmp(buf, "\x93NUMPY\x01\x00", 8));
  CHECK((unsigned char)buf[8] + 10 == 128 && buf[9] == 0);  /* data starts at byte 128 */
  CHECK(!strncmp(buf + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 3, 5, 5), }",
                  65), "header: %.80s", buf + 10);
  CHECK(buf[127] == '\n');
  const char *q = path_of("bias.npy");
  CHECK_OK(gs_npy_write(q, w, 1, (int64_t[]){120}, &e), &e);
  f = fopen(q, "rb");
  CHECK(f && fread(buf, 1, 128, f) == 128);
  if (f) fclose(f);
  CHECK(strstr(buf + 10, "'shape': (120,), }") != NULL);
}

static void expect_read_error(const char *p, int ndim, const int64_t *shape, const char *frag) {
  float buf[64];
  gs_err e = {0};
  int rc = gs_npy_read(p, buf, ndim, shape, &e);
  CHECK(rc != 0, "%s read without error", p);
  CHECK(strstr(e.msg, p) != NULL, "message '%s' does not name %s", e.msg, p);
  CHECK(strstr(e.msg, frag) != NULL, "message '%s' lacks '%s'", e.msg, frag);
}

static void errors_and_versions(void) {
  float d[6] = {1, 2, 3, 4, 5, 6};
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
  gs_err e = {0};
  const char *p = path_of("a.npy");
  CHECK_OK(gs_npy_write(p, d, 2, s23, &e), &e);
  expect_read_error(p, 2, s32, "(2, 3)");
  expect_read_error(p, 1, s6, "(6,)");

  /* version 2.0 and double quotes, other key order: accepted */
  const char *v2 = path_of("v2.npy");
  write_raw(v2, "{\"shape\": (2, 3), \"fortran_order\": False, \"descr\": \"<f4\"}   \n", 2, d, 6);
  float back[6];
  CHECK_OK(gs_npy_read(v2, back, 2, s23, &e), &e);
  CHECK(!memcmp(back, d, sizeof d));

  const char *f8 = path_of("f8.npy");
  write_raw(f8, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", 1, d, 6);
  expect_read_error(f8, 1, (int64_t[]){3}, "'<f8'");
  const char *fo = path_of("fo.npy");
  write_raw(fo, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", 1, d, 6);
  expect_read_error(fo, 2, s23, "Fortran");
  const char *tr = path_of("tr.npy");
  write_raw(tr, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 1, d, 5);
  expect_read_error(tr, 2, s23, "truncated");
  const char *bad = path_of("bad.npy");
  FILE *f = fopen(bad, "wb");
  fputs("PK\x03\x04 this is a zip", f);
  fclose(f);
  expect_read_error(bad, 2, s23, "magic");
  const char *mal = path_of("mal.npy");
  write_raw(mal, "{'descr': '<f4', 'shape': [2, 3]}\n", 1, d, 6);
  expect_read_error(mal, 2, s23, "malformed");
  expect_read_error(path_of("missing.npy"), 2, s23, "cannot open");
  /* a directory that does not exist */
  CHECK(gs_npy_write("/nonexistent-dir/x.npy", d, 1, s6, &e) != 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/gs_test_npy_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  round_trip(1, (int64_t[]){1});
  round_trip(1, (int64_t[]){120});
  round_trip(2, (int64_t[]){84, 120});
  round_trip(4, (int64_t[]){6, 3, 5, 5});
  round_trip(2, (int64_t[]){0, 7});
  header_text();
  errors_and_versions();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_done("test_npy");
}
