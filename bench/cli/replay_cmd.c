/* replay_cmd.c: `bench --mode local --replay FILE`: a stale ps run's
 * apply-order log (worker.h gs_apply_log, written beside the run's
 * run.json) replayed in this one process. The training configuration is
 * the log's own, and the CPU kernels use the BLAS threads a rank of the run
 * used; the answer is whether every update gave the server's bits. A
 * sharded run's log names its shard: the other servers' logs are read from
 * beside it, and all are replayed together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/job/job.h"

int gs_replay_resolve(const gs_opts *o, gs_err *e) {
  if (!o->mode_given || o->nmodes != 1 || o->modes[0] != GS_MODE_SINGLE)
    return GS_FAIL(e, GS_EINVAL, "--replay %s replays a ps run in one process: give --mode "
                   "local", o->replay);
  if (o->world_given && (o->nworlds != 1 || o->worlds[0] != 1))
    return GS_FAIL(e, GS_EINVAL, "--replay %s: the world is the log's; drop --world",
                   o->replay);
  if (strcmp(o->device, "cpu") && strcmp(o->device, "auto"))
    return GS_FAIL(e, GS_EINVAL, "--replay %s runs on the CPU, as the logged server did; "
                   "drop --device", o->replay);
  return GS_OK;
}

/* The sharded ps's other logs, beside the one given: apply_order.txt's
 * siblings as apply_order.c names them (gs_apply_order_name). */
static int read_shards(const char *path, gs_apply_log *l, gs_err *e) {
  int K = l[0].shards, mine = l[0].shard;
  if (K == 1) return GS_OK;
  gs_apply_log given = l[0];
  memset(&l[0], 0, sizeof l[0]);
  l[mine] = given;
  const char *slash = strrchr(path, '/');
  int dirlen = slash ? (int)(slash - path) + 1 : 0;
  for (int j = 0; j < K; j++) {
    if (j == mine) continue;
    char name[64], sib[4400];
    gs_apply_order_name(j, K, name, sizeof name);
    int n = snprintf(sib, sizeof sib, "%.*s%s", dirlen, path, name);
    if (n < 0 || (size_t)n >= sizeof sib)
      return GS_FAIL(e, GS_EINVAL, "--replay %s: too long a path", path);
    GS_TRY(gs_apply_log_read(sib, &l[j], e));
    if (l[j].shards != K || l[j].shard != j)
      return GS_FAIL(e, GS_EINVAL, "--replay %s: %s is shard %d of %d, not shard %d of %d",
                     path, sib, l[j].shard, l[j].shards, j, K);
  }
  return GS_OK;
}

int gs_replay_main(const gs_opts *o) {
  gs_err e = {0};
  gs_apply_log first;
  if (gs_apply_log_read(o->replay, &first, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 2;
  }
  int K = first.shards;
  gs_apply_log *l = calloc((size_t)K, sizeof *l);
  if (!l) {
    gs_apply_log_free(&first);
    fprintf(stderr, "bench: out of memory\n");
    return 1;
  }
  l[0] = first;
  if (read_shards(o->replay, l, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    for (int j = 0; j < K; j++) gs_apply_log_free(&l[j]);
    free(l);
    return 2;
  }
  gs_kernels *k = NULL;
  int threads = o->threads > 0 ? o->threads : l[0].threads;
  int rc = GS_OK;
  size_t nup = 0, n = 0;
  for (int j = 0; j < K; j++) nup += l[j].nup, n += l[j].nparams;
  if (!(k = gs_kernels_cpu(threads, &e))) rc = e.code ? e.code : GS_EDEVICE;
  char over[64] = "";
  if (K > 1) snprintf(over, sizeof over, " over %d servers' logs", K);
  if (rc == GS_OK && !o->quiet)
    printf("replaying %s: ps %s, world %d, %zu updates of %s (%zu parameters)%s, %d BLAS "
           "thread%s\n", o->replay, l[0].sync, l[0].world, nup, l[0].model, n, over, threads,
           threads == 1 ? "" : "s");
  gs_replay_result r;
  if (rc == GS_OK) rc = gs_replay(l, K, k, o->save_params, &r, &e);
  if (rc == GS_OK)
    printf("replayed %llu updates (%llu gradients recomputed) in one process: after every "
           "update the parameters are bitwise the server's; final hash %016llx\n",
           (unsigned long long)r.updates, (unsigned long long)r.gradients,
           (unsigned long long)r.hash);
  else
    fprintf(stderr, "bench: --replay %s: %s\n", o->replay, e.msg);
  if (rc == GS_OK && o->save_params && !o->quiet)
    printf("parameters: %s\n", o->save_params);
  if (k) k->destroy(k);
  for (int j = 0; j < K; j++) gs_apply_log_free(&l[j]);
  free(l);
  return rc == GS_OK ? 0 : rc == GS_EINVAL ? 2 : 1;
}
