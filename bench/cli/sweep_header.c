/* sweep_header.c: what a training sweep says before its first run, so that a
 * reader knows what the figures after it are: where the ranks talk
 * (emulated hosts and their links, or loopback and why), what runs
 * (modes, worlds, steps, repetitions), and each model's bucket plan with
 * the tensors in each bucket: a bucket leaves only once backward has
 * written all of it, so the plan says how early communication can start.
 * Its link sentence (link_text.c) also heads report.json and report.html. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/job/job.h"
#include "bench/report/report.h"
#include "ps/ps.h"

/* "fc3.bias .. fc2.weight (4 tensors)" for the tensors of bucket b, in the
 * order backward writes them */
static void bucket_tensors(const gs_trainer *t, int b, char *buf, size_t cap) {
  int hi = -1, lo = -1, nt = gs_trainer_ntensors(t);
  for (int i = 0; i < nt; i++) {
    if (gs_trainer_tensor_bucket(t, i) == b) {
      if (lo < 0) lo = i;
      hi = i;
    }
  }
  if (lo < 0) snprintf(buf, cap, "part of a tensor");
  else if (hi == lo) snprintf(buf, cap, "%s", gs_trainer_tensor_name(t, hi));
  else if (hi == lo + 1)
    snprintf(buf, cap, "%s, %s", gs_trainer_tensor_name(t, hi), gs_trainer_tensor_name(t, lo));
  else
    snprintf(buf, cap, "%s .. %s (%d tensors)", gs_trainer_tensor_name(t, hi),
             gs_trainer_tensor_name(t, lo), hi - lo + 1);
}

/* one model's size and bucket plan at one bucket size */
static void plan_line(FILE *f, const gs_opts *o, const char *model, double bucket_mb) {
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(1, &e);
  if (!k) return;
  gs_train_opts to = o->train;
  to.model = model;
  to.batch = 1;
  to.synthetic_samples = 16; /* the tensors matter here, not the data */
  to.compute_ms = 0;
  to.compute_scale = 0; /* nor the measured time */
  to.load_params = NULL;
  to.bucket_mb = bucket_mb;
  to.rank = 0;
  to.world = 1;
  gs_trainer *t = NULL;
  if (gs_trainer_create(&to, k, &t, &e) == GS_OK) {
    gs_sync_config c;
    memset(&c, 0, sizeof c);
    gs_trainer_sync_config(t, &c);
    double MiB = 1024.0 * 1024.0, esz = (double)gs_dtype_size(c.wire);
    char rule[96];
    if (bucket_mb == 0) snprintf(rule, sizeof rule, "one per tensor");
    else if (o->train.first_bucket_mb == 0) snprintf(rule, sizeof rule, "each closes past %g MiB",
                                                     bucket_mb);
    else snprintf(rule, sizeof rule, "the first closes past %g MiB, the others past %g MiB",
                  o->train.first_bucket_mb, bucket_mb);
    fprintf(f, "model %s: %.3g M parameters, %.3g MiB of gradients (%s); buckets by DDP's rule "
            "(whole tensors from the last layer; %s):\n", model,
            (double)gs_trainer_nparams(t) / 1e6, (double)c.n * esz / MiB,
            gs_dtype_name(c.wire), rule);
    if (o->train.freeze)
      fprintf(f, "  frozen (--freeze %s): %.3g M parameters that never travel; %.3g M train\n",
              o->train.freeze, (double)(gs_trainer_nparams(t) - c.n) / 1e6, (double)c.n / 1e6);
    for (int b = 0; b < c.nbuckets; b++) {
      char names[256];
      bucket_tensors(t, b, names, sizeof names);
      fprintf(f, "  bucket %d: %.3g MiB, %s\n", b, (double)c.buckets[b].count * esz / MiB, names);
    }
    gs_trainer_destroy(t);
  }
  k->destroy(k);
}

void gs_sweep_header(FILE *f, const gs_opts *o) {
  char line[GS_LINK_SENTENCE_MAX];
  fprintf(f, "%s\n", gs_link_sentence(o, line, sizeof line));
  bool many = o->nmodes > 1, w1 = false;
  char modes[64] = "", worlds[256] = "";
  for (int i = 0; i < o->nmodes; i++)
    snprintf(modes + strlen(modes), sizeof modes - strlen(modes), "%s%s",
             i == 0 ? "" : i + 1 == o->nmodes ? " and " : ", ", gs_mode_name(o->modes[i]));
  for (int i = 0; i < o->nworlds; i++) {
    w1 |= o->worlds[i] == 1;
    snprintf(worlds + strlen(worlds), sizeof worlds - strlen(worlds), "%s%d", i ? ", " : "",
             o->worlds[i]);
  }
  /* what the summaries leave out, not what was asked: a warm-up as long as
   * the run would leave nothing, so the summaries keep every step */
  int64_t first = gs_first_measured(o->warmup, o->train.steps);
  char warm[96];
  if (first > 0)
    snprintf(warm, sizeof warm, "the first %lld left out (warm-up)", (long long)first);
  else if (o->warmup > 0)
    snprintf(warm, sizeof warm, "all of them measured (--warmup %d is not below --steps)",
             o->warmup);
  else
    snprintf(warm, sizeof warm, "all of them measured");
  fprintf(f, "runs: %s at world %s%s; batch %s%d per rank; %lld steps each, %s", modes, worlds,
          many && w1 ? " (world 1 once: one process, the baseline of every mode)" : "",
          o->nbatches > 1 ? "from " : "", o->batches[0], (long long)o->train.steps, warm);
  if (o->repeats > 1)
    fprintf(f, "; every configuration %d times, interleaved (medians, with the min-max)",
            o->repeats);
  fprintf(f, "\n");
  const gs_straggle *g = &o->train.straggle;
  if (g->nslow > 0 || g->jitter_cv > 0) {
    char slow[GS_SLOW_MAX * 8 + 32];
    gs_straggle_text(g, slow, sizeof slow);
    fprintf(f, "stragglers: ");
    if (g->nslow > 0)
      fprintf(f, "rank%s %.*s compute%s %gx as long (busy arithmetic, --slow %s)",
              g->nslow > 1 ? "s" : "", (int)strcspn(slow, ":"), slow, g->nslow > 1 ? "" : "s",
              g->factor, slow);
    if (g->jitter_cv > 0)
      fprintf(f, "%severy rank's compute x (1 + %g |z|) per step, seeded (--jitter)",
              g->nslow > 0 ? "; " : "", g->jitter_cv);
    fprintf(f, "\n");
  }
  if (o->ring_period > 1)
    fprintf(f, "ring: post-local SGD: every rank steps on its own gradient, parameters averaged "
            "after steps 0, %d, %d, ... (--ring-period %d)\n", o->ring_period,
            2 * o->ring_period, o->ring_period);
  if (gs_ps_sync_stale(&o->ps_sync)) {
    char sync[48];
    gs_ps_sync_text(&o->ps_sync, sync, sizeof sync);
    fprintf(f, "ps consistency: %s (%s); staleness of every applied gradient in steps.csv\n",
            sync, o->ps_sync.backup_on ? "each update takes the first world-B gradients"
            : o->ps_sync.model == GS_PS_SSP ? "a worker computes on parameters at most K "
            "updates old" : "each gradient is applied as it arrives");
  }
  for (int m = 0; m < o->nmodels; m++)
    for (int b = 0; b < o->nbucket_mbs; b++) plan_line(f, o, o->models[m], o->bucket_mbs[b]);
  bool ring = false, ps = false;
  for (int i = 0; i < o->nmodes; i++) {
    ring |= o->modes[i] == GS_MODE_ALLREDUCE;
    ps |= o->modes[i] == GS_MODE_PS;
  }
  if (o->train.compress.kind == GS_COMPRESS_POWERSGD)
    fprintf(f, "compress: powersgd:%d, PowerSGD with error feedback and warm start: matrices "
            "worth it travel as rank-%d P and Q (ps: the server sums them), vectors and small "
            "tensors as they are; buckets go uncompressed before step %lld\n", o->train.compress.rank, o->train.compress.rank,
            (long long)o->train.compress.start);
  else if (o->train.compress.kind == GS_COMPRESS_TOPK)
    fprintf(f, "compress: topk:%g, top-k with error feedback: each rank keeps the largest %g of "
            "its bucket's gradients plus residual (ties: the lower index) as index + value "
            "pairs, the rest waits for the next step; ps: pushed sparse, parameters come back "
            "dense; ring: every rank's pairs gathered round the ring and summed in rank order\n",
            o->train.compress.fraction, o->train.compress.fraction);
  else if (o->train.compress.kind != GS_COMPRESS_NONE)
    fprintf(f, "compress: %s: fp32 compute, gradients rounded to %s on the wire\n",
            gs_compress_spec(&o->train.compress, (char[32]){0}, 32),
            gs_compress_spec(&o->train.compress, (char[32]){0}, 32));
  if (ps && o->nps_spares > 0) {
    fprintf(f, "ps: BytePS' summation servers on %d", o->ps_spares[0]);
    for (int i = 1; i < o->nps_spares; i++)
      fprintf(f, "%s%d", i == o->nps_spares - 1 ? " and " : ", ", o->ps_spares[i]);
    char credit[64] = " (a credit of two partitions)";
    if (o->ps_credit_mb > 0)
      snprintf(credit, sizeof credit, " (a credit of %g MiB)", o->ps_credit_mb);
    char part[64] = "4 MiB or a 32nd of the gradients";
    if (o->ps_partition_mb > 0) snprintf(part, sizeof part, "%g MiB", o->ps_partition_mb);
    fprintf(f, " spare host(s) beside the workers' hosts, in partitions of at most %s, "
            "earliest layer first%s; the servers sum, every rank runs the optimizer\n", part,
            credit);
  }
  if (o->overlap < 0 && ring && ps && o->nps_spares > 0)
    fprintf(f, "overlap: ring (DDP) and BytePS' ps send each bucket (ps: each partition) once "
            "backward has written it\n");
  else if (o->overlap < 0 && ring && ps)
    fprintf(f, "overlap: ring sends each bucket once backward has written it (DDP), ps after "
            "backward (DataParallel)\n");
  else if (o->overlap < 0 && ps && o->nps_spares > 0)
    fprintf(f, "overlap: ps: on (BytePS: each partition leaves once backward has written it)\n");
  else if (ring || ps)
    fprintf(f, "overlap: %s\n", o->overlap == 1 ? "on: each bucket leaves once backward has "
            "written it" : o->overlap == 0 ? "off: buckets leave after backward"
            : ring ? "ring: on (DDP)" : "ps: off (DataParallel)");
}
