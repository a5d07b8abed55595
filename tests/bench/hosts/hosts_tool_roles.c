/* hosts_tool_roles.c: the ZeroMQ ends hosts_tool runs inside emulated hosts
 * (hosts_tool_roles.h).
 * Each role is its own process in its host's namespace; they report to the
 * tool through a pipe, one line at a time. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "base/base.h"
#include "tests/bench/hosts/hosts_tool_roles.h"

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0 && write(fd, line, (size_t)n) != n) perror("hosts_tool role: report");
}

/* Bind sock on tcp://addr:* and tell the tool "addr:port". */
static int bind_and_report(void *sock, const char *addr, int fd) {
  char ep[128];
  size_t len = sizeof ep;
  snprintf(ep, sizeof ep, "tcp://%s:*", addr);
  if (zmq_bind(sock, ep) != 0 || zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len) != 0) {
    fprintf(stderr, "hosts_tool role: cannot bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
    return -1;
  }
  say(fd, "%s\n", ep + strlen("tcp://"));
  return 0;
}

static int echo(void *ctx, int fd, const char *addr) {
  void *s = zmq_socket(ctx, ZMQ_REP);
  int idle_ms = 60000;
  zmq_setsockopt(s, ZMQ_RCVTIMEO, &idle_ms, sizeof idle_ms);
  if (bind_and_report(s, addr, fd) < 0) return 1;
  for (;;) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) break;
    const char *peer = zmq_msg_gets(&m, "Peer-Address");
    char reply[64];
    snprintf(reply, sizeof reply, "%s", peer ? peer : "?");
    zmq_msg_close(&m);
    zmq_send(s, reply, strlen(reply), 0);
  }
  zmq_close(s);
  return 0;
}

/* Three round trips to each endpoint; reports the largest of the
 * per-endpoint fastest round trips (the one a delay shows in). */
static int probe(void *ctx, int fd, char *arg) {
  char *save = NULL, *self = strtok_r(arg, ",", &save);
  int bad = 0;
  double worst = 0;
  for (char *ep = strtok_r(NULL, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
    void *s = zmq_socket(ctx, ZMQ_REQ);
    int ms = 5000, zero = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &ms, sizeof ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &ms, sizeof ms);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    char url[128], reply[64] = "";
    snprintf(url, sizeof url, "tcp://%s", ep);
    int n = zmq_connect(s, url);
    double best = 1e9;
    for (int i = 0; n >= 0 && i < 3; i++) {
      double t = gs_now();
      n = zmq_send(s, "ping", 4, 0) == 4 ? zmq_recv(s, reply, sizeof reply - 1, 0) : -1;
      if (n >= 0 && gs_now() - t < best) best = gs_now() - t;
    }
    if (n >= 0) reply[n < (int)sizeof reply - 1 ? n : (int)sizeof reply - 1] = '\0';
    if (n < 0 || strcmp(reply, self) != 0) {
      fprintf(stderr, "hosts_tool probe from %s: %s %s\n", self, url,
              n < 0 ? "did not answer within 5 s" : "saw the request come from");
      if (n >= 0) fprintf(stderr, "  %s, not %s\n", reply, self);
      bad = 1;
    } else if (best > worst) {
      worst = best;
    }
    zmq_close(s);
  }
  if (fd >= 0) say(fd, "%.9f\n", worst);
  return bad;
}

static int pull(void *ctx, int fd, const char *addr, long count, size_t size, int timeout_ms) {
  void *s = zmq_socket(ctx, ZMQ_PULL);
  zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
  if (bind_and_report(s, addr, fd) < 0) return 1;
  double t0 = 0, t1 = 0, bytes = 0;
  int rc = 0;
  for (long i = 0; i < count; i++) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) {
      fprintf(stderr, "hosts_tool pull: message %ld of %ld: %s\n", i + 1, count,
              zmq_strerror(zmq_errno()));
      rc = 1;
      break;
    }
    t1 = gs_now();
    if (i == 0) t0 = t1;
    bytes += (double)zmq_msg_size(&m);
    if (zmq_msg_size(&m) != size) {
      fprintf(stderr, "hosts_tool pull: message %ld has %zu bytes, not %zu\n", i + 1,
              zmq_msg_size(&m), size);
      rc = 1;
    }
    zmq_msg_close(&m);
  }
  if (rc == 0) say(fd, "%.0f %.9f %.9f\n", bytes, t0, t1);
  zmq_close(s);
  return rc;
}

static int push(void *ctx, int fd, const char *ep, long count, size_t size, int timeout_ms) {
  void *s = zmq_socket(ctx, ZMQ_PUSH);
  zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
  zmq_setsockopt(s, ZMQ_LINGER, &timeout_ms, sizeof timeout_ms);
  char *buf = calloc(1, size);
  int rc = buf && zmq_connect(s, ep) == 0 ? 0 : 1;
  if (fd >= 0) say(fd, "%.9f\n", gs_now());
  for (long i = 0; rc == 0 && i < count; i++)
    if (zmq_send(s, buf, size, 0) != (int)size) {
      fprintf(stderr, "hosts_tool push: message %ld of %ld to %s: %s\n", i + 1, count, ep,
              zmq_strerror(zmq_errno()));
      rc = 1;
    }
  free(buf);
  zmq_close(s);  /* the context's end waits (up to the linger) for delivery */
  return rc;
}

int role_main(int argc, char **argv) {
  const char *role = NULL, *arg = NULL;
  int fd = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--role") == 0) role = argv[i + 1];
    if (strcmp(argv[i], "--fd") == 0) fd = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--arg") == 0) arg = argv[i + 1];
  }
  if (!role || !arg) {
    fprintf(stderr, "hosts_tool: a role needs --role NAME --fd F --arg A\n");
    return 2;
  }
  char a[8192];
  snprintf(a, sizeof a, "%s", arg);
  char *save = NULL, *first = strtok_r(a, ",", &save);
  char *cnt = strtok_r(NULL, ",", &save), *sz = strtok_r(NULL, ",", &save);
  char *tmo = strtok_r(NULL, ",", &save);
  void *ctx = zmq_ctx_new();
  int rc = 2;
  if (strcmp(role, "echo") == 0 && fd >= 0) {
    rc = echo(ctx, fd, arg);
  } else if (strcmp(role, "probe") == 0) {
    snprintf(a, sizeof a, "%s", arg);
    rc = probe(ctx, fd, a);
  } else if ((strcmp(role, "pull") == 0 && fd >= 0) || strcmp(role, "push") == 0) {
    if (!first || !cnt || !sz || !tmo) {
      fprintf(stderr, "hosts_tool: role %s needs ENDPOINT,COUNT,SIZE,TIMEOUT_S\n", role);
    } else {
      long count = atol(cnt);
      size_t size = (size_t)atol(sz);
      int ms = atoi(tmo) * 1000;
      rc = strcmp(role, "pull") == 0 ? pull(ctx, fd, first, count, size, ms)
                                      : push(ctx, fd, first, count, size, ms);
    }
  } else {
    fprintf(stderr, "hosts_tool: unknown role '%s'\n", role);
  }
  zmq_ctx_term(ctx);
  return rc;
}
