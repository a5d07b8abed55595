/* test_dispatch.c: choosing the CPU code path, and bit-for-bit agreement of
 * every path with the scalar one.
 *
 * GS_ISA: unset / auto picks the best supported path; a known name the
 * CPU lacks, or an unknown name, makes gs_kernels_cpu() fail with a message
 * naming the variable and the choices. Then each vector op of each SIMD path
 * runs on the same random inputs (lengths 0..300 and 100003, odd offsets,
 * special values mixed in) as the scalar path and must give the same bits:
 * the element-wise ops and SGD because they round the same operations in
 * the same order, sum() because it adds in one fixed order. set_threads
 * reaches OpenBLAS. */
#include <cblas.h>

#include "tk.h"

static void test_env(void) {
  gs_err e = {0};
  unsetenv("GS_ISA");
  gs_kernels *k = gs_kernels_cpu(0, &e);
  REQUIRE(k);
  CHECK(gs_kernels_cpu_isa(k) == gs_cpu_isa_best(), "unset picked %s, best is %s",
        gs_cpu_isa_name(gs_kernels_cpu_isa(k)), gs_cpu_isa_name(gs_cpu_isa_best()));
  printf("this CPU runs the %s path by default\n", gs_cpu_isa_name(gs_kernels_cpu_isa(k)));
  k->destroy(k);
  setenv("GS_ISA", "auto", 1);
  k = gs_kernels_cpu(0, &e);
  CHECK(k && gs_kernels_cpu_isa(k) == gs_cpu_isa_best(), "auto");
  if (k) k->destroy(k);

  setenv("GS_ISA", "sse9", 1);
  gs_err_clear(&e);
  k = gs_kernels_cpu(0, &e);
  CHECK(!k && e.code == GS_EINVAL && strstr(e.msg, "GS_ISA=sse9") &&
            strstr(e.msg, "scalar, avx2, avx512"), "unknown path: %p '%s'", (void *)k, e.msg);
  if (k) k->destroy(k);

  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    setenv("GS_ISA", gs_cpu_isa_name((gs_cpu_isa)isa), 1);
    gs_err_clear(&e);
    k = gs_kernels_cpu(0, &e);
    if (gs_cpu_isa_supported((gs_cpu_isa)isa)) {
      CHECK(k && (int)gs_kernels_cpu_isa(k) == isa, "GS_ISA=%s: %s",
            gs_cpu_isa_name((gs_cpu_isa)isa), e.msg);
    } else {
      CHECK(!k && e.code == GS_EDEVICE && strstr(e.msg, "lacks"), "GS_ISA=%s unsupported: '%s'",
            gs_cpu_isa_name((gs_cpu_isa)isa), e.msg);
      printf("note: GS_ISA=%s refused as expected: %s\n", gs_cpu_isa_name((gs_cpu_isa)isa),
             e.msg);
    }
    if (k) k->destroy(k);
  }
  unsetenv("GS_ISA");
  CHECK(gs_cpu_isa_supported(GS_ISA_SCALAR), "scalar must always be supported");
}

static void test_threads(void) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  REQUIRE(k);
  CHECK(openblas_get_num_threads() == 1, "gs_kernels_cpu(1): OpenBLAS has %d threads",
        openblas_get_num_threads());
  k->set_threads(k, 2);
  CHECK(openblas_get_num_threads() == 2, "set_threads(2): OpenBLAS has %d threads",
        openblas_get_num_threads());
  k->set_threads(k, 0); /* no-op */
  CHECK(openblas_get_num_threads() == 2, "set_threads(0) changed OpenBLAS to %d",
        openblas_get_num_threads());
  k->set_threads(k, 1);
  k->destroy(k);
}

/* random floats with zeros, -0, inf, NaN and subnormals mixed in */
static void fill_special(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int r = tk_int(40);
    x[i] = r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? INFINITY : r == 3 ? -INFINITY
         : r == 4 ? NAN : r == 5 ? tk_float((uint32_t)tk_u64() & 0x807fffffu)
         : tk_unif(-4, 4);
  }
}

/* same bits, NaN payloads included except where two NaN operands meet
 * (which payload an add keeps is not specified by IEEE) */
static size_t diff_f(const float *a, const float *b, size_t n) {
  size_t d = 0;
  for (size_t i = 0; i < n; i++) d += tk_bits(a[i]) != tk_bits(b[i]) && !(isnan(a[i]) && isnan(b[i]));
  return d;
}

static void compare_paths(gs_cpu_isa isa) {
  const gs_cpu_vec *s = gs_cpu_vec_of(GS_ISA_SCALAR), *v = gs_cpu_vec_of(isa);
  const char *name = gs_cpu_isa_name(isa);
  const size_t cap = 100003 + 32;
  float *x = tk_malloc(cap * 4), *y = tk_malloc(cap * 4), *g = tk_malloc(cap * 4);
  float *a1 = tk_malloc(cap * 4), *a2 = tk_malloc(cap * 4), *b1 = tk_malloc(cap * 4),
        *b2 = tk_malloc(cap * 4);
  uint16_t *h = tk_malloc(cap * 2), *h1 = tk_malloc(cap * 2), *h2 = tk_malloc(cap * 2);
  size_t bad[20] = {0};
  const char *ops[20] = {"add", "axpy", "scale", "add_scalar", "sum", "relu", "relu_grad",
                         "sgd", "sgd momentum", "add_f16", "add_bf16", "f32_to_f16",
                         "f32_to_bf16", "f16_to_f32", "bf16_to_f32", "nonfinite", "copy2d",
                         "add2d"};
  tk_seed(500 + isa);
  for (int round = 0; round < 400; round++) {
    size_t n = round == 399 ? 100003 : (size_t)tk_int(301), off = (size_t)tk_int(16);
    fill_special(x, cap);
    fill_special(y, cap);
    tk_fill(g, cap, -1, 1);
    for (size_t i = 0; i < cap; i++) h[i] = (uint16_t)tk_u64();
    float *xo = x + off, *yo = y + off;
#define TWICE(stmt1, stmt2) do { stmt1; stmt2; } while (0)
    memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
    TWICE(s->add(n, a1, xo), v->add(n, a2, xo));
    bad[0] += diff_f(a1, a2, n);
    memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
    TWICE(s->axpy(n, 0.3f, xo, a1), v->axpy(n, 0.3f, xo, a2));
    bad[1] += diff_f(a1, a2, n);
    memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
    TWICE(s->scale(n, -1.7f, a1), v->scale(n, -1.7f, a2));
    bad[2] += diff_f(a1, a2, n);
    memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
    TWICE(s->add_scalar(n, 0.1f, a1), v->add_scalar(n, 0.1f, a2));
    bad[3] += diff_f(a1, a2, n);
    float s1 = s->sum(n, g + off), s2 = v->sum(n, g + off);
    bad[4] += tk_bits(s1) != tk_bits(s2);
    TWICE(s->relu(n, xo, a1), v->relu(n, xo, a2));
    bad[5] += diff_f(a1, a2, n);
    TWICE(s->relu_grad(n, xo, yo, a1), v->relu_grad(n, xo, yo, a2));
    bad[6] += diff_f(a1, a2, n);
    /* SGD on finite data, three steps, momentum off and on */
    tk_fill(a1, n, -1, 1);
    memcpy(a2, a1, n * 4);
    for (int step = 0; step < 3; step++)
      TWICE(s->sgd(n, a1, g + off + step, NULL, 0.1f, 0.0f, 1e-3f, step == 0),
            v->sgd(n, a2, g + off + step, NULL, 0.1f, 0.0f, 1e-3f, step == 0));
    bad[7] += diff_f(a1, a2, n);
    tk_fill(a1, n, -1, 1);
    memcpy(a2, a1, n * 4);
    for (int step = 0; step < 3; step++)
      TWICE(s->sgd(n, a1, g + off + step, b1, 0.05f, 0.9f, step == 1 ? 0.0f : 5e-4f, step == 0),
            v->sgd(n, a2, g + off + step, b2, 0.05f, 0.9f, step == 1 ? 0.0f : 5e-4f, step == 0));
    bad[8] += diff_f(a1, a2, n) + diff_f(b1, b2, n);
    memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
    TWICE(s->add_f16(n, a1, h + off), v->add_f16(n, a2, h + off));
    bad[9] += diff_f(a1, a2, n);
    memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
    TWICE(s->add_bf16(n, a1, h + off), v->add_bf16(n, a2, h + off));
    bad[10] += diff_f(a1, a2, n);
    TWICE(s->f32_to_f16(n, h1, xo), v->f32_to_f16(n, h2, xo));
    bad[11] += memcmp(h1, h2, n * 2) != 0;
    TWICE(s->f32_to_bf16(n, h1, xo), v->f32_to_bf16(n, h2, xo));
    bad[12] += memcmp(h1, h2, n * 2) != 0;
    TWICE(s->f16_to_f32(n, a1, h + off), v->f16_to_f32(n, a2, h + off));
    bad[13] += memcmp(a1, a2, n * 4) != 0;
    TWICE(s->bf16_to_f32(n, a1, h + off), v->bf16_to_f32(n, a2, h + off));
    bad[14] += memcmp(a1, a2, n * 4) != 0;
    {  /* 2-D blocks: rows of up to 40 with strides */
      size_t cols = (size_t)tk_int(41), rows = cols ? n / (cols + 3) : 0;
      if (rows > 0) {
        memcpy(a1, yo, n * 4); memcpy(a2, yo, n * 4);
        TWICE(s->copy2d(rows, cols, a1, cols + 3, xo, cols + 1),
              v->copy2d(rows, cols, a2, cols + 3, xo, cols + 1));
        bad[16] += memcmp(a1, a2, n * 4) != 0;
        TWICE(s->add2d(rows, cols, a1, cols + 3, xo, cols + 2),
              v->add2d(rows, cols, a2, cols + 3, xo, cols + 2));
        bad[17] += diff_f(a1, a2, n);
      }
    }
    bad[15] += s->nonfinite_f32(n, xo) != v->nonfinite_f32(n, xo);
    bad[15] += s->nonfinite_f16(n, h + off) != v->nonfinite_f16(n, h + off);
    bad[15] += s->nonfinite_bf16(n, h + off) != v->nonfinite_bf16(n, h + off);
#undef TWICE
  }
  for (int i = 0; i < 18; i++)
    CHECK(bad[i] == 0, "%s %s differs from the scalar path (%zu)", name, ops[i], bad[i]);
  free(x); free(y); free(g); free(a1); free(a2); free(b1); free(b2);
  free(h); free(h1); free(h2);
}

int main(void) {
  test_env();
  test_threads();
  for (int isa = 1; isa < GS_ISA_COUNT; isa++) {
    if (!gs_cpu_isa_supported((gs_cpu_isa)isa)) {
      printf("note: this CPU lacks the %s path; not compared\n", gs_cpu_isa_name((gs_cpu_isa)isa));
      continue;
    }
    compare_paths((gs_cpu_isa)isa);
  }
  return check_done("test_dispatch");
}
