/* test_zmtp.c: a peer that holds the job's secret and token but speaks raw
 * ZMTP 3.0 (no libzmq) and announces a 300-byte routing identity (libzmq's
 * own setsockopt caps it at 255; the wire allows more): the server drops
 * its messages and keeps serving, and every rank computes the reference. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ps_harness.h"
#include "proto/proto.h"
#include "ps/ps.h"

#define JOB 0x1234abcd5678ef00ull

/* A raw ZMTP 3.0 peer that holds the job's credential (PLAIN) and the
 * token, and announces a 300-byte routing identity (libzmq's own
 * setsockopt caps it at 255; the wire allows more). The server must drop
 * its messages and keep serving. */
typedef struct zmtp {
  char ep[GS_ENDPOINT_MAX];
  int ready;                 /* 1: the server answered READY */
  int sent;
  pthread_t th;
} zmtp;

static bool put_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    b += w;
    n -= (size_t)w;
  }
  return true;
}

static bool get_all(int fd, void *p, size_t n) {
  uint8_t *b = p;
  while (n) {
    ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= (size_t)r;
  }
  return true;
}

/* a frame (flags: 1 more, 4 command), long form when it needs one */
static bool frame(int fd, uint8_t flags, const void *body, size_t n) {
  uint8_t h[9];
  size_t hl;
  if (n > 255) {
    h[0] = flags | 2;
    for (int i = 0; i < 8; i++) h[1 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
    hl = 9;
  } else {
    h[0] = flags;
    h[1] = (uint8_t)n;
    hl = 2;
  }
  return put_all(fd, h, hl) && put_all(fd, body, n);
}

/* the next command's name ("WELCOME", "READY", "ERROR") */
static bool command(int fd, char name[32]) {
  uint8_t h[9];
  if (!get_all(fd, h, 2)) return false;
  uint64_t n = h[1];
  if (h[0] & 2) {
    if (!get_all(fd, h + 2, 7)) return false;
    n = 0;
    for (int i = 0; i < 8; i++) n = n << 8 | h[1 + i];
  }
  uint8_t *b = malloc(n ? n : 1);
  bool ok = b && n >= 1 && n < (1u << 20) && get_all(fd, b, n) && b[0] < 32 && b[0] < n;
  if (ok) {
    memcpy(name, b + 1, b[0]);
    name[b[0]] = 0;
  }
  free(b);
  return ok;
}

static void *zmtp_main(void *arg) {
  zmtp *z = arg;
  int port = atoi(strrchr(z->ep, ':') + 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) return NULL;
  uint8_t greet[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
  memcpy(greet + 12, "PLAIN", 5);
  uint8_t theirs[64], body[1024];
  char name[32];
  if (!put_all(fd, greet, 64) || !get_all(fd, theirs, 64)) goto out;
  static const gs_cred job_cred;
  char addr[GS_ENDPOINT_MAX], user[2 * GS_CONN_NONCE_BYTES + 1], pw[2 * GS_KEY_BYTES + 1];
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  if (gs_endpoint_split(z->ep, addr, sizeof addr, nonce) != 1) goto out;
  gs_cred_plain_login(&job_cred, nonce, user, pw);
  size_t n = 0;
  body[n++] = 5;
  memcpy(body + n, "HELLO", 5), n += 5;
  body[n++] = (uint8_t)strlen(user);
  memcpy(body + n, user, strlen(user)), n += strlen(user);
  body[n++] = (uint8_t)strlen(pw);
  memcpy(body + n, pw, strlen(pw)), n += strlen(pw);
  if (!frame(fd, 4, body, n) || !command(fd, name) || strcmp(name, "WELCOME")) goto out;
  n = 0;
  body[n++] = 8;
  memcpy(body + n, "INITIATE", 8), n += 8;
  const char *props[2][2] = {{"Socket-Type", "DEALER"}, {"Identity", NULL}};
  for (int i = 0; i < 2; i++) {
    size_t kl = strlen(props[i][0]), vl = props[i][1] ? strlen(props[i][1]) : 300;
    body[n++] = (uint8_t)kl;
    memcpy(body + n, props[i][0], kl), n += kl;
    for (int k = 0; k < 4; k++) body[n++] = (uint8_t)(vl >> (24 - 8 * k));
    if (props[i][1]) memcpy(body + n, props[i][1], vl);
    else memset(body + n, 'i', vl);
    n += vl;
  }
  if (!frame(fd, 4, body, n) || !command(fd, name) || strcmp(name, "READY")) goto out;
  z->ready = 1;
  /* a hello and pushes as rank 1, with the job's token */
  uint8_t h[512];
  float pay[300] = {0};
  Gradsync__Envelope env;
  Gradsync__Hello hello = GRADSYNC__HELLO__INIT;
  gs_wire_env(&env, JOB, 1);
  env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
  env.hello = &hello;
  for (int i = 0; i < 20; i++) {
    z->sent += frame(fd, 0, h, gradsync__envelope__pack(&env, h));
    Gradsync__Push p;
    push_env(&env, &p, JOB, 1, 0, 0, 0, 300);
    z->sent += frame(fd, 1, h, gradsync__envelope__pack(&env, h)) &&
               frame(fd, 0, pay, sizeof pay);
    gs_wire_env(&env, JOB, 1);
    env.body_case = GRADSYNC__ENVELOPE__BODY_HELLO;
    env.hello = &hello;
    usleep(20000);
  }
out:
  close(fd);
  return NULL;
}

static void start_zmtp(const char *ep, void *ctx) {
  zmtp *z = ctx;
  snprintf(z->ep, sizeof z->ep, "%s", ep);
  REQUIRE(pthread_create(&z->th, NULL, zmtp_main, z) == 0, "pthread_create");
}

int main(void) {
  job_opts o;
  job_defaults(&o);
  o.world = 2;
  o.job = JOB;
  o.steps = 8;
  o.jitter_us = 20000;
  zmtp z = {0};
  o.on_blob = start_zmtp;
  o.on_blob_ctx = &z;
  job_result *r = result_new(&o);
  int rc = run_threads(&o, r);
  pthread_join(z.th, NULL);
  for (int i = 0; i < o.world; i++) REQUIRE(r->rc[i] == 0, "rank %d: %s", i, r->err[i]);
  REQUIRE(rc == 0, "job failed");
  REQUIRE(z.ready && z.sent > 0, "the raw ZMTP peer did not get through the handshake "
          "(ready %d, %d messages sent)", z.ready, z.sent);
  free(check_reference(&o, r, "raw ZMTP peer", NULL, NULL));
  result_free(r);
  printf("ok: a peer with the secret, the token and a 300-byte routing identity sent %d "
         "messages over raw ZMTP: dropped, and the job computed the reference bits\n", z.sent);
  return 0;
}
