/* apply_order.c: a stale ps run's apply-order log (worker.h gs_apply_log):
 * rank 0's in-process server records each update through the backend's
 * hook, and rank 0 writes the log once training is over, atomically, as
 * runs/<id>/apply_order.txt beside the run's run.json, where
 * `bench --mode local --replay FILE` takes it. */
#include <stdio.h>
#include <stdlib.h>

#include "bench/files/files.h"
#include "bench/job/job.h"
#include "ps/ps.h"

/* The replay recomputes fp32 updates: runs with fp16 / bf16 traffic or a
 * loss scale write no log. */
bool gs_apply_order_wanted(const gs_opts *o, gs_mode mode, int rank, int world) {
  return rank == 0 && mode == GS_MODE_PS && world > 1 && gs_ps_sync_stale(&o->ps_sync) &&
         !o->dedicated && o->ps_servers <= 1 && !o->ps_server_hosts &&
         o->train.precision == GS_F32 && !o->train.dynamic_scale &&
         o->train.loss_scale == 1.0f;
}

int gs_apply_order_start(const gs_opts *o, const gs_train_opts *t, size_t nparams,
                         gs_apply_log *l, gs_err *e) {
  char sync[48];
  gs_ps_sync_text(&o->ps_sync, sync, sizeof sync);
  return gs_apply_log_init(l, t, 1, sync, nparams, e);
}

int gs_apply_order_write(const char *dir, const gs_run_info *info, gs_apply_log *l, int threads,
                         gs_err *e) {
  char id[512], below[600], path[4700];
  gs_run_id(info, id, sizeof id);
  snprintf(below, sizeof below, "runs/%s", id);
  GS_TRY(gs_mkdir_below(dir, below, e));
  snprintf(path, sizeof path, "%s/runs/%s/apply_order.txt", dir, id);
  l->threads = threads;
  size_t len = 0;
  char *text = gs_apply_log_text(l, &len, e);
  if (!text) return e->code;
  int rc = gs_write_atomic(path, text, len, e);
  free(text);
  return rc;
}
