/* costmodel_cmd.c: bench --calibrate and bench --project, the cost model's two
 * commands (cli.h): which flags they take, their checks, and their mains.
 * Neither starts a rank: --calibrate measures this machine (the cost
 * model's measure.c, given a plain configuration made from the flags) and
 * writes the calibration record; --project feeds a calibration (a file, or
 * a fresh one of this machine when none is given), the network of --link
 * and --latency and the real bucket plan of --model to the cost model, and
 * writes its table, projection.json and projection.svg. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/cli/cli.h"
#include "bench/costmodel/costmodel.h"
#include "bench/files/files.h"
#include "bench/job/job.h"
#include "bench/report/report.h"
#include "bench/version.h"

/* ---- flags ---- */

static bool among(const char *name, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(name, *list)) return true;
  return false;
}

static const char *const COMMON[] = {"calibrate", "project", "model", "batch", "precision",
                                     "link", "latency", "out", "quiet", "help", NULL};
/* what only measuring compute uses */
static const char *const MEASURE[] = {"compute-ms", "compute-scale", "threads", "data", NULL};
static const char *const PROJECT[] = {"world", "bucket-mb", "first-bucket-mb", "overlap",
                                      "no-overlap", "hosts-per", "calibration",
                                      "ps-local-reduce", "no-ps-local-reduce",
                                      "step-compute-ms", "compute-scale", "ready-by",
                                      "ps-spare-hosts", "ps-spare-share", "ps-partition-mb", NULL};

const char *gs_costmodel_flag_refused(const gs_opts *o, const char *name) {
  if (among(name, COMMON)) return NULL;
  if (!strcmp(name, "hosts"))
    return o->calibrate ? NULL
                        : "emulates hosts for runs; --project starts none (a projection takes "
                          "--hosts-per N, its ranks per host)";
  if (o->project) {
    if (among(name, PROJECT)) return NULL;
    if (among(name, MEASURE))
      return o->calibration ? "is for calibrating, and --calibration gives the calibration: "
                              "drop one"
                            : NULL;
    return "does nothing with --project (it takes --world, --model, --batch, --bucket-mb, "
           "--first-bucket-mb, --precision, --overlap, --no-overlap, --link, --latency, "
           "--hosts-per, --calibration, --step-compute-ms, --compute-scale, --ready-by, "
           "--ps-spare-hosts, --ps-spare-share, --ps-partition-mb, --out, --quiet; without "
           "--calibration also --threads, --compute-ms, --data)";
  }
  if (among(name, MEASURE)) return NULL;
  return "does nothing with --calibrate (it takes --model, --batch, --precision, --threads, "
         "--compute-ms, --compute-scale, --data, --hosts 2, --link, --latency, --out, --quiet)";
}

int gs_costmodel_resolve(gs_opts *o, gs_err *e) {
  const char *cmd = o->project ? "--project" : "--calibrate";
  if (o->calibrate && o->project)
    return GS_FAIL(e, GS_EINVAL, "--calibrate and --project: give one (--project without "
                   "--calibration calibrates this machine first)");
  if (o->nmodels > 1) return GS_FAIL(e, GS_EINVAL, "--model: %s takes one model", cmd);
  if (o->nbatches > 1) return GS_FAIL(e, GS_EINVAL, "--batch: %s takes one batch", cmd);
  if (o->nbucket_mbs > 1) return GS_FAIL(e, GS_EINVAL, "--bucket-mb: %s takes one size", cmd);
  if (o->link_arg) {
    GS_TRY(gs_hosts_parse_rate(o->link_arg, &o->link_bps, e));
    if (o->link_bps < 8000) return GS_FAIL(e, GS_EINVAL, "--link %s: at least 8kbit", o->link_arg);
  }
  if (o->latency_arg) GS_TRY(gs_cluster_parse_delay(o->latency_arg, &o->latency_s, e));
  if (o->calibrate && o->latency_arg && !o->link_arg)
    return GS_FAIL(e, GS_EINVAL, "--latency needs --link RATE in a calibration (its what-if "
                   "network has both)");
  if (o->calibrate && o->hosts && (o->hosts != 2 || !o->link_arg))
    return GS_FAIL(e, GS_EINVAL, "--calibrate --hosts measures the link between two emulated "
                   "hosts: give --hosts 2 --link RATE (e.g. --hosts 2 --link 1gbit)");
  if (!o->project) return GS_OK;
  if (strcmp(o->ready_by, "layers") && strcmp(o->ready_by, "bytes"))
    return GS_FAIL(e, GS_EINVAL, "--ready-by %s: give layers (each tensor when backward has it) "
                   "or bytes (in proportion to them)", o->ready_by);
  if (o->train.compute_scale > 0 && o->step_compute_ms > 0)
    return GS_FAIL(e, GS_EINVAL, "--compute-scale and --step-compute-ms both state the compute: "
                   "give one");
  if (!o->world_given)
    return GS_FAIL(e, GS_EINVAL, "--project needs --world, the worlds to predict (e.g. --world "
                   "8,64,512,4096)");
  if (!o->calibration && !o->link_arg)
    return GS_FAIL(e, GS_EINVAL, "--project needs the network between hosts: give --link RATE "
                   "(e.g. 100gbit) and --latency D (e.g. 5us), or a --calibration with a \"link\" "
                   "part");
  for (int i = 0; i < o->nworlds; i++)
    if (o->worlds[i] > o->hosts_per && o->worlds[i] % o->hosts_per)
      return GS_FAIL(e, GS_EINVAL, "--world %d is not a multiple of --hosts-per %d (every host "
                     "holds the same number of ranks)", o->worlds[i], o->hosts_per);
  return GS_OK;
}

/* ---- --calibrate ---- */

/* What the flags ask the measurement of this machine: --model at --batch
 * and --precision, --threads BLAS threads (1 by default); --link /
 * --latency become the "link" part, as given, or with --hosts 2 measured
 * between two emulated hosts at that rate. */
static gs_cm_measure_cfg measure_cfg(const gs_opts *o) {
  gs_cm_measure_cfg m = {.train = o->train, .threads = o->threads, .measure_link = o->hosts > 0,
                         .link_bps = o->link_bps, .latency_s = o->latency_s};
  m.train.model = o->models[0];
  m.train.batch = o->batches[0];
  return m;
}

static void stamp(char *buf, size_t cap, const char *fmt) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(buf, cap, fmt, &tm);
}

/* the message of a failed measurement: 2 when it names a flag */
static int measure_failed(const gs_err *e) {
  fprintf(stderr, "bench: %s\n", e->msg);
  return e->code == GS_EINVAL ? 2 : 1;
}

int gs_calibrate_main(const gs_opts *o) {
  gs_err e = {0};
  char path[512];
  if (o->out) snprintf(path, sizeof path, "%s", o->out);
  else stamp(path, sizeof path, "results/calibration-%Y%m%d-%H%M%S.json");
  if (!o->quiet)
    fprintf(stderr, "bench: calibrating this machine for %s at batch %d (a few seconds)\n",
            o->models[0], o->batches[0]);
  gs_cm_calib c;
  gs_calib_notes n;
  gs_cm_measure_cfg mc = measure_cfg(o);
  if (gs_calibrate_measure(&mc, &c, &n, &e) < 0) return measure_failed(&e);
  snprintf(c.comment, sizeof c.comment, "bench --calibrate, gradsync %s (git %s)", GS_VERSION,
           GS_GIT_REVISION);
  gs_calibrate_print(stdout, &c, &n);
  char dir[512];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  if ((slash && *dir && gs_mkdirs(dir, &e) < 0) || gs_cm_calib_write(path, &c, &e) < 0) {
    fprintf(stderr, "bench: --out %s: %s\n", path, e.msg);
    return 1;
  }
  printf("wrote %s (bench --project --calibration %s uses it; edit it by hand for other "
         "hardware, e.g. a GPU's compute per sample: docs/model.md)\n", path, path);
  return 0;
}

/* ---- --project ---- */

/* the calibration of --calibration, or a fresh one of this machine (kept
 * beside the projection); 0, or the exit status */
static int calibration(const gs_opts *o, const char *dir, gs_cm_calib *c) {
  gs_err e = {0};
  if (o->calibration) {
    if (gs_cm_calib_read(o->calibration, c, &e) < 0) {
      fprintf(stderr, "bench: --calibration %s: %s\n", o->calibration, e.msg);
      return 2;
    }
    return 0;
  }
  if (!o->quiet)
    fprintf(stderr, "bench: no --calibration: calibrating this machine first (bench "
            "--calibrate writes one to reuse)\n");
  gs_calib_notes n;
  gs_cm_measure_cfg mc = measure_cfg(o);
  mc.link_bps = 0; /* the network is --link's, set below */
  if (gs_calibrate_measure(&mc, c, &n, &e) < 0) return measure_failed(&e);
  char path[600];
  snprintf(path, sizeof path, "%s/calibration.json", dir);
  if (gs_mkdirs(dir, &e) < 0 || gs_cm_calib_write(path, c, &e) < 0) {
    fprintf(stderr, "bench: --out %s: %s\n", dir, e.msg);
    return 1;
  }
  if (!o->quiet) gs_calibrate_print(stderr, c, &n);
  return 0;
}

/* Per bucket, when backward has it ready (NULL, with *bucket_ready NULL:
 * in proportion to bytes, --ready-by bytes). Per tensor, the first of: a
 * profile's measured backward per layer (a calibration's timing of its
 * emulation would only copy it, with noise); the calibration's timing of
 * this model; a profile's work per layer; a timing of the model on this
 * machine now. 0, or the exit status. */
static int readiness(const gs_opts *o, const gs_cm_plan *plan, const gs_cm_calib *c,
                     double **bucket_ready, char *why, size_t cap) {
  gs_err e = {0};
  *bucket_ready = NULL;
  if (!strcmp(o->ready_by, "bytes")) {
    snprintf(why, cap, "in proportion to bytes (--ready-by bytes)");
    return 0;
  }
  double *tensor = malloc((size_t)plan->ntensors * sizeof *tensor);
  *bucket_ready = malloc((size_t)plan->nbuckets * sizeof **bucket_ready);
  if (!tensor || !*bucket_ready) {
    free(tensor);
    fprintf(stderr, "bench: --project: out of memory\n");
    return 1;
  }
  int rc = GS_OK;
  if (plan->tensor_bwd_s) {
    snprintf(why, cap, "per layer, as the profile of %s measured its backward", o->models[0]);
    rc = gs_cm_ready_from_macs(plan->tensor_bwd_s, plan->ntensors, tensor, &e);
  } else if (c->nready > 0 && !strcmp(c->model, o->models[0])) {
    snprintf(why, cap, "per tensor, as the calibration timed %s's backward", c->model);
    memcpy(tensor, c->ready, (size_t)c->nready * sizeof *tensor);
    rc = c->nready == plan->ntensors ? GS_OK
                                     : GS_FAIL(&e, GS_EINVAL, "the calibration timed %d tensors "
                                               "of %s, which has %d: calibrate it again",
                                               c->nready, c->model, plan->ntensors);
  } else if (plan->tensor_macs) {
    snprintf(why, cap, "per layer, from %s's multiply-adds", o->models[0]);
    rc = gs_cm_ready_from_macs(plan->tensor_macs, plan->ntensors, tensor, &e);
  } else {
    snprintf(why, cap, "per tensor, as %s's backward timed on this machine now", o->models[0]);
    if (!o->quiet)
      fprintf(stderr, "bench: timing %s's backward per tensor on this machine (the calibration "
              "has no readiness for it)\n", o->models[0]);
    gs_cm_calib own;
    gs_calib_notes n;
    gs_cm_measure_cfg mc = measure_cfg(o);
    memset(&own, 0, sizeof own);
    rc = gs_calibrate_compute(&mc, &own, &n, &e);
    if (rc == GS_OK && own.nready != plan->ntensors)
      rc = GS_FAIL(&e, GS_EIO, "timed %d tensors of %s, which has %d", own.nready, o->models[0],
                   plan->ntensors);
    if (rc == GS_OK) memcpy(tensor, own.ready, (size_t)own.nready * sizeof *tensor);
  }
  if (rc == GS_OK)
    rc = gs_cm_plan_ready(plan, tensor, plan->ntensors, *bucket_ready, &e);
  free(tensor);
  if (rc == GS_OK) return 0;
  fprintf(stderr, "bench: --project, when gradients are ready: %s (or give --ready-by bytes)\n",
          e.msg);
  free(*bucket_ready);
  *bucket_ready = NULL;
  return e.code == GS_EINVAL ? 2 : 1;
}

/* --ps-spare-hosts with --project: BytePS up to the list's most spare
 * hosts (-1: not asked) */
static int spare_max(const gs_opts *o) {
  int k = -1;
  for (int i = 0; i < o->nps_spares; i++) k = o->ps_spares[i] > k ? o->ps_spares[i] : k;
  return k;
}

int gs_project_main(const gs_opts *o) {
  gs_err e = {0};
  char dir[512];
  if (o->out) snprintf(dir, sizeof dir, "%s", o->out);
  else stamp(dir, sizeof dir, "results/%Y%m%d-%H%M%S-projection");
  const char *model = o->models[0];
  gs_dtype wire = o->train.precision;
  gs_cm_plan plan;
  if (gs_cm_plan_model(model, wire, o->train.first_bucket_mb, o->bucket_mbs[0], &plan, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg); /* it names --model */
    return 2;
  }
  gs_cm_calib c;
  int rc = calibration(o, dir, &c);
  const char *src = o->calibration ? o->calibration : "a fresh calibration of this machine";
  double pf = plan.prof_fwd_s, pb = plan.prof_bwd_s; /* a profile's, per sample */
  if (!rc && o->train.compute_scale > 0 && !(pf + pb > 0)) {
    fprintf(stderr, "bench: --compute-scale scales a profile's measured compute, and --model %s "
            "is not a profile (give --step-compute-ms MS)\n", model);
    rc = 2;
  } else if (!rc && o->train.compute_scale > 0) {
    c.fwd_s = pf * o->train.compute_scale;
    c.bwd_s = pb * o->train.compute_scale;
  } else if (!rc && o->step_compute_ms > 0) {
    /* another machine's compute, split as the profile measured it; else a
       third forward, two thirds backward */
    double fwd_share = pf + pb > 0 ? pf / (pf + pb) : 1.0 / 3;
    c.fwd_s = o->step_compute_ms * 1e-3 * fwd_share / o->batches[0];
    c.bwd_s = o->step_compute_ms * 1e-3 * (1 - fwd_share) / o->batches[0];
  } else if (!rc && (strcmp(c.model, model) || strcmp(c.precision, gs_dtype_name(wire)))) {
    fprintf(stderr, "bench: --calibration %s measured the compute of %s in %s, and this "
            "projection is of --model %s in --precision %s: give those, run bench "
            "--calibrate --model %s --precision %s, or state the compute with "
            "--step-compute-ms MS\n", src, c.model, c.precision, model, gs_dtype_name(wire),
            model, gs_dtype_name(wire));
    rc = 2;
  }
  double *ready = NULL;
  char ready_by[128] = "";
  if (!rc) rc = readiness(o, &plan, &c, &ready, ready_by, sizeof ready_by);
  gs_cm_machine m;
  if (!rc) {
    gs_cm_calib_machine(&c, &m);
    if (o->link_bps) m.link_Bps = (double)o->link_bps / 8;
    if (o->latency_arg) m.link_latency_s = o->latency_s;
    if (!o->link_bps && !c.has_link) {
      fprintf(stderr, "bench: --project needs the network between hosts: give --link RATE "
              "(e.g. 100gbit) and --latency D (e.g. 5us), or a --calibration with a \"link\" "
              "part\n");
      rc = 2;
    }
  }
  gs_cm_projection p = {0};
  if (!rc) {
    gs_cm_proj_in in = {.model = model, .plan = &plan, .worlds = o->worlds,
                        .nworlds = o->nworlds, .ranks_per_host = o->hosts_per,
                        .batch = o->batches[0], .fwd_s = c.fwd_s, .bwd_s = c.bwd_s,
                        .overlap = o->overlap, .barrier = wire != GS_F32,
                        .ready = ready, .ready_by = ready_by,
                        /* as training does on hosts of several ranks; off: the flat
                           modes (--no-ps-local-reduce) */
                        .host_reduce = o->hosts_per > 1 && o->ps_hostagg != 0,
                        /* --ps-spare-hosts: BytePS at k = 0 .. the list's largest */
                        .spare_max = spare_max(o), .spare_share = o->ps_spare_share,
                        .partition_bytes = (size_t)(o->ps_partition_mb * (1 << 20))};
    if (gs_cm_project(&m, &in, &p, &e) < 0) {
      fprintf(stderr, "bench: %s\n", e.msg);
      rc = 2;
    }
  }
  gs_cm_plan_free(&plan);
  free(ready);
  if (rc) return rc;
  printf("calibration: %s (%s)%s\n", src, c.transport,
         o->train.compute_scale > 0 ? ", compute from the profile x --compute-scale"
         : o->step_compute_ms > 0 ? ", compute from --step-compute-ms" : "");
  gs_cm_print_table(stdout, &p);
  gs_cm_print_spare(stdout, &p);
  json_t *j = gs_cm_projection_json(&p);
  char path[600];
  snprintf(path, sizeof path, "%s/projection.json", dir);
  json_object_set_new(j, "calibration", json_string(src));
  json_object_set_new(j, "calibration_record", gs_cm_calib_json(&c));
  if (o->step_compute_ms > 0)
    json_object_set_new(j, "step_compute_ms", json_real(o->step_compute_ms));
  if (o->train.compute_scale > 0)
    json_object_set_new(j, "compute_scale", json_real(o->train.compute_scale));
  if (o->command_line) json_object_set_new(j, "command", json_string(o->command_line));
  if (gs_mkdirs(dir, &e) < 0 || gs_json_write_atomic(path, j, &e) < 0 ||
      gs_charts_projection(dir, &p, p.nrows / o->nworlds, &e) < 0 ||
      (p.nspare_worlds > 0 && gs_charts_spare_projection(dir, &p, &e) < 0)) {
    fprintf(stderr, "bench: --out %s: %s\n", dir, e.msg);
    rc = 1;
  } else {
    printf("wrote %s/projection.json and %s/projection.svg%s%s\n", dir, dir,
           p.nspare_worlds > 0 ? " and spare.svg" : "",
           o->calibration ? "" : ", beside calibration.json (this machine's)");
  }
  json_decref(j);
  gs_cm_projection_free(&p);
  return rc;
}
