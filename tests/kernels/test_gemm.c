/* test_gemm.c: gemm and gemm_lp of the CPU table against a naive
 * double-precision product.
 *
 * All four transpose combinations, odd sizes, leading dimensions wider than
 * the rows (the padding holds NaN, so reading it shows), alpha/beta
 * including beta = 0 over a NaN-filled C, k = 0, and bad arguments, which
 * must be sticky errors from sync() with C untouched. gemm_lp gets fp16 /
 * bf16 operands whose values the test knows exactly; each matrix is its own
 * exact-size allocation, so ASan sees a read past the last row's width. */
#include <pthread.h>

#include "tk.h"

typedef struct mat {
  int rows, cols, ld;
  float *f;      /* rows x ld, padding NaN */
  uint16_t *h;   /* the same values in fp16 or bf16 (gemm_lp) */
  double *v;     /* the values as the kernel must see them */
} mat;

/* rows x cols with stride ld; the allocation ends right after the last
 * row's cols-th element. */
static mat mat_new(int rows, int cols, int ld, gs_dtype t) {
  mat a = {rows, cols, ld, NULL, NULL, NULL};
  size_t n = rows ? (size_t)(rows - 1) * ld + cols : 0;
  a.f = tk_malloc(n * sizeof(float));
  a.h = tk_malloc(n * sizeof(uint16_t));
  a.v = tk_malloc((size_t)rows * cols * sizeof(double));
  for (size_t i = 0; i < n; i++) {
    a.f[i] = NAN;
    a.h[i] = 0x7e00;
  }
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      float x = tk_unif(-1.0f, 1.0f);
      size_t i = (size_t)r * ld + c;
      if (t == GS_F16) {
        a.h[i] = tk_ref_f16(x);
        a.v[(size_t)r * cols + c] = tk_f16_value(a.h[i]);
      } else if (t == GS_BF16) {
        a.h[i] = tk_ref_bf16(x);
        a.v[(size_t)r * cols + c] = tk_bf16_value(a.h[i]);
      } else {
        a.v[(size_t)r * cols + c] = x;
      }
      a.f[i] = (float)a.v[(size_t)r * cols + c];
    }
  return a;
}

static void mat_free(mat *a) {
  free(a->f);
  free(a->h);
  free(a->v);
}

/* element (i, p) of op(A) */
static double opv(const mat *a, bool t, int i, int p) {
  return t ? a->v[(size_t)p * a->cols + i] : a->v[(size_t)i * a->cols + p];
}

/* C = alpha*op(A)*op(B) + beta*C0 in double, and the bound each element's
 * float error must stay under (a few k*eps of the sum of magnitudes). */
static void ref_gemm(bool ta, bool tb, int m, int n, int kk, double alpha, const mat *a,
                     const mat *b, double beta, const float *c0, int ldc, double *want,
                     double *tol) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (int p = 0; p < kk; p++) {
        double x = opv(a, ta, i, p) * opv(b, tb, p, j);
        s += x;
        mag += fabs(x);
      }
      double c = beta == 0 ? 0 : beta * (double)c0[(size_t)i * ldc + j];
      want[(size_t)i * n + j] = alpha * s + c;
      tol[(size_t)i * n + j] = 8.0 * (kk + 2) * 0x1p-24 * (fabs(alpha) * mag + fabs(c)) + 1e-30;
    }
}

static void one_case(gs_kernels *k, gs_dtype t, bool ta, bool tb, int m, int n, int kk, int pad,
                     float alpha, float beta) {
  mat a = ta ? mat_new(kk, m, m + pad, t) : mat_new(m, kk, kk + pad, t);
  mat b = tb ? mat_new(n, kk, kk + pad, t) : mat_new(kk, n, n + pad, t);
  int ldc = n + pad;
  size_t cn = (size_t)m * ldc;
  float *c = tk_malloc(cn * sizeof(float)), *c0 = tk_malloc(cn * sizeof(float));
  for (size_t i = 0; i < cn; i++) c[i] = c0[i] = beta == 0 ? NAN : tk_unif(-1, 1);
  double *want = tk_malloc((size_t)m * n * sizeof(double));
  double *tol = tk_malloc((size_t)m * n * sizeof(double));
  ref_gemm(ta, tb, m, n, kk, alpha, &a, &b, beta, c0, ldc, want, tol);
  if (t == GS_F32)
    k->gemm(k, ta, tb, m, n, kk, alpha, a.f, a.ld, b.f, b.ld, beta, c, ldc);
  else
    k->gemm_lp(k, t, ta, tb, m, n, kk, alpha, a.h, a.ld, b.h, b.ld, beta, c, ldc);
  CHECK_SYNC_OK(k);
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++) {
      double g = c[(size_t)i * ldc + j], w = want[(size_t)i * n + j];
      double err = fabs(g - w);
      if (!(err <= tol[(size_t)i * n + j])) {
        bad++;
        if (!(err <= worst)) worst = err;
      }
    }
    for (int j = n; j < ldc; j++) /* C's padding is not written */
      bad += tk_bits(c[(size_t)i * ldc + j]) != tk_bits(c0[(size_t)i * ldc + j]);
  }
  CHECK(bad == 0,
        "%s %s ta=%d tb=%d m=%d n=%d k=%d pad=%d alpha=%g beta=%g: %d bad elements (worst |err| %g)",
        gs_cpu_isa_name(gs_kernels_cpu_isa(k)), gs_dtype_name(t), ta, tb, m, n, kk, pad,
        (double)alpha, (double)beta, bad, worst);
  free(c);
  free(c0);
  free(want);
  free(tol);
  mat_free(&a);
  mat_free(&b);
}

static void test_products(gs_kernels *k, gs_dtype t) {
  static const int sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {65, 31, 130},
                                 {130, 67, 5}, {2, 300, 1}, {64, 64, 64}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        int pad = (int)((s + ta + tb) % 3) * 2 + (s & 1); /* 0 .. 5, odd ones too */
        one_case(k, t, ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], pad, 1.0f, 0.0f);
        one_case(k, t, ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], pad + 1, -0.75f, 0.5f);
      }
  /* k = 0: C = beta*C, and beta = 0 clears NaN */
  one_case(k, t, false, false, 5, 7, 0, 2, 1.0f, 0.0f);
  one_case(k, t, true, true, 5, 7, 0, 1, 2.0f, 1.5f);
  /* alpha = 0 */
  one_case(k, t, false, true, 9, 4, 6, 0, 0.0f, 0.25f);
}

static void test_bad_args(gs_kernels *k) {
  float a[12] = {0}, b[12] = {0}, c[12];
  for (int i = 0; i < 12; i++) c[i] = (float)i;
  gs_err e = {0};
  /* lda 2 < k 3 */
  k->gemm(k, false, false, 2, 2, 3, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  int rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "lda=2"), "bad lda: rc %d msg '%s'", rc, e.msg);
  CHECK(c[0] == 0.0f && c[3] == 3.0f, "C changed by a rejected gemm");
  /* the error is cleared by sync: the next sync is clean */
  CHECK_SYNC_OK(k);
  gs_err_clear(&e);
  k->gemm(k, false, false, -1, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "negative"), "negative m: rc %d msg '%s'", rc, e.msg);
  gs_err_clear(&e);
  uint16_t h[12] = {0};
  k->gemm_lp(k, GS_F16, true, false, 4, 2, 3, 1.0f, h, 3, h, 2, 0.0f, c, 2); /* lda 3 < m 4 */
  rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "gemm_lp"), "gemm_lp bad lda: rc %d msg '%s'", rc,
        e.msg);
  gs_err_clear(&e);
  k->gemm_lp(k, (gs_dtype)7, false, false, 1, 1, 1, 1.0f, h, 1, h, 1, 0.0f, c, 1);
  rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "dtype"), "gemm_lp bad dtype: rc %d msg '%s'", rc,
        e.msg);
}

/* Two threads running gemm_lp on one table: one gets the table's scratch,
 * the other a buffer of its own; both must be right. */
typedef struct job {
  gs_kernels *k;
  int seed, ok;
} job;

static void *lp_thread(void *arg) {
  job *j = arg;
  int m = 40 + j->seed, n = 50, kk = 70;
  size_t na = (size_t)m * kk, nb = (size_t)kk * n;
  uint16_t *a = tk_malloc(na * 2), *b = tk_malloc(nb * 2);
  float *c = tk_malloc((size_t)m * n * sizeof(float));
  for (size_t i = 0; i < na; i++) a[i] = (uint16_t)(0x3c00 + (i * 7 + (size_t)j->seed) % 64);
  for (size_t i = 0; i < nb; i++) b[i] = (uint16_t)(0xbc00 + (i * 5) % 64);
  j->ok = 1;
  for (int rep = 0; rep < 50 && j->ok; rep++) {
    j->k->gemm_lp(j->k, GS_F16, false, false, m, n, kk, 1.0f, a, kk, b, n, 0.0f, c, n);
    for (int i = 0; i < m && j->ok; i += 7)
      for (int q = 0; q < n; q += 5) {
        double s = 0;
        for (int p = 0; p < kk; p++)
          s += tk_f16_value(a[(size_t)i * kk + p]) * tk_f16_value(b[(size_t)p * n + q]);
        if (!tk_close(c[(size_t)i * n + q], s, 1e-5, 1e-5)) j->ok = 0;
      }
  }
  free(a);
  free(b);
  free(c);
  return NULL;
}

static void test_threads(gs_kernels *k) {
  job jobs[2] = {{k, 1, 0}, {k, 2, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&th[i], NULL, lp_thread, &jobs[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CHECK(jobs[0].ok && jobs[1].ok, "concurrent gemm_lp gave wrong products (%d, %d)",
        jobs[0].ok, jobs[1].ok);
  CHECK_SYNC_OK(k);
}

int main(void) {
  tk_seed(1);
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    gs_kernels *k = tk_open((gs_cpu_isa)isa);
    if (!k) continue;
    if (isa == GS_ISA_SCALAR) { /* sgemm itself does not depend on the path */
      test_products(k, GS_F32);
      test_bad_args(k);
    }
    test_products(k, GS_F16);
    test_products(k, GS_BF16);
    test_threads(k);
    k->destroy(k);
  }
  return check_done("test_gemm");
}
