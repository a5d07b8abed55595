/* data.c: the three dataset sources of data.h, all loaded into one layout
 * (bytes per pixel, int32 labels) so batching is one loop.
 *
 * Synthetic data, MNIST-like: K classes (the model's outputs), each with a
 * template on a dark background (30 grey levels) where 30% of the blocks are
 * brighter by `amp`. Blocks are 4x4 for images, so convolutions and pooling
 * see structure rather than pixel noise. A sample is its class template
 * plus per-pixel noise (Irwin-Hall of four uniforms, close to a Gaussian of
 * deviation 40 grey levels), rounded and clamped to bytes. amp is set from
 * the input size so that two class means are 14 noise deviations apart
 * whatever the size: learnable to ~100% (an MLP in a couple of hundred
 * steps at lr 0.01, LeNet in a few hundred at lr 0.05), but not in one step.
 * Labels are uniform. Everything comes from the seed's data stream (rng.h). */
#include "worker/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/kernels.h"
#include "kernels/rng.h"

/* Whole file into memory; errors name the file. */
static int slurp(const char *path, uint8_t **buf, size_t *len, gs_err *e) {
  *buf = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return GS_FAIL(e, GS_EIO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return GS_FAIL(e, GS_EIO, "%s is not a regular file", path);
  }
  size_t n = (size_t)st.st_size;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) {
    fclose(f);
    return GS_FAIL(e, GS_ENOMEM, "out of memory reading %s (%zu bytes)", path, n);
  }
  if (n && fread(b, 1, n, f) != n) {
    int err = ferror(f) ? errno : 0;
    fclose(f);
    free(b);
    return GS_FAIL(e, GS_EIO, "cannot read %s: %s", path, err ? strerror(err) : "short read");
  }
  fclose(f);
  *buf = b;
  *len = n;
  return GS_OK;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool is_gzip(const uint8_t *b, size_t n) { return n >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

static gs_dataset *dataset_new(int64_t n, int c, int h, int w, gs_err *e) {
  gs_dataset *d = calloc(1, sizeof *d);
  if (!d) {
    GS_FAIL(e, GS_ENOMEM, "out of memory");
    return NULL;
  }
  d->n = n;
  d->c = c;
  d->h = h;
  d->w = w;
  d->dim = (size_t)c * h * w;
  d->pixels = gs_alloc((size_t)n * d->dim, e);
  d->labels = gs_alloc((size_t)n * sizeof(int32_t), e);
  if (!d->pixels || !d->labels) {
    gs_data_free(d);
    return NULL;
  }
  return d;
}

void gs_data_free(gs_dataset *d) {
  if (!d) return;
  gs_free(d->pixels);
  gs_free(d->labels);
  free(d);
}

/* The model's input against the data's shape. */
static int check_shape(const gs_data_want *want, int c, int h, int w, const char *what,
                       gs_err *e) {
  size_t dim = (size_t)c * h * w, need = (size_t)want->c * want->h * want->w;
  if (want->flat) {
    if (dim != need)
      return GS_FAIL(e, GS_EINVAL,
                     "%s has samples of %dx%dx%d = %zu values but the model takes %zu inputs; "
                     "make the first size of --model mlp:%zu-... match the data",
                     what, c, h, w, dim, need, dim);
  } else if (c != want->c || h != want->h || w != want->w) {
    return GS_FAIL(e, GS_EINVAL, "%s has %dx%dx%d samples but the model takes %dx%dx%d images",
                   what, c, h, w, want->c, want->h, want->w);
  }
  return GS_OK;
}

/* ---- synthetic ---- */

static int open_synthetic(const gs_data_want *want, gs_dataset **out, gs_err *e) {
  int64_t n = want->synthetic_n;
  if (n <= 0) return GS_FAIL(e, GS_EINVAL, "synthetic data needs a positive number of samples");
  int K = want->classes, c = want->c, h = want->h, w = want->w;
  size_t dim = (size_t)c * h * w;
  gs_dataset *d = dataset_new(n, c, h, w, e);
  if (!d) return GS_ENOMEM;
  /* templates over 4x4 blocks (images) or runs of up to 4 (flat inputs;
   * single values when there are few inputs) */
  int bs_h = h > 1 ? 4 : 1, bs_w = h > 1 ? 4 : (w >= 256 ? 4 : w >= 64 ? 2 : 1);
  int bh = (h + bs_h - 1) / bs_h, bw = (w + bs_w - 1) / bs_w;
  size_t nblocks = (size_t)c * bh * bw;
  float *tmpl = malloc((size_t)K * nblocks * sizeof *tmpl);
  if (!tmpl) {
    gs_data_free(d);
    return GS_FAIL(e, GS_ENOMEM, "out of memory making synthetic data");
  }
  /* two templates differ in a block with probability 2p(1-p); for their
   * means to be `separation` noise deviations apart over dim pixels: */
  const double sigma = 40.0, separation = 14.0, background = 30.0, p = 0.3;
  double amp = separation * sigma / (sqrt(2 * p * (1 - p)) * sqrt((double)dim));
  if (amp > 200.0) amp = 200.0;
  gs_rng r;
  gs_rng_seed(&r, want->seed, GS_STREAM_DATA);
  for (size_t i = 0; i < (size_t)K * nblocks; i++)
    tmpl[i] = (float)(background + (gs_rng_uniform(&r) < p ? amp : 0.0));
  const float nscale = (float)(sigma * sqrt(3.0) / 65536.0);
  /* each pixel's block, once: no division per pixel of the dataset */
  size_t *block = malloc(dim * sizeof *block);
  if (!block) {
    free(tmpl);
    gs_data_free(d);
    return GS_FAIL(e, GS_ENOMEM, "out of memory making synthetic data");
  }
  for (int ch = 0, i = 0; ch < c; ch++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) block[i++] = ((size_t)ch * bh + y / bs_h) * bw + x / bs_w;
  for (int64_t s = 0; s < n; s++) {
    int k = (int)gs_rng_below(&r, (uint64_t)K);
    d->labels[s] = k;
    uint8_t *px = d->pixels + (size_t)s * dim;
    const float *t = tmpl + (size_t)k * nblocks;
    for (size_t i = 0; i < dim; i++) {
      uint64_t u = gs_rng_next(&r);
      /* sum of four 16-bit uniforms: mean 2*65536, sd 65536/sqrt(3) */
      int64_t sum = (int64_t)(u & 0xffff) + (int64_t)((u >> 16) & 0xffff) +
                    (int64_t)((u >> 32) & 0xffff) + (int64_t)(u >> 48) - 2 * 65535;
      float v = t[block[i]] + nscale * (float)sum;
      v = v > 0.0f ? v : 0.0f;   /* two selects (maxss, minss), not branches */
      v = v < 255.0f ? v : 255.0f;
      /* lrintf(v) for 0 <= v < 2^23, without a call: adding 2^23 rounds to
       * the nearest integer, ties to even, in the default rounding mode */
      px[i] = (uint8_t)((v + 0x1.0p23f) - 0x1.0p23f);
    }
  }
  free(block);
  free(tmpl);
  snprintf(d->desc, sizeof d->desc, "synthetic: %lld samples of %dx%dx%d, %d classes (seed %llu)",
           (long long)n, c, h, w, K, (unsigned long long)want->seed);
  *out = d;
  return GS_OK;
}

/* ---- IDX (MNIST family) ---- */

static int idx_header(const char *path, const uint8_t *b, size_t len, int want_code,
                      int *ndim, uint32_t dims[4], size_t *payload, gs_err *e) {
  if (is_gzip(b, len))
    return GS_FAIL(e, GS_EIO, "%s is gzip-compressed: run 'gunzip %s' and pass the result",
                   path, path);
  if (len < 4) return GS_FAIL(e, GS_EIO, "%s is truncated: %zu bytes, not even an IDX magic", path, len);
  uint32_t magic = be32(b);
  if (b[0] != 0 || b[1] != 0)
    return GS_FAIL(e, GS_EIO, "%s: bad IDX magic 0x%08x (an IDX file starts with two zero bytes)",
                   path, magic);
  if (b[2] != 0x08)
    return GS_FAIL(e, GS_EIO,
                   "%s: IDX element type 0x%02x is not supported; only unsigned bytes (0x08)",
                   path, b[2]);
  int nd = b[3];
  bool ok = want_code == 1 ? nd == 1 : (nd == 3 || nd == 4);
  if (!ok)
    return GS_FAIL(e, GS_EIO, "%s: bad IDX magic 0x%08x: expected %s", path, magic,
                   want_code == 1 ? "0x00000801 (labels)" : "0x00000803 or 0x00000804 (images)");
  size_t hdr = 4 + 4 * (size_t)nd;
  if (len < hdr)
    return GS_FAIL(e, GS_EIO, "%s is truncated: %zu bytes, its header needs %zu", path, len, hdr);
  size_t count = 1;
  for (int i = 0; i < nd; i++) {
    dims[i] = be32(b + 4 + 4 * i);
    if (dims[i] == 0 || dims[i] > (1u << 30))
      return GS_FAIL(e, GS_EIO, "%s: dimension %d of the header is %u", path, i, dims[i]);
    if (count > SIZE_MAX / dims[i])
      return GS_FAIL(e, GS_EIO, "%s: header dimensions overflow", path);
    count *= dims[i];
  }
  if (len - hdr != count)
    return GS_FAIL(e, GS_EIO,
                   "%s is %s: its header promises %zu data bytes after the %zu-byte header, the "
                   "file has %zu",
                   path, len - hdr < count ? "truncated" : "longer than its header says", count,
                   hdr, len - hdr);
  *ndim = nd;
  *payload = hdr;
  return GS_OK;
}

static int open_idx(const char *files, const gs_data_want *want, gs_dataset **out, gs_err *e) {
  const char *comma = strchr(files, ',');
  if (!comma || comma == files || !comma[1] || strchr(comma + 1, ','))
    return GS_FAIL(e, GS_EINVAL, "--data idx:IMAGES,LABELS needs exactly two files, got 'idx:%s'",
                   files);
  char *img_path = strndup(files, (size_t)(comma - files));
  const char *lab_path = comma + 1;
  uint8_t *ib = NULL, *lb = NULL;
  size_t il, ll;
  gs_dataset *d = NULL;
  int rc = slurp(img_path, &ib, &il, e);
  if (rc == 0) rc = slurp(lab_path, &lb, &ll, e);
  int ind = 0, lnd = 0;
  uint32_t idims[4] = {0}, ldims[4] = {0};
  size_t ioff = 0, loff = 0;
  if (rc == 0) rc = idx_header(img_path, ib, il, 3, &ind, idims, &ioff, e);
  if (rc == 0) rc = idx_header(lab_path, lb, ll, 1, &lnd, ldims, &loff, e);
  if (rc == 0 && idims[0] != ldims[0])
    rc = GS_FAIL(e, GS_EIO, "%s holds %u images but %s holds %u labels", img_path, idims[0],
                 lab_path, ldims[0]);
  int c = 1, h = 0, w = 0;
  if (rc == 0) {
    if (ind == 3) {
      h = (int)idims[1];
      w = (int)idims[2];
    } else {
      c = (int)idims[1];
      h = (int)idims[2];
      w = (int)idims[3];
    }
    char what[300];
    snprintf(what, sizeof what, "%s", img_path);
    rc = check_shape(want, c, h, w, what, e);
  }
  if (rc == 0) {
    for (uint32_t i = 0; i < ldims[0]; i++)
      if (lb[loff + i] >= want->classes) {
        rc = GS_FAIL(e, GS_EIO, "%s: label %u of record %u is out of range: the model has %d classes",
                     lab_path, lb[loff + i], i, want->classes);
        break;
      }
  }
  if (rc == 0) {
    d = dataset_new(idims[0], c, h, w, e);
    if (!d) rc = GS_ENOMEM;
  }
  if (rc == 0) {
    memcpy(d->pixels, ib + ioff, (size_t)d->n * d->dim);
    for (int64_t i = 0; i < d->n; i++) d->labels[i] = lb[loff + (size_t)i];
    snprintf(d->desc, sizeof d->desc, "idx: %lld samples of %dx%dx%d from %.120s, %.120s",
             (long long)d->n, c, h, w, img_path, lab_path);
    *out = d;
  }
  free(img_path);
  free(ib);
  free(lb);
  return rc;
}

/* ---- CIFAR-10 binary ---- */

#define CIFAR_REC 3073

static int open_cifar(const char *files, const gs_data_want *want, gs_dataset **out, gs_err *e) {
  if (!*files) return GS_FAIL(e, GS_EINVAL, "--data cifar10:FILE[,FILE...] needs a file");
  int rc = check_shape(want, 3, 32, 32, "CIFAR-10 data", e);
  if (rc) return rc;
  char *list = strdup(files);
  if (!list) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  /* read and check every file, then copy the records */
  int nfiles = 1;
  for (const char *p = list; *p; p++) nfiles += *p == ',';
  uint8_t **bufs = calloc((size_t)nfiles, sizeof *bufs);
  size_t *lens = calloc((size_t)nfiles, sizeof *lens);
  char **paths = calloc((size_t)nfiles, sizeof *paths);
  gs_dataset *d = NULL;
  if (!bufs || !lens || !paths) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  int64_t total = 0;
  char *tok = list;
  for (int f = 0; rc == 0 && f < nfiles; f++) {
    char *end = strchr(tok, ',');
    if (end) *end = '\0';
    paths[f] = tok;
    if (!*tok) {
      rc = GS_FAIL(e, GS_EINVAL, "--data cifar10:%s has an empty file name", files);
      break;
    }
    rc = slurp(tok, &bufs[f], &lens[f], e);
    if (rc) break;
    if (is_gzip(bufs[f], lens[f]))
      rc = GS_FAIL(e, GS_EIO,
                   "%s is gzip-compressed: extract cifar-10-binary.tar.gz and pass the "
                   "data_batch_N.bin files",
                   tok);
    else if (lens[f] == 0)
      rc = GS_FAIL(e, GS_EIO, "%s is empty", tok);
    else if (lens[f] % CIFAR_REC != 0)
      rc = GS_FAIL(e, GS_EIO,
                   "%s is not a CIFAR-10 binary batch: %zu bytes is not a whole number of "
                   "3073-byte records (truncated?)",
                   tok, lens[f]);
    for (size_t r = 0; rc == 0 && r < lens[f] / CIFAR_REC; r++) {
      unsigned lab = bufs[f][r * CIFAR_REC];
      if (lab >= 10 || (int)lab >= want->classes)
        rc = GS_FAIL(e, GS_EIO, "%s: label %u of record %zu is out of range (CIFAR-10 has 10 "
                     "classes, the model %d)",
                     tok, lab, r, want->classes);
    }
    total += (int64_t)(lens[f] / CIFAR_REC);
    tok = end ? end + 1 : NULL;
  }
  if (rc == 0) {
    d = dataset_new(total, 3, 32, 32, e);
    if (!d) rc = GS_ENOMEM;
  }
  if (rc == 0) {
    int64_t s = 0;
    for (int f = 0; f < nfiles; f++)
      for (size_t r = 0; r < lens[f] / CIFAR_REC; r++, s++) {
        d->labels[s] = bufs[f][r * CIFAR_REC];
        memcpy(d->pixels + (size_t)s * 3072, bufs[f] + r * CIFAR_REC + 1, 3072);
      }
    snprintf(d->desc, sizeof d->desc, "cifar10: %lld samples of 3x32x32 from %d file%s (%.200s)",
             (long long)total, nfiles, nfiles == 1 ? "" : "s", files);
    *out = d;
  }
  for (int f = 0; bufs && f < nfiles; f++) free(bufs[f]);
  free(bufs);
  free(lens);
  free(paths);
  free(list);
  return rc;
}

int gs_data_open(const char *spec, const gs_data_want *want, gs_dataset **out, gs_err *e) {
  *out = NULL;
  if (want->classes <= 0 || want->c <= 0 || want->h <= 0 || want->w <= 0)
    return GS_FAIL(e, GS_EINVAL, "this model takes no data");
  if (!spec || !strcmp(spec, "synthetic")) return open_synthetic(want, out, e);
  if (!strncmp(spec, "idx:", 4)) return open_idx(spec + 4, want, out, e);
  if (!strncmp(spec, "cifar10:", 8)) return open_cifar(spec + 8, want, out, e);
  return GS_FAIL(e, GS_EINVAL,
                 "--data %s: unknown data; use synthetic, idx:IMAGES,LABELS or "
                 "cifar10:FILE[,FILE...]",
                 spec);
}

void gs_data_batch(const gs_dataset *d, const int64_t *idx, int count, float *x, int32_t *y) {
  gs_gather_host(count, d->dim, d->pixels, d->labels, idx, x, y);
}
