/* nodes.c: bench's own multi-node launcher, for machines without torchrun,
 * MPI or Slurm:
 *
 *   bench --nnodes N --node-rank R --nproc-per-node K \
 *         --master-addr A --master-port P --mode ring ...
 *
 * run once on each machine, starts that machine's K ranks as torchrun
 * does: global ranks R*K .. R*K+K-1 of a world of N*K, each this same
 * executable with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * GROUP_RANK, MASTER_ADDR and MASTER_PORT set, so each joins as one rank
 * (job.c) and rank 0, on node 0, hosts the rendezvous on A:P and writes
 * the results. Unlike torchrun there is no agent store: P is the
 * rendezvous' own port. The ranks are watched as the local launcher
 * watches its own (launch.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bench/job/job.h"

/* What was asked, or a message saying what to give instead. */
static int check(const gs_opts *o, const char **addr, int *port, gs_err *e) {
  if (o->node_rank >= o->nnodes)
    return GS_FAIL(e, GS_EINVAL, "--node-rank %d is outside the job's nodes 0..%d (--nnodes "
                   "%d); give each machine a distinct --node-rank below --nnodes", o->node_rank,
                   o->nnodes - 1, o->nnodes);
  if ((long)o->nnodes * o->nproc_per_node > 1 << 20)
    return GS_FAIL(e, GS_EINVAL, "--nnodes %d x --nproc-per-node %d is more ranks than bench "
                   "takes (%d)", o->nnodes, o->nproc_per_node, 1 << 20);
  if (o->world_given && (o->nworlds != 1 || o->worlds[0] != o->nnodes * o->nproc_per_node))
    return GS_FAIL(e, GS_EINVAL, "--world disagrees with --nnodes %d x --nproc-per-node %d; "
                   "drop --world (the world is the nodes times their ranks)", o->nnodes,
                   o->nproc_per_node);
  if (o->nmodes > 1 || o->nmodels > 1 || o->nbatches > 1 || o->nbucket_mbs > 1)
    return GS_FAIL(e, GS_EINVAL, "--nnodes runs one configuration: give one --mode (ps or "
                   "ring), and single values to --model, --batch and --bucket-mb");
  if (o->modes[0] == GS_MODE_SINGLE && o->nnodes * o->nproc_per_node > 1)
    return GS_FAIL(e, GS_EINVAL, "--mode local is one process: give --mode ps or ring to "
                   "--nnodes");
  *addr = o->master_addr ? o->master_addr : getenv("MASTER_ADDR");
  const char *p = getenv("MASTER_PORT");
  *port = o->master_port;
  if (!*port && p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || *end || v < 1 || v > 65535)
      return GS_FAIL(e, GS_EINVAL, "environment: MASTER_PORT='%s' is not a port (1..65535)", p);
    *port = (int)v;
  }
  if (!*addr || !**addr || !*port)
    return GS_FAIL(e, GS_EINVAL, "--nnodes: give --master-addr (node 0's address; 127.0.0.1 "
                   "when every node is this machine) and --master-port (a port free on node 0), "
                   "the same on every node, or export MASTER_ADDR and MASTER_PORT");
  return GS_OK;
}

static void set_int(const char *name, int v) {
  char s[32];
  snprintf(s, sizeof s, "%d", v);
  setenv(name, s, 1);
}

static pid_t spawn(const gs_opts *o, int local, const char *addr, int port, char **argv) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  /* nothing of an outer launcher or of our local one may reach the rank */
  static const char *const drop[] = {
    "GS_LAUNCHED", "GS_PORT_FD", "GS_RUN_DIR", "GS_RENDEZVOUS_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof drop / sizeof *drop; i++) unsetenv(drop[i]);
  set_int("RANK", o->node_rank * o->nproc_per_node + local);
  set_int("WORLD_SIZE", o->nnodes * o->nproc_per_node);
  set_int("LOCAL_RANK", local);
  set_int("LOCAL_WORLD_SIZE", o->nproc_per_node);
  set_int("GROUP_RANK", o->node_rank);
  setenv("MASTER_ADDR", addr, 1);
  set_int("MASTER_PORT", port);
  setenv("GS_NODE_LAUNCH", "1", 1);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "bench: node %d: cannot start local rank %d: %s\n", o->node_rank, local,
          strerror(errno));
  _exit(127);
}

int gs_nodes_main(const gs_opts *o, char **argv) {
  gs_err e = {0};
  const char *addr = NULL;
  int port = 0;
  if (check(o, &addr, &port, &e) < 0) {
    fprintf(stderr, "bench: %s\n", e.msg);
    return 2;
  }
  int k = o->nproc_per_node, first = o->node_rank * k;
  pid_t *pids = calloc((size_t)k, sizeof *pids);
  if (!pids) {
    fprintf(stderr, "bench: out of memory\n");
    return 1;
  }
  gs_bench_signals();
  if (!o->quiet)
    fprintf(stderr, "bench: node %d of %d: ranks %d..%d of %d, rendezvous at %s:%d\n",
            o->node_rank, o->nnodes, first, first + k - 1, o->nnodes * k, addr, port);
  fflush(NULL);
  int rc = 0;
  char why[2048] = "";
  for (int i = 0; i < k && !rc; i++) {
    pids[i] = spawn(o, i, addr, port, argv);
    if (pids[i] < 0) {
      snprintf(why, sizeof why, "fork rank %d: %s", first + i, strerror(errno));
      pids[i] = 0;
      rc = 1;
    }
  }
  rc = gs_launch_watch(pids, k, first, rc, o->timeout_s, false, why, sizeof why);
  free(pids);
  if (rc) fprintf(stderr, "bench: node %d failed: %s\n", o->node_rank, why);
  return gs_interrupted ? gs_interrupt_status() : rc;
}
