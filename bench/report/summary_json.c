/* summary_json.c: a gs_summary as a run object of report.json (and
 * runs/<id>/run.json), and back.
 *
 * One table per object lists its keys with the member they hold, so the
 * writer and the reader cannot disagree on a name, and the reader demands
 * every key with its type: a file from another version, with a key renamed
 * or dropped, is an error naming the key, not a zero in a chart. Null is
 * read only where the schema allows it (the nullable members, which hold
 * NaN for null). */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report/report.h"

typedef enum kind {
  K_STR,      /* char * (owned) */
  K_INT,      /* int */
  K_I64,      /* int64_t */
  K_REAL,     /* double, finite */
  K_NULLABLE, /* double; NaN <-> null */
  K_BOOL,     /* bool */
  K_MODE,     /* gs_mode <-> "ps" | "ring" | "local" */
  K_DTYPE,    /* gs_dtype <-> "fp32" | "fp16" | "bf16" */
} kind;

typedef struct field {
  const char *key;
  kind k;
  size_t off;
} field;

#define RUN(k, m) {#m, k, offsetof(gs_summary, m)}
/* before per_rank, server, cost_model and step_time_s, in report order */
static const field RUN_HEAD[] = {
  RUN(K_STR, id), RUN(K_MODE, mode), RUN(K_INT, world), RUN(K_STR, model), RUN(K_STR, data),
  RUN(K_INT, batch), RUN(K_INT, global_batch), RUN(K_REAL, bucket_mb),
  RUN(K_REAL, first_bucket_mb), RUN(K_DTYPE, precision), RUN(K_STR, device),
  RUN(K_BOOL, overlap), RUN(K_BOOL, ps_dedicated), RUN(K_INT, ps_servers), RUN(K_BOOL, ps_server_hosts), RUN(K_INT, ps_spare_hosts), RUN(K_REAL, ps_partition_mb), RUN(K_STR, launcher), RUN(K_STR, algo), RUN(K_STR, run_id),
  RUN(K_STR, slow), RUN(K_REAL, jitter_cv),
  RUN(K_INT, threads_per_rank), RUN(K_I64, steps), RUN(K_I64, nparams), RUN(K_INT, nbuckets),
  RUN(K_REAL, gradient_bytes), RUN(K_REAL, wall_time_s), RUN(K_REAL, throughput_samples_per_s),
  RUN(K_REAL, step_time_s_median), RUN(K_REAL, step_time_s_p95),
  RUN(K_REAL, step_time_s_mean), RUN(K_REAL, imbalance), RUN(K_NULLABLE, scaling_efficiency),
  RUN(K_NULLABLE, master_traffic_share), RUN(K_NULLABLE, master_bytes_vs_worker),
  RUN(K_INT, skipped_steps), RUN(K_NULLABLE, final_loss),
  RUN(K_I64, warmup_steps), RUN(K_NULLABLE, final_loss_scale), RUN(K_I64, measured_steps),
};
static const field RUN_TAIL[] = {RUN(K_NULLABLE, accuracy), RUN(K_NULLABLE, eval_loss),
                                 RUN(K_NULLABLE, heldout_accuracy), RUN(K_NULLABLE, heldout_loss),
                                 RUN(K_STR, ps_sync), RUN(K_INT, staleness_max),
                                 RUN(K_NULLABLE, staleness_mean), RUN(K_INT, dropped_gradients),
                                 RUN(K_INT, ring_period), RUN(K_STR, compress),
                                 RUN(K_INT, repeat)};

#define RANK(k, m) {#m, k, offsetof(gs_rank_summary, m)}
static const field RANK_FIELDS[] = {
  RANK(K_INT, rank), RANK(K_STR, host), RANK(K_REAL, bytes_sent), RANK(K_REAL, bytes_recv),
  RANK(K_REAL, compute_s), RANK(K_REAL, data_s), RANK(K_REAL, forward_s),
  RANK(K_REAL, backward_s), RANK(K_REAL, comm_wait_s), RANK(K_REAL, comm_hidden_s),
  RANK(K_REAL, reduce_s),
  RANK(K_REAL, update_s), RANK(K_REAL, busy_s), RANK(K_REAL, idle_s), RANK(K_REAL, step_s),
  RANK(K_REAL, model_bytes_sent), RANK(K_I64, peak_rss_bytes), RANK(K_REAL, model_bytes_recv),
  RANK(K_REAL, traffic_vs_model), RANK(K_REAL, slow_factor),
};

#define SERVER(m) {#m, K_REAL, offsetof(gs_server_summary, m)}
static const field SERVER_FIELDS[] = {
  SERVER(bytes_sent), SERVER(bytes_recv), SERVER(reduce_s), SERVER(update_s), SERVER(busy_s),
  SERVER(model_bytes_sent), SERVER(model_bytes_recv),
};

#define COST(k, m) {#m, k, offsetof(gs_cost_model, m)}
static const field COST_FIELDS[] = {
  COST(K_STR, formula), COST(K_REAL, S_bytes), COST(K_REAL, master_bytes_sent),
  COST(K_REAL, master_bytes_recv), COST(K_REAL, worker_bytes_sent),
  COST(K_REAL, worker_bytes_recv), COST(K_NULLABLE, comm_s_predicted),
  COST(K_NULLABLE, comm_s_measured), COST(K_NULLABLE, comm_s_without_overlap),
  COST(K_NULLABLE, step_s_predicted), COST(K_NULLABLE, link_one_way_busy_predicted),
  COST(K_STR, bottleneck),
};

/* emulated hosts: "hosts", "link" ({...} or null without hosts), "links" */
static const field HOSTS_FIELD[] = {RUN(K_INT, hosts)};
static const field LINK_FIELDS[] = {
  {"rate_bps", K_REAL, offsetof(gs_summary, link_rate_bps)},
  {"latency_s", K_REAL, offsetof(gs_summary, link_latency_s)},
  {"delay", K_STR, offsetof(gs_summary, link_delay)},
};
#define LINK(k, m) {#m, k, offsetof(gs_hostlink_summary, m)}
static const field LINKS_FIELDS[] = {
  LINK(K_INT, host), LINK(K_REAL, tx_bytes), LINK(K_REAL, rx_bytes),
  LINK(K_NULLABLE, model_tx_bytes), LINK(K_NULLABLE, model_rx_bytes), LINK(K_REAL, window_s),
  LINK(K_REAL, busy_tx), LINK(K_REAL, busy_rx), LINK(K_REAL, busy), LINK(K_REAL, rate_bps),
};

#define NF(a) (sizeof a / sizeof a[0])

/* ---- writing ---- */

static json_t *value_json(const field *f, const void *base, const char *where, gs_err *e) {
  const char *p = (const char *)base + f->off;
  double d;
  switch (f->k) {
  case K_STR: return json_string(*(char *const *)p ? *(char *const *)p : "");
  case K_INT: return json_integer(*(const int *)p);
  case K_I64: return json_integer((json_int_t) * (const int64_t *)p);
  case K_BOOL: return json_boolean(*(const bool *)p);
  case K_MODE: return json_string(gs_mode_name(*(const gs_mode *)p));
  case K_DTYPE: return json_string(gs_dtype_name(*(const gs_dtype *)p));
  case K_NULLABLE:
    d = *(const double *)p;
    return isfinite(d) ? json_real(d) : json_null();
  case K_REAL:
    d = *(const double *)p;
    if (isfinite(d)) return json_real(d);
    GS_FAIL(e, GS_EINVAL, "run %s: %s is %g, which JSON cannot hold", where, f->key, d);
    return NULL;
  }
  return NULL;
}

static int put_fields(json_t *obj, const field *fs, size_t n, const void *base,
                      const char *where, gs_err *e) {
  for (size_t i = 0; i < n; i++) {
    json_t *v = value_json(&fs[i], base, where, e);
    if (!v) return e && e->code ? e->code : GS_FAIL(e, GS_ENOMEM, "out of memory");
    if (json_object_set_new(obj, fs[i].key, v) < 0)
      return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  return GS_OK;
}

static json_t *object_of(const field *fs, size_t n, const void *base, const char *where,
                         gs_err *e) {
  json_t *o = json_object();
  if (!o) {
    GS_FAIL(e, GS_ENOMEM, "out of memory");
    return NULL;
  }
  if (put_fields(o, fs, n, base, where, e) < 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *gs_summary_json(const gs_summary *s, gs_err *e) {
  const char *id = s->id ? s->id : "?";
  json_t *j = object_of(RUN_HEAD, NF(RUN_HEAD), s, id, e);
  if (!j) return NULL;
  /* each member joins j as soon as it exists, so one decref frees all */
  json_t *pr = json_array();
  int rc = json_object_set_new(j, "per_rank", pr) ? GS_ENOMEM : GS_OK;
  for (int r = 0; rc == GS_OK && r < s->world; r++) {
    json_t *row = object_of(RANK_FIELDS, NF(RANK_FIELDS), &s->per_rank[r], id, e);
    rc = row && !json_array_append_new(pr, row) ? GS_OK : GS_EINVAL;
  }
  if (rc == GS_OK) {
    json_t *srv = s->has_server ? object_of(SERVER_FIELDS, NF(SERVER_FIELDS), &s->server, id, e)
                                : json_null();
    rc = srv && !json_object_set_new(j, "server", srv) ? GS_OK : GS_EINVAL;
  }
  if (rc == GS_OK) {
    json_t *cm = object_of(COST_FIELDS, NF(COST_FIELDS), &s->cost_model, id, e);
    rc = cm && !json_object_set_new(j, "cost_model", cm) ? GS_OK : GS_EINVAL;
  }
  if (rc == GS_OK) rc = put_fields(j, HOSTS_FIELD, NF(HOSTS_FIELD), s, id, e);
  if (rc == GS_OK) {
    json_t *link = s->hosts > 0 ? object_of(LINK_FIELDS, NF(LINK_FIELDS), s, id, e) : json_null();
    rc = link && !json_object_set_new(j, "link", link) ? GS_OK : GS_EINVAL;
  }
  json_t *links = json_array();
  if (rc == GS_OK) rc = json_object_set_new(j, "links", links) ? GS_ENOMEM : GS_OK;
  else json_decref(links);
  for (int i = 0; rc == GS_OK && i < s->nlinks; i++) {
    json_t *row = object_of(LINKS_FIELDS, NF(LINKS_FIELDS), &s->links[i], id, e);
    rc = row && !json_array_append_new(links, row) ? GS_OK : GS_EINVAL;
  }
  if (rc == GS_OK)
    rc = json_object_set_new(j, "bucket_timing", gs_bucket_timing_json(s)) ? GS_ENOMEM : GS_OK;
  json_t *series = json_array();
  if (rc == GS_OK) rc = json_object_set_new(j, "step_time_s", series) ? GS_ENOMEM : GS_OK;
  else json_decref(series);
  for (int64_t t = 0; rc == GS_OK && t < s->steps; t++) {
    double v = s->step_time_s[t];
    if (!isfinite(v))
      rc = GS_FAIL(e, GS_EINVAL, "run %s: step_time_s[%lld] is %g", id, (long long)t, v);
    else if (json_array_append_new(series, json_real(v)))
      rc = GS_ENOMEM;
  }
  if (rc == GS_OK) rc = put_fields(j, RUN_TAIL, NF(RUN_TAIL), s, id, e);
  if (rc == GS_OK) rc = gs_stale_json_put(j, s, e);
  if (rc == GS_OK) {
    /* the repetitions this record summarises, in the order they ran */
    json_t *tp = json_array(), *st = json_array(), *ids = json_array();
    json_t *reps = json_pack("{s:i, s:o, s:o, s:o}", "count", s->nrepeats,
                             "throughput_samples_per_s", tp, "step_time_s_median", st, "ids", ids);
    rc = reps && !json_object_set_new(j, "repeats", reps) ? GS_OK : GS_ENOMEM;
    for (int k = 0; rc == GS_OK && k < s->nrepeats; k++)
      if (!isfinite(s->repeat_throughput[k]) || !isfinite(s->repeat_step_median[k]))
        rc = GS_FAIL(e, GS_EINVAL, "run %s: repetition %d has no throughput", id, k + 1);
      else if (json_array_append_new(tp, json_real(s->repeat_throughput[k])) ||
               json_array_append_new(st, json_real(s->repeat_step_median[k])) ||
               json_array_append_new(ids, json_string(s->repeat_ids[k] ? s->repeat_ids[k] : "")))
        rc = GS_ENOMEM;
  }
  if (rc < 0) {
    if (!e || !e->code) GS_FAIL(e, GS_ENOMEM, "out of memory writing run %s", id);
    json_decref(j);
    return NULL;
  }
  return j;
}

/* ---- reading ---- */

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE: case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static const char *kind_name(kind k) {
  switch (k) {
  case K_STR: return "a string";
  case K_INT: case K_I64: return "an integer";
  case K_REAL: return "a number";
  case K_NULLABLE: return "a number or null";
  case K_BOOL: return "true or false";
  case K_MODE: return "ps, ring or local";
  default: return "fp32, fp16 or bf16";
  }
}

static int read_field(json_t *obj, const field *f, void *base, const char *where,
                      const char *prefix, gs_err *e) {
  json_t *v = json_object_get(obj, f->key);
  char *p = (char *)base + f->off;
  if (!v)
    return GS_FAIL(e, GS_EPROTO, "run %s: %s%s is missing (a report of another gradsync "
                   "version? every metric must be there)", where, prefix, f->key);
  bool ok = false;
  switch (f->k) {
  case K_STR:
    if ((ok = json_is_string(v))) {
      *(char **)p = strdup(json_string_value(v));
      if (!*(char **)p) return GS_FAIL(e, GS_ENOMEM, "out of memory");
    }
    break;
  case K_INT:
    ok = json_is_integer(v) && json_integer_value(v) >= INT_MIN &&
         json_integer_value(v) <= INT_MAX;
    if (ok) *(int *)p = (int)json_integer_value(v);
    break;
  case K_I64:
    if ((ok = json_is_integer(v))) *(int64_t *)p = (int64_t)json_integer_value(v);
    break;
  case K_REAL:
    if ((ok = json_is_number(v))) *(double *)p = json_number_value(v);
    break;
  case K_NULLABLE:
    if ((ok = json_is_number(v) || json_is_null(v)))
      *(double *)p = json_is_null(v) ? NAN : json_number_value(v);
    break;
  case K_BOOL:
    if ((ok = json_is_boolean(v))) *(bool *)p = json_is_true(v);
    break;
  case K_MODE: {
    const char *m = json_string_value(v);
    int mode = gs_mode_parse(m);
    if ((ok = mode >= 0)) *(gs_mode *)p = (gs_mode)mode;
    break;
  }
  case K_DTYPE: {
    int t = json_is_string(v) ? gs_dtype_parse(json_string_value(v)) : -1;
    if ((ok = t >= 0)) *(gs_dtype *)p = (gs_dtype)t;
    break;
  }
  }
  if (!ok)
    return GS_FAIL(e, GS_EPROTO, "run %s: %s%s is %s, expected %s", where, prefix, f->key,
                   type_name(v), kind_name(f->k));
  return GS_OK;
}

static int read_fields(json_t *obj, const field *fs, size_t n, void *base, const char *where,
                       const char *prefix, gs_err *e) {
  if (!json_is_object(obj))
    return GS_FAIL(e, GS_EPROTO, "run %s: %s is %s, expected an object", where,
                   *prefix ? prefix : "the run", obj ? type_name(obj) : "missing");
  for (size_t i = 0; i < n; i++) GS_TRY(read_field(obj, &fs[i], base, where, prefix, e));
  return GS_OK;
}

static json_t *member(json_t *j, const char *key, const char *where, gs_err *e) {
  json_t *v = json_object_get(j, key);
  if (!v) GS_FAIL(e, GS_EPROTO, "run %s: %s is missing", where, key);
  return v;
}

static int read_run(json_t *j, gs_summary *s, gs_err *e) {
  const char *where = json_string_value(json_object_get(j, "id"));
  if (!where) where = "(without an id)";
  GS_TRY(read_fields(j, RUN_HEAD, NF(RUN_HEAD), s, where, "", e));
  GS_TRY(read_fields(j, RUN_TAIL, NF(RUN_TAIL), s, where, "", e));
  if (s->world < 1 || s->steps < 0)
    return GS_FAIL(e, GS_EPROTO, "run %s: world %d, steps %lld", where, s->world,
                   (long long)s->steps);
  GS_TRY(gs_stale_json_get(j, s, where, e));

  json_t *pr = member(j, "per_rank", where, e);
  if (!pr) return e->code;
  if (!json_is_array(pr) || json_array_size(pr) != (size_t)s->world)
    return GS_FAIL(e, GS_EPROTO, "run %s: per_rank has %zu rows for world %d", where,
                   json_array_size(pr), s->world);
  s->per_rank = calloc((size_t)s->world, sizeof *s->per_rank);
  if (!s->per_rank) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (int r = 0; r < s->world; r++) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "per_rank[%d].", r);
    GS_TRY(read_fields(json_array_get(pr, (size_t)r), RANK_FIELDS, NF(RANK_FIELDS),
                       &s->per_rank[r], where, prefix, e));
    if (s->per_rank[r].rank != r)
      return GS_FAIL(e, GS_EPROTO, "run %s: per_rank[%d] is rank %d", where, r,
                     s->per_rank[r].rank);
  }

  json_t *srv = member(j, "server", where, e);
  if (!srv) return e->code;
  s->has_server = !json_is_null(srv);
  if (s->has_server)
    GS_TRY(read_fields(srv, SERVER_FIELDS, NF(SERVER_FIELDS), &s->server, where, "server.", e));
  json_t *cm = member(j, "cost_model", where, e);
  if (!cm) return e->code;
  GS_TRY(read_fields(cm, COST_FIELDS, NF(COST_FIELDS), &s->cost_model, where, "cost_model.", e));

  GS_TRY(read_fields(j, HOSTS_FIELD, NF(HOSTS_FIELD), s, where, "", e));
  json_t *link = member(j, "link", where, e);
  if (!link) return e->code;
  if (s->hosts > 0) {
    GS_TRY(read_fields(link, LINK_FIELDS, NF(LINK_FIELDS), s, where, "link.", e));
  } else if (!json_is_null(link)) {
    return GS_FAIL(e, GS_EPROTO, "run %s: link is %s without hosts, expected null", where,
                   type_name(link));
  } else if (!(s->link_delay = strdup("none"))) {
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  json_t *links = member(j, "links", where, e);
  if (!links) return e->code;
  /* the ranks' hosts, then those of ps servers of their own (or of spare hosts) */
  int most = s->hosts > 0 ? s->hosts + (s->ps_server_hosts ? s->ps_servers : 0) +
                                (s->ps_spare_hosts > 0 ? s->ps_spare_hosts : 0) : 0;
  if (!json_is_array(links) || json_array_size(links) > (size_t)most)
    return GS_FAIL(e, GS_EPROTO, "run %s: links is not an array of at most %d hosts", where,
                   most);
  s->links = calloc(json_array_size(links) + 1, sizeof *s->links);
  if (!s->links) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < json_array_size(links); i++) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "links[%zu].", i);
    GS_TRY(read_fields(json_array_get(links, i), LINKS_FIELDS, NF(LINKS_FIELDS), &s->links[i],
                       where, prefix, e));
    s->nlinks++;
  }
  GS_TRY(gs_bucket_timing_read(j, where, s, e));
  json_t *reps = member(j, "repeats", where, e);
  if (!reps) return e->code;
  json_t *count = json_object_get(reps, "count"), *tp = json_object_get(reps,
          "throughput_samples_per_s"), *st = json_object_get(reps, "step_time_s_median"),
         *ids = json_object_get(reps, "ids");
  json_int_t nrep = json_integer_value(count);
  if (!json_is_integer(count) || nrep < 1 || nrep > 100000 || !json_is_array(tp) ||
      !json_is_array(st) || !json_is_array(ids) || json_array_size(tp) != (size_t)nrep ||
      json_array_size(st) != (size_t)nrep || json_array_size(ids) != (size_t)nrep)
    return GS_FAIL(e, GS_EPROTO, "run %s: repeats is not {count, throughput_samples_per_s, "
                   "step_time_s_median, ids} with count entries each", where);
  s->repeat_throughput = calloc((size_t)nrep, sizeof *s->repeat_throughput);
  s->repeat_step_median = calloc((size_t)nrep, sizeof *s->repeat_step_median);
  s->repeat_ids = calloc((size_t)nrep, sizeof *s->repeat_ids);
  if (!s->repeat_throughput || !s->repeat_step_median || !s->repeat_ids)
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  s->nrepeats = (int)nrep;
  for (size_t k = 0; k < (size_t)nrep; k++) {
    json_t *a = json_array_get(tp, k), *b = json_array_get(st, k), *c = json_array_get(ids, k);
    if (!json_is_number(a) || !json_is_number(b) || !json_is_string(c))
      return GS_FAIL(e, GS_EPROTO, "run %s: repeats[%zu] is not a number, a number and an id",
                     where, k);
    s->repeat_throughput[k] = json_number_value(a);
    s->repeat_step_median[k] = json_number_value(b);
    if (!(s->repeat_ids[k] = strdup(json_string_value(c))))
      return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  json_t *series = member(j, "step_time_s", where, e);
  if (!series) return e->code;
  if (!json_is_array(series) || json_array_size(series) != (size_t)s->steps)
    return GS_FAIL(e, GS_EPROTO, "run %s: step_time_s has %zu entries for %lld steps", where,
                   json_array_size(series), (long long)s->steps);
  s->step_time_s = calloc((size_t)s->steps + 1, sizeof *s->step_time_s);
  if (!s->step_time_s) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t t = 0; t < (size_t)s->steps; t++) {
    json_t *v = json_array_get(series, t);
    if (!json_is_number(v))
      return GS_FAIL(e, GS_EPROTO, "run %s: step_time_s[%zu] is %s, expected a number", where,
                     t, type_name(v));
    s->step_time_s[t] = json_number_value(v);
  }
  return GS_OK;
}

int gs_summary_from_json(json_t *j, gs_summary *out, gs_err *e) {
  memset(out, 0, sizeof *out);
  int rc = read_run(j, out, e);
  if (rc < 0) gs_summary_free(out);
  return rc;
}
