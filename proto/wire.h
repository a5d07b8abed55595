/* wire.h: how gradsync messages travel over ZeroMQ.
 *
 * A message is [identity frame, when a ROUTER is involved] + one frame with
 * a packed gradsync.Envelope + at most one raw payload frame of tensor
 * bytes. Payloads are sent zero-copy (zmq_msg_init_data) when the caller
 * passes a release callback, so a 25 MiB bucket is never copied by us on the
 * way out; the callback tells the owner when ZeroMQ is done with the bytes.
 *
 * gs_wire_recv waits at most timeout_ms, in short slices so that SIGINT is
 * noticed, and rejects before anything is interpreted:
 *   - more frames than [id] + header + 1 payload, an empty or oversized
 *     header, a header that does not unpack, a wrong protocol version, and
 *     a job token that is not ours (unauthenticated);
 * the caller then checks kind, step, bucket and size against what it
 * expects (gs_wire_expect_payload for the size). Counters of bytes on the
 * wire (headers included) are kept per call for the traffic metrics. */
#ifndef GS_WIRE_H
#define GS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "kernels/kernels.h"
#include "proto/gradsync.pb-c.h"

#define GS_PROTO_VERSION 1u
#define GS_SERVER_RANK 0xffffffffu
#define GS_HEADER_MAX 65536u      /* an Envelope is small; more is an attack or a bug */

typedef struct gs_wire_msg {
  zmq_msg_t id;                   /* ROUTER identity (when has_id) */
  bool has_id;
  Gradsync__Envelope *env;        /* unpacked header (NULL on error) */
  zmq_msg_t payload;              /* raw tensor bytes (when has_payload) */
  bool has_payload;
  size_t bytes;                   /* frames' bytes received, identity excluded */
} gs_wire_msg;

/* A readable name for the kind of an envelope ("push", "params", ...). */
const char *gs_wire_kind(const Gradsync__Envelope *env);

/* Fill the common header fields. */
void gs_wire_env(Gradsync__Envelope *env, uint64_t job, uint32_t rank);

/* Send [id] + header + [payload]. With release != NULL the payload is sent
 * zero-copy and release(data, hint) runs once ZeroMQ is done with it (also
 * on failure); otherwise it is copied. *bytes (may be NULL) grows by the
 * header + payload size. Blocks at most timeout_ms for room to send. */
int gs_wire_send(void *sock, const void *id, size_t idlen, const Gradsync__Envelope *env,
                 const void *data, size_t len, zmq_free_fn *release, void *hint,
                 int timeout_ms, uint64_t *bytes, gs_err *e);

/* Receive one message into m (initialised here; close it with
 * gs_wire_msg_close in every case). router: expect an identity frame.
 * max_payload bounds the raw frame. GS_ETIMEOUT when nothing came. */
int gs_wire_recv(void *sock, bool router, int timeout_ms, uint64_t job, size_t max_payload,
                 gs_wire_msg *m, gs_err *e);
void gs_wire_msg_close(gs_wire_msg *m);

/* The payload must hold exactly count elements of dtype t. */
int gs_wire_expect_payload(const gs_wire_msg *m, uint64_t count, gs_dtype t, gs_err *e);

/* Poll one socket for input up to timeout_ms in slices, watching
 * gs_interrupted: 1 readable, 0 timed out, GS_EINTR interrupted. */
int gs_wire_wait(void *sock, int timeout_ms, gs_err *e);

/* ZMQ_LAST_ENDPOINT of a socket just bound to "tcp://host:*". */
int gs_wire_bind_any(void *sock, const char *host, char *endpoint, size_t cap, gs_err *e);

/* Socket options every data socket gets: no linger on abort, large kernel
 * buffers, unbounded high-water marks (flow is bounded by the protocol). */
void gs_wire_tune(void *sock);

gs_dtype gs_wire_dtype(Gradsync__DType t);
Gradsync__DType gs_wire_pbdtype(gs_dtype t);

#endif
