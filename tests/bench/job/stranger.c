/* stranger.c: a peer that holds no job secret, for the strangers tests.
 *
 *   stranger SECONDS ENDPOINT...
 *     For SECONDS it fires at every endpoint (the rendezvous and the data
 *     ports of a running job), over ZeroMQ with each mechanism a stranger
 *     can pick (NULL; PLAIN with a guessed password; CURVE with a made-up
 *     server key): registrations, a forged Error "from rank 1" with a
 *     guessed job token (the forged gather), a forged Welcome, a Stats of a
 *     billion rows, random frames and 4 MiB frames; and it reads whatever
 *     comes back. It prints what it sent and what it learned: the replies
 *     by kind, and whether any carried a job token or a welcome.
 *   stranger knock CONNECTIONS SECONDS ENDPOINT
 *     A flood of handshakes over raw TCP: CONNECTIONS at a time, each a
 *     ZMTP greeting for CURVE and a HELLO of random bytes, dialled again as
 *     soon as the server drops it. Prints how many it made and whether any
 *     got a reply beyond the greeting.
 *     Beside them, ZeroMQ sockets without a mechanism fire knocks of the
 *     challenge this rendezvous had before CURVE (protocol version 1).
 *   stranger rank0 SECONDS ENDPOINT
 *     A fake rank 0: binds ENDPOINT (no mechanism) and answers every
 *     message with a forged Welcome and an Error, for SECONDS. Prints how
 *     many it answered.
 *   stranger big CONNECTIONS MIB ENDPOINT
 *     CONNECTIONS raw TCP connections at once, each a ZMTP greeting and a
 *     frame that announces MIB MiB, then as many bytes of it as the server
 *     takes, held open until the server drops it or 20 s pass. Prints the
 *     bytes the server's kernel accepted. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "base/base.h"
#include "proto/proto.h"

#define MAX_EPS 16
#define BIG (4u << 20)
#define MAX_CONNS 4096

static unsigned long sent, replies, errors, welcomes, tokens;

static void send_env(void *s, Gradsync__Envelope *env) {
  uint8_t buf[4096];
  size_t n = gradsync__envelope__pack(env, buf);
  if (zmq_send(s, buf, n, ZMQ_DONTWAIT) >= 0) sent++;
}

static void reg(void *s, uint32_t rank) {
  Gradsync__Envelope env;
  Gradsync__Register rg = GRADSYNC__REGISTER__INIT;
  rg.world = 2;
  rg.host = "stranger";
  rg.endpoint = "tcp://127.0.0.1:9";
  gs_wire_env(&env, 0, rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_REG;
  env.reg = &rg;
  send_env(s, &env);
}

/* the forged gather: an Error from rank 1, with a guessed token */
static void forged_error(void *s) {
  Gradsync__Envelope env;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  er.phase = "training";
  er.message = "forged by a stranger";
  gs_wire_env(&env, ((uint64_t)rand() << 32) | (uint64_t)rand(), 1);
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  send_env(s, &env);
}

static void forged_welcome(void *s) {
  Gradsync__Envelope env;
  Gradsync__Welcome w = GRADSYNC__WELCOME__INIT;
  char *eps[2] = {"tcp://127.0.0.1:9", "tcp://127.0.0.1:9"};
  w.world = 2;
  w.n_endpoints = 2;
  w.endpoints = eps;
  w.n_hosts = 2;
  w.hosts = eps;
  gs_wire_env(&env, 0x5eed, 0);
  env.body_case = GRADSYNC__ENVELOPE__BODY_WELCOME;
  env.welcome = &w;
  send_env(s, &env);
}

static void huge_stats(void *s) {
  Gradsync__Envelope env;
  Gradsync__Stats st = GRADSYNC__STATS__INIT;
  st.steps = 1000000000;
  st.spans = 1000000000;
  st.last = true;
  gs_wire_env(&env, 0x5eed, 1);
  env.body_case = GRADSYNC__ENVELOPE__BODY_STATS;
  env.stats = &st;
  send_env(s, &env);
}

static void junk(void *s, size_t n, uint8_t *buf) {
  for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rand();
  if (zmq_send(s, buf, n, ZMQ_DONTWAIT) >= 0) sent++;
}

static void drain(void *s) {
  for (;;) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      return;
    }
    replies++;
    Gradsync__Envelope *env =
        gradsync__envelope__unpack(NULL, zmq_msg_size(&m), zmq_msg_data(&m));
    if (env) {
      errors += env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR;
      welcomes += env->body_case == GRADSYNC__ENVELOPE__BODY_WELCOME;
      tokens += env->job != 0;
      gradsync__envelope__free_unpacked(env, NULL);
    }
    zmq_msg_close(&m);
  }
}

/* mech 0 NULL, 1 PLAIN with a guess, 2 CURVE with a made-up server key */
static void *stranger_socket(void *ctx, const char *ep, int mech) {
  void *s = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  if (mech == 1) {
    zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "gradsync", 8);
    zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, "a guess", 7);
  } else if (mech == 2) {
    char spub[41], cpub[41], csec[41];
    zmq_curve_keypair(spub, csec);
    zmq_curve_keypair(cpub, csec);
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, cpub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, csec, 40);
  }
  char addr[GS_ENDPOINT_MAX];
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  if (gs_endpoint_split(ep, addr, sizeof addr, nonce) < 0) snprintf(addr, sizeof addr, "%s", ep);
  zmq_connect(s, addr);
  return s;
}

static int messages(double secs, int n, char **eps) {
  void *ctx = zmq_ctx_new(), *s[3 * MAX_EPS];
  int ns = 0;
  for (int i = 0; i < n; i++)
    for (int mech = 0; mech < 3; mech++) s[ns++] = stranger_socket(ctx, eps[i], mech);
  uint8_t *buf = malloc(BIG);
  double end = gs_now() + secs;
  while (buf && gs_now() < end) {
    for (int i = 0; i < ns; i++) {
      reg(s[i], 1);
      reg(s[i], 0);
      reg(s[i], 1000);
      forged_error(s[i]);
      forged_welcome(s[i]);
      huge_stats(s[i]);
      junk(s[i], 1 + (size_t)rand() % 1000, buf);
      junk(s[i], BIG, buf);
      drain(s[i]);
    }
    zmq_pollitem_t it = {.socket = s[0], .events = ZMQ_POLLIN};
    zmq_poll(&it, 1, 20);
  }
  for (int i = 0; i < ns; i++) {
    drain(s[i]);
    zmq_close(s[i]);
  }
  zmq_ctx_term(ctx);
  free(buf);
  printf("stranger: sent %lu messages to %d endpoints; replies %lu: errors %lu, welcomes %lu, "
         "with a job token %lu\n", sent, n, replies, errors, welcomes, tokens);
  return 0;
}

/* ---- raw TCP ---- */

static int tcp_to(const char *ep) {
  const char *colon = strrchr(ep, ':');
  const char *host = strstr(ep, "://");
  if (!colon || !host) return -1;
  char ip[64];
  snprintf(ip, sizeof ip, "%.*s", (int)(colon - host - 3), host + 3);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

/* a ZMTP 3.0 greeting for mech */
static void greeting(uint8_t g[64], const char *mech) {
  memset(g, 0, 64);
  g[0] = 0xff;
  g[8] = 1;
  g[9] = 0x7f;
  g[10] = 3;
  memcpy(g + 12, mech, strlen(mech));
}

typedef struct conn {
  int fd;
  size_t out, want;     /* bytes written, and to write */
  uint8_t *msg;         /* what to write (want bytes; NULL: junk after the head) */
  uint8_t head[80];
  size_t headlen;
  size_t got;           /* bytes read back */
  double t0;
} conn;

/* The old rendezvous' Knock (an Envelope of version 1 whose field 31 holds a
 * 32-byte nonce), by hand: the message no longer exists. */
static size_t old_knock(uint8_t *b) {
  size_t n = 0;
  b[n++] = 0x08, b[n++] = 1;          /* version 1 */
  b[n++] = 0x18, b[n++] = 1;          /* rank 1 */
  b[n++] = 0xfa, b[n++] = 0x01;       /* field 31, length-delimited */
  b[n++] = 34;
  b[n++] = 0x0a, b[n++] = 32;         /* nonce */
  for (int i = 0; i < 32; i++) b[n++] = (uint8_t)rand();
  return n;
}

static int knock(int nconn, double secs, const char *ep) {
  conn *c = calloc((size_t)nconn, sizeof *c);
  void *ctx = zmq_ctx_new(), *z[8];
  for (int i = 0; i < 8; i++) {
    z[i] = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(z[i], ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(z[i], ep);
  }
  unsigned long knocks = 0, zreplies = 0;
  unsigned long made = 0, answered = 0, closed = 0;
  double end = gs_now() + secs;
  for (int i = 0; i < nconn; i++) c[i].fd = -1;
  while (gs_now() < end) {
    for (int i = 0; i < 8; i++) {
      uint8_t b[64];
      for (int k = 0; k < 50; k++) knocks += zmq_send(z[i], b, old_knock(b), ZMQ_DONTWAIT) >= 0;
      zmq_msg_t m;
      zmq_msg_init(&m);
      while (zmq_msg_recv(&m, z[i], ZMQ_DONTWAIT) >= 0) zreplies++;
      zmq_msg_close(&m);
    }
    for (int i = 0; i < nconn; i++) {
      if (c[i].fd >= 0) continue;
      c[i].fd = tcp_to(ep);
      if (c[i].fd < 0) continue;
      made++;
      greeting(c[i].head, "CURVE");
      c[i].headlen = 64;
      c[i].out = 0;
      c[i].got = 0;
      c[i].t0 = gs_now();
    }
    struct pollfd p[MAX_CONNS];
    for (int i = 0; i < nconn; i++) p[i] = (struct pollfd){.fd = c[i].fd, .events = POLLIN | POLLOUT};
    poll(p, (nfds_t)nconn, 20);
    for (int i = 0; i < nconn; i++) {
      if (c[i].fd < 0) continue;
      if (p[i].revents & POLLOUT && c[i].out == 0) {
        /* greeting, then a HELLO command of 200 bytes: its name, version
         * 1.0, and random bytes where a client key, a nonce and a box go */
        uint8_t hello[2 + 200];
        hello[0] = 4;    /* a command */
        hello[1] = 200;
        hello[2] = 5;
        memcpy(hello + 3, "HELLO", 5);
        for (int k = 8; k < (int)sizeof hello; k++) hello[k] = (uint8_t)rand();
        hello[8] = 1;
        hello[9] = 0;
        c[i].out += (size_t)(send(c[i].fd, c[i].head, 64, MSG_NOSIGNAL) == 64);
        c[i].out += (size_t)(send(c[i].fd, hello, sizeof hello, MSG_NOSIGNAL) > 0);
      }
      if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t b[4096];
        ssize_t r = read(c[i].fd, b, sizeof b);
        if (r > 0) {
          c[i].got += (size_t)r;
          if (c[i].got > 64) answered++; /* more than the greeting: a WELCOME or an ERROR */
        }
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          close(c[i].fd);
          c[i].fd = -1;
          closed++;
        }
      }
      if (c[i].fd >= 0 && gs_now() - c[i].t0 > 10) { /* the server should have dropped it */
        close(c[i].fd);
        c[i].fd = -1;
      }
    }
  }
  for (int i = 0; i < nconn; i++)
    if (c[i].fd >= 0) close(c[i].fd);
  free(c);
  for (int i = 0; i < 8; i++) zmq_close(z[i]);
  zmq_ctx_term(ctx);
  printf("stranger: knock: %lu connections made, %lu dropped by the server, %lu answered "
         "beyond the greeting; %lu old knocks sent, %lu replies\n", made, closed,
         answered + zreplies, knocks, zreplies);
  return 0;
}

static int fake_rank0(double secs, const char *ep) {
  void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  if (zmq_bind(s, ep) < 0) {
    fprintf(stderr, "stranger: rank0: cannot bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
    return 1;
  }
  unsigned long answered = 0;
  double end = gs_now() + secs;
  while (gs_now() < end) {
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 50) <= 0) continue;
    zmq_msg_t id, m;
    zmq_msg_init(&id);
    zmq_msg_init(&m);
    if (zmq_msg_recv(&id, s, 0) >= 0) {
      while (zmq_msg_more(&id) && zmq_msg_recv(&m, s, 0) >= 0 && zmq_msg_more(&m)) {
      }
      for (int k = 0; k < 2; k++) {
        zmq_send(s, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (k == 0) forged_welcome(s);
        else forged_error(s);
      }
      answered++;
    }
    zmq_msg_close(&id);
    zmq_msg_close(&m);
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
  printf("stranger: rank0: answered %lu messages with a forged Welcome and an Error\n",
         answered);
  return 0;
}

static int big(int nconn, double mib, const char *ep) {
  conn *c = calloc((size_t)nconn, sizeof *c);
  size_t frame = (size_t)(mib * (1 << 20));
  uint8_t junkbuf[1 << 16];
  for (size_t i = 0; i < sizeof junkbuf; i++) junkbuf[i] = (uint8_t)rand();
  unsigned long long accepted = 0;
  int open_now = 0;
  for (int i = 0; i < nconn; i++) {
    c[i].fd = tcp_to(ep);
    if (c[i].fd < 0) continue;
    open_now++;
    greeting(c[i].head, "NULL");
    uint8_t *h = c[i].head + 64;
    h[0] = 2; /* a long message frame, before any handshake */
    for (int k = 0; k < 8; k++) h[1 + k] = (uint8_t)((uint64_t)frame >> (56 - 8 * k));
    c[i].headlen = 64 + 9;
    c[i].want = c[i].headlen + frame;
  }
  double end = gs_now() + 20;
  while (open_now > 0 && gs_now() < end) {
    struct pollfd p[MAX_CONNS];
    for (int i = 0; i < nconn; i++) {
      bool more = c[i].fd >= 0 && c[i].out < c[i].want;
      p[i] = (struct pollfd){.fd = c[i].fd, .events = (short)(POLLIN | (more ? POLLOUT : 0))};
    }
    poll(p, (nfds_t)nconn, 50);
    for (int i = 0; i < nconn; i++) {
      if (c[i].fd < 0) continue;
      if (p[i].revents & POLLOUT) {
        const uint8_t *src = c[i].out < c[i].headlen ? c[i].head + c[i].out : junkbuf;
        size_t n = c[i].out < c[i].headlen ? c[i].headlen - c[i].out : sizeof junkbuf;
        if (n > c[i].want - c[i].out) n = c[i].want - c[i].out;
        ssize_t w = send(c[i].fd, src, n, MSG_NOSIGNAL);
        if (w > 0) {
          c[i].out += (size_t)w;
          accepted += (size_t)w;
        }
      }
      if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t b[256];
        ssize_t r = read(c[i].fd, b, sizeof b);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          close(c[i].fd);
          c[i].fd = -1;
          open_now--;
        }
      }
    }
  }
  int still = 0;
  for (int i = 0; i < nconn; i++)
    if (c[i].fd >= 0) {
      still++;
      close(c[i].fd);
    }
  free(c);
  printf("stranger: big: %d connections announcing %.0f MiB frames; the server's kernel "
         "accepted %.1f MiB in all; %d still open after 20 s\n", nconn, mib,
         accepted / 1048576.0, still);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN); /* a server that drops us is what is tested */
  if (argc >= 5 && !strcmp(argv[1], "knock")) {
    int n = atoi(argv[2]);
    return knock(n < 1 ? 1 : n > MAX_CONNS ? MAX_CONNS : n, atof(argv[3]), argv[4]);
  }
  if (argc >= 4 && !strcmp(argv[1], "rank0")) return fake_rank0(atof(argv[2]), argv[3]);
  if (argc >= 5 && !strcmp(argv[1], "big")) {
    int n = atoi(argv[2]);
    return big(n < 1 ? 1 : n > MAX_CONNS ? MAX_CONNS : n, atof(argv[3]), argv[4]);
  }
  if (argc < 3) {
    fprintf(stderr, "usage: stranger SECONDS ENDPOINT... | stranger knock CONNECTIONS SECONDS "
            "ENDPOINT | stranger big CONNECTIONS MIB ENDPOINT\n");
    return 2;
  }
  int n = argc - 2 < MAX_EPS ? argc - 2 : MAX_EPS;
  return messages(atof(argv[1]), n, argv + 2);
}
