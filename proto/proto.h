/* proto.h: how gradsync messages travel over ZeroMQ.
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
#ifndef GS_PROTO_H
#define GS_PROTO_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "kernels/kernels.h"
#include "proto/gradsync.pb-c.h"

#define GS_PROTO_VERSION 2u
#define GS_SERVER_RANK 0xffffffffu
#define GS_HEADER_MAX 65536u      /* an Envelope is small; more is an attack or a bug */
#ifndef GS_ENDPOINT_MAX
#define GS_ENDPOINT_MAX 256
#endif

typedef struct gs_wire_msg {
  zmq_msg_t id;                   /* ROUTER identity (when has_id) */
  bool has_id;
  Gradsync__Envelope *env;        /* unpacked header (NULL on error) */
  zmq_msg_t payload;              /* raw tensor bytes (when has_payload) */
  bool has_payload;
  size_t bytes;                   /* frames' bytes received, identity excluded */
  ProtobufCAllocator *alloc;      /* what unpacked env (NULL: malloc) */
  char peer[64];                  /* a ROUTER's sender's address ("" unknown) */
  int proven;                     /* the rank its connection proved at the rendezvous
                                     (its User-Id, set by the ZAP handler), -1 none */
} gs_wire_msg;

/* The emulated links' delay line, for kernels without netem: with delay_s
 * > 0 every message sent carries its send time (CLOCK_MONOTONIC, which all
 * network namespaces of one machine share), and one received from a rank
 * on another emulated host (rank / per_host != host; the ps server counts
 * as host 0) is handed over no earlier than that time + delay_s. Set once
 * per process, before any message; 0 (the default) turns it off. */
void gs_wire_delay(double delay_s, int host, int per_host);

/* Pack env into buf (the delay line's stamp added when it is on); returns
 * the packed size, which is larger than cap when it did not fit (nothing
 * written then). gs_wire_send packs with it; so do senders that pack their
 * own headers. */
size_t gs_wire_pack(const Gradsync__Envelope *env, uint8_t *buf, size_t cap);

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
/* The same checks on a message that is already there (no wait: after a
 * poll said readable), unpacking the header with alloc (NULL: malloc; a
 * caller that receives a lot may give an arena). */
int gs_wire_read(void *sock, bool router, uint64_t job, size_t max_payload,
                 ProtobufCAllocator *alloc, gs_wire_msg *m, gs_err *e);

/* The payload must hold exactly count elements of dtype t. */
int gs_wire_expect_payload(const gs_wire_msg *m, uint64_t count, gs_dtype t, gs_err *e);

/* Poll one socket for input up to timeout_ms in slices, watching
 * gs_interrupted: 1 readable, 0 timed out, GS_EINTR interrupted. */
int gs_wire_wait(void *sock, int timeout_ms, gs_err *e);

/* The host that binds a Unix-domain socket instead of TCP (ranks of one
 * machine): an abstract one, "ipc://@gradsync-<pid>-<n>-<random>", which
 * leaves no file behind (the job's credential still guards it). */
#define GS_WIRE_IPC "ipc"

/* Bind to "tcp://host:*" (host GS_WIRE_IPC: a fresh abstract ipc name) and
 * return ZMQ_LAST_ENDPOINT. */
int gs_wire_bind_any(void *sock, const char *host, char *endpoint, size_t cap, gs_err *e);

/* A monitor of sock's connection events (ZMQ_EVENT_* in events), as a PAIR
 * socket in ctx to read with gs_wire_monitor_event; NULL when ZeroMQ
 * refuses one (the caller then goes without). Close it with
 * gs_wire_monitor_close before sock. */
void *gs_wire_monitor(void *ctx, void *sock, int events);
void gs_wire_monitor_close(void *sock, void *mon);
/* The next event, without waiting: 1 (its id, and its value: the file
 * descriptor of ACCEPTED/CONNECTED/DISCONNECTED), 0 none. */
int gs_wire_monitor_event(void *mon, uint16_t *id, uint32_t *value);

/* ---- ZeroMQ contexts and sockets (socket.c) ----
 * Every context and socket gradsync opens is made here, each socket with
 * every option it has written out in one gs_sock_opts (ZeroMQ takes them
 * before bind or connect). Then the job's credential goes on it:
 *   - a socket that binds a data port: gs_cred_bind, in a context that
 *     runs the job's ZAP handler (gs_zap_start); its endpoint carries the
 *     port nonce;
 *   - a socket that dials one: gs_dial_open (a fresh credential per dial,
 *     and a monitor that dials again after a drop);
 *   - the rendezvous' two ends: gs_cred_rdv_server / gs_cred_rdv_client
 *     (CURVE);
 * and it ends with gs_sock_close, at the linger that end calls for.
 * Raw ZeroMQ stays only where it is the point: bench/peers/floor.c (the
 * floor that gradsync's transport is measured against) and the tests'
 * strangers and raw protocol peers. */
typedef struct gs_zap gs_zap;     /* a context's ZAP handler (auth.c) */

#define GS_SOCK_UNBOUNDED (-1)    /* a high-water mark: no bound */
#define GS_SOCK_AS_OPENED INT_MIN /* gs_sock_close: keep the linger it has */

typedef struct gs_sock_opts {
  int type;                /* ZMQ_PULL, ZMQ_PUSH, ZMQ_ROUTER, ZMQ_DEALER, ZMQ_PAIR, ZMQ_REP */
  int linger_ms;           /* what a close waits for queued messages (0: drops them) */
  /* the rest: 0 leaves ZeroMQ's default (in brackets) */
  int sndhwm, rcvhwm;      /* messages queued per peer (1000); GS_SOCK_UNBOUNDED: no bound */
  int sockbuf;             /* the kernel's SO_SNDBUF and SO_RCVBUF in bytes (the kernel's) */
  int64_t max_msg;         /* a larger frame drops its connection (none): gs_sock_frame_max */
  int handshake_ms;        /* a connection that proves nothing in this long is dropped (30 s) */
  int sndtimeo_ms;         /* a blocking send gives up after this long (never) */
  int rcvtimeo_ms;         /* a blocking receive gives up after this long (never) */
  int reconnect_ms;        /* a lost connection is dialled again after this long (100 ms) */
  bool router_mandatory;   /* ROUTER: a send to a peer not connected fails (is dropped) */
  bool router_handover;    /* ROUTER: a connection with a known routing id takes it over
                              (is refused) */
  const char *routing_id;  /* DEALER: the name a ROUTER knows it by (a random one) */
} gs_sock_opts;

/* A socket that carries whole tensors both ways (the ps' ROUTER and
 * DEALERs): queues without bound (the protocol bounds the flow), 4 MiB
 * kernel buffers, 2 s for a close to flush. Callers add their own. */
#define GS_SOCK_BULK(t)                                                                   \
  ((gs_sock_opts){.type = (t), .linger_ms = 2000, .sndhwm = GS_SOCK_UNBOUNDED,            \
                  .rcvhwm = GS_SOCK_UNBOUNDED, .sockbuf = 4 << 20})

/* A context; io_threads > 0: that many I/O threads (else ZeroMQ's one).
 * NULL when ZeroMQ makes none: e says "zmq_ctx_new: ...", errno is
 * ZeroMQ's. */
void *gs_sock_context(int io_threads, gs_err *e);
/* The end of a context (NULL: none): zmq_ctx_term, which waits for every
 * socket's linger and ends the ZAP handler's loop, then joins zap's thread
 * (NULL: none). */
void gs_sock_context_end(void *ctx, gs_zap *zap);
/* A socket of o->type in ctx with o's options. NULL when ZeroMQ refuses it
 * or one of them: e says "zmq_socket: ..." or names the option, errno is
 * ZeroMQ's. */
void *gs_sock_open(void *ctx, const gs_sock_opts *o, gs_err *e);
/* What a data port takes from a peer before it proved anything
 * (docs/security.md): max_msg for payload frames of up to payload bytes
 * (that or a header, GS_HEADER_MAX, whichever is larger, and a little),
 * and handshake_ms for a job whose waits last timeout_ms (5 s, or that
 * when shorter). */
int64_t gs_sock_frame_max(size_t payload);
int gs_sock_handshake_ms(int timeout_ms);
/* Set sock's linger; returns the one it had. */
int gs_sock_linger(void *sock, int linger_ms);
/* Close sock (NULL: nothing) with linger_ms (GS_SOCK_AS_OPENED: its own):
 * an orderly end flushes, an abort gives what is queued a moment. Close
 * its dial and monitor first. */
void gs_sock_close(void *sock, int linger_ms);

/* ---- sending again after a reconnect (resend.c) ----
 * A PUSH socket that connects survives a dropped connection, but the
 * frames in flight on it are lost. gs_resend numbers what is sent on one
 * such socket (Envelope.seq) and keeps a copy until the caller knows the
 * receiver had it; when the connection drops and comes back, it sends the
 * kept ones again. The receiver takes each number once, in order. */
typedef struct gs_resend gs_resend;
typedef struct gs_dial gs_dial;
/* dial: the PUSH socket's (dial.c), which says when the connection came
 * back (NULL: never, so nothing is kept); rank: this rank; peer and role
 * ("right", "mesh"): the receiver, for messages; keep: false numbers
 * messages but keeps none (a reset then stops the job). Close before the
 * dial and the socket. */
int gs_resend_open(gs_dial *dial, void *push, int rank, int peer, const char *role, bool keep,
                   gs_resend **out, gs_err *e);
void gs_resend_close(gs_resend *s);
/* The number for the next message (s NULL: 0, unnumbered); the last given. */
uint64_t gs_resend_next(gs_resend *s);
uint64_t gs_resend_last(const gs_resend *s);
/* Keep what was just sent as seq: its header, and its payload shared with
 * fwd (a received message, never written), borrowed from data (borrow:
 * unchanged until gs_resend_acked or gs_resend_end), or copied. */
int gs_resend_keep(gs_resend *s, uint64_t seq, const void *hdr, size_t hlen, const void *data,
                   size_t bytes, zmq_msg_t *fwd, bool borrow, gs_err *e);
/* The receiver had everything up to seq: forget it. */
void gs_resend_acked(gs_resend *s, uint64_t seq);
/* A collective begins. settles: when it ends here, every receiver had
 * everything sent before it began (every rank's result needs every rank's
 * part, so every rank had ended the one before); gs_resend_end then
 * forgets that. Without settles, what it sends is not kept. gs_resend_end
 * also copies what is still borrowed: the caller's memory is its own
 * again. */
void gs_resend_begin(gs_resend *s, bool settles);
int gs_resend_end(gs_resend *s, gs_err *e);
/* Look at the connection's events (now: else at most every 20 ms); after a
 * drop and a reconnect send every kept message again. */
int gs_resend_check(gs_resend *s, bool now, gs_err *e);
/* The receiver's side, per sender: 1 when seq is the next (or 0:
 * unnumbered, an Error), 0 for a copy already taken or anything after a
 * gap (drop it; a line on stderr says so, once per gap). */
typedef struct gs_seq_in {
  uint64_t last, warned;
} gs_seq_in;
int gs_resend_fresh(gs_seq_in *in, uint64_t seq, int rank, int from, const char *role);

/* ---- the socket pair between ring neighbours (pair.c) ----
 * A rank PULLs from its left neighbour on a socket it binds, and PUSHes to
 * its right one. gs_pair is that pair with what a stream between
 * neighbours needs besides the algorithm: socket options; a monitor that
 * notices at once when the left neighbour's connection drops; waits that
 * poll a little first (latency) and then sleep in slices watching
 * gs_interrupted and gs_pair_interrupt; receives checked as gs_wire_read
 * checks them (into an arena: no malloc per message) plus the sender's
 * rank; zero-copy sends whose flag clears when ZeroMQ is done; and Error
 * messages relayed around the ring, so that when a rank fails or stalls
 * every rank stops with the cause (settling a moment for news from further
 * up the ring) instead of its own timeout. Errors name this rank, the
 * neighbour and where (gs_pair_where, put in words only when needed).
 * gs_pair_* is this socket pair and nothing else (a "link" is an emulated
 * network link: the hosts' veth + tc in bench/, never this).
 */
typedef struct gs_pair gs_pair;

typedef struct gs_pair_cfg {
  int rank, world, left, right;  /* this rank and its neighbours, for error text */
  uint64_t job;                  /* token every message carries */
  int timeout_ms;                /* every wait (<= 0: 30 s) */
  int spin_us;                   /* poll this long first, where asked */
  int sockbuf;                   /* SO_SNDBUF / SO_RCVBUF (<= 0: the kernel's) */
  int io_threads;                /* ZeroMQ I/O threads (<= 0: 1) */
  const char *host;              /* address to bind (NULL: 127.0.0.1) */
  size_t max_payload;            /* largest payload frame accepted */
  bool no_resend;                /* keep nothing to send again after a reconnect */
  gs_cred cred;                  /* who may connect; encryption */
} gs_pair_cfg;

/* Where a message belongs, for errors: fn writes it into buf. */
typedef struct gs_pair_where {
  void (*fn)(const void *ctx, char *buf, size_t cap);
  const void *ctx;
} gs_pair_where;

/* Bind the PULL socket the left neighbour connects to; its address goes
 * to endpoint. */
int gs_pair_open(const gs_pair_cfg *c, gs_pair **out, char endpoint[GS_ENDPOINT_MAX], gs_err *e);
void gs_pair_set_job(gs_pair *l, uint64_t job);
/* The pair's ZeroMQ context (its credential handler serves every socket in
 * it), for more sockets of the same job; closed by gs_pair_close. */
void *gs_pair_zmq_context(gs_pair *l);
/* Connect the PUSH socket to the right neighbour. */
int gs_pair_connect(gs_pair *l, const char *right, gs_err *e);
/* Send env + payload: copied (flag and fwd NULL), zero-copy from data with
 * *flag set until ZeroMQ releases it, or the received message fwd itself.
 * *sent grows by the bytes. */
int gs_pair_send(gs_pair *l, const Gradsync__Envelope *env, const void *data, size_t bytes,
                 atomic_uint *flag, zmq_msg_t *fwd, uint64_t *sent, const gs_pair_where *w,
                 gs_err *e);
/* Receive the next message from the left neighbour (what names it:
 * "chunk", "handshake"). *env is valid until the next receive; payload is
 * initialised in every case (the caller closes it). An Error from the left
 * becomes GS_EPEER with its cause. */
int gs_pair_recv(gs_pair *l, const char *what, const gs_pair_where *w, bool spin_first,
                 Gradsync__Envelope **env, zmq_msg_t *payload, uint64_t *bytes, gs_err *e);
/* Wait until ZeroMQ released a zero-copy send (what: for the error). */
int gs_pair_wait_released(gs_pair *l, atomic_uint *flag, const char *what, gs_err *e);
/* Tell the right neighbour why this rank stops (best effort, never
 * blocks); _once: unless it was told already; gs_pair_told: consider it
 * told (every rank found the same error itself). */
void gs_pair_tell(gs_pair *l, const char *phase, const char *msg);
void gs_pair_tell_once(gs_pair *l, const char *phase, const char *msg);
void gs_pair_told(gs_pair *l);
/* Make a wait in another thread fail soon with GS_EINTR. */
void gs_pair_interrupt(gs_pair *l);
/* Messages to the right neighbour are numbered and (unless cfg.no_resend)
 * kept (gs_resend) until known received; after a reconnect they go again,
 * and the left neighbour's copies are dropped. Zero-copy sends are
 * borrowed. gs_pair_follow: look at another log (the mesh's) in every wait
 * too (gs_pair_unfollow before closing it); gs_pair_check: look now (now)
 * or when 20 ms passed; gs_pair_begin and gs_pair_end: gs_resend_begin /
 * _end on every log; gs_pair_last_seq and gs_pair_acked: the right
 * neighbour's log's. */
int gs_pair_follow(gs_pair *l, gs_resend *s, gs_err *e);
void gs_pair_unfollow(gs_pair *l, gs_resend *s);
int gs_pair_check(gs_pair *l, bool now, gs_err *e);
void gs_pair_begin(gs_pair *l, bool settles);
int gs_pair_end(gs_pair *l, gs_err *e);
uint64_t gs_pair_last_seq(const gs_pair *l);
void gs_pair_acked(gs_pair *l, uint64_t seq);
/* Close both sockets; on return ZeroMQ holds nothing of the caller's.
 * abort: what is still queued is dropped after 100 ms instead of flushed. */
void gs_pair_close(gs_pair *l, bool abort);

gs_dtype gs_wire_dtype(Gradsync__DType t);
Gradsync__DType gs_wire_pbdtype(gs_dtype t);

/* ---- the job's credential on every socket (auth.c) ----
 * From the job secret (bench reads it from GS_JOB_SECRET or --secret-file,
 * or the user's own secret file for a job on loopback; its local launcher
 * makes a fresh one per job) comes one key, and from it:
 *   - the rendezvous: always ZeroMQ's CURVE. Rank 0's key pair and each
 *     rank's own pair are derived from the key; rank 0's ZAP handler admits
 *     only ranks 1..world-1's keys and names the rank as the connection's
 *     User-Id (wire.c reads it into gs_wire_msg.proven), so every message
 *     is checked against the rank whose key sent it. A peer without the
 *     secret never finishes the handshake, learns nothing, and gets
 *     nothing;
 *   - the data sockets: every socket that binds draws a fresh port nonce,
 *     carried in its endpoint ("tcp://host:port#<32 hex digits>"), and
 *     every credential for that port is derived from the key and the
 *     nonce, so it is worth nothing to any other port or job. By default
 *     ZeroMQ's PLAIN, one time: each dial's user name is a fresh connection
 *     nonce and its password the key's HMAC of both nonces, and the ZAP
 *     handler admits a connection nonce once (a password seen on the wire
 *     admits nobody). With encrypt, CURVE with key pairs derived from the
 *     key and the port nonce.
 * The ZAP handler is one thread per ZeroMQ context that binds: start it
 * before the first bind, and join it after zmq_ctx_term, which ends it
 * (gs_sock_context_end does both). */
#define GS_PORT_NONCE_BYTES 16
#define GS_CONN_NONCE_BYTES 16

/* The key of a secret (len bytes). */
int gs_cred_derive(gs_cred *c, const void *secret, size_t len, bool encrypt, gs_err *e);
/* world > 1: this context holds rank 0's rendezvous of that many ranks.
 * who names the context's owner in refusals ("rank 2: ring"). */
int gs_zap_start(void *ctx, const gs_cred *c, int world, const char *who, gs_zap **out,
                 gs_err *e);
void gs_zap_join(gs_zap *z);

/* The rendezvous' sockets, before zmq_bind / zmq_connect. */
int gs_cred_rdv_server(void *sock, const gs_cred *c, gs_err *e);
int gs_cred_rdv_client(void *sock, const gs_cred *c, int rank, gs_err *e);

/* A data socket: its credential, then gs_wire_bind_any; endpoint is the
 * address with the port nonce. */
int gs_cred_bind(void *sock, const gs_cred *c, const char *host, char endpoint[GS_ENDPOINT_MAX],
                 gs_err *e);
/* Bind again at an earlier gs_cred_bind's endpoint, with its port nonce (a
 * socket that takes the place of a closed one; the tests' resets). */
int gs_cred_bind_at(void *sock, const gs_cred *c, const char *endpoint, gs_err *e);
/* endpoint -> the address ZeroMQ knows and the port nonce: 1 with one, 0
 * without ("inproc://..."), -1 malformed or too long for cap. */
int gs_endpoint_split(const char *endpoint, char *addr, size_t cap,
                      uint8_t nonce[GS_PORT_NONCE_BYTES]);
/* Set a fresh credential for the port of endpoint and zmq_connect (inproc
 * needs none). */
int gs_cred_connect(void *sock, const gs_cred *c, const char *endpoint, gs_err *e);
/* A one-time PLAIN login for a port (for a raw ZMTP peer in tests). */
void gs_cred_plain_login(const gs_cred *c, const uint8_t port[GS_PORT_NONCE_BYTES],
                         char user[2 * GS_CONN_NONCE_BYTES + 1],
                         char password[2 * GS_KEY_BYTES + 1]);

/* ---- a socket connected to one data port (dial.c) ----
 * gs_cred_connect, plus a monitor: after a drop, or a refused handshake,
 * it dials again with a fresh credential (a PLAIN one is good once).
 * gs_dial_back: whether the connection came back after a drop since the
 * last look (then what was in flight goes again); call it from every wait.
 * gs_dial_watched: whether there is a monitor at all (inproc, or ZeroMQ
 * refused one: no), without which nothing is resent. Close before the
 * socket. */
int gs_dial_open(void *ctx, void *sock, const gs_cred *c, const char *endpoint, gs_dial **out,
                 gs_err *e);
bool gs_dial_back(gs_dial *d);
bool gs_dial_watched(const gs_dial *d);
/* How long the connection has been down since it dropped, as of the last
 * gs_dial_back (0 while it is up, or before the first came): a peer whose
 * process died takes none back, however long it is dialled. */
double gs_dial_down_s(const gs_dial *d);
void gs_dial_close(gs_dial *d);

#endif
