/* compress_forecast.c: with --compress, the cost model's word on it before
 * the runs, and the measurement beside that word after them.
 *
 * Before: this machine is measured as --calibrate measures it (the model's
 * compute at the run's batch, the transport, summing, the optimizer; the
 * link as --link and --latency give it), the compression's own work is
 * timed on the model's real shapes (compress_measure.c), and for every
 * model, batch, bucket size, mode and world of the sweep the model predicts
 * the step uncompressed and compressed: "should pay" when the compressed
 * step is the shorter. None of it is inside a timed loop.
 * After: each run's measured median step beside its prediction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/costmodel/costmodel.h"
#include "bench/hosts/hosts.h"
#include "bench/report/report.h"

typedef struct forecast {
  const char *model;
  int batch, world;
  double bucket_mb;
  gs_mode mode;
  gs_cm_compress_verdict v;
} forecast;

struct gs_compress_forecast {
  forecast *f;
  int n, cap;
  char spec[32];
};

static const char *human(double bytes, char *buf, size_t cap) {
  if (bytes >= 1e6) snprintf(buf, cap, "%.3g MB", bytes / 1e6);
  else if (bytes >= 1e3) snprintf(buf, cap, "%.3g kB", bytes / 1e3);
  else snprintf(buf, cap, "%.0f B", bytes);
  return buf;
}

static const char *verdict(const gs_cm_compress_verdict *v) {
  return v->even ? "about even (within 5%)" : v->pays ? "should pay" : "should not pay";
}

/* the link of a world as the sweep builds it: emulated hosts, or loopback */
static int hosts_of(const gs_opts *o, int world) {
  if (!o->link_bps) return 1;
  return o->hosts > 0 ? o->hosts : world;
}

static void print_one(FILE *f, const gs_opts *o, const char *spec, const forecast *x) {
  const gs_cm_compress_verdict *v = &x->v;
  char b1[32], b2[32], where[96];
  int K = hosts_of(o, x->world);
  if (K > 1)
    snprintf(where, sizeof where, "%d hosts, %.4g Mbit/s links", K, (double)o->link_bps / 1e6);
  else
    snprintf(where, sizeof where, "loopback");
  fprintf(f, "  %s world %d, %s, buckets %g MiB: %s on these links: step %.2f ms uncompressed, "
          "%.2f ms with %s (model)\n", gs_mode_name(x->mode), x->world, where, x->bucket_mb,
          verdict(v), v->plain.step_s * 1e3, v->comp.step_s * 1e3,
          spec);
  fprintf(f, "    gradient bytes per step %s -> %s (%.3gx less); compressing %.2f ms per step "
          "(measured here); exposed communication %.2f -> %.2f ms; bottleneck %s -> %s\n",
          human(v->plain.grad_bytes, b1, sizeof b1), human(v->comp.grad_bytes, b2, sizeof b2),
          v->plain.grad_bytes / v->comp.grad_bytes, v->compute_s * 1e3, v->plain.exposed_s * 1e3,
          v->comp.exposed_s * 1e3, gs_cm_bottleneck_name(v->plain.bottleneck),
          gs_cm_bottleneck_name(v->comp.bottleneck));
}

static int add(gs_compress_forecast *fc, const forecast *x) {
  if (fc->n == fc->cap) {
    int cap = fc->cap ? 2 * fc->cap : 8;
    forecast *p = realloc(fc->f, (size_t)cap * sizeof *p);
    if (!p) return -1;
    fc->f = p;
    fc->cap = cap;
  }
  fc->f[fc->n++] = *x;
  return 0;
}

/* one model at one batch: the machine once, then every bucket, mode, world */
static int one_model(FILE *f, const gs_opts *o, const char *model, int batch,
                     gs_compress_forecast *fc, gs_err *e) {
  int threads = o->threads > 0 ? o->threads : 1;
  gs_cm_measure_cfg mc = {.train = o->train, .threads = threads};
  mc.train.model = model;
  mc.train.batch = batch;
  gs_compress_default(&mc.train.compress);
  gs_cm_calib cal;
  gs_calib_notes notes;
  GS_TRY(gs_calibrate_measure(&mc, &cal, &notes, e));
  gs_cm_machine m;
  gs_cm_calib_machine(&cal, &m);
  m.link_Bps = o->link_bps ? gs_hosts_counted_Bps(o->link_bps) : cal.local_Bps;
  m.link_latency_s = o->link_bps ? o->latency_s : 0;
  for (int ib = 0; ib < o->nbucket_mbs; ib++) {
    gs_train_opts to = o->train;
    to.model = model;
    to.batch = batch;
    to.bucket_mb = o->bucket_mbs[ib];
    gs_cm_compressed c;
    GS_TRY(gs_cm_compress_measure(&to, threads, 3, &c, e));
    int rc = GS_OK;
    /* buckets ready as the calibration timed each tensor in backward */
    double *ready = malloc((size_t)c.plain.nbuckets * sizeof *ready);
    gs_err re = {0};
    if (ready && (cal.nready < 1 ||
                  gs_cm_plan_ready(&c.plain, cal.ready, cal.nready, ready, &re) < 0)) {
      free(ready);
      ready = NULL;
    }
    for (int id = 0; id < o->nmodes && rc == GS_OK; id++)
      for (int iw = 0; iw < o->nworlds && rc == GS_OK; iw++) {
        int world = o->worlds[iw];
        if (o->modes[id] == GS_MODE_SINGLE || world < 2) continue;
        bool ring = o->modes[id] == GS_MODE_ALLREDUCE;
        gs_cm_job j = {.mode = ring ? GS_CM_RING : GS_CM_PS, .world = world,
                       .hosts = hosts_of(o, world), .plan = &c.plain, .ready = ready,
                       .batch = batch,
                       .fwd_s = cal.fwd_s, .bwd_s = cal.bwd_s,
                       .overlap = o->overlap < 0 ? ring : o->overlap == 1};
        forecast x = {.model = model, .batch = batch, .world = world,
                      .bucket_mb = o->bucket_mbs[ib], .mode = o->modes[id]};
        gs_err pe = {0};
        if (gs_cm_compress_predict(&m, &j, &c, &x.v, &pe) < 0) {
          fprintf(f, "  %s world %d: no prediction: %s\n", gs_mode_name(x.mode), world, pe.msg);
          continue;
        }
        print_one(f, o, fc->spec, &x);
        if (add(fc, &x) < 0) rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
      }
    free(ready);
    gs_cm_compressed_free(&c);
    GS_TRY(rc);
  }
  return GS_OK;
}

gs_compress_forecast *gs_compress_forecast_print(FILE *f, const gs_opts *o) {
  /* the machine is measured on the CPU: no word on a GPU's step */
  if (o->train.compress.kind == GS_COMPRESS_NONE || (o->device && !strcmp(o->device, "cuda")))
    return NULL;
  gs_compress_forecast *fc = calloc(1, sizeof *fc);
  if (!fc) return NULL;
  gs_compress_spec(&o->train.compress, fc->spec, sizeof fc->spec);
  fprintf(f, "cost model of --compress %s (this machine measured first, outside the runs; "
          "compression from step %lld on):\n", fc->spec,
          o->train.compress.kind == GS_COMPRESS_POWERSGD ? (long long)o->train.compress.start
                                                         : 0LL);
  fflush(f);
  for (int im = 0; im < o->nmodels; im++)
    for (int ibt = 0; ibt < o->nbatches; ibt++) {
      gs_err e = {0};
      if (one_model(f, o, o->models[im], o->batches[ibt], fc, &e) < 0)
        fprintf(f, "  %s: no prediction: %s\n", o->models[im], e.msg);
    }
  fflush(f);
  return fc;
}

void gs_compress_forecast_beside(FILE *f, const gs_compress_forecast *fc, const gs_summary *runs,
                                 size_t n) {
  if (!fc || !fc->n) return;
  fprintf(f, "\n--compress %s, predicted before the runs and measured (median step):\n",
          fc->spec);
  for (int i = 0; i < fc->n; i++) {
    const forecast *x = &fc->f[i];
    for (size_t r = 0; r < n; r++) {
      const gs_summary *s = &runs[r];
      if (s->mode != x->mode || s->world != x->world || s->batch != x->batch ||
          s->bucket_mb != x->bucket_mb || strcmp(s->model, x->model))
        continue;
      fprintf(f, "  %s world %d, %s, buckets %g MiB: model %.2f ms (%s; uncompressed %.2f ms), "
              "measured %.2f ms (%.2fx the model)\n", gs_mode_name(x->mode), x->world, x->model,
              x->bucket_mb, x->v.comp.step_s * 1e3, verdict(&x->v),
              x->v.plain.step_s * 1e3, s->step_time_s_median * 1e3,
              s->step_time_s_median / x->v.comp.step_s);
    }
  }
}

void gs_compress_forecast_free(gs_compress_forecast *fc) {
  if (!fc) return;
  free(fc->f);
  free(fc);
}
