/* shm_seg.h: internal to allreduce/: one shared-memory segment among the
 * ranks of one host (shm_seg.c), what the shared-memory all-reduce (shm.c)
 * and the hierarchical one (hier.c) are made of: created by the group's
 * first rank, mapped by the others, slots every member copies into, and
 * barriers whose every wait ends (timeout, a member's process gone, a
 * member's reason). A group is N ranks of the ring; member i is ring rank
 * global[i] (global NULL: member i is ring rank i). */
#ifndef GS_ALLREDUCE_SHM_SEG_H
#define GS_ALLREDUCE_SHM_SEG_H

#include "allreduce/comm.h"

#define GS_SHM_LINE 64
#define GS_SHM_KEY_MAX 160
#define GS_SHM_SPEC_MAX 96

typedef struct gs_shm_head gs_shm_head;
typedef struct gs_shm_rank gs_shm_rank;

typedef struct gs_shm {
  void *base;
  size_t bytes;
  gs_shm_head *h;
  gs_shm_rank *ranks;
  char *slots;                        /* 2 sets x N slots of chunk bytes */
  size_t chunk;                       /* read from the header once, when attached */
  size_t whole;
  int me, N;                          /* this rank's place in the group, its size */
  const int *global;                  /* member -> ring rank (NULL: the same) */
  double spin;                        /* seconds to poll before sleeping */
  uint32_t barriers;                  /* passed by this rank */
  uint64_t rounds;                    /* done by this rank: picks the set */
  bool yield;                         /* more ranks than cores */
  int fd;                             /* the creator's until every member mapped it, else -1 */
  bool on;                            /* every member mapped it (the vote) */
  bool told;                          /* this rank wrote its reason */
  atomic_int stop;                    /* gs_shm_interrupt */
  char name[64];                      /* /proc/<pid>/fd/<fd> */
} gs_shm;

/* The shared-memory object's header. The creator writes it (world
 * ranks, slots of chunk bytes, one barrier up to whole bytes); a rank that
 * maps the object reads it once and checks it against the handshake's
 * nonce, its world and the object's size (every size computation
 * overflow-checked), and keeps the chunk and whole it read.
 * gs_shm_header_bytes: the header's size, to which 2 x world x chunk bytes
 * of slots are added. */
void gs_shm_header_write(void *seg, int world, uint64_t nonce, uint64_t chunk, uint64_t whole);
bool gs_shm_header_check(const void *seg, size_t bytes, int world, uint64_t nonce,
                         size_t *chunk, size_t *whole);
size_t gs_shm_header_bytes(int world);

/* This process's host key (boot id and the network, IPC and PID
 * namespaces, then tag when not NULL or empty): equal only for processes
 * that share memory and whose traffic would not cross an (emulated) link. */
void gs_shm_host_key(char *buf, size_t cap, const char *tag);
/* Whether this ring may use shared memory at all (CPU kernels, a 32- or
 * 64-bit wire, GS_SHM not 0). */
bool gs_shm_may_use(const gs_comm *r);
/* The group's first rank: a segment for N members with slots of chunk
 * bytes (GS_SHM_CHUNK overrides; clamped to what max_count needs) and the
 * one-barrier threshold whole (GS_SHM_WHOLE overrides); spec: what the
 * others map it by. *out NULL (and GS_OK) when this system has no memfd. */
int gs_shm_create(gs_comm *r, int N, size_t chunk, size_t whole, gs_shm **out,
                  char spec[GS_SHM_SPEC_MAX], gs_err *e);
/* Another member maps the segment spec names; false (and why) when it
 * cannot or it is not this job's. */
bool gs_shm_attach(gs_comm *r, int N, const char *spec, gs_shm **out, char *why, size_t cap);
/* Take place me in a group of N members (after create or attach; N at
 * most the N it was made for). */
void gs_shm_join(gs_comm *r, gs_shm *s, int me, int N, const int *global);
/* Whether every rank of the ring mapped *m (ok; why not in why): the
 * minimum of the votes, over the ring's sockets, as the shared memory is
 * not yet trusted. All did: the creator's descriptor goes (no name of it
 * outlives the job). Any did not: *m is closed and NULL, and a rank that
 * asked for algo by name (want) fails saying whose memory it was and to
 * use --algo fallback; one that did not goes on over the sockets. */
int gs_shm_settle(gs_comm *r, gs_shm **m, bool ok, const char *why, bool want, const char *algo,
                  const char *whose, const char *fallback, gs_err *e);
/* Arrive at the next barrier and wait for every member. */
int gs_shm_barrier(gs_comm *r, gs_shm *s, gs_err *e);
/* The set of slots this round writes (rounds alternate two sets), and
 * member i's slot in it. */
char *gs_shm_next_set(gs_shm *s);
static inline char *gs_shm_slot(const gs_shm *s, char *set, int i) {
  return set + (size_t)i * s->chunk;
}
/* dst (n elements) = the sum, in member order, of the n elements at off
 * in every slot of set, the op being the collective's. */
void gs_shm_sum(gs_comm *r, const gs_shm *s, char *set, size_t off, size_t n, void *dst);
/* This rank stops: its reason, for every waiting member (once). */
void gs_shm_tell(gs_shm *s, const char *msg);
void gs_shm_interrupt(gs_shm *s);
void gs_shm_close(gs_shm *s);

#endif
