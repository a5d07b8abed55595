/* spawn.c: the dedicated ps server process (--ps-dedicated), and a server
 * in a process that a launcher started (gs_ps_serve_alone).
 *
 * Rank 0's prepare() forks before the ps backend creates any ZeroMQ
 * context, and the child never touches what it inherited: it closes every
 * descriptor but its pipe to the parent (sockets and eventfds of contexts
 * the launcher may already have), creates its own context, and reduces on
 * the CPU with its own kernels table (a CUDA context does not survive
 * fork; BytePS' summation servers are CPU processes too). It dies with the
 * thread that forked it (PR_SET_PDEATHSIG), so a killed rank 0 never leaves
 * a server behind. It exits with _exit: the parent's atexit handlers and
 * stdio buffers are the parent's business.
 *
 * The pipe carries lines: "E tcp://host:port" once bound, then "D" (every
 * rank said goodbye) or "F <message>" when the server fails. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "proto/proto.h"
#include "ps/ps.h"
#include "ps/ps_internal.h"

static void put_line(int fd, char tag, const char *text) {
  char buf[1200];
  int n = snprintf(buf, sizeof buf, "%c %s\n", tag, text ? text : "");
  if (n < 0) return;
  if ((size_t)n >= sizeof buf) {
    n = (int)sizeof buf - 1;
    buf[n - 1] = '\n';
  }
  /* newlines inside the message would split it */
  for (int i = 0; i < n - 1; i++)
    if (buf[i] == '\n') buf[i] = ' ';
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (int)w;
  }
}

static void close_inherited(int keep) {
  if (keep > 3) close_range(3, (unsigned)keep - 1, 0);
  if (close_range((unsigned)keep + 1, ~0U, 0) < 0) {
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = keep + 1; fd < max; fd++) close(fd);
  }
}

static void __attribute__((noreturn)) child_main(const gs_sync_config *c, int wfd,
                                                 pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  close_inherited(wfd);
  gs_err e = {0};
  gs_kernels *k = gs_kernels_cpu(0, &e);
  void *ctx = k ? gs_sock_context(gs_ps_io_threads(c->world), &e) : NULL;
  if (!ctx) {
    put_line(wfd, 'F', e.msg);
    _exit(1);
  }
  gs_ps_server_opts o = {
    .zctx = ctx, .host = c->host, .inproc = false, .job = c->job, .cred = c->cred,
    .timeout_ms = c->timeout_ms, .max_elems = c->n, .k = k,
    /* the hook's context is this process's copy of rank 0's: the log is
     * recorded and written here, where the updates are applied */
    .applied = gs_ps_opts_of(c).applied,
  };
  gs_ps_server *srv = NULL;
  gs_zap *zap = NULL;
  char ep[GS_ENDPOINT_MAX];
  if (gs_zap_start(ctx, &c->cred, 0, "ps server (dedicated)", &zap, &e) < 0 ||
      gs_ps_server_create(&o, &srv, ep, NULL, &e) < 0) {
    put_line(wfd, 'F', e.msg);
    _exit(1);
  }
  put_line(wfd, 'E', ep);
  int rc = gs_ps_server_run(srv, &e);
  if (rc < 0) fprintf(stderr, "gradsync ps server (dedicated, pid %d): %s\n", (int)getpid(),
                      e.msg);
  gs_ps_server_destroy(srv);  /* flushes the Error messages to the workers */
  gs_sock_context_end(ctx, zap);
  put_line(wfd, rc < 0 ? 'F' : 'D', rc < 0 ? e.msg : "");
  _exit(rc < 0 ? 1 : 0);
}

static int serve_alone(const char *host, const gs_cred *cred, int timeout_ms, size_t max_elems,
                       const gs_applied_hook *applied, int sockbuf, int fd, gs_err *e);

int gs_ps_serve_alone(const char *host, const gs_cred *cred, int timeout_ms, size_t max_elems,
                      const gs_applied_hook *applied, int fd, gs_err *e) {
  return serve_alone(host, cred, timeout_ms, max_elems, applied, 0, fd, e);
}

int gs_ps_serve_summation(const char *host, const gs_cred *cred, int timeout_ms,
                          size_t max_elems, int fd, gs_err *e) {
  return serve_alone(host, cred, timeout_ms, max_elems, NULL, GS_PS_SUM_SOCKBUF, fd, e);
}

static int serve_alone(const char *host, const gs_cred *cred, int timeout_ms, size_t max_elems,
                       const gs_applied_hook *applied, int sockbuf, int fd, gs_err *e) {
  gs_kernels *k = gs_kernels_cpu(0, e);
  if (!k) return e ? e->code : GS_EDEVICE;
  void *ctx = gs_sock_context(gs_ps_io_threads(4), e);
  if (!ctx) {
    k->destroy(k);
    gs_err_prefix(e, "ps server: ");
    return GS_EIO;
  }
  gs_ps_server_opts o = {
    .zctx = ctx, .host = host, .learn_job = true, .cred = *cred, .timeout_ms = timeout_ms,
    .max_elems = max_elems, .k = k, .applied = applied ? *applied : (gs_applied_hook){0},
    .sockbuf = sockbuf,
  };
  gs_ps_server *srv = NULL;
  gs_zap *zap = NULL;
  char ep[GS_ENDPOINT_MAX];
  int rc = gs_zap_start(ctx, cred, 0, "ps server (own process)", &zap, e);
  if (rc == GS_OK) rc = gs_ps_server_create(&o, &srv, ep, NULL, e);
  else k->destroy(k);
  if (rc == GS_OK) {
    char line[GS_ENDPOINT_MAX + 32];
    snprintf(line, sizeof line, "%s %d", ep, (int)getpid());
    put_line(fd, 'E', line);
  }
  close(fd);
  if (rc == GS_OK) rc = gs_ps_server_run(srv, e);
  gs_ps_server_destroy(srv);  /* flushes the Error messages to the workers */
  gs_sock_context_end(ctx, zap);
  return rc;
}

int gs_ps_spawn(const gs_sync_config *c, int *pid, int *fd, gs_err *e) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return GS_FAIL(e, GS_EIO, "ps: pipe for the dedicated server: %s", strerror(errno));
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) {
    close(p[0]);
    close(p[1]);
    return GS_FAIL(e, GS_EIO, "ps: cannot fork the dedicated server: %s", strerror(errno));
  }
  if (child == 0) child_main(c, p[1], parent);
  close(p[1]);
  *pid = child;
  *fd = p[0];
  return GS_OK;
}

int gs_ps_spawn_endpoint(int pid, int fd, int timeout_ms, char ep[GS_ENDPOINT_MAX], gs_err *e) {
  char line[1200];
  int rc = gs_read_line(fd, gs_now() + timeout_ms / 1000.0, line, sizeof line);
  if (rc < 0)
    return GS_FAIL(e, GS_ETIMEOUT, "ps: the dedicated server (pid %d) did not report its "
                   "address within %.1f s", pid, timeout_ms / 1000.0);
  if (rc == 0)
    return GS_FAIL(e, GS_EPEER, "ps: the dedicated server (pid %d) exited before binding",
                   pid);
  if (line[0] == 'F')
    return GS_FAIL(e, GS_EIO, "ps: the dedicated server (pid %d) could not start: %s", pid,
                   line + 2);
  if (line[0] != 'E' || strlen(line + 2) >= GS_ENDPOINT_MAX)
    return GS_FAIL(e, GS_EPROTO, "ps: the dedicated server (pid %d) said '%.200s'", pid, line);
  snprintf(ep, GS_ENDPOINT_MAX, "%s", line + 2);
  return GS_OK;
}

int gs_ps_spawn_reap(int pid, int fd, int timeout_ms, gs_err *e) {
  double deadline = gs_now() + timeout_ms / 1000.0;
  char line[1200], last[1200] = "";
  /* The child writes its verdict, then exits: read to EOF or deadline. */
  int rc;
  while ((rc = gs_read_line(fd, deadline, line, sizeof line)) == 1) snprintf(last, sizeof last, "%s", line);
  bool killed = false;
  int st = 0;
  pid_t w;
  for (;;) {
    w = waitpid(pid, &st, WNOHANG);
    if (w != 0 || gs_now() > deadline) break;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  if (w == 0) {
    kill(pid, SIGKILL);
    killed = true;
    w = waitpid(pid, &st, 0);
  }
  close(fd);
  if (last[0] == 'D') return GS_OK;
  if (last[0] == 'F')
    return GS_FAIL(e, GS_EPEER, "ps: the dedicated server (pid %d) failed: %s", pid, last + 2);
  if (killed)
    return GS_FAIL(e, GS_ETIMEOUT, "ps: the dedicated server (pid %d) did not finish within "
                   "%.1f s and was killed", pid, timeout_ms / 1000.0);
  if (w == pid && WIFSIGNALED(st))
    return GS_FAIL(e, GS_EPEER, "ps: the dedicated server (pid %d) died of signal %d", pid,
                   WTERMSIG(st));
  return GS_FAIL(e, GS_EPEER, "ps: the dedicated server (pid %d) exited without a verdict "
                 "(status %d)", pid, w == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
