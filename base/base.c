/* base.c: the error record, clocks, hash, the environment's byte counts,
 * part ranges and checked allocation of base.h. */
#include "base/base.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Process-wide on purpose: a signal handler can reach nothing else, and
 * every wait loop of every part must see the same interrupt. */
volatile sig_atomic_t gs_interrupted;

int gs_fail_at(gs_err *e, const char *file, int line, int code, const char *fmt, ...) {
  if (!e || e->code != 0) return code;
  e->code = code;
  e->file = file;
  e->line = line;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return code;
}

void gs_err_prefix(gs_err *e, const char *fmt, ...) {
  if (!e) return;
  char pre[256], old[sizeof e->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  memcpy(old, e->msg, sizeof old);
  size_t pl = strlen(pre), ol = strnlen(old, sizeof old - 1);
  if (pl > sizeof e->msg - 1) pl = sizeof e->msg - 1;
  if (ol > sizeof e->msg - 1 - pl) ol = sizeof e->msg - 1 - pl;
  memcpy(e->msg, pre, pl);
  memcpy(e->msg + pl, old, ol);
  e->msg[pl + ol] = '\0';
}

void gs_err_clear(gs_err *e) {
  if (e) memset(e, 0, sizeof *e);
}

const char *gs_strerror(int code) {
  switch (code) {
  case GS_OK: return "ok";
  case GS_EINVAL: return "invalid argument";
  case GS_EIO: return "I/O error";
  case GS_ETIMEOUT: return "timed out";
  case GS_EPROTO: return "protocol error";
  case GS_ENOMEM: return "out of memory";
  case GS_EPEER: return "peer failed";
  case GS_EDEVICE: return "device error";
  case GS_EINTR: return "interrupted";
  case GS_EMISMATCH: return "ranks disagree";
  default: return "unknown error";
  }
}

size_t gs_env_bytes(const char *name, size_t fallback) {
  const char *s = getenv(name);
  if (!s || !*s) return fallback;
  if (!strcmp(s, "never") || !strcmp(s, "none")) return SIZE_MAX;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return fallback;
  switch (*end) {
  case 'k': case 'K': v <<= 10; break;
  case 'm': case 'M': v <<= 20; break;
  case 'g': case 'G': v <<= 30; break;
  default: break;
  }
  return (size_t)v;
}

void gs_part_range(size_t n, int N, int j, size_t *off, size_t *len) {
  size_t q = n / (size_t)N, rem = n % (size_t)N, uj = (size_t)j;
  *len = q + (uj < rem);
  *off = uj * q + (uj < rem ? uj : rem);
}

double gs_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double gs_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t gs_hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

void *gs_alloc(size_t bytes, gs_err *e) {
  /* rounding up to 64 would wrap a size within 63 of SIZE_MAX to 0, and
   * hand back 64 bytes for it */
  if (bytes > SIZE_MAX - 63) {
    GS_FAIL(e, GS_ENOMEM, "out of memory allocating %zu bytes", bytes);
    return NULL;
  }
  size_t n = (bytes + 63) & ~(size_t)63;
  if (n == 0) n = 64;
  void *p = aligned_alloc(64, n);
  if (!p) {
    GS_FAIL(e, GS_ENOMEM, "out of memory allocating %zu bytes", bytes);
    return NULL;
  }
  memset(p, 0, n);
  return p;
}

void gs_free(void *p) { free(p); }

int gs_read_line(int fd, double deadline, char *buf, size_t cap) {
  size_t len = 0;
  for (;;) {
    double left = deadline - gs_now();
    if (left <= 0 || gs_interrupted) return -1;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int rc = poll(&pf, 1, left > 0.1 ? 100 : (int)(left * 1000) + 1);
    if (rc < 0 && errno != EINTR) return 0;
    if (rc <= 0) continue;
    char ch;
    ssize_t n = read(fd, &ch, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (cap) buf[len] = '\0';  /* a last line without its '\n' is still text */
      return 0;
    }
    if (ch == '\n') {
      if (cap) buf[len] = '\0';
      return 1;
    }
    if (len + 1 < cap) buf[len++] = ch;
  }
}
