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
 * That watching (gs_launch_watch) also serves bench --nnodes (nodes.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/internal.h"

static pid_t spawn(const gs_launch *l, int rank, int port, int port_fd, const char *secret) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* child: die with the launcher, become rank `rank` */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  setenv("LOCAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", l->world);
  setenv("WORLD_SIZE", v, 1);
  setenv("LOCAL_WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", port);
  setenv("MASTER_PORT", v, 1);
  setenv("GS_LAUNCHED", "1", 1);
  setenv("GS_JOB_SECRET", secret, 1);
  if (l->run_dir) setenv("GS_RUN_DIR", l->run_dir, 1);
  if (port_fd >= 0) {
    snprintf(v, sizeof v, "%d", port_fd);
    setenv("GS_PORT_FD", v, 1);
  } else {
    unsetenv("GS_PORT_FD");
  }
  char **argv = calloc((size_t)(l->argc + l->nextra + 1), sizeof *argv);
  if (!argv) _exit(127);
  int n = 0;
  for (int i = 0; i < l->argc; i++) argv[n++] = l->argv[i];
  for (int i = 0; i < l->nextra; i++) argv[n++] = (char *)l->extra[i];
  argv[n] = NULL;
  execv("/proc/self/exe", argv);
  fprintf(stderr, "bench: cannot start rank %d: %s\n", rank, strerror(errno));
  _exit(127);
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

int gs_launch_run(const gs_launch *l, char *why, size_t cap) {
  int world = l->world;
  pid_t *pids = calloc((size_t)world, sizeof *pids);
  int rc = 0, status0 = 0;
  *why = 0;
  /* a fresh secret per job: a rank of an earlier job cannot join this one */
  char secret[2 * GS_KEY_BYTES + 1];
  gs_secret_new(secret);
  if (!pids) {
    snprintf(why, cap, "out of memory");
    return 1;
  }
  int fds[2];
  if (pipe(fds) < 0) {
    snprintf(why, cap, "pipe: %s", strerror(errno));
    free(pids);
    return 1;
  }
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fflush(NULL);
  /* world 1 has no rendezvous: nothing to wait for */
  pids[0] = spawn(l, 0, 0, world > 1 ? fds[1] : -1, secret);
  close(fds[1]);
  if (pids[0] < 0) {
    snprintf(why, cap, "fork: %s", strerror(errno));
    close(fds[0]);
    free(pids);
    return 1;
  }
  int port = world > 1 ? read_port(fds[0], pids[0], l->timeout_s, &status0) : 1;
  close(fds[0]);
  if (port <= 0) {
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
    pids[r] = spawn(l, r, port, -1, secret);
    if (pids[r] < 0) {
      snprintf(why, cap, "fork rank %d: %s", r, strerror(errno));
      pids[r] = 0;
      rc = 1;
    }
  }
  rc = gs_launch_watch(pids, world, 0, rc, l->timeout_s, why, cap);
  free(pids);
  return rc;
}

int gs_launch_watch(pid_t *pids, int n, int first_rank, int rc, double timeout_s, char *why,
                    size_t cap) {
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
      if (ok && r == 0 && first_rank == 0 && !kill_at) {
        kill_at = gs_now() + timeout_s + 2.0;
        lingering = true;
      }
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
            snprintf(why + used, cap - used, "%srank %d still running: killed", used ? "; " : "",
                     first_rank + r);
        }
      killed = true;
    }
    if (left > 0) usleep(20000);
  }
  if (gs_interrupted && !*why) snprintf(why, cap, "interrupted");
  free(status);
  free(done);
  return rc;
}
