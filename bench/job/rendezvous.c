/* rendezvous.c: how the ranks of one job find each other and agree on what
 * they run (the hand-over of the measurements at the end is gather.c's).
 *
 *   rank 0 (ROUTER at MASTER_ADDR:MASTER_PORT)        rank r (DEALER)
 *      <=================> CURVE handshake (ZeroMQ): rank r encrypts to
 *                          rank 0's key, rank 0's ZAP handler admits only
 *                          the keys of ranks 1..world-1 (all derived from
 *                          the job secret; proto/auth.c) and names the rank
 *      <------------------ Register{rank, world, endpoint, host, settings}
 *      collect world-1 registrations (timeout), then check: no duplicate
 *      rank, same world, same settings as rank 0 (else Error naming the
 *      first setting that differs, sent to every rank)
 *      ------------------> Welcome{endpoints, hosts, blob} + job token
 *      ... training: the backends talk among themselves ...
 *      <------------------ Stats parts + Measurements   (gather.c)
 *      ------------------> Shutdown (ack: rank r may exit)
 *
 * Everything after the handshake is encrypted and comes from a connection
 * whose key proved which rank it is: rank 0 takes a message only when the
 * rank it claims is the rank its connection proved. A peer without the
 * secret never finishes the handshake: it reaches nothing of rank 0 but
 * libzmq's handshake, gets nothing back (not even an error), and costs a
 * bounded buffer (ZMQ_MAXMSGSIZE is GS_RDV_FRAME_MAX; a connection that
 * does not finish its handshake in HANDSHAKE_MS is dropped).
 *
 * The DEALER connects before rank 0 may be listening (ZeroMQ reconnects on
 * its own), so ranks can start in any order within the timeout. A refused
 * handshake (another secret, another world size) makes libzmq give up on
 * the connection; the rank then dials again until its timeout, and its
 * error says what the last attempt met. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>
#include <zmq.h>

#include "bench/job/job.h"
#include "proto/proto.h"

#define HANDSHAKE_MS 5000   /* a connection that proves nothing in this long is dropped */
#define RCVHWM 64           /* messages queued per proven rank while rank 0 does not read */
#define REDIAL_S 0.5        /* a rank dials again this long after a refused handshake */
#define REFUSALS_SHOWN 5

struct gs_rdv {
  void *ctx, *sock, *mon;
  gs_zap *zap;              /* rank 0 */
  bool router;
  uint64_t job;
  unsigned refused;         /* messages refused, for the first few lines */
};

void *gs_rdv_socket(gs_rdv *r) { return r->sock; }
uint64_t gs_rdv_job_token(const gs_rdv *r) { return r->job; }

static void rdv_free(gs_rdv *r) {
  if (!r) return;
  gs_wire_monitor_close(r->sock, r->mon);
  gs_sock_close(r->sock, GS_SOCK_AS_OPENED);
  gs_sock_context_end(r->ctx, r->zap);
  free(r);
}

void gs_rdv_close(gs_rdv *r) { rdv_free(r); }

void gs_rdv_job_free(gs_rdv_job *j) {
  free(j->endpoints);
  free(j->hosts);
  j->endpoints = NULL;
  j->hosts = NULL;
}

/* rank 0: world > 0, the rendezvous' ZAP handler for that many ranks */
static int new_socket(gs_rdv **out, int type, const gs_cred *cred, int rank, int world,
                      gs_err *e) {
  gs_rdv *r = calloc(1, sizeof *r);
  if (!r) return GS_FAIL(e, GS_ENOMEM, "out of memory");
  r->router = type == ZMQ_ROUTER;
  int rc = GS_OK;
  if (!(r->ctx = gs_sock_context(0, e))) {
    gs_err_prefix(e, "rendezvous: ");
    rc = GS_EIO;
  }
  if (rc == GS_OK && r->router) rc = gs_zap_start(r->ctx, cred, world, "rank 0: rendezvous",
                                                  &r->zap, e);
  gs_sock_opts o = {.type = type, .linger_ms = 2000, .max_msg = GS_RDV_FRAME_MAX,
                    .handshake_ms = HANDSHAKE_MS, .rcvhwm = RCVHWM,
                    .router_mandatory = r->router};
  if (rc == GS_OK && !(r->sock = gs_sock_open(r->ctx, &o, NULL)))
    rc = GS_FAIL(e, GS_EIO, "rendezvous: cannot create a ZeroMQ socket: %s",
                 zmq_strerror(zmq_errno()));
  if (rc == GS_OK)
    rc = r->router ? gs_cred_rdv_server(r->sock, cred, e) : gs_cred_rdv_client(r->sock, cred,
                                                                                rank, e);
  if (rc < 0) {
    rdv_free(r);
    return rc;
  }
  *out = r;
  return GS_OK;
}

int gs_rdv_listen(const char *endpoint, const gs_cred *cred, int world, char *bound, size_t cap,
                  gs_rdv **out, gs_err *e) {
  gs_rdv *r = NULL;
  GS_TRY(new_socket(&r, ZMQ_ROUTER, cred, 0, world, e));
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

/* Only ever to a proven rank's connection. */
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
  bool used, welcomed;
  char endpoint[GS_ENDPOINT_MAX];
  char host[GS_HOST_MAX];
  char *settings;
  int world, pid;
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

bool gs_rdv_proven(gs_rdv *r, const struct gs_wire_msg *m, const char *phase) {
  if (m->proven >= 1 && (uint32_t)m->proven == m->env->rank) return true;
  if (r->refused++ < REFUSALS_SHOWN)
    fprintf(stderr, "rank 0: %s: ignored a %s message claiming rank %u from %s, whose "
            "connection proved %s%d%s\n", phase, gs_wire_kind(m->env), m->env->rank,
            m->peer[0] ? m->peer : "an unknown address", m->proven < 0 ? "no rank (" : "rank ",
            m->proven, m->proven < 0 ? ")" : "");
  return false;
}

/* The same process registering again (its first handshake was refused,
 * so it dialled again): the same registration, word for word. */
static bool same_process(const reg *x, Gradsync__Register *rg) {
  char *settings = join_settings(rg);
  bool same = x->pid == rg->pid && x->world == (int)rg->world &&
              !strcmp(x->host, rg->host ? rg->host : "") &&
              !strcmp(x->endpoint, rg->endpoint ? rg->endpoint : "") && settings &&
              x->settings && !strcmp(settings, x->settings);
  free(settings);
  return same;
}

/* Rank 0's side of the rendezvous under way: every rank's registration
 * (rank 0's own slot stays empty), how many have registered (rank 0
 * included), and what every registered rank is told when it fails. */
typedef struct hosting {
  gs_rdv *r;
  const gs_rdv_me *me;
  int world, have, timeout_ms;
  double deadline;
  reg *regs;
  char why[768];
} hosting;

/* The deadline passed before every rank registered: which ones are
 * missing. */
static int missing_ranks(hosting *h, gs_err *e) {
  char missing[256] = "";
  size_t off = 0;
  for (int i = 1; i < h->world && off < sizeof missing - 8; i++)
    if (!h->regs[i].used) off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%d",
                                                  off ? ", " : "", i);
  snprintf(h->why, sizeof h->why, "rendezvous: %d of %d ranks registered in %.0f s; missing "
           "rank(s) %s (did they start, with the same MASTER_ADDR/MASTER_PORT, WORLD_SIZE "
           "and job secret?)", h->have, h->world, h->timeout_ms / 1000.0, missing);
  return GS_FAIL(e, GS_ETIMEOUT, "%s", h->why);
}

/* Whether a message received (got: gs_wire_recv's answer, bad: its error)
 * is a registration from the rank its connection proved; the first few
 * others are named on stderr, and ignored. */
static bool is_registration(gs_rdv *r, gs_wire_msg *m, int got, const gs_err *bad) {
  if (got >= 0 && gs_rdv_proven(r, m, "rendezvous") &&
      m->env->body_case == GRADSYNC__ENVELOPE__BODY_REG)
    return true;
  if (got < 0 && r->refused++ < REFUSALS_SHOWN)
    fprintf(stderr, "rank 0: rendezvous: ignored a bad message from rank %d: %s\n", m->proven,
            bad->msg);
  else if (got == GS_OK && m->proven >= 1 && (uint32_t)m->proven == m->env->rank &&
           r->refused++ < REFUSALS_SHOWN)
    fprintf(stderr, "rank 0: rendezvous: ignored a %s message from rank %d (a registration "
            "was expected)\n", gs_wire_kind(m->env), m->proven);
  return false;
}

/* A rank's registration (m, closed here): the same process dialling again
 * keeps its slot with its new connection; a rank registered twice, another
 * world size or a name too long fails the rendezvous (that rank told so at
 * once); else the rank is recorded, and settings other than rank 0's fail
 * the rendezvous. */
static int register_rank(hosting *h, gs_wire_msg *m, gs_err *e) {
  Gradsync__Register *rg = m->env->reg;
  unsigned rk = m->env->rank;
  reg *x = &h->regs[rk];
  char msg[768] = "";
  if (x->used && same_process(x, rg)) { /* dialled again: its new connection */
    zmq_msg_close(&x->id);
    zmq_msg_init(&x->id);
    zmq_msg_copy(&x->id, &m->id);
    gs_wire_msg_close(m);
    return GS_OK;
  }
  if (x->used)
    snprintf(msg, sizeof msg, "rank %u registered twice (two processes with RANK=%u); give "
             "each process of the job its own rank", rk, rk);
  else if ((int)rg->world != h->world)
    snprintf(msg, sizeof msg, "rank %u was started with world size %u, rank 0 with %d; give "
             "every rank the same WORLD_SIZE (torchrun --nnodes x --nproc_per_node, mpirun "
             "-np, srun -n, bench --nnodes x --nproc-per-node)", rk, rg->world, h->world);
  else if ((rg->endpoint && strlen(rg->endpoint) >= GS_ENDPOINT_MAX) ||
           (rg->host && strlen(rg->host) >= GS_HOST_MAX))
    snprintf(msg, sizeof msg, "rank %u registered an endpoint or host name longer than %d "
             "characters", rk, GS_HOST_MAX - 1);
  if (*msg) {
    send_error_to(h->r, &m->id, "rendezvous", msg);
    gs_wire_msg_close(m);
    snprintf(h->why, sizeof h->why, "%s", msg);
    return GS_FAIL(e, GS_EMISMATCH, "rendezvous: %s", msg);
  }
  x->used = true;
  zmq_msg_init(&x->id);
  zmq_msg_copy(&x->id, &m->id);
  snprintf(x->endpoint, sizeof x->endpoint, "%s", rg->endpoint ? rg->endpoint : "");
  snprintf(x->host, sizeof x->host, "%s", rg->host ? rg->host : "");
  x->settings = join_settings(rg);
  x->world = (int)rg->world;
  x->pid = rg->pid;
  gs_wire_msg_close(m);
  h->have++;
  if (x->settings && strcmp(x->settings, h->me->settings)) {
    char diff[512];
    first_difference(h->me->settings, x->settings, diff, sizeof diff);
    snprintf(h->why, sizeof h->why, "configuration mismatch: rank %u differs from rank 0 in %s; "
             "start every rank with the same flags", rk, diff);
    return GS_FAIL(e, GS_EMISMATCH, "rendezvous: %s", h->why);
  }
  return GS_OK;
}

/* Registrations until every rank's is in: GS_OK, or why not (the
 * deadline, an interrupt, a registration that fails the rendezvous). */
static int collect(hosting *h, gs_err *e) {
  int rc = GS_OK;
  while (h->have < h->world && rc == GS_OK) {
    int left = (int)((h->deadline - gs_now()) * 1000.0);
    if (left <= 0) return missing_ranks(h, e);
    gs_wire_msg m;
    gs_err bad = {0};
    int got = gs_wire_recv(h->r->sock, true, left, 0, 0, &m, &bad);
    if (got == GS_EINTR) {
      gs_wire_msg_close(&m);
      return GS_FAIL(e, GS_EINTR, "rendezvous interrupted");
    }
    if (got == GS_ETIMEOUT || !is_registration(h->r, &m, got, &bad)) {
      gs_wire_msg_close(&m);
      continue;
    }
    rc = register_rank(h, &m, e);
  }
  return rc;
}

/* The job as every rank learns it: everyone's endpoint and host, rank 0
 * backend's blob, the token, and the ranks on rank 0's host. */
static void record_job(const hosting *h, uint64_t token, const void *blob, size_t bloblen,
                       gs_rdv_job *job) {
  job->job = token;
  for (int i = 1; i < h->world; i++) {
    snprintf(job->endpoints[i], GS_ENDPOINT_MAX, "%s", h->regs[i].endpoint);
    snprintf(job->hosts[i], GS_HOST_MAX, "%s", h->regs[i].host);
  }
  if (bloblen) memcpy(job->blob, blob, bloblen);
  job->bloblen = bloblen;
  job->local_world = count_local(job, h->me->host);
}

/* A rank whose connection went before its welcome: it dials again and
 * registers anew. */
static void forget(hosting *h, reg *x) {
  zmq_msg_close(&x->id);
  free(x->settings);
  x->settings = NULL;
  x->used = false;
  h->have--;
}

/* Welcome every rank not welcomed yet with the job (blob: rank 0
 * backend's, as given); *lost counts the ranks forgotten on the way (their
 * connection gone), which must register again. */
static int welcome(hosting *h, gs_rdv_job *job, const void *blob, size_t bloblen, int *lost,
                   gs_err *e) {
  int world = h->world, rc = GS_OK;
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
  *lost = 0;
  for (int i = 1; i < world && rc == GS_OK; i++) {
    reg *x = &h->regs[i];
    if (x->welcomed) continue;
    rc = gs_wire_send(h->r->sock, zmq_msg_data(&x->id), zmq_msg_size(&x->id), &env, NULL, 0,
                      NULL, NULL, h->timeout_ms, NULL, e);
    if (rc == GS_EPEER) { /* its connection is gone: it dials again and registers anew */
      gs_err_clear(e);
      rc = GS_OK;
      forget(h, x);
      (*lost)++;
    } else if (rc < 0) {
      gs_err_prefix(e, "rank 0: rendezvous: welcoming rank %d: ", i);
    } else {
      x->welcomed = true;
    }
  }
  free(eps);
  free(hosts);
  return rc;
}

int gs_rdv_host(gs_rdv *r, const gs_rdv_me *me, uint64_t token, const void *blob,
                size_t bloblen, int timeout_ms, gs_rdv_job *job, gs_err *e) {
  hosting h = {.r = r, .me = me, .world = me->world, .have = 1, .timeout_ms = timeout_ms};
  h.regs = calloc((size_t)h.world, sizeof *h.regs);
  if (!h.regs || fill_job(job, h.world)) {
    free(h.regs);
    return GS_FAIL(e, GS_ENOMEM, "out of memory");
  }
  snprintf(job->endpoints[0], GS_ENDPOINT_MAX, "%s", me->endpoint);
  snprintf(job->hosts[0], GS_HOST_MAX, "%s", me->host);
  h.deadline = gs_now() + timeout_ms / 1000.0;
  int rc, lost = 0;
  do { /* ranks lost before their welcome register again, in the time left */
    rc = collect(&h, e);
    if (rc < 0) {
      for (int i = 1; i < h.world; i++)
        if (h.regs[i].used) send_error_to(r, &h.regs[i].id, "rendezvous", h.why);
    } else {
      record_job(&h, token, blob, bloblen, job);
      rc = welcome(&h, job, blob, bloblen, &lost, e);
    }
  } while (rc == GS_OK && lost);
  for (int i = 0; i < h.world; i++) {
    if (h.regs[i].used) zmq_msg_close(&h.regs[i].id);
    free(h.regs[i].settings);
  }
  free(h.regs);
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

static int send_register(gs_rdv *r, const gs_rdv_me *me, int timeout_ms, gs_err *e) {
  Gradsync__Envelope env;
  Gradsync__Register rg = GRADSYNC__REGISTER__INIT;
  char *store = NULL;
  rg.world = (uint32_t)me->world;
  rg.local_rank = (uint32_t)me->local_rank;
  rg.host = (char *)me->host;
  rg.endpoint = (char *)me->endpoint;
  rg.pid = (int32_t)getpid();
  rg.settings = split_settings(me->settings, &rg.n_settings, &store);
  gs_wire_env(&env, 0, (uint32_t)me->rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_REG;
  env.reg = &rg;
  int rc = rg.settings ? gs_wire_send(r->sock, NULL, 0, &env, NULL, 0, NULL, NULL, timeout_ms,
                                      NULL, e)
                       : GS_FAIL(e, GS_ENOMEM, "out of memory");
  free(rg.settings ? rg.settings[0] : NULL);
  free(rg.settings);
  free(store);
  return rc;
}

/* What a refused handshake says about rank 0's side. */
static const char *refusal(uint16_t id, uint32_t status) {
  if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    return status == 400 ? "rank 0 refused this rank's key: it is no rank of rank 0's job (its "
                           "WORLD_SIZE differs, or GS_JOB_SECRET / --secret-file differs)"
                         : "rank 0's connection check failed";
  return "the handshake failed: the process there does not hold this job's secret (it is not "
         "this job's rank 0, or GS_JOB_SECRET / --secret-file differs between the ranks)";
}

#define CLOSED_IN_HANDSHAKE "the process there closed every connection during the handshake: " \
  "it does not hold this job's secret (it is not this job's rank 0, or GS_JOB_SECRET / " \
  "--secret-file differs between the ranks)"

/* Wait for rank 0's answer to the registration, dialling again after a
 * refused handshake (libzmq gives such a connection up). The registration
 * goes again over every connection after the first, since rank 0 may have
 * lost the one it came by (it takes the same registration twice as one). */
static int await_welcome(gs_rdv *r, const char *master, const gs_rdv_me *me, int timeout_ms,
                         gs_wire_msg *m, gs_err *e) {
  double deadline = gs_now() + timeout_ms / 1000.0, redial_at = 0;
  const char *last = NULL;
  bool handshaking = false, queued = true; /* the first registration waits in the pipe */
  memset(m, 0, sizeof *m);
  for (;;) {
    uint16_t id;
    uint32_t value;
    while (gs_wire_monitor_event(r->mon, &id, &value)) {
      if (id == ZMQ_EVENT_CONNECTED) handshaking = true;
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        handshaking = false;
        redial_at = 0;
        if (!queued) GS_TRY(send_register(r, me, timeout_ms, e));
        queued = false;
      }
      if (id == ZMQ_EVENT_DISCONNECTED && handshaking) last = CLOSED_IN_HANDSHAKE;
      if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
          id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        handshaking = false;
        last = refusal(id, value);
        if (!redial_at) redial_at = gs_now() + REDIAL_S;
      }
    }
    if (redial_at && gs_now() >= redial_at) {
      redial_at = 0;
      queued = false; /* dropped with the old connection's pipe */
      zmq_disconnect(r->sock, master);
      if (zmq_connect(r->sock, master) < 0)
        return GS_FAIL(e, GS_EIO, "rank %d: connecting to rank 0 at %s again: %s", me->rank,
                       master, zmq_strerror(zmq_errno()));
    }
    double left = deadline - gs_now();
    if (left <= 0) break;
    int slice = left > 0.1 ? 100 : (int)(left * 1000) + 1;
    int rc = gs_wire_recv(r->sock, false, slice, 0, 0, m, e);
    if (rc != GS_ETIMEOUT) return rc;
    gs_wire_msg_close(m);
    gs_err_clear(e);
  }
  return GS_FAIL(e, GS_ETIMEOUT, "rank %d: no welcome from rank 0 at %s in %.0f s (%s)",
                 me->rank, master, timeout_ms / 1000.0,
                 last ? last : "is rank 0 running there, with the same MASTER_ADDR/MASTER_PORT, "
                               "and have all ranks started?");
}

int gs_rdv_join(const char *master, const gs_rdv_me *me, int timeout_ms, gs_rdv **out,
                gs_rdv_job *job, gs_err *e) {
  gs_rdv *r = NULL;
  GS_TRY(new_socket(&r, ZMQ_DEALER, me->cred, me->rank, 0, e));
  r->mon = gs_wire_monitor(r->ctx, r->sock, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                                                ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                                ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                                ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                                ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
  if (zmq_connect(r->sock, master) < 0) {
    int err = zmq_errno();
    rdv_free(r);
    return GS_FAIL(e, GS_EINVAL, "rank %d: cannot connect to rank 0 at %s: %s (check "
                   "MASTER_ADDR / MASTER_PORT)", me->rank, master, zmq_strerror(err));
  }
  int rc = send_register(r, me, timeout_ms, e);
  if (rc < 0) {
    rdv_free(r);
    return rc;
  }
  gs_wire_msg m;
  rc = await_welcome(r, master, me, timeout_ms, &m, e);
  if (rc == GS_OK && m.env->body_case == GRADSYNC__ENVELOPE__BODY_ERROR) {
    rc = GS_FAIL(e, GS_EMISMATCH, "rank %d: rank 0 refused this job: %s", me->rank,
                 m.env->error->message);
  } else if (rc == GS_OK && m.env->body_case != GRADSYNC__ENVELOPE__BODY_WELCOME) {
    rc = GS_FAIL(e, GS_EPROTO, "rank %d: expected a welcome from rank 0, got a %s message",
                 me->rank, gs_wire_kind(m.env));
  } else if (rc == GS_OK) {
    Gradsync__Welcome *w = m.env->welcome;
    if ((int)w->world != me->world || w->n_endpoints != w->world || w->n_hosts != w->world ||
        w->bootstrap.len > GS_BOOTSTRAP_MAX || !welcome_strings_fit(w) || !m.env->job) {
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
  } else if (rc != GS_ETIMEOUT && rc != GS_EINTR) {
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
