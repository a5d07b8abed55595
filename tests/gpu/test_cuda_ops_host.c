/* test_cuda_ops_host.c: the CUDA kernels' per-thread bodies (kernels/cuda/
 * ops.h), run on the host thread by thread, against the CPU table.
 *
 * No GPU needed: this is the part of kernels/cuda that a CPU can check,
 * namely all the index arithmetic and per-element math a GPU thread runs,
 * and the row-major -> column-major GEMM mapping handed to cuBLAS (checked
 * through cblas' column-major interface). What it cannot check is the
 * launch configuration, the real shared-memory execution, and cuBLAS
 * itself: tests/gpu/test_cuda_kernels.c does that where a GPU is.
 *
 * Expected: bit-exact agreement for every op except bias_grad and
 * bias_grad_nchw, whose GPU kernels add with a fixed tree instead of the
 * CPU's sequential loop (tolerance: the classical summation bound
 * 2*gamma_N*sum|x|, N terms, gamma_N = N*u/(1-N*u), u = 2^-24). */
#include <cblas.h>

#include "kernels/cuda/ops.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_check.h"

static gs_kernels *cpu;
static rng R = {0x9E3779B97F4A7C15ULL};

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

static double gamma_n(size_t n) {
  double u = ldexp(1.0, -24);
  return (double)n * u / (1.0 - (double)n * u);
}

static void test_bias(void) {
  int shapes[][2] = {{1, 1}, {7, 13}, {64, 120}, {3, 1000}, {1031, 10}, {0, 5}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int rows = shapes[s][0], cols = shapes[s][1];
    size_t n = (size_t)rows * cols;
    float *y0 = rnd(n, -2, 2), *bias = rnd((size_t)cols, -1, 1);
    float *y1 = copy_of(y0, n), *y2 = copy_of(y0, n);
    cpu->bias_add(cpu, rows, cols, bias, y1);
    for (size_t i = 0; i < n; i++) gs_op_bias_add(i, cols, bias, y2);
    CHECK(same_bits("bias_add", y2, y1, n, 4), "rows %d cols %d", rows, cols);

    /* the kernel: GS_BG_PARTS partials per column, then the tree */
    float *db1 = rnd((size_t)cols, 5, 6), *db2 = rnd((size_t)cols, 5, 6);
    double *tol = xmalloc((size_t)cols * sizeof *tol);
    cpu->bias_grad(cpu, rows, cols, y0, db1);
    for (int j = 0; j < cols; j++) {
      float v[GS_BG_PARTS];
      for (int w = 0; w < GS_BG_PARTS; w++) v[w] = gs_op_bias_grad_part(j, w, rows, cols, y0);
      for (int st = GS_BG_PARTS / 2; st > 0; st >>= 1)
        for (int w = 0; w < GS_BG_PARTS; w++) gs_op_tree_step(v, w, st);
      db2[j] = v[0];
      double abs_sum = 0;
      for (int r = 0; r < rows; r++) abs_sum += fabs(y0[(size_t)r * cols + j]);
      tol[j] = 2.0 * gamma_n((size_t)rows) * abs_sum;
    }
    CHECK(within("bias_grad", db2, db1, (size_t)cols, tol, 0), "rows %d cols %d", rows, cols);
    free(y0); free(bias); free(y1); free(y2); free(db1); free(db2); free(tol);
  }
}

static void test_bias_nchw(void) {
  int shapes[][3] = {{1, 1, 1}, {4, 6, 28 * 28}, {3, 16, 10 * 10}, {2, 5, 7}, {64, 6, 784}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int n = shapes[s][0], c = shapes[s][1], plane = shapes[s][2];
    size_t total = (size_t)n * c * plane;
    float *y0 = rnd(total, -2, 2), *bias = rnd((size_t)c, -1, 1);
    float *y1 = copy_of(y0, total), *y2 = copy_of(y0, total);
    cpu->bias_add_nchw(cpu, n, c, plane, bias, y1);
    for (size_t i = 0; i < total; i++) gs_op_bias_add_nchw(i, c, plane, bias, y2);
    CHECK(same_bits("bias_add_nchw", y2, y1, total, 4), "n %d c %d plane %d", n, c, plane);

    /* the kernel: GS_CUDA_THREADS partials per channel, then the tree */
    float *db1 = xmalloc((size_t)c * sizeof *db1), *db2 = xmalloc((size_t)c * sizeof *db2);
    double *tol = xmalloc((size_t)c * sizeof *tol);
    cpu->bias_grad_nchw(cpu, n, c, plane, y0, db1);
    for (int ch = 0; ch < c; ch++) {
      float v[GS_CUDA_THREADS];
      for (int t = 0; t < GS_CUDA_THREADS; t++)
        v[t] = gs_op_bias_grad_nchw_part(ch, t, GS_CUDA_THREADS, n, c, plane, y0);
      for (int st = GS_CUDA_THREADS / 2; st > 0; st >>= 1)
        for (int t = 0; t < GS_CUDA_THREADS; t++) gs_op_tree_step(v, t, st);
      db2[ch] = v[0];
      double abs_sum = 0;
      for (int i = 0; i < n; i++)
        for (int j = 0; j < plane; j++) abs_sum += fabs(y0[((size_t)i * c + ch) * plane + j]);
      tol[ch] = 2.0 * gamma_n((size_t)n * plane) * abs_sum;
    }
    CHECK(within("bias_grad_nchw", db2, db1, (size_t)c, tol, 0), "n %d c %d plane %d", n, c,
          plane);
    free(y0); free(bias); free(y1); free(y2); free(db1); free(db2); free(tol);
  }
}

static void test_relu(void) {
  size_t n = 4099;
  float *x = rnd(n, -1, 1);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = NAN;
  x[3] = INFINITY;
  x[4] = -INFINITY;
  float *y1 = xmalloc(n * 4), *y2 = xmalloc(n * 4);
  cpu->relu(cpu, n, x, y1);
  for (size_t i = 0; i < n; i++) gs_op_relu(i, x, y2);
  CHECK(same_bits("relu", y2, y1, n, 4), "n %zu", n);
  float *dy = rnd(n, -1, 1), *d1 = xmalloc(n * 4), *d2 = xmalloc(n * 4);
  cpu->relu_grad(cpu, n, y1, dy, d1);
  for (size_t i = 0; i < n; i++) gs_op_relu_grad(i, y1, dy, d2);
  CHECK(same_bits("relu_grad", d2, d1, n, 4), "n %zu", n);
  free(x); free(y1); free(y2); free(dy); free(d1); free(d2);
}

static void test_xent(void) {
  int shapes[][2] = {{1, 1}, {37, 10}, {64, 10}, {5, 1000}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int batch = shapes[s][0], classes = shapes[s][1];
    size_t n = (size_t)batch * classes;
    float *z = rnd(n, -6, 6);
    int32_t *lab = xmalloc((size_t)batch * 4);
    for (int i = 0; i < batch; i++) lab[i] = rng_int(&R, classes);
    if (classes > 1) z[1] = z[0];  /* a tie: argmax keeps the first */
    float *p1 = xmalloc(n * 4), *p2 = xmalloc(n * 4), loss1 = -1;
    int corr1 = -1;
    gs_err e = {0};
    cpu->xent_forward(cpu, batch, classes, z, lab, p1, &loss1, &corr1);
    CHECK(cpu->sync(cpu, &e) == GS_OK, "cpu xent: %s", e.msg);
    double *rl = xmalloc((size_t)batch * 8);
    int *hit = xmalloc((size_t)batch * 4), *bad = xmalloc((size_t)batch * 4);
    for (int i = 0; i < batch; i++)
      gs_xent_row(i, classes, z, lab, p2, &rl[i], &hit[i], &bad[i]);
    gs_xent_result r;
    gs_op_xent_total(batch, lab, rl, hit, bad, &r);
    CHECK(same_bits("xent probs", p2, p1, n, 4), "batch %d classes %d", batch, classes);
    CHECK(same_bits("xent loss", &r.mean_loss, &loss1, 1, 4), "batch %d classes %d", batch,
          classes);
    CHECK(r.correct == corr1 && r.bad_row == -1, "correct %d vs %d, bad_row %d", r.correct,
          corr1, r.bad_row);

    float scale = 1024.0f, f = scale / (float)batch;
    float *d1 = xmalloc(n * 4), *d2 = xmalloc(n * 4);
    cpu->xent_backward(cpu, batch, classes, p1, lab, scale, d1);
    for (size_t i = 0; i < n; i++) gs_op_xent_backward(i, classes, p1, lab, f, d2);
    CHECK(same_bits("xent_backward", d2, d1, n, 4), "batch %d classes %d", batch, classes);

    /* an out-of-range label: the CPU fails the op, the GPU reports the row */
    if (batch > 3) {
      lab[3] = classes;
      lab[batch - 1] = -1;
      cpu->xent_forward(cpu, batch, classes, z, lab, p1, &loss1, &corr1);
      gs_err_clear(&e);
      CHECK(cpu->sync(cpu, &e) == GS_EINVAL, "cpu xent accepted a bad label");
      for (int i = 0; i < batch; i++)
        gs_xent_row(i, classes, z, lab, p2, &rl[i], &hit[i], &bad[i]);
      gs_op_xent_total(batch, lab, rl, hit, bad, &r);
      CHECK(r.bad_row == 3 && r.bad_label == classes, "bad_row %d bad_label %d", r.bad_row,
            r.bad_label);
    }
    free(z); free(lab); free(p1); free(p2); free(rl); free(hit); free(bad); free(d1); free(d2);
  }
}

static void test_conv_maps(void) {
  gs_conv_desc ds[] = {
      {.n = 1, .c = 3, .h = 32, .w = 32, .oc = 6, .kh = 5, .kw = 5, .stride = 1, .pad = 0},
      {.n = 1, .c = 6, .h = 14, .w = 14, .oc = 16, .kh = 5, .kw = 5, .stride = 1, .pad = 0},
      {.n = 1, .c = 2, .h = 7, .w = 9, .oc = 4, .kh = 3, .kw = 3, .stride = 2, .pad = 1},
      {.n = 1, .c = 3, .h = 8, .w = 8, .oc = 2, .kh = 4, .kw = 2, .stride = 3, .pad = 2},
      {.n = 1, .c = 1, .h = 5, .w = 5, .oc = 1, .kh = 5, .kw = 5, .stride = 1, .pad = 2},
  };
  for (size_t s = 0; s < sizeof ds / sizeof ds[0]; s++) {
    gs_conv_desc d = ds[s];
    gs_err e = {0};
    CHECK(gs_conv_init(&d, &e) == GS_OK, "conv_init: %s", e.msg);
    size_t nimg = (size_t)d.c * d.h * d.w, ncol = gs_conv_workspace(&d);
    float *img = rnd(nimg, -1, 1), *c1 = rnd(ncol, 9, 10), *c2 = rnd(ncol, 9, 10);
    cpu->im2col(cpu, &d, img, c1);
    for (size_t i = 0; i < ncol; i++) gs_op_im2col(i, &d, img, c2);
    CHECK(same_bits("im2col", c2, c1, ncol, 4), "desc %zu", s);

    float *col = rnd(ncol, -1, 1), *i1 = rnd(nimg, -1, 1), *i2 = copy_of(i1, nimg);
    cpu->col2im(cpu, &d, col, i1);
    for (size_t i = 0; i < nimg; i++) gs_op_col2im(i, &d, col, i2);
    CHECK(same_bits("col2im", i2, i1, nimg, 4), "desc %zu", s);
    free(img); free(c1); free(c2); free(col); free(i1); free(i2);
  }
}

static void test_maxpool(void) {
  int shapes[][3] = {{5, 6, 8}, {3, 7, 5}, {12, 28, 28}, {1, 2, 2}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int planes = shapes[s][0], h = shapes[s][1], w = shapes[s][2];
    size_t nin = (size_t)planes * h * w, nout = (size_t)planes * (h / 2) * (w / 2);
    float *x = xmalloc(nin * 4);
    for (size_t i = 0; i < nin; i++) x[i] = (float)rng_int(&R, 5) - 2.0f;  /* many ties */
    x[0] = -0.0f;
    float *y1 = xmalloc(nout * 4), *y2 = xmalloc(nout * 4);
    int32_t *a1 = xmalloc(nout * 4), *a2 = xmalloc(nout * 4);
    cpu->maxpool_forward(cpu, planes, h, w, x, y1, a1);
    for (size_t o = 0; o < nout; o++) gs_op_maxpool_forward(o, h, w, x, y2, a2);
    CHECK(same_bits("maxpool y", y2, y1, nout, 4), "planes %d h %d w %d", planes, h, w);
    CHECK(same_bits("maxpool argmax", a2, a1, nout, 4), "planes %d h %d w %d", planes, h, w);

    float *dy = rnd(nout, -1, 1), *d1 = rnd(nin, 7, 8), *d2 = rnd(nin, 7, 8);
    dy[0] = -0.0f;
    cpu->maxpool_backward(cpu, planes, h, w, dy, a1, d1);
    for (size_t i = 0; i < nin; i++) gs_op_maxpool_backward(i, h, w, dy, a1, d2);
    CHECK(same_bits("maxpool_backward", d2, d1, nin, 4), "planes %d h %d w %d", planes, h, w);
    free(x); free(y1); free(y2); free(a1); free(a2); free(dy); free(d1); free(d2);
  }
}

static void test_sgd_and_algebra(void) {
  size_t n = 5003;
  gs_sgd hs[] = {{0.1f, 0.9f, 1e-4f}, {0.05f, 0.0f, 0.0f}, {0.3f, 0.0f, 5e-4f}, {0.01f, 0.5f, 0}};
  for (size_t s = 0; s < sizeof hs / sizeof hs[0]; s++)
    for (int first = 1; first >= 0; first--) {
      float *p = rnd(n, -1, 1), *g = rnd(n, -1, 1), *b = rnd(n, -1, 1);
      float *p1 = copy_of(p, n), *p2 = copy_of(p, n), *b1 = copy_of(b, n), *b2 = copy_of(b, n);
      bool mom = hs[s].momentum != 0.0f;
      cpu->sgd(cpu, n, p1, g, mom ? b1 : NULL, hs[s], first);
      for (size_t i = 0; i < n; i++) gs_op_sgd(i, p2, g, mom ? b2 : NULL, hs[s], first);
      CHECK(same_bits("sgd p", p2, p1, n, 4), "hyper %zu first %d", s, first);
      CHECK(same_bits("sgd buf", b2, b1, n, 4), "hyper %zu first %d", s, first);
      free(p); free(g); free(b); free(p1); free(p2); free(b1); free(b2);
    }

  float *x = rnd(n, -3, 3), *y = rnd(n, -3, 3);
  float *y1 = copy_of(y, n), *y2 = copy_of(y, n);
  cpu->add(cpu, n, y1, x);
  for (size_t i = 0; i < n; i++) gs_op_add(i, y2, x);
  CHECK(same_bits("add", y2, y1, n, 4), "n %zu", n);
  cpu->axpy(cpu, n, -0.37f, x, y1);
  for (size_t i = 0; i < n; i++) gs_op_axpy(i, -0.37f, x, y2);
  CHECK(same_bits("axpy", y2, y1, n, 4), "n %zu", n);
  cpu->scale(cpu, n, 1.0f / 3.0f, y1);
  for (size_t i = 0; i < n; i++) gs_op_scale(i, 1.0f / 3.0f, y2);
  CHECK(same_bits("scale", y2, y1, n, 4), "n %zu", n);

  gs_dtype ts[] = {GS_F32, GS_F16, GS_BF16};
  for (size_t t = 0; t < 3; t++) {
    void *lp = xmalloc(n * 4);
    cpu->convert(cpu, ts[t], lp, GS_F32, x, n);
    cpu->add_lp(cpu, ts[t], n, y1, lp);
    for (size_t i = 0; i < n; i++) gs_op_add_lp(i, ts[t], y2, lp);
    CHECK(same_bits("add_lp", y2, y1, n, 4), "dtype %s", gs_dtype_name(ts[t]));
    free(lp);
  }
  free(x); free(y); free(y1); free(y2);
}

/* Every fp16 / bf16 bit pattern, and fp32 patterns around every rounding
 * boundary that matters (random bits, specials, subnormals). */
static void test_convert(void) {
  size_t n16 = 65536;
  uint16_t *h = xmalloc(n16 * 2), *o1 = xmalloc(n16 * 2), *o2 = xmalloc(n16 * 2);
  float *f1 = xmalloc(n16 * 4), *f2 = xmalloc(n16 * 4);
  for (size_t i = 0; i < n16; i++) h[i] = (uint16_t)i;
  gs_dtype lps[] = {GS_F16, GS_BF16};
  for (int a = 0; a < 2; a++) {
    cpu->convert(cpu, GS_F32, f1, lps[a], h, n16);
    for (size_t i = 0; i < n16; i++) gs_op_convert(i, GS_F32, f2, lps[a], h);
    CHECK(same_bits("widen", f2, f1, n16, 4), "from %s", gs_dtype_name(lps[a]));
    gs_dtype other = lps[1 - a];
    cpu->convert(cpu, other, o1, lps[a], h, n16);
    for (size_t i = 0; i < n16; i++) gs_op_convert(i, other, o2, lps[a], h);
    CHECK(same_bits("lp->lp", o2, o1, n16, 2), "%s -> %s", gs_dtype_name(lps[a]),
          gs_dtype_name(other));
  }
  size_t n = 1 << 20;
  uint32_t *bits = xmalloc(n * 4);
  for (size_t i = 0; i < n; i++) bits[i] = (uint32_t)rng_next(&R);
  uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                        0x7f800001u, 0xffffffffu, 0x477fefffu, 0x477ff000u, 0x38800000u,
                        0x387fffffu, 0x33000000u, 0x33000001u, 0x00000001u, 0x3f808000u,
                        0x3f818000u, 0x7f7fffffu, 0x47800000u};
  memcpy(bits, special, sizeof special);
  for (size_t i = sizeof special / 4; i < n / 2; i++)  /* dense near the fp16 range */
    bits[i] = 0x33000000u + (uint32_t)(rng_next(&R) % (0x47800000u - 0x33000000u)) +
              (bits[i] & 0x80000000u);
  uint16_t *l1 = xmalloc(n * 2), *l2 = xmalloc(n * 2);
  for (int a = 0; a < 2; a++) {
    cpu->convert(cpu, lps[a], l1, GS_F32, bits, n);
    for (size_t i = 0; i < n; i++) gs_op_convert(i, lps[a], l2, GS_F32, bits);
    CHECK(same_bits("narrow", l2, l1, n, 2), "to %s", gs_dtype_name(lps[a]));
  }
  /* nonfinite counts */
  for (int a = 0; a < 3; a++) {
    gs_dtype t = a == 0 ? GS_F32 : lps[a - 1];
    const void *src = t == GS_F32 ? (const void *)bits : (const void *)h;
    size_t m = t == GS_F32 ? n : n16;
    size_t want = cpu->nonfinite(cpu, t, m, src), got = 0;
    for (size_t i = 0; i < m; i++) got += (size_t)gs_op_nonfinite(t, src, i);
    CHECK(got == want && want > 0, "nonfinite %s: %zu vs %zu", gs_dtype_name(t), got, want);
  }
  free(h); free(o1); free(o2); free(f1); free(f2); free(bits); free(l1); free(l2);
}

/* The mapping handed to cuBLAS, run through cblas' column-major entry,
 * against cblas' row-major entry, with padded leading dimensions. */
static void test_gemm_mapping(void) {
  int m = 13, n = 7, k = 9;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
      int lda = acols + 3, ldb = bcols + 2, ldc = n + 5;
      float *a = rnd((size_t)arows * lda, -1, 1), *b = rnd((size_t)brows * ldb, -1, 1);
      float *c0 = rnd((size_t)m * ldc, -1, 1), *c1 = copy_of(c0, (size_t)m * ldc),
            *c2 = copy_of(c0, (size_t)m * ldc);
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  m, n, k, 0.75f, a, lda, b, ldb, 0.5f, c1, ldc);
      gs_colmajor_gemm g = gs_gemm_as_colmajor(ta, tb, m, n, k, a, lda, b, ldb);
      cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                  g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 0.75f, g.a, g.lda, g.b,
                  g.ldb, 0.5f, c2, ldc);
      CHECK(within("gemm mapping", c2, c1, (size_t)m * ldc, NULL, 1e-5), "ta %d tb %d", ta, tb);
      /* k = 0: C *= beta on the m x n block only */
      float *c3 = copy_of(c0, (size_t)m * ldc), *c4 = copy_of(c0, (size_t)m * ldc);
      cpu->gemm(cpu, ta, tb, m, n, 0, 1.0f, a, lda, b, ldb, 0.25f, c3, ldc);
      for (size_t i = 0; i < (size_t)m * n; i++) gs_op_gemm_beta(i, n, 0.25f, c4, ldc);
      CHECK(same_bits("gemm k=0", c4, c3, (size_t)m * ldc, 4), "ta %d tb %d", ta, tb);
      free(a); free(b); free(c0); free(c1); free(c2); free(c3); free(c4);
    }
}

int main(void) {
  gs_err e = {0};
  cpu = gs_kernels_cpu(1, &e);
  if (!cpu) {
    fprintf(stderr, "cpu kernels: %s\n", e.msg);
    return 1;
  }
  test_bias();
  test_bias_nchw();
  test_relu();
  test_xent();
  test_conv_maps();
  test_maxpool();
  test_sgd_and_algebra();
  test_convert();
  test_gemm_mapping();
  cpu->destroy(cpu);
  if (check_failures) {
    fprintf(stderr, "%d check(s) failed\n", check_failures);
    return 1;
  }
  printf("cuda per-thread bodies agree with the CPU table (bitwise; bias_grad and "
         "bias_grad_nchw within the summation bound)\n");
  return 0;
}
