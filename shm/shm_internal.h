/* shm_internal.h: internal to shm/: the segment's layout and a member's
 * view of it, as segment.c (create, attach, join, close), barrier.c (the
 * waits and a member's reason) and rounds.c (the all-reduce) share it. */
#ifndef GS_SHM_INTERNAL_H
#define GS_SHM_INTERNAL_H

#include <stdatomic.h>

#include "shm/shm.h"

#define GS_SHM_LINE 64

/* the header, at the segment's start */
typedef struct shm_head {
  uint32_t magic, world;
  uint64_t nonce;                     /* also in the spec: the right object */
  uint64_t chunk;                     /* slot bytes */
  uint64_t whole;                     /* up to this many bytes: one barrier */
  _Alignas(GS_SHM_LINE) _Atomic uint32_t arrived; /* barriers: arrivals so far (futex word) */
  _Alignas(GS_SHM_LINE) _Atomic uint32_t sleepers;
  _Alignas(GS_SHM_LINE) _Atomic uint32_t abort_by; /* 0, or the first failing member + 1 */
} shm_head;

/* per member, on lines of its own: its pid, the barriers it has reached,
 * and why it stopped (written once, by it alone, before it claims
 * abort_by) */
typedef struct shm_member {
  _Alignas(GS_SHM_LINE) _Atomic int32_t pid;
  _Atomic uint32_t reached;
  char why[248];
} shm_member;

struct gs_shm {
  void *base;
  size_t bytes;
  shm_head *h;
  shm_member *members;
  char *slots;                        /* 2 sets x N slots of chunk bytes */
  size_t chunk;                       /* read from the header once, when attached */
  size_t whole;
  gs_shm_cfg c;                       /* join's */
  int me, N;                          /* c.me, c.size */
  size_t es;                          /* bytes per element of c.dtype */
  double spin;                        /* seconds to poll before sleeping */
  uint32_t barriers;                  /* passed by this member */
  uint64_t rounds;                    /* done by this member: picks the set */
  bool yield;                         /* more ranks than cores */
  int fd;                             /* the creator's until every member mapped it, else -1 */
  bool joined;                        /* gs_shm_join: a reason reaches the others */
  bool told;                          /* this member wrote its reason */
  atomic_int stop;                    /* gs_shm_interrupt */
  int64_t step;                       /* the all-reduce under way, for messages */
  int bucket;
  char name[64];                      /* /proc/<pid>/fd/<fd> */
};

/* The segment's size for N members and slots of chunk bytes; false when it
 * does not fit a size_t. */
bool gs_shm_segment_bytes(int N, uint64_t chunk, size_t *out);
/* Member i's rank in the job, for messages. */
static inline int gs_shm_rank_of(const gs_shm *s, int i) {
  return s->c.ranks ? s->c.ranks[i] : i;
}
/* Arrive at the next barrier and wait for every member (barrier.c). */
int gs_shm_barrier(gs_shm *s, gs_err *e);

#endif
