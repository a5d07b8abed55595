/* test_ring_ops.c: the reductions besides training's fp32 sum, and the
 * fp64 / int32 element types (kernels.h gs_reduce_host, gs_postdiv_host;
 * allreduce.h gs_comm_allreduce_op, gs_comm_reduce_scatter, gs_comm_reduce),
 * rank per process.
 *
 *   test_ring_ops unit         gs_reduce_host / gs_postdiv_host alone, at
 *                              odd byte addresses: every (type, op) against
 *                              a plain reference; int32 sum and prod wrap;
 *                              min and max give the same bits either way
 *                              round (NaN against a number, two NaNs, -0
 *                              against +0); avg's post-division (int32
 *                              truncated toward zero); refused pairs
 *   test_ring_ops exact W1 W2  worlds W1..W2; wires fp32, fp16, bf16, fp64,
 *                              int32; ops sum, prod, min, max; the ring's
 *                              pipeline (64-byte chunks), its small path,
 *                              rd and direct; lengths 1, W+1, 1001; in place
 *                              and out of place, buffers at odd addresses:
 *                              the all-reduce, the reduce-scatter's own part
 *                              and the reduce's root (every root in turn)
 *                              hold the exact result, bit for bit (NaN, -0,
 *                              int32 wrap included), and every rank holds
 *                              the same all-reduce bits
 *   test_ring_ops mismatch     ranks passing different ops (ring and rd), or
 *                              prepared with different element types: a
 *                              clear error on every rank, naming what
 *                              differs */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/coll/coll.h"
#include "allreduce_harness.h"
#include "kernels/elem.h"

#define MAXN 1001
static gs_kernels *K;
static const gs_redop OPS[] = {GS_REDOP_SUM, GS_REDOP_PROD, GS_REDOP_MIN, GS_REDOP_MAX};
static const gs_dtype TYPES[] = {GS_F32, GS_F16, GS_BF16, GS_F64, GS_I32};
#define NOPS 4
#define NTYPES 5

/* ------------------------------------------------------------------ */
/* values: exact in every type, and a reference written apart from
 * reduce.c */

static size_t bufsize(gs_dtype t) { return gs_dtype_lp(t) ? 4 : gs_dtype_size(t); }

/* What rank r contributes to element i under op on a wire t, as a double
 * (exact in the buffer type and, for 16-bit wires, in the wire). */
static double value(gs_dtype t, gs_redop op, int r, size_t i) {
  uint64_t x = th_mix(((uint64_t)op << 40) ^ ((uint64_t)r << 32) ^ i);
  if (t == GS_I32) return (double)(int32_t)(uint32_t)x;  /* the whole range: wraps */
  if (op == GS_REDOP_SUM) return (double)((int)((i + 7u * (size_t)r) % 11u) - 5);
  if (op == GS_REDOP_PROD) {
    static const double p[4] = {1, -1, 2, -2};
    return p[(i + 3u * (size_t)r) % 4u];
  }
  /* min / max: the special cases every few elements, else numbers */
  if (i % 37 == 3) return r % 2 ? -0.0 : 0.0;
  if (i % 37 == 5 && (size_t)r == i % 3) return NAN;
  double k = (double)((int64_t)(x % 129u) - 64) / 4.0; /* exact in fp16 and bf16 */
  return gs_dtype_lp(t) ? k : t == GS_F32 ? (double)th_randf(x, r, i) : ldexp((double)x, -64);
}

static void store(gs_dtype t, void *p, size_t i, double v) {
  char *c = (char *)p + i * bufsize(t);
  if (t == GS_F64) {
    memcpy(c, &v, 8);
  } else if (t == GS_I32) {
    int32_t x = (int32_t)v;
    memcpy(c, &x, 4);
  } else {
    float f = (float)v;
    memcpy(c, &f, 4);
  }
}

/* a op b, the documented rules, in the buffer type (for int32 the doubles
 * hold int32 values; sum and prod wrap) */
static double ref_op(gs_dtype t, gs_redop op, double a, double b) {
  if (t == GS_I32) {
    uint32_t ua = (uint32_t)(int32_t)a, ub = (uint32_t)(int32_t)b;
    switch (op) {
    case GS_REDOP_SUM: return (double)(int32_t)(ua + ub);
    case GS_REDOP_PROD: return (double)(int32_t)(ua * ub);
    case GS_REDOP_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
  }
  if (op == GS_REDOP_SUM) return t == GS_F64 ? a + b : (double)((float)a + (float)b);
  if (op == GS_REDOP_PROD) return t == GS_F64 ? a * b : (double)((float)a * (float)b);
  if (isnan(a) || isnan(b)) return NAN;  /* the tests' NaNs are all the same one */
  if (a == 0 && b == 0) {                 /* min is -0 if either is, max +0 if either is */
    bool neg = op == GS_REDOP_MIN ? signbit(a) || signbit(b) : signbit(a) && signbit(b);
    return neg ? -0.0 : 0.0;
  }
  if (op == GS_REDOP_MIN) return a < b ? a : b;
  return a > b ? a : b;
}

static double expected(gs_dtype t, gs_redop op, int world, size_t i) {
  double x = value(t, op, 0, i);
  for (int r = 1; r < world; r++) x = ref_op(t, op, x, value(t, op, r, i));
  return x;
}

/* Element i of buf equals v bit for bit (as stored in the buffer type). */
static bool same(gs_dtype t, const void *buf, size_t i, double v) {
  char want[8];
  store(t, want, 0, v);
  return !memcmp((const char *)buf + i * bufsize(t), want, bufsize(t));
}

/* ------------------------------------------------------------------ */
/* unit */

static void unit(void) {
  gs_err e = {0};
  char *mem = gs_alloc(3 * 8 * 64 + 16, &e);
  CHECK(mem != NULL, "%s", e.msg);
  if (!mem) return;
  for (int ti = 0; ti < NTYPES; ti++)
    for (int oi = 0; oi < NOPS; oi++) {
      gs_dtype t = TYPES[ti];
      gs_redop op = OPS[oi];
      /* dst at +1, src at +3: no alignment anywhere */
      char *dst = mem + 1, *src = mem + 8 * 64 + 3;
      const size_t n = 61;
      for (size_t i = 0; i < n; i++) {
        store(t, dst, i, value(t, op, 0, i));
        double v = value(t, op, 1, i);
        if (t == GS_F16) gs_store_u16(src, i, gs_f32_to_f16((float)v));
        else if (t == GS_BF16) gs_store_u16(src, i, gs_f32_to_bf16((float)v));
        else store(t, src, i, v);
      }
      CHECK_OK(gs_reduce_host(op, t, n, dst, src, &e), &e);
      size_t bad = 0;
      for (size_t i = 0; i < n; i++)
        bad += !same(t, dst, i, ref_op(t, op, value(t, op, 0, i), value(t, op, 1, i)));
      CHECK(bad == 0, "%s %s: %zu of %zu elements differ from the reference", gs_dtype_name(t),
            gs_redop_name(op), bad, n);
    }
  /* min / max commute bit for bit, on the pairs where a < b alone would not */
  const float fs[] = {NAN, 1.0f, -0.0f, 0.0f, -NAN, INFINITY};
  for (int o = GS_REDOP_MIN; o <= GS_REDOP_MAX; o++)
    for (size_t a = 0; a < 6; a++)
      for (size_t b = 0; b < 6; b++) {
        float x[2] = {fs[a], fs[b]}, y[2] = {fs[b], fs[a]};
        double dx[2] = {fs[a], fs[b]}, dy[2] = {fs[b], fs[a]};
        gs_reduce_host((gs_redop)o, GS_F32, 1, &x[0], &x[1], NULL);
        gs_reduce_host((gs_redop)o, GS_F32, 1, &y[0], &y[1], NULL);
        gs_reduce_host((gs_redop)o, GS_F64, 1, &dx[0], &dx[1], NULL);
        gs_reduce_host((gs_redop)o, GS_F64, 1, &dy[0], &dy[1], NULL);
        CHECK(gs_f32_bits(x[0]) == gs_f32_bits(y[0]) && !memcmp(&dx[0], &dy[0], 8),
              "%s(%g, %g) is not commutative bit for bit", gs_redop_name((gs_redop)o), fs[a],
              fs[b]);
        CHECK(isnan(fs[a]) || isnan(fs[b]) ? isnan(x[0]) : true, "%s(%g, %g) = %g: NaN lost",
              gs_redop_name((gs_redop)o), fs[a], fs[b], x[0]);
      }
  float z[2] = {0.0f, -0.0f};
  gs_reduce_host(GS_REDOP_MIN, GS_F32, 1, &z[0], &z[1], NULL);
  CHECK(signbit(z[0]), "min(+0, -0) = +0, not -0");
  z[0] = -0.0f;
  z[1] = 0.0f;
  gs_reduce_host(GS_REDOP_MAX, GS_F32, 1, &z[0], &z[1], NULL);
  CHECK(!signbit(z[0]), "max(-0, +0) = -0, not +0");
  /* int32 wraps as NCCL's does, never C's undefined overflow (UBSan) */
  int32_t w[2] = {INT32_MAX, 2}, p[2] = {65536, 65536};
  gs_reduce_host(GS_REDOP_SUM, GS_I32, 1, &w[0], &w[1], NULL);
  gs_reduce_host(GS_REDOP_PROD, GS_I32, 1, &p[0], &p[1], NULL);
  CHECK(w[0] == INT32_MIN + 1 && p[0] == 0, "wrap: %d %d", w[0], p[0]);
  /* avg's post-division: int32 truncated toward zero (NCCL's integer avg) */
  int32_t iv[4] = {-7, 7, -1, INT32_MIN};
  char *odd = mem + 5;
  memcpy(odd, iv, sizeof iv);
  CHECK_OK(gs_postdiv_host(GS_I32, 4, odd, 2, &e), &e);
  memcpy(iv, odd, sizeof iv);
  CHECK(iv[0] == -3 && iv[1] == 3 && iv[2] == 0 && iv[3] == INT32_MIN / 2, "int32 avg: %d %d %d %d",
        iv[0], iv[1], iv[2], iv[3]);
  float fv = 3.0f;
  double dv = 3.0;
  gs_postdiv_host(GS_F32, 1, &fv, 3, NULL);
  gs_postdiv_host(GS_F64, 1, &dv, 3, NULL);
  CHECK(fv == 3.0f * (1.0f / 3.0f) && dv == 3.0 * (1.0 / 3.0), "float avg: %.9g %.17g", fv, dv);
  /* refused: avg as a reduction, an unknown type, a post-division of fp16 */
  gs_err e1 = {0}, e2 = {0}, e3 = {0};
  CHECK(gs_reduce_host(GS_REDOP_AVG, GS_F32, 1, mem, mem, &e1) == GS_EINVAL &&
        strstr(e1.msg, "avg"), "avg as an op: %s", e1.msg);
  CHECK(gs_reduce_host(GS_REDOP_SUM, (gs_dtype)9, 1, mem, mem, &e2) == GS_EINVAL, "type 9");
  CHECK(gs_postdiv_host(GS_F16, 1, mem, 2, &e3) == GS_EINVAL && strstr(e3.msg, "fp16"),
        "fp16 avg: %s", e3.msg);
  gs_free(mem);
}

/* ------------------------------------------------------------------ */
/* exact, over the ring */

enum { CFG_PIPE, CFG_SMALL, CFG_RD, CFG_DIRECT, NCFG };
static const char *CFG_NAMES[NCFG] = {"ring pipeline", "ring small path", "rd", "direct"};

static void cfg_opts(gs_comm_opts *o, int cfg) {
  o->chunk_bytes = cfg == CFG_PIPE ? 64 : 0;
  o->small_bytes = cfg == CFG_SMALL ? (size_t)1 << 20 : GS_COMM_NO_SMALL;
  o->algo = cfg == CFG_RD ? th_algo("rd") : cfg == CFG_DIRECT ? th_algo("direct") : GS_ALGO_RING;
}

/* Elements [lo, hi) of buf against the expected result; returns how many differ. */
static size_t wrong(gs_dtype t, gs_redop op, int world, const void *buf, size_t lo, size_t hi) {
  size_t bad = 0;
  for (size_t i = lo; i < hi; i++) bad += !same(t, buf, i, expected(t, op, world, i));
  return bad;
}

static int body_exact(th_shared *sh, int rank, int world, void *arg) {
  (void)arg;
  gs_err e = {0};
  char *mem = gs_alloc(3 * 8 * (MAXN + 8), &e);
  if (!mem) return th_report(sh, rank, &e);
  char *src = mem + 1, *dst = mem + 8 * (MAXN + 8) + 3, *keep = mem + 16 * (MAXN + 8) + 5;
  const size_t lens[3] = {1, (size_t)world + 1, MAXN};
  int slot = 0, round = 0, bad = 0;
  int64_t step = 0;
  for (int ti = 0; ti < NTYPES; ti++)
    for (int cfg = 0; cfg < NCFG; cfg++) {
      const gs_dtype t = TYPES[ti];
      gs_comm_opts o;
      th_ring_opts(&o, rank, world, MAXN, K);
      o.wire = t;
      cfg_opts(&o, cfg);
      gs_comm *r;
      if (th_ring_open(sh, round++, &o, &r, &e) < 0) return th_report(sh, rank, &e);
      uint64_t h = 0;
      for (int oi = 0; oi < NOPS; oi++)
        for (int li = 0; li < 3; li++)
          for (int inplace = 0; inplace < 2; inplace++) {
            const gs_redop op = OPS[oi];
            const size_t n = lens[li], es = bufsize(t);
            char *out = inplace ? src : dst;
            for (size_t i = 0; i < n; i++) store(t, keep, i, value(t, op, rank, i));
            /* all-reduce */
            memcpy(src, keep, n * es);
            memset(dst, 0x5a, n * es);
            if (gs_comm_allreduce_op(r, op, src, out, n, step++, 0, NULL, &e) < 0)
              return th_report(sh, rank, &e);
            size_t w = wrong(t, op, world, out, 0, n);
            if (w) {
              fprintf(stderr, "rank %d: %s wire, %s, %s all-reduce of %zu (%s): %zu wrong\n",
                      rank, gs_dtype_name(t), CFG_NAMES[cfg], gs_redop_name(op), n,
                      inplace ? "in place" : "out of place", w);
              bad++;
            }
            if (!inplace && memcmp(src, keep, n * es)) {
              fprintf(stderr, "rank %d: an out-of-place all-reduce wrote its src\n", rank);
              bad++;
            }
            h = th_mix(h ^ th_hash(out, n * es));
            if (cfg == CFG_SMALL || cfg == CFG_RD) continue; /* the others do not use them */
            /* reduce-scatter: this rank's part */
            size_t off, len;
            gs_comm_part(n, world, rank, &off, &len);
            memcpy(src, keep, n * es);
            if (gs_comm_reduce_scatter(r, op, src, out, n, step++, NULL, &e) < 0)
              return th_report(sh, rank, &e);
            if ((w = wrong(t, op, world, out, off, off + len)) != 0) {
              fprintf(stderr, "rank %d: %s wire, %s reduce-scatter of %zu: %zu wrong in "
                      "[%zu, %zu)\n", rank, gs_dtype_name(t), gs_redop_name(op), n, w, off,
                      off + len);
              bad++;
            }
            /* reduce: the root's result, roots in turn */
            int root = (int)(step % world);
            memcpy(src, keep, n * es);
            if (gs_comm_reduce(r, op, src, out, n, root, step++, NULL, &e) < 0)
              return th_report(sh, rank, &e);
            if (rank == root && (w = wrong(t, op, world, out, 0, n)) != 0) {
              fprintf(stderr, "rank %d: %s wire, %s reduce of %zu to root %d: %zu wrong\n",
                      rank, gs_dtype_name(t), gs_redop_name(op), n, root, w);
              bad++;
            }
          }
      sh->u64[rank][slot++] = h;
      gs_comm_close(r, true, NULL);
    }
  sh->u64[rank][TH_SLOTS - 1] = (uint64_t)slot;
  gs_free(mem);
  return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* mismatch */

/* case 0: ops differ on the ring; 1: on rd; 2: element types differ */
static int body_mismatch(th_shared *sh, int rank, int world, void *arg) {
  int which = *(const int *)arg;
  gs_err e = {0};
  gs_comm_opts o;
  th_ring_opts(&o, rank, world, 64, K);
  o.algo = which == 1 ? th_algo("rd") : GS_ALGO_RING;
  o.small_bytes = GS_COMM_NO_SMALL;
  if (which == 2) o.wire = rank == 0 ? GS_F64 : GS_I32;
  gs_comm *r = NULL;
  /* outlives the ring: a send that failed may still be held by ZeroMQ
   * until gs_comm_close */
  double buf[64] = {0};
  int rc = th_ring_open(sh, 0, &o, &r, &e);
  if (rc == GS_OK) {
    rc = gs_comm_allreduce_op(r, rank == 0 ? GS_REDOP_MAX : GS_REDOP_SUM, buf, buf, 64, 0, 0,
                              NULL, &e);
  }
  sh->u64[rank][0] = (uint64_t)(int64_t)rc;
  snprintf(sh->msg[rank], sizeof sh->msg[rank], "%s", e.msg);
  gs_comm_close(r, rc == GS_OK, NULL);
  return 0;
}

static void mismatch(void) {
  static const char *want[3] = {"same op", "same op", "wire dtype"};
  for (int which = 0; which < 3; which++) {
    th_shared *sh = th_run(2, body_mismatch, &which, 60, NULL);
    CHECK(sh && th_failures(sh) == 0, "mismatch %d: a rank crashed", which);
    for (int r = 0; sh && r < 2; r++) {
      int rc = (int)(int64_t)sh->u64[r][0];
      /* the rank that sees the difference names it; the other hears of it */
      CHECK(rc < 0, "mismatch %d: rank %d succeeded", which, r);
      CHECK(strstr(sh->msg[r], want[which]) || strstr(sh->msg[r], "rank"),
            "mismatch %d, rank %d: %s", which, r, sh->msg[r]);
    }
    bool named = false;
    for (int r = 0; sh && r < 2; r++) named |= strstr(sh->msg[r], want[which]) != NULL;
    CHECK(named, "mismatch %d: no rank says '%s': %s | %s", which, want[which],
          sh ? sh->msg[0] : "", sh ? sh->msg[1] : "");
    if (sh) th_free(sh);
  }
}

int main(int argc, char **argv) {
  K = th_start();
  if (!K) return 1;
  const char *what = argc > 1 ? argv[1] : "unit";
  if (!strcmp(what, "unit")) {
    unit();
  } else if (!strcmp(what, "exact")) {
    int lo = argc > 2 ? atoi(argv[2]) : 2, hi = argc > 3 ? atoi(argv[3]) : lo;
    CHECK(th_worlds_agree(lo, hi, body_exact, 240) == 0, "worlds %d..%d", lo, hi);
  } else if (!strcmp(what, "mismatch")) {
    mismatch();
  } else {
    fprintf(stderr, "usage: test_ring_ops unit | exact W1 W2 | mismatch\n");
    return 2;
  }
  K->destroy(K);
  return check_done(what);
}
