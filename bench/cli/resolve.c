/* resolve.c: what bench's flags mean together, once every one is read:
 * the checks and defaults that need several of them (local means world 1,
 * --save-params means one run, the loss scale of a precision, the
 * collective's, the emulated hosts' and the model commands' own rules), and
 * the settings string every rank of a job compares with rank 0's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce/allreduce.h"
#include "bench/cli/cli.h"
#include "bench/coll/coll.h"
#include "bench/job/job.h"
#include "bench/report/report.h"
#include "ps/ps.h"

/* --ps-servers K > 1: the sharded ps' numbers and placements (what it runs
 * is the table's, backends.c). */
static int resolve_ps_servers(const gs_opts *o, gs_err *e) {
  int K = o->ps_servers;
  if (o->ps_server_hosts) {
    if (o->nnodes > 0)
      return GS_FAIL(e, GS_EINVAL, "--ps-server-hosts: bench's launcher on one machine starts "
                     "the servers; --nnodes cannot");
  } else if (K <= 1) {
    return GS_OK;
  }
  char named[48]; /* what the messages name */
  if (o->ps_server_hosts) snprintf(named, sizeof named, "--ps-servers %d --ps-server-hosts", K);
  else snprintf(named, sizeof named, "--ps-servers %d", K);
  if (o->dedicated)
    return GS_FAIL(e, GS_EINVAL, "%s runs the servers in %s, --ps-dedicated one server in a "
                   "process that rank 0 forks: give one of them", named,
                   o->ps_server_hosts ? "processes of their own" : "the ranks' processes");
  for (int i = 0; i < o->nworlds && !o->ps_server_hosts; i++)
    if (o->worlds[i] > 1 && o->worlds[i] < K)
      return GS_FAIL(e, GS_EINVAL, "%s: world %d has fewer ranks than servers (each server is "
                     "a thread of a rank; --ps-server-hosts runs them on their own)", named,
                     o->worlds[i]);
  return GS_OK;
}

/* --ps-spare-hosts K: BytePS' summation servers' numbers and placement
 * (what they run is the ps' declaration, ps/placement.c); the flags that
 * only they take. A rank of the sweep runs one K (sweep.c adds it). */
static int resolve_ps_spare(gs_opts *o, gs_err *e) {
  const char *alone = o->ps_partition_mb > 0 ? "--ps-partition-mb"
                      : o->ps_spare_share > 0 ? "--ps-spare-share"
                      : o->ps_credit_mb > 0 ? "--ps-credit-mb" : NULL;
  if (o->nps_spares == 0) {
    if (alone)
      return GS_FAIL(e, GS_EINVAL, "%s shapes BytePS' summation servers and does nothing "
                     "without them: add --ps-spare-hosts K (with --mode ps)", alone);
    return GS_OK;
  }
  if (o->ps_servers > 1 || o->ps_server_hosts || o->dedicated)
    return GS_FAIL(e, GS_EINVAL, "--ps-spare-hosts places BytePS' summation servers itself (on "
                   "spare hosts and the workers' hosts); --ps-servers, --ps-server-hosts and "
                   "--ps-dedicated place the ps' servers otherwise: give one of them");
  if (o->nnodes > 0)
    return GS_FAIL(e, GS_EINVAL, "--ps-spare-hosts: bench's launcher on one machine starts the "
                   "spare hosts' servers; --nnodes cannot");
  for (int i = 0; i < o->nps_spares; i++) {
    int k = o->ps_spares[i];
    if (o->ps_spare_share > 0 && k * o->ps_spare_share > 1 + 1e-12)
      return GS_FAIL(e, GS_EINVAL, "--ps-spare-share %g with --ps-spare-hosts %d: %d servers "
                     "would sum %g of the parameters; at most 1/%d each", o->ps_spare_share, k,
                     k, k * o->ps_spare_share, k);
    for (int j = 0; j < o->nworlds; j++) {
      int n = o->hosts > 0 ? o->hosts : o->worlds[j];
      double ys, yc;
      if (o->worlds[j] < 2) continue;  /* world 1 is one process: no ps runs */
      if (!(o->ps_spare_share > 0) && k > n)
        return GS_FAIL(e, GS_EINVAL, "--ps-spare-hosts %d at world %d: BytePS' split is "
                       "defined for at most as many spare hosts as workers' hosts (%d; more "
                       "cannot shorten the step: each workers' link carries the model once "
                       "each way at k = n); give --ps-spare-share to place more", k,
                       o->worlds[j], n);
      /* the split the ranks will compute (ps/split.c), refused here rather
       * than by rank 0 alone while the others wait for it */
      if (gs_ps_spare_shares(n, k, o->ps_spare_share, &ys, &yc) < 0)
        return GS_FAIL(e, GS_EINVAL, "--ps-spare-hosts %d at world %d on %d workers' host(s): "
                       "BytePS' split has no servers' share there (with one workers' host "
                       "there is nothing to sum across hosts); give --hosts 2 or more, or "
                       "drop --ps-spare-hosts", k, o->worlds[j], n);
    }
  }
  if (o->nps_spares == 1) o->ps_spare = o->ps_spares[0];
  return GS_OK;
}

/* --ps-sync ssp:K | async, --ps-backup B: the stale server's numbers
 * (what it runs with is the table's, backends.c). */
static int resolve_ps_sync(const gs_opts *o, gs_err *e) {
  if (!gs_ps_sync_stale(&o->ps_sync)) return GS_OK;
  char what[48];
  gs_ps_sync_text(&o->ps_sync, what, sizeof what);
  if (o->ps_sync.backup_on && o->ps_sync.model != GS_PS_BSP)
    return GS_FAIL(e, GS_EINVAL, "--ps-backup goes with --ps-sync bsp (an update of the first "
                   "world-B gradients), not %s", what);
  for (int i = 0; i < o->nworlds && o->ps_sync.backup_on; i++)
    if (o->worlds[i] > 1 && o->ps_sync.backup >= o->worlds[i])
      return GS_FAIL(e, GS_EINVAL, "--ps-backup %d: world %d would make updates of %d "
                     "gradients; B must be below every --world", o->ps_sync.backup,
                     o->worlds[i], o->worlds[i] - o->ps_sync.backup);
  return GS_OK;
}

int gs_opts_resolve(gs_opts *o, gs_err *e) {
  if (o->calibrate || o->project) return gs_costmodel_resolve(o, e);
  if (o->replay) return gs_replay_resolve(o, e);
  for (int i = 0; i < o->nworlds; i++)
    if (o->worlds[i] > 1024)
      return GS_FAIL(e, GS_EINVAL, "--world %d: a run starts at most 1024 ranks (--project "
                     "predicts larger worlds)", o->worlds[i]);
  /* Without --mode and --world, saving or loading parameters means the
   * single-process reference: one run whose parameters mean something. */
  if (!o->mode_given && !o->world_given && !o->collective && !o->report &&
      (o->save_params || o->train.load_params)) {
    o->modes[0] = GS_MODE_SINGLE;
    o->nmodes = 1;
    o->worlds[0] = 1;
  }
  /* repetitions steady a comparison; one process alone runs once unless asked */
  if (!o->repeat_given && o->nmodes == 1 && o->modes[0] == GS_MODE_SINGLE) o->repeats = 1;
  /* flags only one mode's backend takes (a rank of our launcher runs one
   * configuration of a sweep the launcher checked, with the sweep's flags:
   * those of another mode are not its) */
  if (!getenv("GS_LAUNCHED")) GS_TRY(gs_backends_own_flags(o, e));
  /* the collective benchmark measures as nccl-tests measures NCCL, which
   * keeps nothing to resend; training keeps the log */
  if (o->resend < 0) o->resend = !o->collective;
  /* local is one process: it runs at world 1 (alone, without --world, it
   * means world 1; in a list it joins only the world-1 runs) */
  if (o->nmodes == 1 && o->modes[0] == GS_MODE_SINGLE) {
    if (!o->world_given) {
      o->worlds[0] = 1;
      o->nworlds = 1;
    }
    for (int j = 0; j < o->nworlds; j++)
      if (o->worlds[j] != 1)
        return GS_FAIL(e, GS_EINVAL, "--mode local is one process: it takes --world 1 (got %d)",
                       o->worlds[j]);
  }
  /* the loss scale: GradScaler's dynamic one for fp16, 1 otherwise */
  bool f16 = o->train.precision == GS_F16;
  o->train.loss_scale = f16 ? 65536.0f : 1.0f;
  o->train.dynamic_scale = f16;
  if (o->loss_scale_arg) {
    const char *a = o->loss_scale_arg;
    double d;
    o->loss_scale_set = true;
    if (!strcmp(a, "dynamic")) {
      o->train.loss_scale = 65536.0f;
      o->train.dynamic_scale = true;
    } else if (!strncmp(a, "dynamic:", 8) && !gs_parse_real(a + 8, 1e-30, 3.4e38, &d)) {
      o->train.loss_scale = (float)d; /* GradScaler(init_scale=...) */
      o->train.dynamic_scale = true;
    } else if (!gs_parse_real(a, 1e-30, 3.4e38, &d)) {
      o->train.loss_scale = (float)d;
      o->train.dynamic_scale = false;
    } else {
      return GS_FAIL(e, GS_EINVAL, "--loss-scale %s: 'dynamic', 'dynamic:INIT' or a positive "
                     "number", a);
    }
  }
  if (o->min_bytes > o->max_bytes)
    return GS_FAIL(e, GS_EINVAL, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
  if (o->collective) {
    for (int i = 0; i < o->nmodes; i++)
      if (o->modes[i] == GS_MODE_SINGLE)
        return GS_FAIL(e, GS_EINVAL, "--collective needs --mode ps or ring");
    GS_TRY(gs_collective_resolve(o, e));
  }
  for (int i = 0; i < o->train.straggle.nslow && o->world_given && !getenv("GS_LAUNCHED"); i++) {
    int mx = 0;
    for (int j = 0; j < o->nworlds; j++) mx = o->worlds[j] > mx ? o->worlds[j] : mx;
    if (o->train.straggle.slow[i] >= mx)
      return GS_FAIL(e, GS_EINVAL, "--slow: rank %d is outside every --world (the largest is %d "
                     "ranks, 0..%d)", o->train.straggle.slow[i], mx, mx - 1);
  }
  GS_TRY(resolve_ps_servers(o, e));
  GS_TRY(resolve_ps_spare(o, e));
  GS_TRY(resolve_ps_sync(o, e));
  /* --freeze names layers of every model of the sweep (a rank would refuse it only once
   * started) */
  for (int i = 0; i < o->nmodels && o->train.freeze && !getenv("GS_LAUNCHED"); i++)
    GS_TRY(gs_freeze_check(o->models[i], o->train.freeze, e));
  /* every run of the sweep against what its backend runs: the one check of
   * a combination (backends.c, worker/caps.c) */
  GS_TRY(gs_backends_check(o, e));
  if (o->eval_every && !o->eval_data)
    return GS_FAIL(e, GS_EINVAL, "--eval-every %lld evaluates held-out data along the run: "
                   "give the data with --eval-data SPEC", (long long)o->eval_every);
  GS_TRY(gs_cluster_resolve(o, e));
  if (o->exec) return gs_exec_resolve(o, e);
  if (o->link_bps && strcmp(o->transport, "tcp"))
    return GS_FAIL(e, GS_EINVAL, "--transport %s joins ranks of one machine, and emulated hosts "
                   "(--link) talk over their links: drop one", o->transport);
  if (o->save_params) {
    o->repeats = 1; /* one run's parameters: repeating it would save the same bits again */
    /* without --world, a rank of a job (torchrun, --nnodes, ...) takes its
     * world from the launcher; the sweep checks its default list itself */
    int worlds = o->world_given ? o->nworlds : 1;
    int runs = o->nmodes * worlds * o->nmodels * o->nbatches * o->nbucket_mbs;
    if (runs != 1)
      return GS_FAIL(e, GS_EINVAL, "--save-params saves one run's parameters, but these flags "
                     "make %d runs; give one --mode, --world, --model, --batch and --bucket-mb",
                     runs);
  }
  return GS_OK;
}
