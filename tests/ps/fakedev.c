/* fakedev.c: a kernels table that claims to be a GPU, for the ps device
 * paths on a machine without one.
 *
 * It computes with the CPU table, but keeps a registry of the "device"
 * allocations and checks every op: device ops must get device pointers,
 * to_device / to_host must go between a device pointer and a host one.
 * A violation (the kind of bug that crashes on a real GPU: a ZeroMQ buffer
 * passed to an add, a host staging buffer passed to convert) becomes the
 * table's sticky error, which sync() reports, so the ps code fails loudly
 * with the op named. Host allocations (alloc_host) are ordinary memory. */
#include "fakedev.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXREG 4096

typedef struct region {
  const char *p;
  size_t n;
} region;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static region reg[MAXREG];
static int nreg;
static int violations;

/* The table is the first member, so a table is its fake. The table's impl
 * stays the CPU table's: the ops left unwatched (the layers, the GEMMs)
 * are the CPU's own and run on the fake's device memory, which is host
 * memory, so a trainer can run on it too. */
typedef struct fake {
  gs_kernels k;
  gs_kernels *cpu;
  gs_err err;
} fake;

static bool is_dev(const void *p) {
  bool yes = false;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nreg && !yes; i++)
    yes = (const char *)p >= reg[i].p && (const char *)p < reg[i].p + reg[i].n;
  pthread_mutex_unlock(&mu);
  return yes;
}

static void bad(gs_kernels *k, const char *op, const char *what) {
  fake *f = (fake *)k;
  pthread_mutex_lock(&mu);
  violations++;
  pthread_mutex_unlock(&mu);
  GS_FAIL(&f->err, GS_EDEVICE, "fakedev: %s got %s", op, what);
}

#define DEV(op, p) \
  do { if ((p) && !is_dev(p)) bad(k, op, "a host pointer where a device pointer belongs"); } while (0)
#define HOST(op, p) \
  do { if ((p) && is_dev(p)) bad(k, op, "a device pointer where a host pointer belongs"); } while (0)

static gs_kernels *cpu(gs_kernels *k) { return ((fake *)k)->cpu; }

static void *f_alloc(gs_kernels *k, size_t bytes) {
  void *p = cpu(k)->alloc(cpu(k), bytes);
  if (!p) return NULL;
  pthread_mutex_lock(&mu);
  if (nreg < MAXREG) reg[nreg++] = (region){p, bytes ? bytes : 1};
  pthread_mutex_unlock(&mu);
  return p;
}
static void f_release(gs_kernels *k, void *p) {
  if (!p) return;
  DEV("release", p);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nreg; i++)
    if (reg[i].p == p) {
      reg[i] = reg[--nreg];
      break;
    }
  pthread_mutex_unlock(&mu);
  cpu(k)->release(cpu(k), p);
}
static void *f_alloc_host(gs_kernels *k, size_t bytes) { return gs_alloc(bytes, NULL); }
static void f_release_host(gs_kernels *k, void *p) {
  HOST("release_host", p);
  gs_free(p);
}
static void f_to_device(gs_kernels *k, void *dst, const void *src, size_t bytes) {
  DEV("to_device (destination)", dst);
  HOST("to_device (source)", src);
  if (bytes) memcpy(dst, src, bytes);
}
static void f_to_host(gs_kernels *k, void *dst, const void *src, size_t bytes) {
  HOST("to_host (destination)", dst);
  DEV("to_host (source)", src);
  if (bytes) memcpy(dst, src, bytes);
}
static void f_copy(gs_kernels *k, void *dst, const void *src, size_t bytes) {
  DEV("copy", dst);
  DEV("copy", src);
  cpu(k)->copy(cpu(k), dst, src, bytes);
}
static void f_zero(gs_kernels *k, void *p, size_t bytes) {
  DEV("zero", p);
  cpu(k)->zero(cpu(k), p, bytes);
}
static int f_sync(gs_kernels *k, gs_err *e) {
  fake *f = (fake *)k;
  if (f->err.code) {
    int code = f->err.code;
    if (e && e->code == 0) *e = f->err;
    gs_err_clear(&f->err);
    return code;
  }
  return cpu(k)->sync(cpu(k), e);
}
static void f_set_threads(gs_kernels *k, int t) { cpu(k)->set_threads(cpu(k), t); }
static gs_kernels *f_clone(gs_kernels *k, gs_err *e) {
  (void)k;
  return fakedev_create(e);
}
static void f_destroy(gs_kernels *k) {
  cpu(k)->destroy(cpu(k));
  free(k);
}
static void f_sgd(gs_kernels *k, size_t n, void *p, const void *g, void *buf, gs_sgd h,
                  bool first) {
  DEV("sgd", p);
  DEV("sgd", g);
  DEV("sgd", buf);
  cpu(k)->sgd(cpu(k), n, p, g, buf, h, first);
}
static void f_add(gs_kernels *k, size_t n, void *dst, const void *src) {
  DEV("add", dst);
  DEV("add", src);
  cpu(k)->add(cpu(k), n, dst, src);
}
static void f_scale(gs_kernels *k, size_t n, float a, void *x) {
  DEV("scale", x);
  cpu(k)->scale(cpu(k), n, a, x);
}
static void f_add_lp(gs_kernels *k, gs_dtype t, size_t n, void *dst, const void *src) {
  DEV("add_lp", dst);
  DEV("add_lp", src);
  cpu(k)->add_lp(cpu(k), t, n, dst, src);
}
static void f_convert(gs_kernels *k, gs_dtype to, void *dst, gs_dtype from, const void *src,
                      size_t n) {
  DEV("convert", dst);
  DEV("convert", src);
  cpu(k)->convert(cpu(k), to, dst, from, src, n);
}
static size_t f_nonfinite(gs_kernels *k, gs_dtype t, size_t n, const void *x) {
  DEV("nonfinite", x);
  return cpu(k)->nonfinite(cpu(k), t, n, x);
}
static void f_gather_batch(gs_kernels *k, int count, size_t dim, const uint8_t *pixels,
                           const int32_t *labels, const int64_t *idx, float *x, int32_t *y) {
  DEV("gather_batch", pixels);
  DEV("gather_batch", labels);
  DEV("gather_batch", idx);
  DEV("gather_batch", x);
  DEV("gather_batch", y);
  cpu(k)->gather_batch(cpu(k), count, dim, pixels, labels, idx, x, y);
}

gs_kernels *fakedev_create(gs_err *e) {
  gs_kernels *c = gs_kernels_cpu(0, e);
  if (!c) return NULL;
  fake *f = calloc(1, sizeof *f);
  if (!f) {
    c->destroy(c);
    GS_FAIL(e, GS_ENOMEM, "fakedev: out of memory");
    return NULL;
  }
  gs_kernels *k = &f->k;
  *k = *c;  /* the unwatched ops and their impl stay the CPU's */
  f->cpu = c;
  k->name = "fakedev";
  k->device = GS_DEV_CUDA;
  k->alloc = f_alloc;
  k->release = f_release;
  k->alloc_host = f_alloc_host;
  k->release_host = f_release_host;
  k->to_device = f_to_device;
  k->to_host = f_to_host;
  k->copy = f_copy;
  k->zero = f_zero;
  k->sync = f_sync;
  k->set_threads = f_set_threads;
  k->destroy = f_destroy;
  k->clone = f_clone;
  k->sgd = f_sgd;
  k->add = f_add;
  k->scale = f_scale;
  k->add_lp = f_add_lp;
  k->convert = f_convert;
  k->nonfinite = f_nonfinite;
  k->gather_batch = f_gather_batch;
  return k;
}


int fakedev_violations(void) {
  pthread_mutex_lock(&mu);
  int v = violations;
  pthread_mutex_unlock(&mu);
  return v;
}
