/* rendezvous.c: how the ranks of one job find each other and agree on what
 * they run (the hand-over of the measurements at the end is gather.c's).
 *
 *   rank 0 (ROUTER at MASTER_ADDR:MASTER_PORT)        rank r (DEALER)
 *      <------------------ Knock{nonce r}
 *      ------------------> Challenge{nonce 0, HMAC(key, "rdv-server", r, 0)}
 *                          rank r checks it: rank 0 holds the secret
 *      <------------------ Register{rank, world, endpoint, settings,
 *                                   HMAC(key, "rdv-client", 0, r, rank, world)}
 *      a registration without a valid proof (no knock, a stale or reused
 *      nonce, another secret) is refused with a line naming the peer's
 *      address, and the wait goes on: a stranger can neither join nor stop
 *      the job, and learns nothing of it (token, endpoints, settings).
 *      collect world-1 registrations (timeout), then check: no duplicate
 *      rank, same world, same settings as rank 0 (else Error naming the
 *      first setting that differs, sent to every rank)
 *      ------------------> Welcome{endpoints, hosts, blob} + job token
 *      ... training: the backends talk among themselves ...
 *      <------------------ Stats + Measurements{rows, spans}   (gather.c)
 *      ------------------> Shutdown (ack: rank r may exit)
 *
 * The DEALER connects before rank 0 may be listening (ZeroMQ reconnects on
 * its own), so ranks can start in any order within the timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>
#include <zmq.h>

#include "bench/internal.h"
#include "proto/wire.h"

#define NONCE_BYTES 32
/* knocks answered and not yet registered; a flood of knocks evicts the
 * oldest, so a stranger costs rank 0 no memory */
#define PENDING_MAX 64

typedef struct pending {
  uint8_t id[256];
  size_t idlen;
  uint8_t theirs[NONCE_BYTES], ours[NONCE_BYTES];
  bool used;
} pending;

struct gs_rdv {
  void *ctx, *sock;
  bool router;
  uint64_t job;
  pending *pend;            /* PENDING_MAX, rank 0 only */
  unsigned next_pend;
  unsigned refused;         /* registrations refused, for the first few lines */
};

void *gs_rdv_socket(gs_rdv *r) { return r->sock; }
uint64_t gs_rdv_job_token(const gs_rdv *r) { return r->job; }

static void rdv_free(gs_rdv *r) {
  if (!r) return;
  free(r->pend);
  if (r->sock) zmq_close(r->sock);
  if (r->ctx) zmq_ctx_term(r->ctx);
  free(r);
}

void gs_rdv_close(gs_rdv *r) { rdv_free(r); }

void gs_rdv_job_free(gs_rdv_job *j) {
  free(j->endpoints);
  free(j->hosts);
  j->endpoints = NULL;
  j->hosts = NULL;
}

static int new_socket(gs_rdv **out, int type, gs_err *e) {
  gs_rdv *r = calloc(1, sizeof *r);
  if (!r) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  r->ctx = zmq_ctx_new();
  r->sock = r->ctx ? zmq_socket(r->ctx, type) : NULL;
  if (!r->sock) {
    rdv_free(r);
    return GS_FAIL(e, GS_EIO, "rendezvous: cannot create a ZeroMQ socket: %s",
                   zmq_strerror(zmq_errno()));
  }
  int linger = 2000, mandatory = 1;
  int64_t maxmsg = (int64_t)(GS_STATS_MAX + GS_HEADER_MAX);
  zmq_setsockopt(r->sock, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(r->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  if (type == ZMQ_ROUTER) zmq_setsockopt(r->sock, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
  r->router = type == ZMQ_ROUTER;
  if (r->router && !(r->pend = calloc(PENDING_MAX, sizeof *r->pend))) {
    rdv_free(r);
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  *out = r;
  return GS_OK;
}

int gs_rdv_listen(const char *endpoint, char *bound, size_t cap, gs_rdv **out, gs_err *e) {
  gs_rdv *r = NULL;
  GS_TRY(new_socket(&r, ZMQ_ROUTER, e));
  if (zmq_bind(r->sock, endpoint) < 0) {
    int err = zmq_errno();
    rdv_free(r);
    return GS_FAIL(e, GS_EIO, "rank 0: cannot listen for the rendezvous at %s: %s (is "
                   "MASTER_PORT free, and MASTER_ADDR an address of this host?)", endpoint,
                   zmq_strerror(err));
  }
  size_t sz = cap;
  zmq_getsockopt(r->sock, ZMQ_LAST_ENDPOINT, bound, &sz);
  *out = r;
  return GS_OK;
}

/* The settings are "key=value\n" lines in the same order on every rank;
 * name the first key whose value differs. */
static void first_difference(const char *a, const char *b, char *out, size_t cap) {
  while (*a || *b) {
    const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
    size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
    if (la != lb || memcmp(a, b, la)) {
      const char *eq = memchr(a, '=', la);
      int klen = eq ? (int)(eq - a) : (int)la;
      int vlen = eq ? (int)(la - (size_t)klen - 1) : 0;
      const char *eqb = memchr(b, '=', lb);
      int vblen = eqb ? (int)(lb - (size_t)(eqb - b) - 1) : 0;
      snprintf(out, cap, "%.*s: rank 0 has '%.*s', this rank '%.*s'", klen, a, vlen,
               eq ? eq + 1 : "", vblen, eqb ? eqb + 1 : "");
      return;
    }
    a += la + (ea ? 1 : 0);
    b += lb + (eb ? 1 : 0);
  }
  snprintf(out, cap, "(no difference found)");
}

static void send_error_to(gs_rdv *r, zmq_msg_t *id, const char *phase, const char *msg) {
  Gradsync__Envelope env;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, 0, 0);
  er.phase = (char *)phase;
  er.message = (char *)msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  gs_wire_send(r->sock, zmq_msg_data(id), zmq_msg_size(id), &env, NULL, 0, NULL, NULL, 1000,
               NULL, NULL);
}

typedef struct reg {
  zmq_msg_t id;
  bool used;
  char endpoint[GS_ENDPOINT_MAX];
  char host[GS_HOST_MAX];
  char *settings;
  int world;
} reg;

static char *join_settings(Gradsync__Register *rg) {
  size_t n = 1;
  for (size_t i = 0; i < rg->n_settings; i++)
    n += strlen(rg->settings[i]->key) + strlen(rg->settings[i]->value) + 2;
  char *s = malloc(n), *p = s;
  if (!s) return NULL;
  for (size_t i = 0; i < rg->n_settings; i++)
    p += sprintf(p, "%s=%s\n", rg->settings[i]->key, rg->settings[i]->value);
  *p = 0;
  return s;
}

static int fill_job(gs_rdv_job *job, int world) {
  job->world = world;
  job->endpoints = calloc((size_t)world, sizeof *job->endpoints);
  job->hosts = calloc((size_t)world, sizeof *job->hosts);
  return job->endpoints && job->hosts ? 0 : -1;
}

static int count_local(const gs_rdv_job *job, const char *host) {
  int n = 0;
  for (int i = 0; i < job->world; i++) n += strcmp(job->hosts[i], host) == 0;
  return n;
}

uint64_t gs_rdv_new_token(void) {
  uint64_t t = 0;
  while (!t) randombytes_buf(&t, sizeof t);
  return t;
}

/* ---- proofs ---- */

static void nonce(uint8_t out[NONCE_BYTES]) { randombytes_buf(out, NONCE_BYTES); }

/* what a registration's proof covers: both nonces, the rank and the world */
static void client_msg(const uint8_t ours[NONCE_BYTES], const uint8_t theirs[NONCE_BYTES],
                       uint32_t rank, uint32_t world, uint8_t out[2 * NONCE_BYTES + 8]) {
  memcpy(out, ours, NONCE_BYTES);
  memcpy(out + NONCE_BYTES, theirs, NONCE_BYTES);
  memcpy(out + 2 * NONCE_BYTES, &rank, 4);
  memcpy(out + 2 * NONCE_BYTES + 4, &world, 4);
}


/* Rank 0: a knock gets a challenge (and a pending slot). */
static void answer_knock(gs_rdv *r, const gs_rdv_me *me, gs_wire_msg *m) {
  Gradsync__Knock *k = m->env->knock;
  if (!k || k->nonce.len != NONCE_BYTES || zmq_msg_size(&m->id) > sizeof r->pend->id) return;
  pending *p = &r->pend[r->next_pend++ % PENDING_MAX];
  p->used = true;
  p->idlen = zmq_msg_size(&m->id);
  memcpy(p->id, zmq_msg_data(&m->id), p->idlen);
  memcpy(p->theirs, k->nonce.data, NONCE_BYTES);
  nonce(p->ours);
  uint8_t both[2 * NONCE_BYTES], proof[GS_KEY_BYTES];
  memcpy(both, p->theirs, NONCE_BYTES);
  memcpy(both + NONCE_BYTES, p->ours, NONCE_BYTES);
  gs_cred_mac(me->cred, "rdv-server", both, sizeof both, proof);
  Gradsync__Envelope env;
  Gradsync__Challenge ch = GRADSYNC__CHALLENGE__INIT;
  ch.nonce.data = p->ours;
  ch.nonce.len = NONCE_BYTES;
  ch.proof.data = proof;
  ch.proof.len = sizeof proof;
  gs_wire_env(&env, 0, 0);
  env.body_case = GRADSYNC__ENVELOPE__BODY_CHALLENGE;
  env.challenge = &ch;
  gs_wire_send(r->sock, p->id, p->idlen, &env, NULL, 0, NULL, NULL, 1000, NULL, NULL);
}

/* Rank 0: whether a registration carries a valid proof for the challenge
 * this peer was given (each challenge answers once). */
static bool proven(gs_rdv *r, const gs_rdv_me *me, gs_wire_msg *m) {
  size_t idlen = zmq_msg_size(&m->id);
  Gradsync__Register *rg = m->env->reg;
  for (int i = 0; i < PENDING_MAX; i++) {
    pending *p = &r->pend[i];
    if (!p->used || p->idlen != idlen || memcmp(p->id, zmq_msg_data(&m->id), idlen)) continue;
    p->used = false;
    uint8_t msg[2 * NONCE_BYTES + 8];
    client_msg(p->ours, p->theirs, m->env->rank, rg->world, msg);
    return gs_cred_verify(me->cred, "rdv-client", msg, sizeof msg, rg->proof.data,
                          rg->proof.len);
  }
  return false;
}

static void refuse(gs_rdv *r, gs_wire_msg *m) {
  const char *addr = m->peer[0] ? m->peer : "an unknown address";
  if (r->refused++ < 5)
    fprintf(stderr, "rank 0: rendezvous: refused a registration from %s claiming rank %u: it "
            "does not prove it holds this job's secret (a stranger, or GS_JOB_SECRET differs "
            "on that node)%s\n", addr, m->env->rank,
            r->refused == 5 ? "; further refusals are not shown" : "");
  send_error_to(r, &m->id, "rendezvous", "refused: no valid proof of the job secret");
}

int gs_rdv_host(gs_rdv *r, const gs_rdv_me *me, uint64_t token, const void *blob,
                size_t bloblen, int timeout_ms, gs_rdv_job *job, gs_err *e) {
  int world = me->world, rc = GS_OK;
  reg *regs = calloc((size_t)world, sizeof *regs);
  if (!regs || fill_job(job, world)) {
    free(regs);
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  snprintf(job->endpoints[0], GS_ENDPOINT_MAX, "%s", me->endpoint);
  snprintf(job->hosts[0], GS_HOST_MAX, "%s", me->host);
  int have = 1;
  double deadline = gs_now() + timeout_ms / 1000.0;
  char why[768] = "";

  while (have < world && rc == GS_OK) {
    int left = (int)((deadline - gs_now()) * 1000.0);
    if (left <= 0) {
      char missing[256] = "";
      size_t off = 0;
      for (int i = 1; i < world && off < sizeof missing - 8; i++)
        if (!regs[i].used) off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%d",
                                                   off ? ", " : "", i);
      snprintf(why, sizeof why, "rendezvous: %d of %d ranks registered in %.0f s; missing "
               "rank(s) %s (did they start, with the same MASTER_ADDR/MASTER_PORT?)", have,
               world, timeout_ms / 1000.0, missing);
      rc = GS_FAIL(e, GS_ETIMEOUT, "%s", why);
      break;
    }
    gs_wire_msg m;
    gs_err me2 = {0};
    int got = gs_wire_recv(r->sock, true, left, 0, 0, &m, &me2);
    if (got == GS_ETIMEOUT) { gs_wire_msg_close(&m); continue; }
    if (got == GS_EINTR) { gs_wire_msg_close(&m); rc = GS_FAIL(e, GS_EINTR, "rendezvous interrupted"); break; }
    if (got == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_KNOCK) {
      answer_knock(r, me, &m);
      gs_wire_msg_close(&m);
      continue;
    }
    if (got == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_REG && !proven(r, me, &m)) {
      refuse(r, &m);
      gs_wire_msg_close(&m);
      continue;
    }
    if (got < 0 || m.env->body_case != GRADSYNC__ENVELOPE__BODY_REG) {
      if (r->refused++ < 5)
        fprintf(stderr, "rank 0: rendezvous: ignored a stray message: %s\n",
                got < 0 ? me2.msg : gs_wire_kind(m.env));
      gs_wire_msg_close(&m);
      continue;
    }
    Gradsync__Register *rg = m.env->reg;
    unsigned rk = m.env->rank;
    char msg[768] = "";
    if (rk == 0 || rk >= (unsigned)world)
      snprintf(msg, sizeof msg, "rank %u registered, but this job's ranks are 0..%d "
               "(WORLD_SIZE=%d on rank 0)", rk, world - 1, world);
    else if (regs[rk].used)
      snprintf(msg, sizeof msg, "rank %u registered twice (two processes with RANK=%u); give "
               "each process of the job its own rank", rk, rk);
    else if ((int)rg->world != world)
      snprintf(msg, sizeof msg, "rank %u was started with world size %u, rank 0 with %d; give "
               "every rank the same WORLD_SIZE (torchrun --nnodes x --nproc_per_node, mpirun "
               "-np, srun -n, bench --nnodes x --nproc-per-node)", rk, rg->world, world);
    else if ((rg->endpoint && strlen(rg->endpoint) >= GS_ENDPOINT_MAX) ||
             (rg->host && strlen(rg->host) >= GS_HOST_MAX))
      snprintf(msg, sizeof msg, "rank %u registered an endpoint or host name longer than %d "
               "characters", rk, GS_HOST_MAX - 1);
    if (*msg) {
      send_error_to(r, &m.id, "rendezvous", msg);
      gs_wire_msg_close(&m);
      snprintf(why, sizeof why, "%s", msg);
      rc = GS_FAIL(e, GS_EMISMATCH, "rendezvous: %s", msg);
      break;
    }
    reg *x = &regs[rk];
    x->used = true;
    zmq_msg_init(&x->id);
    zmq_msg_copy(&x->id, &m.id);
    snprintf(x->endpoint, sizeof x->endpoint, "%s", rg->endpoint ? rg->endpoint : "");
    snprintf(x->host, sizeof x->host, "%s", rg->host ? rg->host : "");
    x->settings = join_settings(rg);
    x->world = (int)rg->world;
    gs_wire_msg_close(&m);
    have++;
    if (x->settings && strcmp(x->settings, me->settings)) {
      char diff[512];
      first_difference(me->settings, x->settings, diff, sizeof diff);
      snprintf(why, sizeof why, "configuration mismatch: rank %u differs from rank 0 in %s; "
               "start every rank with the same flags", rk, diff);
      rc = GS_FAIL(e, GS_EMISMATCH, "rendezvous: %s", why);
    }
  }

  if (rc == GS_OK) {
    job->job = token;
    for (int i = 1; i < world; i++) {
      snprintf(job->endpoints[i], GS_ENDPOINT_MAX, "%s", regs[i].endpoint);
      snprintf(job->hosts[i], GS_HOST_MAX, "%s", regs[i].host);
    }
    if (bloblen) memcpy(job->blob, blob, bloblen);
    job->bloblen = bloblen;
    job->local_world = count_local(job, me->host);
    Gradsync__Envelope env;
    Gradsync__Welcome w = GRADSYNC__WELCOME__INIT;
    char **eps = calloc((size_t)world, sizeof *eps), **hosts = calloc((size_t)world, sizeof *hosts);
    for (int i = 0; eps && hosts && i < world; i++) {
      eps[i] = job->endpoints[i];
      hosts[i] = job->hosts[i];
    }
    w.world = (uint32_t)world;
    w.n_endpoints = (size_t)world;
    w.endpoints = eps;
    w.n_hosts = (size_t)world;
    w.hosts = hosts;
    w.bootstrap.data = (uint8_t *)blob;
    w.bootstrap.len = bloblen;
    gs_wire_env(&env, job->job, 0);
    env.body_case = GRADSYNC__ENVELOPE__BODY_WELCOME;
    env.welcome = &w;
    for (int i = 1; i < world && rc == GS_OK; i++) {
      rc = gs_wire_send(r->sock, zmq_msg_data(&regs[i].id), zmq_msg_size(&regs[i].id), &env,
                        NULL, 0, NULL, NULL, timeout_ms, NULL, e);
      if (rc < 0) gs_err_prefix(e, "rank 0: rendezvous: welcoming rank %d: ", i);
    }
    free(eps);
    free(hosts);
  } else {
    for (int i = 1; i < world; i++)
      if (regs[i].used) send_error_to(r, &regs[i].id, "rendezvous", why);
  }

  for (int i = 0; i < world; i++) {
    if (regs[i].used) zmq_msg_close(&regs[i].id);
    free(regs[i].settings);
  }
  free(regs);
  r->job = job->job;
  return rc;
}

static Gradsync__Setting **split_settings(const char *s, size_t *n, char **store) {
  char *copy = strdup(s);
  size_t cnt = 0;
  for (const char *p = s; *p; p++) cnt += *p == '\n';
  Gradsync__Setting **out = calloc(cnt + 1, sizeof *out);
  Gradsync__Setting *items = calloc(cnt + 1, sizeof *items);
  if (!copy || !out || !items) {
    free(copy);
    free(out);
    free(items);
    return NULL;
  }
  size_t i = 0;
  char *save = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line && i < cnt + 1;
       line = strtok_r(NULL, "\n", &save)) {
    gradsync__setting__init(&items[i]);
    char *eq = strchr(line, '=');
    if (eq) *eq = 0;
    items[i].key = line;
    items[i].value = eq ? eq + 1 : "";
    out[i] = &items[i];
    i++;
  }
  *n = i;
  *store = copy;
  return out;
}

/* every endpoint and host name fits where the job keeps it */
static bool welcome_strings_fit(const Gradsync__Welcome *w) {
  for (size_t i = 0; i < w->n_endpoints; i++)
    if (strlen(w->endpoints[i]) >= GS_ENDPOINT_MAX) return false;
  for (size_t i = 0; i < w->n_hosts; i++)
    if (strlen(w->hosts[i]) >= GS_HOST_MAX) return false;
  return true;
}

/* Rank r: knock, check rank 0's proof, and make this rank's. */
static int knock(gs_rdv *r, const char *master, const gs_rdv_me *me, int timeout_ms,
                 uint8_t proof[GS_KEY_BYTES], gs_err *e) {
  uint8_t ours[NONCE_BYTES];
  nonce(ours);
  Gradsync__Envelope env;
  Gradsync__Knock k = GRADSYNC__KNOCK__INIT;
  k.nonce.data = ours;
  k.nonce.len = NONCE_BYTES;
  gs_wire_env(&env, 0, (uint32_t)me->rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_KNOCK;
  env.knock = &k;
  GS_TRY(gs_wire_send(r->sock, NULL, 0, &env, NULL, 0, NULL, NULL, timeout_ms, NULL, e));
  gs_wire_msg m;
  int rc = gs_wire_recv(r->sock, false, timeout_ms, 0, 0, &m, e);
  if (rc == GS_ETIMEOUT) {
    gs_err_clear(e);
    rc = GS_FAIL(e, GS_ETIMEOUT, "rank %d: no answer from rank 0 at %s in %.0f s (is rank 0 "
                 "running there, with the same MASTER_ADDR/MASTER_PORT?)", me->rank, master,
                 timeout_ms / 1000.0);
  } else if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
    rc = GS_FAIL(e, GS_EMISMATCH, "rank %d: rank 0 refused this job: %s", me->rank,
                 m.env->error->message);
  } else if (rc == GS_OK && m.env->body_case != GRADSYNC__ENVELOPE__BODY_CHALLENGE) {
    rc = GS_FAIL(e, GS_EPROTO, "rank %d: expected a challenge from rank 0 at %s, got a %s "
                 "message", me->rank, master, gs_wire_kind(m.env));
  } else if (rc == GS_OK) {
    Gradsync__Challenge *ch = m.env->challenge;
    uint8_t both[2 * NONCE_BYTES];
    memcpy(both, ours, NONCE_BYTES);
    if (ch->nonce.len == NONCE_BYTES) memcpy(both + NONCE_BYTES, ch->nonce.data, NONCE_BYTES);
    if (ch->nonce.len != NONCE_BYTES ||
        !gs_cred_verify(me->cred, "rdv-server", both, sizeof both, ch->proof.data,
                        ch->proof.len)) {
      rc = GS_FAIL(e, GS_EPROTO, "rank %d: the process at %s does not prove it holds this "
                   "job's secret: it is not this job's rank 0, or GS_JOB_SECRET (or "
                   "--secret-file) differs between the nodes", me->rank, master);
    } else {
      uint8_t msg[2 * NONCE_BYTES + 8];
      client_msg(ch->nonce.data, ours, (uint32_t)me->rank, (uint32_t)me->world, msg);
      gs_cred_mac(me->cred, "rdv-client", msg, sizeof msg, proof);
    }
  } else {
    gs_err_prefix(e, "rank %d: rendezvous with rank 0 at %s: ", me->rank, master);
  }
  gs_wire_msg_close(&m);
  return rc;
}

int gs_rdv_join(const char *master, const gs_rdv_me *me, int timeout_ms, gs_rdv **out,
                gs_rdv_job *job, gs_err *e) {
  gs_rdv *r = NULL;
  GS_TRY(new_socket(&r, ZMQ_DEALER, e));
  if (zmq_connect(r->sock, master) < 0) {
    int err = zmq_errno();
    rdv_free(r);
    return GS_FAIL(e, GS_EINVAL, "rank %d: cannot connect to rank 0 at %s: %s (check "
                   "MASTER_ADDR / MASTER_PORT)", me->rank, master, zmq_strerror(err));
  }
  uint8_t proof[GS_KEY_BYTES];
  int rc = knock(r, master, me, timeout_ms, proof, e);
  if (rc < 0) {
    rdv_free(r);
    return rc;
  }
  Gradsync__Envelope env;
  Gradsync__Register rg = GRADSYNC__REGISTER__INIT;
  char *store = NULL;
  rg.proof.data = proof;
  rg.proof.len = sizeof proof;
  rg.world = (uint32_t)me->world;
  rg.local_rank = (uint32_t)me->local_rank;
  rg.host = (char *)me->host;
  rg.endpoint = (char *)me->endpoint;
  rg.pid = (int32_t)getpid();
  rg.settings = split_settings(me->settings, &rg.n_settings, &store);
  gs_wire_env(&env, 0, (uint32_t)me->rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_REG;
  env.reg = &rg;
  rc = rg.settings ? gs_wire_send(r->sock, NULL, 0, &env, NULL, 0, NULL, NULL, timeout_ms,
                                      NULL, e)
                       : GS_FAIL(e, GS_ENOMEM, "out of memory");
  if (rg.settings) free(rg.settings[0]);
  free(rg.settings);
  free(store);
  if (rc < 0) {
    rdv_free(r);
    return rc;
  }

  gs_wire_msg m;
  rc = gs_wire_recv(r->sock, false, timeout_ms, 0, 0, &m, e);
  if (rc == GS_ETIMEOUT) {
    gs_err_clear(e);
    rc = GS_FAIL(e, GS_ETIMEOUT, "rank %d: no welcome from rank 0 at %s in %.0f s (is rank 0 "
                 "running, and have all %d ranks started?)", me->rank, master,
                 timeout_ms / 1000.0, me->world);
  } else if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
    rc = GS_FAIL(e, GS_EMISMATCH, "rank %d: rank 0 refused this job: %s", me->rank,
                 m.env->error->message);
  } else if (rc == GS_OK && m.env->body_case != GRADSYNC__ENVELOPE__BODY_WELCOME) {
    rc = GS_FAIL(e, GS_EPROTO, "rank %d: expected a welcome from rank 0, got a %s message",
                 me->rank, gs_wire_kind(m.env));
  } else if (rc == GS_OK) {
    Gradsync__Welcome *w = m.env->welcome;
    if ((int)w->world != me->world || w->n_endpoints != w->world || w->n_hosts != w->world ||
        w->bootstrap.len > GS_BOOTSTRAP_MAX || !welcome_strings_fit(w)) {
      rc = GS_FAIL(e, GS_EPROTO, "rank %d: a malformed welcome from rank 0", me->rank);
    } else if (fill_job(job, me->world)) {
      rc = GS_FAIL(e, GS_ENOMEM, "out of memory");
    } else {
      for (int i = 0; i < me->world; i++) {
        snprintf(job->endpoints[i], GS_ENDPOINT_MAX, "%s", w->endpoints[i]);
        snprintf(job->hosts[i], GS_HOST_MAX, "%s", w->hosts[i]);
      }
      if (w->bootstrap.len) memcpy(job->blob, w->bootstrap.data, w->bootstrap.len);
      job->bloblen = w->bootstrap.len;
      job->job = m.env->job;
      job->local_world = count_local(job, me->host);
      r->job = job->job;
    }
  } else {
    gs_err_prefix(e, "rank %d: rendezvous with rank 0 at %s: ", me->rank, master);
  }
  gs_wire_msg_close(&m);
  if (rc < 0) {
    gs_rdv_job_free(job);
    rdv_free(r);
    return rc;
  }
  *out = r;
  return GS_OK;
}

void gs_rdv_report_error(gs_rdv *r, int rank, const char *phase, const char *msg) {
  if (!r || r->router) return;
  Gradsync__Envelope env;
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  gs_wire_env(&env, r->job, (uint32_t)rank);
  er.phase = (char *)phase;
  er.message = (char *)msg;
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  gs_wire_send(r->sock, NULL, 0, &env, NULL, 0, NULL, NULL, 500, NULL, NULL);
}
