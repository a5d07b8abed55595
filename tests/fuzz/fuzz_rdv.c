/* fuzz_rdv.c: the rendezvous (bench/job/job.h) receiving arbitrary
 * messages: rank 0 collecting registrations (gs_rdv_host) and measurements
 * (gs_rdv_gather), and a rank waiting for its welcome (gs_rdv_join).
 *
 * Input: one byte (bits 0-1 the role: 0 host, 1 gather, 2 join; bits 2-3
 * the world size 2..4), then the messages as parts (fuzz.h), sent over
 * ipc:// (the rendezvous makes its own ZeroMQ context) with the job's
 * CURVE keys, as a rank that proved itself would send them: in host mode
 * by a DEALER holding rank 1's key, which then registers as rank 1 on the
 * same connection (the other ranks join as ranks do); in gather mode
 * on rank 1's own connection after the round, before every rank reports
 * an error (gs_rdv_report_error) so that every call returns at once; in
 * join mode by rank 0's ROUTER as the reply to the registration. In host
 * and gather mode a stranger without the secret sends the same parts too:
 * they must change nothing. A timeout is a finding (a stray message
 * stalled the rendezvous). What an accepted round hands back must be
 * whole: measurements of as many rows and spans as they claim, strings
 * terminated.
 *
 * This harness follows the rendezvous as it is: the token given to
 * gs_rdv_host, the keys of one credential (CRED). When those change, its
 * message building (msgs.c and the seeds in mkseeds.c) changes too. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "bench/job/job.h"
#include "fuzz.h"
#include "proto/proto.h"

#define TOKEN FUZZ_RDV_TOKEN
#define SETTINGS "mode=ps\nmodel=mlp:4-2\n"  /* fuzz_register_msg's with mlp:4-2 */
#define TIMEOUT_MS 5000
#define MAXPARTS 64

static void *zctx;
static unsigned serial;
static gs_cred CRED;

/* The fuzz messages, each prefixed by the routing id when there is one.
 * A stranger's (must false) go as far as its socket takes them: the
 * rendezvous never admits its connection, so its queue may fill and a
 * send time out, which is the refusal, not a finding. */
static void send_parts(void *s, const zmq_msg_t *id, const fuzz_part *p, size_t n, bool must) {
  for (size_t i = 0; i < n; i++) {
    bool first = i == 0 || !p[i - 1].more;
    if (first && id)
      zmq_send(s, zmq_msg_data((zmq_msg_t *)id), zmq_msg_size((zmq_msg_t *)id), ZMQ_SNDMORE);
    bool sent = zmq_send(s, p[i].data, p[i].len, p[i].more ? ZMQ_SNDMORE : 0) == (int)p[i].len;
    if (!must && !sent) return;
    FUZZ_CHECK(sent, "zmq_send: %s", zmq_strerror(zmq_errno()));
  }
}

/* curve: 0 none (a stranger), 1 rank 1's key (a DEALER) or rank 0's (a
 * ROUTER) */
static void *socket_to(int type, const char *ep, bool bind, int curve) {
  void *s = zmq_socket(zctx, type);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  gs_err e = {0};
  if (curve && type == ZMQ_ROUTER)
    FUZZ_CHECK(gs_cred_rdv_server(s, &CRED, &e) == 0, "%s", e.msg);
  else if (curve)
    FUZZ_CHECK(gs_cred_rdv_client(s, &CRED, 1, &e) == 0, "%s", e.msg);
  int rc;
  /* libFuzzer's timer signal can interrupt the call: try again */
  do rc = s ? (bind ? zmq_bind(s, ep) : zmq_connect(s, ep)) : -1;
  while (rc < 0 && s && zmq_errno() == EINTR);
  FUZZ_CHECK(rc == 0, "%s %s: %s", bind ? "bind" : "connect", ep, zmq_strerror(zmq_errno()));
  return s;
}

static void check_job(const gs_rdv_job *job, int world) {
  FUZZ_CHECK(job->world == world && job->bloblen <= GS_BOOTSTRAP_MAX,
             "a job of world %d (expected %d) with a %zu-byte blob", job->world, world,
             job->bloblen);
  for (int i = 0; i < world; i++)
    FUZZ_CHECK(strnlen(job->endpoints[i], GS_ENDPOINT_MAX) < GS_ENDPOINT_MAX &&
                   strnlen(job->hosts[i], GS_HOST_MAX) < GS_HOST_MAX,
               "rank %d's endpoint or host is not terminated", i);
}

static gs_rdv_me me_as(int rank, int world) {
  return (gs_rdv_me){.rank = rank, .world = world, .host = "fuzzhost",
                   .endpoint = "tcp://127.0.0.1:1", .settings = SETTINGS, .cred = &CRED};
}

typedef struct joiner {
  char ep[64];
  int rank, world, rc;
  gs_rdv *r;                 /* kept for the gather */
  pthread_t th;
} joiner;

static void *join_main(void *arg) {
  joiner *j = arg;
  gs_rdv_job job = {0};
  gs_err e = {0};
  gs_rdv_me me = me_as(j->rank, j->world);
  j->rc = gs_rdv_join(j->ep, &me, TIMEOUT_MS, &j->r, &job, &e);
  gs_rdv_job_free(&job);
  return NULL;
}

static void host_or_gather(bool gather, int world, const fuzz_part *p, size_t np,
                           size_t size) {
  char ep[64], bound[256];
  snprintf(ep, sizeof ep, "ipc://@gs-fuzz-rdv-%d-%u", (int)getpid(), serial++);
  gs_rdv *r = NULL;
  gs_err e = {0};
  FUZZ_CHECK(gs_rdv_listen(ep, &CRED, world, bound, sizeof bound, &r, &e) == 0, "listen: %s",
             e.msg);
  void *d = socket_to(ZMQ_DEALER, ep, false, 1), *stranger = socket_to(ZMQ_DEALER, ep, false, 0);
  int ms = 0;
  zmq_setsockopt(stranger, ZMQ_SNDTIMEO, &ms, sizeof ms);
  send_parts(stranger, NULL, p, np, false);
  joiner js[4] = {0};
  /* host: rank 1 is the fuzz DEALER, which registers properly after the
   * fuzz messages on the same connection, so their order is the input's */
  if (!gather) {
    uint8_t reg[1024];
    send_parts(d, NULL, p, np, true);
    size_t n = fuzz_register_msg(reg, 1, (uint32_t)world, "mlp:4-2");
    FUZZ_CHECK(zmq_send(d, reg, n, 0) == (int)n, "zmq_send: %s", zmq_strerror(zmq_errno()));
  }
  for (int rk = gather ? 1 : 2; rk < world; rk++) {
    js[rk] = (joiner){.rank = rk, .world = world};
    snprintf(js[rk].ep, sizeof js[rk].ep, "%s", ep);
    FUZZ_CHECK(pthread_create(&js[rk].th, NULL, join_main, &js[rk]) == 0, "pthread_create%s", "");
  }
  gs_rdv_job job = {0};
  gs_rdv_me me0 = me_as(0, world);
  int rc = gs_rdv_host(r, &me0, TOKEN, "blob", 4, TIMEOUT_MS, &job, &e);
  for (int rk = gather ? 1 : 2; rk < world; rk++) pthread_join(js[rk].th, NULL);
  if (gather) {
    FUZZ_CHECK(rc == 0, "the rendezvous refused valid registrations: %s", e.msg);
  } else {
    fuzz_verdict(rc, &e, "gs_rdv_host");
    FUZZ_CHECK(rc != GS_ETIMEOUT, "stray messages stalled the rendezvous: %s", e.msg);
    if (rc == 0) {
      check_job(&job, world);
      FUZZ_CHECK(job.job == TOKEN && job.bloblen == 4, "job token or blob changed%s", "");
    }
  }
  gs_rdv_job_free(&job);
  if (gather) {
    for (int rk = 1; rk < world; rk++)
      FUZZ_CHECK(js[rk].rc == 0 && js[rk].r, "rank %d did not join", rk);
    send_parts(stranger, NULL, p, np, false);
    send_parts(gs_rdv_socket(js[1].r), NULL, p, np, true);
    for (int rk = 1; rk < world; rk++)
      gs_rdv_report_error(js[rk].r, rk, "fuzz", "the harness ends the gather");
    gs_rank_result out[4];
    memset(out, 0, sizeof out);
    gs_err ge = {0};
    gs_gather_limits lim = {.rows = 64, .spans = 64};
    rc = gs_rdv_gather(r, world, &lim, TIMEOUT_MS, out, &ge);
    fuzz_verdict(rc, &ge, "gs_rdv_gather");
    FUZZ_CHECK(rc != GS_ETIMEOUT, "stray messages stalled the gather: %s", ge.msg);
    for (int i = 1; i < world; i++) {
      gs_rank_result *x = &out[i];
      FUZZ_CHECK(rc < 0 || x->failed || x->rows, "rank %d neither reported nor failed", i);
      FUZZ_CHECK(i == 1 || rc < 0 || x->failed, "rank %d's report came from rank 1", i);
      FUZZ_CHECK(strnlen(x->host, sizeof x->host) < sizeof x->host &&
                     strnlen(x->error, sizeof x->error) < sizeof x->error,
                 "rank %d: host or error not terminated", i);
      FUZZ_CHECK(x->nrows <= lim.rows && x->nspans <= lim.spans,
                 "rank %d: accepted %zu rows and %zu spans, beyond the limits", i, x->nrows,
                 x->nspans);
      /* every row and span it claims must be there: they came from this input */
      size_t rb, sb, all;
      FUZZ_CHECK(!__builtin_mul_overflow(x->nrows, sizeof(gs_step_row), &rb) &&
                     !__builtin_mul_overflow(x->nspans, sizeof(gs_span), &sb) &&
                     !__builtin_add_overflow(rb, sb, &all) && all <= size * 64,
                 "rank %d: accepted %zu rows and %zu spans from a %zu-byte input", i, x->nrows,
                 x->nspans, size);
      volatile const uint8_t *last;
      if (x->rows && x->nrows) {
        last = (const uint8_t *)(x->rows + x->nrows) - 1;
        (void)*last;
      }
      if (x->spans && x->nspans) {
        last = (const uint8_t *)(x->spans + x->nspans) - 1;
        (void)*last;
      }
      gs_rank_result_free(x);
    }
  }
  for (int rk = 1; rk < world; rk++)
    if (js[rk].r) gs_rdv_close(js[rk].r);
  zmq_close(d);
  zmq_close(stranger);
  gs_rdv_close(r);
}

typedef struct responder {
  void *router;
  const fuzz_part *p;
  size_t np;
  bool got;
} responder;

/* Rank 0's side in join mode: the fuzz messages for the registration (an
 * empty frame when there are none). */
static void *respond(void *arg) {
  responder *rs = arg;
  gs_wire_msg m;
  gs_err e = {0};
  if (gs_wire_recv(rs->router, true, TIMEOUT_MS, 0, 0, &m, &e) < 0) {
    gs_wire_msg_close(&m);
    return NULL;
  }
  zmq_msg_t id;
  zmq_msg_init(&id);
  zmq_msg_copy(&id, &m.id);
  gs_wire_msg_close(&m);
  rs->got = true;
  if (rs->np) {
    send_parts(rs->router, &id, rs->p, rs->np, true);
  } else {
    zmq_send(rs->router, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
    zmq_send(rs->router, "", 0, 0);
  }
  zmq_msg_close(&id);
  return NULL;
}

static void join(int world, const fuzz_part *p, size_t np) {
  char ep[64];
  snprintf(ep, sizeof ep, "ipc://@gs-fuzz-rdv-%d-%u", (int)getpid(), serial++);
  responder rs = {.router = socket_to(ZMQ_ROUTER, ep, true, 1), .p = p, .np = np};
  pthread_t th;
  FUZZ_CHECK(pthread_create(&th, NULL, respond, &rs) == 0, "pthread_create failed%s", "");
  gs_rdv *r = NULL;
  gs_rdv_job job = {0};
  gs_err e = {0};
  gs_rdv_me me1 = me_as(1, world);
  int rc = gs_rdv_join(ep, &me1, TIMEOUT_MS, &r, &job, &e);
  pthread_join(th, NULL);
  FUZZ_CHECK(rs.got, "rank 0 never saw the registration%s", "");
  fuzz_verdict(rc, &e, "gs_rdv_join");
  FUZZ_CHECK(rc != GS_ETIMEOUT, "a reply did not end the wait: %s", e.msg);
  FUZZ_CHECK((rc == 0) == (r != NULL), "rc %d with rendezvous %p", rc, (void *)r);
  if (rc == 0) check_job(&job, world);
  gs_rdv_job_free(&job);
  if (r) gs_rdv_close(r);
  zmq_close(rs.router);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!zctx) {
    gs_err e = {0};
    FUZZ_CHECK(gs_cred_derive(&CRED, "fuzz", 4, false, &e) == 0, "%s", e.msg);
    zctx = zmq_ctx_new();
    FUZZ_CHECK(zctx != NULL, "zmq_ctx_new failed%s", "");
  }
  int role = data[0] & 3, world = 2 + ((data[0] >> 2) & 3) % 3;
  fuzz_part parts[MAXPARTS];
  size_t np = fuzz_split(data + 1, size - 1, parts, MAXPARTS);
  if (np) parts[np - 1].more = false;
  if (role == 2) join(world, parts, np);
  else host_or_gather(role == 1, world, parts, np, size);
  return 0;
}
