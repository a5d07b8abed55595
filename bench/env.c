/* env.c: which rank this process is, from the conventions users already
 * have: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID) and Open MPI (OMPI_COMM_WORLD_*), the latter two with
 * MASTER_ADDR / MASTER_PORT for the rendezvous. Our own launcher sets the
 * torchrun variables plus GS_LAUNCHED, GS_PORT_FD and GS_RUN_DIR. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"

static int get_int(const char *name, long lo, long hi, int *out, gs_err *e) {
  const char *v = getenv(name);
  if (!v) return 0;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return GS_FAIL(e, GS_EINVAL, "environment: %s='%s' is not a number in %ld..%ld", name, v,
                   lo, hi);
  *out = (int)x;
  return 1;
}

int gs_rank_env_read(gs_rank_env *env, gs_err *e) {
  memset(env, 0, sizeof *env);
  env->port_fd = -1;
  env->local_world = 0;
  const char *rv = NULL, *wv = NULL, *lv = NULL, *lwv = NULL;
  if (getenv("RANK") && getenv("WORLD_SIZE")) {
    env->source = "torchrun";
    rv = "RANK"; wv = "WORLD_SIZE"; lv = "LOCAL_RANK"; lwv = "LOCAL_WORLD_SIZE";
  } else if (getenv("OMPI_COMM_WORLD_RANK") && getenv("OMPI_COMM_WORLD_SIZE")) {
    env->source = "openmpi";
    rv = "OMPI_COMM_WORLD_RANK"; wv = "OMPI_COMM_WORLD_SIZE";
    lv = "OMPI_COMM_WORLD_LOCAL_RANK"; lwv = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS")) {
    env->source = "slurm";
    rv = "SLURM_PROCID"; wv = "SLURM_NTASKS"; lv = "SLURM_LOCALID"; lwv = "SLURM_NTASKS_PER_NODE";
  } else {
    return GS_OK;
  }
  env->present = true;
  int rc;
  if ((rc = get_int(wv, 1, 1 << 20, &env->world, e)) < 0) return rc;
  if ((rc = get_int(rv, 0, env->world - 1, &env->rank, e)) < 0) {
    gs_err_clear(e);
    return GS_FAIL(e, GS_EINVAL, "environment: %s=%s is outside 0..%d (%s=%d)", rv, getenv(rv),
                   env->world - 1, wv, env->world);
  }
  if ((rc = get_int(lv, 0, 1 << 20, &env->local_rank, e)) < 0) return rc;
  if (rc == 0) env->local_rank = env->world == 1 ? 0 : -1; /* unknown: from the welcome */
  /* SLURM_NTASKS_PER_NODE may read "4(x2)": take the leading number */
  const char *lw = getenv(lwv);
  if (lw) env->local_world = atoi(lw);

  const char *addr = getenv("MASTER_ADDR");
  snprintf(env->master_addr, sizeof env->master_addr, "%s", addr && *addr ? addr : "127.0.0.1");
  if ((rc = get_int("MASTER_PORT", 0, 65535, &env->master_port, e)) < 0) return rc;
  env->launched = getenv("GS_LAUNCHED") && !strcmp(getenv("GS_LAUNCHED"), "1");
  if (env->launched) env->source = "gradsync";
  if ((rc = get_int("GS_PORT_FD", 0, 1 << 20, &env->port_fd, e)) < 0) return rc;
  if (rc == 0) env->port_fd = -1;
  env->run_dir = getenv("GS_RUN_DIR");
  if (rc == 0 && env->master_port == 0 && env->world > 1)
    return GS_FAIL(e, GS_EINVAL, "environment: %s says rank %d of %d, but MASTER_PORT is not "
                   "set: export MASTER_ADDR (rank 0's host) and MASTER_PORT (a free port) on "
                   "every rank", env->source, env->rank, env->world);
  return GS_OK;
}
