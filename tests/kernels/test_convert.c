/* test_convert.c: fp32 <-> fp16 / bf16 conversion and the finite check,
 * on every code path: the scalar elem.h functions, each SIMD path this CPU
 * has (through convert()), and the F16C instructions themselves as an
 * oracle where the CPU has them. The reference is tk.h's, which rounds by
 * value (nearest neighbour in a table of every 16-bit value, ties to even)
 * instead of by bit manipulation.
 *
 * - every one of the 65536 fp16 and bf16 patterns to fp32 and back;
 * - fp32 -> fp16 / bf16 over every 257th of the 2^32 patterns;
 * - every rounding boundary: each midpoint between neighbouring 16-bit
 *   values and the fp32 values on either side of it, both signs;
 * - the named edges (ties to even, subnormals, 65504 / 65520, inf, NaN with
 *   payloads, -0) with their expected bits written out;
 * - fp16 <-> bf16 directly; sub-ranges at odd offsets and lengths (tails);
 * - nonfinite() counts. */
#include "kernels/elem.h"
#include "tk.h"

static gs_kernels *paths[GS_ISA_COUNT];
static int have_f16c;

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1

__attribute__((target("avx,f16c"))) static void f16c_to_f32(size_t n, const uint16_t *h,
                                                             float *f) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
  if (i < n) { /* the tail through a padded vector */
    uint16_t th[8] = {0};
    float tf[8];
    memcpy(th, h + i, (n - i) * 2);
    _mm256_storeu_ps(tf, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)th)));
    memcpy(f + i, tf, (n - i) * 4);
  }
}

__attribute__((target("avx,f16c"))) static void f16c_from_f32(size_t n, const float *f,
                                                               uint16_t *h) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(f + i), 0));
  if (i < n) {
    float tf[8] = {0};
    uint16_t th[8];
    memcpy(tf, f + i, (n - i) * 4);
    _mm_storeu_si128((__m128i *)th, _mm256_cvtps_ph(_mm256_loadu_ps(tf), 0));
    memcpy(h + i, th, (n - i) * 2);
  }
}
#else
#define HAVE_X86 0
static void f16c_to_f32(size_t n, const uint16_t *h, float *f) { (void)n, (void)h, (void)f; }
static void f16c_from_f32(size_t n, const float *f, uint16_t *h) { (void)n, (void)f, (void)h; }
#endif

/* Converts src (n fp32) to t on every path and compares with the
 * reference; returns the number of mismatches (and prints the first). */
static size_t narrow_all(gs_dtype t, const float *src, size_t n, uint16_t *out, const char *what) {
  size_t bad = 0;
  uint16_t (*ref)(float) = t == GS_F16 ? tk_ref_f16 : tk_ref_bf16;
  uint16_t *want = tk_malloc(n * 2);
  for (size_t i = 0; i < n; i++) want[i] = ref(src[i]);
  /* scalar elem.h */
  for (size_t i = 0; i < n; i++) {
    uint16_t got = t == GS_F16 ? gs_f32_to_f16(src[i]) : gs_f32_to_bf16(src[i]);
    if (got != want[i] && bad++ == 0)
      fprintf(stderr, "  %s elem.h %s(0x%08x) = 0x%04x, want 0x%04x\n", what,
              gs_dtype_name(t), tk_bits(src[i]), got, want[i]);
  }
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    if (!paths[isa]) continue;
    memset(out, 0xa5, n * 2);
    paths[isa]->convert(paths[isa], t, out, GS_F32, src, n);
    for (size_t i = 0; i < n; i++)
      if (out[i] != want[i] && bad++ == 0)
        fprintf(stderr, "  %s %s %s(0x%08x) = 0x%04x, want 0x%04x\n", what,
                gs_cpu_isa_name((gs_cpu_isa)isa), gs_dtype_name(t), tk_bits(src[i]), out[i],
                want[i]);
  }
  if (t == GS_F16 && have_f16c) {
    f16c_from_f32(n, src, out);
    for (size_t i = 0; i < n; i++)
      if (out[i] != want[i] && bad++ == 0)
        fprintf(stderr, "  %s F16C vcvtps2ph(0x%08x) = 0x%04x, reference 0x%04x\n", what,
                tk_bits(src[i]), out[i], want[i]);
  }
  free(want);
  return bad;
}

/* every 16-bit pattern to fp32 (all paths), then back */
static void test_all_patterns(gs_dtype t) {
  const size_t n = 65536;
  uint16_t *h = tk_malloc(n * 2), *back = tk_malloc(n * 2);
  float *f = tk_malloc(n * 4);
  uint32_t *want = tk_malloc(n * 4);
  for (size_t i = 0; i < n; i++) {
    h[i] = (uint16_t)i;
    want[i] = t == GS_F16 ? tk_ref_f16_to_f32_bits(h[i]) : tk_ref_bf16_to_f32_bits(h[i]);
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float g = t == GS_F16 ? gs_f16_to_f32(h[i]) : gs_bf16_to_f32(h[i]);
    if (tk_bits(g) != want[i] && bad++ == 0)
      fprintf(stderr, "  elem.h %s 0x%04zx -> 0x%08x, want 0x%08x\n", gs_dtype_name(t), i,
              tk_bits(g), want[i]);
  }
  CHECK(bad == 0, "elem.h %s -> fp32: %zu of 65536 patterns wrong", gs_dtype_name(t), bad);
  if (t == GS_F16 && have_f16c) {
    f16c_to_f32(n, h, f);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += tk_bits(f[i]) != want[i];
    CHECK(bad == 0, "F16C vcvtph2ps disagrees with the reference on %zu patterns", bad);
  }
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    if (!paths[isa]) continue;
    gs_kernels *k = paths[isa];
    memset(f, 0xa5, n * 4);
    k->convert(k, GS_F32, f, t, h, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += tk_bits(f[i]) != want[i];
    CHECK(bad == 0, "%s %s -> fp32: %zu of 65536 patterns wrong",
          gs_cpu_isa_name(gs_kernels_cpu_isa(k)), gs_dtype_name(t), bad);
    /* and back: the same pattern, NaN made quiet */
    k->convert(k, t, back, GS_F32, f, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
      uint16_t w = h[i];
      if (isnan(tk_float(want[i]))) w |= t == GS_F16 ? 0x200 : 0x40;
      bad += back[i] != w;
    }
    CHECK(bad == 0, "%s %s -> fp32 -> %s: %zu of 65536 patterns do not round-trip",
          gs_cpu_isa_name(gs_kernels_cpu_isa(k)), gs_dtype_name(t), gs_dtype_name(t), bad);
  }
  /* the other 16-bit type, directly: one rounding from the exact value */
  gs_dtype o = t == GS_F16 ? GS_BF16 : GS_F16;
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    if (!paths[isa]) continue;
    gs_kernels *k = paths[isa];
    k->convert(k, o, back, t, h, n);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
      uint16_t w = o == GS_F16 ? tk_ref_f16(tk_float(want[i])) : tk_ref_bf16(tk_float(want[i]));
      bad += back[i] != w;
    }
    CHECK(bad == 0, "%s %s -> %s: %zu of 65536 patterns wrong",
          gs_cpu_isa_name(gs_kernels_cpu_isa(k)), gs_dtype_name(t), gs_dtype_name(o), bad);
  }
  free(h);
  free(back);
  free(f);
  free(want);
}

/* fp32 -> 16 bits over a stride of all 2^32 patterns */
static void test_sweep(void) {
  const size_t block = 1 << 16;
  const uint64_t stride = 257;
  float *f = tk_malloc(block * 4);
  uint16_t *out = tk_malloc(block * 2);
  size_t bad16 = 0, badbf = 0, total = 0;
  uint64_t u = 0;
  while (u < (1ull << 32)) {
    size_t n = 0;
    for (; n < block && u < (1ull << 32); n++, u += stride) f[n] = tk_float((uint32_t)u);
    bad16 += narrow_all(GS_F16, f, n, out, "sweep");
    badbf += narrow_all(GS_BF16, f, n, out, "sweep");
    total += n;
  }
  CHECK(bad16 == 0 && badbf == 0, "fp32 sweep (%zu values): %zu fp16, %zu bf16 mismatches",
        total, bad16, badbf);
  printf("fp32 sweep: %zu patterns, every path agrees with the reference%s\n", total,
         have_f16c ? " and with F16C" : "");
  free(f);
  free(out);
}

/* Every midpoint between neighbouring 16-bit values (ties), and the fp32
 * values just below and above it, with both signs. */
static void test_boundaries(gs_dtype t) {
  int top = t == GS_F16 ? 0x7c00 : 0x7f80;
  size_t n = (size_t)top * 6;
  float *f = tk_malloc(n * 4);
  uint16_t *out = tk_malloc(n * 2);
  size_t m = 0;
  for (int i = 0; i < top; i++) {
    double lo = t == GS_F16 ? tk_f16_value((uint16_t)i) : tk_bf16_value((uint16_t)i);
    double hi = i + 1 == top ? (t == GS_F16 ? 65536.0 : ldexp(1.0, 128))
                             : (t == GS_F16 ? tk_f16_value((uint16_t)(i + 1))
                                            : tk_bf16_value((uint16_t)(i + 1)));
    double mid = (lo + hi) / 2;
    float fm = (float)mid;
    if ((double)fm != mid) continue; /* (always exact: 16-bit types are narrower) */
    for (int s = 0; s < 2; s++) {
      float v = s ? -fm : fm;
      f[m++] = v;
      f[m++] = nextafterf(v, INFINITY);
      f[m++] = nextafterf(v, -INFINITY);
    }
  }
  CHECK(m == n, "%s: %zu midpoints not exact in fp32", gs_dtype_name(t), (n - m) / 6);
  size_t bad = narrow_all(t, f, m, out, "boundary");
  CHECK(bad == 0, "%s rounding boundaries: %zu of %zu wrong", gs_dtype_name(t), bad, m);
  free(f);
  free(out);
}

typedef struct edge {
  uint32_t f;
  uint16_t h;
  const char *what;
} edge;

static void test_edges(void) {
  static const edge f16[] = {
    {0x00000000, 0x0000, "+0"},
    {0x80000000, 0x8000, "-0"},
    {0x3f800000, 0x3c00, "1"},
    {0x3f801000, 0x3c00, "1 + 2^-11: tie, to even (down)"},
    {0x3f803000, 0x3c02, "1 + 3*2^-11: tie, to even (up)"},
    {0x3f801001, 0x3c01, "just above a tie"},
    {0x477fe000, 0x7bff, "65504, the largest"},
    {0x477fefff, 0x7bff, "just below 65520"},
    {0x477ff000, 0x7c00, "65520: tie with 65536, to even = inf"},
    {0x47800000, 0x7c00, "65536"},
    {0xc77ff000, 0xfc00, "-65520"},
    {0x7f7fffff, 0x7c00, "FLT_MAX"},
    {0x7f800000, 0x7c00, "+inf"},
    {0xff800000, 0xfc00, "-inf"},
    {0x38800000, 0x0400, "2^-14, smallest normal"},
    {0x387fc000, 0x03ff, "largest subnormal"},
    {0x387fe000, 0x0400, "tie between the largest subnormal and 2^-14: even = up"},
    {0x33800000, 0x0001, "2^-24, smallest subnormal"},
    {0x33000000, 0x0000, "2^-25: tie with 0, to even = 0"},
    {0x33000001, 0x0001, "just above 2^-25"},
    {0x33c00000, 0x0002, "1.5*2^-24: tie, to even = 2"},
    {0x34200000, 0x0002, "2.5*2^-24: tie, to even = 2"},
    {0xb3c00000, 0x8002, "-1.5*2^-24"},
    {0x00000001, 0x0000, "fp32 subnormal"},
    {0x7fc00000, 0x7e00, "quiet NaN"},
    {0x7f800001, 0x7e00, "signalling NaN, payload in the dropped bits"},
    {0x7f802000, 0x7e01, "signalling NaN, payload kept, made quiet"},
    {0x7fa00000, 0x7f00, "signalling NaN, high payload"},
    {0xffc00001, 0xfe00, "negative NaN"},
  };
  static const edge bf16[] = {
    {0x00000000, 0x0000, "+0"},
    {0x80000000, 0x8000, "-0"},
    {0x3f800000, 0x3f80, "1"},
    {0x3f808000, 0x3f80, "tie, to even (down)"},
    {0x3f818000, 0x3f82, "tie, to even (up)"},
    {0x3f808001, 0x3f81, "just above a tie"},
    {0x3f807fff, 0x3f80, "just below a tie"},
    {0x7f7f7fff, 0x7f7f, "largest that stays finite"},
    {0x7f7f8000, 0x7f80, "tie at the top: even = inf"},
    {0x7f7fffff, 0x7f80, "FLT_MAX rounds to inf"},
    {0x7f800000, 0x7f80, "+inf"},
    {0xff800000, 0xff80, "-inf"},
    {0x00008000, 0x0000, "subnormal tie with 0: even = 0"},
    {0x00018000, 0x0002, "subnormal tie, to even (up)"},
    {0x00008001, 0x0001, "subnormal above a tie (no flush to zero)"},
    {0x007fffff, 0x0080, "largest fp32 subnormal rounds to the smallest normal"},
    {0x7fc00000, 0x7fc0, "quiet NaN"},
    {0x7f800001, 0x7fc0, "signalling NaN, payload in the dropped bits: stays NaN"},
    {0x7f810000, 0x7fc1, "signalling NaN, payload kept, made quiet"},
    {0xff800001, 0xffc0, "negative NaN"},
  };
  const struct {
    gs_dtype t;
    const edge *e;
    size_t n;
  } sets[2] = {{GS_F16, f16, sizeof f16 / sizeof f16[0]},
               {GS_BF16, bf16, sizeof bf16 / sizeof bf16[0]}};
  for (int s = 0; s < 2; s++)
    for (size_t i = 0; i < sets[s].n; i++) {
      const edge *e = &sets[s].e[i];
      float f = tk_float(e->f);
      /* the reference itself first: it must agree with the written bits */
      uint16_t r = sets[s].t == GS_F16 ? tk_ref_f16(f) : tk_ref_bf16(f);
      CHECK(r == e->h, "reference %s(0x%08x) = 0x%04x, expected 0x%04x (%s)",
            gs_dtype_name(sets[s].t), e->f, r, e->h, e->what);
      uint16_t out[1];
      size_t bad = narrow_all(sets[s].t, &f, 1, out, e->what);
      CHECK(bad == 0, "%s edge 0x%08x (%s): %zu paths wrong", gs_dtype_name(sets[s].t), e->f,
            e->what, bad);
    }
}

/* offsets and lengths around the vector widths; nothing outside is written */
static void test_tails(void) {
  const size_t n = 256;
  float *f = tk_malloc(n * 4), *g = tk_malloc(n * 4);
  uint16_t *h = tk_malloc(n * 2), *o = tk_malloc(n * 2);
  tk_seed(300);
  for (size_t i = 0; i < n; i++) f[i] = tk_unif(-70000, 70000) * (i % 3 ? 1e-3f : 1.0f);
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    gs_kernels *k = paths[isa];
    if (!k) continue;
    int bad = 0;
    for (size_t off = 0; off < 20; off++)
      for (size_t len = 0; len <= 67; len++)
        for (int t = GS_F16; t <= GS_BF16; t++) {
          memset(o, 0x5a, n * 2);
          k->convert(k, (gs_dtype)t, o + off, GS_F32, f + off, len);
          for (size_t i = 0; i < n; i++) {
            uint16_t w = (i >= off && i < off + len)
                             ? (t == GS_F16 ? tk_ref_f16(f[i]) : tk_ref_bf16(f[i])) : 0x5a5a;
            bad += o[i] != w;
          }
          for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(i * 977u + off);
          memset(g, 0x5a, n * 4);
          k->convert(k, GS_F32, g + off, (gs_dtype)t, h + off, len);
          for (size_t i = 0; i < n; i++) {
            uint32_t w = (i >= off && i < off + len)
                             ? (t == GS_F16 ? tk_ref_f16_to_f32_bits(h[i])
                                            : tk_ref_bf16_to_f32_bits(h[i])) : 0x5a5a5a5au;
            bad += tk_bits(g[i]) != w;
          }
        }
    CHECK(bad == 0, "%s convert at odd offsets / lengths: %d wrong",
          gs_cpu_isa_name((gs_cpu_isa)isa), bad);
    /* same dtype: a copy */
    memset(g, 0, n * 4);
    k->convert(k, GS_F32, g, GS_F32, f, n);
    CHECK(memcmp(g, f, n * 4) == 0, "fp32 -> fp32 is not a copy");
    CHECK_SYNC_OK(k);
    gs_err e = {0};
    k->convert(k, (gs_dtype)5, g, GS_F32, f, 4);
    int rc = k->sync(k, &e);
    CHECK(rc == GS_EINVAL && strstr(e.msg, "dtype"), "convert bad dtype: rc %d '%s'", rc,
          e.msg);
  }
  free(f); free(g); free(h); free(o);
}

static void test_nonfinite(void) {
  const size_t n = 5000;
  float *f = tk_malloc(n * 4);
  uint16_t *h = tk_malloc(n * 2), *b = tk_malloc(n * 2), *all = tk_malloc(65536 * 2);
  for (size_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  size_t all16 = 0, allbf = 0;
  for (size_t i = 0; i < 65536; i++) {
    all16 += !isfinite(tk_f16_value(all[i]));
    allbf += !isfinite(tk_bf16_value(all[i]));
  }
  CHECK(all16 == 2048 && allbf == 256, "reference counts %zu %zu", all16, allbf);
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    gs_kernels *k = paths[isa];
    if (!k) continue;
    const char *name = gs_cpu_isa_name((gs_cpu_isa)isa);
    CHECK(k->nonfinite(k, GS_F16, 65536, all) == all16, "%s: fp16 all patterns",  name);
    CHECK(k->nonfinite(k, GS_BF16, 65536, all) == allbf, "%s: bf16 all patterns", name);
    for (int round = 0; round < 30; round++) {
      tk_seed(400 + round);
      size_t len = (size_t)tk_int((int)n) + 1, off = (size_t)tk_int(17);
      if (off + len > n) len = n - off;
      for (size_t i = 0; i < n; i++) {
        f[i] = tk_unif(-1e30f, 1e30f);
        h[i] = (uint16_t)(tk_u64() & 0xffff & ~0x4000u); /* exponent never all ones */
        b[i] = (uint16_t)(tk_u64() & 0xffff & ~0x4000u);
      }
      int bad_count = round % 4 == 0 ? 0 : tk_int(40) + 1;
      for (int j = 0; j < bad_count; j++) {
        size_t at = j == 0 ? off + len - 1 : off + (size_t)tk_int((int)len); /* the last too */
        uint32_t nan = 0x7f800000u | (uint32_t)(tk_u64() & 0x7fffff) | (uint32_t)(j & 1) << 31;
        f[at] = tk_float(j % 3 ? nan : 0xff800000u);
        h[at] = (uint16_t)(0x7c00 | (tk_u64() & 0x83ff));
        b[at] = (uint16_t)(0x7f80 | (tk_u64() & 0x807f));
      }
      size_t wf = 0, wh = 0, wb = 0;
      for (size_t i = off; i < off + len; i++) {
        wf += !isfinite(f[i]);
        wh += !isfinite(tk_f16_value(h[i]));
        wb += !isfinite(tk_bf16_value(b[i]));
      }
      size_t gf = k->nonfinite(k, GS_F32, len, f + off);
      size_t gh = k->nonfinite(k, GS_F16, len, h + off);
      size_t gb = k->nonfinite(k, GS_BF16, len, b + off);
      CHECK(gf == wf && gh == wh && gb == wb,
            "%s nonfinite off %zu len %zu: fp32 %zu/%zu fp16 %zu/%zu bf16 %zu/%zu", name, off,
            len, gf, wf, gh, wh, gb, wb);
    }
    CHECK(k->nonfinite(k, GS_F32, 0, f) == 0, "%s: empty", name);
  }
  free(f); free(h); free(b); free(all);
}

int main(void) {
#if HAVE_X86
  /* the AVX2 path's requirements include F16C and AVX */
  have_f16c = gs_cpu_isa_supported(GS_ISA_AVX2);
#endif
  if (!have_f16c) printf("note: no F16C on this CPU; the hardware oracle is skipped\n");
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) paths[isa] = tk_open((gs_cpu_isa)isa);
  test_edges();
  test_all_patterns(GS_F16);
  test_all_patterns(GS_BF16);
  test_boundaries(GS_F16);
  test_boundaries(GS_BF16);
  test_tails();
  test_nonfinite();
  test_sweep();
  for (int isa = 0; isa < GS_ISA_COUNT; isa++)
    if (paths[isa]) paths[isa]->destroy(paths[isa]);
  return check_done("test_convert");
}
