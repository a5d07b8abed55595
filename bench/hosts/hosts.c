/* hosts.c: build, use and tear down a cluster of emulated hosts (hosts.h).
 *
 * Construction, in order: check the capabilities and find iproute2; make a
 * private PID namespace whose init holds the switch's network namespace;
 * fork one holder per host into that PID namespace, each in a fresh network
 * namespace; then drive iproute2 inside those namespaces (fork, setns,
 * exec `ip -batch -` / `tc -batch -`): the bridge, the veth pairs created
 * from the switch with their far end put straight into the host (so no
 * interface ever exists in the caller's namespace), addresses, and tbf on
 * both ends. Any failure kills the PID namespace's init, which takes every
 * process of the cluster with it, and so every namespace and veth pair.
 *
 * Why a PID namespace: PR_SET_PDEATHSIG covers the holders and the spawned
 * processes, but not what a spawned process forks itself; the kernel kills
 * everything in a PID namespace when its init dies, so one SIGKILL (ours on
 * destroy, or the parent-death signal when the caller dies) ends it all.
 *
 * Processes are forked from a caller that may have other threads, so the
 * children do only async-signal-safe work before exec or _exit. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/hosts/hosts_internal.h"

#define SUBNET "10.77.0."
#define PREFIX 24
#define TOOL_TIMEOUT_S 20.0   /* one ip/tc batch; they take milliseconds */
#define START_TIMEOUT_S 10.0  /* a holder's or spawned process's first word */

#define CAP_NET_ADMIN_BIT 12
#define CAP_SYS_ADMIN_BIT 21

/* ---- capabilities and tools ---- */

static uint64_t cap_set(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long v = 0;
  size_t n = strlen(name);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, name, n) == 0 && line[n] == ':') {
      v = strtoull(line + n + 1, NULL, 16);
      break;
    }
  fclose(f);
  return v;
}

static const char *missing_cap(void) {
  uint64_t need[2] = {1ull << CAP_NET_ADMIN_BIT, 1ull << CAP_SYS_ADMIN_BIT};
  const char *names[2] = {"CAP_NET_ADMIN", "CAP_SYS_ADMIN"};
  /* ip and tc are exec'd: they keep root's capabilities only within the
   * bounding set, a non-root caller's only through the ambient set */
  uint64_t eff = cap_set("CapEff");
  uint64_t inherited = geteuid() == 0 ? cap_set("CapBnd") : cap_set("CapAmb");
  for (int i = 0; i < 2; i++)
    if (!(eff & need[i]) || !(inherited & need[i])) return names[i];
  return NULL;
}

static int check_caps(gs_err *e) {
  const char *cap = missing_cap();
  if (!cap) return GS_OK;
  return GS_FAIL(e, GS_EINVAL,
                 "emulated hosts: this process lacks %s (network namespaces and tc shaping "
                 "need CAP_NET_ADMIN and CAP_SYS_ADMIN): run as root (sudo), or in a container "
                 "started with --cap-add=NET_ADMIN --cap-add=SYS_ADMIN",
                 cap);
}

/* The system's directories first: this runs as root, and PATH may not be
 * the system's (it may even name a directory called tc). */
static int find_tool(const char *name, char *path, size_t cap, gs_err *e) {
  const char *env = getenv("PATH");
  char dirs[4096];
  snprintf(dirs, sizeof dirs, "/usr/sbin:/sbin:/usr/bin:/bin:%s", env ? env : "");
  for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    struct stat sb;
    if (!*d) continue;
    snprintf(path, cap, "%s/%s", d, name);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0) return GS_OK;
  }
  return GS_FAIL(e, GS_EINVAL,
                 "emulated hosts: iproute2's `%s` is not installed (apt-get install iproute2)",
                 name);
}

int gs_hosts_usable(gs_err *e) {
  char path[4200];
  GS_TRY(check_caps(e));
  GS_TRY(find_tool("ip", path, sizeof path, e));
  return find_tool("tc", path, sizeof path, e);
}

/* ---- waiting on children ---- */

/* Read what fd delivers until EOF or the deadline; 0 at EOF, -1 timeout. */
static int read_until_eof(int fd, double deadline, char *buf, size_t cap, size_t *len) {
  *len = 0;
  for (;;) {
    double left = deadline - gs_now();
    if (left <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, (int)(left * 1000) + 1);
    if (rc < 0 && errno != EINTR) return 0;
    if (rc <= 0) continue;
    char tmp[512];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    size_t keep = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
    memcpy(buf + *len, tmp, keep);
    *len += keep;
    buf[*len] = '\0';
  }
}

/* Reap pid within timeout_s, killing it first if kill_it; the status, or
 * -1 if it was not ours to reap or did not end in time. */
static int reap(pid_t pid, int kill_it, double timeout_s) {
  if (pid <= 0) return -1;
  if (kill_it) kill(pid, SIGKILL);
  double deadline = gs_now() + timeout_s;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0 && errno != EINTR) return -1;
    if (gs_now() > deadline) return -1;
    usleep(1000);
  }
}

/* ---- process creation inside the cluster ---- */

/* Child side, first thing after fork: die with the caller, and catch a
 * caller that died before prctl took effect: its end of the life pipe is
 * then already closed. */
static void child_bind_to_caller(const gs_hosts *c) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  struct pollfd p = {.fd = c->life[0], .events = POLLIN};
  if (poll(&p, 1, 0) > 0) _exit(127);
}

/* fork() with the child in the cluster's PID namespace (its init when the
 * namespace is new: cluster_pidns < 0). Only this thread's view changes,
 * and it is restored before returning. The parent gets a pidfd too, so
 * that teardown signals and reaps exactly this process even if the caller
 * reaped it and its pid was reused. In the child *pid is 0. */
static int fork_in_cluster(gs_hosts *c, pid_t *pid, int *pidfd, gs_err *e) {
  *pidfd = -1;
  int rc = c->cluster_pidns >= 0 ? setns(c->cluster_pidns, CLONE_NEWPID)
                                 : unshare(CLONE_NEWPID);
  if (rc < 0)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: cannot enter a private PID namespace: %s%s",
                   strerror(errno), errno == EPERM ? " (needs CAP_SYS_ADMIN: run as root)" : "");
  *pid = fork();
  if (*pid == 0) return GS_OK;  /* the child cannot (and need not) go back */
  int fork_errno = errno;
  if (*pid > 0) *pidfd = (int)syscall(SYS_pidfd_open, *pid, 0);
  int pidfd_errno = errno;
  if (setns(c->own_pidns, CLONE_NEWPID) < 0) {
    /* cannot happen for our own namespace; if it did, later forks of this
     * thread would land in the cluster, so refuse to go on */
    rc = GS_FAIL(e, GS_EIO, "emulated hosts: cannot return to our PID namespace: %s",
                 strerror(errno));
  } else if (*pid < 0) {
    return GS_FAIL(e, GS_EIO, "emulated hosts: fork: %s", strerror(fork_errno));
  } else if (*pidfd < 0) {
    rc = GS_FAIL(e, GS_EIO, "emulated hosts: pidfd_open: %s (Linux 5.3 or newer is needed)",
                 strerror(pidfd_errno));
  }
  if (rc < 0 && *pid > 0) {
    kill(*pid, SIGKILL);  /* our child, not reaped yet: the pid is still its */
    waitpid(*pid, NULL, 0);
    if (*pidfd >= 0) close(*pidfd);
    *pidfd = -1;
    *pid = -1;
  }
  return rc;
}

/* Wait (up to timeout_s) for the process behind pidfd to end and reap it,
 * unless someone else already did; then close the pidfd. */
static void collect(int pidfd, double timeout_s) {
  if (pidfd < 0) return;
  double deadline = gs_now() + timeout_s;
  siginfo_t si;
  for (;;) {
    si.si_pid = 0;
    if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) < 0 && errno != EINTR) break;
    if (si.si_pid != 0 || gs_now() > deadline) break;
    usleep(1000);
  }
  close(pidfd);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = write(fd, text, strlen(text));
  (void)n;
  close(fd);
}

/* A holder: a process that sits in a fresh network namespace until the
 * caller goes (life pipe EOF) or kills it. It keeps no descriptor of the
 * caller's but the two it needs, so it holds nothing else open. */
static void holder_main(gs_hosts *c, int ready_w, int is_init) {
  child_bind_to_caller(c);
  dup2(c->devnull, 0);
  dup2(c->devnull, 1);
  dup2(c->devnull, 2);
  int a = c->life[0] < ready_w ? c->life[0] : ready_w;
  int b = c->life[0] < ready_w ? ready_w : c->life[0];
  if (a > 3) close_range(3, (unsigned)a - 1, 0);
  if (b > a + 1) close_range((unsigned)a + 1, (unsigned)b - 1, 0);
  close_range((unsigned)b + 1, ~0u, 0);
  if (is_init) {
    /* orphans of the cluster are reparented to us: let the kernel reap them */
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigaction(SIGCHLD, &sa, NULL);
  }
  unsigned char st = 0;
  if (unshare(CLONE_NEWNET) < 0) {
    st = (unsigned char)errno;
  } else {
    /* no IPv6 chatter (router solicitations, MLD) on the links' counters */
    write_file("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
    write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
  }
  if (write(ready_w, &st, 1) != 1 || st) _exit(1);
  close(ready_w);
  char ch;
  while (read(c->life[0], &ch, 1) < 0 && errno == EINTR) {
  }
  _exit(0);
}

static int start_holder(gs_hosts *c, gs_node *n, int is_init, const char *what, gs_err *e) {
  int rp[2];
  if (pipe2(rp, O_CLOEXEC) < 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: pipe: %s", strerror(errno));
  pid_t pid;
  int rc = fork_in_cluster(c, &pid, &n->pidfd, e);
  if (rc == 0 && pid == 0) holder_main(c, rp[1], is_init);
  close(rp[1]);
  if (rc < 0) {
    close(rp[0]);
    return rc;
  }
  n->pid = pid;
  char buf[8];
  size_t len = 0;
  read_until_eof(rp[0], gs_now() + START_TIMEOUT_S, buf, sizeof buf, &len);
  close(rp[0]);
  if (len != 1 || buf[0] != 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: the %s's namespace could not be made: %s", what,
                   len == 1 ? strerror((unsigned char)buf[0]) : "its holder died or hung");
  snprintf(n->netns, sizeof n->netns, "/proc/%d/ns/net", (int)pid);
  n->nsfd = open(n->netns, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (n->nsfd < 0 || fstat(n->nsfd, &sb) < 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot open %s: %s", n->netns, strerror(errno));
  n->ino = (uint64_t)sb.st_ino;
  return GS_OK;
}

/* Run `tool -batch -` with batch on its stdin, inside the network
 * namespace nsfd (or a fresh one when nsfd < 0). Its output goes into out.
 * Returns its exit status (0 = all commands succeeded), or -1. */
static int run_batch(const char *tool, int nsfd, const char *batch, char *out, size_t cap) {
  out[0] = '\0';
  int in = memfd_create("gs-hosts-batch", MFD_CLOEXEC);
  int op[2] = {-1, -1};
  if (in < 0 || write(in, batch, strlen(batch)) != (ssize_t)strlen(batch) ||
      lseek(in, 0, SEEK_SET) < 0 || pipe2(op, O_CLOEXEC) < 0) {
    snprintf(out, cap, "cannot prepare the %s batch: %s", tool, strerror(errno));
    if (in >= 0) close(in);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in, 0);
    dup2(op[1], 1);
    dup2(op[1], 2);
    if (nsfd >= 0 ? setns(nsfd, CLONE_NEWNET) : unshare(CLONE_NEWNET)) {
      static const char msg[] = "cannot enter the namespace\n";
      ssize_t w = write(2, msg, sizeof msg - 1);
      (void)w;
      _exit(126);
    }
    char *argv[] = {(char *)tool, "-batch", "-", NULL};
    execv(tool, argv);
    static const char msg[] = "cannot execute it\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  close(in);
  close(op[1]);
  if (pid < 0) {
    snprintf(out, cap, "fork: %s", strerror(errno));
    close(op[0]);
    return -1;
  }
  size_t len;
  int timed_out = read_until_eof(op[0], gs_now() + TOOL_TIMEOUT_S, out, cap, &len) < 0;
  close(op[0]);
  int st = reap(pid, timed_out, 5.0);
  if (timed_out) snprintf(out, cap, "%s did not finish within %.0f s", tool, TOOL_TIMEOUT_S);
  while (len > 0 && out[len - 1] == '\n') out[--len] = '\0';
  if (st < 0 || timed_out) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int batch_in(const char *tool, const gs_node *n, const char *batch, const char *where,
                    gs_err *e) {
  char out[768];
  if (run_batch(tool, n->nsfd, batch, out, sizeof out) == 0) return GS_OK;
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = ' ';
  return GS_FAIL(e, GS_EIO, "emulated hosts: setting up %s with %s failed: %s", where, tool,
                 out[0] ? out : "no message");
}

/* ---- the cluster ---- */

int gs_hosts_netem(gs_err *e) {
  char tc[256], out[512];
  GS_TRY(check_caps(e));
  GS_TRY(find_tool("tc", tc, sizeof tc, e));
  int rc = run_batch(tc, -1, "qdisc add dev lo root netem delay 1ms\n", out, sizeof out);
  if (rc < 0) return GS_FAIL(e, GS_EIO, "emulated hosts: probing for netem: %s", out);
  return rc == 0;
}

static void tbf_line(char *s, size_t cap, const gs_hosts *c, const gs_node *h, const char *dev) {
  int n = snprintf(s, cap, "qdisc add dev %s root handle 1: tbf rate %llubit burst %llu limit %llu\n",
                   dev, (unsigned long long)h->rate, (unsigned long long)h->burst,
                   (unsigned long long)h->limit);
  if (c->delay > 0 && n > 0 && (size_t)n < cap)
    snprintf(s + n, cap - (size_t)n, "qdisc add dev %s parent 1:1 handle 10: netem delay %.0fus\n",
             dev, c->delay * 0.5e6);
}

/* The batches: the switch's bridge and veth pairs first (each pair's far
 * end created directly in its host's namespace), then each host's side,
 * then the shaping on both ends. */
static int wire(gs_hosts *c, gs_err *e) {
  size_t cap = 256 + (size_t)c->k * 512;
  char *b = malloc(cap);
  if (!b) return GS_FAIL(e, GS_ENOMEM, "emulated hosts: out of memory");
  size_t n = (size_t)snprintf(b, cap, "link set lo up\nlink add name sw0 type bridge\n"
                                      "link set sw0 up\n");
  for (int h = 0; h < c->k && n < cap; h++)
    n += (size_t)snprintf(b + n, cap - n,
                          "link add name port%d type veth peer name eth0 netns %s\n"
                          "link set port%d master sw0\nlink set port%d up\n",
                          h, c->host[h].netns, h, h);
  int rc = batch_in(c->ip, &c->sw, b, "the switch", e);
  for (int h = 0; rc == 0 && h < c->k; h++) {
    char where[32];
    snprintf(where, sizeof where, "host %d", h);
    snprintf(b, cap, "link set lo up\naddr add %s/%d dev eth0\nlink set eth0 up\n",
             c->host[h].addr, PREFIX);
    rc = batch_in(c->ip, &c->host[h], b, where, e);
    if (rc == 0) {
      tbf_line(b, cap, c, &c->host[h], "eth0");
      rc = batch_in(c->tc, &c->host[h], b, where, e);
    }
  }
  for (int h = 0, used = 0; rc == 0 && h < c->k; h++) {
    char dev[16];
    snprintf(dev, sizeof dev, "port%d", h);
    tbf_line(b + used, cap - (size_t)used, c, &c->host[h], dev);
    used += (int)strlen(b + used);
  }
  if (rc == 0) rc = batch_in(c->tc, &c->sw, b, "the switch", e);
  free(b);
  return rc;
}

static int check_cfg(const gs_hosts_cfg *cfg, gs_err *e) {
  if (cfg->hosts < 1 || cfg->hosts > GS_HOSTS_MAX)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: %d hosts asked, 1 to %d possible", cfg->hosts,
                   GS_HOSTS_MAX);
  if (cfg->rate_bps < 8000)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: link rate %llu bit/s is too low (at least 8kbit)",
                   (unsigned long long)cfg->rate_bps);
  for (int i = 0; cfg->host_rates && i < cfg->host_rates->n; i++) {
    const gs_host_rates *r = cfg->host_rates;
    if (r->host[i] < 0 || r->host[i] >= cfg->hosts)
      return GS_FAIL(e, GS_EINVAL, "emulated hosts: host %d's link is given a rate, but the "
                     "hosts are 0..%d", r->host[i], cfg->hosts - 1);
    if (r->bps[i] < 8000)
      return GS_FAIL(e, GS_EINVAL, "emulated hosts: host %d's link rate %llu bit/s is too low "
                     "(at least 8kbit)", r->host[i], (unsigned long long)r->bps[i]);
  }
  if (cfg->host_cpus != 0) GS_TRY(gs_hosts_cpus_check(cfg->host_cpus, e));
  if (!(cfg->delay_s >= 0 && cfg->delay_s < 10))
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: link delay %g s is not in [0, 10)", cfg->delay_s);
  return GS_OK;
}

static int build(gs_hosts *c, const gs_hosts_cfg *cfg, gs_err *e) {
  GS_TRY(check_caps(e));
  GS_TRY(find_tool("ip", c->ip, sizeof c->ip, e));
  GS_TRY(find_tool("tc", c->tc, sizeof c->tc, e));
  if (cfg->delay_s > 0) {
    int netem = gs_hosts_netem(e);
    if (netem < 0) return netem;
    if (!netem)
      return GS_FAIL(e, GS_EINVAL, "emulated hosts: a link delay needs netem, which this kernel "
                     "lacks (CONFIG_NET_SCH_NETEM): leave the delay to the link layer's delay line");
  }
  if (pipe2(c->life, O_CLOEXEC) < 0 ||
      (c->devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
      (c->own_pidns = open("/proc/thread-self/ns/pid", O_RDONLY | O_CLOEXEC)) < 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: %s", strerror(errno));
  GS_TRY(start_holder(c, &c->sw, 1, "switch", e));
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)c->sw.pid);
  if ((c->cluster_pidns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot open %s: %s", path, strerror(errno));
  for (int h = 0; h < c->k; h++) {
    gs_node *n = &c->host[h];
    snprintf(n->addr, sizeof n->addr, SUBNET "%u", (unsigned char)(h + 1));
    char what[32];
    snprintf(what, sizeof what, "host %d", h);
    GS_TRY(start_holder(c, n, 0, what, e));
  }
  GS_TRY(wire(c, e));
  if (cfg->host_cpus > 0) GS_TRY(gs_hosts_cpu_open(c, cfg->host_cpus, e));
  return gs_hosts_links_open(c, e);
}

int gs_hosts_create(const gs_hosts_cfg *cfg, gs_hosts **out, gs_err *e) {
  *out = NULL;
  GS_TRY(check_cfg(cfg, e));
  gs_hosts *c = calloc(1, sizeof *c);
  gs_node *host = c ? calloc((size_t)cfg->hosts, sizeof *host) : NULL;
  if (!host) {
    free(c);
    return GS_FAIL(e, GS_ENOMEM, "emulated hosts: out of memory");
  }
  c->host = host;
  c->k = cfg->hosts;
  c->rate = cfg->rate_bps;
  gs_hosts_tbf(c->rate, &c->burst, &c->limit);
  if (cfg->burst_bytes) c->burst = cfg->burst_bytes;
  if (cfg->limit_bytes) c->limit = cfg->limit_bytes;
  c->delay = cfg->delay_s;
  c->life[0] = c->life[1] = c->devnull = c->own_pidns = c->cluster_pidns = -1;
  c->sw.nsfd = c->sw.pidfd = -1;
  for (int h = 0; h < c->k; h++) {
    gs_node *n = &c->host[h];
    n->nsfd = n->devfd = n->pidfd = n->cgfd = -1;
    n->rate = gs_host_rates_of(cfg->host_rates, h, c->rate);
    n->burst = c->burst;
    n->limit = c->limit;
    if (n->rate != c->rate) gs_hosts_tbf(n->rate, &n->burst, &n->limit);
  }
  gs_hosts_links_init(c);
  int rc = build(c, cfg, e);
  if (rc < 0) {
    gs_hosts_destroy(c);
    return rc;
  }
  *out = c;
  return GS_OK;
}

void gs_hosts_destroy(gs_hosts *c) {
  if (!c) return;
  gs_hosts_sample_stop(c);
  gs_hosts_links_close(c);
  /* the init's death makes the kernel kill the whole PID namespace */
  if (c->sw.pidfd >= 0) syscall(SYS_pidfd_send_signal, c->sw.pidfd, SIGKILL, NULL, 0);
  if (c->life[1] >= 0) close(c->life[1]);
  /* reap what was forked from here: zombies of ours in the namespace
   * (holders, spawned processes the caller has not reaped) would keep its
   * init from finishing its exit */
  for (int h = 0; h < c->k; h++) collect(c->host[h].pidfd, 5.0);
  for (size_t i = 0; i < c->nspawned; i++) collect(c->spawned[i], 5.0);
  collect(c->sw.pidfd, 5.0);
  gs_hosts_cpu_close(c);
  int fds[] = {c->life[0], c->devnull, c->own_pidns, c->cluster_pidns, c->sw.nsfd};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    if (fds[i] >= 0) close(fds[i]);
  for (int h = 0; h < c->k; h++)
    if (c->host[h].nsfd >= 0) close(c->host[h].nsfd);
  gs_hosts_links_free(c);
  free(c->spawned);
  free(c->host);
  free(c);
}

int gs_hosts_count(const gs_hosts *c) { return c->k; }

bool gs_hosts_has_delay(const gs_hosts *c) { return c->delay > 0; }

int gs_hosts_info(const gs_hosts *c, int h, gs_host_info *out) {
  memset(out, 0, sizeof *out);
  if (h < GS_HOSTS_SWITCH || h >= c->k) return GS_EINVAL;
  const gs_node *n = h == GS_HOSTS_SWITCH ? &c->sw : &c->host[h];
  out->host = h;
  snprintf(out->addr, sizeof out->addr, "%s", n->addr);
  out->prefix = PREFIX;
  snprintf(out->ifname, sizeof out->ifname, "%s", h == GS_HOSTS_SWITCH ? "sw0" : "eth0");
  if (h != GS_HOSTS_SWITCH) snprintf(out->port, sizeof out->port, "port%d", h);
  out->holder = n->pid;
  snprintf(out->netns, sizeof out->netns, "%s", n->netns);
  out->netns_ino = n->ino;
  out->rate_bps = h == GS_HOSTS_SWITCH ? 0 : n->rate;
  if (h != GS_HOSTS_SWITCH && c->cgroup[0]) {
    out->cpus = c->host_cpus;
    snprintf(out->cgroup, sizeof out->cgroup, "%s/h%d", c->cgroup, h);
  }
  return GS_OK;
}

/* In a spawned process: a /proc of the cluster's PID namespace, in a mount
 * namespace of its own (the machine's mounts are untouched), so that
 * /proc/<getpid()> names this process, as tools that read it expect (the
 * sanitizers' leak check, for one). */
static int own_proc(void) {
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return -1;
  return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

int gs_hosts_spawn(gs_hosts *c, int h, char *const argv[], char *const envp[], pid_t *pid,
                   gs_err *e) {
  *pid = -1;
  if (h < 0 || h >= c->k)
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: no host %d (there are %d)", h, c->k);
  if (!argv || !argv[0])
    return GS_FAIL(e, GS_EINVAL, "emulated hosts: spawn on host %d without a program", h);
  int *grown = realloc(c->spawned, (c->nspawned + 1) * sizeof *grown);
  if (!grown) return GS_FAIL(e, GS_ENOMEM, "emulated hosts: out of memory");
  c->spawned = grown;
  int sp[2];
  if (pipe2(sp, O_CLOEXEC) < 0) return GS_FAIL(e, GS_EIO, "emulated hosts: pipe: %s", strerror(errno));
  pid_t child;
  int pidfd, rc = fork_in_cluster(c, &child, &pidfd, e);
  if (rc == 0 && child == 0) {
    child_bind_to_caller(c);
    int err = 0;
    if (gs_hosts_cpu_join(c, h) < 0 || setns(c->host[h].nsfd, CLONE_NEWNET) < 0 ||
        own_proc() < 0) {
      err = errno;
    } else {
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, NULL);
      if (envp)
        execvpe(argv[0], argv, envp);
      else
        execvp(argv[0], argv);
      err = errno;
    }
    ssize_t w = write(sp[1], &err, sizeof err);
    (void)w;
    _exit(127);
  }
  close(sp[1]);
  if (rc < 0) {
    close(sp[0]);
    return rc;
  }
  /* the exec-status pipe closes on exec: EOF means the program runs */
  char buf[16];
  size_t len = 0;
  int timed_out = read_until_eof(sp[0], gs_now() + START_TIMEOUT_S, buf, sizeof buf, &len) < 0;
  close(sp[0]);
  if (timed_out || len > 0) {
    int err = 0;
    if (len >= sizeof err) memcpy(&err, buf, sizeof err);
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    collect(pidfd, 5.0);
    return GS_FAIL(e, GS_EIO, "emulated hosts: cannot start %s on host %d: %s", argv[0], h,
                   timed_out ? "it did not exec in time" : strerror(err));
  }
  c->spawned[c->nspawned++] = pidfd;
  *pid = child;
  return GS_OK;
}
