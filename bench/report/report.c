/* report.c: the sweep's report, from the runs' summaries: report.json
 * (schema-versioned: the configuration, the environment, every run with its
 * summary and per-rank rows), the merged trace, and the SVG charts (drawn
 * by charts.c); and --report DIR, which draws the tables and the charts
 * again from a report.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>
#include <zmq.h>

#include <cblas.h>
#include <protobuf-c/protobuf-c.h>

#include "bench/costmodel/costmodel.h"
#include "bench/report/draw.h"
#include "bench/report/report.h"
#include "bench/version.h"
#include "ps/ps.h"

#define GS_REPORT_SCHEMA 2


static void zmq_version_text(char *buf, size_t cap) {
  int maj, min, pat;
  zmq_version(&maj, &min, &pat);
  snprintf(buf, cap, "%d.%d.%d", maj, min, pat);
}

static json_t *environment(void) {
  char cpu[256] = "unknown", host[256] = "";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          snprintf(cpu, sizeof cpu, "%s", c + 2);
          cpu[strcspn(cpu, "\n")] = 0;
        }
        break;
      }
    fclose(f);
  }
  gethostname(host, sizeof host - 1);
  struct utsname u;
  uname(&u);
  char zv[32];
  zmq_version_text(zv, sizeof zv);
  const char *blas = openblas_get_config(), *isa = "unknown";
  gs_isa_select(&isa, NULL);
  gs_err ge = {0};
  gs_kernels *k = gs_kernels_cuda(0, &ge);
  if (k) k->destroy(k);
  /* what the cost model took for this machine's loopback (sweep.c) */
  double la = 0, lb = 0;
  json_t *loop = gs_loopback_costmodel(&la, &lb)
                     ? json_pack("{s:f, s:f, s:s}", "alpha_s", la, "bytes_per_s", lb, "measured_as",
                                 "ZeroMQ ping-pong over tcp loopback before the runs")
                     : json_null();
  json_t *env = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:{s:s, s:s, s:s, "
                          "s:s, s:s}}",
                          "cpu", cpu, "cores", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "isa",
                          isa, "hostname", host, "kernel", u.release, "version", GS_VERSION,
                          "git_revision", GS_GIT_REVISION, "build_type", GS_BUILD_TYPE, "gpu",
                          k ? "available" : "none", "loopback_transport", loop, "libraries",
                          "zeromq", zv, "openblas", blas ? blas : "", "protobuf_c",
                          protobuf_c_version(), "jansson", JANSSON_VERSION, "libsodium",
                          sodium_version_string());
  /* whether the build's tree differed from its commit (tools/git_revision.py's
   * mark); null when the build did not know its revision */
  bool known = strcmp(GS_GIT_REVISION, "unknown") != 0;
  json_object_set_new(env, "git_dirty", known ? json_boolean(strstr(GS_GIT_REVISION, "+dirty:"))
                                              : json_null());
  return env;
}

void gs_version_print(FILE *f) {
  char zv[32];
  zmq_version_text(zv, sizeof zv);
  const char *isa = "unknown", *blas = openblas_get_config();
  gs_isa_select(&isa, NULL);
  fprintf(f, "gradsync %s (git %s), %s build\n", GS_VERSION, GS_GIT_REVISION, GS_BUILD_TYPE);
  fprintf(f, "CPU code path: %s (GS_ISA=scalar|avx2|avx512 forces one)\n", isa);
  fprintf(f, "libraries: ZeroMQ %s (CURVE %s), libsodium %s, protobuf-c %s, jansson %s, "
          "%s\n", zv, zmq_has("curve") ? "yes" : "no", sodium_version_string(),
          protobuf_c_version(), JANSSON_VERSION, blas ? blas : "?");
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cuda(0, &e);
  fprintf(f, "GPU (--device cuda): %s\n", k ? "available" : e.msg);
  if (k) k->destroy(k);
}

static json_t *configuration(const gs_opts *o) {
  json_t *modes = json_array(), *worlds = json_array(), *models = json_array(),
         *batches = json_array(), *buckets = json_array();
  for (int i = 0; i < o->nmodes; i++) json_array_append_new(modes, json_string(gs_mode_name(o->modes[i])));
  for (int i = 0; i < o->nworlds; i++) json_array_append_new(worlds, json_integer(o->worlds[i]));
  for (int i = 0; i < o->nmodels; i++) json_array_append_new(models, json_string(o->models[i]));
  for (int i = 0; i < o->nbatches; i++) json_array_append_new(batches, json_integer(o->batches[i]));
  for (int i = 0; i < o->nbucket_mbs; i++) json_array_append_new(buckets, json_real(o->bucket_mbs[i]));
  const gs_train_opts *t = &o->train;
  json_t *c = json_pack("{s:o, s:o, s:o, s:o, s:o, s:b, s:I, s:i, s:s, s:f, s:f, s:f, s:I, s:b, "
                        "s:b, s:s, s:f, s:b, s:f, s:f, s:b, s:i, s:b, s:f, s:s}",
                        "modes", modes, "worlds", worlds, "models", models, "batches", batches,
                        "bucket_mb", buckets, "strong_scaling", o->strong, "steps",
                        (json_int_t)t->steps, "warmup", o->warmup, "data", t->data, "lr",
                        (double)t->lr, "momentum", (double)t->momentum, "weight_decay",
                        (double)t->weight_decay, "seed", (json_int_t)t->seed, "shuffle",
                        t->shuffle, "drop_last", t->drop_last, "precision",
                        gs_dtype_name(t->precision), "loss_scale", (double)t->loss_scale,
                        "dynamic_loss_scale", t->dynamic_scale, "compute_ms", t->compute_ms,
                        "first_bucket_mb", t->first_bucket_mb, "ps_dedicated", o->dedicated,
                        "ps_servers", o->ps_servers, "ps_server_hosts", o->ps_server_hosts,
                        "timeout_s", o->timeout_s, "device", o->device);
  json_object_set_new(c, "repeat", json_integer(o->repeats));
  /* profiles: the measured time x this instead of compute_ms (0: off) */
  json_object_set_new(c, "compute_scale", json_real(o->train.compute_scale));
  char slow[GS_SLOW_MAX * 8 + 32];
  gs_straggle_text(&o->train.straggle, slow, sizeof slow);
  json_object_set_new(c, "slow", json_string(slow));
  json_object_set_new(c, "jitter_cv", json_real(o->train.straggle.jitter_cv));
  char sync[48];
  gs_ps_sync_text(&o->ps_sync, sync, sizeof sync);
  json_object_set_new(c, "ps_sync", json_string(sync));
  json_object_set_new(c, "ring_period", json_integer(o->ring_period));
  json_object_set_new(c, "freeze", json_string(t->freeze ? t->freeze : ""));
  json_t *spares = json_array();
  for (int i = 0; i < o->nps_spares; i++) json_array_append_new(spares, json_integer(o->ps_spares[i]));
  json_object_set_new(c, "ps_spare_hosts", spares);
  json_object_set_new(c, "ps_partition_mb", json_real(o->ps_partition_mb));
  json_object_set_new(c, "ps_spare_share", json_real(o->ps_spare_share));
  json_object_set_new(c, "ps_credit_mb", json_real(o->ps_credit_mb));
  char hr[GS_HOST_RATES_MAX * 32];
  gs_host_rates_text(&o->link_host, hr, sizeof hr);
  json_object_set_new(c, "link_host", json_string(hr));
  json_object_set_new(c, "host_cpus", json_real(o->host_cpus));
  json_object_set_new(c, "compress", json_string(gs_compress_spec(&t->compress, (char[32]){0}, 32)));
  json_object_set_new(c, "powersgd_start", json_integer((json_int_t)t->compress.start));
  /* a string in every case: "on", "off", or the mode's default */
  json_object_set_new(c, "overlap", json_string(o->overlap < 0 ? "mode default"
                                                : o->overlap == 1 ? "on" : "off"));
  /* the data path; each run's algo says what trained on it */
  json_object_set_new(c, "transport", json_string(o->transport ? o->transport : "tcp"));
  json_object_set_new(c, "ps_hostagg", json_string(o->ps_hostagg < 0 ? "default"
                                                        : o->ps_hostagg ? "on" : "off"));
  return c;
}

/* the most ranks of one run that shared a host (ranks on several nodes
 * each count against their own node's cores; emulated hosts share this
 * machine's) */
static int most_per_host(const gs_summary *runs, size_t n) {
  int most = 0;
  for (size_t i = 0; i < n; i++) {
    /* emulated hosts all run on this machine's cores */
    if (runs[i].hosts > 0 && runs[i].world > most) most = runs[i].world;
    for (int a = 0; a < runs[i].world; a++) {
      int same = 0;
      for (int b = 0; b < runs[i].world; b++)
        same += !strcmp(runs[i].per_rank[a].host, runs[i].per_rank[b].host);
      if (same > most) most = same;
    }
  }
  return most;
}

bool gs_oversubscribed(const gs_summary *runs, size_t n, char *buf, size_t cap) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int most = most_per_host(runs, n);
  buf[0] = 0;
  if (cores < 1 || most <= cores) return false;
  snprintf(buf, cap, "%d ranks on a host with %ld online CPU core(s): ranks outnumber cores, so "
           "the comparison measures the OS scheduler as much as the synchronization", most,
           cores);
  return true;
}

json_t *gs_report_json(const gs_opts *o, const gs_summary *runs, size_t n, json_t *peers,
                       bool interrupted, gs_err *e) {
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < n; i++) {
    json_t *r = gs_summary_json(&runs[i], e);
    if (!r || json_array_append_new(arr, r)) {
      json_decref(arr);
      if (!e || !e->code) GS_FAIL(e, GS_ENOMEM, "out of memory writing report.json");
      return NULL;
    }
  }
  json_t *j = json_pack("{s:i, s:s, s:b, s:o, s:o, s:o, s:s}", "schema_version",
                        GS_REPORT_SCHEMA, "generator", "gradsync bench", "interrupted",
                        interrupted, "config", configuration(o), "environment", environment(),
                        "runs", arr, "metrics", "see README.md#report-schema");
  if (!j) {
    GS_FAIL(e, GS_ENOMEM, "out of memory writing report.json");
    return NULL;
  }
  char started[40] = "";
  time_t t0 = (time_t)o->started;
  struct tm tm;
  if (o->started > 0 && gmtime_r(&t0, &tm)) strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const char *run_id = getenv("GS_RUN_ID");
  json_object_set_new(j, "command_line", json_string(o->command_line ? o->command_line : ""));
  json_object_set_new(j, "started", json_string(started));
  json_object_set_new(j, "run_id", json_string(run_id ? run_id : n ? runs[0].run_id : ""));
  char notice[256];
  bool over = gs_oversubscribed(runs, n, notice, sizeof notice);
  json_object_set_new(j, "oversubscribed", json_boolean(over));
  json_object_set_new(j, "oversubscribed_notice", over ? json_string(notice) : json_null());
  json_object_set_new(j, "peers", peers ? json_deep_copy(peers) : json_array());
  char link[GS_LINK_SENTENCE_MAX];
  static const char *const choice[] = {"launcher", "given", "auto: emulated hosts",
                                       "auto: loopback", "none"};
  gs_link_sentence(o, link, sizeof link);
  json_object_set_new(j, "links_chosen", json_pack("{s:s, s:s}", "choice",
                                                   choice[o->link_choice], "sentence", link));
  gs_verdict v;
  gs_verdict_of(runs, n, sysconf(_SC_NPROCESSORS_ONLN), link, &v);
  json_object_set_new(j, "verdict", gs_verdict_json(&v));
  char bv[4096];
  gs_bucket_verdict(runs, n, bv, sizeof bv);
  json_object_set_new(j, "bucket_verdict", json_string(bv));
  return j;
}

/* timeline-<id>.svg of every run from its runs/<id>/timeline.json, the runs
 * of one world (same model, batch, bucket, precision) on one time scale */
static int draw_timelines(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  json_t **tl = calloc(n + 1, sizeof *tl);
  if (!tl) return GS_FAIL(e, GS_ENOMEM, "out of memory drawing the timelines");
  for (size_t i = 0; i < n; i++) {
    char path[4600];
    snprintf(path, sizeof path, "%s/runs/%s/timeline.json", dir, runs[i].id);
    tl[i] = json_load_file(path, 0, NULL); /* none: a run of an older bench */
  }
  int rc = GS_OK;
  for (size_t i = 0; i < n && rc == GS_OK; i++) {
    if (!tl[i]) continue;
    double span = 0;
    for (size_t j = 0; j < n; j++)
      if (tl[j] && runs[j].world == runs[i].world && !strcmp(runs[j].model, runs[i].model) &&
          runs[j].batch == runs[i].batch && runs[j].bucket_mb == runs[i].bucket_mb &&
          runs[j].precision == runs[i].precision && gs_timeline_span(tl[j]) > span)
        span = gs_timeline_span(tl[j]);
    rc = gs_charts_timeline(dir, runs[i].id, tl[i], span, e);
  }
  for (size_t i = 0; i < n; i++) json_decref(tl[i]);
  free(tl);
  return rc;
}

/* Merge the runs' traces: each run's ranks become processes numbered
 * run*1000 + rank, named after the run, runs laid end to end in time. */
static int merge_traces(const char *dir, const gs_summary *runs, size_t n, gs_err *e) {
  json_t *all = json_array();
  double offset_us = 0;
  for (size_t i = 0; i < n; i++) {
    const gs_summary *r = &runs[i];
    char path[4600];
    snprintf(path, sizeof path, "%s/runs/%s/trace.json", dir, r->id);
    json_t *t = json_load_file(path, 0, NULL);
    if (!t) continue; /* a run of an older sweep in the same directory: no timeline */
    double end = 0;
    size_t k;
    json_t *ev;
    json_array_foreach(json_object_get(t, "traceEvents"), k, ev) {
      json_int_t rank = json_integer_value(json_object_get(ev, "pid"));
      json_object_set_new(ev, "pid", json_integer((json_int_t)i * 1000 + rank));
      const char *ph = json_string_value(json_object_get(ev, "ph"));
      const char *name = json_string_value(json_object_get(ev, "name"));
      bool meta = ph && name && !strcmp(ph, "M");
      if (meta && !strcmp(name, "process_name")) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s w%d rank %d", gs_mode_name(r->mode), r->world, (int)rank);
        json_object_set_new(json_object_get(ev, "args"), "name", json_string(nm));
      }
      if (meta && !strcmp(name, "process_sort_index"))
        json_object_set_new(json_object_get(ev, "args"), "sort_index",
                            json_integer((json_int_t)i * 1000 + rank));
      json_t *ts = json_object_get(ev, "ts"), *dur = json_object_get(ev, "dur");
      if (json_is_number(ts)) {
        /* counters and instants have no duration */
        double v = json_number_value(ts) + (json_is_number(dur) ? json_number_value(dur) : 0);
        if (v > end) end = v;
        json_object_set_new(ev, "ts", json_real(json_number_value(ts) + offset_us));
      }
      json_array_append(all, ev);
    }
    offset_us += end + 1e5; /* 100 ms gap between runs */
    json_decref(t);
  }
  json_t *doc = json_pack("{s:o, s:s}", "traceEvents", all, "displayTimeUnit", "ms");
  char path[4200];
  snprintf(path, sizeof path, "%s/trace.json", dir);
  int rc = gs_json_write_atomic(path, doc, e);
  json_decref(doc);
  return rc;
}

int gs_report_write(const char *dir, const gs_opts *o, const gs_summary *runs, size_t n,
                    json_t *peers, bool interrupted, gs_err *e) {
  json_t *rep = gs_report_json(o, runs, n, peers, interrupted, e);
  if (!rep) return e->code;
  char path[4200];
  snprintf(path, sizeof path, "%s/report.json", dir);
  int rc = gs_json_write_atomic(path, rep, e);
  if (rc == GS_OK) rc = merge_traces(dir, runs, n, e);
  if (rc == GS_OK) rc = gs_charts_write(dir, runs, n, peers, e);
  if (rc == GS_OK) rc = draw_timelines(dir, runs, n, e);
  if (rc == GS_OK) rc = gs_html_write(dir, rep, e);
  json_decref(rep);
  return rc;
}

int gs_report_collective(const char *dir, const gs_opts *o, const char *run_id, gs_err *e) {
  json_t *tables = gs_collective_tables(dir, run_id);
  if (!tables || json_array_size(tables) == 0) {
    json_decref(tables);
    return GS_OK;
  }
  json_t *doc = json_pack("{s:i, s:s, s:o, s:o, s:s}", "schema_version", GS_REPORT_SCHEMA,
                          "generator", "gradsync bench --collective", "collective", tables,
                          "environment", environment(), "command_line",
                          o->command_line ? o->command_line : "");
  if (!doc) return GS_FAIL(e, GS_ENOMEM, "out of memory writing the collective report");
  int rc = gs_charts_busbw(dir, json_object_get(doc, "collective"), e);
  if (rc == GS_OK) rc = gs_html_write(dir, doc, e);
  json_decref(doc);
  return rc;
}

void gs_summaries_free(gs_summary *runs, size_t n) {
  for (size_t i = 0; runs && i < n; i++) gs_summary_free(&runs[i]);
  free(runs);
}

int gs_report_load(const char *dir, json_t **doc, gs_summary **out, size_t *nout, gs_err *e) {
  *doc = NULL;
  *out = NULL;
  *nout = 0;
  char path[4200];
  snprintf(path, sizeof path, "%s/report.json", dir);
  json_error_t je;
  json_t *rep = json_load_file(path, 0, &je);
  if (!rep) return GS_FAIL(e, GS_EIO, "cannot read %s: %s", path, je.text);
  json_t *arr = json_object_get(rep, "runs");
  json_t *ver = json_object_get(rep, "schema_version");
  int rc = GS_OK;
  if (!json_is_integer(ver) || json_integer_value(ver) != GS_REPORT_SCHEMA)
    rc = GS_FAIL(e, GS_EPROTO, "%s: schema_version is not %d: not a report this bench reads",
                 path, GS_REPORT_SCHEMA);
  else if (!json_is_array(arr) || json_array_size(arr) == 0)
    rc = GS_FAIL(e, GS_EPROTO, "%s: \"runs\" is missing or empty", path);
  size_t n = rc == GS_OK ? json_array_size(arr) : 0;
  gs_summary *runs = n ? calloc(n, sizeof *runs) : NULL;
  if (n && !runs) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  for (size_t i = 0; rc == GS_OK && i < n; i++)
    if ((rc = gs_summary_from_json(json_array_get(arr, i), &runs[i], e)) < 0)
      gs_err_prefix(e, "%s: ", path);
  if (rc < 0) {
    json_decref(rep);
    gs_summaries_free(runs, n);
    return rc;
  }
  *doc = rep;
  *out = runs;
  *nout = n;
  return GS_OK;
}

int gs_report_redraw(const char *dir, FILE *out, gs_err *e) {
  json_t *rep;
  gs_summary *runs;
  size_t n;
  int rc = gs_report_load(dir, &rep, &runs, &n, e);
  if (rc < 0) return rc;
  if (rc == GS_OK) {
    for (size_t i = 0; i < n; i++) gs_summary_print(out, &runs[i]);
    const char *verdict = json_string_value(json_object_get(json_object_get(rep, "verdict"),
                                                            "text"));
    if (verdict) gs_verdict_print(out, verdict);
    gs_summary_print_comparison(out, runs, n, json_object_get(rep, "peers"),
                                json_string_value(json_object_get(rep, "oversubscribed_notice")));
    rc = gs_charts_write(dir, runs, n, json_object_get(rep, "peers"), e);
    if (rc == GS_OK) rc = draw_timelines(dir, runs, n, e);
  }
  if (rc == GS_OK) rc = gs_html_write(dir, rep, e);
  json_decref(rep);
  gs_summaries_free(runs, n);
  return rc;
}
