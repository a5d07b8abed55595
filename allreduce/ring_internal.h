/* ring_internal.h: internal to allreduce/: what the ring's files share.
 * ring.c prepares the ring and runs the collective (the algorithm, drawn
 * at its top); ring_hello.c connects it and compares every rank's
 * configuration before the first collective. The sockets, waits, checked
 * receives and the relay of errors are proto/'s gs_link. */
#ifndef GS_ALLREDUCE_RING_INTERNAL_H
#define GS_ALLREDUCE_RING_INTERNAL_H

#include <stdatomic.h>

#include "allreduce/allreduce.h"
#include "proto/wire.h"

enum { PH_RS = 0, PH_AG = 1, PH_SMALL = 2, PH_RD = 3, PH_DIRECT = 4, PH_BCAST = 5,
       PH_REDUCE = 6, PH_COUNT };

typedef struct gs_mesh gs_mesh;
typedef struct gs_shm gs_shm;

typedef struct hello_cfg {
  bool have;
  uint32_t world, nbuckets, dtype;
  uint64_t count, chunk_bytes, small_bytes, plan_hash;
  bool sum_only;
  uint32_t algo;
  char mesh_ep[GS_ENDPOINT_MAX];
  char host_key[160];        /* shm.c: equal keys share memory */
  char shm_name[96];         /* rank 0's shared memory ("" none) */
} hello_cfg;

struct gs_ring {
  gs_ring_opts o;
  char host[256];
  int left, right;
  size_t chunk_bytes, small_bytes;
  int spin_us;
  bool spin_now;             /* this collective is small enough to spin for */
  gs_link *link;             /* the sockets to the neighbours */
  bool connected, broken;

  void *stage;               /* max_count elements of the wire dtype (wire != F32) */
  void *scratch;             /* small path: own vector when src == dst */
  atomic_uint *flags;        /* per chunk sent zero-copy: ZeroMQ still holds it */
  uint64_t *sent_seq;        /* per reduce-scatter chunk: its message number */
  size_t nflags;
  zmq_msg_t *held;           /* small path: the N vectors */
  zmq_msg_t *hold;           /* all-gather: a received chunk until it is forwarded */
  size_t nhold;
  int inflight;              /* chunks in flight per link */
  hello_cfg *cfgs;           /* handshake: every rank's configuration */

  /* rd and direct (small.c): a socket to every rank, and their buffers */
  gs_mesh *mesh;
  char mesh_ep[GS_ENDPOINT_MAX];
  void *own;                 /* this rank's contribution when src == dst */
  gs_wire_msg *got;          /* direct: every rank's buffer */

  /* shm (shm.c): the job's shared memory when every rank is on one host */
  gs_shm *shm;
  char host_key[160];
  char shm_name[96];

  /* what is being done, for error messages; cur_op: the reduction (sum,
   * prod, min, max), which every chunk carries */
  gs_redop cur_op;
  int64_t cur_step;
  int cur_bucket;
  size_t cur_total;
};

/* One chunk of a collective: where it belongs, as its header says. */
typedef struct gs_ring_want {
  int phase, ring_step, segment, chunk;
  size_t offset, count;
} gs_ring_want;

/* ring_chunk.c: receive from the left the chunk w describes (payload holds
 * its bytes; anything else is an error naming the neighbour), or send one
 * to the right: data zero-copy with flag (may be NULL: then data must
 * outlive the collective), or fwd, a received message passed on. */
int gs_ring_recv_chunk(gs_ring *r, const gs_ring_want *w, zmq_msg_t *payload, uint64_t *bytes,
                       gs_err *e);
int gs_ring_send_chunk(gs_ring *r, const gs_ring_want *w, const void *data, atomic_uint *flag,
                       zmq_msg_t *fwd, uint64_t *sent, gs_err *e);

/* ring.c: the checks every collective starts with (a connected, unbroken
 * ring, count <= max_count, buffers), then the labels its chunks carry.
 * what names the collective in errors; settles: every rank's result needs
 * every rank's part (gs_resend_begin), and its successful end calls
 * gs_link_settled. 1: world 1 (nothing to exchange), 0: go on, < 0: the
 * error. */
int gs_ring_enter(gs_ring *r, gs_redop op, const void *src, const void *dst, size_t count,
                  int64_t step, int bucket, bool settles, const char *what, gs_err *e);

/* The element type of the ring's buffers is fp32 under a 16-bit wire (each
 * hop converts), else the wire dtype itself: es is its size in bytes. */
static inline size_t gs_ring_es(const gs_ring *r) {
  return gs_dtype_lp(r->o.wire) ? sizeof(float) : gs_dtype_size(r->o.wire);
}
/* Element i of a ring buffer. */
static inline void *gs_ring_at(const gs_ring *r, const void *p, size_t i) {
  return (char *)p + i * gs_ring_es(r);
}
/* ring.c: dst (n buffer elements) op= src (n wire elements), the current
 * collective's op: training's sum through the table (add / add_lp, the
 * paths the tests compare), every other op and type through
 * gs_reduce_host. A failure is sticky on the table (its sync reports it). */
void gs_ring_combine(gs_ring *r, size_t n, void *dst, const void *src);
/* ring.c: dst (n buffer elements) = src (n wire elements): a conversion
 * under a 16-bit wire, else a copy. */
void gs_ring_take(gs_ring *r, size_t n, void *dst, const void *src);
/* ring.c: rank r's part of count elements split in N (rank r gets
 * q + (r < count mod N) elements, in rank order). */
void gs_ring_seg_range(size_t n, int N, int j, size_t *off, size_t *len);
/* ring.c: the pipelined ring over count elements. Phases: GS_RING_RS,
 * GS_RING_AG or both (the all-reduce). Alone, a phase numbers data segments
 * so that rank r owns data segment r (allreduce.h's layout); both: the
 * all-reduce's own numbering. Chunks per segment: chunks_per_segment. */
enum { GS_RING_RS = 1, GS_RING_AG = 2 };
int gs_ring_phases(gs_ring *r, const void *src, void *dst, size_t n, int phases,
                   gs_ring_stats *st, gs_err *e);
size_t gs_ring_chunks(const gs_ring *r, size_t n);
/* ring.c: wait until ZeroMQ holds none of the first n flags' chunks. */
int gs_ring_wait_flags(gs_ring *r, size_t n, gs_err *e);

/* ring.c: the environment's "256K", "4M", "1G" or plain bytes ("never" or
 * "none": GS_RING_NO_SMALL); fallback when unset or not a number. */
size_t gs_ring_env_size(const char *name, size_t fallback);

static inline int gs_ring_mod(int a, int n) { return ((a % n) + n) % n; }

/* The ring stops: tell the right neighbour why (unless it knows), and every
 * rank on the mesh, and mark the ring unusable. Returns code. */
int gs_ring_fail(gs_ring *r, gs_err *e, int code);

/* ---- the mesh (mesh.c) ----
 * One PULL socket per rank in the link's ZeroMQ context, and a PUSH to
 * every other rank's; receives from one peer, keeping what others send
 * early. Errors name this rank, the peer and where (w). */
int gs_mesh_open(const gs_ring *r, void *zctx, size_t max_payload, gs_mesh **out,
                 char endpoint[GS_ENDPOINT_MAX], gs_err *e);
/* endpoints: every rank's mesh endpoint (this rank's is not used). */
int gs_mesh_connect(gs_mesh *m, const char *const *endpoints, uint64_t job, gs_err *e);
/* Send env + payload (copied) to peer. */
int gs_mesh_send(gs_mesh *m, int peer, const Gradsync__Envelope *env, const void *data,
                 size_t bytes, uint64_t *sent, const gs_link_where *w, gs_err *e);
/* The next message from peer (close it with gs_wire_msg_close); an Error
 * from any rank is GS_EPEER with its cause. spin: poll a moment first. */
int gs_mesh_recv(gs_mesh *m, int peer, bool spin, gs_wire_msg *out, uint64_t *bytes,
                 const gs_link_where *w, gs_err *e);
/* Tell every peer why this rank stops (once, best effort, never blocks). */
void gs_mesh_tell(gs_mesh *m, const char *msg);
void gs_mesh_interrupt(gs_mesh *m);
/* Before the link's context ends. */
void gs_mesh_close(gs_mesh *m, bool abort);

/* ---- rd and direct (small.c) ---- */
/* In prepare, after the link: the mesh and buffers when o.algo may need
 * them; gs_small_connect after the handshake (every rank's mesh endpoint
 * came with it; endpoints: the ring's, as gs_ring_connect got them);
 * gs_small_free before the link closes. */
int gs_small_prepare(gs_ring *r, gs_err *e);
int gs_small_connect(gs_ring *r, const char *const *endpoints, gs_err *e);
void gs_small_free(gs_ring *r, bool abort);
int gs_small_rd(gs_ring *r, const void *src, void *dst, size_t n, gs_ring_stats *st, gs_err *e);
int gs_small_direct(gs_ring *r, const void *src, void *dst, size_t n, gs_ring_stats *st,
                    gs_err *e);

/* ---- same-host shared memory (shm.c) ---- */
/* In prepare: this host's key, and rank 0's shared memory when o.algo may
 * use it; gs_shm_connect after the handshake: when every key is the same,
 * every rank maps it and they agree over the ring (--algo shm: an error
 * otherwise). gs_shm_abort: tell the waiters why this rank stops. */
int gs_shm_prepare(gs_ring *r, gs_err *e);
int gs_shm_connect(gs_ring *r, gs_err *e);
bool gs_shm_on(const gs_ring *r);
int gs_shm_allreduce(gs_ring *r, const void *src, void *dst, size_t n, gs_ring_stats *st,
                     gs_err *e);
void gs_shm_abort(gs_ring *r, const char *msg);
void gs_shm_interrupt(gs_ring *r);
void gs_shm_free(gs_ring *r);
/* The object's header: rank 0 writes it (world ranks, slots of chunk
 * bytes, one barrier up to whole bytes); a rank that maps the object reads
 * it once and checks it against the handshake's nonce, its world and the
 * object's size (every size computation overflow-checked), and keeps the
 * chunk and whole it read. gs_shm_header_bytes: the header's size, to
 * which 2 x world x chunk bytes of slots are added. */
void gs_shm_header_write(void *seg, int world, uint64_t nonce, uint64_t chunk, uint64_t whole);
bool gs_shm_header_check(const void *seg, size_t bytes, int world, uint64_t nonce,
                         size_t *chunk, size_t *whole);
size_t gs_shm_header_bytes(int world);

#endif
