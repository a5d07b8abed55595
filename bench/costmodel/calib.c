/* calib.c: the calibration record of the cost model, a small JSON
 * file that `bench --calibrate` writes and `bench --project --calibration F`
 * reads (costmodel.h). A user may edit it by hand (a GPU's compute per sample,
 * an InfiniBand link), so it is read strictly: every required field, finite
 * numbers in range, and no unknown key (a misspelt key would otherwise be a
 * silent default). The format, with units in the names:
 *
 *   {"format": "gradsync-calibration", "version": 1,
 *    "transport": {"name": "zmq-tcp-loopback", "alpha_s": 2e-05,
 *                  "bandwidth_Bps": 3e9},
 *    "reduce_Bps": 8e9, "copy_Bps": 1e10, "optimizer_params_per_s": 1e9,
 *    "compute": {"model": "resnet50", "precision": "fp32",
 *                "forward_s_per_sample": 0.01, "backward_s_per_sample": 0.02,
 *                "ready_fraction": [1, 0.98, ..., 0]},     (optional: per tensor,
 *                                  the fraction of backward done when its
 *                                  gradient is final, costmodel.h readiness)
 *    "link": {"rate_Bps": 1.25e8, "latency_s": 1e-4},     (optional)
 *    "comment": "..."}                                     (optional) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/costmodel/costmodel.h"
#include "bench/files/files.h"

#define FORMAT "gradsync-calibration"
#define VERSION 1

typedef enum kind { RATE, TIME } kind;

static int bad_num(const char *what, const char *field, double v, kind k, gs_err *e) {
  if (!isfinite(v) || (k == RATE ? v <= 0 : v < 0))
    return GS_FAIL(e, GS_EINVAL, "%s: %s = %g: must be %s", what, field, v,
                   k == RATE ? "a positive finite number" : "a finite number >= 0");
  return GS_OK;
}

static int check_as(const gs_cm_calib *c, const char *w, gs_err *e) {
  if (!c->transport[0]) return GS_FAIL(e, GS_EINVAL, "%s: transport.name is empty", w);
  if (!c->model[0]) return GS_FAIL(e, GS_EINVAL, "%s: compute.model is empty", w);
  if (gs_dtype_parse(c->precision) < 0)
    return GS_FAIL(e, GS_EINVAL, "%s: compute.precision '%s': use fp32, fp16 or bf16", w,
                   c->precision);
  GS_TRY(bad_num(w, "transport.alpha_s", c->alpha_s, TIME, e));
  GS_TRY(bad_num(w, "transport.bandwidth_Bps", c->local_Bps, RATE, e));
  GS_TRY(bad_num(w, "reduce_Bps", c->reduce_Bps, RATE, e));
  GS_TRY(bad_num(w, "copy_Bps", c->copy_Bps, RATE, e));
  GS_TRY(bad_num(w, "optimizer_params_per_s", c->optim_pps, RATE, e));
  if (c->server_reduce_Bps != 0)
    GS_TRY(bad_num(w, "server_reduce_Bps", c->server_reduce_Bps, RATE, e));
  GS_TRY(bad_num(w, "compute.forward_s_per_sample", c->fwd_s, TIME, e));
  GS_TRY(bad_num(w, "compute.backward_s_per_sample", c->bwd_s, TIME, e));
  if (c->nready) {
    char where[160];
    snprintf(where, sizeof where, "%s: compute.ready_fraction", w);
    GS_TRY(gs_cm_ready_check(c->ready, c->nready, where, e));
  }
  if (c->has_link) {
    GS_TRY(bad_num(w, "link.rate_Bps", c->link_Bps, RATE, e));
    GS_TRY(bad_num(w, "link.latency_s", c->link_latency_s, TIME, e));
  }
  return GS_OK;
}

int gs_cm_calib_check(const gs_cm_calib *c, gs_err *e) { return check_as(c, "calibration", e); }

/* ---- reading ---- */

static int only_keys(json_t *o, const char *what, const char *where, const char *const *keys,
                     gs_err *e) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    bool known = false;
    for (const char *const *p = keys; *p && !known; p++) known = !strcmp(k, *p);
    if (!known) {
      char list[256] = "";
      for (const char *const *p = keys; *p; p++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", p == keys ? "" : ", ",
                 *p);
      return GS_FAIL(e, GS_EINVAL, "%s: unknown key \"%s\" in %s (known: %s)", what, k, where,
                     list);
    }
  }
  return GS_OK;
}

static int get_obj(json_t *o, const char *what, const char *key, bool required, json_t **out,
                   gs_err *e) {
  json_t *v = json_object_get(o, key);
  *out = v;
  if (!v && !required) return GS_OK;
  if (!v) return GS_FAIL(e, GS_EINVAL, "%s: missing \"%s\" (an object)", what, key);
  if (!json_is_object(v)) return GS_FAIL(e, GS_EINVAL, "%s: \"%s\" must be an object", what, key);
  return GS_OK;
}

static int get_num(json_t *o, const char *what, const char *where, const char *key, kind k,
                   double *out, gs_err *e) {
  json_t *v = json_object_get(o, key);
  const char *unit = k == RATE ? "a positive number" : "a number >= 0";
  if (!v) return GS_FAIL(e, GS_EINVAL, "%s: missing %s%s%s (%s)", what, where, *where ? "." : "",
                         key, unit);
  if (!json_is_number(v))
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s must be %s, not a %s", what, where, *where ? "." : "",
                   key, unit, json_is_string(v) ? "string" : "non-number");
  *out = json_number_value(v);
  char field[96];
  snprintf(field, sizeof field, "%s%s%s", where, *where ? "." : "", key);
  return bad_num(what, field, *out, k, e);
}

static int get_str(json_t *o, const char *what, const char *where, const char *key, bool required,
                   char *out, size_t cap, gs_err *e) {
  json_t *v = json_object_get(o, key);
  if (!v && !required) return GS_OK;
  const char *dot = *where ? "." : "";
  if (!v) return GS_FAIL(e, GS_EINVAL, "%s: missing %s%s%s (a string)", what, where, dot, key);
  if (!json_is_string(v))
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s must be a string", what, where, dot, key);
  const char *s = json_string_value(v);
  if (strlen(s) >= cap)
    return GS_FAIL(e, GS_EINVAL, "%s: %s%s%s is longer than %zu characters", what, where, dot,
                   key, cap - 1);
  snprintf(out, cap, "%s", s);
  return GS_OK;
}

/* compute.ready_fraction: numbers only; their order is check_as's */
static int get_ready(json_t *comp, const char *what, gs_cm_calib *c, gs_err *e) {
  json_t *a = json_object_get(comp, "ready_fraction");
  if (!a) return GS_OK;
  size_t n = json_is_array(a) ? json_array_size(a) : 0;
  if (n < 1 || n > GS_CM_MAX_TENSORS)
    return GS_FAIL(e, GS_EINVAL, "%s: compute.ready_fraction must be an array of 1 to %d "
                   "numbers, one per tensor (or left out: readiness then follows the layers' "
                   "work, or bytes)", what, GS_CM_MAX_TENSORS);
  for (size_t i = 0; i < n; i++) {
    json_t *v = json_array_get(a, i);
    if (!json_is_number(v))
      return GS_FAIL(e, GS_EINVAL, "%s: compute.ready_fraction[%zu] must be a number", what, i);
    c->ready[i] = json_number_value(v);
  }
  c->nready = (int)n;
  return GS_OK;
}

int gs_cm_calib_from_json(json_t *j, const char *what, gs_cm_calib *c, gs_err *e) {
  static const char *const top[] = {"format", "version", "transport", "reduce_Bps", "copy_Bps",
                                    "optimizer_params_per_s", "server_reduce_Bps", "compute",
                                    "link", "comment", NULL};
  static const char *const tr[] = {"name", "alpha_s", "bandwidth_Bps", NULL};
  static const char *const cp[] = {"model", "precision", "forward_s_per_sample",
                                   "backward_s_per_sample", "ready_fraction", NULL};
  static const char *const lk[] = {"rate_Bps", "latency_s", NULL};
  memset(c, 0, sizeof *c);
  if (!json_is_object(j)) return GS_FAIL(e, GS_EINVAL, "%s: not a JSON object", what);
  GS_TRY(only_keys(j, what, "the calibration", top, e));
  json_t *f = json_object_get(j, "format"), *v = json_object_get(j, "version");
  if (!json_is_string(f) || strcmp(json_string_value(f), FORMAT))
    return GS_FAIL(e, GS_EINVAL, "%s: \"format\" must be \"%s\" (is this a calibration file?)",
                   what, FORMAT);
  if (!json_is_integer(v) || json_integer_value(v) != VERSION)
    return GS_FAIL(e, GS_EINVAL, "%s: \"version\" must be %d (written by another gradsync?)",
                   what, VERSION);
  json_t *t, *comp, *link;
  GS_TRY(get_obj(j, what, "transport", true, &t, e));
  GS_TRY(only_keys(t, what, "transport", tr, e));
  GS_TRY(get_str(t, what, "transport", "name", true, c->transport, sizeof c->transport, e));
  GS_TRY(get_num(t, what, "transport", "alpha_s", TIME, &c->alpha_s, e));
  GS_TRY(get_num(t, what, "transport", "bandwidth_Bps", RATE, &c->local_Bps, e));
  GS_TRY(get_num(j, what, "", "reduce_Bps", RATE, &c->reduce_Bps, e));
  GS_TRY(get_num(j, what, "", "copy_Bps", RATE, &c->copy_Bps, e));
  GS_TRY(get_num(j, what, "", "optimizer_params_per_s", RATE, &c->optim_pps, e));
  /* optional (calibrations before BytePS' servers have none: the workers' rate) */
  if (json_object_get(j, "server_reduce_Bps"))
    GS_TRY(get_num(j, what, "", "server_reduce_Bps", RATE, &c->server_reduce_Bps, e));
  GS_TRY(get_obj(j, what, "compute", true, &comp, e));
  GS_TRY(only_keys(comp, what, "compute", cp, e));
  GS_TRY(get_str(comp, what, "compute", "model", true, c->model, sizeof c->model, e));
  GS_TRY(get_str(comp, what, "compute", "precision", true, c->precision, sizeof c->precision, e));
  GS_TRY(get_num(comp, what, "compute", "forward_s_per_sample", TIME, &c->fwd_s, e));
  GS_TRY(get_num(comp, what, "compute", "backward_s_per_sample", TIME, &c->bwd_s, e));
  GS_TRY(get_ready(comp, what, c, e));
  GS_TRY(get_obj(j, what, "link", false, &link, e));
  if (link) {
    GS_TRY(only_keys(link, what, "link", lk, e));
    GS_TRY(get_num(link, what, "link", "rate_Bps", RATE, &c->link_Bps, e));
    GS_TRY(get_num(link, what, "link", "latency_s", TIME, &c->link_latency_s, e));
    c->has_link = true;
  }
  GS_TRY(get_str(j, what, "", "comment", false, c->comment, sizeof c->comment, e));
  return check_as(c, what, e);
}

int gs_cm_calib_read(const char *path, gs_cm_calib *c, gs_err *e) {
  json_error_t je;
  json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!j)
    return GS_FAIL(e, GS_EINVAL, "calibration %s: %s (line %d); write one with bench "
                   "--calibrate", path, je.text, je.line);
  int rc = gs_cm_calib_from_json(j, path, c, e);
  json_decref(j);
  return rc;
}

/* ---- writing ---- */

json_t *gs_cm_calib_json(const gs_cm_calib *c) {
  json_t *j = json_pack("{s:s, s:i, s:{s:s, s:f, s:f}, s:f, s:f, s:f, s:{s:s, s:s, s:f, s:f}}",
                        "format", FORMAT, "version", VERSION, "transport", "name", c->transport,
                        "alpha_s", c->alpha_s, "bandwidth_Bps", c->local_Bps, "reduce_Bps",
                        c->reduce_Bps, "copy_Bps", c->copy_Bps, "optimizer_params_per_s",
                        c->optim_pps, "compute", "model", c->model, "precision", c->precision,
                        "forward_s_per_sample", c->fwd_s, "backward_s_per_sample", c->bwd_s);
  if (j && c->nready > 0) {
    json_t *a = json_array();
    for (int i = 0; a && i < c->nready; i++) json_array_append_new(a, json_real(c->ready[i]));
    json_object_set_new(json_object_get(j, "compute"), "ready_fraction", a);
  }
  if (j && c->has_link)
    json_object_set_new(j, "link", json_pack("{s:f, s:f}", "rate_Bps", c->link_Bps, "latency_s",
                                             c->link_latency_s));
  if (j && c->server_reduce_Bps > 0)
    json_object_set_new(j, "server_reduce_Bps", json_real(c->server_reduce_Bps));
  if (j && c->comment[0]) json_object_set_new(j, "comment", json_string(c->comment));
  return j;
}

int gs_cm_calib_write(const char *path, const gs_cm_calib *c, gs_err *e) {
  GS_TRY(gs_cm_calib_check(c, e));
  json_t *j = gs_cm_calib_json(c);
  if (!j) return GS_FAIL(e, GS_ENOMEM, "calibration %s: cannot build the JSON", path);
  int rc = gs_json_write_atomic(path, j, e);
  json_decref(j);
  return rc;
}

void gs_cm_calib_machine(const gs_cm_calib *c, gs_cm_machine *m) {
  m->alpha_s = c->alpha_s;
  m->local_Bps = c->local_Bps;
  m->reduce_Bps = c->reduce_Bps;
  m->copy_Bps = c->copy_Bps;
  m->optim_pps = c->optim_pps;
  m->server_reduce_Bps = c->server_reduce_Bps;
  if (c->has_link) {
    m->link_Bps = c->link_Bps;
    m->link_latency_s = c->link_latency_s;
  }
}
