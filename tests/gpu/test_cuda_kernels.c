/* test_cuda_kernels.c: every op of the CUDA table against the CPU table,
 * on random inputs, on a real GPU (suite gpu; exit 77 = skipped without
 * one). GS_TEST_DEVICE picks the GPU (default 0).
 *
 * Tolerances (u = 2^-24, gamma_n = n*u / (1 - n*u)):
 *  - bit-exact: memory ops, bias_add(_nchw), relu(_grad), xent_backward, im2col, col2im, maxpool, sgd,
 *    add, axpy, scale, add_lp, every conversion (all 65536 fp16 / bf16
 *    patterns, 1M fp32 patterns), nonfinite counts; the CUDA build uses
 *    --fmad=false so these are the CPU's roundings;
 *  - gemm (fp32, TF32 off): |gpu - cpu| <= 2*gamma_{k+2} * (|alpha| sum_p
 *    |a_ip b_pj| + |beta c_ij|), the classical bound for two different
 *    summation orders; gemm_lp (fp16 / bf16 inputs, exact products, fp32
 *    accumulation in tensor cores that may truncate): the same with 8u;
 *  - bias_grad, bias_grad_nchw (tree vs sequential): 2*gamma_N * sum|dy|,
 *    and the same bits when run again;
 *  - xent_forward: probs and the mean loss within 2 ulp (double exp/log of
 *    the GPU vs glibc, rounded to float), correct count exact;
 *  - conv2d forward/backward (composite over im2col + GEMM + col2im):
 *    |diff| <= 1e-5 * max|cpu| + the gemm bound is not tracked through the
 *    composite, so 1e-5 of the largest magnitude.
 * The element-wise ops are also run at lengths 0, 1, odd and 2^24 + 3, on
 * pointers 1 and 3 elements into an allocation (test_lengths). */
#include <stdbool.h>

#include <cblas.h>

#include "kernels/cuda/cuda_impl.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_check.h"

static gs_kernels *cpu, *gpu;
static rng R = {0xD1B54A32D192ED03ULL};

static void *up(const void *host, size_t bytes) {
  void *d = gpu->alloc(gpu, bytes);
  if (d) gpu->to_device(gpu, d, host, bytes);
  return d;
}
static void *down(const void *dev, size_t bytes) {
  void *h = xmalloc(bytes);
  gpu->to_host(gpu, h, dev, bytes);
  return h;
}
static float *rnd(size_t n, float lo, float hi) {
  float *x = xmalloc(n * sizeof *x);
  fill_uniform(&R, x, n, lo, hi);
  return x;
}
static float *copy_of(const float *x, size_t n) {
  float *y = xmalloc(n * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}
static double gamma_n(size_t n, double u) { return (double)n * u / (1.0 - (double)n * u); }

/* gpu->sync must succeed after every group of ops */
#define SYNC_OK(what)                                                           \
  do {                                                                          \
    gs_err e_ = {0};                                                            \
    int rc_ = gpu->sync(gpu, &e_);                                              \
    CHECK(rc_ == GS_OK, "%s: sync: %s (%s)", what, gs_strerror(rc_), e_.msg);   \
  } while (0)

static void test_memory(void) {
  size_t n = 1 << 20, before = 0, during = 0, peak = 0;
  gs_cuda_mem(gpu, &before, NULL);
  unsigned char *d = gpu->alloc(gpu, n);
  CHECK(d != NULL, "alloc of %zu bytes", n);
  gs_cuda_mem(gpu, &during, &peak);
  CHECK(during == before + n && peak >= during, "mem: %zu -> %zu (peak %zu)", before, during,
        peak);
  unsigned char *h = down(d, n), *zero = xmalloc(n);
  CHECK(!memcmp(h, zero, n), "alloc is not zeroed");
  unsigned char *pin = gpu->alloc_host(gpu, n);
  CHECK(pin != NULL, "alloc_host");
  for (size_t i = 0; i < n; i++) pin[i] = (unsigned char)(i * 7 + 3);
  gpu->to_device(gpu, d, pin, n);
  unsigned char *d2 = gpu->alloc(gpu, n);
  gpu->copy(gpu, d2, d, n);
  memset(h, 0, n);
  gpu->to_host(gpu, h, d2, n);
  CHECK(!memcmp(h, pin, n), "to_device / copy / to_host round trip");
  /* overlapping copy: memmove semantics, as the CPU table */
  gpu->copy(gpu, d2 + 10, d2, 5000);
  memmove(pin + 10, pin, 5000);
  gpu->to_host(gpu, h, d2, n);
  CHECK(!memcmp(h, pin, n), "overlapping copy forward");
  gpu->copy(gpu, d2, d2 + 7, 3000);
  memmove(pin, pin + 7, 3000);
  gpu->to_host(gpu, h, d2, n);
  CHECK(!memcmp(h, pin, n), "overlapping copy backward");
  gpu->zero(gpu, d2 + 100, 1000);
  gpu->to_host(gpu, h, d2, n);
  CHECK(h[99] == pin[99] && h[100] == 0 && h[1099] == 0 && h[1100] == pin[1100], "zero range");
  SYNC_OK("memory");
  gpu->release(gpu, d);
  gpu->release(gpu, d2);
  gpu->release_host(gpu, pin);
  size_t after = 0;
  gs_cuda_mem(gpu, &after, NULL);
  CHECK(after == before, "mem after release %zu, before %zu", after, before);
  free(h);
  free(zero);

  /* an impossible allocation: NULL, a sticky ENOMEM naming cudaMalloc, and
   * the table keeps working */
  void *huge = gpu->alloc(gpu, (size_t)1 << 52);
  CHECK(huge == NULL, "a 4 PiB alloc succeeded");
  gs_err e = {0};
  int rc = gpu->sync(gpu, &e);
  CHECK(rc == GS_ENOMEM && strstr(e.msg, "cudaMalloc"), "huge alloc: %s (%s)", gs_strerror(rc),
        e.msg);
  SYNC_OK("after a failed alloc");
}

/* op(A) m x k, op(B) k x n, row-major, padded leading dimensions */
static void gemm_case(gs_dtype t, bool ta, bool tb, int m, int n, int k, float alpha,
                      float beta) {
  int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
  int lda = acols + (m % 3), ldb = bcols + 1, ldc = n + 2;
  size_t na = (size_t)arows * lda, nb = (size_t)brows * ldb, nc = (size_t)m * ldc;
  float *a = rnd(na, -1, 1), *b = rnd(nb, -1, 1), *c0 = rnd(nc, -1, 1);
  float *c1 = copy_of(c0, nc);
  size_t es = gs_dtype_size(t);
  void *alp = xmalloc(na * es), *blp = xmalloc(nb * es);
  cpu->convert(cpu, t, alp, GS_F32, a, na);
  cpu->convert(cpu, t, blp, GS_F32, b, nb);
  /* the exact inputs both sides use, widened, for the bound */
  float *aw = xmalloc(na * 4), *bw = xmalloc(nb * 4);
  cpu->convert(cpu, GS_F32, aw, t, alp, na);
  cpu->convert(cpu, GS_F32, bw, t, blp, nb);
  if (t == GS_F32)
    cpu->gemm(cpu, ta, tb, m, n, k, alpha, aw, lda, bw, ldb, beta, c1, ldc);
  else
    cpu->gemm_lp(cpu, t, ta, tb, m, n, k, alpha, alp, lda, blp, ldb, beta, c1, ldc);
  void *da = up(alp, na * es), *db = up(blp, nb * es);
  float *dc = up(c0, nc * 4);
  if (t == GS_F32)
    gpu->gemm(gpu, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);
  else
    gpu->gemm_lp(gpu, t, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);
  SYNC_OK("gemm");
  float *c2 = down(dc, nc * 4);
  /* bound: |alpha| |A||B| + |beta||C| */
  for (size_t i = 0; i < na; i++) aw[i] = fabsf(aw[i]);
  for (size_t i = 0; i < nb; i++) bw[i] = fabsf(bw[i]);
  float *absc = xmalloc(nc * 4);
  for (size_t i = 0; i < nc; i++) absc[i] = fabsf(c0[i]);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, k, fabsf(alpha), aw, lda, bw, ldb, fabsf(beta), absc, ldc);
  double u = t == GS_F32 ? ldexp(1.0, -24) : ldexp(1.0, -21);
  double *tol = xmalloc(nc * sizeof *tol);
  for (int r = 0; r < m; r++)
    for (int j = 0; j < ldc; j++) {
      size_t i = (size_t)r * ldc + j;
      tol[i] = j < n ? 2.0 * gamma_n((size_t)k + 2, u) * absc[i] * 1.01 + 1e-30 : 0.0;
    }
  CHECK(within("gemm", c2, c1, nc, tol, 0), "%s ta %d tb %d m %d n %d k %d", gs_dtype_name(t),
        ta, tb, m, n, k);
  /* cuBLAS with one stream per handle is deterministic: same bits again */
  gpu->to_device(gpu, dc, c0, nc * 4);
  if (t == GS_F32)
    gpu->gemm(gpu, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);
  else
    gpu->gemm_lp(gpu, t, ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);
  float *c3 = down(dc, nc * 4);
  CHECK(same_bits("gemm rerun", c3, c2, nc, 4), "%s ta %d tb %d", gs_dtype_name(t), ta, tb);
  gpu->release(gpu, da);
  gpu->release(gpu, db);
  gpu->release(gpu, dc);
  free(a); free(b); free(c0); free(c1); free(c2); free(c3); free(alp); free(blp); free(aw);
  free(bw); free(absc); free(tol);
}

static void test_gemm(void) {
  int shapes[][3] = {{13, 7, 9}, {64, 256, 784}, {64, 10, 84}, {6, 784, 75}, {1, 1, 1},
                     {120, 400, 64}};
  gs_dtype ts[] = {GS_F32, GS_F16, GS_BF16};
  for (size_t t = 0; t < 3; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
          gemm_case(ts[t], ta, tb, shapes[s][0], shapes[s][1], shapes[s][2],
                    s % 2 ? 1.0f : 0.5f, s % 3 ? 0.0f : 0.75f);
  /* k = 0: C *= beta */
  int m = 5, n = 4, ldc = 6;
  float *c0 = rnd((size_t)m * ldc, -1, 1), *c1 = copy_of(c0, (size_t)m * ldc);
  cpu->gemm(cpu, false, false, m, n, 0, 1.0f, NULL, 1, NULL, n, 0.5f, c1, ldc);
  gs_err ce = {0};
  CHECK(cpu->sync(cpu, &ce) == GS_OK, "CPU gemm k=0: %s", ce.msg);
  float *dc = up(c0, (size_t)m * ldc * 4);
  gpu->gemm(gpu, false, false, m, n, 0, 1.0f, NULL, 1, NULL, n, 0.5f, dc, ldc);
  float *c2 = down(dc, (size_t)m * ldc * 4);
  SYNC_OK("gemm k=0");
  CHECK(same_bits("gemm k=0", c2, c1, (size_t)m * ldc, 4), "k=0");
  /* a bad leading dimension is a sticky error naming the op, then cleared */
  gpu->gemm(gpu, false, false, m, n, 3, 1.0f, dc, 1, dc, ldc, 0.0f, dc, ldc);
  gs_err e = {0};
  int rc = gpu->sync(gpu, &e);
  CHECK(rc == GS_EDEVICE && strstr(e.msg, "gemm"), "bad lda: %s (%s)", gs_strerror(rc), e.msg);
  SYNC_OK("after a failed gemm");
  gpu->release(gpu, dc);
  free(c0); free(c1); free(c2);
}

static void test_layers(void) {
  int rows = 64, cols = 120;
  size_t n = (size_t)rows * cols;
  float *y0 = rnd(n, -2, 2), *bias = rnd((size_t)cols, -1, 1), *y1 = copy_of(y0, n);
  float *dy = up(y0, n * 4), *dbias = up(bias, (size_t)cols * 4);
  cpu->bias_add(cpu, rows, cols, bias, y1);
  gpu->bias_add(gpu, rows, cols, dbias, dy);
  float *y2 = down(dy, n * 4);
  CHECK(same_bits("bias_add", y2, y1, n, 4), " ");
  /* the kernel's blocks of 32 columns: columns that do not fill one, rows
   * fewer than its 8 parts, the classifier's shape at a large batch */
  int bg[][2] = {{64, 120}, {0, 7}, {1, 1}, {129, 33}, {1031, 10}, {1024, 2050}, {3, 64}};
  for (size_t i = 0; i < sizeof bg / sizeof bg[0]; i++) {
    int br = bg[i][0], bc = bg[i][1];
    size_t bn = (size_t)br * bc;
    float *by = rnd(bn, -2, 2), *bg1 = rnd((size_t)bc, -1, 1);
    float *dby = up(by, bn * 4), *dbg = up(bg1, (size_t)bc * 4);
    cpu->bias_grad(cpu, br, bc, by, bg1);
    gpu->bias_grad(gpu, br, bc, dby, dbg);
    float *bg2 = down(dbg, (size_t)bc * 4);
    double *btol = xmalloc((size_t)bc * sizeof *btol);
    for (int j = 0; j < bc; j++) {
      double a = 0;
      for (int r = 0; r < br; r++) a += fabs(by[(size_t)r * bc + j]);
      btol[j] = 2.0 * gamma_n((size_t)br, ldexp(1.0, -24)) * a;
    }
    CHECK(within("bias_grad", bg2, bg1, (size_t)bc, btol, 0), "rows %d cols %d", br, bc);
    gpu->bias_grad(gpu, br, bc, dby, dbg);
    float *bg3 = down(dbg, (size_t)bc * 4);
    CHECK(same_bits("bias_grad rerun", bg3, bg2, (size_t)bc, 4), "not deterministic");
    gpu->release(gpu, dby);
    gpu->release(gpu, dbg);
    free(by); free(bg1); free(bg2); free(bg3); free(btol);
  }

  int nn = 16, c = 6, plane = 28 * 28;
  size_t tn = (size_t)nn * c * plane;
  float *x0 = rnd(tn, -2, 2), *x1 = copy_of(x0, tn), *b6 = rnd((size_t)c, -1, 1);
  float *dx = up(x0, tn * 4), *db6 = up(b6, (size_t)c * 4);
  cpu->bias_add_nchw(cpu, nn, c, plane, b6, x1);
  gpu->bias_add_nchw(gpu, nn, c, plane, db6, dx);
  float *x2 = down(dx, tn * 4);
  CHECK(same_bits("bias_add_nchw", x2, x1, tn, 4), " ");
  float *s1 = xmalloc((size_t)c * 4), *ds = gpu->alloc(gpu, (size_t)c * 4);
  cpu->bias_grad_nchw(cpu, nn, c, plane, x1, s1);
  gpu->bias_grad_nchw(gpu, nn, c, plane, dx, ds);
  float *s2 = down(ds, (size_t)c * 4);
  double tol[6];
  for (int ch = 0; ch < c; ch++) {
    double a = 0;
    for (int i = 0; i < nn; i++)
      for (int j = 0; j < plane; j++) a += fabs(x1[((size_t)i * c + ch) * plane + j]);
    tol[ch] = 2.0 * gamma_n((size_t)nn * plane, ldexp(1.0, -24)) * a;
  }
  CHECK(within("bias_grad_nchw", s2, s1, (size_t)c, tol, 0), " ");
  gpu->bias_grad_nchw(gpu, nn, c, plane, dx, ds);
  float *s3 = down(ds, (size_t)c * 4);
  CHECK(same_bits("bias_grad_nchw rerun", s3, s2, (size_t)c, 4), "not deterministic");

  float *r1 = xmalloc(tn * 4);
  cpu->relu(cpu, tn, x1, r1);
  gpu->relu(gpu, tn, dx, dx);  /* in place */
  float *r2 = down(dx, tn * 4);
  CHECK(same_bits("relu", r2, r1, tn, 4), " ");
  float *gy = rnd(tn, -1, 1), *gx1 = xmalloc(tn * 4), *dgy = up(gy, tn * 4);
  cpu->relu_grad(cpu, tn, r1, gy, gx1);
  gpu->relu_grad(gpu, tn, dx, dgy, dgy);
  float *gx2 = down(dgy, tn * 4);
  CHECK(same_bits("relu_grad", gx2, gx1, tn, 4), " ");
  SYNC_OK("layers");
  gpu->release(gpu, dy); gpu->release(gpu, dbias);
  gpu->release(gpu, dx); gpu->release(gpu, db6); gpu->release(gpu, ds); gpu->release(gpu, dgy);
  free(y0); free(bias); free(y1); free(y2); free(x0); free(x1); free(b6);
  free(x2); free(s1); free(s2); free(s3); free(r1); free(r2); free(gy); free(gx1); free(gx2);
}

/* batch 2500 spans three of the total's 1024-row stages */
static void xent_case(int batch) {
  int classes = 10;
  size_t n = (size_t)batch * classes;
  float *z = rnd(n, -8, 8);
  int32_t *lab = xmalloc((size_t)batch * 4);
  for (int i = 0; i < batch; i++) lab[i] = rng_int(&R, classes);
  float *p1 = xmalloc(n * 4), loss1 = 0, loss2 = -1;
  int c1 = 0, c2 = -1;
  cpu->xent_forward(cpu, batch, classes, z, lab, p1, &loss1, &c1);
  float *dz = up(z, n * 4), *dp = gpu->alloc(gpu, n * 4);
  int32_t *dl = up(lab, (size_t)batch * 4);
  gpu->xent_forward(gpu, batch, classes, dz, dl, dp, &loss2, &c2);
  SYNC_OK("xent_forward");
  float *p2 = down(dp, n * 4);
  double *tol = xmalloc(n * sizeof *tol);
  for (size_t i = 0; i < n; i++) tol[i] = 2.0 * ldexp(fabs(p1[i]), -23) + 1e-44;
  CHECK(within("xent probs", p2, p1, n, tol, 0), " ");
  double lt = 2.0 * ldexp(fabs(loss1), -23);
  CHECK(within("xent loss", &loss2, &loss1, 1, &lt, 0), " ");
  CHECK(c1 == c2, "correct %d vs %d", c2, c1);
  /* NULL host pointers are allowed */
  gpu->xent_forward(gpu, batch, classes, dz, dl, dp, NULL, NULL);
  SYNC_OK("xent_forward NULL");

  float *d1 = xmalloc(n * 4), *dd = gpu->alloc(gpu, n * 4);
  gpu->to_device(gpu, dp, p1, n * 4);  /* the same probs on both sides */
  cpu->xent_backward(cpu, batch, classes, p1, lab, 65536.0f, d1);
  gpu->xent_backward(gpu, batch, classes, dp, dl, 65536.0f, dd);
  float *d2 = down(dd, n * 4);
  CHECK(same_bits("xent_backward", d2, d1, n, 4), " ");
  SYNC_OK("xent_backward");

  int badrow = batch - 3;
  lab[badrow] = classes + 3;
  lab[batch - 1] = -1;  /* a later bad row: the first is named */
  gpu->to_device(gpu, dl, lab, (size_t)batch * 4);
  loss2 = 12345.0f;
  gpu->xent_forward(gpu, batch, classes, dz, dl, dp, &loss2, &c2);
  gs_err e = {0};
  int rc = gpu->sync(gpu, &e);
  char want[32];
  snprintf(want, sizeof want, "row %d ", badrow);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "outside") && strstr(e.msg, want),
        "bad label: %s (%s)", gs_strerror(rc), e.msg);
  CHECK(loss2 == 12345.0f, "loss written despite a bad label");
  SYNC_OK("after a bad label");
  gpu->release(gpu, dz); gpu->release(gpu, dp); gpu->release(gpu, dl); gpu->release(gpu, dd);
  free(z); free(lab); free(p1); free(p2); free(tol); free(d1); free(d2);
}

static void test_xent(void) {
  xent_case(100);
  xent_case(2500);
}

static float max_abs(const float *x, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
  return m;
}

static void test_conv(void) {
  gs_conv_desc ds[] = {
      {.n = 4, .c = 3, .h = 32, .w = 32, .oc = 6, .kh = 5, .kw = 5, .stride = 1, .pad = 0},
      {.n = 3, .c = 6, .h = 14, .w = 14, .oc = 16, .kh = 5, .kw = 5, .stride = 1, .pad = 0},
      {.n = 2, .c = 2, .h = 9, .w = 7, .oc = 3, .kh = 3, .kw = 3, .stride = 2, .pad = 1},
  };
  for (size_t s = 0; s < sizeof ds / sizeof ds[0]; s++) {
    gs_conv_desc d = ds[s];
    gs_err e = {0};
    CHECK(gs_conv_init(&d, &e) == GS_OK, "%s", e.msg);
    size_t nimg = (size_t)d.c * d.h * d.w, ncol = gs_conv_workspace(&d);
    float *img = rnd(nimg, -1, 1), *c1 = xmalloc(ncol * 4);
    float *dimg = up(img, nimg * 4), *dcol = gpu->alloc(gpu, ncol * 4);
    cpu->im2col(cpu, &d, img, c1);
    gpu->im2col(gpu, &d, dimg, dcol);
    float *c2 = down(dcol, ncol * 4);
    CHECK(same_bits("im2col", c2, c1, ncol, 4), "desc %zu", s);
    float *col = rnd(ncol, -1, 1), *i1 = rnd(nimg, -1, 1);
    gpu->to_device(gpu, dcol, col, ncol * 4);
    gpu->to_device(gpu, dimg, i1, nimg * 4);
    cpu->col2im(cpu, &d, col, i1);
    gpu->col2im(gpu, &d, dcol, dimg);
    float *i2 = down(dimg, nimg * 4);
    CHECK(same_bits("col2im", i2, i1, nimg, 4), "desc %zu", s);
    SYNC_OK("im2col/col2im");
    gpu->release(gpu, dimg);
    gpu->release(gpu, dcol);
    free(img); free(c1); free(c2); free(col); free(i1); free(i2);

    /* the composite layer of conv.c on both tables */
    size_t nx = (size_t)d.n * nimg, nw = (size_t)d.oc * d.c * d.kh * d.kw;
    size_t ny = (size_t)d.n * d.oc * d.oh * d.ow;
    float *x = rnd(nx, -1, 1), *w = rnd(nw, -0.2f, 0.2f), *b = rnd((size_t)d.oc, -0.1f, 0.1f);
    float *gy = rnd(ny, -1, 1);
    float *y1 = xmalloc(ny * 4), *ws = xmalloc(ncol * 4), *gx1 = xmalloc(nx * 4),
          *gw1 = xmalloc(nw * 4), *gb1 = xmalloc((size_t)d.oc * 4);
    gs_conv2d_forward(cpu, &d, x, w, b, y1, ws);
    gs_conv2d_backward(cpu, &d, x, w, gy, gx1, gw1, gb1, ws);
    float *dx = up(x, nx * 4), *dw = up(w, nw * 4), *db = up(b, (size_t)d.oc * 4),
          *dgy = up(gy, ny * 4), *dy = gpu->alloc(gpu, ny * 4), *dws = gpu->alloc(gpu, ncol * 4),
          *dgx = gpu->alloc(gpu, nx * 4), *dgw = gpu->alloc(gpu, nw * 4),
          *dgb = gpu->alloc(gpu, (size_t)d.oc * 4);
    gs_conv2d_forward(gpu, &d, dx, dw, db, dy, dws);
    gs_conv2d_backward(gpu, &d, dx, dw, dgy, dgx, dgw, dgb, dws);
    SYNC_OK("conv2d");
    float *y2 = down(dy, ny * 4), *gx2 = down(dgx, nx * 4), *gw2 = down(dgw, nw * 4),
          *gb2 = down(dgb, (size_t)d.oc * 4);
    CHECK(within("conv2d y", y2, y1, ny, NULL, 1e-5 * max_abs(y1, ny)), "desc %zu", s);
    CHECK(within("conv2d dx", gx2, gx1, nx, NULL, 1e-5 * max_abs(gx1, nx)), "desc %zu", s);
    CHECK(within("conv2d dw", gw2, gw1, nw, NULL, 1e-5 * max_abs(gw1, nw)), "desc %zu", s);
    CHECK(within("conv2d db", gb2, gb1, (size_t)d.oc, NULL, 1e-5 * max_abs(gb1, (size_t)d.oc)),
          "desc %zu", s);
    float *bufs[] = {dx, dw, db, dgy, dy, dws, dgx, dgw, dgb};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu->release(gpu, bufs[i]);
    free(x); free(w); free(b); free(gy); free(y1); free(ws); free(gx1); free(gw1); free(gb1);
    free(y2); free(gx2); free(gw2); free(gb2);
  }
}

static void test_maxpool(void) {
  int planes = 64 * 6, h = 28, w = 28;
  size_t nin = (size_t)planes * h * w, nout = (size_t)planes * (h / 2) * (w / 2);
  float *x = xmalloc(nin * 4);
  for (size_t i = 0; i < nin; i++) x[i] = (float)rng_int(&R, 9) - 4.0f;  /* ties */
  float *y1 = xmalloc(nout * 4);
  int32_t *a1 = xmalloc(nout * 4);
  cpu->maxpool_forward(cpu, planes, h, w, x, y1, a1);
  float *dxin = up(x, nin * 4), *dy = gpu->alloc(gpu, nout * 4);
  int32_t *da = gpu->alloc(gpu, nout * 4);
  gpu->maxpool_forward(gpu, planes, h, w, dxin, dy, da);
  float *y2 = down(dy, nout * 4);
  int32_t *a2 = down(da, nout * 4);
  CHECK(same_bits("maxpool y", y2, y1, nout, 4), " ");
  CHECK(same_bits("maxpool argmax", a2, a1, nout, 4), " ");
  float *g = rnd(nout, -1, 1), *gx1 = xmalloc(nin * 4), *dg = up(g, nout * 4);
  cpu->maxpool_backward(cpu, planes, h, w, g, a1, gx1);
  gpu->maxpool_backward(gpu, planes, h, w, dg, da, dxin);
  float *gx2 = down(dxin, nin * 4);
  CHECK(same_bits("maxpool_backward", gx2, gx1, nin, 4), " ");
  SYNC_OK("maxpool");
  gpu->release(gpu, dxin); gpu->release(gpu, dy); gpu->release(gpu, da); gpu->release(gpu, dg);
  free(x); free(y1); free(a1); free(y2); free(a2); free(g); free(gx1); free(gx2);
}

static void test_optimizer_and_algebra(void) {
  size_t n = 3 * 1000 * 1000 + 7;
  gs_sgd h = {0.05f, 0.9f, 1e-4f};
  float *p = rnd(n, -1, 1), *g = rnd(n, -1, 1), *b = xmalloc(n * 4);
  float *dp = up(p, n * 4), *dg = up(g, n * 4), *db = gpu->alloc(gpu, n * 4);
  for (int step = 0; step < 3; step++) {
    cpu->sgd(cpu, n, p, g, b, h, step == 0);
    gpu->sgd(gpu, n, dp, dg, db, h, step == 0);
  }
  gs_sgd plain = {0.1f, 0.0f, 0.0f};
  cpu->sgd(cpu, n, p, g, NULL, plain, false);
  gpu->sgd(gpu, n, dp, dg, NULL, plain, false);
  float *p2 = down(dp, n * 4), *b2 = down(db, n * 4);
  CHECK(same_bits("sgd p", p2, p, n, 4), " ");
  CHECK(same_bits("sgd buf", b2, b, n, 4), " ");

  cpu->add(cpu, n, p, g);
  gpu->add(gpu, n, dp, dg);
  cpu->axpy(cpu, n, -0.3f, g, p);
  gpu->axpy(gpu, n, -0.3f, dg, dp);
  cpu->scale(cpu, n, 1.0f / 7.0f, p);
  gpu->scale(gpu, n, 1.0f / 7.0f, dp);
  free(p2);
  p2 = down(dp, n * 4);
  CHECK(same_bits("add/axpy/scale", p2, p, n, 4), " ");

  gs_dtype ts[] = {GS_F16, GS_BF16, GS_F32};
  void *lp = xmalloc(n * 4), *dlp = gpu->alloc(gpu, n * 4);
  for (int t = 0; t < 3; t++) {
    cpu->convert(cpu, ts[t], lp, GS_F32, g, n);
    gpu->to_device(gpu, dlp, lp, n * gs_dtype_size(ts[t]));
    cpu->add_lp(cpu, ts[t], n, p, lp);
    gpu->add_lp(gpu, ts[t], n, dp, dlp);
  }
  free(p2);
  p2 = down(dp, n * 4);
  CHECK(same_bits("add_lp", p2, p, n, 4), " ");
  SYNC_OK("optimizer");
  gpu->release(gpu, dp); gpu->release(gpu, dg); gpu->release(gpu, db); gpu->release(gpu, dlp);
  free(p); free(g); free(b); free(b2); free(p2); free(lp);
}

static void test_convert(void) {
  size_t n16 = 65536, n = 1 << 20;
  uint16_t *h = xmalloc(n16 * 2);
  for (size_t i = 0; i < n16; i++) h[i] = (uint16_t)i;
  uint32_t *bits = xmalloc(n * 4);
  for (size_t i = 0; i < n; i++) bits[i] = (uint32_t)rng_next(&R);
  for (size_t i = 0; i < n / 2; i++)
    bits[i] = 0x33000000u + (uint32_t)(rng_next(&R) % (0x47800000u - 0x33000000u)) +
              (bits[i] & 0x80000000u);
  bits[0] = 0x7f800001u;  /* signalling NaN: payload kept, quiet bit set */
  bits[1] = 0x477ff000u;  /* rounds to inf in fp16 */
  uint16_t *dh = up(h, n16 * 2), *d16 = gpu->alloc(gpu, n * 2);
  uint32_t *dbits = up(bits, n * 4);
  float *f1 = xmalloc(n * 4), *df = gpu->alloc(gpu, n * 4);
  uint16_t *l1 = xmalloc(n * 2);
  gs_dtype lps[] = {GS_F16, GS_BF16};
  for (int a = 0; a < 2; a++) {
    cpu->convert(cpu, GS_F32, f1, lps[a], h, n16);
    gpu->convert(gpu, GS_F32, df, lps[a], dh, n16);
    float *f2 = down(df, n16 * 4);
    CHECK(same_bits("widen", f2, f1, n16, 4), "from %s", gs_dtype_name(lps[a]));
    free(f2);
    gs_dtype o = lps[1 - a];
    cpu->convert(cpu, o, l1, lps[a], h, n16);
    gpu->convert(gpu, o, d16, lps[a], dh, n16);
    uint16_t *l2 = down(d16, n16 * 2);
    CHECK(same_bits("lp->lp", l2, l1, n16, 2), "%s -> %s", gs_dtype_name(lps[a]),
          gs_dtype_name(o));
    free(l2);
    cpu->convert(cpu, lps[a], l1, GS_F32, bits, n);
    gpu->convert(gpu, lps[a], d16, GS_F32, dbits, n);
    l2 = down(d16, n * 2);
    CHECK(same_bits("narrow", l2, l1, n, 2), "to %s", gs_dtype_name(lps[a]));
    free(l2);
    size_t want = cpu->nonfinite(cpu, lps[a], n16, h), got = gpu->nonfinite(gpu, lps[a], n16, dh);
    CHECK(got == want && want > 0, "nonfinite %s: %zu vs %zu", gs_dtype_name(lps[a]), got, want);
  }
  size_t want = cpu->nonfinite(cpu, GS_F32, n, bits), got = gpu->nonfinite(gpu, GS_F32, n, dbits);
  CHECK(got == want && want > 0, "nonfinite fp32: %zu vs %zu", got, want);
  CHECK(gpu->nonfinite(gpu, GS_F32, 0, dbits) == 0, "nonfinite of nothing");
  gpu->convert(gpu, GS_F32, df, GS_F32, dbits, n);  /* same dtype: a copy */
  uint32_t *cp = down(df, n * 4);
  CHECK(same_bits("convert copy", cp, bits, n, 4), " ");
  SYNC_OK("convert");
  gpu->release(gpu, dh); gpu->release(gpu, d16); gpu->release(gpu, dbits); gpu->release(gpu, df);
  free(h); free(bits); free(f1); free(l1); free(cp);
}

/* The element-wise ops at lengths 0, 1, odd and large, on buffers that start
 * 1 and 3 elements past an allocation (4-byte aligned only for fp32, 2-byte
 * for fp16/bf16): the bits of the CPU table inside [off, off + n) and the
 * guard elements around it untouched. */
static void lengths_case(size_t n, size_t off) {
  size_t tot = n + off + 5;  /* off guards before, 5 after */
  gs_sgd h = {0.05f, 0.9f, 1e-4f};
  float *p = rnd(tot, -2, 2), *g = rnd(tot, -2, 2), *b = rnd(tot, -1, 1);
  if (tot > 2) g[off] = -0.0f;  /* relu of -0 and a zero gradient */
  float *dp = up(p, tot * 4), *dg = up(g, tot * 4), *db = up(b, tot * 4);
  uint16_t *lp = xmalloc(tot * 2), *dlp = gpu->alloc(gpu, tot * 2);
  for (int first = 1; first >= 0; first--) {
    cpu->sgd(cpu, n, p + off, g + off, b + off, h, first);
    gpu->sgd(gpu, n, dp + off, dg + off, db + off, h, first);
  }
  cpu->add(cpu, n, p + off, g + off);
  gpu->add(gpu, n, dp + off, dg + off);
  cpu->axpy(cpu, n, -0.3f, g + off, p + off);
  gpu->axpy(gpu, n, -0.3f, dg + off, dp + off);
  cpu->scale(cpu, n, 1.0f / 3.0f, p + off);
  gpu->scale(gpu, n, 1.0f / 3.0f, dp + off);
  cpu->relu(cpu, n, g + off, b + off);
  gpu->relu(gpu, n, dg + off, db + off);
  gs_dtype lps[] = {GS_F16, GS_BF16};
  for (int t = 0; t < 2; t++) {
    memset(lp, 0x5a, tot * 2);
    gpu->to_device(gpu, dlp, lp, tot * 2);
    cpu->convert(cpu, lps[t], lp + off, GS_F32, p + off, n);
    gpu->convert(gpu, lps[t], dlp + off, GS_F32, dp + off, n);
    uint16_t *l2 = down(dlp, tot * 2);
    CHECK(same_bits("narrow (guards too)", l2, lp, tot, 2), "%s n %zu off %zu",
          gs_dtype_name(lps[t]), n, off);
    free(l2);
    cpu->add_lp(cpu, lps[t], n, g + off, lp + off);
    gpu->add_lp(gpu, lps[t], n, dg + off, dlp + off);
    cpu->convert(cpu, GS_F32, b + off, lps[t], lp + off, n);
    gpu->convert(gpu, GS_F32, db + off, lps[t], dlp + off, n);
    size_t want = cpu->nonfinite(cpu, lps[t], n, lp + off);
    size_t got = gpu->nonfinite(gpu, lps[t], n, dlp + off);
    CHECK(got == want, "nonfinite %s n %zu off %zu: %zu vs %zu", gs_dtype_name(lps[t]), n, off,
          got, want);
  }
  size_t want = cpu->nonfinite(cpu, GS_F32, n, p + off), got = gpu->nonfinite(gpu, GS_F32, n, dp + off);
  CHECK(got == want, "nonfinite fp32 n %zu off %zu: %zu vs %zu", n, off, got, want);
  SYNC_OK("lengths");
  float *p2 = down(dp, tot * 4), *g2 = down(dg, tot * 4), *b2 = down(db, tot * 4);
  CHECK(same_bits("sgd/add/axpy/scale p (guards too)", p2, p, tot, 4), "n %zu off %zu", n, off);
  CHECK(same_bits("add_lp g (guards too)", g2, g, tot, 4), "n %zu off %zu", n, off);
  CHECK(same_bits("relu/widen b (guards too)", b2, b, tot, 4), "n %zu off %zu", n, off);
  gpu->release(gpu, dp); gpu->release(gpu, dg); gpu->release(gpu, db); gpu->release(gpu, dlp);
  free(p); free(g); free(b); free(lp); free(p2); free(g2); free(b2);
}

static void test_lengths(void) {
  size_t ns[] = {0, 1, 2, 7, 1023, 65537, (size_t)(1 << 24) + 3};
  size_t offs[] = {0, 1, 3};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (size_t j = 0; j < sizeof offs / sizeof offs[0]; j++) lengths_case(ns[i], offs[j]);
}

/* A fork works on its own stream; stream_wait orders the two. */
static void test_fork(void) {
  gs_err e = {0};
  gs_kernels *f = gs_cuda_fork(gpu, &e);
  CHECK(f != NULL, "fork: %s", e.msg);
  if (!f) return;
  CHECK(gs_cuda_stream(f) != gs_cuda_stream(gpu) && gs_cuda_device(f) == gs_cuda_device(gpu),
        "fork stream / device");
  size_t n = 1 << 22;
  float *x = rnd(n, -1, 1), *want = copy_of(x, n);
  for (size_t i = 0; i < n; i++) want[i] = want[i] * 3.0f + 1.0f;
  float *ones = xmalloc(n * 4);
  for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
  float *dx = up(x, n * 4), *d1 = up(ones, n * 4);
  gpu->scale(gpu, n, 3.0f, dx);                /* compute stream */
  CHECK(gs_cuda_stream_wait(f, gpu, &e) == GS_OK, "stream_wait: %s", e.msg);
  f->add(f, n, dx, d1);                        /* fork, after the scale */
  CHECK(gs_cuda_stream_wait(gpu, f, &e) == GS_OK, "stream_wait: %s", e.msg);
  float *got = down(dx, n * 4);                /* compute stream, after the add */
  CHECK(same_bits("fork ordering", got, want, n, 4), " ");
  CHECK(f->sync(f, &e) == GS_OK, "fork sync: %s", e.msg);
  SYNC_OK("fork");
  float *fm = f->alloc(f, 4096);
  size_t now_f = 0, now_g = 0;
  gs_cuda_mem(f, &now_f, NULL);
  gs_cuda_mem(gpu, &now_g, NULL);
  CHECK(now_f == now_g, "fork and parent share the memory figures: %zu vs %zu", now_f, now_g);
  f->release(f, fm);
  f->destroy(f);
  gpu->release(gpu, dx);
  gpu->release(gpu, d1);
  free(x); free(want); free(ones); free(got);
}

int main(void) {
  int count = gs_cuda_device_count();
  if (count <= 0) {
    printf("SKIP: no usable CUDA GPU on this machine; nothing was checked\n");
    return 77;
  }
  const char *dev_s = getenv("GS_TEST_DEVICE");
  int dev = dev_s ? atoi(dev_s) : 0;
  gs_err e = {0};
  cpu = gs_kernels_cpu(1, &e);
  gpu = gs_kernels_cuda(dev, &e);
  if (!cpu || !gpu) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  gs_err e2 = {0};
  gs_kernels *none = gs_kernels_cuda(count, &e2);
  CHECK(none == NULL && e2.code == GS_EDEVICE && strstr(e2.msg, "requested"),
        "GPU %d of %d: %s", count, count, e2.msg);

  test_memory();
  test_gemm();
  test_layers();
  test_xent();
  test_conv();
  test_maxpool();
  test_optimizer_and_algebra();
  test_convert();
  test_lengths();
  test_fork();
  size_t now = 0, peak = 0;
  gs_cuda_mem(gpu, &now, &peak);
  CHECK(now == 0, "%zu device bytes still allocated", now);
  gpu->destroy(gpu);
  cpu->destroy(cpu);
  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  printf("all CUDA ops agree with the CPU table on GPU %d (of %d); peak %zu device bytes\n", dev,
         count, peak);
  return 0;
}
