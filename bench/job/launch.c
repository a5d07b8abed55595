/* launch.c: spawn the ranks of one run on this machine and watch them.
 *
 * Each rank is this same executable, re-run with the user's flags plus the
 * run's overrides, and the torchrun variables in its environment. Rank 0
 * starts first, binds the rendezvous on an ephemeral port and writes the
 * port into a pipe; the other ranks start with MASTER_PORT set to it (so no
 * port is ever guessed, and parallel runs never collide).
 *
 * Watching: when a rank fails, the others get up to the job's timeout to
 * notice and report it themselves (their errors name the missing rank and
 * the phase); whatever is left then is killed. SIGINT / SIGTERM to the
 * launcher are forwarded, and stragglers are killed after a grace period.
 * That watching (gs_launch_watch) also serves bench --nnodes (nodes.c).
 *
 * With --ps-server-hosts the K ps servers start before the ranks: each is
 * this executable again with GS_PS_SERVE=k (bench's server role), on host
 * hosts + k of the cluster when there is one; each writes its address on a
 * pipe, and the ranks find them all in GS_PS_SERVERS. The servers are
 * waited for after the ranks (they end with the job), then killed. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/hosts/hosts.h"
#include "bench/job/job.h"

/* The environment of rank `rank`: ours, with the job's variables set (a
 * variable given as NULL is removed). Built before fork: the launcher may
 * have threads (the link sampler), and a forked child may not malloc. */
typedef struct envvar {
  const char *key;
  char val[128];
  const char *big;          /* instead of val when set */
  bool set;
} envvar;

/* rank >= 0: rank `rank`'s; else ps server -rank - 1's (GS_PS_SERVE, its
 * address on port_fd). servers: the ps servers' addresses for the ranks,
 * then their pids (on emulated hosts, where rank 0 reads their links). */
static char **rank_envp(const gs_launch *l, int rank, int port, int port_fd, const char *secret,
                        gs_hosts *c, const char *const servers[2]) {
  int per_host = c ? l->world / l->hosts : l->world;
  int h = rank >= 0 ? rank / per_host : l->hosts + (-rank - 1);
  gs_host_info hi = {0};
  if (c) gs_hosts_info(c, h, &hi);
  static const char *const keys[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "GS_LAUNCHED", "GS_JOB_SECRET", "GS_RUN_DIR", "GS_PORT_FD",
    "GS_HOST", "GS_HOSTS", "GS_HOST_ADDR", "GS_DELAY_LINE", "GS_PS_SERVE", "GS_PS_SERVE_FD",
    "GS_PS_SERVERS", "GS_PS_SERVER_PIDS"};
  enum { NV = sizeof keys / sizeof keys[0] };
  envvar v[NV];
  memset(v, 0, sizeof v);
  for (int i = 0; i < NV; i++) v[i].key = keys[i];
#define PUT(i, ...) (v[i].set = true, snprintf(v[i].val, sizeof v[i].val, __VA_ARGS__))
  /* a path may be longer than val: pointed to, never cut */
#define PUT_BIG(i, s) (v[i].set = true, v[i].big = (s))
  if (rank < 0) {
    /* a ps server: the job's secret and where to bind, no rank */
    PUT(7, "%s", secret);
    PUT(12, "%s", c ? hi.addr : "127.0.0.1");
    PUT(14, "%d", -rank - 1);
    PUT(15, "%d", port_fd);
    if (l->run_dir) PUT_BIG(8, l->run_dir); /* a stale run's server writes its log there */
    goto built;
  }
  if (servers) {
    PUT_BIG(16, servers[0]);
    if (c) PUT_BIG(17, servers[1]);
  }
  PUT(0, "%d", rank);
  PUT(1, "%d", rank % per_host);
  PUT(2, "%d", l->world);
  PUT(3, "%d", per_host);
  if (c) {
    gs_host_info h0;
    gs_hosts_info(c, 0, &h0);
    PUT(4, "%s", h0.addr);
  } else {
    PUT(4, "127.0.0.1");
  }
  PUT(5, "%d", port);
  PUT(6, "1");
  PUT(7, "%s", secret);
  if (l->run_dir) PUT_BIG(8, l->run_dir);
  if (port_fd >= 0) PUT(9, "%d", port_fd);
  if (c) {
    PUT(10, "%d", h);
    PUT(11, "%d", l->hosts);
    PUT(12, "%s", hi.addr);
    if (l->latency_s > 0 && !gs_hosts_has_delay(c)) PUT(13, "%.9g", l->latency_s);
  }
built:;
#undef PUT
#undef PUT_BIG
  size_t n = 0;
  while (environ[n]) n++;
  char **envp = calloc(n + NV + 1, sizeof *envp);
  if (!envp) return NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    bool ours = false;
    for (int j = 0; j < NV && !ours; j++) {
      size_t kl = strlen(v[j].key);
      ours = !strncmp(environ[i], v[j].key, kl) && environ[i][kl] == '=';
    }
    if (!ours && !(envp[m++] = strdup(environ[i]))) goto oom;
  }
  for (int j = 0; j < NV; j++)
    if (v[j].set && asprintf(&envp[m++], "%s=%s", v[j].key, v[j].big ? v[j].big : v[j].val) < 0) {
      envp[--m] = NULL;
      goto oom;
    }
  return envp;
oom:
  for (size_t i = 0; i < m; i++) free(envp[i]);
  free(envp);
  return NULL;
}

static void envp_free(char **envp) {
  for (size_t i = 0; envp && envp[i]; i++) free(envp[i]);
  free(envp);
}

/* Start rank `rank` (< 0: a ps server, as rank_envp): this executable
 * again, argv plus the run's flags, on its emulated host when there is a
 * cluster. */
static pid_t spawn(const gs_launch *l, int rank, int port, int port_fd, const char *secret,
                   gs_hosts *c, const char *const servers[2], char *why, size_t cap) {
  char **envp = rank_envp(l, rank, port, port_fd, secret, c, servers);
  char **argv = calloc((size_t)(l->argc + l->nextra + 1), sizeof *argv);
  if (!envp || !argv) {
    envp_free(envp);
    free(argv);
    snprintf(why, cap, "out of memory starting rank %d", rank);
    return -1;
  }
  int n = 0;
  for (int i = 0; i < l->argc; i++) argv[n++] = l->argv[i];
  for (int i = 0; i < l->nextra; i++) argv[n++] = (char *)l->extra[i];
  argv[n] = NULL;
  pid_t pid = -1;
  if (c) {
    gs_err e = {0};
    if (!l->exec) argv[0] = "/proc/self/exe";
    int h = rank >= 0 ? rank / (l->world / l->hosts) : l->hosts + (-rank - 1);
    if (gs_hosts_spawn(c, h, argv, envp, &pid, &e) < 0) {
      snprintf(why, cap, "rank %d: %s", rank, e.msg);
      pid = -1;
    }
  } else if ((pid = fork()) == 0) {
    /* child: die with the launcher, become rank `rank` */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    execve("/proc/self/exe", argv, envp);
    fprintf(stderr, "bench: cannot start rank %d: %s\n", rank, strerror(errno));
    _exit(127);
  } else if (pid < 0) {
    snprintf(why, cap, "fork rank %d: %s", rank, strerror(errno));
  }
  envp_free(envp);
  free(argv);
  return pid;
}

static void describe(int rank, int status, char *buf, size_t cap) {
  if (WIFEXITED(status))
    snprintf(buf, cap, "rank %d exited with status %d", rank, WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, cap, "rank %d was killed by signal %d (%s)", rank, WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else
    snprintf(buf, cap, "rank %d ended with wait status %d", rank, status);
}

/* Read rank 0's port from the pipe, watching that rank 0 stays alive. */
static int read_port(int fd, pid_t rank0, double timeout_s, int *status) {
  char buf[32];
  size_t got = 0;
  double deadline = gs_now() + timeout_s;
  while (gs_now() < deadline && !gs_interrupted) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, 50);
    if (rc > 0) {
      ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
      if (n <= 0) break;
      got += (size_t)n;
      buf[got] = 0;
      if (strchr(buf, '\n')) return atoi(buf);
    }
    if (waitpid(rank0, status, WNOHANG) == rank0) return -2;
  }
  return -1;
}

/* The run's emulated hosts, or NULL for this machine's loopback. */
static int cluster_open(const gs_launch *l, gs_hosts **c, char *why, size_t cap) {
  *c = NULL;
  if (l->hosts <= 0) return 0;
  gs_hosts_cfg cfg = {.hosts = l->hosts + l->ps_servers_own, .rate_bps = l->link_bps,
                      .delay_s = l->latency_s, .host_rates = l->link_host,
                      .host_cpus = l->host_cpus};
  gs_err e = {0};
  /* the delay: netem where the kernel has it, else the wire's delay line */
  int netem = l->latency_s > 0 ? gs_hosts_netem(&e) : 1;
  if (netem == 0) cfg.delay_s = 0;
  if (netem < 0 || gs_hosts_create(&cfg, c, &e) < 0) {
    snprintf(why, cap, "%s", e.msg);
    return e.code == GS_EINVAL ? 2 : 1;
  }
  return 0;
}

/* Start the ps servers of their own; list[0] gets their addresses, list[1]
 * their pids as their hosts see them, comma separated, for the ranks.
 * spids[k] 0: not started. */
static int start_servers(const gs_launch *l, const char *secret, gs_hosts *c, pid_t *spids,
                         char *list[2], char *why, size_t cap) {
  int K = l->ps_servers_own;
  size_t room = (size_t)K * 300, used = 0, pused = 0;
  list[0] = calloc(room, 1);
  list[1] = calloc((size_t)K * 16 + 1, 1);
  if (!list[0] || !list[1]) {
    snprintf(why, cap, "out of memory");
    return 1;
  }
  for (int k = 0; k < K; k++) {
    int p[2];
    if (pipe(p) < 0) {
      snprintf(why, cap, "pipe: %s", strerror(errno));
      return 1;
    }
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fflush(NULL);
    spids[k] = spawn(l, -k - 1, 0, p[1], secret, c, NULL, why, cap);
    close(p[1]);
    if (spids[k] <= 0) {
      spids[k] = 0;
      close(p[0]);
      return 1;
    }
    char line[300];
    int got = gs_read_line(p[0], gs_now() + l->timeout_s, line, sizeof line);
    close(p[0]);
    char *sp = got == 1 ? strchr(line + 2, ' ') : NULL;
    if (sp) *sp++ = '\0';
    if (got != 1 || strncmp(line, "E ", 2) || !sp || strlen(line + 2) + 2 > room - used ||
        strspn(sp, "0123456789") != strlen(sp) || strlen(sp) > 12) {
      snprintf(why, cap, "ps server %d of %d did not report its address within %.0f s%s%s", k,
               K, l->timeout_s, got == 1 ? ": " : " (it exited: see its error above)",
               got == 1 ? line : "");
      return 1;
    }
    used += (size_t)snprintf(list[0] + used, room - used, "%s%s", k ? "," : "", line + 2);
    pused += (size_t)snprintf(list[1] + pused, 16, "%s%s", k ? "," : "", sp);
  }
  return 0;
}

/* The ranks are done: the servers end with the job (or, when it failed,
 * by their own timeout); stragglers are killed. */
static int reap_servers(const pid_t *spids, int K, int rc, double timeout_s, char *why,
                        size_t cap) {
  double deadline = gs_now() + (rc || gs_interrupted ? 1.0 : timeout_s + 2.0);
  for (int k = 0; k < K; k++) {
    if (spids[k] <= 0) continue;
    int st = 0;
    pid_t w;
    while ((w = waitpid(spids[k], &st, WNOHANG)) == 0 && gs_now() < deadline) usleep(20000);
    if (w == 0) {
      kill(spids[k], SIGKILL);
      waitpid(spids[k], &st, 0);
      if (!rc) {
        rc = 1;
        snprintf(why, cap, "ps server %d of %d did not end with the job: killed", k, K);
      }
    } else if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      rc = 1;
      snprintf(why, cap, "ps server %d of %d failed (wait status %d)", k, K, st);
    }
  }
  return rc;
}

int gs_launch_run(const gs_launch *l, char *why, size_t cap) {
  int world = l->world;
  int rc = 0, status0 = 0;
  *why = 0;
  gs_hosts *c = NULL;
  if ((rc = cluster_open(l, &c, why, cap))) return rc;
  /* a fresh secret per job: a rank of an earlier job cannot join this one */
  char secret[2 * GS_KEY_BYTES + 1];
  gs_secret_new(secret);
  int K = l->ps_servers_own;
  pid_t *spids = calloc((size_t)K + 1, sizeof *spids);
  char *servers[2] = {NULL, NULL};
  if (!spids) {
    snprintf(why, cap, "out of memory");
    rc = 1;
  } else if (K > 0) {
    rc = start_servers(l, secret, c, spids, servers, why, cap);
  }
  const char *const *envs = K > 0 ? (const char *const *)servers : NULL;
  if (rc) {
    if (spids) reap_servers(spids, K, rc, 0, why, cap);
    free(spids);
    free(servers[0]);
    free(servers[1]);
    if (c) gs_hosts_destroy(c);
    return rc;
  }
  pid_t *pids = calloc((size_t)world, sizeof *pids);
  int fds[2] = {-1, -1};
  if (!pids) {
    snprintf(why, cap, "out of memory");
    rc = 1;
  } else if (pipe(fds) < 0) {
    snprintf(why, cap, "pipe: %s", strerror(errno));
    rc = 1;
  }
  if (rc) {
    free(pids);
    reap_servers(spids, K, rc, 0, why, cap);
    free(spids);
    free(servers[0]);
    free(servers[1]);
    if (c) gs_hosts_destroy(c);
    return rc;
  }
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fflush(NULL);
  gs_hostlink_stat *first = NULL;
  if (l->links && c && (first = calloc((size_t)l->hosts, sizeof *first))) {
    gs_err se = {0};
    gs_hosts_sample_start(c, 0.005, &se); /* without it, busy time is coarser */
    for (int h = 0; h < l->hosts; h++) gs_hosts_link(c, h, &first[h], &se);
  }
  /* world 1 has no rendezvous, and a command of the user's none of ours:
   * nothing to wait for */
  bool rdv = world > 1 && !l->exec;
  pids[0] = spawn(l, 0, l->exec ? l->exec_port : 0, rdv ? fds[1] : -1, secret, c, envs, why,
                  cap);
  close(fds[1]);
  int port = -3;
  if (pids[0] > 0)
    port = rdv ? read_port(fds[0], pids[0], l->timeout_s, &status0) : l->exec ? l->exec_port : 1;
  close(fds[0]);
  if (pids[0] <= 0) {
    pids[0] = 0;
    rc = 1;
  } else if (port <= 0) {
    if (port == -2) {
      pids[0] = 0; /* reaped */
      describe(0, status0, why, cap);
    } else {
      snprintf(why, cap, gs_interrupted ? "interrupted" : "rank 0 did not open the rendezvous "
               "within %.0f s", l->timeout_s);
    }
    rc = 1;
  }
  for (int r = 1; r < world && !rc; r++) {
    pids[r] = spawn(l, r, port, -1, secret, c, envs, why, cap);
    if (pids[r] < 0) {
      pids[r] = 0;
      rc = 1;
    }
  }
  rc = gs_launch_watch(pids, world, 0, rc, l->timeout_s, l->exec, why, cap);
  rc = reap_servers(spids, K, rc, l->timeout_s, why, cap);
  free(pids);
  free(spids);
  free(servers[0]);
  free(servers[1]);
  if (first) {
    gs_err se = {0};
    for (int h = 0; h < l->hosts; h++) {
      gs_hostlink_stat end;
      if (gs_hosts_link(c, h, &end, &se) < 0) end = first[h];
      l->links[h] = (gs_hostlink_stat){.t = end.t - first[h].t,
                                   .up_bytes = end.up_bytes - first[h].up_bytes,
                                   .down_bytes = end.down_bytes - first[h].down_bytes,
                                   .up_busy_s = end.up_busy_s - first[h].up_busy_s,
                                   .down_busy_s = end.down_busy_s - first[h].down_busy_s,
                                   .any_busy_s = end.any_busy_s - first[h].any_busy_s};
    }
    *l->nlinks = l->hosts;
    free(first);
  }
  if (c) gs_hosts_destroy(c);
  return rc;
}

int gs_launch_watch(pid_t *pids, int n, int first_rank, int rc, double timeout_s, bool any_end,
                    char *why, size_t cap) {
  int *status = calloc((size_t)n + 1, sizeof *status);
  bool *done = calloc((size_t)n + 1, sizeof *done);
  if (!status || !done) {
    /* cannot watch: stop them rather than leave them unwatched */
    for (int r = 0; r < n; r++)
      if (pids[r] > 0) kill(pids[r], SIGKILL);
    for (int r = 0; r < n; r++)
      if (pids[r] > 0) waitpid(pids[r], NULL, 0);
    free(status);
    free(done);
    snprintf(why, cap, "out of memory");
    return 1;
  }
  /* Wait for everyone. After the first failure (or an interrupt) the others
   * have the job's timeout to stop by themselves, then they are killed. */
  double kill_at = rc ? gs_now() + timeout_s + 2.0 : 0;
  bool forwarded = false, killed = false, lingering = false;
  int left = 0;
  for (int r = 0; r < n; r++) left += pids[r] > 0;
  while (left > 0) {
    for (int r = 0; r < n; r++) {
      if (pids[r] <= 0 || done[r]) continue;
      pid_t p = waitpid(pids[r], &status[r], WNOHANG);
      if (p != pids[r]) continue;
      done[r] = true;
      left--;
      bool ok = WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0;
      /* rank 0 ends the job once every rank has reported: the others have
       * the timeout to exit too (a stopped one would hold the launcher) */
      if (ok && r == 0 && first_rank == 0 && !kill_at && !any_end) {
        kill_at = gs_now() + timeout_s + 2.0;
        lingering = true;
      }
      /* a program of the user's has no such report: whichever rank ends
       * first, the others have the timeout */
      if (any_end && !kill_at) kill_at = gs_now() + timeout_s + 2.0;
      /* the first rank to fail with a usage error (2) makes the run one */
      if (!ok && rc == 0 && WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 2) rc = 2;
      if (!ok && !killed) {
        char line[256];
        describe(first_rank + r, status[r], line, sizeof line);
        size_t used = strlen(why);
        if (used + 8 < cap) snprintf(why + used, cap - used, "%s%s", used ? "; " : "", line);
        if (!kill_at) kill_at = gs_now() + timeout_s + 2.0;
        if (rc == 0) rc = 1;
      }
    }
    if (gs_interrupted && !forwarded) {
      for (int r = 0; r < n; r++)
        if (pids[r] > 0 && !done[r]) kill(pids[r], gs_interrupted > 0 ? gs_interrupted : SIGINT);
      forwarded = true;
      double grace = gs_now() + 5.0;
      if (!kill_at || kill_at > grace) kill_at = grace;
      rc = 1;
    }
    if (kill_at && gs_now() > kill_at && !killed) {
      for (int r = 0; r < n; r++)
        if (pids[r] > 0 && !done[r]) {
          kill(pids[r], SIGKILL);
          size_t used = strlen(why);
          /* after the job's end its measurements are whole: a warning */
          if (lingering && rc == 0)
            fprintf(stderr, "bench: warning: rank %d did not exit within %.0f s of the job's end "
                    "(stopped or stuck): killed; every rank's measurements were in\n",
                    first_rank + r, timeout_s + 2.0);
          else if (used + 8 < cap)
            snprintf(why + used, cap - used, "%srank %d still running %.0f s after %s: killed",
                     used ? "; " : "", first_rank + r, timeout_s + 2.0,
                     rc ? "the first failure" : "the first rank ended");
        }
      if (!lingering && rc == 0) rc = 1;
      killed = true;
    }
    if (left > 0) usleep(20000);
  }
  if (gs_interrupted && !*why) snprintf(why, cap, "interrupted");
  free(status);
  free(done);
  return rc;
}
