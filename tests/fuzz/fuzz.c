/* fuzz.c: the helpers of fuzz.h shared by every harness. */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

fuzz_expect fuzz_expected = FUZZ_ANY;

/* The sanitizers' report channel, where there is one: under libFuzzer's
 * -close_fd_mask=2 it is the only output left. */
void __sanitizer_report_error_summary(const char *summary) __attribute__((weak));

void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
  char msg[2048];
  int n = snprintf(msg, sizeof msg, "%s:%d: FUZZ_CHECK failed: %s: ", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", msg);
  if (__sanitizer_report_error_summary) __sanitizer_report_error_summary(msg);
  abort();
}

void fuzz_check_err(int rc, const gs_err *e, const char *what) {
  FUZZ_CHECK(rc <= 0, "%s returned %d, neither 0 nor an error code", what, rc);
  if (rc == 0) return;
  FUZZ_CHECK(e->code < 0, "%s failed (%d) without filling the gs_err", what, rc);
  size_t len = strnlen(e->msg, sizeof e->msg);
  FUZZ_CHECK(len > 0 && len < sizeof e->msg, "%s failed (%d) with an empty message", what, rc);
}

void fuzz_verdict(int rc, const gs_err *e, const char *what) {
  fuzz_check_err(rc, e, what);
  if (fuzz_expected != FUZZ_ANY && getenv("GS_FUZZ_VERBOSE"))
    fprintf(stderr, "  %s: %s\n", what, rc ? e->msg : "accepted");
  FUZZ_CHECK(fuzz_expected != FUZZ_ACCEPT || rc == 0,
             "%s rejected an input its corpus name says is valid: %s", what, e->msg);
  FUZZ_CHECK(fuzz_expected != FUZZ_REJECT || rc < 0,
             "%s accepted an input its corpus name says is invalid", what);
}

size_t fuzz_split(const uint8_t *in, size_t n, fuzz_part *parts, size_t max) {
  size_t k = 0, at = 0;
  while (k < max && at + 2 <= n) {
    unsigned h = (unsigned)in[at] | (unsigned)in[at + 1] << 8;
    size_t len = h & 0x7fff;
    at += 2;
    if (len > n - at) len = n - at;
    parts[k].data = in + at;
    parts[k].len = len;
    parts[k].more = (h & 0x8000) != 0;
    k++;
    at += len;
  }
  return k;
}

size_t fuzz_put_part(uint8_t *buf, size_t at, const void *data, size_t len, bool more) {
  if (len > 0x7fff) {
    fprintf(stderr, "fuzz_put_part: a part of %zu bytes (32767 at most)\n", len);
    abort();
  }
  unsigned h = (unsigned)len | (more ? 0x8000u : 0u);
  buf[at] = (uint8_t)(h & 0xff);
  buf[at + 1] = (uint8_t)(h >> 8);
  if (len) memcpy(buf + at + 2, data, len);
  return at + 2 + len;
}

void fuzz_file_open(fuzz_file *f, const void *data, size_t len) {
  f->fd = memfd_create("fuzz-input", MFD_CLOEXEC);
  FUZZ_CHECK(f->fd >= 0, "memfd_create failed%s", "");
  const uint8_t *p = data;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(f->fd, p + done, len - done);
    FUZZ_CHECK(w > 0, "writing %zu bytes to a memfd failed", len);
    done += (size_t)w;
  }
  snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

void fuzz_file_close(fuzz_file *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}
