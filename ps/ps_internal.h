/* ps_internal.h: internal to ps/: the worker side's state, shared by
 * backend.c (joining a job: prepare, bootstrap, open) and client.c (the
 * steps: pushes, parameters back, close). */
#ifndef GS_PS_INTERNAL_H
#define GS_PS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "proto/wire.h"
#include "ps/ps.h"
#include "ps/server.h"

typedef struct ps_state {
  int rank;
  bool dedicated;
  void *zctx;
  gs_zap *zap;            /* admits the job's peers to the in-process server */
  /* rank 0, in-process server */
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
  bool inproc;      /* rank 0 beside its server thread */
  bool has_server;  /* rank 0 with a dedicated server */
  bool cpu, failed, in_step;
  size_t wsize;
  int wait_ms;      /* the server's timeout plus a quarter: its named error arrives first */
  void *stage_host, *stage_dev;
  uint64_t stage_host_bytes, stage_dev_bytes;
  atomic_int inflight;
  void *mon;        /* the DEALER's connection events (not inproc) */
  bool dropped;     /* the connection dropped; push again once it is back */
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

/* client.c */
/* Watch the DEALER's connection for drops (tcp and ipc; not inproc). */
void gs_ps_watch(ps_sync *s);
extern const gs_sync_ops gs_ps_step_ops;
/* the kernels' sticky error, with the rank, the step and what was done */
int gs_ps_kcheck(ps_sync *s, const char *what, gs_err *e);

#endif
