/* perf.c: the collective benchmark's core, nccl-tests style (coll.h).
 *
 * For each size, out of place (src != dst) then in place (src == dst):
 * `warmup` untimed collectives, then `iters` timed ones back to back
 * (nothing else between them, as nccl-tests times; in place, each one
 * reduces the previous result again, as there), then, with check, one more
 * on fresh inputs, checked element by element against the exact expected
 * value (out of place, dst is poisoned first: NaN bits, or INT32_MIN for
 * int32, which no result can be): rank r contributes ((i + 7r) mod 11) - 5
 * to element i, small integers whose sum, min and max are exact in every
 * type in any order, and different on every rank (for r < 11), so a lost
 * or doubled contribution shows. prod takes 1, -1, 2 or -2 instead (the
 * same pattern mapped), whose products are powers of two, exact in every
 * type for N < 15 (nccl-tests keeps prod's inputs near 1 alike). avg is
 * the exact sum, then the one post-division the collective does too
 * (gs_postdiv_host: fp32 or double times 1/N, int32 divided by N), so it
 * is checked bit for bit as well. The expected value depends only on i mod
 * 11. Where fn averages itself (o->fn_avg: NCCL's ncclAvg) nothing is
 * divided after it, and the expected value is NCCL's: for int32 the same
 * truncated division; for the floating types NCCL multiplies each
 * contribution by 1/N (rounded to the wire type) and sums, exact when N is
 * a power of two, else accepted within that arithmetic's rounding bound,
 * (N + 2) units of the wire type's precision times the sum of |terms|.
 * A time is the mean over iterations on each rank, then the max over
 * ranks, exchanged through the collective itself: each rank writes its
 * times (10 ns units) and wrong counts as base-64 digits into its own slots
 * of a zeroed vector, values that every type carries exactly.
 *
 *   algbw = bytes / time         busbw = algbw * gs_coll_busbw_factor
 * (nccl-tests' definitions: busbw is what each link carried, comparable
 * across world sizes; bytes = count x the wire dtype's size.)
 *
 * The other collectives (gs_coll) run on the same inputs and check what
 * their row (allreduce.h gs_coll_desc.holds) says each element of a rank
 * holds: the exact reduction (its part of it for reduce_scatter, on the
 * root for reduce), or one rank's contributions (every rank's part for
 * all_gather, the root's for broadcast); the timings go through the
 * all-reduce o->sum. Parted ones run sizes that are whole multiples of N
 * elements (nccl-tests rounds the part down as well). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/coll/coll.h"

#define DIGITS 6 /* base-64 digits per exchanged number: 2^36 */
#define SLOTS 4  /* numbers per rank: time and wrong, out of place and in place */

/* Buffers hold fp32 under the 16-bit wires, else the wire's own type. */
static gs_dtype elem_of(gs_dtype wire) { return gs_dtype_lp(wire) ? GS_F32 : wire; }

/* Element i of a buffer of type t, as a double (every value here is exact
 * in it) and back. */
static double get_v(gs_dtype t, const void *p, size_t i) {
  const char *c = (const char *)p + i * gs_dtype_size(t);
  if (t == GS_F64) {
    double v;
    memcpy(&v, c, sizeof v);
    return v;
  }
  if (t == GS_I32) {
    int32_t v;
    memcpy(&v, c, sizeof v);
    return v;
  }
  float v;
  memcpy(&v, c, sizeof v);
  return v;
}
static void set_v(gs_dtype t, void *p, size_t i, double x) {
  char *c = (char *)p + i * gs_dtype_size(t);
  if (t == GS_F64) {
    memcpy(c, &x, sizeof x);
  } else if (t == GS_I32) {
    int32_t v = (int32_t)x;
    memcpy(c, &v, sizeof v);
  } else {
    float v = (float)x;
    memcpy(c, &v, sizeof v);
  }
}

static void put(gs_dtype t, void *v, size_t at, uint64_t x) {
  for (int d = 0; d < DIGITS; d++, x >>= 6) set_v(t, v, at + (size_t)d, (double)(x & 63u));
}
static uint64_t get(gs_dtype t, const void *v, size_t at) {
  uint64_t x = 0;
  for (int d = DIGITS - 1; d >= 0; d--) x = (x << 6) | (uint64_t)get_v(t, v, at + (size_t)d);
  return x;
}

static double contribution(gs_redop op, int rank, size_t i) {
  int v = (int)((i + 7u * (size_t)rank) % 11u);
  static const int prod[11] = {1, -1, 2, 1, -2, 1, -1, 1, 2, -1, 1};
  return op == GS_REDOP_PROD ? prod[v] : v - 5;
}

static bool parted(gs_coll c) {
  const gs_coll_desc *d = gs_coll_of(c);
  return d && d->parted;
}

static const char *redop_names[] = {"sum", "avg", "prod", "min", "max"};
const char *gs_redop_name(gs_redop op) {
  return (unsigned)op <= GS_REDOP_MAX ? redop_names[op] : "unknown";
}
int gs_redop_parse(const char *s) {
  for (int op = GS_REDOP_SUM; s && op <= GS_REDOP_MAX; op++)
    if (!strcmp(s, redop_names[op])) return op;
  return -1;
}
static const char *type_names[] = {"float", "half", "bfloat16", "double", "int32"};
const char *gs_perf_type_name(gs_dtype t) {
  return (unsigned)t <= GS_I32 ? type_names[t] : "unknown";
}
int gs_perf_type_parse(const char *s) {
  for (int t = GS_F32; s && t <= GS_I32; t++)
    if (!strcmp(s, type_names[t])) return t;
  return -1;
}

static size_t elt(const gs_perf_opts *o) { return gs_dtype_size(o->wire); }
/* the buffers' element size */
static size_t es(const gs_perf_opts *o) { return gs_dtype_size(elem_of(o->wire)); }

/* The sizes: min, min*f, ... up to max, whole elements (whole multiples
 * of N elements for a parted collective), no repeats. */
static size_t next_size(const gs_perf_opts *o, double *b, size_t prev) {
  size_t q = parted(o->coll) && o->world > 1 ? (size_t)o->world : 1;
  for (; *b <= (double)o->max_bytes + 0.5;
       *b = o->factor > 1.0 ? *b * o->factor : *b + (double)o->min_bytes) {
    size_t sz = (size_t)*b / elt(o) / q * q * elt(o);
    if (sz && sz != prev) return sz;
  }
  return 0;
}

int gs_perf_sizes(const gs_perf_opts *o) {
  if (!o || o->min_bytes == 0 || o->max_bytes < o->min_bytes) return 0;
  int n = 0;
  double b = (double)o->min_bytes;
  for (size_t sz = 0; (sz = next_size(o, &b, sz)) != 0;) n++;
  return n;
}

size_t gs_perf_max_count(const gs_perf_opts *o) {
  size_t x = SLOTS * DIGITS * (size_t)(o->world > 0 ? o->world : 1);
  size_t m = o->max_bytes / elt(o);
  return m > x ? m : x;
}

/* Buffers on the benchmark's device (host memory without a table). */
static void *buf_alloc(const gs_perf_opts *o, size_t bytes, gs_err *e) {
  if (!o->k) return gs_alloc(bytes, e);
  void *p = o->k->alloc(o->k, bytes);
  if (!p) GS_FAIL(e, GS_ENOMEM, "cannot allocate %zu bytes on %s", bytes, o->k->name);
  return p;
}
static void buf_free(const gs_perf_opts *o, void *p) {
  if (!p) return;
  if (o->k) o->k->release(o->k, p);
  else gs_free(p);
}
static void to_buf(const gs_perf_opts *o, void *dst, const void *host, size_t bytes) {
  if (o->k) o->k->to_device(o->k, dst, host, bytes);
  else memcpy(dst, host, bytes);
}
static int from_buf(const gs_perf_opts *o, void *host, const void *src, size_t bytes, gs_err *e) {
  if (!o->k) {
    memcpy(host, src, bytes);
    return GS_OK;
  }
  o->k->to_host(o->k, host, src, bytes);
  return o->k->sync(o->k, e);
}

/* What one run carries from size to size. */
typedef struct bench {
  gs_coll_fn fn;
  void *ctx;
  const gs_perf_opts *o;
  gs_dtype t;                       /* the buffers' element type */
  void *src, *dst, *xchg, *xsum;    /* on the device */
  void *hsrc, *hdst, *poison, *hx, *hxs;
  double expect[11], tol[11];      /* tol: 0 but for fn_avg's rounding (above) */
  int64_t iter;
  const void *last_src;
  size_t last_n;
} bench;

/* One collective on (src, dst, n), after setup when the pair is new; avg
 * scales the sum by 1/N inside the timed region. */
static int one(bench *b, gs_coll_fn fn, const void *src, void *dst, size_t n, gs_redop op,
               double *dt, gs_err *e) {
  const gs_perf_opts *o = b->o;
  if (o->setup && (src != b->last_src || n != b->last_n)) {
    GS_TRY(o->setup(b->ctx, src, dst, n, e));
    b->last_src = src;
    b->last_n = n;
  }
  double t0 = gs_now();
  int rc = fn(b->ctx, src, dst, n, b->iter++, e);
  if (rc == GS_OK && op == GS_REDOP_AVG && !o->fn_avg) {
    if (o->k) o->k->scale(o->k, n, 1.0f / (float)o->world, dst);
    else rc = gs_postdiv_host(b->t, n, dst, o->world, e);
  }
  if (rc == GS_OK && o->k) rc = o->k->sync(o->k, e);
  *dt = gs_now() - t0;
  return rc;
}

/* Elements of hdst (n of them) that differ from what this rank must hold
 * (its collective's row says which value each one holds). */
static uint64_t count_wrong(const bench *b, size_t n) {
  const gs_perf_opts *o = b->o;
  const gs_coll_desc *d = gs_coll_of(o->coll);
  const size_t part = d->parted ? n / (size_t)o->world : n;
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; i++) {
    int h = d->holds(i, part, o->rank, o->root);
    if (h == GS_HOLDS_NOTHING) continue;
    double got = get_v(b->t, b->hdst, i);
    if (h >= 0) wrong += got != contribution(GS_REDOP_SUM, h, i);
    else wrong += !(fabs(got - b->expect[i % 11]) <= b->tol[i % 11]); /* a NaN is never within */
  }
  return wrong;
}

/* One placement of one size: the mean time of this rank and its wrong
 * count (in place: src == dst, refilled with the inputs first). */
static int place(bench *b, void *src, void *dst, size_t n, double *mean, uint64_t *wrong,
                 gs_err *e) {
  const gs_perf_opts *o = b->o;
  size_t bytes = n * es(o);
  double total = 0, dt;
  *wrong = 0;
  if (src == dst) to_buf(o, dst, b->hsrc, bytes);
  for (int it = -o->warmup; it < o->iters + (o->check ? 1 : 0); it++) {
    bool checked = it == o->iters;
    if (checked && src == dst) to_buf(o, dst, b->hsrc, bytes);
    else if (checked) to_buf(o, dst, b->poison, bytes);
    int rc = one(b, b->fn, src, dst, n, gs_coll_has_op(o->coll) ? o->op : GS_REDOP_SUM, &dt, e);
    if (rc < 0) {
      gs_err_prefix(e, "%zu-byte %s (%s), iteration %d: ", n * elt(o), gs_coll_name(o->coll),
                    src == dst ? "in place" : "out of place", it);
      return rc;
    }
    if (it >= 0 && !checked) total += dt;
    if (checked) {
      GS_TRY(from_buf(o, b->hdst, dst, bytes, e));
      *wrong = count_wrong(b, n);
    }
  }
  *mean = total / o->iters;
  return GS_OK;
}

/* Max over ranks of the mean times, sum of the wrong counts, into row. */
static int exchange(bench *b, const double mean[2], const uint64_t wrong[2], gs_perf_row *row,
                    gs_err *e) {
  const gs_perf_opts *o = b->o;
  size_t xn = SLOTS * DIGITS * (size_t)o->world;
  const uint64_t lim = ((uint64_t)1 << (6 * DIGITS)) - 1;
  memset(b->hx, 0, xn * es(o));
  size_t mine = SLOTS * DIGITS * (size_t)o->rank;
  for (size_t p = 0; p < 2; p++) {
    uint64_t t10ns = (uint64_t)llround(mean[p] * 1e8);
    put(b->t, b->hx, mine + 2 * p * DIGITS, t10ns < lim ? t10ns : lim);
    put(b->t, b->hx, mine + (2 * p + 1) * DIGITS, wrong[p] < lim ? wrong[p] : lim);
  }
  to_buf(o, b->xchg, b->hx, xn * es(o));
  double dt;
  int rc = one(b, o->sum ? o->sum : b->fn, b->xchg, b->xsum, xn, GS_REDOP_SUM, &dt, e);
  if (rc == GS_OK) rc = from_buf(o, b->hxs, b->xsum, xn * es(o), e);
  if (rc < 0) {
    gs_err_prefix(e, "exchanging the timings of the %zu-byte %s: ", row->bytes,
                  gs_coll_name(o->coll));
    return rc;
  }
  for (int p = 0; p < 2; p++) {
    double tmax = 0;
    uint64_t wsum = 0;
    for (int r = 0; r < o->world; r++) {
      size_t theirs = SLOTS * DIGITS * (size_t)r + 2 * (size_t)p * DIGITS;
      double t = (double)get(b->t, b->hxs, theirs) * 1e-8;
      if (t > tmax) tmax = t;
      wsum += get(b->t, b->hxs, theirs + DIGITS);
    }
    gs_perf_time *pt = p == 0 ? &row->oop : &row->ip;
    pt->time_us = tmax * 1e6;
    pt->algbw = tmax > 0 ? (double)row->bytes / tmax / 1e9 : 0;
    pt->busbw = pt->algbw * gs_coll_busbw_factor(o->coll, o->world);
    pt->wrong = o->check ? wsum : UINT64_MAX;
  }
  return GS_OK;
}

static void bench_free(bench *b) {
  const gs_perf_opts *o = b->o;
  if (o->k) {
    gs_free(b->hsrc);
    gs_free(b->hdst);
  }
  gs_free(b->poison);
  gs_free(b->hx);
  gs_free(b->hxs);
  buf_free(o, b->src);
  buf_free(o, b->dst);
  buf_free(o, b->xchg);
  buf_free(o, b->xsum);
}

int gs_allreduce_perf(gs_coll_fn fn, void *ctx, const gs_perf_opts *o, gs_perf_row *rows,
                      int *nrows, gs_err *e) {
  int cap = *nrows;
  *nrows = 0;
  if (!fn || !o || o->world < 1 || o->iters < 1 || o->warmup < 0 ||
      (unsigned)o->op > GS_REDOP_MAX || (unsigned)o->wire > GS_I32 ||
      (o->k && o->op == GS_REDOP_AVG && !o->fn_avg && gs_coll_has_op(o->coll) &&
       elem_of(o->wire) != GS_F32) ||
      (unsigned)o->coll > GS_COLL_REDUCE || o->root < 0 || o->root >= o->world ||
      (o->coll != GS_COLL_ALL_REDUCE && !o->sum))
    return GS_FAIL(e, GS_EINVAL, "collective perf: bad options (iters >= 1, warmup >= 0, op sum, "
                   "avg, prod, min or max, type float, half, bfloat16, double or int32; avg on a "
                   "device: fp32 buffers, or fn averaging itself; 0 <= root < world, an "
                   "all-reduce to exchange the timings)");
  int nsizes = gs_perf_sizes(o);
  if (nsizes == 0)
    return GS_FAIL(e, GS_EINVAL, "%s perf: no sizes between %zu and %zu bytes (min >= "
                   "%zu bytes%s, max >= min)", gs_coll_name(o->coll), o->min_bytes, o->max_bytes,
                   elt(o), parted(o->coll) ? " x the world" : "");
  size_t maxn = o->max_bytes / elt(o), mb = maxn * es(o);
  size_t xb = SLOTS * DIGITS * (size_t)o->world * es(o);
  bench b = {.fn = fn, .ctx = ctx, .o = o, .t = elem_of(o->wire)};
  b.src = buf_alloc(o, mb, e);
  b.dst = buf_alloc(o, mb, e);
  b.xchg = buf_alloc(o, xb, e);
  b.xsum = buf_alloc(o, xb, e);
  /* host side: the inputs, the poison, what comes back, the exchange */
  b.hsrc = o->k ? gs_alloc(mb, e) : b.src;
  b.hdst = o->k ? gs_alloc(mb, e) : b.dst;
  b.poison = o->check ? gs_alloc(mb, e) : NULL;
  b.hx = gs_alloc(xb, e);
  b.hxs = gs_alloc(xb, e);
  int rc = GS_OK;
  if (!b.src || !b.dst || !b.xchg || !b.xsum || !b.hsrc || !b.hdst || !b.hx || !b.hxs ||
      (o->check && !b.poison)) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for %zu-byte benchmark buffers",
                 o->rank, mb);
    goto out;
  }
  gs_redop op = gs_coll_has_op(o->coll) ? o->op : GS_REDOP_SUM;
  for (size_t i = 0; i < maxn; i++) set_v(b.t, b.hsrc, i, contribution(op, o->rank, i));
  if (o->k) to_buf(o, b.src, b.hsrc, mb);
  if (b.poison && b.t == GS_I32)
    for (size_t i = 0; i < maxn; i++) set_v(b.t, b.poison, i, (double)INT32_MIN);
  else if (b.poison) memset(b.poison, 0xff, mb);
  /* the exact result of every element (small integers: any order gives
   * it), then avg's post-division in the buffers' type */
  for (size_t j = 0; j < 11; j++) {
    double x = contribution(op, 0, j);
    for (int r = 1; r < o->world; r++) {
      double c = contribution(op, r, j);
      x = op == GS_REDOP_PROD ? x * c : op == GS_REDOP_MIN ? (c < x ? c : x)
          : op == GS_REDOP_MAX ? (c > x ? c : x) : x + c;
    }
    b.tol[j] = 0;
    if (op == GS_REDOP_AVG && o->fn_avg && b.t != GS_I32) {
      /* NCCL's premultiplied sum: exact for N a power of two */
      int N = o->world, p = o->wire == GS_F16 ? 11 : o->wire == GS_BF16 ? 8
                               : o->wire == GS_F64 ? 53 : 24;
      double mag = 0;
      for (int r = 0; r < N; r++) mag += fabs(contribution(op, r, j)) / N;
      if (N & (N - 1)) b.tol[j] = (N + 2) * ldexp(1.0, -p) * mag;
      x /= N;
    } else if (op == GS_REDOP_AVG) {
      char one_v[8];
      set_v(b.t, one_v, 0, x);
      gs_postdiv_host(b.t, 1, one_v, o->world, NULL);
      x = get_v(b.t, one_v, 0);
    }
    b.expect[j] = x;
  }

  double at = (double)o->min_bytes;
  for (size_t bytes = 0; *nrows < cap && (bytes = next_size(o, &at, bytes)) != 0;) {
    size_t n = bytes / elt(o);
    double mean[2];
    uint64_t wrong[2];
    if ((rc = place(&b, b.src, b.dst, n, &mean[0], &wrong[0], e)) < 0 ||
        (rc = place(&b, b.dst, b.dst, n, &mean[1], &wrong[1], e)) < 0)
      goto out;
    gs_perf_row *row = &rows[*nrows];
    row->bytes = bytes;
    row->count = parted(o->coll) ? n / (size_t)o->world : n;
    if ((rc = exchange(&b, mean, wrong, row, e)) < 0) goto out;
    row->algo = o->algo_of ? o->algo_of(ctx, n) : NULL;
    (*nrows)++;
  }
out:
  bench_free(&b);
  return rc;
}
