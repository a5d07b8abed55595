/* test_conv.c: gs_conv2d_forward / gs_conv2d_backward against a direct
 * 7-loop convolution in double, and the backward pass against central
 * finite differences of the forward pass, over LeNet's shapes and pad /
 * stride variants; gs_conv_init on bad shapes.
 *
 * The workspace is malloc'ed at exactly gs_conv_workspace() floats, so a
 * kernel that writes past it is caught by ASan. */
#include "tk.h"

typedef struct shape {
  int n, c, h, w, oc, kh, kw, stride, pad;
} shape;

static const shape shapes[] = {
  {4, 3, 32, 32, 6, 5, 5, 1, 0},  /* LeNet conv1 */
  {3, 6, 14, 14, 16, 5, 5, 1, 0}, /* LeNet conv2 */
  {2, 2, 7, 9, 3, 3, 3, 2, 1},
  {3, 1, 5, 5, 2, 5, 5, 1, 2},
  {1, 3, 8, 6, 4, 3, 2, 3, 2},
  {5, 2, 6, 6, 3, 1, 1, 1, 0},
  {7, 2, 9, 7, 5, 3, 3, 2, 0},
};

static size_t xsize(const gs_conv_desc *d) { return (size_t)d->n * d->c * d->h * d->w; }
static size_t ysize(const gs_conv_desc *d) { return (size_t)d->n * d->oc * d->oh * d->ow; }
static size_t wsize(const gs_conv_desc *d) { return (size_t)d->oc * d->c * d->kh * d->kw; }

#define X(d, n_, c_, y_, x_) (((size_t)(n_) * (d)->c + (c_)) * (d)->h + (y_)) * (d)->w + (x_)
#define Y(d, n_, o_, y_, x_) (((size_t)(n_) * (d)->oc + (o_)) * (d)->oh + (y_)) * (d)->ow + (x_)
#define W(d, o_, c_, i_, j_) (((size_t)(o_) * (d)->c + (c_)) * (d)->kh + (i_)) * (d)->kw + (j_)

/* Direct convolution and its gradients, the seven loops written out. */
static void ref_conv(const gs_conv_desc *d, const float *x, const float *w, const float *b,
                     const float *dy, double *y, double *dx, double *dw, double *db) {
  memset(dx, 0, xsize(d) * sizeof(double));
  memset(dw, 0, wsize(d) * sizeof(double));
  memset(db, 0, (size_t)d->oc * sizeof(double));
  for (int n = 0; n < d->n; n++)
    for (int o = 0; o < d->oc; o++)
      for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
          double s = b ? b[o] : 0.0;
          double g = dy[Y(d, n, o, oy, ox)];
          for (int c = 0; c < d->c; c++)
            for (int i = 0; i < d->kh; i++)
              for (int j = 0; j < d->kw; j++) {
                int iy = oy * d->stride - d->pad + i, ix = ox * d->stride - d->pad + j;
                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                s += (double)w[W(d, o, c, i, j)] * x[X(d, n, c, iy, ix)];
                dw[W(d, o, c, i, j)] += g * x[X(d, n, c, iy, ix)];
                dx[X(d, n, c, iy, ix)] += g * w[W(d, o, c, i, j)];
              }
          y[Y(d, n, o, oy, ox)] = s;
          db[o] += g;
        }
}

/* L = sum(conv(x, w, b) * r) in double from the kernel's float forward */
static double loss(gs_kernels *k, const gs_conv_desc *d, const float *x, const float *w,
                   const float *b, const float *r, float *y, float *ws) {
  gs_conv2d_forward(k, d, x, w, b, y, ws);
  double s = 0;
  for (size_t i = 0; i < ysize(d); i++) s += (double)y[i] * r[i];
  return s;
}

/* central differences on a few coordinates of t (x, w or b); L is linear
 * in each of them, so a large step is exact up to rounding */
static void fd_check(gs_kernels *k, const gs_conv_desc *d, float *x, float *w, float *b,
                     const float *r, float *y, float *ws, float *t, size_t tn, const float *grad,
                     const char *what) {
  const float h = 0.5f;
  int bad = 0, tries = tn < 12 ? (int)tn : 12;
  double mag = 0;
  for (size_t i = 0; i < ysize(d); i++) mag += fabs((double)r[i]);
  for (int q = 0; q < tries; q++) {
    size_t i = tn < 12 ? (size_t)q : (size_t)tk_int((int)tn);
    float save = t[i];
    t[i] = save + h;
    double lp = loss(k, d, x, w, b, r, y, ws);
    t[i] = save - h;
    double lm = loss(k, d, x, w, b, r, y, ws);
    t[i] = save;
    double fd = (lp - lm) / (2.0 * h);
    if (!tk_close(grad[i], fd, 1e-3, 1e-5 * mag)) {
      bad++;
      fprintf(stderr, "  %s[%zu]: backward %.7g, finite difference %.7g\n", what, i,
              (double)grad[i], fd);
    }
  }
  CHECK(bad == 0, "%s: %d of %d finite differences disagree", what, bad, tries);
}

static void test_shape(gs_kernels *k, const shape *s) {
  gs_conv_desc d = {.n = s->n, .c = s->c, .h = s->h, .w = s->w, .oc = s->oc, .kh = s->kh,
                    .kw = s->kw, .stride = s->stride, .pad = s->pad};
  gs_err e = {0};
  REQUIRE(gs_conv_init(&d, &e) == 0);
  CHECK(d.oh == (s->h + 2 * s->pad - s->kh) / s->stride + 1 &&
            d.ow == (s->w + 2 * s->pad - s->kw) / s->stride + 1,
        "gs_conv_init: %dx%d", d.oh, d.ow);
  size_t xn = xsize(&d), yn = ysize(&d), wn = wsize(&d), wsn = gs_conv_workspace(&d);
  float *x = tk_malloc(xn * 4), *w = tk_malloc(wn * 4), *b = tk_malloc(d.oc * 4);
  float *y = tk_malloc(yn * 4), *dy = tk_malloc(yn * 4), *dx = tk_malloc(xn * 4);
  float *dw = tk_malloc(wn * 4), *db = tk_malloc(d.oc * 4), *ws = tk_malloc(wsn * 4);
  double *ry = tk_malloc(yn * 8), *rdx = tk_malloc(xn * 8), *rdw = tk_malloc(wn * 8);
  double *rdb = tk_malloc(d.oc * 8);
  tk_fill(x, xn, -1, 1);
  tk_fill(w, wn, -0.5f, 0.5f);
  tk_fill(b, d.oc, -1, 1);
  tk_fill(dy, yn, -1, 1);
  ref_conv(&d, x, w, b, dy, ry, rdx, rdw, rdb);
  const char *isa = gs_cpu_isa_name(gs_kernels_cpu_isa(k));

  for (size_t i = 0; i < yn; i++) y[i] = NAN;
  gs_conv2d_forward(k, &d, x, w, b, y, ws);
  CHECK_SYNC_OK(k);
  double err = tk_relerr(y, ry, yn);
  CHECK(err < 1e-5, "%s forward n%d c%d %dx%d oc%d k%dx%d s%d p%d: rel err %g", isa, d.n, d.c,
        d.h, d.w, d.oc, d.kh, d.kw, d.stride, d.pad, err);

  for (size_t i = 0; i < xn; i++) dx[i] = NAN;
  for (size_t i = 0; i < wn; i++) dw[i] = NAN;
  for (int i = 0; i < d.oc; i++) db[i] = NAN;
  gs_conv2d_backward(k, &d, x, w, dy, dx, dw, db, ws);
  CHECK_SYNC_OK(k);
  double ex = tk_relerr(dx, rdx, xn), ew = tk_relerr(dw, rdw, wn), eb = tk_relerr(db, rdb, d.oc);
  CHECK(ex < 1e-5 && ew < 1e-5 && eb < 1e-5,
        "%s backward n%d c%d %dx%d oc%d k%dx%d s%d p%d: rel err dx %g dw %g db %g", isa, d.n,
        d.c, d.h, d.w, d.oc, d.kh, d.kw, d.stride, d.pad, ex, ew, eb);

  /* dx and db may be NULL; dw must not change */
  float *dw2 = tk_malloc(wn * 4);
  gs_conv2d_backward(k, &d, x, w, dy, NULL, dw2, NULL, ws);
  CHECK(memcmp(dw, dw2, wn * 4) == 0, "%s: dw differs when dx, db are NULL", isa);
  free(dw2);
  /* no bias: y = conv only */
  gs_conv2d_forward(k, &d, x, w, NULL, y, ws);
  double worst = 0;
  for (size_t i = 0; i < yn; i++) {
    int o = (int)((i / ((size_t)d.oh * d.ow)) % d.oc);
    double e2 = fabs(y[i] - (ry[i] - b[o]));
    if (e2 > worst) worst = e2;
  }
  CHECK(worst < 1e-4, "%s forward without bias: |err| %g", isa, worst);

  /* finite differences: dL/dt for L = sum(y * dy) */
  if (gs_kernels_cpu_isa(k) == GS_ISA_SCALAR || d.n * d.h * d.w < 2000) {
    fd_check(k, &d, x, w, b, dy, y, ws, w, wn, dw, "dw");
    fd_check(k, &d, x, w, b, dy, y, ws, x, xn, dx, "dx");
    fd_check(k, &d, x, w, b, dy, y, ws, b, (size_t)d.oc, db, "db");
  }
  free(x); free(w); free(b); free(y); free(dy); free(dx); free(dw); free(db); free(ws);
  free(ry); free(rdx); free(rdw); free(rdb);
}

static void test_init(void) {
  static const struct {
    shape s;
    const char *msg;
  } bad[] = {
    {{0, 3, 32, 32, 6, 5, 5, 1, 0}, "non-positive"},
    {{1, -1, 32, 32, 6, 5, 5, 1, 0}, "non-positive"},
    {{1, 3, 32, 32, 0, 5, 5, 1, 0}, "non-positive"},
    {{1, 3, 32, 32, 6, 5, 5, 0, 0}, "non-positive"},
    {{1, 3, 32, 32, 6, 5, 5, 1, -1}, "non-positive"},
    {{1, 3, 4, 32, 6, 5, 5, 1, 0}, "larger than"},
    {{1, 3, 32, 3, 6, 5, 5, 1, 0}, "larger than"},
    {{1, 3, 32, 32, 6, 0, 5, 1, 0}, "non-positive"},
    {{1 << 20, 64, 1024, 1024, 6, 5, 5, 1, 0}, "too large"},
    {{1, 1 << 16, 64, 64, 8, 11, 11, 1, 5}, "too large"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const shape *s = &bad[i].s;
    gs_conv_desc d = {.n = s->n, .c = s->c, .h = s->h, .w = s->w, .oc = s->oc, .kh = s->kh,
                      .kw = s->kw, .stride = s->stride, .pad = s->pad};
    gs_err e = {0};
    int rc = gs_conv_init(&d, &e);
    CHECK(rc == GS_EINVAL && strstr(e.msg, bad[i].msg), "bad shape %zu: rc %d '%s'", i, rc,
          e.msg);
  }
  /* a kernel exactly as large as the padded input is fine: one output */
  gs_conv_desc d = {.n = 1, .c = 1, .h = 3, .w = 3, .oc = 1, .kh = 5, .kw = 5, .stride = 1,
                    .pad = 1};
  gs_err e = {0};
  CHECK(gs_conv_init(&d, &e) == 0 && d.oh == 1 && d.ow == 1, "5x5 on padded 5x5: %s", e.msg);
}

int main(void) {
  tk_seed(7);
  test_init();
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    gs_kernels *k = tk_open((gs_cpu_isa)isa);
    if (!k) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) test_shape(k, &shapes[s]);
    k->destroy(k);
  }
  return check_done("test_conv");
}
