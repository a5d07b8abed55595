/* run.c: one run of the sweep (a mode at a world, with the model, batch and
 * bucket of o->train) as the job hands it on: the settings every rank of
 * it must share (the rendezvous compares them), and what the run was for
 * its report. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/job/job.h"
#include "ps/ps.h"

size_t gs_run_settings(const gs_opts *o, gs_mode mode, int world, char *buf, size_t cap) {
  const gs_train_opts *t = &o->train;
  char slow[GS_SLOW_MAX * 8 + 32];
  gs_straggle_text(&t->straggle, slow, sizeof slow);
  char ps_sync[48];
  gs_ps_sync_text(&o->ps_sync, ps_sync, sizeof ps_sync);
  int n = snprintf(buf, cap,
                   "mode=%s\nworld=%d\nmodel=%s\ndata=%s\nbatch=%d\nsteps=%lld\nlr=%.9g\n"
                   "momentum=%.9g\nweight_decay=%.9g\nseed=%llu\nshuffle=%d\ndrop_last=%d\n"
                   "precision=%s\nloss_scale=%.9g\ndynamic_scale=%d\ncompute_ms=%.9g\n"
                   "compute_scale=%.9g\nbucket_mb=%.9g\nfirst_bucket_mb=%.9g\noverlap=%d\n"
                   "ps_dedicated=%d\nps_servers=%d\nps_server_hosts=%d\ndevice=%s\nsamples=%lld\n"
                   "load_params=%s\nverify=%d\nslow=%s\njitter=%.9g\nps_sync=%s\n"
                   "ring_period=%d\ncompress=%s\npowersgd_start=%lld\nfreeze=%s\nps_spare=%d\n"
                   "ps_partition_mb=%.9g\nps_spare_share=%.9g\nps_credit_mb=%.9g\n",
                   gs_mode_name(mode), world, t->model, t->data, t->batch, (long long)t->steps,
                   t->lr, t->momentum, t->weight_decay, (unsigned long long)t->seed, t->shuffle,
                   t->drop_last, gs_dtype_name(t->precision), t->loss_scale, t->dynamic_scale,
                   t->compute_ms, t->compute_scale, t->bucket_mb, t->first_bucket_mb, o->overlap,
                   o->dedicated,
                   mode == GS_MODE_PS ? o->ps_servers : 1,
                   mode == GS_MODE_PS && o->ps_server_hosts, o->device,
                   (long long)t->synthetic_samples,
                   t->load_params ? t->load_params : "", o->verify, slow, t->straggle.jitter_cv,
                   mode == GS_MODE_PS ? ps_sync : "bsp",
                   mode == GS_MODE_ALLREDUCE ? o->ring_period : 1,
                   gs_compress_spec(&t->compress, (char[32]){0}, 32), (long long)t->compress.start,
                   t->freeze ? t->freeze : "",
                   mode == GS_MODE_PS ? o->ps_spare : -1, o->ps_partition_mb, o->ps_spare_share,
                   o->ps_credit_mb);
  return n < 0 ? 0 : (size_t)n;
}

gs_run_info gs_run_info_of(const gs_opts *o, gs_mode mode, int world) {
  const gs_train_opts *t = &o->train;
  return (gs_run_info){
      .mode = mode, .world = world, .model = t->model, .data = t->data, .batch = t->batch,
      .bucket_mb = t->bucket_mb, .first_bucket_mb = t->first_bucket_mb,
      .precision = t->precision, .wire = t->precision, .warmup = o->warmup,
      .dedicated = o->dedicated && mode == GS_MODE_PS,
      /* world 1 runs the local step, without a server */
      .ps_servers = mode == GS_MODE_PS && world > 1 && o->ps_servers > 1 ? o->ps_servers : 1,
      .ps_server_hosts = mode == GS_MODE_PS && world > 1 && o->ps_server_hosts,
      .ps_summation = mode == GS_MODE_PS && world > 1 && o->ps_spare >= 0,
      .ps_spare = mode == GS_MODE_PS && world > 1 ? o->ps_spare : -1,
      .ps_partition_mb = mode == GS_MODE_PS && world > 1 && o->ps_spare >= 0
                             ? o->ps_partition_mb : 0,  /* 0: the ps' rule (summary.c) */
      .ps_spare_share = o->ps_spare_share,
      .accuracy = NAN, .eval_loss = NAN, .heldout_accuracy = NAN, .heldout_loss = NAN,
      .hosts = gs_cluster_hosts(o, mode, world), .link_bps = (double)o->link_bps,
      .link_host = &o->link_host,
      .latency_s = o->latency_s, .delay = "none",
      .repeat = o->repeat > 0 ? o->repeat : 1, .repeats = o->repeats > 0 ? o->repeats : 1,
      .straggle = t->straggle,
      .ps_sync = mode == GS_MODE_PS && world > 1 ? o->ps_sync : (gs_ps_sync){0},
      .ring_period = mode == GS_MODE_ALLREDUCE && world > 1 ? o->ring_period : 0,
      .compress = t->compress};
}

void gs_run_info_repeat(gs_run_info *info, bool launched) {
  const char *rep = launched ? getenv("GS_REPEAT") : NULL;
  const char *reps = launched ? getenv("GS_REPEATS") : NULL;
  info->repeats = reps ? atoi(reps) : 1;
  info->repeat = rep ? atoi(rep) : 1;
  if (info->repeats < 1) info->repeats = 1;
  if (info->repeat < 1 || info->repeat > info->repeats) info->repeat = 1;
}
