/* test_layers.c: bias, ReLU, softmax cross-entropy, im2col / col2im and
 * max-pool of the CPU table against naive references, on every code path
 * this CPU has; the element-wise ones must also give the scalar path's bits.
 *
 * im2col is checked against its definition and col2im against a naive
 * scatter and as the adjoint of im2col: <im2col(x), y> = <x, col2im(y)>. */
#include "tk.h"

static gs_kernels *paths[GS_ISA_COUNT];

/* ---- bias ---- */
static void test_bias(gs_kernels *k, float *out[4]) {
  const int rows = 37, cols = 83, n = 3, c = 5, plane = 29;
  float *bias = tk_malloc(cols * sizeof(float)), *y = tk_malloc(rows * cols * sizeof(float));
  float *y0 = tk_malloc(rows * cols * sizeof(float)), *db = tk_malloc(cols * sizeof(float));
  tk_seed(11);
  tk_fill(bias, cols, -1, 1);
  tk_fill(y0, rows * cols, -1, 1);
  memcpy(y, y0, rows * cols * sizeof(float));
  k->bias_add(k, rows, cols, bias, y);
  int bad = 0;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) bad += y[r * cols + j] != y0[r * cols + j] + bias[j];
  CHECK(bad == 0, "%s bias_add: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), bad);
  memcpy(out[0], y, rows * cols * sizeof(float));

  for (int j = 0; j < cols; j++) db[j] = NAN; /* overwritten, not accumulated */
  k->bias_grad(k, rows, cols, y0, db);
  bad = 0;
  for (int j = 0; j < cols; j++) {
    double s = 0;
    for (int r = 0; r < rows; r++) s += y0[r * cols + j];
    bad += !tk_close(db[j], s, 1e-5, 1e-6);
  }
  CHECK(bad == 0, "%s bias_grad: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), bad);
  memcpy(out[1], db, cols * sizeof(float));

  size_t tn = (size_t)n * c * plane;
  float *t = tk_malloc(tn * sizeof(float)), *t0 = tk_malloc(tn * sizeof(float));
  tk_fill(t0, tn, -1, 1);
  memcpy(t, t0, tn * sizeof(float));
  k->bias_add_nchw(k, n, c, plane, bias, t);
  bad = 0;
  for (int i = 0; i < n; i++)
    for (int ch = 0; ch < c; ch++)
      for (int p = 0; p < plane; p++) {
        size_t o = ((size_t)i * c + ch) * plane + p;
        bad += t[o] != t0[o] + bias[ch];
      }
  CHECK(bad == 0, "%s bias_add_nchw: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), bad);
  memcpy(out[2], t, tn * sizeof(float));

  for (int ch = 0; ch < c; ch++) db[ch] = NAN;
  k->bias_grad_nchw(k, n, c, plane, t0, db);
  bad = 0;
  for (int ch = 0; ch < c; ch++) {
    double s = 0;
    for (int i = 0; i < n; i++)
      for (int p = 0; p < plane; p++) s += t0[((size_t)i * c + ch) * plane + p];
    bad += !tk_close(db[ch], s, 1e-5, 1e-5);
  }
  CHECK(bad == 0, "%s bias_grad_nchw: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), bad);
  memcpy(out[3], db, c * sizeof(float));
  CHECK_SYNC_OK(k);
  free(bias);
  free(y);
  free(y0);
  free(db);
  free(t);
  free(t0);
}

/* a long bias_grad_nchw plane: the 16-lane order must hold past the tail */
static void test_bias_grad_long(void) {
  const int n = 2, c = 3, plane = 1000 + 13;
  size_t tn = (size_t)n * c * plane;
  float *t = tk_malloc(tn * sizeof(float));
  tk_seed(12);
  tk_fill(t, tn, -100, 100);
  float ref[3] = {0};
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    if (!paths[isa]) continue;
    float db[3];
    paths[isa]->bias_grad_nchw(paths[isa], n, c, plane, t, db);
    for (int ch = 0; ch < c; ch++) {
      double s = 0;
      for (int i = 0; i < n; i++)
        for (int p = 0; p < plane; p++) s += t[((size_t)i * c + ch) * plane + p];
      CHECK(tk_close(db[ch], s, 1e-5, 1e-3), "%s bias_grad_nchw long: %g vs %g",
            gs_cpu_isa_name((gs_cpu_isa)isa), (double)db[ch], s);
      if (isa == 0) ref[ch] = db[ch];
      CHECK(tk_bits(db[ch]) == tk_bits(ref[ch]), "%s bias_grad_nchw: %a, scalar path %a",
            gs_cpu_isa_name((gs_cpu_isa)isa), (double)db[ch], (double)ref[ch]);
    }
  }
  free(t);
}

/* ---- ReLU (PyTorch's: NaN passes, -0 stays -0; backward passes dy where
 * y > 0 or y is NaN) ---- */
static void test_relu(gs_kernels *k, float *out[2]) {
  const size_t n = 1000 + 7;
  float *x = tk_malloc(n * sizeof(float)), *y = tk_malloc(n * sizeof(float));
  float *dy = tk_malloc(n * sizeof(float)), *dx = tk_malloc(n * sizeof(float));
  tk_seed(21);
  tk_fill(x, n, -1, 1);
  tk_fill(dy, n, -1, 1);
  x[0] = -0.0f;
  x[1] = 0.0f;
  x[2] = NAN;
  x[3] = INFINITY;
  x[4] = -INFINITY;
  x[n - 1] = NAN;   /* in the tail of every vector width */
  x[n - 2] = -0.0f;
  x[500] = NAN;
  x[501] = -0.0f;
  k->relu(k, n, x, y);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    float want = isnan(x[i]) ? x[i] : (x[i] < 0 ? 0.0f : x[i]);
    bad += tk_bits(y[i]) != tk_bits(want);
  }
  CHECK(bad == 0, "%s relu: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), bad);
  memcpy(out[0], y, n * sizeof(float));
  k->relu_grad(k, n, y, dy, dx);
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    float want = (y[i] > 0 || isnan(y[i])) ? dy[i] : 0.0f;
    bad += tk_bits(dx[i]) != tk_bits(want);
  }
  CHECK(bad == 0, "%s relu_grad: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), bad);
  memcpy(out[1], dx, n * sizeof(float));
  /* in place, as the contract allows */
  memcpy(dx, x, n * sizeof(float));
  k->relu(k, n, dx, dx);
  CHECK(memcmp(dx, y, n * sizeof(float)) == 0, "relu in place differs");
  CHECK_SYNC_OK(k);
  free(x);
  free(y);
  free(dy);
  free(dx);
}

/* ---- softmax cross-entropy ---- */
static void ref_xent(int batch, int classes, const float *z, const int32_t *lab, double *probs,
                     double *loss, int *correct) {
  *loss = 0;
  *correct = 0;
  for (int i = 0; i < batch; i++) {
    const float *r = z + (size_t)i * classes;
    int arg = 0;
    for (int j = 1; j < classes; j++)
      if (r[j] > r[arg]) arg = j;
    double s = 0;
    for (int j = 0; j < classes; j++) s += exp((double)r[j] - r[arg]);
    double lse = r[arg] + log(s);
    for (int j = 0; j < classes; j++) probs[(size_t)i * classes + j] = exp(r[j] - lse);
    *loss += lse - r[lab[i]];
    *correct += arg == lab[i];
  }
  *loss /= batch;
}

static void test_xent(gs_kernels *k) {
  const int batch = 33, classes = 10;
  size_t n = (size_t)batch * classes;
  float *z = tk_malloc(n * sizeof(float)), *p = tk_malloc(n * sizeof(float));
  float *d = tk_malloc(n * sizeof(float));
  double *pr = tk_malloc(n * sizeof(double));
  int32_t lab[33];
  tk_seed(31);
  tk_fill(z, n, -3, 3);
  for (int i = 0; i < batch; i++) lab[i] = tk_int(classes);
  /* extreme logits: a huge winner, a huge loser, all huge and equal */
  for (int j = 0; j < classes; j++) {
    z[0 * classes + j] = j == 3 ? 1e4f : 0.0f;
    z[1 * classes + j] = j == lab[1] ? -1e4f : 1.0f;
    z[2 * classes + j] = 1e4f;
    z[3 * classes + j] = j < 5 ? -1e4f : 1e4f;
  }
  lab[0] = 3;
  double want_loss;
  int want_correct;
  ref_xent(batch, classes, z, lab, pr, &want_loss, &want_correct);
  float loss = NAN;
  int correct = -1;
  k->xent_forward(k, batch, classes, z, lab, p, &loss, &correct);
  CHECK_SYNC_OK(k);
  CHECK(isfinite(loss) && tk_close(loss, want_loss, 1e-6, 1e-6), "loss %.9g, want %.9g",
        (double)loss, want_loss);
  CHECK(correct == want_correct, "correct %d, want %d", correct, want_correct);
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += !(isfinite(p[i]) && tk_close(p[i], pr[i], 1e-6, 1e-7));
  CHECK(bad == 0, "probs: %d wrong", bad);
  /* NULL outputs are allowed */
  k->xent_forward(k, batch, classes, z, lab, p, NULL, NULL);
  CHECK_SYNC_OK(k);

  const float scales[2] = {1.0f, 65536.0f};
  for (int s = 0; s < 2; s++) {
    k->xent_backward(k, batch, classes, p, lab, scales[s], d);
    CHECK_SYNC_OK(k);
    bad = 0;
    for (int i = 0; i < batch; i++)
      for (int j = 0; j < classes; j++) {
        double w = (pr[(size_t)i * classes + j] - (j == lab[i])) * scales[s] / batch;
        bad += !tk_close(d[(size_t)i * classes + j], w, 1e-5, 1e-7 * scales[s]);
      }
    CHECK(bad == 0, "xent_backward scale %g: %d wrong", (double)scales[s], bad);
  }

  /* bad labels: sticky error from sync, naming the sample */
  int32_t badlab[33];
  memcpy(badlab, lab, sizeof lab);
  badlab[17] = classes;
  gs_err e = {0};
  k->xent_forward(k, batch, classes, z, badlab, p, &loss, &correct);
  int rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "sample 17"), "label = classes: rc %d '%s'", rc,
        e.msg);
  badlab[17] = -1;
  gs_err_clear(&e);
  k->xent_backward(k, batch, classes, p, badlab, 1.0f, d);
  rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "label -1"), "label -1: rc %d '%s'", rc, e.msg);
  CHECK_SYNC_OK(k);
  free(z);
  free(p);
  free(d);
  free(pr);
}

/* ---- im2col / col2im ---- */
static const int conv_shapes[][7] = {
  /* c, h, w, kh, kw, stride, pad */
  {3, 32, 32, 5, 5, 1, 0}, {2, 7, 9, 3, 3, 2, 1}, {1, 5, 5, 5, 5, 1, 2},
  {2, 6, 5, 3, 2, 3, 2},   {1, 4, 4, 1, 1, 1, 0}, {1, 3, 3, 5, 5, 1, 1},
  {2, 9, 9, 2, 2, 3, 0},   {3, 8, 11, 4, 3, 2, 3},
};

static void test_im2col(gs_kernels *k) {
  for (size_t s = 0; s < sizeof conv_shapes / sizeof conv_shapes[0]; s++) {
    const int *q = conv_shapes[s];
    gs_conv_desc d = {.n = 1, .c = q[0], .h = q[1], .w = q[2], .oc = 1, .kh = q[3], .kw = q[4],
                      .stride = q[5], .pad = q[6]};
    gs_err e = {0};
    REQUIRE(gs_conv_init(&d, &e) == 0);
    size_t plane = (size_t)d.oh * d.ow, kdim = (size_t)d.c * d.kh * d.kw;
    size_t xn = (size_t)d.c * d.h * d.w, cn = kdim * plane;
    float *x = tk_malloc(xn * sizeof(float)), *col = tk_malloc(cn * sizeof(float));
    float *y = tk_malloc(cn * sizeof(float)), *img = tk_malloc(xn * sizeof(float));
    double *want = tk_malloc(xn * sizeof(double));
    tk_fill(x, xn, -1, 1);
    tk_fill(y, cn, -1, 1);
    for (size_t i = 0; i < cn; i++) col[i] = NAN;
    k->im2col(k, &d, x, col);
    int bad = 0;
    for (int c = 0; c < d.c; c++)
      for (int i = 0; i < d.kh; i++)
        for (int j = 0; j < d.kw; j++)
          for (int oy = 0; oy < d.oh; oy++)
            for (int ox = 0; ox < d.ow; ox++) {
              int iy = oy * d.stride - d.pad + i, ix = ox * d.stride - d.pad + j;
              float w = (iy >= 0 && iy < d.h && ix >= 0 && ix < d.w)
                            ? x[((size_t)c * d.h + iy) * d.w + ix] : 0.0f;
              size_t r = ((size_t)c * d.kh + i) * d.kw + j;
              bad += tk_bits(col[r * plane + (size_t)oy * d.ow + ox]) != tk_bits(w);
            }
    CHECK(bad == 0, "%s im2col shape %zu: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), s,
          bad);

    /* col2im: a naive scatter, and the adjoint identity */
    for (size_t i = 0; i < xn; i++) want[i] = 0;
    for (int c = 0; c < d.c; c++)
      for (int i = 0; i < d.kh; i++)
        for (int j = 0; j < d.kw; j++)
          for (int oy = 0; oy < d.oh; oy++)
            for (int ox = 0; ox < d.ow; ox++) {
              int iy = oy * d.stride - d.pad + i, ix = ox * d.stride - d.pad + j;
              if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) continue;
              size_t r = ((size_t)c * d.kh + i) * d.kw + j;
              want[((size_t)c * d.h + iy) * d.w + ix] += y[r * plane + (size_t)oy * d.ow + ox];
            }
    memset(img, 0, xn * sizeof(float));
    k->col2im(k, &d, y, img);
    bad = 0;
    for (size_t i = 0; i < xn; i++) bad += !tk_close(img[i], want[i], 1e-6, 1e-6);
    CHECK(bad == 0, "%s col2im shape %zu: %d wrong", gs_cpu_isa_name(gs_kernels_cpu_isa(k)), s,
          bad);
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t i = 0; i < cn; i++) {
      lhs += (double)col[i] * y[i];
      mag += fabs((double)col[i] * y[i]);
    }
    for (size_t i = 0; i < xn; i++) rhs += (double)x[i] * img[i];
    CHECK(fabs(lhs - rhs) <= 1e-6 * mag + 1e-9, "adjoint shape %zu: <im2col x, y> %.12g vs "
          "<x, col2im y> %.12g", s, lhs, rhs);
    /* col2im accumulates into img */
    for (size_t i = 0; i < xn; i++) img[i] = 1.0f;
    k->col2im(k, &d, y, img);
    bad = 0;
    for (size_t i = 0; i < xn; i++) bad += !tk_close(img[i], want[i] + 1.0, 1e-6, 1e-6);
    CHECK(bad == 0, "col2im does not add into img (shape %zu): %d", s, bad);
    free(x);
    free(col);
    free(y);
    free(img);
    free(want);
  }
  CHECK_SYNC_OK(k);
}

/* ---- max-pool ---- */
static void test_maxpool(gs_kernels *k) {
  static const int shapes[][3] = {{3, 8, 8}, {2, 5, 7}, {1, 2, 2}, {4, 1, 6}, {2, 7, 3}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int planes = shapes[s][0], h = shapes[s][1], w = shapes[s][2], oh = h / 2, ow = w / 2;
    size_t xn = (size_t)planes * h * w, yn = (size_t)planes * oh * ow;
    float *x = tk_malloc(xn * sizeof(float)), *y = tk_malloc((yn + 1) * sizeof(float));
    float *dy = tk_malloc((yn + 1) * sizeof(float)), *dx = tk_malloc(xn * sizeof(float));
    int32_t *arg = tk_malloc((yn + 1) * sizeof(int32_t));
    double *want = tk_malloc(xn * sizeof(double));
    for (size_t i = 0; i < xn; i++) x[i] = (float)tk_int(3); /* many ties */
    if (xn > 9) {
      x[5] = NAN;
      x[xn - 2] = NAN;
    }
    tk_fill(dy, yn, -1, 1);
    for (size_t i = 0; i < xn; i++) dx[i] = NAN; /* overwritten */
    k->maxpool_forward(k, planes, h, w, x, y, arg);
    k->maxpool_backward(k, planes, h, w, dy, arg, dx);
    for (size_t i = 0; i < xn; i++) want[i] = 0;
    int bad = 0;
    for (int p = 0; p < planes; p++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          int best = -1;
          float bv = 0;
          for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
              int idx = (2 * oy + a) * w + 2 * ox + b;
              float v = x[(size_t)p * h * w + idx];
              /* first max in row-major order; NaN beats everything (PyTorch) */
              if (best < 0 || v > bv || isnan(v)) {
                best = idx;
                bv = v;
              }
            }
          size_t o = ((size_t)p * oh + oy) * ow + ox;
          bad += arg[o] != best || tk_bits(y[o]) != tk_bits(bv);
          want[(size_t)p * h * w + best] += dy[o];
        }
    CHECK(bad == 0, "%s maxpool_forward %dx%dx%d: %d wrong",
          gs_cpu_isa_name(gs_kernels_cpu_isa(k)), planes, h, w, bad);
    bad = 0;
    for (size_t i = 0; i < xn; i++) bad += tk_bits(dx[i]) != tk_bits((float)want[i]);
    CHECK(bad == 0, "maxpool_backward %dx%dx%d: %d wrong", planes, h, w, bad);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(arg);
    free(want);
  }
  /* an argmax that cannot come from forward is an error, not a wild write */
  float dy = 1, dx[4];
  int32_t arg = 4;
  gs_err e = {0};
  k->maxpool_backward(k, 1, 2, 2, &dy, &arg, dx);
  int rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "argmax"), "bad argmax: rc %d '%s'", rc, e.msg);
}

int main(void) {
  float *bias_out[GS_ISA_COUNT][4], *relu_out[GS_ISA_COUNT][2];
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    paths[isa] = tk_open((gs_cpu_isa)isa);
    for (int j = 0; j < 4; j++) bias_out[isa][j] = tk_malloc(37 * 83 * sizeof(float));
    for (int j = 0; j < 2; j++) relu_out[isa][j] = tk_malloc(1007 * sizeof(float));
    if (!paths[isa]) continue;
    gs_kernels *k = paths[isa];
    test_bias(k, bias_out[isa]);
    test_relu(k, relu_out[isa]);
    test_xent(k);
    tk_seed(41);
    test_im2col(k);
    tk_seed(51);
    test_maxpool(k);
  }
  test_bias_grad_long();
  /* every path gives the scalar path's bits */
  const size_t bias_n[4] = {37 * 83, 83, 3 * 5 * 29, 5};
  for (int isa = 1; isa < GS_ISA_COUNT; isa++) {
    if (!paths[isa]) continue;
    for (int j = 0; j < 4; j++)
      CHECK(memcmp(bias_out[isa][j], bias_out[0][j], bias_n[j] * sizeof(float)) == 0,
            "%s: bias op %d differs from the scalar path", gs_cpu_isa_name((gs_cpu_isa)isa), j);
    for (int j = 0; j < 2; j++)
      CHECK(memcmp(relu_out[isa][j], relu_out[0][j], 1007 * sizeof(float)) == 0,
            "%s: relu op %d differs from the scalar path", gs_cpu_isa_name((gs_cpu_isa)isa), j);
  }
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    for (int j = 0; j < 4; j++) free(bias_out[isa][j]);
    for (int j = 0; j < 2; j++) free(relu_out[isa][j]);
    if (paths[isa]) paths[isa]->destroy(paths[isa]);
  }
  return check_done("test_layers");
}
