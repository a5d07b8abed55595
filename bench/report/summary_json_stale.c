/* summary_json_stale.c: the stale members of a run object of report.json
 * (report.h gs_stale_summary), and back, beside the run's own keys
 * (summary_json.c): the writer adds them, and the reader demands every one
 * with its type, so a report of another version is an error naming the key.
 * NaN is written as null where a number may be missing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"

#define HELDOUT_MAX (1 << 20)

static json_t *reals(const double *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null())) {
      json_decref(a);
      return NULL;
    }
  return a;
}

static json_t *nullable(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int gs_stale_json_put(json_t *j, const gs_summary *s, gs_err *e) {
  const gs_stale_summary *st = &s->stale;
  int N = s->world;
  json_t *hist = json_array(), *waits = json_array();
  for (int i = 0; hist && i < st->nhist; i++)
    json_array_append_new(hist, json_integer((json_int_t)st->staleness_hist[i]));
  for (int r = 0; waits && r < N; r++)
    json_array_append_new(waits, reals(st->waited_for_s + (size_t)r * N, (size_t)N));
  json_t *curve = json_pack("{s:o?, s:o?}", "t_s", reals(st->loss_t_s, (size_t)st->nloss),
                            "loss", reals(st->loss, (size_t)st->nloss));
  json_t *mdl = isfinite(st->model_samples_per_s)
                    ? json_pack("{s:f, s:s}", "samples_per_s", st->model_samples_per_s,
                                "formula", st->model_formula ? st->model_formula : "")
                    : json_null();
  json_t *held = json_null();
  if (st->nheldout > 0) {
    json_t *at = json_array();
    for (int i = 0; at && i < st->nheldout; i++)
      json_array_append_new(at, json_integer((json_int_t)st->heldout_step[i]));
    size_t n = (size_t)st->nheldout;
    held = json_pack("{s:o?, s:o?, s:o?, s:o?}", "step", at, "t_s", reals(st->heldout_t_s, n),
                     "accuracy", reals(st->heldout_accuracy, n), "loss",
                     reals(st->heldout_loss, n));
  }
  int bad = !hist || !waits || !curve || !mdl || !held;
  bad |= json_object_set_new(j, "heldout_curve", held);
  bad |= json_object_set_new(j, "throughput_basis", json_string(st->throughput_basis ?
                             st->throughput_basis : "steps"));
  bad |= json_object_set_new(j, "staleness_histogram", hist);
  bad |= json_object_set_new(j, "waited_for_s", waits);
  bad |= json_object_set_new(j, "waited_backend_s", reals(st->waited_backend_s, (size_t)N));
  bad |= json_object_set_new(j, "loss_curve", curve);
  bad |= json_object_set_new(j, "target_loss", nullable(st->target_loss));
  bad |= json_object_set_new(j, "target_from", json_string(st->target_from ? st->target_from
                                                           : ""));
  bad |= json_object_set_new(j, "time_to_target_s", nullable(st->time_to_target_s));
  bad |= json_object_set_new(j, "straggler_model", mdl);
  return bad ? GS_FAIL(e, GS_ENOMEM, "out of memory writing run %s", s->id) : GS_OK;
}

/* a JSON array of n numbers (null for NaN where nulls may be) into v */
static int get_reals(json_t *a, size_t n, double *v, bool nulls, const char *where,
                     const char *key, gs_err *e) {
  if (!json_is_array(a) || json_array_size(a) != n)
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is not an array of %zu numbers", where, key, n);
  for (size_t i = 0; i < n; i++) {
    json_t *x = json_array_get(a, i);
    if (json_is_number(x)) v[i] = json_number_value(x);
    else if (nulls && json_is_null(x)) v[i] = NAN;
    else return GS_FAIL(e, GS_EPROTO, "run %s: %s[%zu] is not a number", where, key, i);
  }
  return GS_OK;
}

static int get_text(json_t *j, const char *key, char **out, const char *where, gs_err *e) {
  json_t *v = json_object_get(j, key);
  if (!json_is_string(v))
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is missing or not a string (a report of another "
                   "gradsync version? every metric must be there)", where, key);
  return (*out = strdup(json_string_value(v))) ? GS_OK
                                               : GS_FAIL(e, GS_ENOMEM, "out of memory");
}

static int get_nullable(json_t *j, const char *key, double *out, const char *where, gs_err *e) {
  json_t *v = json_object_get(j, key);
  if (!v || !(json_is_number(v) || json_is_null(v)))
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is missing or not a number or null", where, key);
  *out = json_is_null(v) ? NAN : json_number_value(v);
  return GS_OK;
}

/* null, or {step, t_s, accuracy, loss} of as many points, steps ascending */
static int get_heldout(json_t *h, gs_stale_summary *st, const char *where, gs_err *e) {
  if (json_is_null(h)) return GS_OK;
  json_t *at = json_object_get(h, "step");
  size_t n = json_array_size(at);
  if (!json_is_object(h) || !json_is_array(at) || n < 1 || n > HELDOUT_MAX)
    return GS_FAIL(e, GS_EPROTO, "run %s: heldout_curve is neither null nor {step, t_s, "
                   "accuracy, loss} of 1 to %d points", where, HELDOUT_MAX);
  st->heldout_step = calloc(n, sizeof *st->heldout_step);
  st->heldout_t_s = calloc(n, sizeof *st->heldout_t_s);
  st->heldout_accuracy = calloc(n, sizeof *st->heldout_accuracy);
  st->heldout_loss = calloc(n, sizeof *st->heldout_loss);
  if (!st->heldout_step || !st->heldout_t_s || !st->heldout_accuracy || !st->heldout_loss)
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *x = json_array_get(at, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 ||
        (i > 0 && json_integer_value(x) <= st->heldout_step[i - 1]))
      return GS_FAIL(e, GS_EPROTO, "run %s: heldout_curve.step[%zu] is not a step after the "
                     "one before it", where, i);
    st->heldout_step[i] = (int64_t)json_integer_value(x);
  }
  GS_TRY(get_reals(json_object_get(h, "t_s"), n, st->heldout_t_s, false, where,
                   "heldout_curve.t_s", e));
  GS_TRY(get_reals(json_object_get(h, "accuracy"), n, st->heldout_accuracy, false, where,
                   "heldout_curve.accuracy", e));
  GS_TRY(get_reals(json_object_get(h, "loss"), n, st->heldout_loss, true, where,
                   "heldout_curve.loss", e));
  st->nheldout = (int)n;
  return GS_OK;
}

int gs_stale_json_get(json_t *j, gs_summary *s, const char *where, gs_err *e) {
  gs_stale_summary *st = &s->stale;
  int N = s->world;
  GS_TRY(get_text(j, "throughput_basis", &st->throughput_basis, where, e));
  GS_TRY(get_text(j, "target_from", &st->target_from, where, e));
  GS_TRY(get_nullable(j, "target_loss", &st->target_loss, where, e));
  GS_TRY(get_nullable(j, "time_to_target_s", &st->time_to_target_s, where, e));
  json_t *hist = json_object_get(j, "staleness_histogram");
  if (!json_is_array(hist) || json_array_size(hist) > (size_t)1 << 20)
    return GS_FAIL(e, GS_EPROTO, "run %s: staleness_histogram is missing or not an array",
                   where);
  /* the rows are checked before anything of world x world is allocated */
  json_t *waits = json_object_get(j, "waited_for_s");
  bool square = json_is_array(waits) && json_array_size(waits) == (size_t)N;
  for (int r = 0; square && r < N; r++)
    square = json_array_size(json_array_get(waits, (size_t)r)) == (size_t)N;
  if (!square) return GS_FAIL(e, GS_EPROTO, "run %s: waited_for_s is not %d rows of %d", where,
                              N, N);
  st->nhist = (int)json_array_size(hist);
  st->staleness_hist = calloc((size_t)st->nhist + 1, sizeof *st->staleness_hist);
  st->waited_for_s = calloc((size_t)N * N, sizeof *st->waited_for_s);
  st->waited_backend_s = calloc((size_t)N, sizeof *st->waited_backend_s);
  if (!st->staleness_hist || !st->waited_for_s || !st->waited_backend_s)
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int i = 0; i < st->nhist; i++) {
    json_t *x = json_array_get(hist, (size_t)i);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return GS_FAIL(e, GS_EPROTO, "run %s: staleness_histogram[%d] is not a count", where, i);
    st->staleness_hist[i] = (int64_t)json_integer_value(x);
  }
  for (int r = 0; r < N; r++)
    GS_TRY(get_reals(json_array_get(waits, (size_t)r), (size_t)N,
                     st->waited_for_s + (size_t)r * N, false, where, "waited_for_s", e));
  GS_TRY(get_reals(json_object_get(j, "waited_backend_s"), (size_t)N, st->waited_backend_s, false,
                   where, "waited_backend_s", e));
  json_t *curve = json_object_get(j, "loss_curve"), *t = json_object_get(curve, "t_s");
  size_t n = json_array_size(t);
  if (!json_is_object(curve) || !json_is_array(t) || n > GS_LOSS_CURVE_MAX + 1)
    return GS_FAIL(e, GS_EPROTO, "run %s: loss_curve is not {t_s, loss} of at most %d points",
                   where, GS_LOSS_CURVE_MAX + 1);
  st->loss_t_s = calloc(n + 1, sizeof *st->loss_t_s);
  st->loss = calloc(n + 1, sizeof *st->loss);
  if (!st->loss_t_s || !st->loss) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  GS_TRY(get_reals(t, n, st->loss_t_s, false, where, "loss_curve.t_s", e));
  GS_TRY(get_reals(json_object_get(curve, "loss"), n, st->loss, false, where, "loss_curve.loss",
                   e));
  st->nloss = (int)n;
  GS_TRY(get_heldout(json_object_get(j, "heldout_curve"), st, where, e));
  json_t *mdl = json_object_get(j, "straggler_model");
  st->model_samples_per_s = NAN;
  if (json_is_null(mdl)) return (st->model_formula = strdup("")) ? GS_OK
                                : GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (!json_is_object(mdl) || !json_is_number(json_object_get(mdl, "samples_per_s")))
    return GS_FAIL(e, GS_EPROTO, "run %s: straggler_model is missing or not {samples_per_s, "
                   "formula} or null", where);
  st->model_samples_per_s = json_number_value(json_object_get(mdl, "samples_per_s"));
  return get_text(mdl, "formula", &st->model_formula, where, e);
}
