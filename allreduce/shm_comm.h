/* shm_comm.h: internal to allreduce/: what the shared-memory algorithms
 * (shm.c, hier.c) add over the communicator to the shm part below the
 * backends (shm/shm.h): whether this ring may use shared memory, a
 * segment sized for its largest collective, a member's place from the
 * ring's options, the vote over the sockets that every rank mapped the
 * segment, and the labels of the ring's collective for an all-reduce. */
#ifndef GS_ALLREDUCE_SHM_COMM_H
#define GS_ALLREDUCE_SHM_COMM_H

#include "allreduce/comm.h"
#include "shm/shm.h"

/* Whether this ring may use shared memory at all (CPU kernels, a 32- or
 * 64-bit wire, shared memory not turned off: GS_SHM=0). */
bool gs_comm_shm_may_use(const gs_comm *r);
/* The group's first rank: a segment for N members, for the ring's largest
 * collective (shm.h gs_shm_create). */
int gs_comm_shm_create(gs_comm *r, int N, size_t chunk, size_t whole, gs_shm **out,
                       char spec[GS_SHM_SPEC_MAX], gs_err *e);
/* Take place me of N (ranks: member -> ring rank, NULL: the same; kept)
 * with the ring's timeout, kernels and wire dtype. */
void gs_comm_shm_join(gs_comm *r, gs_shm *s, int me, int N, const int *ranks);
/* Whether every rank of the ring mapped *m (ok; why not in why): the
 * minimum of the votes, over the sockets, as the shared memory is not yet
 * trusted. All did: the creator's descriptor goes (no name of it outlives
 * the job). Any did not: *m is closed and NULL, and a rank that asked for
 * algo by name (want) fails saying whose memory it was and to use --algo
 * fallback; one that did not goes on over the sockets. */
int gs_comm_shm_settle(gs_comm *r, gs_shm **m, bool ok, const char *why, bool want,
                       const char *algo, const char *whose, const char *fallback, gs_err *e);
/* An all-reduce of the ring's current collective (its op, step, bucket). */
static inline gs_shm_run gs_comm_shm_run(const gs_comm *r) {
  return (gs_shm_run){.op = r->cur_op, .step = r->cur_step, .bucket = r->cur_bucket};
}

#endif
