/* test_optim.c: SGD, the vector reductions (add, axpy, scale, add_lp) and
 * the loss scaler, on every code path this CPU has.
 *
 * SGD is torch.optim.SGD (dampening 0, no Nesterov):
 *   d = g + wd*p;  buf = first ? d : m*buf + d;  p = p - lr*buf
 * checked two ways over several steps: bit for bit against the same float
 * operations written out here (each rounded separately, as PyTorch's
 * default CPU kernels do), and to 1e-6 against the same recurrence in
 * double. The element-wise vector ops must give exactly the float result
 * of their one operation. */
#include "tk.h"

/* ---- SGD ---- */
typedef struct sgd_case {
  float lr, m, wd;
  int use_buf;
} sgd_case;

static void test_sgd(gs_kernels *k) {
  static const sgd_case cases[] = {
    {0.1f, 0.9f, 1e-4f, 1}, {0.05f, 0.9f, 0.0f, 1}, {0.3f, 0.0f, 5e-4f, 0},
    {0.01f, 0.0f, 0.0f, 0}, {0.2f, 0.5f, 0.1f, 1},  {0.1f, 0.0f, 1e-3f, 1},
  };
  const size_t sizes[] = {0, 1, 7, 16, 33, 1000 + 11};
  const char *isa = gs_cpu_isa_name(gs_kernels_cpu_isa(k));
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      const sgd_case *sc = &cases[c];
      size_t n = sizes[z];
      float *p = tk_malloc(n * 4), *g = tk_malloc(n * 4), *buf = tk_malloc(n * 4);
      float *fp = tk_malloc(n * 4), *fb = tk_malloc(n * 4);
      double *dp = tk_malloc(n * 8), *db = tk_malloc(n * 8);
      tk_seed(100 + c * 10 + z);
      tk_fill(p, n, -1, 1);
      for (size_t i = 0; i < n; i++) {
        fp[i] = p[i];
        dp[i] = p[i];
        buf[i] = fb[i] = NAN; /* first step must overwrite, not read */
      }
      gs_sgd h = {sc->lr, sc->m, sc->wd};
      int bitbad = 0;
      for (int step = 0; step < 6; step++) {
        tk_fill(g, n, -1, 1);
        int first = step == 0;
        k->sgd(k, n, p, g, sc->use_buf ? buf : NULL, h, first);
        for (size_t i = 0; i < n; i++) {
          /* float, PyTorch's operations one by one */
          float d = g[i];
          if (sc->wd != 0.0f) {
            float t = sc->wd * fp[i];
            d = d + t;
          }
          if (sc->m != 0.0f) {
            if (!first) {
              float t = sc->m * fb[i];
              d = t + d;
            }
            fb[i] = d;
          }
          float u = sc->lr * d;
          fp[i] = fp[i] - u;
          /* double */
          double dd = g[i] + (double)sc->wd * dp[i];
          if (sc->m != 0.0f) {
            dd = first ? dd : (double)sc->m * db[i] + dd;
            db[i] = dd;
          }
          dp[i] -= (double)sc->lr * dd;
        }
        for (size_t i = 0; i < n; i++) bitbad += tk_bits(p[i]) != tk_bits(fp[i]);
      }
      CHECK(bitbad == 0, "%s sgd lr %g m %g wd %g n %zu: %d elements differ from float "
            "PyTorch-order reference", isa, (double)sc->lr, (double)sc->m, (double)sc->wd, n,
            bitbad);
      double err = tk_relerr(p, dp, n);
      CHECK(err < 1e-6, "%s sgd lr %g m %g wd %g n %zu: rel err %g against double", isa,
            (double)sc->lr, (double)sc->m, (double)sc->wd, n, err);
      if (sc->m != 0.0f) {
        int bb = 0;
        for (size_t i = 0; i < n; i++) bb += tk_bits(buf[i]) != tk_bits(fb[i]);
        CHECK(bb == 0, "%s sgd momentum buffer: %d differ", isa, bb);
      } else if (sc->use_buf) {
        int touched = 0;
        for (size_t i = 0; i < n; i++) touched += !isnan(buf[i]);
        CHECK(touched == 0, "%s sgd momentum 0 wrote the buffer (%d)", isa, touched);
      }
      free(p); free(g); free(buf); free(fp); free(fb); free(dp); free(db);
    }
  CHECK_SYNC_OK(k);
  /* momentum without a buffer is an error, and p is left alone */
  float p1 = 1.0f, g1 = 1.0f;
  gs_err e = {0};
  k->sgd(k, 1, &p1, &g1, NULL, (gs_sgd){0.1f, 0.9f, 0.0f}, true);
  int rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "momentum") && p1 == 1.0f,
        "%s sgd m>0 buf NULL: rc %d '%s' p %g", isa, rc, e.msg, (double)p1);
}

/* ---- add, axpy, scale, add_lp ---- */
static void test_vector(gs_kernels *k) {
  const char *isa = gs_cpu_isa_name(gs_kernels_cpu_isa(k));
  const size_t n = 4096 + 37;
  float *x = tk_malloc(n * 4), *y = tk_malloc(n * 4), *y0 = tk_malloc(n * 4);
  uint16_t *h = tk_malloc(n * 2);
  tk_seed(200);
  tk_fill(x, n, -10, 10);
  tk_fill(y0, n, -10, 10);
  x[3] = INFINITY;
  y0[n - 1] = NAN;
  /* sub-ranges at every offset and length near the vector widths */
  for (size_t off = 0; off < 18; off += 1)
    for (size_t len = 0; len < 70; len += (len < 34 ? 1 : 7)) {
      memcpy(y, y0, n * 4);
      k->add(k, len, y + off, x + off);
      int bad = 0;
      for (size_t i = 0; i < n; i++) {
        float w = (i >= off && i < off + len) ? y0[i] + x[i] : y0[i];
        bad += tk_bits(y[i]) != tk_bits(w);
      }
      CHECK(bad == 0, "%s add off %zu len %zu: %d wrong", isa, off, len, bad);
      memcpy(y, y0, n * 4);
      k->axpy(k, len, -0.37f, x + off, y + off);
      bad = 0;
      for (size_t i = 0; i < n; i++) {
        float t = -0.37f * x[i];
        float w = (i >= off && i < off + len) ? y0[i] + t : y0[i];
        bad += tk_bits(y[i]) != tk_bits(w);
      }
      CHECK(bad == 0, "%s axpy off %zu len %zu: %d wrong", isa, off, len, bad);
      memcpy(y, y0, n * 4);
      k->scale(k, len, 1.0f / 3.0f, y + off);
      bad = 0;
      for (size_t i = 0; i < n; i++) {
        float w = (i >= off && i < off + len) ? y0[i] * (1.0f / 3.0f) : y0[i];
        bad += tk_bits(y[i]) != tk_bits(w);
      }
      CHECK(bad == 0, "%s scale off %zu len %zu: %d wrong", isa, off, len, bad);
    }
  /* add into itself doubles */
  memcpy(y, y0, n * 4);
  k->add(k, n, y, y);
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += tk_bits(y[i]) != tk_bits(y0[i] + y0[i]);
  CHECK(bad == 0, "%s add dst == src: %d wrong", isa, bad);

  /* add_lp: fp32 += fp16 / bf16, against fp32 arithmetic on the decoded
   * values; every 16-bit pattern appears (inf and NaN included) */
  for (int t = GS_F16; t <= GS_BF16; t++) {
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(i * 40503u); /* odd multiplier: all */
    for (size_t off = 0; off < 18; off += 5)
      for (size_t len = 0; len < 70; len += 3) {
        memcpy(y, y0, n * 4);
        k->add_lp(k, (gs_dtype)t, len, y + off, h + off);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
          float v = tk_float(t == GS_F16 ? tk_ref_f16_to_f32_bits(h[i])
                                         : tk_ref_bf16_to_f32_bits(h[i]));
          float w = (i >= off && i < off + len) ? y0[i] + v : y0[i];
          bad += isnan(w) ? !isnan(y[i]) : tk_bits(y[i]) != tk_bits(w);
        }
        CHECK(bad == 0, "%s add_lp %s off %zu len %zu: %d wrong", isa,
              gs_dtype_name((gs_dtype)t), off, len, bad);
      }
    /* all patterns in one call */
    for (size_t base = 0; base < 65536; base += n) {
      size_t m = 65536 - base < n ? 65536 - base : n;
      for (size_t i = 0; i < m; i++) h[i] = (uint16_t)(base + i);
      memcpy(y, y0, n * 4);
      k->add_lp(k, (gs_dtype)t, m, y, h);
      bad = 0;
      for (size_t i = 0; i < m; i++) {
        float v = tk_float(t == GS_F16 ? tk_ref_f16_to_f32_bits(h[i])
                                       : tk_ref_bf16_to_f32_bits(h[i]));
        float w = y0[i] + v;
        bad += isnan(w) ? !isnan(y[i]) : tk_bits(y[i]) != tk_bits(w);
      }
      CHECK(bad == 0, "%s add_lp %s patterns from %zu: %d wrong", isa,
            gs_dtype_name((gs_dtype)t), base, bad);
    }
  }
  memcpy(y, y0, n * 4);
  k->add_lp(k, GS_F32, n, y, x);
  bad = 0;
  for (size_t i = 0; i < n; i++) bad += tk_bits(y[i]) != tk_bits(y0[i] + x[i]);
  CHECK(bad == 0, "%s add_lp fp32: %d wrong", isa, bad);
  CHECK_SYNC_OK(k);
  gs_err e = {0};
  k->add_lp(k, (gs_dtype)9, 4, y, x);
  int rc = k->sync(k, &e);
  CHECK(rc == GS_EINVAL && strstr(e.msg, "dtype"), "add_lp bad dtype: rc %d '%s'", rc, e.msg);
  free(x); free(y); free(y0); free(h);
}

/* ---- GradScaler ---- */
static void test_scaler(void) {
  gs_scaler s;
  gs_scaler_init(&s, 65536.0f, true);
  CHECK(s.scale == 65536.0f && s.growth == 2.0f && s.backoff == 0.5f && s.interval == 2000 &&
            s.clean == 0, "init: scale %g growth %g backoff %g interval %d", (double)s.scale,
        (double)s.growth, (double)s.backoff, s.interval);
  int skipped = 0;
  for (int i = 0; i < 1999; i++) skipped += gs_scaler_update(&s, false);
  CHECK(skipped == 0 && s.scale == 65536.0f && s.clean == 1999,
        "after 1999 clean steps: scale %g clean %d skipped %d", (double)s.scale, s.clean,
        skipped);
  CHECK(!gs_scaler_update(&s, false) && s.scale == 131072.0f && s.clean == 0,
        "step 2000: scale %g clean %d", (double)s.scale, s.clean);
  /* overflow: skip, halve, restart the count */
  for (int i = 0; i < 1500; i++) gs_scaler_update(&s, false);
  CHECK(gs_scaler_update(&s, true) && s.scale == 65536.0f && s.clean == 0,
        "overflow: scale %g clean %d", (double)s.scale, s.clean);
  CHECK(gs_scaler_update(&s, true) && s.scale == 32768.0f, "second overflow: scale %g",
        (double)s.scale);
  /* the 1500 clean steps before the overflow do not count */
  for (int i = 0; i < 1999; i++) gs_scaler_update(&s, false);
  CHECK(s.scale == 32768.0f, "growth too early after an overflow: %g", (double)s.scale);
  gs_scaler_update(&s, false);
  CHECK(s.scale == 65536.0f, "no growth 2000 steps after an overflow: %g", (double)s.scale);
  /* growth that would overflow float is not applied (as PyTorch) */
  gs_scaler_init(&s, 0x1p127f, true);
  for (int i = 0; i < 2000; i++) gs_scaler_update(&s, false);
  CHECK(s.scale == 0x1p127f && s.clean == 0, "growth past FLT_MAX: scale %g clean %d",
        (double)s.scale, s.clean);
  /* a fixed scale never moves but still skips overflowing steps */
  gs_scaler_init(&s, 128.0f, false);
  skipped = 0;
  for (int i = 0; i < 5000; i++) skipped += gs_scaler_update(&s, (i % 1000) == 999);
  CHECK(s.scale == 128.0f && skipped == 5, "fixed scale: scale %g skipped %d",
        (double)s.scale, skipped);
}

int main(void) {
  test_scaler();
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    gs_kernels *k = tk_open((gs_cpu_isa)isa);
    if (!k) continue;
    test_sgd(k);
    test_vector(k);
    k->destroy(k);
  }
  return check_done("test_optim");
}
