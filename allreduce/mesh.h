/* mesh.h: internal to allreduce/: the mesh (mesh.c), a socket from every
 * rank to every other, and the whole-buffer exchanges over it (whole.c)
 * that recursive doubling (rd.c) and the direct exchange (direct.c) are
 * made of. */
#ifndef GS_ALLREDUCE_MESH_H
#define GS_ALLREDUCE_MESH_H

#include "allreduce/comm.h"

typedef struct gs_mesh gs_mesh;

/* ---- the sockets (mesh.c) ----
 * One PULL socket per rank in the pair's ZeroMQ context, and a PUSH to
 * every other rank's; receives from one peer, keeping what others send
 * early. Errors name this rank, the peer and where (w). */
int gs_mesh_open(const gs_comm *r, void *zctx, size_t max_payload, gs_mesh **out, gs_err *e);
/* The handshake: the endpoint rank origin published, and what came for it. */
void gs_mesh_hello(const gs_mesh *m, int origin, Gradsync__RingHello *h);
void gs_mesh_heard(gs_mesh *m, int origin, const Gradsync__RingHello *h);
/* Connect to every rank's published endpoint (ring_eps: the ring's, as
 * gs_comm_connect got them, whose hosts are the ones to reach). */
int gs_mesh_connect(gs_mesh *m, const char *const *ring_eps, uint64_t job, gs_err *e);
/* Send env + payload (copied) to peer. */
int gs_mesh_send(gs_mesh *m, int peer, const Gradsync__Envelope *env, const void *data,
                 size_t bytes, uint64_t *sent, const gs_pair_where *w, gs_err *e);
/* The next message from peer (close it with gs_wire_msg_close); an Error
 * from any rank is GS_EPEER with its cause. spin: poll a moment first. */
int gs_mesh_recv(gs_mesh *m, int peer, bool spin, gs_wire_msg *out, uint64_t *bytes,
                 const gs_pair_where *w, gs_err *e);
/* Tell every peer why this rank stops (once, best effort, never blocks). */
void gs_mesh_tell(gs_mesh *m, const char *msg);
void gs_mesh_interrupt(gs_mesh *m);
/* Before the link's context ends. */
void gs_mesh_close(gs_mesh *m, bool abort);

/* ---- whole buffers over the mesh (whole.c) ---- */

/* The state of rd and direct: the mesh, and direct's buffers. */
typedef struct whole_state {
  gs_mesh *mesh;
  int phase;                 /* the row's (its first) on the wire */
  void *own;                 /* direct: this rank's contribution when src == dst */
  gs_wire_msg *got;          /* direct: every rank's buffer */
} whole_state;

/* Where a message belongs, for errors: "recursive doubling round 2/3 of
 * bucket 0, step 14", the first part in the algorithm's words (say, from
 * round and rounds; rd's rounds on the wire: 0 the fold-in, 1..rounds,
 * rounds + 1 the fold-out). */
typedef struct gs_whole_where gs_whole_where;
struct gs_whole_where {
  const gs_comm *r;
  int phase, round, rounds;
  void (*say)(const gs_whole_where *w, char *buf, size_t cap);
};

/* The rows' shared parts: open the mesh (and, with own, direct's
 * buffers; the phase: row's first), the handshake, connect, tell,
 * interrupt, close. */
int gs_whole_prepare(gs_comm *r, const gs_algo_row *row, bool own, void **state, gs_err *e);
void gs_whole_hello(const void *state, int origin, Gradsync__RingHello *h);
void gs_whole_heard(void *state, int origin, const Gradsync__RingHello *h);
int gs_whole_connect(gs_comm *r, void *state, const char *const *endpoints, gs_err *e);
void gs_whole_tell(void *state, const char *msg);
void gs_whole_interrupt(void *state);
void gs_whole_close(gs_comm *r, void *state, bool abort);

/* Send n wire elements of data to peer. */
int gs_whole_send(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc,
                  const void *data, size_t n, gs_comm_stats *st, gs_err *e);
/* Send dst (rounded to the wire dtype first) to peer. */
int gs_whole_send_dst(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc, void *dst,
                      size_t n, gs_comm_stats *st, gs_err *e);
/* Receive peer's whole buffer for the round wc names into m, checked. */
int gs_whole_recv(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc, size_t n,
                  gs_wire_msg *m, gs_comm_stats *st, gs_err *e);
/* dst op= peer's buffer (or dst = it, when copy). */
int gs_whole_take(gs_comm *r, whole_state *s, int peer, const gs_whole_where *wc, void *dst,
                  size_t n, bool copy, gs_comm_stats *st, gs_err *e);
/* A received message's payload (NULL when none). */
static inline const void *gs_whole_payload(gs_wire_msg *m) {
  return m->has_payload ? zmq_msg_data(&m->payload) : NULL;
}

#endif
