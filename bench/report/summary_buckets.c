/* summary_buckets.c: when each gradient bucket was ready, when its
 * communication ran, and how much of that hid behind the step's compute,
 * from the timeline the ranks recorded (report.h, gs_summary_buckets).
 * Pure, like summary.c.
 *
 * A span belongs to the step in which it starts (rows' t_start, in order).
 * Per bucket and step: ready is its "ready" mark; its communication is
 * every other span of the bucket but the optimizer's (ring: the
 * all-reduce's phases, PowerSGD's three; ps: push, the server's reduce,
 * pull); start and end are the first start and the last end, comm_s their
 * summed lengths, hidden_s the part of them inside [step start, end of
 * backward]. Each is a mean over the steps and ranks where the bucket
 * communicated. This is what DDP users ask of bucket_cap_mb: does a bucket
 * leave while backward still runs, and how long does the last one take
 * after it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"

typedef struct acc {
  double ready, start, end, comm, hidden;
  double nready, n;
} acc;

/* the step whose [t_start, next t_start) holds t, or -1 */
static long step_of(const gs_rank_result *x, size_t steps, double t) {
  size_t lo = 0, hi = steps;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (x->rows[mid].t_start <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo == 0 ? -1 : (long)lo - 1;
}

static double overlap(double a0, double a1, double b0, double b1) {
  double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0;
}

/* one rank's measured steps into a (nb x steps) of per-step first start,
 * last end, and sums */
static int one_rank(const gs_rank_result *x, size_t first, size_t steps, int nb, acc *total,
                    double *bwd0, double *bwd1, double *nbwd) {
  size_t cells = (size_t)nb * steps;
  double *s0 = malloc(cells * sizeof *s0), *s1 = malloc(cells * sizeof *s1);
  double *cs = calloc(cells, sizeof *cs), *hs = calloc(cells, sizeof *hs);
  double *rd = malloc(cells * sizeof *rd);
  if (!s0 || !s1 || !cs || !hs || !rd) {
    free(s0), free(s1), free(cs), free(hs), free(rd);
    return GS_ENOMEM;
  }
  for (size_t c = 0; c < cells; c++) s0[c] = INFINITY, s1[c] = -INFINITY, rd[c] = NAN;
  for (size_t i = 0; i < x->nspans; i++) {
    const gs_span *sp = &x->spans[i];
    if (sp->bucket < 0 || sp->bucket >= nb || !strncmp(sp->name, "optimizer", sizeof sp->name))
      continue;
    long t = step_of(x, steps, sp->t0);
    if (t < (long)first) continue;
    size_t c = (size_t)sp->bucket * steps + (size_t)t;
    if (!strncmp(sp->name, "ready", sizeof sp->name)) {
      rd[c] = sp->t0;
      continue;
    }
    const gs_step_row *row = &x->rows[t];
    double a = row->t_start, z = a + row->data_s + row->forward_s + row->backward_s;
    if (sp->t0 < s0[c]) s0[c] = sp->t0;
    if (sp->t1 > s1[c]) s1[c] = sp->t1;
    cs[c] += sp->t1 - sp->t0;
    hs[c] += overlap(sp->t0, sp->t1, a, z);
  }
  for (size_t t = first; t < steps; t++) {
    const gs_step_row *row = &x->rows[t];
    double a = row->t_start;
    *bwd0 += row->data_s + row->forward_s;
    *bwd1 += row->data_s + row->forward_s + row->backward_s;
    *nbwd += 1;
    for (int b = 0; b < nb; b++) {
      size_t c = (size_t)b * steps + t;
      acc *q = &total[b];
      if (isfinite(rd[c])) {
        q->ready += rd[c] - a;
        q->nready++;
      }
      if (!(s1[c] >= s0[c])) continue;
      q->start += s0[c] - a;
      q->end += s1[c] - a;
      q->comm += cs[c];
      q->hidden += hs[c];
      q->n++;
    }
  }
  free(s0), free(s1), free(cs), free(hs), free(rd);
  return GS_OK;
}

int gs_summary_buckets(const gs_run_info *info, const gs_rank_result *ranks, size_t first,
                       size_t steps, gs_summary *s, gs_err *e) {
  s->bucket_timing = NULL;
  s->nbucket_timing = 0;
  s->backward_start_s = s->backward_end_s = NAN;
  int nb = info->nbuckets, N = info->world;
  if (nb < 1 || N < 2 || steps <= first) return GS_OK;
  acc *total = calloc((size_t)nb, sizeof *total);
  if (!total) return GS_FAIL(e, GS_ENOMEM, "out of memory summarising the buckets");
  double b0 = 0, b1 = 0, nbwd = 0;
  for (int r = 0; r < N; r++)
    if (one_rank(&ranks[r], first, steps, nb, total, &b0, &b1, &nbwd) < 0) {
      free(total);
      return GS_FAIL(e, GS_ENOMEM, "out of memory summarising the buckets");
    }
  int seen = 0;
  for (int b = 0; b < nb; b++) seen += total[b].n > 0;
  if (seen) {
    s->bucket_timing = calloc((size_t)seen, sizeof *s->bucket_timing);
    if (!s->bucket_timing) {
      free(total);
      return GS_FAIL(e, GS_ENOMEM, "out of memory summarising the buckets");
    }
    for (int b = 0; b < nb; b++) {
      const acc *q = &total[b];
      if (!(q->n > 0)) continue;
      s->bucket_timing[s->nbucket_timing++] = (gs_bucket_timing){
          .bucket = b,
          .bytes = info->bucket_bytes ? (double)info->bucket_bytes[b] : 0,
          .ready_s = q->nready > 0 ? q->ready / q->nready : NAN,
          .comm_start_s = q->start / q->n, .comm_end_s = q->end / q->n,
          .comm_s = q->comm / q->n, .hidden_s = q->hidden / q->n};
    }
    s->backward_start_s = b0 / nbwd;
    s->backward_end_s = b1 / nbwd;
  }
  free(total);
  return GS_OK;
}

int gs_bucket_ready_fractions(const gs_summary *s, int nbuckets, double *ready, gs_err *e) {
  double span = s->backward_end_s - s->backward_start_s, prev = 0;
  if (s->nbucket_timing != nbuckets || !(span > 0))
    return GS_FAIL(e, GS_EINVAL, "readiness: %d of %d buckets timed, backward %g s",
                   s->nbucket_timing, nbuckets, span);
  for (int b = 0; b < nbuckets; b++) {
    double f = (s->bucket_timing[b].ready_s - s->backward_start_s) / span;
    if (s->bucket_timing[b].bucket != b || isnan(f))
      return GS_FAIL(e, GS_EINVAL, "readiness: bucket %d has no ready mark", b);
    /* a mean of non-decreasing marks does not decrease; rounding aside */
    ready[b] = prev = fmax(prev, fmin(fmax(f, 0), 1));
  }
  return GS_OK;
}

/* ---- report.json ---- */

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *gs_bucket_timing_json(const gs_summary *s) {
  if (s->nbucket_timing < 1) return json_null();
  json_t *o = json_object(), *a = json_array();
  json_object_set_new(o, "backward_start_s", num(s->backward_start_s));
  json_object_set_new(o, "backward_end_s", num(s->backward_end_s));
  json_object_set_new(o, "buckets", a);
  for (int i = 0; i < s->nbucket_timing; i++) {
    const gs_bucket_timing *b = &s->bucket_timing[i];
    json_t *r = json_object();
    json_object_set_new(r, "bucket", json_integer(b->bucket));
    json_object_set_new(r, "bytes", num(b->bytes));
    json_object_set_new(r, "ready_s", num(b->ready_s));
    json_object_set_new(r, "comm_start_s", num(b->comm_start_s));
    json_object_set_new(r, "comm_end_s", num(b->comm_end_s));
    json_object_set_new(r, "comm_s", num(b->comm_s));
    json_object_set_new(r, "hidden_s", num(b->hidden_s));
    json_array_append_new(a, r);
  }
  return o;
}

static double real_or_nan(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* null: no timings (world 1) */
int gs_bucket_timing_read(json_t *run, const char *where, gs_summary *s, gs_err *e) {
  s->bucket_timing = NULL;
  s->nbucket_timing = 0;
  s->backward_start_s = s->backward_end_s = NAN;
  json_t *o = json_object_get(run, "bucket_timing");
  if (!o) return GS_FAIL(e, GS_EPROTO, "run %s: bucket_timing is missing", where);
  if (json_is_null(o)) return GS_OK;
  json_t *a = json_object_get(o, "buckets");
  size_t n = json_array_size(a);
  if (!json_is_object(o) || !json_is_array(a) || n < 1 || n > 1u << 20)
    return GS_FAIL(e, GS_EPROTO, "run %s: bucket_timing is not an object with a non-empty "
                   "array \"buckets\"", where);
  s->bucket_timing = calloc(n, sizeof *s->bucket_timing);
  if (!s->bucket_timing) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  s->backward_start_s = real_or_nan(o, "backward_start_s");
  s->backward_end_s = real_or_nan(o, "backward_end_s");
  for (size_t i = 0; i < n; i++) {
    json_t *r = json_array_get(a, i), *b = json_object_get(r, "bucket");
    if (!json_is_integer(b) || json_integer_value(b) < 0 || json_integer_value(b) > 1 << 20)
      return GS_FAIL(e, GS_EPROTO, "run %s: bucket_timing.buckets[%zu].bucket is not a bucket "
                     "number", where, i);
    s->bucket_timing[s->nbucket_timing++] = (gs_bucket_timing){
        .bucket = (int)json_integer_value(b), .bytes = real_or_nan(r, "bytes"),
        .ready_s = real_or_nan(r, "ready_s"), .comm_start_s = real_or_nan(r, "comm_start_s"),
        .comm_end_s = real_or_nan(r, "comm_end_s"), .comm_s = real_or_nan(r, "comm_s"),
        .hidden_s = real_or_nan(r, "hidden_s")};
  }
  return GS_OK;
}
