/* rank_threads.c: how many BLAS threads a rank runs (job.h): --threads,
 * or this machine's cores shared by the ranks that run on it, so that
 * ranks on one machine do not oversubscribe its cores. */
#include <unistd.h>

#include "bench/job/job.h"

int gs_threads_per_rank(const gs_opts *o, int ranks) {
  if (o->threads > 0) return o->threads;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int per = (int)((cores < 1 ? 1 : cores) / (ranks < 1 ? 1 : ranks));
  return per < 1 ? 1 : per;
}

int gs_job_threads(const gs_job *j, const gs_opts *o) {
  /* emulated hosts share this machine's cores: every rank counts */
  return gs_threads_per_rank(o, j->local_world > 0 && j->env.hosts == 0 ? j->local_world
                                                                          : j->world);
}
