/* stranger.c: a peer that holds no job secret, for the strangers test.
 *
 *   stranger SECONDS ENDPOINT...
 *
 * For SECONDS it fires at every endpoint (the rendezvous and the data
 * ports of a running job): registrations without a proof, a knock then a
 * registration with a wrong proof, registrations claiming ranks 0 and
 * 1000, random frames, and 4 MiB frames; and it reads whatever comes back.
 * It prints what it sent and what it learned: the replies by kind, and
 * whether any carried a job token or a welcome (it must learn neither). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "kernels/util.h"
#include "proto/wire.h"

#define MAX_EPS 16
#define BIG (4u << 20)

static unsigned long sent, replies, challenges, errors, welcomes, tokens;

static void send_env(void *s, Gradsync__Envelope *env) {
  uint8_t buf[1024];
  size_t n = gradsync__envelope__pack(env, buf);
  if (zmq_send(s, buf, n, ZMQ_DONTWAIT) >= 0) sent++;
}

static void reg(void *s, uint32_t rank, const uint8_t *proof, size_t plen) {
  Gradsync__Envelope env;
  Gradsync__Register rg = GRADSYNC__REGISTER__INIT;
  rg.world = 2;
  rg.host = "stranger";
  rg.endpoint = "tcp://127.0.0.1:9";
  rg.proof.data = (uint8_t *)proof;
  rg.proof.len = plen;
  gs_wire_env(&env, 0, rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_REG;
  env.reg = &rg;
  send_env(s, &env);
}

static void knock(void *s) {
  uint8_t nonce[32];
  for (int i = 0; i < 32; i++) nonce[i] = (uint8_t)rand();
  Gradsync__Envelope env;
  Gradsync__Knock k = GRADSYNC__KNOCK__INIT;
  k.nonce.data = nonce;
  k.nonce.len = sizeof nonce;
  gs_wire_env(&env, 0, 1);
  env.body_case = GRADSYNC__ENVELOPE__BODY_KNOCK;
  env.knock = &k;
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
      challenges += env->body_case == GRADSYNC__ENVELOPE__BODY_CHALLENGE;
      errors += env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR;
      welcomes += env->body_case == GRADSYNC__ENVELOPE__BODY_WELCOME;
      tokens += env->job != 0;
      gradsync__envelope__free_unpacked(env, NULL);
    }
    zmq_msg_close(&m);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: stranger SECONDS ENDPOINT...\n");
    return 2;
  }
  double secs = atof(argv[1]);
  int n = argc - 2 < MAX_EPS ? argc - 2 : MAX_EPS;
  void *ctx = zmq_ctx_new(), *s[MAX_EPS];
  int zero = 0;
  for (int i = 0; i < n; i++) {
    s[i] = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(s[i], ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(s[i], argv[2 + i]);
  }
  uint8_t *buf = malloc(BIG), proof[32];
  double end = gs_now() + secs;
  while (buf && gs_now() < end) {
    for (int i = 0; i < n; i++) {
      reg(s[i], 1, NULL, 0);
      knock(s[i]);
      for (int k = 0; k < 32; k++) proof[k] = (uint8_t)rand();
      reg(s[i], 1, proof, sizeof proof);
      reg(s[i], 0, NULL, 0);
      reg(s[i], 1000, NULL, 0);
      junk(s[i], 1 + (size_t)rand() % 1000, buf);
      junk(s[i], BIG, buf);
      drain(s[i]);
    }
    zmq_pollitem_t it = {.socket = s[0], .events = ZMQ_POLLIN};
    zmq_poll(&it, 1, 20);
  }
  for (int i = 0; i < n; i++) {
    drain(s[i]);
    zmq_close(s[i]);
  }
  zmq_ctx_term(ctx);
  free(buf);
  printf("stranger: sent %lu messages to %d endpoints; replies %lu: challenges %lu, errors %lu, "
         "welcomes %lu, with a job token %lu\n", sent, n, replies, challenges, errors, welcomes,
         tokens);
  return 0;
}
