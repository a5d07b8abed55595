/* report.c: the sweep's report: report.json (schema-versioned: the
 * configuration, the environment, every run with its summary and per-rank
 * rows, scaling efficiency against the world-1 run of the same mode), the
 * side-by-side comparison on the terminal, and the merged trace. The SVG
 * charts are drawn by charts.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zmq.h>

#include <cblas.h>
#include <protobuf-c/protobuf-c.h>

#include "bench/report.h"
#include "bench/results.h"
#include "bench/charts.h"
#include "bench/version.h"

#define GS_REPORT_SCHEMA 1


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
  int zmaj, zmin, zpat;
  zmq_version(&zmaj, &zmin, &zpat);
  char zv[32];
  snprintf(zv, sizeof zv, "%d.%d.%d", zmaj, zmin, zpat);
  const char *blas = openblas_get_config(), *isa = "unknown";
  gs_isa_select(&isa, NULL);
  return json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "cpu", cpu, "cores",
                   (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "isa", isa, "hostname", host,
                   "kernel", u.release, "git_revision", GS_GIT_REVISION, "libraries", "zeromq", zv,
                   "openblas", blas ? blas : "", "protobuf_c", protobuf_c_version(), "jansson",
                   JANSSON_VERSION);
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
                        "s:b, s:s, s:f, s:b, s:f, s:f, s:b, s:f, s:s}",
                        "modes", modes, "worlds", worlds, "models", models, "batches", batches,
                        "bucket_mb", buckets, "strong_scaling", o->strong, "steps",
                        (json_int_t)t->steps, "warmup", o->warmup, "data", t->data, "lr",
                        (double)t->lr, "momentum", (double)t->momentum, "weight_decay",
                        (double)t->weight_decay, "seed", (json_int_t)t->seed, "shuffle",
                        t->shuffle, "drop_last", t->drop_last, "precision",
                        gs_dtype_name(t->precision), "loss_scale", (double)t->loss_scale,
                        "dynamic_loss_scale", t->dynamic_scale, "compute_ms", t->compute_ms,
                        "first_bucket_mb", t->first_bucket_mb, "ps_dedicated", o->dedicated,
                        "timeout_s", o->timeout_s, "device", o->device);
  json_object_set_new(c, "overlap", o->overlap < 0 ? json_string("mode default")
                                                   : json_boolean(o->overlap == 1));
  return c;
}

/* the world-1 run of the same mode and configuration, for scaling */
static json_t *baseline(json_t *runs, json_t *run, bool strong) {
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) {
    if (gs_jnum(r, "world") != 1 || strcmp(gs_jstr(r, "mode"), gs_jstr(run, "mode")) ||
        strcmp(gs_jstr(r, "model"), gs_jstr(run, "model")) || gs_jnum(r, "bucket_mb") != gs_jnum(run, "bucket_mb"))
      continue;
    if (strong ? gs_jnum(r, "global_batch") != gs_jnum(run, "global_batch")
               : gs_jnum(r, "batch") != gs_jnum(run, "batch"))
      continue;
    return r;
  }
  return NULL;
}

void gs_report_scaling(const gs_opts *o, json_t *runs) {
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) {
    json_t *b = baseline(runs, r, o->strong);
    double t1 = b ? gs_jnum(b, "throughput_samples_per_s") : 0;
    json_object_set_new(r, "scaling_efficiency",
                        t1 > 0 ? json_real(gs_jnum(r, "throughput_samples_per_s") /
                                           (gs_jnum(r, "world") * t1))
                               : json_null());
  }
}

json_t *gs_report_json(const gs_opts *o, json_t *runs, bool interrupted) {
  gs_report_scaling(o, runs);
  return json_pack("{s:i, s:s, s:b, s:o, s:o, s:O, s:s}", "schema_version", GS_REPORT_SCHEMA,
                   "generator", "gradsync bench", "interrupted", interrupted, "config",
                   configuration(o), "environment", environment(), "runs", runs, "metrics",
                   "see README.md#report-schema");
}

void gs_report_print_comparison(FILE *f, json_t *runs) {
  fprintf(f, "\n== ps vs ring ==\n");
  fprintf(f, "  %-5s %-24s %6s %5s %10s %9s %9s %8s %8s %14s\n", "mode", "model", "batch",
          "world", "samples/s", "step ms", "imbalance", "scaling", "master", "rank 0 B/step");
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) {
    json_t *se = json_object_get(r, "scaling_efficiency");
    char sc[16] = "-";
    if (json_is_number(se)) snprintf(sc, sizeof sc, "%.2f", json_number_value(se));
    json_t *r0 = json_array_get(json_object_get(r, "per_rank"), 0);
    fprintf(f, "  %-5s %-24.24s %6d %5d %10.1f %9.2f %9.2f %8s %7.1f%% %14.0f\n", gs_jstr(r, "mode"),
            gs_jstr(r, "model"), (int)gs_jnum(r, "batch"), (int)gs_jnum(r, "world"),
            gs_jnum(r, "throughput_samples_per_s"),
            1e3 * gs_jnum(r, "step_time_s_median"), gs_jnum(r, "imbalance"), sc,
            100 * gs_jnum(r, "master_traffic_share"), gs_jnum(r0, "bytes_sent") + gs_jnum(r0, "bytes_recv"));
  }
  /* ring / ps ratio for each world both ran */
  json_array_foreach(runs, i, r) {
    if (strcmp(gs_jstr(r, "mode"), "ring")) continue;
    size_t j;
    json_t *p;
    json_array_foreach(runs, j, p) {
      if (strcmp(gs_jstr(p, "mode"), "ps") || gs_jnum(p, "world") != gs_jnum(r, "world") ||
          strcmp(gs_jstr(p, "model"), gs_jstr(r, "model")) || gs_jnum(p, "batch") != gs_jnum(r, "batch") ||
          gs_jnum(p, "bucket_mb") != gs_jnum(r, "bucket_mb"))
        continue;
      double tp = gs_jnum(p, "throughput_samples_per_s");
      if (tp > 0)
        fprintf(f, "  world %d %s: ring is %.2fx the throughput of ps; ps imbalance %.2f vs "
                "ring %.2f\n", (int)gs_jnum(r, "world"), gs_jstr(r, "model"),
                gs_jnum(r, "throughput_samples_per_s") / tp, gs_jnum(p, "imbalance"), gs_jnum(r, "imbalance"));
    }
  }
}

/* Merge the runs' traces: each run's ranks become processes numbered
 * run*1000 + rank, named after the run, runs laid end to end in time. */
static int merge_traces(const char *dir, json_t *runs, gs_err *e) {
  json_t *all = json_array();
  size_t i;
  json_t *r;
  double offset_us = 0;
  json_array_foreach(runs, i, r) {
    char path[4600];
    snprintf(path, sizeof path, "%s/runs/%s/trace.json", dir, gs_jstr(r, "id"));
    json_t *t = json_load_file(path, 0, NULL);
    if (!t) continue;
    double end = 0;
    size_t k;
    json_t *ev;
    json_array_foreach(json_object_get(t, "traceEvents"), k, ev) {
      json_t *pid = json_object_get(ev, "pid");
      json_int_t rank = json_integer_value(pid);
      json_object_set_new(ev, "pid", json_integer((json_int_t)i * 1000 + rank));
      if (!strcmp(gs_jstr(ev, "ph"), "M") && !strcmp(gs_jstr(ev, "name"), "process_name")) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s w%d rank %d", gs_jstr(r, "mode"), (int)gs_jnum(r, "world"), (int)rank);
        json_object_set_new(json_object_get(ev, "args"), "name", json_string(nm));
      }
      if (!strcmp(gs_jstr(ev, "ph"), "M") && !strcmp(gs_jstr(ev, "name"), "process_sort_index"))
        json_object_set_new(json_object_get(ev, "args"), "sort_index",
                            json_integer((json_int_t)i * 1000 + rank));
      json_t *ts = json_object_get(ev, "ts");
      if (json_is_number(ts)) {
        double v = json_number_value(ts) + gs_jnum(ev, "dur");
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

int gs_report_write(const char *dir, const gs_opts *o, json_t *runs, bool interrupted,
                    gs_err *e) {
  json_t *rep = gs_report_json(o, runs, interrupted);
  char path[4200];
  snprintf(path, sizeof path, "%s/report.json", dir);
  int rc = gs_json_write_atomic(path, rep, e);
  json_decref(rep);
  if (rc < 0) return rc;
  GS_TRY(merge_traces(dir, runs, e));
  return gs_charts_write(dir, runs, e);
}
