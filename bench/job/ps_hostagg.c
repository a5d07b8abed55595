/* ps_hostagg.c: whether a ps rank runs the host-aggregated ps (ps/hostagg.c)
 * and with how many ranks per host: --ps-local-reduce asks for it, and it
 * is the default where hosts are known to hold several ranks each (bench's
 * emulated hosts, which place ranks host-major, and --transport shm, one
 * host) and the run is one it runs (what it runs is the ps' own
 * declaration, gs_ps_backend.caps; its servers on the hosts' first ranks,
 * at most one per host); elsewhere every rank pushes, as DataParallel's
 * workers do. */
#include "bench/job/job.h"

int gs_bench_ps_hostagg(const gs_opts *o, const gs_rank_env *env, const gs_job *j,
                        const gs_kernels *k, const gs_sync_config *cfg, gs_run_backend *b,
                        bool shm, gs_err *e) {
  int world = j->world;
  b->ps.host_ranks = 0;
  if (o->ps_hostagg == 0) return GS_OK;
  /* ranks per host: emulated hosts and shm know it; another launcher's
   * LOCAL_WORLD_SIZE (or Slurm's tasks per node) says it */
  int L = env->hosts > 0 ? (world % env->hosts ? 0 : world / env->hosts)
          : shm ? world : j->local_world;
  if (o->ps_hostagg == 1) {
    if (L < 2 || world % L)
      return GS_FAIL(e, GS_EINVAL, "rank %d: --ps-local-reduce needs hosts of several ranks "
                     "each, the same number on every host (%d ranks per host in a world of "
                     "%d): use --hosts K with a world that K divides, --transport shm, or a "
                     "launcher that sets LOCAL_WORLD_SIZE", j->rank, L, world);
    b->ps.host_ranks = L;
    return GS_OK;
  }
  if (!(env->hosts > 0 || shm) || L < 2 || (o->ps_servers > 1 && o->ps_servers > world / L))
    return GS_OK;
  /* by default, only where it runs what this run asks */
  gs_run_backend agg = *b;
  agg.ps.host_ranks = L;
  agg.opts = &agg.ps;
  gs_caps caps;
  gs_want w;
  agg.backend->caps(agg.opts, &caps);
  gs_want_of_config(cfg, &w);
  agg.backend->asks(agg.opts, &w);
  gs_err quiet = {0};
  if (gs_caps_check(&caps, &w, NULL, &quiet) == GS_OK) b->ps.host_ranks = L;
  return GS_OK;
}
