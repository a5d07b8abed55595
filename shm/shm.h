/* shm.h: the contract of the shm part: one shared-memory segment among the
 * processes of one host (a group of members), and the all-reduce through
 * it. Below both backends: the all-reduce's shm and hier algorithms
 * (allreduce/shm.c, allreduce/hier.c) and the host-aggregated ps
 * (ps/hostagg.c) run it, each telling its members what to attach by its
 * own means (the ring's handshake, the ps' endpoints). It knows base/ and
 * kernels/ only: a member is a plain configuration (gs_shm_cfg), no
 * communicator.
 *
 *     gs_shm_create   the group's first member: an anonymous segment
 *                     (memfd: no name in /dev/shm, so nothing outlives the
 *                     job, however it ends) and its spec, the path of the
 *                     creator's descriptor under /proc/<pid>/fd (which only
 *                     the same user may open) and a nonce, for the others
 *     gs_shm_attach   another member maps the segment a spec names and
 *                     checks its header (this job's nonce, a size that adds
 *                     up, every computation overflow-checked)
 *     gs_shm_join     take a place in the group
 *     gs_shm_allreduce  as often as needed, every member alike
 *     gs_shm_close
 *
 * Once every member has mapped the segment (its user says so with
 * gs_shm_mapped, or every member passed a wait of gs_shm_allreduce) the
 * creator closes its descriptor: the mappings keep the memory.
 *
 * Every wait ends: at the member's timeout, naming the members that did not
 * arrive; when a member's process is gone, naming it; or when a failing
 * member writes its reason into the segment (gs_shm_tell), which every
 * waiter reports.
 *
 * Sum order: element i is ((v_0 + v_1) + v_2) + ... over the members in
 * member order, whoever sums it and however the buffer is cut in rounds,
 * so every member copies the same bits, run after run. */
#ifndef GS_SHM_H
#define GS_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "kernels/kernels.h"

#define GS_SHM_KEY_MAX 160
#define GS_SHM_SPEC_MAX 96
/* The slot size (bytes per member per round) and the size up to which a
 * round needs one wait, not two, unless their user asks for others;
 * GS_SHM_CHUNK and GS_SHM_WHOLE (on the creator) override both. */
#define GS_SHM_CHUNK_DEFAULT ((size_t)256 << 10)
#define GS_SHM_WHOLE_DEFAULT ((size_t)64 << 10)

typedef struct gs_shm gs_shm;

/* This process's host key (boot id and the network, IPC and PID
 * namespaces, then tag when not NULL or empty): equal only for processes
 * that share memory and whose traffic would not cross an (emulated) link. */
void gs_shm_host_key(char *buf, size_t cap, const char *tag);
/* Whether the environment turns shared memory off (GS_SHM=0). */
bool gs_shm_disabled(void);

/* The creator (rank: its rank in the job, for messages): a segment for up
 * to members members, whose largest all-reduce is max_bytes, with slots of
 * chunk bytes (clamped to max_bytes, whole 64-byte lines, at most 1 GiB)
 * and one wait up to whole bytes. spec: what the others attach by. *out
 * NULL (and GS_OK) when this system has no memfd. */
int gs_shm_create(int rank, int members, size_t max_bytes, size_t chunk, size_t whole,
                  gs_shm **out, char spec[GS_SHM_SPEC_MAX], gs_err *e);
/* Another member maps the segment spec names (made for members members);
 * false (and why) when it cannot or it is not this job's. */
bool gs_shm_attach(int members, const char *spec, gs_shm **out, char *why, size_t cap);

/* A member's place in the group, and what its waits and sums need. */
typedef struct gs_shm_cfg {
  int me, size;              /* this member, 0..size-1; size at most the
                                segment's members */
  int rank;                  /* this process's rank in the job (messages) */
  const int *ranks;          /* member i's rank in the job (NULL: i); kept */
  int timeout_ms;            /* every wait (<= 0: 30 s) */
  gs_kernels *k;             /* the sums (a CPU table: the segment is host memory) */
  gs_dtype dtype;            /* GS_F32, GS_F64 or GS_I32 */
  int local_ranks;           /* processes on this host (more than its cores:
                                waits yield the core) */
} gs_shm_cfg;
/* Take the place c says (after create or attach). From here on a reason
 * this member tells reaches every member waiting. */
void gs_shm_join(gs_shm *s, const gs_shm_cfg *c);
/* Every member has mapped the segment: the creator's descriptor goes (no
 * name of it outlives the job). */
void gs_shm_mapped(gs_shm *s);

/* One all-reduce: what it is, and what it cost this member. */
typedef struct gs_shm_run {
  gs_redop op;               /* sum, prod, min or max */
  int64_t step;              /* what messages name */
  int bucket;
  /* NULL, or called on this member's part of each round's sum (n
   * elements at part, in the element type) before the members copy the
   * round out, to change it in place (hier: the sum over the hosts); with
   * it every round takes two waits */
  int (*part)(void *ctx, void *part, size_t n, gs_err *e);
  void *ctx;
  /* added to: seconds summing; bytes this member copied in, and read of
   * the others' (as a socket algorithm would count them) */
  double reduce_s;
  uint64_t sent, recv;
} gs_shm_run;
/* dst = op over every member's src, n elements (src == dst allowed), in
 * rounds of a slot: copy in (without part: all but its own part), wait,
 * each member sums its part (or, up to whole bytes, every member all of
 * it: one wait less), [part], wait, copy out (without part: the others'
 * parts). Every member calls it with the same n and
 * op. A member that fails should gs_shm_tell its reason. */
int gs_shm_allreduce(gs_shm *s, gs_shm_run *run, const void *src, void *dst, size_t n,
                     gs_err *e);

/* This member stops: its reason, for every waiting member (once; after
 * join; s may be NULL). */
void gs_shm_tell(gs_shm *s, const char *msg);
/* Make a wait of another thread's end soon with GS_EINTR. */
void gs_shm_interrupt(gs_shm *s);
void gs_shm_close(gs_shm *s);

/* The segment's header as the creator writes it (members, slots of chunk
 * bytes, one wait up to whole bytes) and as a member checks it once it has
 * mapped bytes of it, against the nonce it was told and its members (every
 * size computation overflow-checked), keeping the chunk and whole it read.
 * gs_shm_header_bytes: the header's size, to which 2 x members x chunk
 * bytes of slots are added. */
void gs_shm_header_write(void *seg, int members, uint64_t nonce, uint64_t chunk, uint64_t whole);
bool gs_shm_header_check(const void *seg, size_t bytes, int members, uint64_t nonce,
                         size_t *chunk, size_t *whole);
size_t gs_shm_header_bytes(int members);

#endif
