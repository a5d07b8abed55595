/* test_align.c: every vector op of every code path at every byte alignment.
 *
 * kernels.h promises no alignment: received frames sit wherever ZeroMQ
 * put them. So each op of each path this CPU runs is called with every
 * buffer at byte offsets 0..63 from a 64-byte boundary (each buffer at its
 * own offset), for every length 0..67 and one large odd length, and must
 * give the scalar path's bits (NaN payloads aside where two NaNs meet, as
 * in test_dispatch.c) without touching a byte outside its buffers (guard
 * bytes around each one). The table-level ops that do more than call one
 * vector op (convert between fp16 and bf16, add_lp, nonfinite) are checked
 * the same way through gs_kernels_cpu. Run it under UBSan: a typed load
 * of a misaligned address is reported there even where x86 forgives it. */
#include "tk.h"

#define MAXOFF 64
#define GUARD 64
#define BIG 65537
#define NBUF 4

enum { F32 = 4, U16 = 2 };

/* One op: its buffers' element sizes (0: unused) and whether the op writes
 * them; a call through the vector table. */
typedef struct op {
  const char *name;
  int esz[NBUF];
  bool out[NBUF];
  /* returns a scalar result (sum, nonfinite count) or 0 */
  double (*call)(const gs_cpu_vec *v, size_t n, void *b[NBUF]);
} op;

static double o_add(const gs_cpu_vec *v, size_t n, void *b[]) { v->add(n, b[0], b[1]); return 0; }
static double o_axpy(const gs_cpu_vec *v, size_t n, void *b[]) { v->axpy(n, 0.3f, b[1], b[0]); return 0; }
static double o_scale(const gs_cpu_vec *v, size_t n, void *b[]) { v->scale(n, -1.7f, b[0]); return 0; }
static double o_adds(const gs_cpu_vec *v, size_t n, void *b[]) { v->add_scalar(n, 0.1f, b[0]); return 0; }
/* the sum's bits; any NaN counts as one value (which NaN survives when
 * two meet depends on the operand order the compiler picked) */
static double o_sum(const gs_cpu_vec *v, size_t n, void *b[]) {
  float s = v->sum(n, b[1]);
  return isnan(s) ? -1.0 : (double)tk_bits(s);
}
static double o_relu(const gs_cpu_vec *v, size_t n, void *b[]) { v->relu(n, b[1], b[0]); return 0; }
static double o_relug(const gs_cpu_vec *v, size_t n, void *b[]) {
  v->relu_grad(n, b[1], b[2], b[0]);
  return 0;
}
static double o_sgd(const gs_cpu_vec *v, size_t n, void *b[]) {
  v->sgd(n, b[0], b[1], NULL, 0.1f, 0.0f, 1e-3f, 1);
  return 0;
}
static double o_sgdm1(const gs_cpu_vec *v, size_t n, void *b[]) {
  v->sgd(n, b[0], b[1], b[3], 0.05f, 0.9f, 5e-4f, 1);
  return 0;
}
static double o_sgdm(const gs_cpu_vec *v, size_t n, void *b[]) {
  v->sgd(n, b[0], b[1], b[3], 0.05f, 0.9f, 5e-4f, 0);
  return 0;
}
static double o_addh(const gs_cpu_vec *v, size_t n, void *b[]) { v->add_f16(n, b[0], b[1]); return 0; }
static double o_addb(const gs_cpu_vec *v, size_t n, void *b[]) { v->add_bf16(n, b[0], b[1]); return 0; }
static double o_toh(const gs_cpu_vec *v, size_t n, void *b[]) { v->f32_to_f16(n, b[0], b[1]); return 0; }
static double o_tob(const gs_cpu_vec *v, size_t n, void *b[]) { v->f32_to_bf16(n, b[0], b[1]); return 0; }
static double o_fromh(const gs_cpu_vec *v, size_t n, void *b[]) { v->f16_to_f32(n, b[0], b[1]); return 0; }
static double o_fromb(const gs_cpu_vec *v, size_t n, void *b[]) { v->bf16_to_f32(n, b[0], b[1]); return 0; }
static double o_nf32(const gs_cpu_vec *v, size_t n, void *b[]) { return (double)v->nonfinite_f32(n, b[1]); }
static double o_nf16(const gs_cpu_vec *v, size_t n, void *b[]) { return (double)v->nonfinite_f16(n, b[1]); }
static double o_nfb16(const gs_cpu_vec *v, size_t n, void *b[]) { return (double)v->nonfinite_bf16(n, b[1]); }
/* two rows of n/2 columns at strides that keep both inside n elements */
static double o_copy2d(const gs_cpu_vec *v, size_t n, void *b[]) {
  size_t cols = n / 2, ld = n - cols;
  v->copy2d(n >= 2 ? 2 : 0, cols, b[0], ld, b[1], ld);
  return 0;
}
static double o_add2d(const gs_cpu_vec *v, size_t n, void *b[]) {
  size_t cols = n / 2, ld = n - cols;
  v->add2d(n >= 2 ? 2 : 0, cols, b[0], ld, b[1], ld);
  return 0;
}

#define OUT0 {true, false, false, false}
static const op ops[] = {
  {"add", {F32, F32, 0, 0}, OUT0, o_add},
  {"axpy", {F32, F32, 0, 0}, OUT0, o_axpy},
  {"scale", {F32, 0, 0, 0}, OUT0, o_scale},
  {"add_scalar", {F32, 0, 0, 0}, OUT0, o_adds},
  {"sum", {0, F32, 0, 0}, {false}, o_sum},
  {"relu", {F32, F32, 0, 0}, OUT0, o_relu},
  {"relu_grad", {F32, F32, F32, 0}, OUT0, o_relug},
  {"sgd", {F32, F32, 0, 0}, OUT0, o_sgd},
  {"sgd momentum first", {F32, F32, 0, F32}, {true, false, false, true}, o_sgdm1},
  {"sgd momentum", {F32, F32, 0, F32}, {true, false, false, true}, o_sgdm},
  {"add_f16", {F32, U16, 0, 0}, OUT0, o_addh},
  {"add_bf16", {F32, U16, 0, 0}, OUT0, o_addb},
  {"f32_to_f16", {U16, F32, 0, 0}, OUT0, o_toh},
  {"f32_to_bf16", {U16, F32, 0, 0}, OUT0, o_tob},
  {"f16_to_f32", {F32, U16, 0, 0}, OUT0, o_fromh},
  {"bf16_to_f32", {F32, U16, 0, 0}, OUT0, o_fromb},
  {"nonfinite_f32", {0, F32, 0, 0}, {false}, o_nf32},
  {"nonfinite_f16", {0, U16, 0, 0}, {false}, o_nf16},
  {"nonfinite_bf16", {0, U16, 0, 0}, {false}, o_nfb16},
  {"copy2d", {F32, F32, 0, 0}, OUT0, o_copy2d},
  {"add2d", {F32, F32, 0, 0}, OUT0, o_add2d},
};
#undef OUT0
#define NOPS (sizeof ops / sizeof ops[0])

/* Source bytes every buffer is filled from: floats with zeros, -0, inf,
 * NaN and subnormals mixed in, and random halves (any bits). */
static uint8_t *pool_f32, *pool_u16;

static void make_pools(void) {
  size_t n = BIG + 256; /* seeds (element offsets into the pool) stay below 256 */
  float *f = tk_malloc(n * 4);
  uint16_t *h = tk_malloc(n * 2);
  for (size_t i = 0; i < n; i++) {
    int r = tk_int(40);
    f[i] = r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? INFINITY : r == 3 ? -INFINITY
         : r == 4 ? NAN : r == 5 ? tk_float((uint32_t)tk_u64() & 0x807fffffu)
         : tk_unif(-4, 4);
    h[i] = (uint16_t)tk_u64();
  }
  pool_f32 = (uint8_t *)f;
  pool_u16 = (uint8_t *)h;
}

/* A 64-byte aligned arena per buffer: GUARD bytes, up to MAXOFF more, the
 * elements, GUARD bytes. */
typedef struct arena {
  uint8_t *mem;
  size_t cap;
} arena;

/* only the part a call of n elements can reach is reset and checked */
static size_t span_of(size_t len) { return GUARD + MAXOFF + len + GUARD; }

static void *place(arena *a, int off, int esz, size_t n, int seed) {
  memset(a->mem, 0xa5, span_of(n * (size_t)esz));
  uint8_t *p = a->mem + GUARD + off;
  memcpy(p, (esz == F32 ? pool_f32 : pool_u16) + (size_t)seed * esz, n * (size_t)esz);
  return p;
}

/* bytes outside [p, p + len) still hold the guard pattern */
static bool guards_ok(const arena *a, const void *p, size_t len) {
  const uint8_t *b = p;
  for (const uint8_t *q = a->mem; q < b; q++) if (*q != 0xa5) return false;
  for (const uint8_t *q = b + len; q < a->mem + span_of(len); q++) if (*q != 0xa5) return false;
  return true;
}

/* same bits, except two NaNs (which payload an add keeps is unspecified) */
static size_t diff(const void *a, const void *b, size_t n, int esz) {
  size_t d = 0;
  for (size_t i = 0; i < n; i++) {
    if (esz == U16) {
      d += gs_load_u16(a, i) != gs_load_u16(b, i);
      continue;
    }
    float x = gs_load_f32(a, i), y = gs_load_f32(b, i);
    d += tk_bits(x) != tk_bits(y) && !(isnan(x) && isnan(y));
  }
  return d;
}

static arena ar[2][NBUF];

/* One op at length n with buffer j at offset offs[j]: scalar vs path v. */
static void run_one(const gs_cpu_vec *v, const op *o, size_t n, const int offs[NBUF], int seed) {
  const gs_cpu_vec *s = gs_cpu_vec_of(GS_ISA_SCALAR);
  void *b[2][NBUF] = {{0}};
  double r[2];
  for (int side = 0; side < 2; side++) {
    for (int j = 0; j < NBUF; j++)
      if (o->esz[j]) b[side][j] = place(&ar[side][j], offs[j], o->esz[j], n, seed + 7 * j);
    r[side] = o->call(side ? v : s, n, b[side]);
  }
  CHECK(r[0] == r[1], "%s %s n=%zu offsets %d/%d: result %g, scalar %g", v->name, o->name, n,
        offs[0], offs[1], r[1], r[0]);
  for (int j = 0; j < NBUF; j++) {
    if (!o->esz[j]) continue;
    size_t len = n * (size_t)o->esz[j];
    for (int side = 0; side < 2; side++)
      CHECK(guards_ok(&ar[side][j], b[side][j], len), "%s %s n=%zu buffer %d at offset %d: "
            "wrote outside its %zu bytes", side ? v->name : "scalar", o->name, n, j, offs[j], len);
    if (o->out[j]) {
      size_t d = diff(b[0][j], b[1][j], n, o->esz[j]);
      CHECK(d == 0, "%s %s n=%zu buffer %d at offset %d: %zu elements differ from scalar",
            v->name, o->name, n, j, offs[j], d);
    }
  }
}

static void test_path(gs_cpu_isa isa) {
  const gs_cpu_vec *v = gs_cpu_vec_of(isa);
  int before = check_failures;
  long calls = 0;
  for (size_t k = 0; k < NOPS; k++) {
    for (int off = 0; off < MAXOFF; off++) {
      /* each buffer at its own offset, so every pairing of misalignments
       * between them comes up over the 64 rounds */
      int offs[NBUF] = {off, (off * 7 + 3) % MAXOFF, (off * 13 + 5) % MAXOFF, (off * 29 + 11) % MAXOFF};
      for (size_t n = 0; n <= 67; n++, calls++) run_one(v, &ops[k], n, offs, (int)(n + off) % 61);
      run_one(v, &ops[k], BIG, offs, off);
      calls++;
    }
  }
  printf("%s: %zu ops x 64 offsets x lengths 0..67 and %d: %ld calls, %s\n", v->name, NOPS, BIG,
         calls, check_failures == before ? "same bits as scalar, no byte outside a buffer touched"
                                      : "FAILURES");
}

/* The table's own conversions and accumulations at odd addresses: every
 * pair of dtypes (fp16 <-> bf16 goes through a stack buffer in cpu.c). */
static void test_table(gs_kernels *k, gs_kernels *ref) {
  const gs_dtype dts[3] = {GS_F32, GS_F16, GS_BF16};
  int before = check_failures;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      for (int off = 0; off < MAXOFF; off += 3)
        for (size_t n = 0; n <= 2100; n += n < 67 ? 1 : 1031) {
          int so = (off * 7 + 1) % MAXOFF, esz_from = (int)gs_dtype_size(dts[a]),
              esz_to = (int)gs_dtype_size(dts[b]);
          void *src[2], *dst[2];
          size_t bad[2];
          for (int side = 0; side < 2; side++) {
            gs_kernels *t = side ? k : ref;
            src[side] = place(&ar[side][1], so, esz_from, n, off);
            dst[side] = place(&ar[side][0], off, esz_to, n, off + 1);
            t->convert(t, dts[b], dst[side], dts[a], src[side], n);
            bad[side] = t->nonfinite(t, dts[a], n, src[side]);
            CHECK(guards_ok(&ar[side][0], dst[side], n * (size_t)esz_to),
                  "%s convert %s->%s n=%zu offset %d wrote outside", t->name,
                  gs_dtype_name(dts[a]), gs_dtype_name(dts[b]), n, off);
          }
          CHECK(diff(dst[0], dst[1], n, esz_to) == 0 && bad[0] == bad[1],
                "convert %s->%s / nonfinite n=%zu offsets %d/%d differ from scalar",
                gs_dtype_name(dts[a]), gs_dtype_name(dts[b]), n, off, so);
          if (dts[b] != GS_F32) continue;
          for (int side = 0; side < 2; side++) {
            gs_kernels *t = side ? k : ref;
            dst[side] = place(&ar[side][0], off, F32, n, off + 2);
            t->add_lp(t, dts[a], n, dst[side], src[side]);
          }
          CHECK(diff(dst[0], dst[1], n, F32) == 0, "add_lp %s n=%zu offsets %d/%d differs",
                gs_dtype_name(dts[a]), n, off, so);
        }
  CHECK_SYNC_OK(k);
  printf("%s table: convert (all 9 dtype pairs), add_lp, nonfinite at odd addresses: %s\n",
         gs_cpu_isa_name(gs_kernels_cpu_isa(k)), check_failures == before ? "same bits" : "FAILURES");
}

int main(void) {
  tk_seed(12);
  make_pools();
  size_t cap = GUARD + MAXOFF + (size_t)BIG * 4 + GUARD;
  for (int s = 0; s < 2; s++)
    for (int j = 0; j < NBUF; j++) {
      ar[s][j].cap = cap;
      ar[s][j].mem = aligned_alloc(64, (cap + 63) / 64 * 64);
      REQUIRE(ar[s][j].mem);
    }
  gs_kernels *ref = tk_open(GS_ISA_SCALAR);
  for (int isa = 0; isa < GS_ISA_COUNT; isa++) {
    if (!gs_cpu_isa_supported((gs_cpu_isa)isa)) {
      printf("skipped: this CPU lacks the %s path (%s); run this test on one that has it\n",
             gs_cpu_isa_name((gs_cpu_isa)isa), isa == GS_ISA_AVX512 ? "avx512f/bw/vl" : "avx2/f16c");
      continue;
    }
    test_path((gs_cpu_isa)isa);
    gs_kernels *k = tk_open((gs_cpu_isa)isa);
    test_table(k, ref);
    k->destroy(k);
  }
  ref->destroy(ref);
  for (int s = 0; s < 2; s++)
    for (int j = 0; j < NBUF; j++) free(ar[s][j].mem);
  free(pool_f32);
  free(pool_u16);
  return check_done("test_align");
}
