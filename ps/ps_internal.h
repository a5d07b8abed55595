/* ps_internal.h: internal to ps/: the worker side's state, shared by
 * backend.c (joining a job: prepare, bootstrap, open), client.c (the
 * steps: pushes, parameters back, close) and shard.c (K servers, one
 * ps_state and ps_sync per server on every rank). */
#ifndef GS_PS_INTERNAL_H
#define GS_PS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "proto/wire.h"
#include "ps/ps.h"
#include "ps/server.h"

typedef struct ps_shards ps_shards;

typedef struct ps_state {
  int rank;
  bool dedicated;
  ps_shards *shards;      /* --ps-servers K > 1: the state is shard.c's, nothing else is set */
  bool shard;             /* one of shard.c's: a worker of one of its servers */
  char who[48];           /* the server in messages: "the ps server", "ps server 2 of 3" */
  char where[48];         /* where it runs: "rank 0", "rank 0's dedicated process" */
  void *zctx;
  gs_zap *zap;            /* admits the job's peers to the in-process server */
  /* the in-process server (rank 0's; a shard's in the rank that hosts it) */
  gs_ps_server *server;
  pthread_t thread;
  bool thread_started;
  int server_rc;
  gs_err server_err;
  char tcp_ep[GS_ENDPOINT_MAX], inproc_ep[GS_ENDPOINT_MAX];
  /* rank 0, dedicated server */
  int child, child_fd;
} ps_state;

typedef struct ps_sync {
  gs_sync base;
  gs_sync_config c;
  gs_bucket *buckets;
  ps_state *st;
  void *sock;
  char server_ep[GS_ENDPOINT_MAX];
  const char *who, *where;  /* st's, for messages */
  bool inproc;      /* beside its server thread (rank 0, or a shard's host) */
  bool has_server;  /* rank 0 with a dedicated server */
  bool cpu, failed, in_step;
  size_t wsize;
  int wait_ms;      /* the server's timeout plus a quarter: its named error arrives first */
  void *stage_host, *stage_dev;
  uint64_t stage_host_bytes, stage_dev_bytes;
  atomic_int inflight;
  gs_dial *dial;    /* the DEALER's connection, watched for drops (not inproc) */
  int64_t resent_step; /* the step whose pushes went again (-1: none) */

  int64_t step;
  uint8_t *ready, *pushed, *got;
  int ngot, nskipped;
  double blocked_s, last_progress;
  uint64_t sent, recv;
  float scale;
  double srv_reduce, srv_update;
  uint64_t srv_sent, srv_recv;
} ps_sync;

/* backend.c */
/* One server's worker state for rank c->rank (host_server: that rank's
 * context carries the in-process server's connections). */
int gs_ps_prepare_one(const gs_sync_config *c, bool host_server, ps_state **out, gs_err *e);
/* Create and bind the in-process server (its kernels a clone of c->k);
 * it serves once gs_ps_serve started its thread. */
int gs_ps_host_server(ps_state *st, const gs_sync_config *c, gs_err *e);
int gs_ps_serve(ps_state *st, gs_err *e);
int gs_ps_open_one(ps_state *st, const gs_sync_config *c, ps_sync **out, gs_err *e);
void gs_ps_discard_one(ps_state *st);

/* client.c */
extern const gs_sync_ops gs_ps_step_ops;
/* end_step in two halves, so that a sharded step pushes to every server
 * before it waits for any: push what is left, then wait for the
 * parameters (t0: when the step's wait began, for wait_s). */
int gs_ps_push_rest(ps_sync *s, gs_err *e);
int gs_ps_finish(ps_sync *s, double t0, gs_sync_stats *st, gs_err *e);
/* Apply whatever the server sent, without waiting (a sharded step polls
 * every server's socket at once and drains the ones that are ready). */
int gs_ps_drain(ps_sync *s, gs_err *e);

/* shard.c */
extern const gs_sync_ops gs_ps_shard_ops;
int gs_ps_shards_prepare(const gs_sync_config *c, ps_state **out, char endpoint[GS_ENDPOINT_MAX],
                         gs_err *e);
int gs_ps_shards_open(ps_state *st, const gs_sync_config *c, gs_sync **out, gs_err *e);
void gs_ps_shards_discard(ps_state *st);
void gs_ps_shards_memory(const gs_sync *s, uint64_t *device_bytes, uint64_t *host_bytes);
/* the kernels' sticky error, with the rank, the step and what was done */
int gs_ps_kcheck(ps_sync *s, const char *what, gs_err *e);

#endif
