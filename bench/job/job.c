/* job.c: how one rank starts a job, for training runs and the collective
 * benchmark alike:
 *
 *   1. which rank this process is, from the conventions users already have:
 *      torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK),
 *      Open MPI (OMPI_COMM_WORLD_*), MPICH / Hydra (PMI_RANK, PMI_SIZE,
 *      MPI_LOCALRANKID, MPI_LOCALNRANKS), Slurm (SLURM_PROCID, SLURM_NTASKS,
 *      SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE), all with MASTER_ADDR /
 *      MASTER_PORT for the rendezvous (Slurm: the step's first node and a
 *      port derived from the job id when unset). torchrun's agent keeps its
 *      own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so the
 *      rendezvous then takes MASTER_PORT + 1; GS_RENDEZVOUS_PORT overrides
 *      both. Our launcher sets the torchrun variables plus GS_LAUNCHED,
 *      GS_PORT_FD (where rank 0 writes its port) and GS_RUN_DIR, and on
 *      emulated hosts GS_HOST, GS_HOSTS and GS_HOST_ADDR (cluster.c);
 *   2. which address the sockets bind: a local job (our launcher, or
 *      MASTER_ADDR a loopback address) binds loopback only; a multi-node job
 *      binds the address this host uses to reach MASTER_ADDR (its route's
 *      source: MASTER_ADDR itself on rank 0), or --bind ADDR. The wildcard
 *      0.0.0.0 only when --bind 0.0.0.0 asks for it; peers are then told
 *      the route's address instead. A rank on an emulated host binds that
 *      host's address;
 *   3. the job secret (secret.c): --secret-file or GS_JOB_SECRET (our
 *      launcher makes a fresh one per job), or for a rank whose every
 *      socket is on loopback the user's own secret file; a rank that
 *      listens beyond loopback refuses to start without one. Every
 *      rendezvous connection and every data connection proves it;
 *   4. the rendezvous: rank 0 listens at MASTER_ADDR:MASTER_PORT (our
 *      launcher: an ephemeral port, written to GS_PORT_FD);
 *   5. which backend runs a mode on a device, and one round of
 *      prepare -> bootstrap (rank 0) -> rendezvous -> open, which the
 *      collective benchmark repeats per message size. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "allreduce/allreduce.h"
#include "bench/job/job.h"
#include "proto/proto.h"
#include "ps/ps.h"

/* ---- 1. the launch environment ---- */

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

/* ---- 2. addresses ---- */

static int ipv4_of(const char *what, const char *name, char out[GS_ADDR_MAX], gs_err *e) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(name, NULL, &hints, &res);
  if (rc != 0 || !res)
    return GS_FAIL(e, GS_EINVAL, "%s %s: no IPv4 address (%s); give an IPv4 address or a "
                   "host name that resolves to one", what, name, gai_strerror(rc));
  inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, GS_ADDR_MAX);
  freeaddrinfo(res);
  return GS_OK;
}

static bool is_loopback(const char *ip) {
  struct in_addr a;
  return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* The source address of this host's route to ip: what a UDP socket
 * connected there is bound to (connect sends nothing). */
static int route_source(const char *ip, char out[GS_ADDR_MAX], gs_err *e) {
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(9)}, src;
  socklen_t len = sizeof src;
  inet_pton(AF_INET, ip, &dst.sin_addr);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 ||
      getsockname(fd, (struct sockaddr *)&src, &len) < 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return GS_FAIL(e, GS_EIO, "no route from this host to MASTER_ADDR %s: %s (check the "
                   "network, or give --bind ADDR)", ip, strerror(err));
  }
  close(fd);
  inet_ntop(AF_INET, &src.sin_addr, out, GS_ADDR_MAX);
  return GS_OK;
}

/* ip is an address of this host: binding it works */
static int check_own(const char *ip, gs_err *e) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  inet_pton(AF_INET, ip, &a.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&a, sizeof a);
  int err = errno;
  if (fd >= 0) close(fd);
  if (rc < 0)
    return GS_FAIL(e, GS_EINVAL, "--bind %s: not an address of this host (%s); give one of "
                   "its addresses (ip -4 addr), or 0.0.0.0 for all of them", ip, strerror(err));
  return GS_OK;
}

int gs_job_addrs_resolve(const gs_rank_env *env, const char *bind, gs_job_addrs *a,
                         gs_err *e) {
  memset(a, 0, sizeof *a);
  GS_TRY(ipv4_of("MASTER_ADDR", env->master_addr, a->master, e));
  a->loopback = env->launched || is_loopback(a->master);
  a->wildcard = bind && !strcmp(bind, "0.0.0.0");
  /* what this host is to its peers: loopback, or its side of the route */
  if (a->loopback) snprintf(a->advertise, sizeof a->advertise, "%s", a->master);
  else GS_TRY(route_source(a->master, a->advertise, e));
  if (env->rank == 0 && !a->loopback && !a->wildcard && strcmp(a->advertise, a->master))
    return GS_FAIL(e, GS_EINVAL, "MASTER_ADDR %s is not an address of this host, and rank 0 "
                   "hosts the rendezvous there: start rank 0 on the machine MASTER_ADDR names "
                   "(or give --bind 0.0.0.0 to listen on every interface, as behind NAT)",
                   env->master_addr);
  if (a->wildcard) {
    snprintf(a->bind, sizeof a->bind, "0.0.0.0");
  } else if (env->hosts > 0) { /* an emulated host: its own address (peers on it
                                 * reach it over its loopback) */
    GS_TRY(ipv4_of("GS_HOST_ADDR", env->host_addr, a->bind, e));
    snprintf(a->advertise, sizeof a->advertise, "%s", a->bind);
  } else if (bind) {
    GS_TRY(ipv4_of("--bind", bind, a->bind, e));
    GS_TRY(check_own(a->bind, e));
    snprintf(a->advertise, sizeof a->advertise, "%s", a->bind);
  } else {
    snprintf(a->bind, sizeof a->bind, "%s", a->advertise);
  }
  if (env->port_fd >= 0) /* our launcher: an ephemeral port it reads back */
    snprintf(a->rendezvous, sizeof a->rendezvous, "tcp://%s:*", a->master);
  else
    snprintf(a->rendezvous, sizeof a->rendezvous, "tcp://%s:%d",
             env->rank == 0 && a->wildcard ? "0.0.0.0" : a->master, env->master_port);
  return GS_OK;
}

/* With --bind 0.0.0.0 every socket this rank's backend binds is a
 * wildcard one, whatever host its address names (the link layer may put
 * this host's name there, which can resolve to loopback); peers are told
 * the advertised address instead: "tcp://HOST:PORT" -> "tcp://ADDR:PORT". */
static int publish(const gs_job *j, char *text, size_t cap, gs_err *e) {
  const char *colon = strrchr(text, ':');
  if (!j->addr.wildcard || strncmp(text, "tcp://", 6) || !colon || colon < text + 6)
    return GS_OK;
  char out[GS_ENDPOINT_MAX];
  int n = snprintf(out, sizeof out, "tcp://%s%s", j->addr.advertise, colon);
  if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof out)
    return GS_FAIL(e, GS_EINVAL, "rank %d: the address %s does not fit", j->rank, out);
  memcpy(text, out, (size_t)n + 1);
  return GS_OK;
}

/* ---- 3. the job secret (secret.c) ---- */

/* What this rank listens on beyond loopback, for the message that asks for
 * a secret: NULL when every socket it binds is on loopback (or is a Unix
 * socket of --transport ipc, or it binds nothing at all). */
static const char *listens_beyond(const gs_job *j) {
  if (j->world == 1) return NULL;
  if (j->addr.wildcard) return "0.0.0.0 (--bind 0.0.0.0)";
  if (!j->ipc && !is_loopback(j->addr.bind)) return j->addr.bind;
  if (j->rank == 0 && !is_loopback(j->addr.master)) return j->addr.master;
  return NULL;
}

void gs_run_id_new(char out[GS_RUN_ID_CHARS + 1]) {
  unsigned char b[GS_RUN_ID_CHARS / 2];
  randombytes_buf(b, sizeof b);
  sodium_bin2hex(out, GS_RUN_ID_CHARS + 1, b, sizeof b);
}

void gs_run_id_of_job(uint64_t token, char out[GS_RUN_ID_CHARS + 1]) {
  unsigned char b[GS_RUN_ID_CHARS / 2];
  crypto_generichash(b, sizeof b, (const unsigned char *)&token, sizeof token,
                     (const unsigned char *)"gradsync run id", 15);
  sodium_bin2hex(out, GS_RUN_ID_CHARS + 1, b, sizeof b);
}

bool gs_job_results_dir(const gs_job *j, char *buf, size_t cap) {
  if (cap) *buf = 0;
  if (j->rank != 0 || !j->first_token) return false;
  char stamp[32], id[GS_RUN_ID_CHARS + 1];
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  gs_run_id_of_job(j->first_token, id);
  const char *dash = strrchr(j->env.source, '-'); /* "bench --nnodes": nnodes */
  snprintf(buf, cap, "results/%s-%s-%.6s", stamp, dash ? dash + 1 : j->env.source, id);
  return true;
}

/* ---- 4. starting the job ---- */

int gs_job_start(gs_job *j, const gs_opts *o, const gs_rank_env *env, gs_err *e) {
  memset(j, 0, sizeof *j);
  j->env = *env;
  j->rank = env->rank;
  j->world = env->world;
  j->local_rank = env->local_rank >= 0 ? env->local_rank : env->rank;
  j->local_world = env->local_world > 0 ? env->local_world : 0;
  j->timeout_ms = (int)(o->timeout_s * 1000.0);
  if (j->rank == 0) j->first_token = gs_rdv_new_token();
  snprintf(j->hostname, sizeof j->hostname, "localhost");
  gethostname(j->hostname, sizeof j->hostname - 1);
  if (env->hosts > 0) /* emulated hosts share the machine's name */
    snprintf(j->hostname, sizeof j->hostname, "host%d", env->host);
  if (env->hosts > 0 && env->delay_line_s > 0)
    gs_wire_delay(env->delay_line_s, env->host, env->world / env->hosts);
  GS_TRY(gs_job_addrs_resolve(env, o->bind, &j->addr, e));
  j->ipc = o->transport && strcmp(o->transport, "tcp");
  if (j->ipc && (!j->addr.loopback || env->hosts > 0))
    return GS_FAIL(e, GS_EINVAL, "rank %d: --transport %s needs every rank on this machine "
                   "(bench's own launcher, or MASTER_ADDR a loopback address); use tcp across "
                   "machines", env->rank, o->transport);
  if (j->world == 1 && !o->secret_file && !getenv("GS_JOB_SECRET")) {
    char fresh[2 * GS_KEY_BYTES + 1]; /* nothing listens: any key will do */
    gs_secret_new(fresh);
    GS_TRY(gs_cred_derive(&j->cred, fresh, strlen(fresh), o->encrypt, e));
  } else {
    GS_TRY(gs_job_secret(o->secret_file, listens_beyond(j), o->encrypt, &j->cred, e));
  }
  /* Rank 0 listens first: our launcher waits for the port before it starts
   * anyone else. */
  if (j->rank != 0 || j->world == 1) return GS_OK;
  char bound[GS_ENDPOINT_MAX] = "";
  int rc = gs_rdv_listen(j->addr.rendezvous, &j->cred, j->world, bound, sizeof bound, &j->rdv, e);
  if (rc < 0 && env->port_derived && !getenv("GS_RENDEZVOUS_PORT")) {
    char was[sizeof e->msg];
    snprintf(was, sizeof was, "%s", e->msg);
    bool slurm = !strcmp(env->source, "slurm");
    return GS_FAIL(e, rc, "%s; the rendezvous took port %d, %s, or export GS_RENDEZVOUS_PORT="
                   "PORT (free on rank 0's host) on every rank", was, env->master_port,
                   slurm ? "derived from SLURM_JOB_ID as MASTER_PORT is not set: export "
                           "MASTER_PORT"
                         : "MASTER_PORT + 1, as torchrun's agent keeps its store on MASTER_PORT: "
                           "choose a MASTER_PORT whose next port is free too (below the "
                           "ephemeral range, /proc/sys/net/ipv4/ip_local_port_range)");
  }
  if (rc < 0) return rc;
  if (env->port_fd < 0) return GS_OK;
  const char *colon = strrchr(bound, ':');
  char line[32];
  int n = snprintf(line, sizeof line, "%s\n", colon ? colon + 1 : "0");
  if (write(env->port_fd, line, (size_t)n) != n)
    return GS_FAIL(e, GS_EIO, "cannot tell the launcher the rendezvous port: %s",
                   strerror(errno));
  close(env->port_fd);
  return GS_OK;
}

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

/* ---- 5. backends and one round ---- */

void gs_job_end(gs_job *j) {
  if (j->prepared && j->state && j->be->discard) j->be->discard(j->state);
  j->state = NULL;
  j->prepared = false;
  free(j->eps);
  j->eps = NULL;
  gs_rdv_job_free(&j->round);
}

void gs_job_close(gs_job *j) {
  gs_job_end(j);
  if (j->rdv) gs_rdv_close(j->rdv);
  j->rdv = NULL;
}

/* World 1: the round without a rendezvous. */
static int alone(gs_job *j, const char *endpoint, uint64_t token, const uint8_t *blob,
                 size_t bloblen, gs_err *e) {
  gs_rdv_job *r = &j->round;
  r->world = 1;
  r->endpoints = calloc(1, sizeof *r->endpoints);
  r->hosts = calloc(1, sizeof *r->hosts);
  if (!r->endpoints || !r->hosts) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  snprintf(r->endpoints[0], GS_ENDPOINT_MAX, "%s", endpoint);
  snprintf(r->hosts[0], GS_HOST_MAX, "%s", j->hostname);
  if (bloblen) memcpy(r->blob, blob, bloblen);
  r->bloblen = bloblen;
  r->job = token;
  r->local_world = 1;
  return GS_OK;
}

int gs_job_meet(gs_job *j, const gs_backend *be, gs_sync_config *cfg, const char *settings,
                const char **phase, gs_err *e) {
  const char *ignored;
  if (!phase) phase = &ignored;
  *phase = "backend";
  gs_job_end(j);
  cfg->rank = j->rank;
  cfg->world = j->world;
  cfg->timeout_ms = j->timeout_ms;
  cfg->host = j->ipc ? GS_WIRE_IPC : j->addr.bind;
  cfg->cred = j->cred;
  cfg->local_rank = j->local_rank;
  cfg->local_world = j->local_world > 0 ? j->local_world : 1;
  cfg->device = j->local_rank;
  j->be = be;
  /* rank 0 makes the job token before anything of its backend starts (a
   * dedicated ps server is forked in prepare and must know it): the first
   * round's at the start (gs_job_results_dir), each later round's afresh, so
   * that no message of a round is taken for the next one's */
  if (j->rank == 0) cfg->job = j->rounds++ ? gs_rdv_new_token() : j->first_token;
  char endpoint[GS_ENDPOINT_MAX] = "";
  GS_TRY(be->prepare(cfg, &j->state, endpoint, e));
  j->prepared = true;
  uint8_t blob[GS_BOOTSTRAP_MAX + 1];
  size_t bloblen = 0;
  int rc = publish(j, endpoint, sizeof endpoint, e);
  if (rc == GS_OK && j->rank == 0 && be->bootstrap)
    rc = be->bootstrap(j->state, cfg, blob, &bloblen, e);
  /* a blob that is an address (the ps server's) is published as one */
  if (rc == GS_OK && bloblen && bloblen <= GS_BOOTSTRAP_MAX && !blob[bloblen - 1] &&
      strlen((char *)blob) + 1 == bloblen) {
    rc = publish(j, (char *)blob, GS_BOOTSTRAP_MAX, e);
    bloblen = strlen((char *)blob) + 1;
  }
  /* ranks that disagree on encryption could meet but never connect */
  size_t slen = strlen(settings) + 32;
  char *all = malloc(slen);
  if (!all) rc = rc < 0 ? rc : GS_FAIL(e, GS_ENOMEM, "out of memory");
  else snprintf(all, slen, "%sencrypt=%d\n", settings, j->cred.encrypt);
  gs_rdv_me me = {.rank = j->rank, .world = j->world, .local_rank = j->local_rank,
                  .host = j->hostname, .endpoint = endpoint, .settings = all,
                  .cred = &j->cred};
  if (rc == GS_OK) *phase = "rendezvous";
  if (rc < 0) {
    /* prepared, not met: gs_job_end discards the state */
  } else if (j->world == 1) {
    rc = alone(j, endpoint, cfg->job, blob, bloblen, e);
  } else if (j->rank == 0) {
    rc = gs_rdv_host(j->rdv, &me, cfg->job, blob, bloblen, j->timeout_ms, &j->round, e);
  } else {
    char master[GS_ADDR_MAX + 32];
    snprintf(master, sizeof master, "tcp://%s:%d", j->addr.master, j->env.master_port);
    if (j->rdv) gs_rdv_close(j->rdv); /* a new round registers afresh */
    j->rdv = NULL;
    rc = gs_rdv_join(master, &me, j->timeout_ms, &j->rdv, &j->round, e);
  }
  free(all);
  if (rc == GS_OK && !(j->eps = calloc((size_t)j->world, sizeof *j->eps)))
    rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (rc < 0) {
    gs_job_end(j);
    return rc;
  }
  for (int i = 0; i < j->world; i++) j->eps[i] = j->round.endpoints[i];
  cfg->endpoints = j->eps;
  cfg->bootstrap = j->round.blob;
  cfg->bootstrap_len = j->round.bloblen;
  cfg->job = j->round.job;
  if (j->local_world <= 0) j->local_world = j->round.local_world;
  cfg->local_world = j->local_world;
  return GS_OK;
}

int gs_job_open(gs_job *j, const gs_sync_config *cfg, gs_sync **out, gs_err *e) {
  if (!j->prepared)
    return GS_FAIL(e, GS_EINVAL, "rank %d: no backend prepared to open", j->rank);
  int rc = j->be->open(j->state, cfg, out, e);
  j->state = NULL; /* open owns it now, success or not */
  j->prepared = false;
  return rc;
}

void gs_job_report_error(gs_job *j, const char *phase, const char *msg) {
  if (j->rdv && j->rank != 0) gs_rdv_report_error(j->rdv, j->rank, phase, msg);
}
