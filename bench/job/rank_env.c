/* rank_env.c: which rank this process is, from the conventions users
 * already have (job.h gs_rank_env_read): torchrun (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK), Open MPI (OMPI_COMM_WORLD_*),
 * MPICH / Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS),
 * Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 * SLURM_STEP_TASKS_PER_NODE), all with MASTER_ADDR / MASTER_PORT for the
 * rendezvous (Slurm: the step's first node and a port derived from the job
 * id when unset). torchrun's agent keeps its own store on MASTER_PORT
 * (TORCHELASTIC_USE_AGENT_STORE=True), so the rendezvous then takes
 * MASTER_PORT + 1; GS_RENDEZVOUS_PORT overrides both. Our launcher sets the
 * torchrun variables plus GS_LAUNCHED, GS_PORT_FD (where rank 0 writes its
 * port) and GS_RUN_DIR, and on emulated hosts GS_HOST, GS_HOSTS and
 * GS_HOST_ADDR (cluster.c). Reading them is the first step of a job's
 * start (job.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/job/job.h"

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

/* One launcher's names for this rank, the world, the rank on this host,
 * the ranks on this host and this host's index. The first whose rank or
 * size variable is set wins: MPI before Slurm, since an mpirun inside a
 * Slurm allocation inherits the allocation's SLURM_PROCID. */
typedef struct convention {
  const char *source, *rank, *size, *local_rank, *local_size, *node;
} convention;

static const convention CONVENTIONS[] = {
  {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
  {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
   "OMPI_COMM_WORLD_LOCAL_SIZE", NULL},
  {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL},
  {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, "SLURM_NODEID"},
};

/* Slurm's tasks per node, "2(x3),1": the count of node `node` (0 unknown). */
static int slurm_tasks_on(const char *list, int node) {
  for (const char *p = list; p && *p;) {
    char *end;
    long n = strtol(p, &end, 10), times = 1;
    if (end == p) return 0;
    if (!strncmp(end, "(x", 2)) {
      times = strtol(end + 2, &end, 10);
      if (*end++ != ')') return 0;
    }
    if (node < times) return (int)n;
    node -= (int)times;
    p = *end == ',' ? end + 1 : NULL;
  }
  return 0;
}

/* The first host of a Slurm node list: "n[01-04,07],gpu1" -> "n01". */
static void slurm_first_host(const char *list, char *out, size_t cap) {
  size_t n = strcspn(list, ",[");
  snprintf(out, cap, "%.*s", (int)n, list);
  if (list[n] == '[') {
    size_t m = strcspn(list + n + 1, ",-]");
    size_t used = strlen(out);
    if (used < cap) snprintf(out + used, cap - used, "%.*s", (int)m, list + n + 1);
  }
}

/* Where the rendezvous listens, when the launcher's own store may hold
 * MASTER_PORT or a launcher sets no port at all. */
static int rendezvous_port(gs_rank_env *env, gs_err *e) {
  int rc, port = 0;
  if ((rc = get_int("GS_RENDEZVOUS_PORT", 1, 65535, &port, e)) < 0) return rc;
  if (rc > 0) {
    env->master_port = port;
    return GS_OK;
  }
  const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (env->master_port > 0 && agent && !strcasecmp(agent, "true")) {
    /* torchrun's agent keeps its TCPStore on MASTER_PORT of node 0 for as
     * long as the job runs: the next port is ours, the same on every node */
    env->master_port = env->master_port < 65535 ? env->master_port + 1 : 65534;
    env->port_derived = true;
  } else if (env->master_port == 0 && !strcmp(env->source, "slurm") && getenv("SLURM_JOB_ID")) {
    /* the same on every task of a step, different per job and step */
    int job = 0, step = 0;
    if ((rc = get_int("SLURM_JOB_ID", 0, 1 << 30, &job, e)) < 0) return rc;
    if (get_int("SLURM_STEP_ID", 0, 1 << 30, &step, NULL) < 0) step = 0;
    env->master_port = 20000 + (int)(((long)job * 16 + step) % 40000);
    env->port_derived = true;
  }
  return GS_OK;
}

int gs_rank_env_read(gs_rank_env *env, gs_err *e) {
  memset(env, 0, sizeof *env);
  env->port_fd = -1;
  env->node_rank = -1;
  const convention *c = NULL;
  for (size_t i = 0; !c && i < sizeof CONVENTIONS / sizeof *CONVENTIONS; i++)
    if (getenv(CONVENTIONS[i].rank) || getenv(CONVENTIONS[i].size)) c = &CONVENTIONS[i];
  if (!c) return GS_OK;
  if (!getenv(c->rank) || !getenv(c->size)) {
    bool rank = getenv(c->rank) != NULL;
    const char *has = rank ? c->rank : c->size, *lacks = rank ? c->size : c->rank;
    return GS_FAIL(e, GS_EINVAL, "environment: %s=%s is set but %s is not: a rank of a job "
                   "needs both (%s: this rank, 0..N-1; %s: N, the same on every rank); set %s, "
                   "or unset %s to let bench start the ranks itself", has, getenv(has), lacks,
                   c->rank, c->size, lacks, has);
  }
  env->source = c->source;
  if (!strcmp(c->source, "torchrun") && !getenv("TORCHELASTIC_RUN_ID"))
    env->source = getenv("GS_NODE_LAUNCH") ? "bench --nnodes" : "env";
  env->present = true;
  int rc;
  if ((rc = get_int(c->size, 1, 1 << 20, &env->world, e)) < 0) return rc;
  if ((rc = get_int(c->rank, 0, 1 << 20, &env->rank, e)) < 0) return rc;
  if (env->rank >= env->world)
    return GS_FAIL(e, GS_EINVAL, "environment: %s=%d is outside the world: ranks are 0..%d "
                   "(%s=%d); give each rank a distinct %s below %s", c->rank, env->rank,
                   env->world - 1, c->size, env->world, c->rank, c->size);
  env->local_rank = -1; /* unknown: from the welcome */
  if ((rc = get_int(c->local_rank, 0, 1 << 20, &env->local_rank, e)) < 0) return rc;
  if (rc == 0 && env->world == 1) env->local_rank = 0;
  if (c->local_size && (rc = get_int(c->local_size, 1, 1 << 20, &env->local_world, e)) < 0)
    return rc;
  if (!c->local_size) { /* Slurm: "2(x3),1", this node's count of it */
    int node = 0;
    if (getenv("SLURM_STEP_TASKS_PER_NODE") && get_int("SLURM_NODEID", 0, 1 << 20, &node, NULL) > 0)
      env->local_world = slurm_tasks_on(getenv("SLURM_STEP_TASKS_PER_NODE"), node);
    else if (getenv("SLURM_NTASKS_PER_NODE")) /* the same on every node */
      env->local_world = slurm_tasks_on(getenv("SLURM_NTASKS_PER_NODE"), 0);
  }
  if (env->local_world > env->world)
    return GS_FAIL(e, GS_EINVAL, "environment: %s=%d is more than the world (%s=%d); the "
                   "ranks on one host are a part of the job's", c->local_size, env->local_world,
                   c->size, env->world);
  if (env->local_world > 0 && env->local_rank >= env->local_world)
    return GS_FAIL(e, GS_EINVAL, "environment: %s=%d is outside this host's ranks 0..%d "
                   "(%s=%d)", c->local_rank, env->local_rank, env->local_world - 1,
                   c->local_size ? c->local_size : "SLURM_STEP_TASKS_PER_NODE",
                   env->local_world);
  if (c->node && (rc = get_int(c->node, 0, 1 << 20, &env->node_rank, e)) < 0) return rc;

  const char *addr = getenv("MASTER_ADDR");
  const char *nodes = getenv("SLURM_STEP_NODELIST") ? getenv("SLURM_STEP_NODELIST")
                                                    : getenv("SLURM_JOB_NODELIST");
  if (addr && *addr)
    snprintf(env->master_addr, sizeof env->master_addr, "%s", addr);
  else if (!strcmp(c->source, "slurm") && nodes && *nodes) /* task 0 runs on the first node */
    slurm_first_host(nodes, env->master_addr, sizeof env->master_addr);
  else
    snprintf(env->master_addr, sizeof env->master_addr, "127.0.0.1");
  if ((rc = get_int("MASTER_PORT", 0, 65535, &env->master_port, e)) < 0) return rc;
  env->launched = getenv("GS_LAUNCHED") && !strcmp(getenv("GS_LAUNCHED"), "1");
  if (env->launched) env->source = "gradsync";
  if ((rc = get_int("GS_PORT_FD", 0, 1 << 20, &env->port_fd, e)) < 0) return rc;
  if (rc == 0) env->port_fd = -1;
  env->run_dir = getenv("GS_RUN_DIR");
  if (env->launched && getenv("GS_HOSTS")) { /* on emulated hosts (cluster.c) */
    if ((rc = get_int("GS_HOSTS", 1, 1 << 20, &env->hosts, e)) < 0) return rc;
    if ((rc = get_int("GS_HOST", 0, env->hosts - 1, &env->host, e)) < 0) return rc;
    snprintf(env->host_addr, sizeof env->host_addr, "%s",
             getenv("GS_HOST_ADDR") ? getenv("GS_HOST_ADDR") : "");
    const char *d = getenv("GS_DELAY_LINE");
    char *end = NULL;
    if (d && *d) env->delay_line_s = strtod(d, &end);
    if (d && *d && (*end || !(env->delay_line_s >= 0 && env->delay_line_s < 10)))
      return GS_FAIL(e, GS_EINVAL, "environment: GS_DELAY_LINE=%s is not a delay in seconds "
                     "(0..10)", d);
  }
  if (!env->launched && (rc = rendezvous_port(env, e)) < 0) return rc;
  if (env->port_fd < 0 && env->master_port == 0 && env->world > 1)
    return GS_FAIL(e, GS_EINVAL, "environment: %s says rank %d of %d, but MASTER_PORT is not "
                   "set: export MASTER_ADDR (rank 0's host) and MASTER_PORT (a free port) on "
                   "every rank%s", env->source, env->rank, env->world,
                   !strcmp(c->source, "openmpi") ? " (mpirun -x MASTER_ADDR=A -x MASTER_PORT=P)"
                   : !strcmp(c->source, "mpich") ? " (mpiexec -genv MASTER_ADDR A -genv "
                                                   "MASTER_PORT P)" : "");
  return GS_OK;
}
