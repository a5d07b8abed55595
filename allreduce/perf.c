/* perf.c: the collective benchmark's core, nccl-tests style (allreduce.h).
 *
 * For each size: `warmup` untimed collectives, then `iters` timed ones back
 * to back (nothing else between them, as nccl-tests times), then, with
 * check, one more that poisons dst (NaN bits) first and is checked element
 * by element against the exact expected sum: rank r contributes
 * ((i + 7r) mod 11) - 5 to element i, small integers whose sum is exact in
 * fp32, fp16 and bf16 in any order, and different on every rank (for
 * r < 11), so a lost or doubled contribution shows. The expected value
 * depends only on i mod 11. A size's time is the mean over iterations on
 * each rank, then the max over ranks, exchanged through the collective
 * itself: each rank writes its time (10 ns units) and wrong count as base-64
 * digits into its own slots of a zeroed vector, values that every wire
 * dtype carries exactly.
 *
 *   algbw = bytes / time         busbw = algbw * 2 (N - 1) / N
 * (nccl-tests' definitions: busbw is what each link carried, comparable
 * across world sizes.) */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"

#define DIGITS 6 /* base-64 digits per exchanged number: 2^36 */

static void put(float *v, uint64_t x) {
  for (int d = 0; d < DIGITS; d++, x >>= 6) v[d] = (float)(x & 63u);
}
static uint64_t get(const float *v) {
  uint64_t x = 0;
  for (int d = DIGITS - 1; d >= 0; d--) x = (x << 6) | (uint64_t)v[d];
  return x;
}

static float contribution(int rank, size_t i) {
  return (float)((int)((i + 7u * (size_t)rank) % 11u) - 5);
}

int gs_perf_sizes(const gs_perf_opts *o) {
  if (!o || o->min_bytes == 0 || o->max_bytes < o->min_bytes) return 0;
  int n = 0;
  size_t prev = 0;
  for (double b = (double)o->min_bytes; b <= (double)o->max_bytes + 0.5;
       b = o->factor > 1.0 ? b * o->factor : b + (double)o->min_bytes) {
    size_t sz = (size_t)b / sizeof(float) * sizeof(float);
    if (sz == 0 || sz == prev) continue;
    prev = sz;
    n++;
  }
  return n;
}

size_t gs_perf_max_count(const gs_perf_opts *o) {
  size_t x = 2 * DIGITS * (size_t)(o->world > 0 ? o->world : 1);
  size_t m = o->max_bytes / sizeof(float);
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

/* One collective on (src, dst, n), after setup when the triple is new. */
static int one(gs_coll_fn fn, void *ctx, const gs_perf_opts *o, const float *src, float *dst,
               size_t n, int64_t iter, const float **last_src, size_t *last_n, double *dt,
               gs_err *e) {
  if (o->setup && (src != *last_src || n != *last_n)) {
    GS_TRY(o->setup(ctx, src, dst, n, e));
    *last_src = src;
    *last_n = n;
  }
  double t0 = gs_now();
  int rc = fn(ctx, src, dst, n, iter, e);
  if (rc == GS_OK && o->k) rc = o->k->sync(o->k, e);
  *dt = gs_now() - t0;
  return rc;
}

int gs_allreduce_perf(gs_coll_fn fn, void *ctx, const gs_perf_opts *o, gs_perf_row *rows,
                      int *nrows, gs_err *e) {
  int cap = *nrows;
  *nrows = 0;
  if (!fn || !o || o->world < 1 || o->iters < 1 || o->warmup < 0)
    return GS_FAIL(e, GS_EINVAL, "allreduce perf: bad options (iters >= 1, warmup >= 0)");
  int nsizes = gs_perf_sizes(o);
  if (nsizes == 0)
    return GS_FAIL(e, GS_EINVAL, "allreduce perf: no sizes between %zu and %zu bytes (min >= "
                   "4 bytes, max >= min)", o->min_bytes, o->max_bytes);
  size_t maxn = o->max_bytes / sizeof(float);
  size_t xn = 2 * DIGITS * (size_t)o->world;
  float *src = buf_alloc(o, maxn * sizeof(float), e);
  float *dst = buf_alloc(o, maxn * sizeof(float), e);
  float *xchg = buf_alloc(o, xn * sizeof(float), e);
  float *xsum = buf_alloc(o, xn * sizeof(float), e);
  /* host side: the inputs, the poison, what comes back, the exchange */
  float *hsrc = o->k ? gs_alloc(maxn * sizeof(float), e) : src;
  float *hdst = o->k ? gs_alloc(maxn * sizeof(float), e) : dst;
  float *poison = o->k && o->check ? gs_alloc(maxn * sizeof(float), e) : NULL;
  float *hx = gs_alloc(xn * sizeof(float), e), *hxs = gs_alloc(xn * sizeof(float), e);
  int rc = GS_OK;
  if (!src || !dst || !xchg || !xsum || !hsrc || !hdst || !hx || !hxs ||
      (o->k && o->check && !poison)) {
    rc = GS_FAIL(e, GS_ENOMEM, "rank %d: out of memory for %zu-byte benchmark buffers",
                 o->rank, o->max_bytes);
    goto out;
  }
  for (size_t i = 0; i < maxn; i++) hsrc[i] = contribution(o->rank, i);
  if (o->k) to_buf(o, src, hsrc, maxn * sizeof(float));
  if (poison) memset(poison, 0xff, maxn * sizeof(float));
  float expect[11];
  for (size_t j = 0; j < 11; j++) {
    float s = 0;
    for (int r = 0; r < o->world; r++) s += contribution(r, j);
    expect[j] = s;
  }

  int64_t iter = 0;
  size_t prev = 0, last_n = 0;
  const float *last_src = NULL;
  for (double b = (double)o->min_bytes; b <= (double)o->max_bytes + 0.5 && *nrows < cap;
       b = o->factor > 1.0 ? b * o->factor : b + (double)o->min_bytes) {
    size_t bytes = (size_t)b / sizeof(float) * sizeof(float);
    if (bytes == 0 || bytes == prev) continue;
    prev = bytes;
    size_t n = bytes / sizeof(float);
    double total = 0, dt;
    uint64_t wrong = 0;
    /* timed back to back, as nccl-tests does; then one more, checked */
    for (int it = -o->warmup; it < o->iters + (o->check ? 1 : 0); it++) {
      bool checked = it == o->iters;
      if (checked) {
        if (poison) to_buf(o, dst, poison, bytes);
        else memset(dst, 0xff, bytes);
      }
      rc = one(fn, ctx, o, src, dst, n, iter++, &last_src, &last_n, &dt, e);
      if (rc < 0) {
        gs_err_prefix(e, "%zu-byte all-reduce, iteration %d: ", bytes, it);
        goto out;
      }
      if (it >= 0 && !checked) total += dt;
      if (checked) {
        if ((rc = from_buf(o, hdst, dst, bytes, e)) < 0) goto out;
        for (size_t i = 0, j = 0; i < n; i++, j = j == 10 ? 0 : j + 1) wrong += hdst[i] != expect[j];
      }
    }
    /* max over ranks of the mean time, sum of the wrong counts */
    memset(hx, 0, xn * sizeof(float));
    const uint64_t lim = ((uint64_t)1 << (6 * DIGITS)) - 1;
    uint64_t t10ns = (uint64_t)llround(total / o->iters * 1e8);
    put(hx + 2 * DIGITS * (size_t)o->rank, t10ns < lim ? t10ns : lim);
    put(hx + 2 * DIGITS * (size_t)o->rank + DIGITS, wrong < lim ? wrong : lim);
    to_buf(o, xchg, hx, xn * sizeof(float));
    rc = one(fn, ctx, o, xchg, xsum, xn, iter++, &last_src, &last_n, &dt, e);
    if (rc == GS_OK) rc = from_buf(o, hxs, xsum, xn * sizeof(float), e);
    if (rc < 0) {
      gs_err_prefix(e, "exchanging the timings of the %zu-byte all-reduce: ", bytes);
      goto out;
    }
    double tmax = 0;
    uint64_t wsum = 0;
    for (int r = 0; r < o->world; r++) {
      double t = (double)get(hxs + 2 * DIGITS * (size_t)r) * 1e-8;
      if (t > tmax) tmax = t;
      wsum += get(hxs + 2 * DIGITS * (size_t)r + DIGITS);
    }
    gs_perf_row *row = &rows[(*nrows)++];
    row->bytes = bytes;
    row->count = n;
    row->time_us = tmax * 1e6;
    row->algbw = tmax > 0 ? (double)bytes / tmax / 1e9 : 0;
    row->busbw = row->algbw * (o->world > 1 ? 2.0 * (o->world - 1) / o->world : 0.0);
    row->wrong = o->check ? wsum : UINT64_MAX;
    row->algo = o->algo_of ? o->algo_of(ctx, n) : NULL;
  }
out:
  if (o->k) {
    gs_free(hsrc);
    gs_free(hdst);
  }
  gs_free(poison);
  gs_free(hx);
  gs_free(hxs);
  buf_free(o, src);
  buf_free(o, dst);
  buf_free(o, xchg);
  buf_free(o, xsum);
  return rc;
}

void gs_perf_print(void *fp, const gs_perf_opts *o, const char *title, const gs_perf_row *rows,
                   int nrows) {
  FILE *f = fp;
  fprintf(f, "# %s: all-reduce (sum) of float32, %d ranks, %d iterations after %d warm-up\n",
          title ? title : "allreduce", o->world, o->iters, o->warmup);
  fprintf(f, "# algbw = size / time; busbw = algbw x 2(n-1)/n = algbw x %.3f "
          "(GB/s = 1e9 bytes/s)\n", o->world > 1 ? 2.0 * (o->world - 1) / o->world : 0.0);
  fprintf(f, "# time: mean of the timed iterations, run back to back, max over ranks; #wrong: "
          "elements differing from the exact sum in one more, checked, iteration, over every "
          "rank (integer inputs: tolerance 0)\n");
  /* the algorithm column only where the backend names one */
  bool algo = false;
  for (int i = 0; i < nrows; i++) algo |= rows[i].algo != NULL;
  fprintf(f, "#%11s %12s %6s %6s %11s %8s %8s %8s%s\n", "size", "count", "type", "redop",
          "time", "algbw", "busbw", "#wrong", algo ? "   algo" : "");
  fprintf(f, "#%11s %12s %6s %6s %11s %8s %8s %8s\n", "(B)", "(elements)", "", "", "(us)",
          "(GB/s)", "(GB/s)", "");
  for (int i = 0; i < nrows; i++) {
    const gs_perf_row *r = &rows[i];
    char wrong[24];
    if (r->wrong == UINT64_MAX) snprintf(wrong, sizeof wrong, "N/A");
    else snprintf(wrong, sizeof wrong, "%" PRIu64, r->wrong);
    fprintf(f, "%12zu %12zu %6s %6s %11.2f %8.3f %8.3f %8s", r->bytes, r->count, "float",
            "sum", r->time_us, r->algbw, r->busbw, wrong);
    if (algo) fprintf(f, " %6s", r->algo ? r->algo : "-");
    fputc('\n', f);
  }
  fflush(f);
}
