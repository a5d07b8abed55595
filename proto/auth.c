/* auth.c: the job's credential on the wire (proto.h states the contract):
 * the keys derived from the job secret, the socket options that make a
 * socket prove them, and the ZAP handler that admits only the job's own
 * peers.
 *
 * Two kinds of sockets:
 *   - the rendezvous always runs CURVE. Rank 0's key pair and every rank's
 *     own pair come from the secret's key, so a peer without the secret
 *     cannot finish the handshake (it cannot even encrypt its HELLO to a
 *     server key it cannot compute), a recorded handshake replays nowhere
 *     (CURVE's short-term keys and cookies), and what follows is encrypted
 *     and bound to the rank whose key the ZAP handler admitted;
 *   - a data socket that binds draws a fresh port nonce, which its
 *     endpoint carries ("tcp://h:p#<hex>"), and every credential for it is
 *     derived from the key and that nonce: a port of one job says nothing
 *     of any other. By default the credential is ZeroMQ's PLAIN, made one
 *     time only: each dial draws a connection nonce as the user name, the
 *     password is the key's HMAC of both nonces, and the ZAP handler admits
 *     each connection nonce once. A password seen on the wire therefore
 *     admits nobody, to this job or any later one. With --encrypt it is
 *     CURVE, the key pairs derived from the key and the port nonce.
 *
 * Why ZAP and not a check of every frame: a frame check runs after ZeroMQ
 * has accepted the connection, queued the stranger's frames among the
 * neighbour's and counted the stranger as a peer. Refused at the handshake,
 * a stranger never becomes a peer at all. libsodium does the cryptography;
 * it is what libzmq links for CURVE already. */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "proto/proto.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_USER "gradsync"
#define ZAP_FRAMES 8
#define ZAP_FRAME_MAX 512
#define REFUSALS_SHOWN 5
#define RDV_DOMAIN "gradsync-rendezvous"
#define PORT_DOMAIN "gradsync-port-"

struct gs_zap {
  pthread_t th;
  void *sock;
  gs_cred cred;
  int world;                          /* > 1: also the rendezvous' (rank 0) */
  unsigned char (*rank_pub)[32];      /* ranks 1..world-1's rendezvous keys, made on first use */
  unsigned char (*used)[GS_CONN_NONCE_BYTES]; /* connection nonces admitted once */
  size_t nused, capused;
  char who[96];
  unsigned refused;
};

static const char *key_ctx = "gradsync job key, version 2";

int gs_cred_derive(gs_cred *c, const void *secret, size_t len, bool encrypt, gs_err *e) {
  if (sodium_init() < 0) return GS_FAIL(e, GS_EIO, "libsodium failed to initialise");
  if (!zmq_has("curve"))
    return GS_FAIL(e, GS_EINVAL, "this libzmq was built without CURVE (libsodium), which the "
                   "rendezvous needs: install a libzmq with it (Debian's libzmq5 has it)");
  crypto_generichash(c->key, sizeof c->key, secret, len, (const unsigned char *)key_ctx,
                     strlen(key_ctx));
  c->encrypt = encrypt;
  return GS_OK;
}

/* HMAC-SHA-256 of label (with its NUL, so "ab"+"c" differs from "a"+"bc")
 * and the two parts. */
static void derive(const gs_cred *c, const char *label, const void *a, size_t alen,
                   const void *b, size_t blen, unsigned char out[GS_KEY_BYTES]) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, c->key, sizeof c->key);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1);
  if (alen) crypto_auth_hmacsha256_update(&st, a, alen);
  if (blen) crypto_auth_hmacsha256_update(&st, b, blen);
  crypto_auth_hmacsha256_final(&st, out);
  sodium_memzero(&st, sizeof st);
}

/* A CURVE key pair from a label and a nonce (NULL: none). */
static void curve_pair(const gs_cred *c, const char *label, const uint8_t *nonce, size_t n,
                       unsigned char pub[32], unsigned char sec[32]) {
  derive(c, label, nonce, nonce ? n : 0, NULL, 0, sec);
  crypto_scalarmult_base(pub, sec);
}

static void rank_pair(const gs_cred *c, int rank, unsigned char pub[32], unsigned char sec[32]) {
  uint32_t r = (uint32_t)rank;
  uint8_t le[4] = {(uint8_t)r, (uint8_t)(r >> 8), (uint8_t)(r >> 16), (uint8_t)(r >> 24)};
  curve_pair(c, "rendezvous rank", le, sizeof le, pub, sec);
}

/* ---- the rendezvous ---- */

static int fail_opt(gs_err *e, const char *what) {
  return GS_FAIL(e, GS_EIO, "securing %s: %s", what, zmq_strerror(zmq_errno()));
}

int gs_cred_rdv_server(void *sock, const gs_cred *c, gs_err *e) {
  unsigned char pub[32], sec[32];
  int one = 1;
  curve_pair(c, "rendezvous server", NULL, 0, pub, sec);
  int rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one);
  if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, sizeof sec);
  if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, RDV_DOMAIN, strlen(RDV_DOMAIN));
  sodium_memzero(sec, sizeof sec);
  return rc < 0 ? fail_opt(e, "the rendezvous") : GS_OK;
}

int gs_cred_rdv_client(void *sock, const gs_cred *c, int rank, gs_err *e) {
  unsigned char spub[32], ssec[32], pub[32], sec[32];
  curve_pair(c, "rendezvous server", NULL, 0, spub, ssec);
  sodium_memzero(ssec, sizeof ssec);
  rank_pair(c, rank, pub, sec);
  int rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, spub, sizeof spub);
  if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, sizeof pub);
  if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, sizeof sec);
  sodium_memzero(sec, sizeof sec);
  return rc < 0 ? fail_opt(e, "the rendezvous") : GS_OK;
}

/* ---- data sockets ---- */

int gs_endpoint_split(const char *endpoint, char *addr, size_t cap,
                      uint8_t nonce[GS_PORT_NONCE_BYTES]) {
  const char *hash = strchr(endpoint, '#');
  size_t n = hash ? (size_t)(hash - endpoint) : strlen(endpoint);
  if (n >= cap) return -1;
  memcpy(addr, endpoint, n);
  addr[n] = 0;
  if (!hash) return 0;
  size_t got = 0;
  const char *last = NULL;
  if (strlen(hash + 1) != 2 * GS_PORT_NONCE_BYTES ||
      sodium_hex2bin(nonce, GS_PORT_NONCE_BYTES, hash + 1, 2 * GS_PORT_NONCE_BYTES, NULL, &got,
                     &last) != 0 || got != GS_PORT_NONCE_BYTES)
    return -1;
  return 1;
}

/* The server side of a port's credential, before zmq_bind. */
static int port_server(void *sock, const gs_cred *c, const uint8_t nonce[GS_PORT_NONCE_BYTES],
                       char hex[2 * GS_PORT_NONCE_BYTES + 1]) {
  char domain[sizeof PORT_DOMAIN + 2 * GS_PORT_NONCE_BYTES];
  sodium_bin2hex(hex, 2 * GS_PORT_NONCE_BYTES + 1, nonce, GS_PORT_NONCE_BYTES);
  snprintf(domain, sizeof domain, "%s%s", PORT_DOMAIN, hex);
  int one = 1, rc;
  if (c->encrypt) {
    unsigned char pub[32], sec[32];
    curve_pair(c, "data port server", nonce, GS_PORT_NONCE_BYTES, pub, sec);
    rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one);
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, sizeof sec);
    sodium_memzero(sec, sizeof sec);
  } else {
    rc = zmq_setsockopt(sock, ZMQ_PLAIN_SERVER, &one, sizeof one);
  }
  if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain));
  return rc;
}

int gs_cred_bind(void *sock, const gs_cred *c, const char *host, char endpoint[GS_ENDPOINT_MAX],
                 gs_err *e) {
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  char hex[2 * GS_PORT_NONCE_BYTES + 1];
  randombytes_buf(nonce, sizeof nonce);
  if (port_server(sock, c, nonce, hex) < 0) return fail_opt(e, "a data socket");
  char ep[GS_ENDPOINT_MAX];
  GS_TRY(gs_wire_bind_any(sock, host, ep, sizeof ep, e));
  int n = snprintf(endpoint, GS_ENDPOINT_MAX, "%s#%s", ep, hex);
  if (n < 0 || n >= GS_ENDPOINT_MAX)
    return GS_FAIL(e, GS_EINVAL, "the address %s with its credential does not fit in %d "
                   "characters", ep, GS_ENDPOINT_MAX);
  return GS_OK;
}

int gs_cred_bind_at(void *sock, const gs_cred *c, const char *endpoint, gs_err *e) {
  char addr[GS_ENDPOINT_MAX], hex[2 * GS_PORT_NONCE_BYTES + 1];
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  if (gs_endpoint_split(endpoint, addr, sizeof addr, nonce) != 1)
    return GS_FAIL(e, GS_EINVAL, "'%.300s' is no data port's address", endpoint);
  if (port_server(sock, c, nonce, hex) < 0) return fail_opt(e, "a data socket");
  if (zmq_bind(sock, addr) < 0)
    return GS_FAIL(e, GS_EIO, "cannot bind %s: %s", addr, zmq_strerror(zmq_errno()));
  return GS_OK;
}

void gs_cred_plain_login(const gs_cred *c, const uint8_t port[GS_PORT_NONCE_BYTES],
                         char user[2 * GS_CONN_NONCE_BYTES + 1],
                         char password[2 * GS_KEY_BYTES + 1]) {
  uint8_t conn[GS_CONN_NONCE_BYTES];
  unsigned char mac[GS_KEY_BYTES];
  randombytes_buf(conn, sizeof conn);
  derive(c, "data port password", port, GS_PORT_NONCE_BYTES, conn, sizeof conn, mac);
  sodium_bin2hex(user, 2 * GS_CONN_NONCE_BYTES + 1, conn, sizeof conn);
  sodium_bin2hex(password, 2 * GS_KEY_BYTES + 1, mac, sizeof mac);
  sodium_memzero(mac, sizeof mac);
}

int gs_cred_connect(void *sock, const gs_cred *c, const char *endpoint, gs_err *e) {
  char addr[GS_ENDPOINT_MAX];
  uint8_t nonce[GS_PORT_NONCE_BYTES];
  int has = gs_endpoint_split(endpoint, addr, sizeof addr, nonce);
  if (has < 0 || (has == 0 && strncmp(addr, "inproc://", 9)))
    return GS_FAIL(e, GS_EINVAL, "the address '%.300s' carries no port credential (#<32 hex "
                   "digits>): it did not come from this job's rendezvous", endpoint);
  int rc = 0;
  if (has && c->encrypt) {
    unsigned char spub[32], ssec[32], pub[32], sec[32];
    curve_pair(c, "data port server", nonce, sizeof nonce, spub, ssec);
    curve_pair(c, "data port client", nonce, sizeof nonce, pub, sec);
    rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, spub, sizeof spub);
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, sizeof pub);
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, sizeof sec);
    sodium_memzero(ssec, sizeof ssec);
    sodium_memzero(sec, sizeof sec);
  } else if (has) {
    char user[2 * GS_CONN_NONCE_BYTES + 1], pw[2 * GS_KEY_BYTES + 1];
    gs_cred_plain_login(c, nonce, user, pw);
    rc = zmq_setsockopt(sock, ZMQ_PLAIN_USERNAME, user, strlen(user));
    if (rc == 0) rc = zmq_setsockopt(sock, ZMQ_PLAIN_PASSWORD, pw, strlen(pw));
    sodium_memzero(pw, sizeof pw);
  }
  if (rc < 0) return fail_opt(e, "a data socket");
  if (zmq_connect(sock, addr) < 0)
    return GS_FAIL(e, GS_EINVAL, "cannot connect to '%s': %s", addr, zmq_strerror(zmq_errno()));
  return GS_OK;
}

/* ---- the ZAP handler ---- */

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

/* The rank whose rendezvous key this is (1..world-1), else -1. */
static int rank_of_key(gs_zap *z, const char *key, size_t len) {
  if (len != 32 || z->world < 2) return -1;
  if (!z->rank_pub) {
    z->rank_pub = calloc((size_t)z->world, sizeof *z->rank_pub);
    if (!z->rank_pub) return -1;
    for (int r = 1; r < z->world; r++) {
      unsigned char sec[32];
      rank_pair(&z->cred, r, z->rank_pub[r], sec);
      sodium_memzero(sec, sizeof sec);
    }
  }
  for (int r = 1; r < z->world; r++)
    if (sodium_memcmp(z->rank_pub[r], key, 32) == 0) return r;
  return -1;
}

static bool used_before(const gs_zap *z, const uint8_t *conn) {
  for (size_t i = 0; i < z->nused; i++)
    if (!memcmp(z->used[i], conn, GS_CONN_NONCE_BYTES)) return true;
  return false;
}

static void remember(gs_zap *z, const uint8_t *conn) {
  if (z->nused == z->capused) {
    size_t nc = z->capused ? 2 * z->capused : 64;
    void *nu = realloc(z->used, nc * sizeof *z->used);
    if (!nu) return;
    z->used = nu;
    z->capused = nc;
  }
  memcpy(z->used[z->nused++], conn, GS_CONN_NONCE_BYTES);
}

/* A PLAIN login for the port of nonce: the right password for its
 * connection nonce, which was never admitted before. *why says what failed. */
static bool plain_admits(gs_zap *z, const uint8_t *port, const zap_request *r,
                         const char **why) {
  uint8_t conn[GS_CONN_NONCE_BYTES];
  size_t got = 0;
  unsigned char want[GS_KEY_BYTES];
  char hex[2 * GS_KEY_BYTES + 1];
  if (r->n < 8 || r->len[6] != 2 * GS_CONN_NONCE_BYTES ||
      sodium_hex2bin(conn, sizeof conn, r->f[6], r->len[6], NULL, &got, NULL) != 0 ||
      got != sizeof conn)
    return false;
  derive(&z->cred, "data port password", port, GS_PORT_NONCE_BYTES, conn, sizeof conn, want);
  sodium_bin2hex(hex, sizeof hex, want, sizeof want);
  bool ok = r->len[7] == 2 * GS_KEY_BYTES && sodium_memcmp(r->f[7], hex, 2 * GS_KEY_BYTES) == 0;
  sodium_memzero(want, sizeof want);
  sodium_memzero(hex, sizeof hex);
  if (ok && used_before(z, conn)) {
    *why = "it repeats the credential of a connection admitted before (a replay; a rank "
           "whose connection dropped dials again with a fresh one)";
    return false;
  }
  if (ok) remember(z, conn);
  return ok;
}

/* frames: version, request id, domain, address, identity, mechanism,
 * credentials (PLAIN: user, password; CURVE: the client's public key).
 * *user: the User-Id of an admitted peer. */
static bool zap_admits(gs_zap *z, const zap_request *r, char *user, size_t cap,
                       const char **why) {
  if (r->n < 6 || strcmp(r->f[0], "1.0")) return false;
  const char *domain = r->f[2], *mech = r->f[5];
  if (!strcmp(domain, RDV_DOMAIN)) {
    int rank = !strcmp(mech, "CURVE") && r->n >= 7 ? rank_of_key(z, r->f[6], r->len[6]) : -1;
    if (rank < 0) {
      *why = "its key is no rank's of this job (a stranger, another secret, or another world "
             "size)";
      return false;
    }
    snprintf(user, cap, "%d", rank);
    return true;
  }
  size_t plen = strlen(PORT_DOMAIN);
  uint8_t port[GS_PORT_NONCE_BYTES];
  size_t got = 0;
  if (strncmp(domain, PORT_DOMAIN, plen) ||
      sodium_hex2bin(port, sizeof port, domain + plen, strlen(domain + plen), NULL, &got,
                     NULL) != 0 || got != sizeof port)
    return false;
  snprintf(user, cap, "%s", ZAP_USER);
  if (!z->cred.encrypt && !strcmp(mech, "PLAIN")) return plain_admits(z, port, r, why);
  if (z->cred.encrypt && !strcmp(mech, "CURVE") && r->n >= 7 && r->len[6] == 32) {
    unsigned char pub[32], sec[32];
    curve_pair(&z->cred, "data port client", port, sizeof port, pub, sec);
    sodium_memzero(sec, sizeof sec);
    return sodium_memcmp(r->f[6], pub, 32) == 0;
  }
  return false;
}

static void zap_reply(void *sock, const zap_request *r, bool ok, const char *user) {
  const char *status = ok ? "200" : "400", *text = ok ? "OK" : "not a member of this job";
  zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
  zmq_send(sock, r->n > 1 ? r->f[1] : "", r->n > 1 ? r->len[1] : 0, ZMQ_SNDMORE);
  zmq_send(sock, status, 3, ZMQ_SNDMORE);
  zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
  zmq_send(sock, ok ? user : "", ok ? strlen(user) : 0, ZMQ_SNDMORE);
  zmq_send(sock, "", 0, 0);
}

static void *zap_main(void *arg) {
  gs_zap *z = arg;
  zap_request *r = malloc(sizeof *r);
  while (r && zap_read(z->sock, r) == 0) {
    char user[32] = "";
    const char *why = "it does not hold this job's secret (a stranger, or a rank of another "
                      "job)";
    bool ok = zap_admits(z, r, user, sizeof user, &why);
    if (!ok && z->refused++ < REFUSALS_SHOWN)
      fprintf(stderr, "%s: refused a connection from %s: %s%s\n", z->who,
              r->n > 3 ? r->f[3] : "?", why,
              z->refused == REFUSALS_SHOWN ? "; further refusals are not shown" : "");
    zap_reply(z->sock, r, ok, user);
  }
  free(r);
  gs_sock_close(z->sock, GS_SOCK_AS_OPENED);
  return NULL;
}

int gs_zap_start(void *ctx, const gs_cred *c, int world, const char *who, gs_zap **out,
                 gs_err *e) {
  gs_zap *z = calloc(1, sizeof *z);
  if (!z) return GS_FAIL(e, GS_ENOMEM, "%s: out of memory", who);
  z->cred = *c;
  z->world = world;
  snprintf(z->who, sizeof z->who, "%s", who);
  z->sock = gs_sock_open(ctx, &(gs_sock_opts){.type = ZMQ_REP, .linger_ms = 0}, NULL);
  if (!z->sock || zmq_bind(z->sock, ZAP_ENDPOINT) < 0) {
    int err = zmq_errno();
    gs_sock_close(z->sock, GS_SOCK_AS_OPENED);
    sodium_memzero(&z->cred, sizeof z->cred);
    free(z);
    return GS_FAIL(e, GS_EIO, "%s: cannot start the connection check (ZAP): %s", who,
                   zmq_strerror(err));
  }
  if (pthread_create(&z->th, NULL, zap_main, z)) {
    gs_sock_close(z->sock, GS_SOCK_AS_OPENED);
    sodium_memzero(&z->cred, sizeof z->cred);
    free(z);
    return GS_FAIL(e, GS_EIO, "%s: cannot start the connection check's thread", who);
  }
  *out = z;
  return GS_OK;
}

void gs_zap_join(gs_zap *z) {
  if (!z) return;
  pthread_join(z->th, NULL);
  sodium_memzero(&z->cred, sizeof z->cred);
  free(z->rank_pub);
  free(z->used);
  free(z);
}
