/* server.h: the ps server loop, internal to ps/ (see ps.h for the design).
 *
 * The server knows no model: Init from rank 0 tells it the sizes, buckets,
 * SGD settings, wire dtype and loss scale, and carries the initial
 * parameters. It is created in two steps so that bind errors surface in
 * bootstrap() and the loop can run in another thread or process:
 * gs_ps_server_create binds, gs_ps_server_run serves until every rank said
 * goodbye (GS_OK) or the job failed (the error names the rank, the step and
 * the bucket; every registered worker has been sent an Error). */
#ifndef GS_PS_SERVER_H
#define GS_PS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "worker/sync.h"

typedef struct gs_ps_server_opts {
  void *zctx;           /* ZeroMQ context for the ROUTER (rank 0's, for inproc) */
  const char *host;     /* address to bind tcp://host:* on */
  bool inproc;          /* also bind inproc:// for the worker beside it (thread mode) */
  int inproc_rank;      /* with inproc: that worker's rank (0 but for a shard's server) */
  uint64_t job;         /* token every message must carry (0: not checked) */
  bool learn_job;       /* job 0: take the token of rank 0's Init (a server started
                           before its job had one: --ps-server-hosts) */
  gs_cred cred;         /* who may connect (the owner runs zctx's gs_zap) */
  int timeout_ms;
  size_t max_elems;     /* largest tensor a message may carry (the model's size) */
  gs_kernels *k;        /* the server's own table; the server destroys it */
  gs_span_fn span;      /* track 1; NULL in a dedicated process */
  void *span_ctx;
  gs_applied_hook applied; /* stale models: each update, and the end (sync.h) */
  int sockbuf;          /* the kernel's buffers of its connections (0: GS_SOCK_BULK's) */
} gs_ps_server_opts;

typedef struct gs_ps_server gs_ps_server;

/* Bind tcp://host:* (and inproc:// when o->inproc) and write the addresses
 * (inproc may be NULL). On failure o->k is destroyed too. */
int gs_ps_server_create(const gs_ps_server_opts *o, gs_ps_server **out,
                        char tcp_ep[GS_ENDPOINT_MAX], char inproc_ep[GS_ENDPOINT_MAX], gs_err *e);
int gs_ps_server_run(gs_ps_server *s, gs_err *e);
/* The job token, for a server created before its rank knew it (a shard's
 * server is bound in prepare(); the token comes with the rendezvous). Call
 * before gs_ps_server_run. */
void gs_ps_server_set_job(gs_ps_server *s, uint64_t job);

/* ZeroMQ I/O threads for a server's context: one per remote worker up to
 * 4 and the core count, so that pushes from several workers are received
 * (copied out of the kernel) in parallel. */
int gs_ps_io_threads(int world);
/* Make a running loop fail within a fraction of a second (another thread). */
void gs_ps_server_stop(gs_ps_server *s);
/* Bytes the server holds (see gs_ps_memory); safe from another thread. */
void gs_ps_server_memory(gs_ps_server *s, uint64_t *device_bytes, uint64_t *host_bytes);
void gs_ps_server_destroy(gs_ps_server *s);

/* The dedicated server process (cfg.dedicated), forked by rank 0's
 * prepare(). The child closes every descriptor it inherited but the pipe,
 * asks for SIGKILL when its parent thread ends (PR_SET_PDEATHSIG), creates
 * its own ZeroMQ context and CPU kernels, binds, and writes lines on the
 * pipe: "E <endpoint>" once bound, then "D" (every rank said goodbye) or
 * "F <message>" (failed) when it exits. */
int gs_ps_spawn(const gs_sync_config *c, int *pid, int *fd, gs_err *e);
/* Read the endpoint line within timeout_ms. */
int gs_ps_spawn_endpoint(int pid, int fd, int timeout_ms, char ep[GS_ENDPOINT_MAX], gs_err *e);
/* Wait up to timeout_ms for the child to exit (then SIGKILL it) and turn
 * its status and last line into an error. Closes fd. */
int gs_ps_spawn_reap(int pid, int fd, int timeout_ms, gs_err *e);

#endif
