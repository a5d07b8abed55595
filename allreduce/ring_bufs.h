/* ring_bufs.h: internal to allreduce/: the ring algorithm's state, as
 * its files share it: ring.c (its row in the table: prepare, run, close),
 * ring_pipe.c (the pipelined reduce-scatter + all-gather, drawn at its
 * top), ring_small.c (the whole-vector all-gather of small collectives)
 * and ring_coll.c (the other collectives, on the same pipeline and
 * chunks). Everything else they use is the communicator's (comm.h). */
#ifndef GS_ALLREDUCE_RING_BUFS_H
#define GS_ALLREDUCE_RING_BUFS_H

#include "allreduce/comm.h"

/* The ring's phases, in the order of its row's (algos.c): what its chunks
 * carry is the row's number for each. */
enum { RING_RS, RING_AG, RING_SMALL, RING_BCAST, RING_REDUCE, RING_PHASES };

typedef struct ring_bufs {
  uint32_t phase[RING_PHASES]; /* the wire's number of each */
  atomic_uint *flags;        /* per chunk sent zero-copy: ZeroMQ still holds it */
  uint64_t *sent_seq;        /* per reduce-scatter chunk: its message number */
  size_t nflags;
  zmq_msg_t *hold;           /* all-gather: a received chunk until it is forwarded */
  size_t nhold;
  zmq_msg_t *held;           /* small path: the N vectors */
  void *scratch;             /* small path: own vector when src == dst */
} ring_bufs;

/* ring.c: the row's functions, and the state of a ring it was prepared
 * on (every ring of more than one rank). */
extern const gs_algo_ops gs_algo_ring;
static inline ring_bufs *gs_ring_state(const gs_comm *r) {
  return gs_comm_state(r, GS_ALGO_RING);
}
/* The wire's number of the ring's phase p (RING_RS, ...). */
static inline int gs_ring_phase(const gs_comm *r, int p) {
  return (int)gs_ring_state(r)->phase[p];
}

/* ring_pipe.c: the pipelined ring over count elements. Phases: GS_RING_RS,
 * GS_RING_AG or both (the all-reduce). Alone, a phase numbers data
 * segments so that rank r owns data segment r (allreduce.h's layout);
 * both: the all-reduce's own numbering. */
enum { GS_RING_RS = 1, GS_RING_AG = 2 };
int gs_ring_phases(gs_comm *r, const void *src, void *dst, size_t n, int phases,
                   gs_comm_stats *st, gs_err *e);
/* Chunks per segment of a collective of n elements. */
size_t gs_ring_chunks(const gs_comm *r, size_t n);
/* Wait until ZeroMQ holds none of the first n flags' chunks. */
int gs_ring_wait_flags(gs_comm *r, size_t n, gs_err *e);

/* ring_small.c: every rank's whole vector around the ring, then a sum in
 * rank order (collectives up to the small-message threshold). */
int gs_ring_small(gs_comm *r, const void *src, void *dst, size_t n, gs_comm_stats *st,
                  gs_err *e);

#endif
