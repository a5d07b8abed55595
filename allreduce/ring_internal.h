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

enum { PH_RS = 0, PH_AG = 1, PH_SMALL = 2 };

typedef struct hello_cfg {
  bool have;
  uint32_t world, nbuckets, dtype;
  uint64_t count, chunk_bytes, small_bytes, plan_hash;
  bool sum_only;
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
  float *scratch;            /* small path: own fp32 vector when src == dst */
  atomic_uint *flags;        /* per chunk sent zero-copy: ZeroMQ still holds it */
  size_t nflags;
  zmq_msg_t *held;           /* small path: the N vectors */
  zmq_msg_t *hold;           /* all-gather: a received chunk until it is forwarded */
  size_t nhold;
  int inflight;              /* chunks in flight per link */
  hello_cfg *cfgs;           /* handshake: every rank's configuration */

  /* what is being done, for error messages */
  int64_t cur_step;
  int cur_bucket;
  size_t cur_total;
};

static inline int gs_ring_mod(int a, int n) { return ((a % n) + n) % n; }

/* The ring stops: tell the right neighbour why (unless it knows), and mark
 * the ring unusable. Returns code. */
int gs_ring_fail(gs_ring *r, gs_err *e, int code);

#endif
