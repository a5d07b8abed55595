/* replay.c: `bench --mode local --replay FILE`: a stale ps run's
 * apply-order log (worker.h gs_apply_log, written beside the run's
 * run.json) replayed in this one process. The training configuration is
 * the log's own, and the CPU kernels use the BLAS threads a rank of the run
 * used; the answer is whether every update gave the server's bits. */
#include <stdio.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/job/job.h"

int gs_replay_resolve(const gs_opts *o, gs_err *e) {
  if (!o->mode_given || o->nmodes != 1 || o->modes[0] != GS_MODE_LOCAL)
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

int gs_replay_main(const gs_opts *o) {
  gs_err e = {0};
  gs_apply_log l;
  if (gs_apply_log_read(o->replay, &l, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 2;
  }
  gs_kernels *k = NULL;
  int threads = o->threads > 0 ? o->threads : l.threads;
  int rc = GS_OK;
  if (!(k = gs_kernels_cpu(threads, &e))) rc = e.code ? e.code : GS_EDEVICE;
  if (rc == GS_OK && !o->quiet)
    printf("replaying %s: ps %s, world %d, %zu updates of %s (%zu parameters), %d BLAS "
           "thread%s\n", o->replay, l.sync, l.world, l.nup, l.model, l.nparams, threads,
           threads == 1 ? "" : "s");
  gs_replay_result r;
  if (rc == GS_OK) rc = gs_replay(&l, k, o->save_params, &r, &e);
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
  gs_apply_log_free(&l);
  return rc == GS_OK ? 0 : rc == GS_EINVAL ? 2 : 1;
}
