/* auth.c: the job's credential on the wire: keys derived from the job
 * secret, the rendezvous' HMAC proofs, and the ZAP handler that admits only
 * the job's own peers to a data socket (wire.h states the contract).
 *
 * Why ZAP and not a check of every frame: a frame check runs after ZeroMQ
 * has accepted the connection, queued the stranger's frames among the
 * neighbour's and counted the stranger as a peer (so its idle connection
 * can hide the neighbour's death). Refused at the handshake, a stranger
 * never becomes a peer at all. libsodium does the cryptography; it is what
 * libzmq links for CURVE already. */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "proto/wire.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_USER "gradsync"
#define ZAP_FRAMES 8
#define ZAP_FRAME_MAX 512
#define REFUSALS_SHOWN 5

struct gs_zap {
  pthread_t th;
  void *sock;
  char password[2 * GS_KEY_BYTES + 1];
  unsigned char client_pub[crypto_scalarmult_BYTES];
  bool encrypt;
  char who[96];
  unsigned refused;
};

static const char *key_ctx = "gradsync job key, version 1";

int gs_cred_derive(gs_cred *c, const void *secret, size_t len, bool encrypt, gs_err *e) {
  if (sodium_init() < 0) return GS_FAIL(e, GS_EIO, "libsodium failed to initialise");
  if (encrypt && !zmq_has("curve"))
    return GS_FAIL(e, GS_EINVAL, "--encrypt needs a libzmq built with CURVE (libsodium); "
                   "this one has none");
  crypto_generichash(c->key, sizeof c->key, secret, len, (const unsigned char *)key_ctx,
                     strlen(key_ctx));
  c->encrypt = encrypt;
  return GS_OK;
}

void gs_cred_mac(const gs_cred *c, const char *label, const void *msg, size_t n,
                 unsigned char mac[GS_KEY_BYTES]) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, c->key, sizeof c->key);
  /* the label's NUL keeps "ab"+"c" apart from "a"+"bc" */
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1);
  if (n) crypto_auth_hmacsha256_update(&st, msg, n);
  crypto_auth_hmacsha256_final(&st, mac);
  sodium_memzero(&st, sizeof st);
}

bool gs_cred_verify(const gs_cred *c, const char *label, const void *msg, size_t n,
                    const unsigned char *mac, size_t maclen) {
  unsigned char want[GS_KEY_BYTES];
  gs_cred_mac(c, label, msg, n, want);
  bool ok = mac && maclen == sizeof want && sodium_memcmp(want, mac, sizeof want) == 0;
  sodium_memzero(want, sizeof want);
  return ok;
}

void gs_cred_password(const gs_cred *c, char out[2 * GS_KEY_BYTES + 1]) {
  unsigned char mac[GS_KEY_BYTES];
  gs_cred_mac(c, "data-port password", NULL, 0, mac);
  sodium_bin2hex(out, 2 * GS_KEY_BYTES + 1, mac, sizeof mac);
}

/* side: "curve-server" or "curve-client" */
static void curve_pair(const gs_cred *c, const char *side, unsigned char pub[32],
                       unsigned char sec[32]) {
  gs_cred_mac(c, side, NULL, 0, sec);
  crypto_scalarmult_base(pub, sec);
}

int gs_cred_server(void *sock, const gs_cred *c, gs_err *e) {
  int one = 1, rc;
  if (c->encrypt) {
    unsigned char pub[32], sec[32];
    curve_pair(c, "curve-server", pub, sec);
    rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one);
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, sizeof sec);
    sodium_memzero(sec, sizeof sec);
  } else {
    rc = zmq_setsockopt(sock, ZMQ_PLAIN_SERVER, &one, sizeof one);
  }
  if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_USER, strlen(ZAP_USER));
  if (rc < 0) return GS_FAIL(e, GS_EIO, "securing a data socket: %s", zmq_strerror(zmq_errno()));
  return GS_OK;
}

int gs_cred_client(void *sock, const gs_cred *c, gs_err *e) {
  int rc;
  if (c->encrypt) {
    unsigned char spub[32], ssec[32], pub[32], sec[32];
    curve_pair(c, "curve-server", spub, ssec);
    curve_pair(c, "curve-client", pub, sec);
    rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, spub, sizeof spub);
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, sizeof pub);
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, sizeof sec);
    sodium_memzero(ssec, sizeof ssec);
    sodium_memzero(sec, sizeof sec);
  } else {
    char pw[2 * GS_KEY_BYTES + 1];
    gs_cred_password(c, pw);
    rc = zmq_setsockopt(sock, ZMQ_PLAIN_USERNAME, ZAP_USER, strlen(ZAP_USER));
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_PLAIN_PASSWORD, pw, strlen(pw));
    sodium_memzero(pw, sizeof pw);
  }
  if (rc < 0) return GS_FAIL(e, GS_EIO, "securing a data socket: %s", zmq_strerror(zmq_errno()));
  return GS_OK;
}

typedef struct zap_request {
  char f[ZAP_FRAMES][ZAP_FRAME_MAX];
  size_t len[ZAP_FRAMES];
  int n;
} zap_request;

/* One request, all its frames (those past ZAP_FRAMES are read and dropped).
 * -1 when the context is terminating. */
static int zap_read(void *sock, zap_request *r) {
  r->n = 0;
  for (bool more = true; more;) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, 0) < 0) {
      zmq_msg_close(&m);
      if (zmq_errno() == EINTR) continue;
      return -1;
    }
    if (r->n < ZAP_FRAMES) {
      size_t n = zmq_msg_size(&m) < ZAP_FRAME_MAX - 1 ? zmq_msg_size(&m) : ZAP_FRAME_MAX - 1;
      memcpy(r->f[r->n], zmq_msg_data(&m), n);
      r->f[r->n][n] = 0;
      r->len[r->n++] = n;
    }
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  }
  return 0;
}

/* frames: version, request id, domain, address, identity, mechanism,
 * credentials (PLAIN: user, password; CURVE: the client's public key) */
static bool zap_admits(const gs_zap *z, const zap_request *r) {
  if (r->n < 6 || strcmp(r->f[0], "1.0")) return false;
  const char *mech = r->f[5];
  if (!z->encrypt && !strcmp(mech, "PLAIN") && r->n >= 8)
    return !strcmp(r->f[6], ZAP_USER) && r->len[7] == 2 * GS_KEY_BYTES &&
           sodium_memcmp(r->f[7], z->password, 2 * GS_KEY_BYTES) == 0;
  if (z->encrypt && !strcmp(mech, "CURVE") && r->n >= 7)
    return r->len[6] == sizeof z->client_pub &&
           sodium_memcmp(r->f[6], z->client_pub, sizeof z->client_pub) == 0;
  return false;
}

static void zap_reply(void *sock, const zap_request *r, bool ok) {
  const char *status = ok ? "200" : "400", *text = ok ? "OK" : "not a member of this job";
  zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
  zmq_send(sock, r->n > 1 ? r->f[1] : "", r->n > 1 ? r->len[1] : 0, ZMQ_SNDMORE);
  zmq_send(sock, status, 3, ZMQ_SNDMORE);
  zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
  zmq_send(sock, ok ? ZAP_USER : "", ok ? strlen(ZAP_USER) : 0, ZMQ_SNDMORE);
  zmq_send(sock, "", 0, 0);
}

static void *zap_main(void *arg) {
  gs_zap *z = arg;
  zap_request *r = malloc(sizeof *r);
  while (r && zap_read(z->sock, r) == 0) {
    bool ok = zap_admits(z, r);
    if (!ok && z->refused++ < REFUSALS_SHOWN)
      fprintf(stderr, "%s: refused a connection from %s: it does not hold this job's secret "
              "(a stranger, or a rank of another job)%s\n", z->who, r->n > 3 ? r->f[3] : "?",
              z->refused == REFUSALS_SHOWN ? "; further refusals are not shown" : "");
    zap_reply(z->sock, r, ok);
  }
  free(r);
  zmq_close(z->sock);
  return NULL;
}

int gs_zap_start(void *ctx, const gs_cred *c, const char *who, gs_zap **out, gs_err *e) {
  gs_zap *z = calloc(1, sizeof *z);
  if (!z) return GS_FAIL(e, GS_ENOMEM, "%s: out of memory", who);
  z->encrypt = c->encrypt;
  gs_cred_password(c, z->password);
  unsigned char sec[32];
  curve_pair(c, "curve-client", z->client_pub, sec);
  sodium_memzero(sec, sizeof sec);
  snprintf(z->who, sizeof z->who, "%s", who);
  int zero = 0;
  z->sock = zmq_socket(ctx, ZMQ_REP);
  if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero) < 0 ||
      zmq_bind(z->sock, ZAP_ENDPOINT) < 0) {
    int err = zmq_errno();
    if (z->sock) zmq_close(z->sock);
    free(z);
    return GS_FAIL(e, GS_EIO, "%s: cannot start the connection check (ZAP): %s", who,
                   zmq_strerror(err));
  }
  if (pthread_create(&z->th, NULL, zap_main, z)) {
    zmq_close(z->sock);
    free(z);
    return GS_FAIL(e, GS_EIO, "%s: cannot start the connection check's thread", who);
  }
  *out = z;
  return GS_OK;
}

void gs_zap_join(gs_zap *z) {
  if (!z) return;
  pthread_join(z->th, NULL);
  sodium_memzero(z->password, sizeof z->password);
  free(z);
}
