/* apply_order.c: a stale ps run's apply-order log (worker.h gs_apply_log):
 * the process that holds a server records each update through the
 * server's hook (sync.h gs_applied_hook) and, once every rank said
 * goodbye, writes the log atomically as runs/<id>/apply_order.txt beside
 * the run's run.json, where `bench --mode local --replay FILE` takes it.
 * That process is rank 0 (its server thread), rank 0's dedicated server
 * (forked with the hook: it records and writes its own copy), or the
 * server's own process of --ps-server-hosts (ps_serve.c). K servers
 * (--ps-servers) write one log each, apply_order-shard<k>.txt, from the
 * rank or the process that runs server k. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/files/files.h"
#include "bench/job/job.h"
#include "ps/ps.h"

/* The replay recomputes fp32 updates: runs with fp16 / bf16 traffic or a
 * loss scale write no log. Backup workers over several servers write none
 * either: a server drops a part that another applied, and the replay would
 * not know the dropping server's version that gradient was computed on. */
bool gs_apply_order_wanted(const gs_opts *o, gs_mode mode, int world) {
  return mode == GS_MODE_PS && world > 1 && gs_ps_sync_stale(&o->ps_sync) &&
         !(o->ps_servers > 1 && o->ps_sync.backup_on) && o->train.precision == GS_F32 &&
         !o->train.dynamic_scale && o->train.loss_scale == 1.0f;
}

int gs_apply_order_shard(const gs_opts *o, int rank, int world, bool launched) {
  if (o->ps_server_hosts) return -1;
  int K = o->ps_servers > 1 ? o->ps_servers : 1;
  if (K == 1) return rank == 0 ? 0 : -1;
  /* K logs meet only in one run directory: our launcher's (another
   * launcher's ranks name theirs each, on their own machines) */
  return launched ? gs_ps_server_of(rank, world, K) : -1;
}

void gs_apply_order_name(int shard, int shards, char *buf, size_t cap) {
  if (shards > 1) snprintf(buf, cap, "apply_order-shard%d.txt", shard);
  else snprintf(buf, cap, "apply_order.txt");
}

static void record(void *ctx, const gs_applied *a) {
  gs_apply_order *ao = ctx;
  gs_apply_log_add(&ao->log, a);
}

int gs_apply_order_start(const gs_opts *o, const gs_train_opts *t, int shard, int threads,
                         const char *dir, const gs_run_info *info, gs_apply_order *ao,
                         gs_applied_hook *hook, gs_err *e) {
  memset(ao, 0, sizeof *ao);
  char id[512], sync[48];
  gs_run_id(info, id, sizeof id);
  int n = snprintf(ao->dir, sizeof ao->dir, "%s", dir);
  int m = snprintf(ao->below, sizeof ao->below, "runs/%s", id);
  if (n < 0 || (size_t)n >= sizeof ao->dir || m < 0 || (size_t)m >= sizeof ao->below)
    return GS_FAIL(e, GS_EINVAL, "%s/runs/%s: too long a path for the apply-order log", dir,
                   id);
  gs_ps_sync_text(&o->ps_sync, sync, sizeof sync);
  /* the parameters (a shard's range) come with the server's first update */
  GS_TRY(gs_apply_log_init(&ao->log, t, threads, sync, 0, e));
  ao->log.shard = shard;
  ao->log.shards = o->ps_servers > 1 ? o->ps_servers : 1;
  *hook = (gs_applied_hook){.fn = record, .end = gs_apply_order_end, .ctx = ao};
  return GS_OK;
}

int gs_apply_order_end(void *ctx, gs_err *e) {
  gs_apply_order *ao = ctx;
  char path[sizeof ao->dir + sizeof ao->below + 64], name[48];
  GS_TRY(gs_mkdir_below(ao->dir, ao->below, e));
  gs_apply_order_name(ao->log.shard, ao->log.shards, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s/%s", ao->dir, ao->below, name);
  size_t len = 0;
  char *text = gs_apply_log_text(&ao->log, &len, e);
  if (!text) return e->code;
  int rc = gs_write_atomic(path, text, len, e);
  free(text);
  return rc;
}

void gs_apply_order_free(gs_apply_order *ao) { gs_apply_log_free(&ao->log); }
