/* npy.c: the .npy reader and writer of npy.h. The header parser accepts
 * the dict numpy writes (any key order, single or double quotes, trailing
 * commas) and nothing looser; data is read in one piece after checking that
 * the file holds exactly what the header promises. */
#include "worker/npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host ('<f4' data is copied as is)"
#endif

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

int gs_npy_write(const char *path, const float *data, int ndim, const int64_t *shape, gs_err *e) {
  if (ndim < 0 || ndim > GS_NPY_MAXDIM)
    return GS_FAIL(e, GS_EINVAL, "%s: %d dimensions", path, ndim);
  char hdr[512];
  int len = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
  size_t count = 1;
  for (int i = 0; i < ndim; i++) {
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%lld,%s", (long long)shape[i],
                    ndim == 1 ? "" : i + 1 < ndim ? " " : "");
    count *= (size_t)shape[i];
  }
  if (ndim > 1) len--; /* "(6, 3, 5, 5," -> drop the last comma */
  len += snprintf(hdr + len, sizeof hdr - (size_t)len, "), }");
  /* pad so that magic(6) + version(2) + length(2) + header is a multiple of 64 */
  int total = 10 + len + 1;
  int pad = (64 - total % 64) % 64;
  memset(hdr + len, ' ', (size_t)pad);
  len += pad;
  hdr[len++] = '\n';

  FILE *f = fopen(path, "wb");
  if (!f) return GS_FAIL(e, GS_EIO, "cannot create %s: %s", path, strerror(errno));
  uint8_t pre[10];
  memcpy(pre, MAGIC, 6);
  pre[6] = 1;
  pre[7] = 0;
  pre[8] = (uint8_t)(len & 0xff);
  pre[9] = (uint8_t)(len >> 8);
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len &&
            (count == 0 || fwrite(data, sizeof(float), count, f) == count);
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  if (fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) return GS_FAIL(e, GS_EIO, "cannot write %s: %s", path, strerror(err));
  return GS_OK;
}

/* ---- header parsing ---- */

typedef struct parser {
  const char *p, *end;
} parser;

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && isspace((unsigned char)*ps->p)) ps->p++;
}

static bool eat(parser *ps, char c) {
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == c) {
    ps->p++;
    return true;
  }
  return false;
}

/* a quoted string into out (truncated to cap - 1) */
static bool parse_str(parser *ps, char *out, size_t cap) {
  skip_ws(ps);
  if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return false;
  char q = *ps->p++;
  size_t n = 0;
  while (ps->p < ps->end && *ps->p != q) {
    if (n + 1 < cap) out[n++] = *ps->p;
    ps->p++;
  }
  out[n] = '\0';
  if (ps->p >= ps->end) return false;
  ps->p++;
  return true;
}

static bool parse_word(parser *ps, const char *w) {
  skip_ws(ps);
  size_t n = strlen(w);
  if ((size_t)(ps->end - ps->p) >= n && !strncmp(ps->p, w, n)) {
    ps->p += n;
    return true;
  }
  return false;
}

typedef struct npy_info {
  char descr[32];
  bool fortran;
  int ndim;
  int64_t shape[GS_NPY_MAXDIM];
  size_t offset;   /* where the data starts */
  size_t count;
} npy_info;

static int parse_header(const char *path, FILE *f, npy_info *in, gs_err *e) {
  uint8_t pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, MAGIC, 6) != 0)
    return GS_FAIL(e, GS_EIO, "%s is not a NumPy .npy file (no \\x93NUMPY magic)", path);
  int major = pre[6];
  size_t hlen, pre_len;
  if (major == 1) {
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    pre_len = 10;
  } else if (major == 2 || major == 3) {
    if (fread(pre + 10, 1, 2, f) != 2)
      return GS_FAIL(e, GS_EIO, "%s: truncated .npy header", path);
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    pre_len = 12;
  } else {
    return GS_FAIL(e, GS_EIO, "%s: .npy format version %d.%d is not supported", path, major,
                   pre[7]);
  }
  if (hlen == 0 || hlen > 65536) return GS_FAIL(e, GS_EIO, "%s: .npy header of %zu bytes", path, hlen);
  /* terminated, so that strtoll stops at a header that ends in digits */
  char *h = malloc(hlen + 1);
  if (!h) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (fread(h, 1, hlen, f) != hlen) {
    free(h);
    return GS_FAIL(e, GS_EIO, "%s: truncated .npy header", path);
  }
  h[hlen] = '\0';
  in->offset = pre_len + hlen;
  parser ps = {h, h + hlen};
  bool have_descr = false, have_order = false, have_shape = false, ok = eat(&ps, '{');
  while (ok && !eat(&ps, '}')) {
    char key[32];
    ok = parse_str(&ps, key, sizeof key) && eat(&ps, ':');
    if (!ok) break;
    if (!strcmp(key, "descr")) {
      ok = parse_str(&ps, in->descr, sizeof in->descr);
      have_descr = true;
    } else if (!strcmp(key, "fortran_order")) {
      if (parse_word(&ps, "True")) in->fortran = true;
      else if (parse_word(&ps, "False")) in->fortran = false;
      else ok = false;
      have_order = true;
    } else if (!strcmp(key, "shape")) {
      ok = eat(&ps, '(');
      in->ndim = 0;
      while (ok && !eat(&ps, ')')) {
        skip_ws(&ps);
        char *endp;
        errno = 0;
        long long v = strtoll(ps.p, &endp, 10);
        if (endp == ps.p || errno || v < 0 || in->ndim == GS_NPY_MAXDIM) {
          ok = false;
          break;
        }
        in->shape[in->ndim++] = v;
        ps.p = endp;
        if (!eat(&ps, ',')) {
          ok = eat(&ps, ')');
          break;
        }
      }
      have_shape = true;
    } else {
      ok = false;
    }
    if (ok && !eat(&ps, ',')) ok = eat(&ps, '}') ? (ps.p--, true) : false;
  }
  free(h);
  if (!ok || !have_descr || !have_order || !have_shape)
    return GS_FAIL(e, GS_EIO, "%s: malformed .npy header (expected descr, fortran_order, shape)",
                   path);
  if (strcmp(in->descr, "<f4") != 0)
    return GS_FAIL(e, GS_EIO,
                   "%s holds dtype '%s', not float32 ('<f4'); save it with "
                   "np.save(path, a.astype(np.float32))",
                   path, in->descr);
  if (in->fortran)
    return GS_FAIL(e, GS_EIO, "%s is in Fortran order; save it with np.ascontiguousarray(a)", path);
  struct stat st;
  if (fstat(fileno(f), &st) != 0) return GS_FAIL(e, GS_EIO, "%s: %s", path, strerror(errno));
  in->count = 1;
  bool wraps = false;
  for (int i = 0; i < in->ndim; i++)
    wraps |= __builtin_mul_overflow(in->count, (size_t)in->shape[i], &in->count);
  size_t want = 0;
  wraps = wraps || __builtin_mul_overflow(in->count, sizeof(float), &want) ||
          __builtin_add_overflow(want, in->offset, &want);
  if (wraps)
    return GS_FAIL(e, GS_EIO, "%s: its header's shape holds more data than any file can (the "
                   "file has %lld bytes)", path, (long long)st.st_size);
  if ((size_t)st.st_size != want)
    return GS_FAIL(e, GS_EIO, "%s is %s: its header promises %zu bytes of data, the file has %lld",
                   path, (size_t)st.st_size < want ? "truncated" : "longer than its header says",
                   in->count * sizeof(float), (long long)st.st_size - (long long)in->offset);
  return GS_OK;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%lld%s", (long long)shape[i],
                          ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
  if (n < cap) snprintf(buf + n, cap - n, ")");
}

int gs_npy_shape(const char *path, int *ndim, int64_t shape[GS_NPY_MAXDIM], gs_err *e) {
  FILE *f = fopen(path, "rb");
  if (!f) return GS_FAIL(e, GS_EIO, "cannot open %s: %s", path, strerror(errno));
  npy_info in = {0};
  int rc = parse_header(path, f, &in, e);
  fclose(f);
  if (rc) return rc;
  *ndim = in.ndim;
  memcpy(shape, in.shape, sizeof in.shape);
  return GS_OK;
}

int gs_npy_read(const char *path, float *data, int ndim, const int64_t *shape, gs_err *e) {
  FILE *f = fopen(path, "rb");
  if (!f) return GS_FAIL(e, GS_EIO, "cannot open %s: %s", path, strerror(errno));
  npy_info in = {0};
  int rc = parse_header(path, f, &in, e);
  bool same = rc == 0 && in.ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = in.shape[i] == shape[i];
  if (rc == 0 && !same) {
    char got[160], want[160];
    shape_str(got, sizeof got, in.ndim, in.shape);
    shape_str(want, sizeof want, ndim, shape);
    rc = GS_FAIL(e, GS_EIO, "%s has shape %s but the model's tensor is %s", path, got, want);
  }
  if (rc == 0 && fseek(f, (long)in.offset, SEEK_SET) != 0)
    rc = GS_FAIL(e, GS_EIO, "%s: %s", path, strerror(errno));
  if (rc == 0 && in.count && fread(data, sizeof(float), in.count, f) != in.count)
    rc = GS_FAIL(e, GS_EIO, "cannot read the data of %s", path);
  fclose(f);
  return rc;
}
