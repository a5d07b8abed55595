/* fuzz_wire.c: gs_wire_recv (proto/proto.h), the checked receive every
 * backend and the rendezvous use, on arbitrary multi-frame messages sent
 * through an inproc:// socket pair.
 *
 * Input: one byte of settings (bit 0 the receiver is a ROUTER, bit 1 it
 * checks a job token, bits 2-4 the largest payload it takes, bit 5 one
 * more message with an oversized header), then parts (fuzz.h): the frames,
 * a part without "more" ending a message. Every message sent must be
 * consumed by exactly one gs_wire_recv, whose verdict must be the one an
 * independent reading of proto.h's rules gives (header 1..GS_HEADER_MAX
 * bytes that unpack, at most one payload frame within the bound, our
 * protocol version, our job token, a body); an accepted message must hand
 * back the header and payload that were sent. */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "fuzz.h"
#include "proto/proto.h"

#define JOB FUZZ_WIRE_JOB
#define MAXPARTS 64

static void *zctx, *rx[2], *tx[2];

static void setup(void) {
  zctx = zmq_ctx_new();
  FUZZ_CHECK(zctx != NULL, "zmq_ctx_new failed%s", "");
  static const char *eps[2] = {"inproc://fuzz-wire-pair", "inproc://fuzz-wire-router"};
  for (int r = 0; r < 2; r++) {
    rx[r] = zmq_socket(zctx, r ? ZMQ_ROUTER : ZMQ_DEALER);
    tx[r] = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(rx[r], ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(tx[r], ZMQ_LINGER, &zero, sizeof zero);
    FUZZ_CHECK(zmq_bind(rx[r], eps[r]) == 0 && zmq_connect(tx[r], eps[r]) == 0,
               "inproc pair %d: %s", r, zmq_strerror(zmq_errno()));
  }
}

/* What proto.h says gs_wire_recv must conclude about frames f[0..n). */
static int expected(const fuzz_part *f, size_t n, uint64_t job, size_t max_payload) {
  if (f[0].len == 0 || f[0].len > GS_HEADER_MAX) return GS_EPROTO;
  Gradsync__Envelope *env = gradsync__envelope__unpack(NULL, f[0].len, f[0].data);
  if (!env) return GS_EPROTO;
  int rc = n > 2                                      ? GS_EPROTO
           : n == 2 && f[1].len > max_payload         ? GS_EPROTO
           : env->version != GS_PROTO_VERSION         ? GS_EPROTO
           : job && env->job != job                   ? GS_EPROTO
           : env->body_case == GRADSYNC__ENVELOPE__BODY__NOT_SET ? GS_EPROTO
                                                      : GS_OK;
  gradsync__envelope__free_unpacked(env, NULL);
  return rc;
}

static void send_frames(void *s, const fuzz_part *f, size_t n) {
  for (size_t i = 0; i < n; i++)
    FUZZ_CHECK(zmq_send(s, f[i].data, f[i].len, i + 1 < n ? ZMQ_SNDMORE : 0) == (int)f[i].len,
               "zmq_send: %s", zmq_strerror(zmq_errno()));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!zctx) setup();
  static const size_t maxes[8] = {0, 1, 4, 16, 64, 1024, 65536, SIZE_MAX};
  int router = data[0] & 1;
  uint64_t job = data[0] & 2 ? JOB : 0;
  size_t max_payload = maxes[(data[0] >> 2) & 7];
  bool oversized = data[0] & 0x20;

  fuzz_part parts[MAXPARTS + 1];
  size_t np = fuzz_split(data + 1, size - 1, parts, MAXPARTS);
  if (np) parts[np - 1].more = false;
  static uint8_t big[GS_HEADER_MAX + 1];
  if (oversized) parts[np++] = (fuzz_part){big, sizeof big, false};

  /* send every message, then receive them one by one */
  size_t nmsg = 0;
  for (size_t i = 0, start = 0; i < np; i++)
    if (!parts[i].more) {
      send_frames(tx[router], parts + start, i + 1 - start);
      nmsg++;
      start = i + 1;
    }
  for (size_t i = 0, start = 0, msg = 0; i < np; i++) {
    if (parts[i].more) continue;
    const fuzz_part *f = parts + start;
    size_t nf = i + 1 - start;
    start = i + 1;
    gs_wire_msg m;
    gs_err e = {0};
    int rc = gs_wire_recv(rx[router], router, 5000, job, max_payload, &m, &e);
    if (msg++ == 0) fuzz_verdict(rc, &e, "gs_wire_recv");  /* the first is the seed's promise */
    else fuzz_check_err(rc, &e, "gs_wire_recv");
    int want = expected(f, nf, job, max_payload);
    FUZZ_CHECK(rc == want, "message %zu of %zu (%zu frames): verdict %d, expected %d (%s)", msg,
               nmsg, nf, rc, want, rc ? e.msg : "accepted");
    if (rc == 0) {
      FUZZ_CHECK(m.env && m.has_id == (bool)router && m.has_payload == (nf == 2),
                 "accepted without its parts%s", "");
      FUZZ_CHECK(m.bytes == f[0].len + (nf == 2 ? f[1].len : 0), "counted %zu bytes", m.bytes);
      if (nf == 2)
        FUZZ_CHECK(zmq_msg_size(&m.payload) == f[1].len &&
                       (!f[1].len || !memcmp(zmq_msg_data(&m.payload), f[1].data, f[1].len)),
                   "the payload differs from what was sent%s", "");
      /* the check every receiver applies to a payload it was promised */
      uint64_t count = m.has_payload ? zmq_msg_size(&m.payload) / 4 : 0;
      gs_err pe = {0};
      int prc = gs_wire_expect_payload(&m, count, GS_F32, &pe);
      fuzz_check_err(prc, &pe, "gs_wire_expect_payload");
      FUZZ_CHECK((prc == 0) == (!m.has_payload || zmq_msg_size(&m.payload) % 4 == 0),
                 "expect_payload(%llu f32) on %zu bytes: %d", (unsigned long long)count,
                 m.has_payload ? zmq_msg_size(&m.payload) : 0, prc);
    }
    gs_wire_msg_close(&m);
  }
  /* nothing may be left over for the next receive */
  gs_wire_msg m;
  gs_err e = {0};
  int rc = gs_wire_recv(rx[router], router, 0, job, max_payload, &m, &e);
  FUZZ_CHECK(rc == GS_ETIMEOUT, "a frame left over after %zu messages (verdict %d)", nmsg, rc);
  gs_wire_msg_close(&m);
  return 0;
}
