/* floor.c: what the loopback transports cost on this machine, below any
 * all-reduce: the floor under the ring's latency and bandwidth.
 *
 * Two processes (a parent and a forked child, pinned to cores 0 and 1 when
 * there are two) measure:
 *   - one-way latency of an 8-byte message, from a ping-pong (half the round
 *     trip): over ZeroMQ (PAIR over tcp://127.0.0.1, which is what the ring
 *     uses), receiving blocking and receiving by polling; and over a plain
 *     TCP socket, blocking and busy-polling (what Open MPI's tcp btl does);
 *   - one-way throughput of a stream of large messages, and the CPU seconds
 *     both processes spent per GB, over plain TCP and over ZeroMQ.
 * A ZeroMQ message always passes through the I/O thread of the sender and
 * of the receiver, so a hop costs at least two thread wake-ups; a plain
 * socket polled by its own thread costs none. The difference between the
 * rows is what ZeroMQ's design costs on this machine.
 *
 *   cc -O2 -o floor bench/peers/floor.c -lzmq && ./floor [-n iters] [-s GiB]
 *
 * A benchmark, not a test: it prints what it measured. Every wait is bounded
 * by alarm(): a stuck peer ends the run with a message, not a hang. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "floor: %s:%d: ", __FILE__, __LINE__);                   \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, " (%s)\n", errno ? strerror(errno) : "");                \
      _exit(1);                                                                \
    }                                                                          \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

static void pin(int core) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  cpu_set_t m;
  CPU_ZERO(&m);
  CPU_SET(core, &m);
  sched_setaffinity(0, sizeof m, &m);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "floor: a peer took more than 120 s; giving up\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(1);
}

enum { ZMQ_BLOCK, ZMQ_POLL, TCP_BLOCK, TCP_POLL, TCP_STREAM, ZMQ_STREAM_ };

typedef struct result {
  double value, cpu; /* us one-way, or GB/s; cpu: s per GB, both sides */
} result;

/* ---- plain TCP ---- */

static int tcp_pair(int *s_out) { /* returns 1 in the child */
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(ls >= 0, "socket");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  CHECK(bind(ls, (void *)&a, sizeof a) == 0, "bind 127.0.0.1:0");
  CHECK(listen(ls, 1) == 0, "listen");
  CHECK(getsockname(ls, (void *)&a, &al) == 0, "getsockname");
  pid_t p = fork();
  CHECK(p >= 0, "fork");
  int s;
  if (p == 0) {
    close(ls);
    s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0 && connect(s, (void *)&a, sizeof a) == 0, "connect");
  } else {
    s = accept(ls, NULL, NULL);
    CHECK(s >= 0, "accept");
    close(ls);
  }
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *s_out = s;
  return p == 0;
}

static void tcp_recv_all(int s, char *b, size_t n, int flags) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(s, b + got, n - got, flags);
    if (r > 0) got += (size_t)r;
    else CHECK(r < 0 && (errno == EAGAIN || errno == EINTR), "recv: the peer closed");
  }
}

static void tcp_send_all(int s, const char *b, size_t n) {
  size_t put = 0;
  while (put < n) {
    ssize_t r = send(s, b + put, n - put, 0);
    if (r > 0) put += (size_t)r;
    else CHECK(r < 0 && errno == EINTR, "send");
  }
}

/* ---- the measurements; each runs in a fresh pair of processes and the
 * parent writes its result to fd out ---- */

static void run_tcp_pingpong(bool poll, int iters, result *res) {
  int s;
  bool child = tcp_pair(&s);
  pin(child);
  char b[8] = {0};
  int flags = poll ? MSG_DONTWAIT : 0;
  double t0 = 0;
  for (int i = -iters / 10; i < iters; i++) {
    if (i == 0) t0 = now();
    if (child) {
      tcp_recv_all(s, b, 8, flags);
      tcp_send_all(s, b, 8);
    } else {
      tcp_send_all(s, b, 8);
      tcp_recv_all(s, b, 8, flags);
    }
  }
  if (child) _exit(0);
  res->value = (now() - t0) / iters / 2 * 1e6;
  close(s);
  wait(NULL);
}

static void run_tcp_stream(size_t msg, size_t total, result *res) {
  int s;
  double c0 = cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN);
  bool child = tcp_pair(&s);
  pin(child);
  char *b = malloc(msg);
  CHECK(b, "malloc %zu", msg);
  memset(b, 1, msg);
  if (child) {
    for (size_t got = 0; got < total; got += msg) tcp_recv_all(s, b, msg, 0);
    tcp_send_all(s, b, 1); /* done */
    _exit(0);
  }
  double t0 = now();
  for (size_t put = 0; put < total; put += msg) tcp_send_all(s, b, msg);
  tcp_recv_all(s, b, 1, 0);
  double t = now() - t0;
  close(s);
  wait(NULL);
  res->value = total / t / 1e9;
  res->cpu = (cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN) - c0) / (total / 1e9);
  free(b);
}

/* ---- ZeroMQ ---- */

static int zmq_pair(void **ctx, void **sock, int type_parent, int type_child) {
  int pfd[2];
  CHECK(pipe(pfd) == 0, "pipe");
  pid_t p = fork();
  CHECK(p >= 0, "fork");
  bool child = p == 0;
  pin(child); /* before the context: its I/O thread shares the core */
  *ctx = zmq_ctx_new();
  CHECK(*ctx, "zmq_ctx_new");
  *sock = zmq_socket(*ctx, child ? type_child : type_parent);
  CHECK(*sock, "zmq_socket");
  int zero = 0;
  zmq_setsockopt(*sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(*sock, ZMQ_SNDHWM, &zero, sizeof zero);
  zmq_setsockopt(*sock, ZMQ_RCVHWM, &zero, sizeof zero);
  char ep[256] = "";
  if (!child) {
    size_t l = sizeof ep;
    CHECK(zmq_bind(*sock, "tcp://127.0.0.1:*") == 0, "zmq_bind");
    CHECK(zmq_getsockopt(*sock, ZMQ_LAST_ENDPOINT, ep, &l) == 0, "ZMQ_LAST_ENDPOINT");
    CHECK(write(pfd[1], ep, sizeof ep) == sizeof ep, "pipe write");
  } else {
    CHECK(read(pfd[0], ep, sizeof ep) == sizeof ep, "pipe read");
    CHECK(zmq_connect(*sock, ep) == 0, "zmq_connect %s", ep);
  }
  close(pfd[0]);
  close(pfd[1]);
  return child;
}

static void zrecv(void *s, void *b, size_t n, bool poll) {
  for (;;) {
    int r = zmq_recv(s, b, n, poll ? ZMQ_DONTWAIT : 0);
    if (r >= 0) return;
    CHECK(errno == EAGAIN || errno == EINTR, "zmq_recv");
    if (poll) sched_yield(); /* the I/O thread bringing it may share the core */
  }
}

static void zend(void *ctx, void *s) {
  zmq_close(s);
  zmq_ctx_term(ctx);
}

static void run_zmq_pingpong(bool poll, int iters, result *res) {
  void *ctx, *s;
  bool child = zmq_pair(&ctx, &s, ZMQ_PAIR, ZMQ_PAIR);
  char b[8] = {0};
  double t0 = 0;
  for (int i = -iters / 10; i < iters; i++) {
    if (i == 0) t0 = now();
    if (child) {
      zrecv(s, b, 8, poll);
      CHECK(zmq_send(s, b, 8, 0) == 8, "zmq_send");
    } else {
      CHECK(zmq_send(s, b, 8, 0) == 8, "zmq_send");
      zrecv(s, b, 8, poll);
    }
  }
  double t = now() - t0;
  zend(ctx, s);
  if (child) _exit(0);
  res->value = t / iters / 2 * 1e6;
  wait(NULL);
}

static void release(void *data, void *hint) { (void)data, (void)hint; }

static void run_zmq_stream(size_t msg, size_t total, result *res) {
  void *ctx, *s;
  double c0 = cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN);
  bool child = zmq_pair(&ctx, &s, ZMQ_PAIR, ZMQ_PAIR);
  char *b = malloc(msg);
  CHECK(b, "malloc %zu", msg);
  memset(b, 1, msg);
  if (child) {
    for (size_t got = 0; got < total; got += msg) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      CHECK(zmq_msg_recv(&m, s, 0) == (int)msg, "zmq_msg_recv");
      zmq_msg_close(&m);
    }
    CHECK(zmq_send(s, b, 1, 0) == 1, "zmq_send");
    zend(ctx, s);
    _exit(0);
  }
  double t0 = now();
  for (size_t put = 0; put < total; put += msg) {
    zmq_msg_t m; /* zero-copy from one buffer, as the ring sends */
    zmq_msg_init_data(&m, b, msg, release, NULL);
    CHECK(zmq_msg_send(&m, s, 0) == (int)msg, "zmq_msg_send");
  }
  zrecv(s, b, 1, false);
  double t = now() - t0;
  zend(ctx, s);
  wait(NULL);
  res->value = total / t / 1e9;
  res->cpu = (cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN) - c0) / (total / 1e9);
  free(b);
}

int main(int argc, char **argv) {
  int iters = 20000;
  double gib = 2;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) gib = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-n pingpong-iterations] [-s stream-GiB]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 10 || gib <= 0) {
    fprintf(stderr, "floor: -n must be at least 10 and -s positive\n");
    return 2;
  }
  signal(SIGALRM, on_alarm);
  alarm(120);
  size_t total = (size_t)(gib * (1 << 30));
  result r;
  printf("# loopback floor: 2 processes%s, %d round trips, %.1f GiB streams\n",
         sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? " on cores 0 and 1" : "", iters, gib);
  printf("# %-44s %12s\n", "8-byte one-way latency (half a round trip)", "us");
  memset(&r, 0, sizeof r), run_zmq_pingpong(false, iters, &r);
  printf("  %-44s %12.2f\n", "ZeroMQ tcp, blocking receive", r.value);
  memset(&r, 0, sizeof r), run_zmq_pingpong(true, iters, &r);
  printf("  %-44s %12.2f\n", "ZeroMQ tcp, polling receive", r.value);
  memset(&r, 0, sizeof r), run_tcp_pingpong(false, iters, &r);
  printf("  %-44s %12.2f\n", "plain TCP, blocking receive", r.value);
  memset(&r, 0, sizeof r), run_tcp_pingpong(true, iters, &r);
  printf("  %-44s %12.2f\n", "plain TCP, busy-polling receive", r.value);
  printf("# %-44s %12s %12s\n", "one-way stream", "GB/s", "CPU s/GB");
  size_t sizes[] = {(size_t)512 << 10, (size_t)4 << 20};
  for (int i = 0; i < 2; i++) {
    char what[64];
    memset(&r, 0, sizeof r), run_tcp_stream(sizes[i], total, &r);
    snprintf(what, sizeof what, "plain TCP, %zu KiB writes", sizes[i] >> 10);
    printf("  %-44s %12.2f %12.3f\n", what, r.value, r.cpu);
    memset(&r, 0, sizeof r), run_zmq_stream(sizes[i], total, &r);
    snprintf(what, sizeof what, "ZeroMQ tcp, %zu KiB messages", sizes[i] >> 10);
    printf("  %-44s %12.2f %12.3f\n", what, r.value, r.cpu);
  }
  return 0;
}
