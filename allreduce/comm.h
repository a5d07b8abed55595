/* comm.h: internal to allreduce/: the communicator under every CPU
 * algorithm (Gloo's split: a context that knows no algorithm, and
 * algorithms registered over it).
 *
 * The communicator (struct gs_comm, the bare ring of allreduce.h) holds
 * what every algorithm shares: the rank, the options after the defaults
 * and the environment (env.c), the sockets to the two neighbours and their
 * waits, checked receives and error relay (proto/'s gs_pair), the chunk
 * framing on them (comm_chunk.c), the wire-dtype staging buffer, the
 * handshake that compares every rank's configuration (comm_hello.c), and
 * the labels of the collective under way. It names no algorithm and no
 * phase: each algorithm is a row of a table (gs_algo_row; algos.c holds
 * the table, indexed by gs_algo) that carries its name, the phases its
 * chunks carry, when it is prepared and chosen, and its file's functions
 * (gs_algo_ops), which the communicator calls at prepare, handshake,
 * connect, failure and close with the state it keeps for the row, in a
 * slot per row. A new algorithm is a row there and a file of its own. */
#ifndef GS_ALLREDUCE_COMM_H
#define GS_ALLREDUCE_COMM_H

#include <stdatomic.h>

#include "allreduce/allreduce.h"
#include "proto/proto.h"

typedef struct gs_algo_row gs_algo_row;

/* An algorithm's functions, in its own file. Every function but prepare
 * and allreduce may be NULL. */
typedef struct gs_algo_ops {
  /* after the pair is open (world > 1), when its row is prepared under
   * the ring's algorithm (row->under); row: its phases */
  int (*prepare)(gs_comm *r, const gs_algo_row *row, void **state, gs_err *e);
  /* the handshake: what rank origin published (this rank's own after
   * prepare), to send on; and what arrived for origin */
  void (*hello)(const void *state, int origin, Gradsync__RingHello *h);
  void (*heard)(void *state, int origin, const Gradsync__RingHello *h);
  /* once every configuration agrees (endpoints: gs_comm_connect's) */
  int (*connect)(gs_comm *r, void *state, const char *const *endpoints, gs_err *e);
  /* may it run now (NULL: whenever the ring is connected) */
  bool (*ready)(const void *state);
  /* dst = the collective's op over every rank's src, n elements */
  int (*allreduce)(gs_comm *r, void *state, const void *src, void *dst, size_t n,
                   gs_comm_stats *st, gs_err *e);
  /* tell its peers why this rank stops (once, never blocks); stop a wait */
  void (*tell)(void *state, const char *msg);
  void (*interrupt)(void *state);
  /* before the pair closes (free the state here when there is no release) */
  void (*close)(gs_comm *r, void *state, bool abort);
  /* after the pair closed, when ZeroMQ holds nothing of the state: free it */
  void (*release)(gs_comm *r, void *state);
} gs_algo_ops;

/* A phase of an algorithm's chunks: the number its Chunk headers carry
 * (the wire's; no two rows share one) and its name in messages. */
typedef struct gs_algo_phase {
  uint32_t wire;
  const char *name;
} gs_algo_phase;

#define GS_ALGO_PHASES 5
/* The bit of request a (gs_algo) in gs_algo_row.under. */
#define GS_ALGO_BIT(a) (1u << (unsigned)(a))

/* One row of the table (algos.c): everything about an algorithm but how
 * it runs. */
struct gs_algo_row {
  const char *name;                   /* --algo's word */
  const gs_algo_ops *ops;             /* its file's; NULL: a request only (auto) */
  gs_algo_phase phase[GS_ALGO_PHASES]; /* its phases, in the order its file
                                         reads them (name NULL: no more) */
  /* the choice: under which requests (gs_comm_opts.algo, GS_ALGO_BIT) it
   * is prepared, and whether under them it runs every all-reduce once it
   * is ready (then before the rest; where two could be, the first row) */
  uint32_t under;
  bool when_ready;
  /* what a request of this row runs when no row runs when_ready: small up
   * to small_max float32 bytes, else large */
  gs_algo small, large;
  size_t small_max;
};

/* algos.c: the table, n rows (row a is gs_algo a). */
const gs_algo_row *gs_algo_table(int *n);

/* The configuration every rank sends around in the handshake. */
typedef struct hello_cfg {
  uint32_t world, nbuckets, dtype;
  uint64_t count, chunk_bytes, small_bytes, plan_hash;
  bool sum_only;
  uint32_t algo;
} hello_cfg;

struct gs_comm {
  gs_comm_opts o;
  char host[256];
  int left, right;
  /* after the defaults and the environment (env.c) */
  size_t chunk_bytes, small_bytes;
  int spin_us, inflight, io_threads, sockbuf;
  bool spin_now;             /* this collective is small enough to spin for */
  gs_pair *pair;               /* the sockets to the neighbours */
  bool connected, broken;
  void *stage;               /* max_count elements of the wire dtype (wire != F32) */
  hello_cfg *cfgs;           /* handshake: every rank's configuration */

  /* the algorithms: the table's rows, and the state of each one prepared
   * (a slot per row) */
  const gs_algo_row *rows;
  int nrows;
  void **state;

  /* what is being done, for error messages; cur_op: the reduction (sum,
   * prod, min, max), which every chunk carries */
  gs_redop cur_op;
  int64_t cur_step;
  int cur_bucket;
  size_t cur_total;
};

/* comm.c: the communicator over n rows (algos.c's
 * gs_comm_prepare passes its own). */
int gs_comm_prepare_table(const gs_comm_opts *o, const gs_algo_row *rows, int n, gs_comm **out,
                          char endpoint[GS_ENDPOINT_MAX], gs_err *e);
/* The state of algorithm a, NULL when it is not prepared. */
static inline void *gs_comm_state(const gs_comm *r, gs_algo a) {
  return r && a >= 0 && a < r->nrows ? r->state[a] : NULL;
}
/* Whether algorithm a is prepared and may run now. */
bool gs_comm_ready(const gs_comm *r, gs_algo a);
/* The name of phase wire in messages, whichever row of r's table has it
 * ("unknown-phase" when none does). */
const char *gs_comm_phase_name(const gs_comm *r, uint32_t wire);

/* The checks every collective starts with (a connected, unbroken ring,
 * count <= max_count, buffers), then the labels its chunks carry. what
 * names the collective in errors; settles: every rank's result needs
 * every rank's part (gs_resend_begin), and its successful end calls
 * gs_pair_settled. 1: world 1 (nothing to exchange), 0: go on, < 0: the
 * error. */
int gs_comm_enter(gs_comm *r, gs_redop op, const void *src, const void *dst, size_t count,
                  int64_t step, int bucket, bool settles, const char *what, gs_err *e);
/* The collective's end: the kernels' queue, the pair's, then a failure
 * goes around (gs_comm_fail). Returns rc or the later error. */
int gs_comm_leave(gs_comm *r, int rc, gs_err *e);
/* One all-reduce of algorithm a's between gs_comm_enter and gs_comm_leave
 * (world 1: a copy). */
int gs_comm_run(gs_comm *r, gs_algo a, gs_redop op, const void *src, void *dst, size_t count,
                int64_t step, int bucket, gs_comm_stats *st, gs_err *e);
/* The ring stops: tell the right neighbour why (unless it knows), and
 * every algorithm's peers, and mark the ring unusable. Returns code. */
int gs_comm_fail(gs_comm *r, gs_err *e, int code);
/* A span on the backend's track, labelled with the current bucket. */
void gs_comm_span(const gs_comm *r, const char *name, double t0, double t1);

/* The element type of the ring's buffers is fp32 under a 16-bit wire (each
 * hop converts), else the wire dtype itself: es is its size in bytes. */
static inline size_t gs_comm_es(const gs_comm *r) {
  return gs_dtype_lp(r->o.wire) ? sizeof(float) : gs_dtype_size(r->o.wire);
}
/* Element i of a ring buffer. */
static inline void *gs_comm_at(const gs_comm *r, const void *p, size_t i) {
  return (char *)p + i * gs_comm_es(r);
}
static inline int gs_comm_mod(int a, int n) { return ((a % n) + n) % n; }
/* dst (n buffer elements) op= src (n wire elements), the current
 * collective's op: training's sum through the table (add / add_lp, the
 * paths the tests compare), every other op and type through
 * gs_reduce_host. A failure is sticky on the table (its sync reports it). */
void gs_comm_combine(gs_comm *r, size_t n, void *dst, const void *src);
/* dst (n buffer elements) = src (n wire elements): a conversion under a
 * 16-bit wire, else a copy. */
void gs_comm_take(gs_comm *r, size_t n, void *dst, const void *src);
/* dst = dst rounded to the wire dtype (kept in stage too, for sending). */
void gs_comm_round(gs_comm *r, void *dst, size_t n);

/* comm_chunk.c: one chunk of a collective, where it belongs as its header
 * says. */
typedef struct gs_comm_want {
  int phase, ring_step, segment, chunk;
  size_t offset, count;
} gs_comm_want;
/* Receive from the left the chunk w describes (payload holds its bytes;
 * anything else is an error naming the neighbour), or send one to the
 * right: data zero-copy with flag (may be NULL: then data must outlive the
 * collective), or fwd, a received message passed on. */
int gs_comm_recv_chunk(gs_comm *r, const gs_comm_want *w, zmq_msg_t *payload, uint64_t *bytes,
                       gs_err *e);
int gs_comm_send_chunk(gs_comm *r, const gs_comm_want *w, const void *data, atomic_uint *flag,
                       zmq_msg_t *fwd, uint64_t *sent, gs_err *e);
/* The Chunk header of w in the current collective, in env (ch its body). */
void gs_comm_chunk_env(const gs_comm *r, const gs_comm_want *w, Gradsync__Envelope *env,
                       Gradsync__Chunk *ch);

/* env.c: the tuning of o after the defaults and the environment
 * (GS_RING_CHUNK, GS_RING_SMALL, GS_RING_INFLIGHT, GS_RING_SPIN_US,
 * GS_RING_IO_THREADS, GS_RING_SOCKBUF) into r. */
void gs_comm_tuning(const gs_comm_opts *o, gs_comm *r);

#endif
